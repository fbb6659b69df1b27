"""Tabular episodic multi-player general-sum Markov games, and classic matrix games as H = 1."""

from __future__ import annotations

import math
from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from jaxpapers.core.checks import check_int, check_key, check_positive, is_concrete

#: Rows of a transition kernel may miss 1 by rounding; accept this much (and this much below 0).
ROW_SUM_TOL = 1e-5


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

    Joint action ``j`` is the row-major index of ``(a_1, ..., a_m)``, ``a_i < A_i``
    (:func:`joint_actions` gives the table). Steps are 0-indexed, ``h = 0 .. H - 1``.

    Attributes:
      transitions: ``[H, S, J, S]``, ``transitions[h, s, j, s'] = Pr(s' | s, j)`` at step ``h``.
      rewards: ``[H, S, J, m]`` expected rewards in ``[0, 1]`` of every player.
      initial: ``[S]`` initial state distribution.
      num_actions: ``(A_1, ..., A_m)`` (static).

    Examples:
        >>> g = chicken()
        >>> g.num_players, g.horizon, g.num_states, g.num_joint
        (2, 1, 1, 4)
    """

    transitions: Float[Array, "H S J S"]
    rewards: Float[Array, "H S J m"]
    initial: Float[Array, " S"]
    num_actions: tuple[int, ...] = eqx.field(static=True)

    def __check_init__(self) -> None:
        m = len(self.num_actions)
        if m < 2:
            raise ValueError(
                f"num_actions={self.num_actions} has {m} player(s); a Markov game needs at least 2"
            )
        if any(int(a) < 1 for a in self.num_actions):
            raise ValueError(f"num_actions={self.num_actions}; expected every A_i >= 1")
        J = math.prod(self.num_actions)
        P, R, rho = self.transitions, self.rewards, self.initial
        if P.ndim != 4 or P.shape[2] != J or P.shape[1] != P.shape[3]:
            raise ValueError(
                f"transitions has shape {P.shape}; expected [H, S, J={J}, S] for "
                f"num_actions={self.num_actions}"
            )
        H, S = P.shape[0], P.shape[1]
        if R.shape != (H, S, J, m):
            raise ValueError(f"rewards has shape {R.shape}; expected {(H, S, J, m)}")
        if rho.shape != (S,):
            raise ValueError(f"initial has shape {rho.shape}; expected ({S},)")
        _check_distribution("transitions", P)
        _check_distribution("initial", rho)
        if is_concrete(R):
            r = np.asarray(R, dtype=np.float64)
            if not np.all(np.isfinite(r)) or r.min() < 0.0 or r.max() > 1.0:
                raise ValueError(
                    f"rewards of shape {r.shape} lie in [{np.nanmin(r):.4g}, {np.nanmax(r):.4g}]; "
                    "expected finite values in [0, 1]"
                )

    @property
    def num_players(self) -> int:
        return len(self.num_actions)

    @property
    def horizon(self) -> int:
        return self.transitions.shape[0]

    @property
    def num_states(self) -> int:
        return self.transitions.shape[1]

    @property
    def num_joint(self) -> int:
        return self.transitions.shape[2]


def _check_distribution(name: str, p) -> None:
    if not is_concrete(p):
        return
    arr = np.asarray(p, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or arr.min() < -ROW_SUM_TOL:
        raise ValueError(
            f"{name} of shape {arr.shape} holds negative or non-finite entries; expected "
            "probabilities"
        )
    err = float(np.abs(arr.sum(-1) - 1.0).max())
    if err > ROW_SUM_TOL:
        raise ValueError(
            f"{name} of shape {arr.shape} is not stochastic: a row sums to 1 {err:+.3g} off; "
            "expected every last-axis row to sum to 1"
        )


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
    key: PRNGKeyArray,
    num_states: int,
    horizon: int,
    num_actions: tuple[int, ...],
    *,
    concentration: float = 1.0,
) -> MarkovGame:
    """A random game: Dirichlet(``concentration``) transition rows, U[0, 1] rewards, uniform start.

    Examples:
        >>> import jax
        >>> g = random_game(jax.random.key(0), 3, 2, (2, 2, 2))
        >>> g.transitions.shape, g.rewards.shape
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
        >>> g = random_game(jax.random.key(0), 2, 2, (2, 2))
        >>> pad_horizon(g, 5).transitions.shape
        (5, 2, 4, 2)
    """
    extra = int(horizon) - game.horizon
    if extra < 0:
        raise ValueError(f"horizon={horizon}; expected >= game.horizon={game.horizon}")
    S, J, m = game.num_states, game.num_joint, game.num_players
    P = jnp.broadcast_to(game.initial, (extra, S, J, S)).astype(game.transitions.dtype)
    R = jnp.zeros((extra, S, J, m), game.rewards.dtype)
    return MarkovGame(
        jnp.concatenate([game.transitions, P]),
        jnp.concatenate([game.rewards, R]),
        game.initial,
        game.num_actions,
    )
