"""Shapley aggregation of a coalition game: exact, restricted to causal orders, and sampled.

``phi_i = sum_{S not containing i} |S|! (n - |S| - 1)! / n! [v(S + i) - v(S)]``, the average
marginal contribution of ``i`` over all orders of the players. Exact values evaluate ``v`` on all
``2^n`` coalitions (one ``lax.map`` over bit masks) and apply a fixed ``(n, 2^n)`` weight matrix;
asymmetric values average only over orders consistent with a DAG (ancestors first; Frye et al.
2020); the sampling estimator averages marginal contributions along random orders and reports the
standard error of that mean.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from jaxpapers.cfshap._scm import ancestors, topological_order
from jaxpapers.core.checks import check_int, check_key

MAX_EXACT_FEATURES = 20
MAX_ORDER_FEATURES = 9


class ShapleyEstimate(NamedTuple):
    """Sampled Shapley values.

    Attributes:
      values: ``(n,)`` mean marginal contributions over the sampled orders.
      stderr: ``(n,)`` standard error of each mean.
      num_permutations: number of sampled orders.
    """

    values: Float[Array, " n"]
    stderr: Float[Array, " n"]
    num_permutations: int


def _masks(n: int) -> np.ndarray:
    k = np.arange(2**n)[:, None]
    return ((k >> np.arange(n)[None]) & 1).astype(bool)


def coalition_masks(n: int) -> Bool[Array, "2^n n"]:
    """All ``2^n`` coalitions as boolean masks; row ``k`` has bit ``i`` of ``k`` in column ``i``."""
    check_int("n", n, minimum=1)
    return jnp.asarray(_masks(n))


def shapley_weight_matrix(n: int) -> np.ndarray:
    """``W`` with ``phi = W v`` for ``v`` listed over :func:`coalition_masks`."""
    if not 1 <= n <= MAX_EXACT_FEATURES:
        raise ValueError(f"num_features={n}; exact Shapley values need 1..{MAX_EXACT_FEATURES}")
    masks = _masks(n)
    size = masks.sum(1)
    w = np.array(
        [math.factorial(s) * math.factorial(n - s - 1) for s in range(n)]
    ) / math.factorial(n)
    plus = w[np.clip(size - 1, 0, n - 1)]
    minus = w[np.clip(size, 0, n - 1)]
    return np.where(masks.T, plus[None, :], -minus[None, :])


def order_weight_matrix(orders: np.ndarray) -> np.ndarray:
    """``W`` with ``phi = W v`` for Shapley values averaged over the given player orders."""
    orders = np.asarray(orders)
    num, n = orders.shape
    W = np.zeros((n, 2**n))
    for order in orders:
        before = 0
        for i in order:
            W[i, before | (1 << i)] += 1.0 / num
            W[i, before] -= 1.0 / num
            before |= 1 << i
    return W


def causal_orders(parents: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """All orders of the variables in which every variable comes after its ancestors."""
    topological_order(parents)  # a ValueError naming parents on unknown nodes, loops, cycles
    n = len(parents)
    if n > MAX_ORDER_FEATURES:
        raise ValueError(f"{n} variables; enumerating causal orders needs <= {MAX_ORDER_FEATURES}")
    anc = [ancestors(parents, i) for i in range(n)]
    keep = [
        p
        for p in itertools.permutations(range(n))
        if all(anc[i] <= set(p[:k]) for k, i in enumerate(p))
    ]
    return np.array(keep, dtype=np.int64)


def _check_game(game) -> int:
    n = int(game.num_features)
    if not 1 <= n <= MAX_EXACT_FEATURES:
        raise ValueError(f"game.num_features={n}; expected 1..{MAX_EXACT_FEATURES}")
    return n


@eqx.filter_jit
def _all_values(game, batch: int) -> Array:
    n = game.num_features
    return jax.lax.map(game, coalition_masks(n), batch_size=min(batch, 2**n))


@eqx.filter_jit
def _weighted_values(game, weights: Array, batch: int) -> Array:
    return weights @ _all_values(game, batch).astype(weights.dtype)


def game_values(game, *, batch_size: int = 4096) -> Float[Array, " 2^n"]:
    """``v`` on every coalition, in the order of :func:`coalition_masks`."""
    _check_game(game)
    check_int("batch_size", batch_size, minimum=1)
    return _all_values(game, batch_size)


def shapley_values(game, *, batch_size: int = 4096) -> Float[Array, " n"]:
    """Exact Shapley values of ``game`` by enumerating all ``2^n`` coalitions.

    Args:
      game: a callable ``mask (n,) -> scalar`` with a ``num_features`` attribute (a pytree such
        as :class:`CounterfactualGame`, so one compilation serves all games of one shape).
      batch_size: coalitions evaluated per vectorised batch.

    Returns:
      ``(n,)`` Shapley values; they sum to ``v(all) - v(empty)``.

    Examples:
      >>> import jax.numpy as jnp
      >>> class Glove:
      ...     num_features = 3
      ...     def __call__(self, m):  # left glove 0, right gloves 1 and 2
      ...         return (m[0] & (m[1] | m[2])).astype(float)
      >>> [round(float(p), 4) for p in shapley_values(Glove())]
      [0.6667, 0.1667, 0.1667]
    """
    n = _check_game(game)
    check_int("batch_size", batch_size, minimum=1)
    W = jnp.asarray(shapley_weight_matrix(n), jnp.result_type(float))
    return _weighted_values(game, W, batch_size)


def asymmetric_shapley_values(game, parents: tuple[tuple[int, ...], ...]) -> Float[Array, " n"]:
    """Asymmetric Shapley values: the average over causal orders only (Frye et al. 2020)."""
    n = _check_game(game)
    if len(parents) != n:
        raise ValueError(f"parents has {len(parents)} entries; expected {n}")
    W = jnp.asarray(
        order_weight_matrix(causal_orders(tuple(map(tuple, parents)))), jnp.result_type(float)
    )
    return _weighted_values(game, W, 4096)


@eqx.filter_jit
def _sample_contributions(game, key: Array, num_permutations: int) -> Array:
    n = game.num_features
    keys = jax.random.split(key, num_permutations)
    orders = jax.vmap(lambda k: jax.random.permutation(k, n))(keys)
    # prefix masks: position of each player in the order, mask_k = players placed before step k
    pos = jax.vmap(lambda o: jnp.zeros(n, jnp.int32).at[o].set(jnp.arange(n)))(orders)
    steps = jnp.arange(n + 1)
    masks = pos[:, None, :] < steps[None, :, None]
    v = jax.vmap(jax.vmap(game))(masks)
    gains = v[:, 1:] - v[:, :-1]
    # gains[p, k] belongs to player orders[p, k]
    return jax.vmap(lambda g, o: jnp.zeros(n, g.dtype).at[o].set(g))(gains, orders)


def shapley_sampling(game, *, key: Array, num_permutations: int) -> ShapleyEstimate:
    """Monte Carlo Shapley values from ``num_permutations`` uniformly random player orders.

    Each order gives one marginal contribution per player, so every player's estimate averages
    ``num_permutations`` terms, and the values of one order sum exactly to
    ``v(all) - v(empty)`` (efficiency holds for every sample). The standard error is the
    seed-to-seed standard deviation of the terms over ``sqrt(num_permutations)``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> class Additive:
      ...     num_features = 4
      ...     def __call__(self, m):
      ...         return m.astype(float) @ jnp.arange(4.0)
      >>> est = shapley_sampling(Additive(), key=jax.random.key(0), num_permutations=8)
      >>> est.values.tolist(), float(est.stderr.max())
      ([0.0, 1.0, 2.0, 3.0], 0.0)
    """
    _check_game(game)
    check_key("key", key)
    check_int("num_permutations", num_permutations, minimum=2)
    c = _sample_contributions(game, key, int(num_permutations))
    stderr = c.std(0, ddof=1) / np.sqrt(num_permutations)
    return ShapleyEstimate(c.mean(0), stderr, int(num_permutations))
