"""Zeroth-order fine-tuning loops (one ``lax.scan``) and the scale reparametrisation they use.

QZO-style and LQZO fine-tune multiplicative scale corrections ``delta`` (initialised at 0):
``scales = scales_0 * (1 + delta)``. The perturbation ``eps Z`` then acts in relative units, so
one ``eps`` and one learning rate fit every layer and bit width (an INT2 scale is ~5x an INT4
one); both methods get the same reparametrisation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxpapers.lqzo._qlinear import QuantScale
from jaxpapers.lqzo._zo import zo_state

PyTree = Any


class FinetuneResult(NamedTuple):
    """Output of :func:`zo_finetune`: final parameters and the ``[steps]`` loss curve."""

    params: PyTree
    losses: np.ndarray


def zo_finetune(
    loss_fn: Callable[[PyTree, PyTree, PyTree], jax.Array],
    params: PyTree,
    aux: PyTree,
    make_optimizer: Callable[[jax.Array], optax.GradientTransformationExtraArgs],
    data: PyTree,
    *,
    steps: int,
    batch_size: int,
    seeds: Sequence[int],
    learning_rates: Sequence[float] | None = None,
    compiler_options: dict[str, Any] | None = None,
) -> FinetuneResult:
    """Run ``steps`` ZO steps for every seed, seeds vectorised with ``jax.vmap`` (one compile).

    Seed ``s`` uses perturbation key ``jax.random.key(s)`` and draws its batches (with
    replacement) from ``jax.random.key(10_000 + s)``.

    Args:
      loss_fn: ``loss_fn(params, aux, batch) -> []``.
      params: initial tuned parameters (shared by all seeds).
      aux: frozen arrays the loss needs (passed as arguments, not baked in as constants).
      make_optimizer: ``key -> optimizer`` built on :func:`zo_gradient` (e.g. ``partial(lqzo,
        1e-3)`` called with ``key=``).
      data: pytree of ``[N, ...]`` arrays.
      steps, batch_size: budget per seed.
      seeds: integer seeds.
      learning_rates: optional grid; then ``make_optimizer(key, learning_rate)`` is called and
        every (seed, learning rate) pair runs, vectorised (a learning-rate sweep in one compile).
      compiler_options: XLA options for this program (the smoke tests pass
        ``{"xla_backend_optimization_level": 0}``: compile time dominates tiny runs).

    Returns:
      :class:`FinetuneResult` with parameters stacked ``[S, ...]`` and losses ``[S, steps]``
      (``[S, H, ...]`` and ``[S, H, steps]`` with ``H`` learning rates).
    """
    if steps < 1 or batch_size < 1:
        raise ValueError(f"steps={steps}, batch_size={batch_size}; expected positive integers")
    if len(seeds) < 1:
        raise ValueError("seeds is empty; expected at least one seed")
    n = jax.tree.leaves(data)[0].shape[0]
    n_seeds = len(seeds)
    lrs = None
    if learning_rates is not None:
        if len(learning_rates) < 1:
            raise ValueError("learning_rates is empty; expected at least one value")
        lrs = list(learning_rates)
    n_lr = 1 if lrs is None else len(lrs)
    # Members (seed, learning rate), seed-major. The scan runs over steps with every member
    # vectorised inside its body: one batching pass over the step, instead of vmap around
    # the scan, whose batching rule re-traces the whole body until the carry's batched axes
    # settle (measured: tracing took as long as XLA's compile of the P02 rows).
    member_seeds = jnp.asarray([s for s in seeds for _ in range(n_lr)], jnp.uint32)
    member_lrs = jnp.asarray([lr for _ in seeds for lr in (lrs or [0.0])], jnp.float32)

    def optimizer_of(seed, lr):
        key = jax.random.key(seed)
        return make_optimizer(key) if lrs is None else make_optimizer(key, lr)

    def run(seeds_arr, lrs_arr, params, aux, data):
        idx = jax.vmap(
            lambda s: jax.random.randint(
                jax.random.key(s + jnp.uint32(10_000)), (steps, batch_size), 0, n
            )
        )(seeds_arr)
        states = jax.vmap(lambda s, lr: optimizer_of(s, lr).init(params))(seeds_arr, lrs_arr)
        stacked = jax.tree.map(lambda x: jnp.broadcast_to(x, (len(seeds_arr), *x.shape)), params)

        def member_step(seed, lr, p, st, ix):
            batch = jax.tree.map(lambda a: a[ix], data)
            updates, st = optimizer_of(seed, lr).update(
                None, st, p, value_fn=lambda q: loss_fn(q, aux, batch)
            )
            return optax.apply_updates(p, updates), st, zo_state(st).loss

        def body(carry, ix):
            p, st = carry
            p, st, loss = jax.vmap(member_step)(seeds_arr, lrs_arr, p, st, ix)
            return (p, st), loss

        (p, _), losses = jax.lax.scan(body, (stacked, states), jnp.swapaxes(idx, 0, 1))
        return p, jnp.swapaxes(losses, 0, 1)

    args = (member_seeds, member_lrs, params, aux, data)
    p, losses = jax.jit(run).lower(*args).compile(compiler_options)(*args)
    if lrs is not None:
        p = jax.tree.map(lambda x: x.reshape(n_seeds, n_lr, *x.shape[1:]), p)
        losses = losses.reshape(n_seeds, n_lr, steps)
    return FinetuneResult(p, np.asarray(losses, np.float64))


def split_scales(module: nnx.Module) -> tuple[Any, PyTree, PyTree]:
    """``(graphdef, scales_0, rest)`` of a quantized module (:class:`QuantScale` leaves first)."""
    return nnx.split(module, QuantScale, ...)


def merge_scaled(graphdef: Any, scales0: PyTree, delta: PyTree, rest: PyTree) -> nnx.Module:
    """Rebuild the module with ``scales = scales_0 * (1 + delta)``.

    ``delta`` leaves may be lazy :class:`~jaxpapers.lqzo.PerturbedScales` (fused ZO passes): the
    product keeps them lazy, so the quantized layers receive the perturbation as seeds.
    """
    scales = jax.tree.map(lambda s, d: (1.0 + d) * s, scales0, delta)
    return nnx.merge(graphdef, scales, rest)


def zeros_like_tree(tree: PyTree) -> PyTree:
    """``delta = 0`` with the structure of ``tree``."""
    return jax.tree.map(jnp.zeros_like, tree)


__all__ = ["FinetuneResult", "merge_scaled", "split_scales", "zeros_like_tree", "zo_finetune"]
