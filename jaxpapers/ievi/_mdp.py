"""Bellman operators (policy evaluation and control) of discounted tabular MDPs.

The MDP type is :class:`jaxpapers.core.mdp.TabularMDP`: ``P[S, A, S']``, ``R[S, A]``, a discount
``gamma < 1`` and ``horizon=None``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_int, is_concrete
from jaxpapers.core.mdp import ROW_SUM_TOL, TabularMDP
from jaxpapers.core.mdp import check_mdp as core_check_mdp


def check_mdp(mdp: TabularMDP, name: str = "mdp", *, values: bool = True) -> None:
    """Raise ``ValueError`` unless ``mdp`` is a discounted, time-homogeneous, single-agent
    :class:`~jaxpapers.core.mdp.TabularMDP` (``P[S, A, S]``, ``R[S, A]``, ``horizon=None``,
    ``gamma`` in ``[0, 1)``); ``values=False`` checks shapes only."""
    core_check_mdp(mdp, name, values=values, discounted=True, time_homogeneous=True, players=False)


def check_policy(mdp: TabularMDP, policy) -> None:
    """A policy is ``[S, A]`` action probabilities (a deterministic one is one-hot)."""
    expected = (mdp.num_states, mdp.num_actions)
    if np.shape(policy) != expected:
        raise ValueError(
            f"policy must have shape [S, A] = {list(expected)}; got {np.shape(policy)}"
        )
    if is_concrete(policy):
        err = np.abs(np.asarray(policy, dtype=np.float64).sum(-1) - 1.0).max()
        if err > ROW_SUM_TOL:
            raise ValueError(f"rows of policy must sum to 1; the worst row is off by {err:.3g}")


def check_values(mdp: TabularMDP, V, name: str = "V") -> None:
    if np.shape(V) != (mdp.num_states,):
        raise ValueError(f"{name} must have shape [S] = [{mdp.num_states}]; got {np.shape(V)}")


def q_values(mdp: TabularMDP, V: Float[Array, " S"]) -> Float[Array, "S A"]:
    r"""One Bellman backup of every state-action pair: :math:`Q = R + \gamma P V`.

    This is one *query* of the model: it touches every transition of ``P``.
    """
    check_mdp(mdp, values=False)
    check_values(mdp, V, "V")
    # P[S, A, S'] is [S * A, S'] in memory: XLA:CPU bitcasts it (no copy) and emits one tiled
    # gemv split into row blocks on its intra-op thread pool; the [S, A] result needs no
    # transpose.
    return mdp.R + mdp.gamma * jnp.einsum("sat,t->sa", mdp.P, V)


def bellman(
    mdp: TabularMDP, V: Float[Array, " S"], policy: Float[Array, "S A"] | None = None
) -> Float[Array, " S"]:
    r"""Bellman operator: :math:`T V = \max_a Q` (control), :math:`\sum_a \pi_a Q` (evaluation)."""
    if policy is not None and np.shape(policy) != (mdp.num_states, mdp.num_actions):
        check_policy(mdp, policy)
    q = q_values(mdp, V)
    return jnp.max(q, axis=-1) if policy is None else jnp.sum(policy * q, axis=-1)


def greedy_policy(q: Float[Array, "S A"]) -> Float[Array, "S A"]:
    """One-hot arg-max policy of ``q`` (ties broken towards the lowest action)."""
    if np.ndim(q) != 2:
        raise ValueError(f"q must have shape [S, A]; got {np.shape(q)}")
    return jax.nn.one_hot(jnp.argmax(q, axis=-1), q.shape[-1], dtype=q.dtype)


def policy_matrices(
    mdp: TabularMDP, policy: Float[Array, "S A"]
) -> tuple[Float[Array, "S S"], Float[Array, " S"]]:
    """``(P_pi, R_pi)`` of a (stochastic) policy."""
    P_pi = jnp.einsum("sa,sat->st", policy, mdp.P)
    R_pi = jnp.sum(policy * mdp.R, axis=-1)
    return P_pi, R_pi


def evaluate_policy(mdp: TabularMDP, policy: Float[Array, "S A"]) -> Float[Array, " S"]:
    r"""Exact policy evaluation by a direct linear solve: :math:`(I - \gamma P_\pi) V = R_\pi`."""
    check_mdp(mdp)
    check_policy(mdp, policy)
    P_pi, R_pi = policy_matrices(mdp, policy)
    eye = jnp.eye(mdp.num_states, dtype=P_pi.dtype)
    return jnp.linalg.solve(eye - mdp.gamma * P_pi, R_pi)


class PolicyIterationResult(NamedTuple):
    """Output of :func:`policy_iteration`: values, greedy policy and number of improvements."""

    V: Float[Array, " S"]
    policy: Float[Array, "S A"]
    iterations: Int[Array, ""]


def policy_iteration(
    mdp: TabularMDP,
    policy: Float[Array, "S A"] | None = None,
    *,
    max_iterations: int = 100,
) -> PolicyIterationResult:
    """Howard's policy iteration with exact (linear-solve) evaluation: the optimal values ``V*``.

    Terminates when the greedy policy stops changing (finitely many steps for a finite MDP);
    ``max_iterations`` bounds the loop under ``jit``.
    """
    check_mdp(mdp)
    check_int("max_iterations", max_iterations, minimum=1)
    if policy is not None:
        check_policy(mdp, policy)
    if policy is None:
        policy = greedy_policy(mdp.R)

    def cond(state):
        _, _, it, changed = state
        return changed & (it < max_iterations)

    def body(state):
        pol, _, it, _ = state
        V = evaluate_policy(mdp, pol)
        q = q_values(mdp, V)
        # Keep the current action where it is still (numerically) greedy: avoids cycling on ties.
        current = jnp.sum(pol * q, axis=-1)
        best = jnp.max(q, axis=-1)
        tol = 1e-12 * (1.0 + jnp.abs(best))
        keep = (best - current <= tol)[:, None]
        new = jnp.where(keep, pol, greedy_policy(q))
        changed = jnp.any(new != pol)
        return new, V, it + 1, changed

    V0 = jnp.zeros(mdp.num_states, dtype=mdp.R.dtype)
    pol, V, it, _ = jax.lax.while_loop(cond, body, (policy, V0, jnp.int32(0), jnp.bool_(True)))
    return PolicyIterationResult(V, pol, it)


def optimal_values(mdp: TabularMDP) -> Float[Array, " S"]:
    """``V*`` of ``mdp`` (policy iteration)."""
    return policy_iteration(mdp).V
