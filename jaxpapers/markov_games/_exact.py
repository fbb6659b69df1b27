"""Exact evaluation: values of correlated policies, best responses by DP, and CCE gaps.

A Markov correlated policy ``pi[h, s, j]`` draws the joint action ``j`` at step ``h`` in state
``s``. Player ``i``'s deviation keeps the others' part of the correlated draw,
``pi_{-i}(a_{-i} | s) = sum_{a_i} pi(a_i, a_{-i} | s)``, and picks its own action; against Markov
opponents the best deviation is Markov, so backward induction is exact:

.. math:: V^\\dagger_{h,i}(s) = \\max_{b} \\sum_{a_{-i}} \\pi_{-i}(a_{-i}|s)
   \\big[r_{h,i}(s, b, a_{-i}) + P_h V^\\dagger_{h+1,i}(s, b, a_{-i})\\big].

The CCE gap is :math:`\\max_i \\rho^\\top (V^\\dagger_{0,i} - V^\\pi_{0,i})`.
:func:`mixture_cce_gap` handles a non-Markov correlated policy: a mixture of Markov correlated
policies whose index is drawn once and hidden; the deviator's best response then depends on its
posterior over the index given the history, and is computed on the history tree.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_int, check_shape, is_concrete
from jaxpapers.markov_games._game import MarkovGame, joint_actions


class GapResult(NamedTuple):
    """CCE gap of a policy.

    Attributes:
      gap: ``max_i (best_response_i - value_i)`` at the initial distribution.
      values: ``[m]`` on-policy values of the players.
      best_responses: ``[m]`` best-deviation values of the players.
    """

    gap: Float[Array, ""]
    values: Float[Array, " m"]
    best_responses: Float[Array, " m"]


def check_policy(game: MarkovGame, policy, name: str = "policy") -> None:
    """Raise ``ValueError`` unless ``policy`` is ``[H, S, J]`` of joint-action distributions."""
    check_shape(name, policy, (game.horizon, game.num_states, game.num_joint))
    if is_concrete(policy):
        arr = np.asarray(policy, dtype=np.float64)
        if arr.min() < -1e-6 or np.abs(arr.sum(-1) - 1.0).max() > 1e-4:
            raise ValueError(
                f"{name} of shape {arr.shape} is not a distribution over joint actions"
            )


def policy_values(game: MarkovGame, policy: Float[Array, "H S J"]) -> Float[Array, "H S m"]:
    """``V^pi_{h,i}(s)`` of a Markov correlated policy by backward induction."""
    check_shape("policy", policy, (game.horizon, game.num_states, game.num_joint))

    def step(v_next, hs):
        P, R, pi = hs
        q = R + jnp.einsum("sjt,ti->sji", P, v_next)
        v = jnp.einsum("sj,sji->si", pi, q)
        return v, v

    v0 = jnp.zeros((game.num_states, game.num_players), game.R.dtype)
    _, vs = jax.lax.scan(step, v0, (game.P, game.R, policy), reverse=True)
    return vs


def _deviation_values(game: MarkovGame, others, q_i, i: int):
    """``[S, A_i]`` values of each own action of player ``i`` against ``others`` (``[S, J]``)."""
    shape = (game.num_states, *game.num_actions)
    pi = others.reshape(shape)
    pi_minus = pi.sum(axis=1 + i, keepdims=True)
    q = q_i.reshape(shape)
    axes = tuple(1 + k for k in range(game.num_players) if k != i)
    return jnp.sum(pi_minus * q, axis=axes)


def best_response_values(game: MarkovGame, policy: Float[Array, "H S J"]) -> Float[Array, "H S m"]:
    """``V^dagger_{h,i}(s)``: each player's best deviation against the others' correlated part."""
    check_shape("policy", policy, (game.horizon, game.num_states, game.num_joint))

    def step(v_next, hs):
        P, R, pi = hs
        out = []
        for i in range(game.num_players):
            q_i = R[..., i] + jnp.einsum("sjt,t->sj", P, v_next[:, i])
            out.append(_deviation_values(game, pi, q_i, i).max(-1))
        v = jnp.stack(out, axis=-1)
        return v, v

    v0 = jnp.zeros((game.num_states, game.num_players), game.R.dtype)
    _, vs = jax.lax.scan(step, v0, (game.P, game.R, policy), reverse=True)
    return vs


@jax.jit
def _gap(game, policy):
    v = game.initial @ policy_values(game, policy)[0]
    br = game.initial @ best_response_values(game, policy)[0]
    return GapResult(jnp.max(br - v), v, br)


def cce_gap(game: MarkovGame, policy: Float[Array, "H S J"]) -> GapResult:
    """CCE gap of a Markov correlated policy (exact; zero exactly at a CCE).

    Args:
      game: the game.
      policy: ``[H, S, J]`` joint-action distributions.

    Returns:
      :class:`GapResult` with the gap and the ``[m]`` values and best-deviation values.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxpapers.markov_games import chicken
        >>> g = chicken()
        >>> round(float(cce_gap(g, jnp.array([[[0.0, 0.25, 0.25, 0.5]]])).gap), 6)
        0.0
        >>> round(float(cce_gap(g, jnp.array([[[0.0, 0.0, 0.0, 1.0]]])).gap) * 7, 6)
        1.0
    """
    check_policy(game, policy)
    return _gap(game, policy)


def stage_gap(policy: Float[Array, " J"], q: Float[Array, "J m"], num_actions) -> Array:
    """Exact CCE gap of one stage game: ``max_i (max_b E_{a_-i ~ pi_-i} q_i(b, a_-i) - E_pi q_i)``.

    ``policy`` is a joint-action distribution ``[J]`` and ``q`` the players' payoffs ``[J, m]``
    (row-major joint actions of ``num_actions``); jittable.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxpapers.markov_games import CHICKEN_PAYOFFS
        >>> q = jnp.asarray(CHICKEN_PAYOFFS, jnp.float32).reshape(4, 2)
        >>> round(float(stage_gap(jnp.array([0.0, 0.25, 0.25, 0.5]), q, (2, 2))), 6)
        0.0
    """
    num_actions = tuple(check_int("num_actions", a, minimum=1) for a in num_actions)
    J = int(np.prod(num_actions))
    check_shape("policy", policy, (J,))
    check_shape("q", q, (J, len(num_actions)))
    shape = (1, *num_actions)
    gaps = []
    for i in range(len(num_actions)):
        dev = _deviation_values_flat(policy, q[:, i], shape, i)
        gaps.append(dev.max() - jnp.dot(policy, q[:, i]))
    return jnp.max(jnp.stack(gaps))


def _deviation_values_flat(policy, q_i, shape, i):
    pi = policy.reshape(shape)
    pi_minus = pi.sum(axis=1 + i, keepdims=True)
    axes = tuple(1 + k for k in range(len(shape) - 1) if k != i)
    return jnp.sum(pi_minus * q_i.reshape(shape), axis=axes)[0]


def product_policy(game: MarkovGame, marginals) -> Float[Array, "H S J"]:
    """Joint policy ``prod_i p_i(a_i | s)`` from a list of per-player ``[H, S, A_i]`` marginals."""
    marginals = list(marginals)
    if len(marginals) != game.num_players:
        raise ValueError(
            f"marginals has {len(marginals)} entries; expected one per player ({game.num_players})"
        )
    for i, (p, a) in enumerate(zip(marginals, game.num_actions, strict=True)):
        check_shape(f"marginals[{i}]", p, (game.horizon, game.num_states, a))
    table = joint_actions(game.num_actions)
    out = 1.0
    for i, p in enumerate(marginals):
        out = out * jnp.asarray(p)[..., table[:, i]]
    return out


def mixture_cce_gap(game: MarkovGame, policies, weights) -> float:
    """CCE gap of a non-Markov correlated policy: a hidden mixture of Markov correlated policies.

    The index ``z ~ weights`` is drawn once before the episode and never revealed; every step
    plays ``policies[z]``. The deviator sees the history of states and joint actions, keeps a
    posterior over ``z`` and best-responds on the history tree (float64 NumPy; the tree has
    ``(S J)^H`` leaves, so this is for small games and tests).

    Args:
      game: the game.
      policies: ``[Z, H, S, J]`` Markov correlated policies.
      weights: ``[Z]`` mixture weights.

    Returns:
      The gap as a Python float.

    Examples:
        >>> import numpy as np
        >>> from jaxpapers.markov_games import chicken
        >>> g = chicken()
        >>> pol = np.array([[[[0.0, 0.0, 0.0, 1.0]]], [[[0.0, 0.5, 0.5, 0.0]]]])
        >>> round(mixture_cce_gap(g, pol, np.array([0.5, 0.5])), 6)
        0.0
    """
    pols = np.asarray(policies, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    check_shape("policies", pols, (None, game.horizon, game.num_states, game.num_joint))
    check_shape("weights", w, (pols.shape[0],))
    if w.min() < 0 or abs(w.sum() - 1.0) > 1e-6:
        raise ValueError(f"weights {w} must be a distribution over the {pols.shape[0]} policies")
    for z in range(pols.shape[0]):
        check_policy(game, pols[z], f"policies[{z}]")
    P = np.asarray(game.P, np.float64)
    R = np.asarray(game.R, np.float64)
    rho = np.asarray(game.initial, np.float64)
    A = game.num_actions
    on_policy = np.zeros(game.num_players)
    for z in range(pols.shape[0]):
        on_policy += w[z] * (rho @ np.asarray(policy_values(game, jnp.asarray(pols[z])))[0])
    gaps = []
    for i in range(game.num_players):
        shape = (pols.shape[0], game.horizon, game.num_states, *A)
        minus = pols.reshape(shape).sum(axis=3 + i, keepdims=True)  # [Z, H, S, ..1.., ...]
        minus = np.broadcast_to(minus, shape).reshape(pols.shape)  # pi_{-i}(a_{-i}) per j
        own = joint_actions(A)[:, i]

        def value(h, s, post, i=i, minus=minus, own=own):
            if h == game.horizon:
                return 0.0
            # mix[j] = P(others play a_{-i}(j) | history), constant over the own coordinate
            like = minus[:, h, s, :]  # [Z, J]
            mix = post @ like
            best = -np.inf
            for b in range(A[i]):
                total = 0.0
                for j in np.nonzero((own == b) & (mix > 0))[0]:
                    new_post = post * like[:, j]
                    new_post = new_post / new_post.sum()
                    cont = sum(
                        P[h, s, j, t] * value(h + 1, t, new_post)
                        for t in range(game.num_states)
                        if P[h, s, j, t] > 0
                    )
                    total += mix[j] * (R[h, s, j, i] + cont)
                best = max(best, total)
            return best

        br = sum(rho[s] * value(0, s, w) for s in range(game.num_states) if rho[s] > 0)
        gaps.append(br - on_policy[i])
    return float(max(gaps))
