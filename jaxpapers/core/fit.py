"""One training loop for every paper: an optax optimiser in one jitted ``lax.scan`` that freezes
on a non-finite loss.

A training run of ``steps`` steps is one compiled program: at step ``t`` the loop takes the step's
batch (row ``t`` of ``batches``, or ``batch_fn(t, key_t)`` built inside the program), evaluates
``loss_fn(params, batch, key_t)`` and its gradient, and applies the optimiser's update. If the loss,
a gradient or an update is not finite, the step is not applied and the run *freezes*: parameters,
optimiser state and any carried ``state`` keep their last finite values for the remaining steps,
and ``FitResult.finite`` is ``False``. A diverged run therefore ends with usable parameters and says
so, instead of returning NaNs or stopping a batch of runs it is ``vmap``-ed with.

The loop is pure: ``jax.vmap(lambda k: fit(..., key=k))(keys)`` trains one model per seed in one
program (each seed freezes on its own), and it nests in an outer ``jit``. Trainable subsets are the
optimiser's business: ``optax.masked`` or ``optax.multi_transform`` with ``optax.set_to_zero`` for
the frozen part (frozen leaves then get zero updates and keep their values exactly).

Per-step keys: ``key`` is split into ``steps`` keys (``jax.random.split(key, steps)``), or a
``[steps]`` array of keys is used as given, so a caller can keep a schedule of its own.

Extra carried state (an EMA teacher, a replay buffer): pass ``state``; the loss then receives it
as a fourth argument, and ``after_step(state, params, t, key_t)`` returns the next state after each
applied update. With ``after_step_aux=True`` (and ``has_aux``) it also receives the step's aux,
``after_step(state, params, t, key_t, aux)``, so a state update that needs something the loss
computed (the teacher's logits of a self-distillation step) does not compute it again.

:func:`jaxpapers.core.train.train` is the host loop around the same step for runs that need
sharding over a device mesh, orbax checkpoints and resumption.

Examples:
    >>> import jax, jax.numpy as jnp, optax
    >>> from jaxpapers.core.fit import fit
    >>> xs = jnp.linspace(-1.0, 1.0, 32)
    >>> loss = lambda p, batch, key: jnp.mean((p["w"] * xs - 2.0 * xs) ** 2)
    >>> res = fit(loss, {"w": jnp.zeros(())}, optax.sgd(0.5), steps=200, key=jax.random.key(0))
    >>> round(float(res.params["w"]), 4), bool(res.finite)
    (2.0, True)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxpapers.core.checks import check_int, check_key

__all__ = ["FitResult", "all_finite", "fit", "keep_where"]

PyTree = Any


class FitResult(NamedTuple):
    """Output of :func:`fit`.

    Attributes:
      params: the trained parameters (the last finite ones if the run froze).
      opt_state: the optimiser state after the last applied step.
      losses: ``[steps]`` the loss of every step (after a freeze: the loss of the frozen
        parameters, which may be non-finite).
      finite: scalar bool, whether every step was applied (no non-finite loss, gradient or
        update).
      aux: the loss's auxiliary output of every step, stacked (``has_aux=True``), else ``None``.
      state: the carried state after the last applied step (when ``state`` was given).
    """

    params: PyTree
    opt_state: PyTree
    losses: jax.Array
    finite: jax.Array
    aux: PyTree = None
    state: PyTree = None


def all_finite(tree: PyTree) -> jax.Array:
    """Scalar bool: every inexact leaf of ``tree`` is finite (integer leaves count as finite)."""
    leaves = [
        jnp.all(jnp.isfinite(x))
        for x in jax.tree.leaves(tree)
        if jnp.issubdtype(jnp.result_type(x), jnp.inexact)
    ]
    return functools.reduce(jnp.logical_and, leaves, jnp.array(True))


def keep_where(ok: jax.Array, new: PyTree, old: PyTree) -> PyTree:
    """``new`` where the scalar ``ok`` holds, else ``old``, leaf by leaf (a frozen step)."""
    return jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, old)


def _step_keys(key: jax.Array, steps: int) -> jax.Array:
    shape = tuple(getattr(key, "shape", ()))
    typed = isinstance(key, jax.Array) and jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    if typed and shape == (steps,):
        return key
    if not typed and shape == (steps, 2) and getattr(key, "dtype", None) == jnp.uint32:
        return key
    if typed and shape not in ((), (steps,)):
        raise ValueError(f"key has shape {shape}; expected one key () or one per step ({steps},)")
    check_key("key", key)
    return jax.random.split(key, steps)


def _check_batches(batches: PyTree, steps: int) -> None:
    for leaf in jax.tree.leaves(batches):
        if jnp.ndim(leaf) == 0 or jnp.shape(leaf)[0] != steps:
            raise ValueError(
                f"batches leaves must have a leading axis of length steps={steps}; got a leaf of "
                f"shape {jnp.shape(leaf)}"
            )


class StepCarry(NamedTuple):
    """What one training step carries to the next: parameters, optimiser state, the extra
    carried state (``None`` without one) and whether every step so far was applied."""

    params: PyTree
    opt_state: PyTree
    state: PyTree
    ok: jax.Array


def _apply_step(
    loss_fn: Callable[..., Any],
    optimizer: optax.GradientTransformation,
    carry: StepCarry,
    t: jax.Array,
    key: jax.Array,
    batch: PyTree,
    *,
    has_aux: bool = False,
    after_step: Callable[..., PyTree] | None = None,
    after_step_aux: bool = False,
) -> tuple[StepCarry, jax.Array, PyTree]:
    """One optimiser step that freezes on a non-finite loss, gradient or update.

    The step of :func:`fit`'s scan and of :func:`jaxpapers.core.train.train`'s host loop:
    returns the next carry (the old one where the step is not applied, with ``ok`` False from
    then on), the step's loss and its auxiliary output (``None`` without ``has_aux``).
    """
    params, opt_state, state, ok = carry
    args = (batch, key) if state is None else (batch, key, state)
    grad_fn = jax.value_and_grad(lambda p: loss_fn(p, *args), has_aux=has_aux)
    value, grads = grad_fn(params)
    loss, aux = value if has_aux else (value, None)
    updates, new_opt = optimizer.update(grads, opt_state, params)
    new_params = optax.apply_updates(params, updates)
    extra = (aux,) if after_step_aux else ()
    new_state = after_step(state, new_params, t, key, *extra) if after_step is not None else state
    ok = ok & jnp.isfinite(loss) & all_finite(grads) & all_finite(updates)
    params, opt_state, state = keep_where(
        ok, (new_params, new_opt, new_state), (params, opt_state, state)
    )
    return StepCarry(params, opt_state, state, ok), loss, aux


@functools.partial(
    jax.jit, static_argnames=("loss_fn", "optimizer", "steps", "batch_fn", "has_aux", "after")
)
def _fit(loss_fn, params, optimizer, steps, keys, batches, batch_fn, has_aux, state, after):
    """``after``: ``(after_step, after_step_aux)``, the post-step hook and whether it gets aux."""
    after_step, after_step_aux = after

    def step(carry, inputs):
        t, k, batch = inputs
        if batch_fn is not None:
            batch = batch_fn(t, k)
        carry, loss, aux = _apply_step(
            loss_fn, optimizer, carry, t, k, batch, has_aux=has_aux, after_step=after_step,
            after_step_aux=after_step_aux,
        )  # fmt: skip
        return carry, (loss, aux)

    carry = StepCarry(params, optimizer.init(params), state, jnp.array(True))
    inputs = (jnp.arange(steps), keys, batches)
    (params, opt_state, state, ok), (losses, aux) = jax.lax.scan(step, carry, inputs)
    return FitResult(params, opt_state, losses, ok, aux, state)


def fit(
    loss_fn: Callable[..., Any],
    params: PyTree,
    optimizer: optax.GradientTransformation,
    *,
    steps: int,
    key: jax.Array,
    batches: PyTree = None,
    batch_fn: Callable[[jax.Array, jax.Array], PyTree] | None = None,
    has_aux: bool = False,
    state: PyTree = None,
    after_step: Callable[..., PyTree] | None = None,
    after_step_aux: bool = False,
) -> FitResult:
    """Train ``params`` for ``steps`` optimiser steps in one jitted ``lax.scan``.

    Args:
      loss_fn: ``loss_fn(params, batch, key)`` (``loss_fn(params, batch, key, state)`` when
        ``state`` is given) returning a scalar loss, or ``(loss, aux)`` with ``has_aux=True``.
        Passed as a static argument: reuse one function object to reuse the compiled program.
      params: the initial parameters (any pytree of float arrays, e.g. an ``nnx.State``).
      optimizer: an optax optimiser (with ``optax.masked``/``multi_transform`` for subsets).
      steps: number of steps (positive).
      key: one typed PRNG key, split into ``steps`` keys, or a ``[steps]`` array of keys.
      batches: the batch of every step, stacked on a leading ``[steps]`` axis; or ``None``.
      batch_fn: ``batch_fn(t, key_t)`` building step ``t``'s batch inside the program, instead
        of ``batches``; with neither, the loss receives ``batch=None``.
      has_aux: whether ``loss_fn`` returns ``(loss, aux)``; the aux of every step is stacked.
      state: extra carried state (frozen together with the parameters).
      after_step: ``after_step(state, new_params, t, key_t) -> state`` after each update.
      after_step_aux: pass the step's aux to ``after_step`` as a fifth argument (needs
        ``has_aux`` and ``after_step``).

    Returns:
      A :class:`FitResult`.

    Raises:
      ValueError: on a non-positive ``steps``, a key that is not a typed key (or not one per
        step), both ``batches`` and ``batch_fn``, batches without a ``[steps]`` leading axis,
        ``after_step`` without ``state``, or ``after_step_aux`` without ``has_aux`` and
        ``after_step``.
    """
    steps = check_int("steps", steps, minimum=1)
    keys = _step_keys(key, steps)
    if batches is not None and batch_fn is not None:
        raise ValueError("pass batches or batch_fn, not both")
    if batches is not None:
        _check_batches(batches, steps)
    if after_step is not None and state is None:
        raise ValueError("after_step updates the carried state; pass state= as well")
    if after_step_aux and (not has_aux or after_step is None):
        raise ValueError(
            f"after_step_aux=True passes the loss's aux to after_step; got has_aux={has_aux}, "
            f"after_step={after_step!r} (expected has_aux=True and an after_step)"
        )
    after = (after_step, bool(after_step_aux))
    return _fit(loss_fn, params, optimizer, steps, keys, batches, batch_fn, has_aux, state, after)
