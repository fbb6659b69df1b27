"""Tabular episodic multi-player general-sum Markov games, and classic matrix games as H = 1."""

from __future__ import annotations

import math
from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from jaxpapers.core.checks import check_int, check_key, check_positive, check_range
from jaxpapers.core.mdp import TabularMDP


def joint_actions(num_actions: tuple[int, ...]) -> np.ndarray:
    """``[J, m]`` table of the players' actions in each joint action (row-major order).

    Examples:
        >>> joint_actions((2, 3))[4].tolist()
        [1, 1]
    """
    if not num_actions or not all(isinstance(a, int | np.integer) and a >= 1 for a in num_actions):
        raise ValueError(f"num_actions={num_actions!r}; expected positive integer action counts")
    return np.stack(np.unravel_index(np.arange(math.prod(num_actions)), num_actions), axis=-1)


class MarkovGame(eqx.Module):
    """An episodic general-sum Markov game with ``m >= 2`` players and joint actions flattened.

    The game is a :class:`jaxpapers.core.mdp.TabularMDP` (``mdp``) whose action axis is the
    players' joint action and whose rewards carry a players axis, together with the players'
    action counts ``num_actions`` (static), which say how the joint axis unflattens: joint action
    ``j`` is the row-major index of ``(a_1, ..., a_m)``, ``a_i < A_i`` (:func:`joint_actions`
    gives the table). Steps are 0-indexed, ``h = 0 .. H - 1``; ``gamma = 1``.

    Args:
      P: ``[H, S, J, S]``, ``P[h, s, j, s'] = Pr(s' | s, j)`` at step ``h``.
      R: ``[H, S, J, m]`` expected rewards in ``[0, 1]`` of every player.
      initial: ``[S]`` initial state distribution.
      num_actions: ``(A_1, ..., A_m)``, with ``J = A_1 ... A_m``.

    Raises:
      ValueError: naming the argument (``P``, ``R``, ``initial``, ``num_actions``), its shape and
        what was expected.

    Examples:
        >>> g = chicken()
        >>> g.num_players, g.horizon, g.num_states, g.num_joint
        (2, 1, 1, 4)
        >>> g.mdp.P.shape, g.mdp.R.shape
        ((1, 1, 4, 1), (1, 1, 4, 2))
    """

    mdp: TabularMDP
    num_actions: tuple[int, ...] = eqx.field(static=True)

    def __init__(self, P, R, initial, num_actions):
        num_actions = tuple(num_actions)
        if len(num_actions) < 2:
            raise ValueError(
                f"num_actions={num_actions} has {len(num_actions)} player(s); a Markov game "
                "needs at least 2"
            )
        if not all(isinstance(a, int | np.integer) and a >= 1 for a in num_actions):
            raise ValueError(f"num_actions={num_actions}; expected every A_i an integer >= 1")
        num_actions = tuple(int(a) for a in num_actions)
        J, m = math.prod(num_actions), len(num_actions)
        shape, r_shape = tuple(np.shape(P)), tuple(np.shape(R))
        if len(shape) != 4 or shape[2] != J or shape[1] != shape[3]:
            raise ValueError(
                f"P has shape {shape}; expected [H, S, J={J}, S] for num_actions={num_actions}"
            )
        if r_shape != (*shape[:3], m):
            raise ValueError(f"R has shape {r_shape}; expected {(*shape[:3], m)}")
        check_range("R", R, 0.0, 1.0)
        self.mdp = TabularMDP(P, R, initial=initial, horizon=shape[0])
        self.num_actions = num_actions

    @property
    def P(self) -> Float[Array, "H S J S"]:
        """``mdp.P``: ``[H, S, J, S]`` transition probabilities."""
        return self.mdp.P

    @property
    def R(self) -> Float[Array, "H S J m"]:
        """``mdp.R``: ``[H, S, J, m]`` expected rewards of the players."""
        return self.mdp.R

    @property
    def initial(self) -> Float[Array, " S"]:
        """``mdp.initial``: ``[S]`` initial state distribution."""
        return self.mdp.initial

    @property
    def num_players(self) -> int:
        return len(self.num_actions)

    @property
    def horizon(self) -> int:
        return self.mdp.horizon

    @property
    def num_states(self) -> int:
        return self.mdp.num_states

    @property
    def num_joint(self) -> int:
        return self.mdp.num_actions


@partial(jax.jit, static_argnames=("num_states", "horizon", "num_actions"))
def _random_arrays(key, num_states, horizon, num_actions, concentration):
    J, m = math.prod(num_actions), len(num_actions)
    kp, kr = jax.random.split(key)
    alpha = jnp.full((num_states,), concentration)
    P = jax.random.dirichlet(kp, alpha, (horizon, num_states, J))
    P = P / P.sum(-1, keepdims=True)
    R = jax.random.uniform(kr, (horizon, num_states, J, m))
    return P, R


