"""Test problems and approximate models: random MDPs, slippery gridworld, forest management.

Every model is ``P[S, A, S']`` (:class:`jaxpapers.core.mdp.TabularMDP`). Random rows are drawn
action-major (an ``[A, S]`` batch of rows, then transposed), so that a key gives the same MDP,
model and samples as it did when the package stored ``P[A, S, S']``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_int, check_key, check_range
from jaxpapers.core.mdp import TabularMDP, check_transitions


def _action_major(P: jax.Array) -> jax.Array:
    """``[S, A, S']`` <-> ``[A, S, S']`` (an exact transpose of the two leading axes)."""
    return jnp.swapaxes(P, 0, 1)


def random_mdp(
    num_states: int,
    num_actions: int,
    gamma: float,
    *,
    key: jax.Array,
    concentration: float = 1.0,
) -> TabularMDP:
    """Random MDP: Dirichlet(``concentration``) transition rows, rewards U[0, 1].

    Examples:
        >>> import jax
        >>> from jaxpapers.ievi import random_mdp
        >>> random_mdp(5, 2, 0.9, key=jax.random.key(0)).P.shape
        (5, 2, 5)
    """
    check_key("key", key)
    check_int("num_states", num_states, minimum=1)
    check_int("num_actions", num_actions, minimum=1)
    check_range("gamma", gamma, 0.0, 1.0, high_open=True)
    check_range("concentration", concentration, 0.0, low_open=True)
    kp, kr = jax.random.split(key)
    alpha = jnp.full((num_states,), concentration)
    P = jax.random.dirichlet(kp, alpha, (num_actions, num_states))
    P = _action_major(P / P.sum(-1, keepdims=True))
    R = jax.random.uniform(kr, (num_states, num_actions), dtype=P.dtype)
    return TabularMDP(P, R, gamma=jnp.asarray(gamma, P.dtype))


def _default_float(dtype):
    """float64 when x64 is enabled (value iteration to 1e-6 needs it), else float32."""
    if dtype is not None:
        return dtype
    return jnp.float64 if jax.config.jax_enable_x64 else jnp.float32


def gridworld(size: int, gamma: float, *, slip: float = 0.1, dtype=None) -> TabularMDP:
    """``size x size`` grid, actions up/down/left/right, goal (reward 1) in the far corner.

    With probability ``slip`` the move goes in a uniformly random direction instead; moves into
    a wall stay put. The goal is absorbing and pays 1 per step, so values approach 1/(1-gamma)
    there and propagate slowly across the grid: a stiff problem for VI.
    """
    check_int("size", size, minimum=2)
    check_range("gamma", gamma, 0.0, 1.0, high_open=True)
    check_range("slip", slip, 0.0, 1.0)
    n = size * size
    moves = [(-1, 0), (1, 0), (0, -1), (0, 1)]
    det = np.zeros((4, n, n))
    for s in range(n):
        r, c = divmod(s, size)
        for a, (dr, dc) in enumerate(moves):
            rr, cc = min(max(r + dr, 0), size - 1), min(max(c + dc, 0), size - 1)
            det[a, s, rr * size + cc] = 1.0
    goal = n - 1
    det[:, goal, :] = 0.0
    det[:, goal, goal] = 1.0
    P = (1.0 - slip) * det + slip * det.mean(axis=0, keepdims=True)
    R = np.zeros((n, 4))
    R[goal, :] = 1.0
    dtype = _default_float(dtype)
    P = jnp.asarray(P.transpose(1, 0, 2), dtype)
    return TabularMDP(P, jnp.asarray(R, dtype), gamma=jnp.asarray(gamma, dtype))


def forest_management(
    num_states: int,
    gamma: float,
    *,
    r_wait: float = 4.0,
    r_cut: float = 2.0,
    fire: float = 0.1,
    dtype=None,
) -> TabularMDP:
    """The forest-management MDP (as in pymdptoolbox's ``forest``): actions wait (0) and cut (1).

    The forest ages by one state per step unless a fire (probability ``fire``) resets it to 0;
    cutting resets it to 0 and pays by age (1 in states 1.., ``r_cut`` in the oldest); waiting
    pays ``r_wait`` in the oldest state.
    """
    check_int("num_states", num_states, minimum=2)
    check_range("gamma", gamma, 0.0, 1.0, high_open=True)
    check_range("fire", fire, 0.0, 1.0)
    check_range("r_wait", r_wait)
    check_range("r_cut", r_cut)
    S = num_states
    P = np.zeros((2, S, S))
    P[0, :, 0] = fire
    for s in range(S):
        P[0, s, min(s + 1, S - 1)] += 1.0 - fire
    P[1, :, 0] = 1.0
    R = np.zeros((S, 2))
    R[S - 1, 0] = r_wait
    R[1:, 1] = 1.0
    R[S - 1, 1] = r_cut
    dtype = _default_float(dtype)
    P = jnp.asarray(P.transpose(1, 0, 2), dtype)
    return TabularMDP(P, jnp.asarray(R, dtype), gamma=jnp.asarray(gamma, dtype))


def perturbed_model(
    P: Float[Array, "S A S"], l1_error: float | Float[Array, ""], *, key: jax.Array
) -> Float[Array, "S A S"]:
    r"""An approximate model whose every row is exactly ``l1_error`` away from ``P`` in L1.

    Each row is mixed with a random Dirichlet(1) row ``Q``: :math:`\hat P = (1-\epsilon) P +
    \epsilon Q` with :math:`\epsilon = \delta / \|P - Q\|_1`, which keeps rows stochastic and puts
    the row-wise error at :math:`\delta` (capped where even :math:`\epsilon = 1` falls short).
    """
    check_key("key", key)
    check_transitions(P, "P")
    check_range("l1_error", l1_error, 0.0, 2.0)
    A, S = P.shape[1], P.shape[0]
    Q = _action_major(jax.random.dirichlet(key, jnp.ones(P.shape[-1], P.dtype), (A, S)))
    dist = jnp.sum(jnp.abs(P - Q), axis=-1, keepdims=True)
    eps = jnp.clip(l1_error / jnp.maximum(dist, 1e-30), 0.0, 1.0)
    P_hat = (1.0 - eps) * P + eps * Q
    return P_hat / P_hat.sum(-1, keepdims=True)


def sample_counts(P: Float[Array, "S A S"], n: int, *, key: jax.Array) -> Float[Array, "S A S"]:
    """Counts of ``n`` next-state samples drawn from every row of ``P`` (a generative model).

    Examples:
        >>> import jax
        >>> from jaxpapers.ievi import gridworld, sample_counts
        >>> sample_counts(gridworld(2, 0.9).P, 5, key=jax.random.key(0)).sum(-1).tolist()[0]
        [5.0, 5.0, 5.0, 5.0]
    """
    check_key("key", key)
    check_transitions(P, "P")
    check_int("n", n, minimum=1)
    logits = jnp.log(jnp.maximum(_action_major(P), 1e-300))
    draws = jax.random.categorical(key, logits, axis=-1, shape=(n, *logits.shape[:-1]))
    return _action_major(jax.nn.one_hot(draws, P.shape[-1], dtype=P.dtype).sum(0))


def estimated_model(P: Float[Array, "S A S"], n: int, *, key: jax.Array) -> Float[Array, "S A S"]:
    """Maximum-likelihood model from ``n`` samples per state-action pair of ``P``."""
    check_key("key", key)
    check_int("n", n, minimum=1)
    counts = sample_counts(P, n, key=key)
    return counts / n


def row_l1_error(P: Float[Array, "S A S"], P_hat: Float[Array, "S A S"]) -> Float[Array, ""]:
    """Largest row-wise L1 distance ``max_{s,a} ||P[s,a] - P_hat[s,a]||_1``."""
    check_transitions(P, "P")
    check_transitions(P_hat, "P_hat")
    if np.shape(P) != np.shape(P_hat):
        raise ValueError(f"P_hat must have the shape of P {np.shape(P)}; got {np.shape(P_hat)}")
    return jnp.max(jnp.sum(jnp.abs(P - P_hat), axis=-1))
