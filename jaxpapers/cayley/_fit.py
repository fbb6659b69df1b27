"""Training and evaluating a head on frozen per-layer features: full-batch AdamW in one scan."""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_dtype, check_ndim, check_positive, check_shape
from jaxpapers.core.fit import fit
from jaxpapers.core.metrics import accuracy


class FitResult(NamedTuple):
    """A trained head, its training loss per step, and whether every step was finite.

    A non-finite loss, gradient or update stops learning: later steps keep the last finite
    weights (:func:`jaxpapers.core.fit.fit`).
    """

    head: nnx.Module
    losses: Float[Array, " steps"]
    finite: jax.Array


def _weighted_xent(head, x, y, w):
    logits = jax.vmap(head)(x)
    nll = optax.softmax_cross_entropy_with_integer_labels(logits, y)
    return jnp.sum(w * nll) / jnp.maximum(jnp.sum(w), 1.0)


@partial(jax.jit, static_argnames=("graphdef", "steps", "learning_rate", "weight_decay"))
def _fit(graphdef, params, rest, x, y, w, steps, learning_rate, weight_decay):
    def loss_fn(p, batch, key):
        del batch, key  # full batch, no randomness
        return _weighted_xent(nnx.merge(graphdef, p, rest), x, y, w)

    optimizer = optax.adamw(learning_rate, weight_decay=weight_decay)
    return fit(loss_fn, params, optimizer, steps=steps, key=jax.random.key(0))


def fit_head(
    head: nnx.Module,
    x: Float[Array, "batch layers features"],
    y: Int[Array, " batch"],
    *,
    weights: Float[Array, " batch"] | None = None,
    steps: int = 300,
    learning_rate: float = 3e-3,
    weight_decay: float = 1e-2,
) -> FitResult:
    """Fit ``head`` (an nnx module ``[L, D] -> [C]``) to labels ``y`` by full-batch AdamW.

    Only the head's ``nnx.Param`` variables are trained; the loss is the ``weights``-weighted
    mean cross-entropy, and the loop is :func:`jaxpapers.core.fit.fit`.

    Args:
      head: :class:`~jaxpapers.cayley.LayerGNN`, a probe, or any nnx module of that signature.
      x: ``[B, L, D]`` per-layer features.
      y: ``[B]`` int labels.
      weights: ``[B]`` example weights (0 pads an example out; default all 1), so training sets
        of several sizes share one compiled program.
      steps: optimiser steps (static).
      learning_rate, weight_decay: AdamW settings (static).

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
    graphdef, params, rest = nnx.split(head, nnx.Param, ...)
    res = _fit(graphdef, params, rest, x, y, w, steps, learning_rate, weight_decay)
    return FitResult(nnx.merge(graphdef, res.params, rest), res.losses, res.finite)


def _check_x(x) -> None:
    check_ndim("x", x, 3)
    check_dtype("x", x, "floating")


def _check_xy(x, y) -> None:
    """Shape and dtype checks of features ``x`` and labels ``y``."""
    _check_x(x)
    check_shape("y", y, (x.shape[0],))
    check_dtype("y", y, "integer")


@nnx.jit
def _apply(head, x):
    return jax.vmap(head)(x)


def apply_head(
    head: nnx.Module, x: Float[Array, "batch layers features"]
) -> Float[Array, "batch classes"]:
    """Logits ``[B, C]`` of ``head`` on every example of ``x [B, L, D]`` (one compiled program).

    Accuracy is :func:`jaxpapers.core.metrics.accuracy` of these logits.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxpapers.cayley import LayerProbe, apply_head
        >>> probe = LayerProbe(7, 16, 2, layer=-1, key=jax.random.key(0))
        >>> apply_head(probe, jnp.ones((5, 7, 16))).shape
        (5, 2)
    """
    _check_x(x)
    return _apply(head, x)


@nnx.jit
def _attribution(head, x, y):
    base = accuracy(jax.vmap(head)(x), y)
    mean = jnp.mean(x, axis=0)

    def drop(layer):
        occluded = x.at[:, layer].set(jnp.broadcast_to(mean[layer], x[:, layer].shape))
        return base - accuracy(jax.vmap(head)(occluded), y)

    return jax.lax.map(drop, jnp.arange(x.shape[1]))


def layer_attribution(
    head: nnx.Module, x: Float[Array, "batch layers features"], y: Int[Array, " batch"]
) -> Float[Array, " layers"]:
    """Accuracy lost when one layer's features are replaced by their mean over ``x`` (occlusion).

    Returns ``[L]``: ``acc(x) - acc(x with layer l set to its batch mean)``.
    """
    _check_xy(x, y)
    return _attribution(head, x, y)


__all__ = ["FitResult", "apply_head", "fit_head", "layer_attribution"]