def random_game(
    num_states: int,
    horizon: int,
    num_actions: tuple[int, ...],
    *,
    key: PRNGKeyArray,
    concentration: float = 1.0,
) -> MarkovGame:
    """A random game: Dirichlet(``concentration``) transition rows, U[0, 1] rewards, uniform start.

    Examples:
        >>> import jax
        >>> g = random_game(3, 2, (2, 2, 2), key=jax.random.key(0))
        >>> g.P.shape, g.R.shape
        ((2, 3, 8, 3), (2, 3, 8, 3))
    """
    check_key("key", key)
    check_positive("num_states", num_states)
    check_positive("horizon", horizon)
    check_positive("concentration", concentration)
    num_actions = tuple(int(a) for a in num_actions)
    if len(num_actions) < 2:
        raise ValueError(f"num_actions={num_actions}; a Markov game needs at least 2 players")
    P, R = _random_arrays(key, int(num_states), int(horizon), num_actions, concentration)
    rho = jnp.full((num_states,), 1.0 / num_states, P.dtype)
    return MarkovGame(P, R, rho, num_actions)


def matrix_game(payoffs) -> MarkovGame:
    """An H = S = 1 game from normal-form ``payoffs`` ``[A_1, ..., A_m, m]`` (already in [0, 1])."""
    payoffs = jnp.asarray(payoffs)
    num_actions = tuple(payoffs.shape[:-1])
    if payoffs.ndim < 3 or payoffs.shape[-1] != len(num_actions):
        raise ValueError(
            f"payoffs has shape {payoffs.shape}; expected [A_1, ..., A_m, m] with m >= 2"
        )
    J = math.prod(num_actions)
    R = payoffs.reshape(1, 1, J, len(num_actions))
    P = jnp.ones((1, 1, J, 1), payoffs.dtype)
    return MarkovGame(P, R, jnp.ones((1,), payoffs.dtype), num_actions)


#: Chicken in its usual integer payoffs (actions: 0 = dare, 1 = chicken).
CHICKEN_PAYOFFS = np.array([[[0.0, 0.0], [7.0, 2.0]], [[2.0, 7.0], [6.0, 6.0]]])

#: Shapley's 3 x 3 game: every fictitious-play path cycles; the unique Nash equilibrium is uniform.
SHAPLEY_PAYOFFS = np.stack(
    [
        np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]),
        np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]),
    ],
    axis=-1,
)


def chicken() -> MarkovGame:
    """Chicken with payoffs divided by 7 (so rewards lie in [0, 1])."""
    return matrix_game(CHICKEN_PAYOFFS / 7.0)


def shapley_game() -> MarkovGame:
    """Shapley's game (0/1 payoffs)."""
    return matrix_game(SHAPLEY_PAYOFFS)


def congestion_payoffs(num_players: int, num_roads: int = 2) -> np.ndarray:
    """Payoffs ``[R, ..., R, m]`` of a congestion game: a player on a road shared by ``n``
    players (itself included) gets ``1 - (n - 1) / m``, minus ``0.1 r / R`` on road ``r``."""
    check_int("num_roads", num_roads, minimum=1)
    m = int(num_players)
    if m < 2:
        raise ValueError(f"num_players={m}; a congestion game needs at least 2 players")
    acts = joint_actions((num_roads,) * m)
    load = (acts[:, :, None] == acts[:, None, :]).sum(-1)
    pay = 1.0 - (load - 1) / m - 0.1 * acts / num_roads
    return pay.reshape((num_roads,) * m + (m,))


def congestion_game(num_players: int, num_roads: int = 2) -> MarkovGame:
    """The congestion game of :func:`congestion_payoffs` as an H = 1 Markov game."""
    return matrix_game(congestion_payoffs(num_players, num_roads))


def pad_horizon(game: MarkovGame, horizon: int) -> MarkovGame:
    """Append reward-free steps (next state drawn from ``initial``) up to ``horizon`` steps.

    Gaps and values are unchanged; learners called with ``horizon=game.horizon`` of the original
    game then share one compiled function across horizons.

    Examples:
        >>> import jax
        >>> g = random_game(2, 2, (2, 2), key=jax.random.key(0))
        >>> pad_horizon(g, 5).P.shape
        (5, 2, 4, 2)
    """
    extra = int(horizon) - game.horizon
    if extra < 0:
        raise ValueError(f"horizon={horizon}; expected >= game.horizon={game.horizon}")
    S, J, m = game.num_states, game.num_joint, game.num_players
    P = jnp.broadcast_to(game.initial, (extra, S, J, S)).astype(game.P.dtype)
    R = jnp.zeros((extra, S, J, m), game.R.dtype)
    return MarkovGame(
        jnp.concatenate([game.P, P]), jnp.concatenate([game.R, R]), game.initial, game.num_actions
    )
