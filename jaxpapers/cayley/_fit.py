"""Training and evaluating a head on frozen per-layer features: full-batch AdamW in one scan."""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_dtype, check_ndim, check_positive, check_shape


class FitResult(NamedTuple):
    """A trained head, its training loss per step, and whether every step was finite.

    A non-finite loss stops learning: later steps keep the last finite weights.
    """

    head: Any
    losses: Float[Array, " steps"]
    finite: jax.Array


def _weighted_xent(head, x, y, w):
    logits = jax.vmap(head)(x)
    nll = optax.softmax_cross_entropy_with_integer_labels(logits, y)
    return jnp.sum(w * nll) / jnp.maximum(jnp.sum(w), 1.0)


@partial(eqx.filter_jit, donate="none")
def _fit(head, x, y, w, steps, learning_rate, weight_decay):
    params, static = eqx.partition(head, eqx.is_inexact_array)
    opt = optax.adamw(learning_rate, weight_decay=weight_decay)

    def loss_fn(p):
        return _weighted_xent(eqx.combine(p, static), x, y, w)

    def step(carry, _):
        p, state, ok = carry
        loss, g = jax.value_and_grad(loss_fn)(p)
        updates, new_state = opt.update(g, state, p)
        ok = ok & jnp.isfinite(loss)
        new_p = optax.apply_updates(p, updates)
        p, state = jax.tree.map(lambda a, b: jnp.where(ok, a, b), (new_p, new_state), (p, state))
        return (p, state, ok), loss

    (params, _, ok), losses = jax.lax.scan(
        step, (params, opt.init(params), jnp.array(True)), None, length=steps
    )
    return FitResult(eqx.combine(params, static), losses, ok)


def fit_head(
    head: Any,
    x: Float[Array, "batch layers features"],
    y: Int[Array, " batch"],
    *,
    weights: Float[Array, " batch"] | None = None,
    steps: int = 300,
    learning_rate: float = 3e-3,
    weight_decay: float = 1e-2,
) -> FitResult:
    """Fit ``head`` (an eqx module ``[L, D] -> [C]``) to labels ``y`` by full-batch AdamW.

    Args:
      head: :class:`~jaxpapers.cayley.LayerGNN`, a probe, or any eqx module of that signature.
      x: ``[B, L, D]`` per-layer features.
      y: ``[B]`` int labels.
      weights: ``[B]`` example weights (0 pads an example out; default all 1), so training sets
        of several sizes share one compiled program.
      steps: optimiser steps (static).
      learning_rate, weight_decay: AdamW settings.

    Returns:
      :class:`FitResult`. Works under ``jax.vmap`` over keys/heads and data.
    """
    check_shape("x", x, (None, None, None))
    check_shape("y", y, (x.shape[0],))
    if not jnp.issubdtype(y.dtype, jnp.integer):
        raise ValueError(f"y has dtype {y.dtype}; expected integer class labels")
    w = jnp.ones(y.shape, x.dtype) if weights is None else weights
    check_shape("weights", w, (x.shape[0],))
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"steps={steps!r}; expected an int >= 1")
    check_positive("learning_rate", learning_rate)
    return _fit(head, x, y, w, steps, learning_rate, weight_decay)


def _check_xy(x, y) -> None:
    """Static checks (shapes and dtypes, run at trace time) of features ``x`` and labels ``y``."""
    check_ndim("x", x, 3)
    check_dtype("x", x, "floating")
    check_shape("y", y, (x.shape[0],))
    check_dtype("y", y, "integer")


@eqx.filter_jit
def accuracy(head: Any, x: Float[Array, "batch layers features"], y: Int[Array, " batch"]):
    """Fraction of ``x`` whose argmax logit equals ``y``."""
    _check_xy(x, y)
    return jnp.mean(jnp.argmax(jax.vmap(head)(x), -1) == y)


def count_params(head: Any) -> int:
    """Number of trainable scalars in a head (its inexact array leaves)."""
    return int(sum(np.size(a) for a in jax.tree.leaves(eqx.filter(head, eqx.is_inexact_array))))


@eqx.filter_jit
def layer_attribution(
    head: Any, x: Float[Array, "batch layers features"], y: Int[Array, " batch"]
) -> Float[Array, " layers"]:
    """Accuracy lost when one layer's features are replaced by their mean over ``x`` (occlusion).

    Returns ``[L]``: ``acc(x) - acc(x with layer l set to its batch mean)``.
    """
    _check_xy(x, y)
    base = accuracy(head, x, y)
    mean = jnp.mean(x, axis=0)

    def drop(layer):
        occluded = x.at[:, layer].set(jnp.broadcast_to(mean[layer], x[:, layer].shape))
        return base - accuracy(head, occluded, y)

    return jax.lax.map(drop, jnp.arange(x.shape[1]))
