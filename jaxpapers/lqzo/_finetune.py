"""Zeroth-order fine-tuning loops (one ``lax.scan``) and the scale reparametrisation they use.

QZO-style and LQZO fine-tune multiplicative scale corrections ``delta`` (initialised at 0):
``scales = scales_0 * (1 + delta)``. The perturbation ``eps Z`` then acts in relative units, so
one ``eps`` and one learning rate fit every layer and bit width (an INT2 scale is ~5x an INT4
one); both methods get the same reparametrisation.

A ZO step is not a gradient step (the optimiser takes the loss function, not a gradient), so
:func:`zo_finetune` is its own scan rather than :func:`jaxpapers.core.fit.fit`; it freezes like
``fit`` does (:func:`~jaxpapers.core.fit.all_finite`, :func:`~jaxpapers.core.fit.keep_where`): a
member whose loss or update is not finite keeps its last finite parameters and optimiser state
for the remaining steps, and its ``finite`` flag is ``False``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxpapers.core.fit import all_finite, keep_where
from jaxpapers.lqzo._qlinear import QuantScale
from jaxpapers.lqzo._zo import zo_state

PyTree = Any


class FinetuneResult(NamedTuple):
    """Output of :func:`zo_finetune`, every field stacked over the members (see its Returns).

    Attributes:
      params: the final parameters (the last finite ones of a member that froze).
      opt_state: the optimiser states after the last applied step.
      losses: the loss curves (``[..., steps]``, float64): the mean of the two perturbed losses
        of every step.
      finite: ``[...]`` bool, whether every step of a member was applied.
    """

    params: PyTree
    opt_state: PyTree
    losses: np.ndarray
    finite: np.ndarray


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
    stacked_aux: bool = False,
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
      stacked_aux: ``aux`` leaves carry a leading axis of ``A`` models of one structure (e.g.
        the INT4 and INT2 versions of a network whose codes have one layout): every (model,
        seed[, learning rate]) member runs in the same program, model-major, and each model's
        members equal a run with that model's ``aux`` alone (same batches and directions).

    Returns:
      :class:`FinetuneResult` with parameters (and optimiser states) stacked ``[S, ...]``,
      losses ``[S, steps]`` and ``finite`` ``[S]`` (``[S, H, ...]``, ``[S, H, steps]`` and
      ``[S, H]`` with ``H`` learning rates; with ``stacked_aux`` a leading ``A`` axis in front).
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
    n_aux = 1
    if stacked_aux:
        sizes = {jnp.shape(x)[0] if jnp.ndim(x) else None for x in jax.tree.leaves(aux)}
        if len(sizes) != 1 or None in sizes or 0 in sizes:
            raise ValueError(
                f"stacked_aux=True but aux leaves have leading sizes {sorted(map(str, sizes))}; "
                "expected one shared leading axis of A >= 1 models"
            )
        n_aux = sizes.pop()
    # Members (model, seed, learning rate), in that order. The scan runs over steps with every
    # member vectorised inside its body: one batching pass over the step, instead of vmap around
    # the scan, whose batching rule re-traces the whole body until the carry's batched axes
    # settle (measured: tracing took as long as XLA's compile of the P02 rows).
    members = [(a, s, lr) for a in range(n_aux) for s in seeds for lr in (lrs or [0.0])]
    member_seeds = jnp.asarray([s for _, s, _ in members], jnp.uint32)
    member_lrs = jnp.asarray([lr for _, _, lr in members], jnp.float32)
    member_aux = jnp.asarray([a for a, _, _ in members], jnp.int32)

    def optimizer_of(seed, lr):
        key = jax.random.key(seed)
        return make_optimizer(key) if lrs is None else make_optimizer(key, lr)

    def run(seeds_arr, lrs_arr, aux_arr, params, aux, data):
        idx = jax.vmap(
            lambda s: jax.random.randint(
                jax.random.key(s + jnp.uint32(10_000)), (steps, batch_size), 0, n
            )
        )(seeds_arr)
        states = jax.vmap(lambda s, lr: optimizer_of(s, lr).init(params))(seeds_arr, lrs_arr)
        stacked = jax.tree.map(lambda x: jnp.broadcast_to(x, (len(seeds_arr), *x.shape)), params)

        def member_step(seed, lr, p, st, ok, ix, aux):
            batch = jax.tree.map(lambda a: a[ix], data)
            updates, new_st = optimizer_of(seed, lr).update(
                None, st, p, value_fn=lambda q: loss_fn(q, aux, batch)
            )
            loss = zo_state(new_st).loss
            ok = ok & jnp.isfinite(loss) & all_finite(updates)
            p, st = keep_where(ok, (optax.apply_updates(p, updates), new_st), (p, st))
            return p, st, ok, loss

        if stacked_aux:
            # Each member's own model, gathered once outside the scan.
            step = jax.vmap(member_step)
            member_aux_tree = jax.tree.map(lambda x: x[aux_arr], aux)
        else:
            step = jax.vmap(member_step, in_axes=(0, 0, 0, 0, 0, 0, None))
            member_aux_tree = aux

        def body(carry, ix):
            p, st, ok = carry
            p, st, ok, loss = step(seeds_arr, lrs_arr, p, st, ok, ix, member_aux_tree)
            return (p, st, ok), loss

        ok = jnp.ones(len(seeds_arr), bool)
        (p, st, ok), losses = jax.lax.scan(body, (stacked, states, ok), jnp.swapaxes(idx, 0, 1))
        return p, st, ok, jnp.swapaxes(losses, 0, 1)

    p, st, ok, losses = jax.jit(run)(member_seeds, member_lrs, member_aux, params, aux, data)
    lead = ((n_aux,) if stacked_aux else ()) + (n_seeds,) + ((n_lr,) if lrs is not None else ())
    p, st = jax.tree.map(lambda x: x.reshape(*lead, *x.shape[1:]), (p, st))
    losses = np.asarray(losses, np.float64).reshape(*lead, steps)
    return FinetuneResult(p, st, losses, np.asarray(ok).reshape(lead))


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


__all__ = ["FinetuneResult", "merge_scaled", "split_scales", "zo_finetune"]
