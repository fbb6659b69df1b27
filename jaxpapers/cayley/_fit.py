r"""Training and evaluating a head on frozen per-layer features: full-batch AdamW in one scan;
what each layer contributes to a trained head's accuracy (occlusion, Shapley values).

Shapley values over layers (:func:`layer_shapley`). For a trained head and held-out examples, the
value of a coalition :math:`S` of layers is the head's accuracy when every layer outside
:math:`S` is replaced by its mean over the examples (the layer carries no information about the
example; :math:`v(\emptyset)` is the accuracy of the one class the head predicts for the mean
input). Layer :math:`l`'s Shapley value is its marginal gain averaged over the orders in which the
layers can join,

.. math:: \phi_l = \sum_{S \subseteq N \setminus \{l\}}
    \frac{|S|!\,(L - |S| - 1)!}{L!}\,\big(v(S \cup \{l\}) - v(S)\big),

computed exactly from all :math:`2^L` coalitions (128 for MiniLM's 7 layers). The values add up to
:math:`v(N) - v(\emptyset)` (efficiency), so they split the head's whole gain over the layers.
Occluding one layer at a time (:func:`layer_attribution`, :math:`v(N) - v(N \setminus \{l\})`)
measures only what no other layer can make up for: two layers holding the same information each
show a drop of 0 and look useless, while their Shapley values split the gain they carry. (Leaving a
layer out and retraining the head measures the same unique part, for ``L`` more trainings.)

References:
    L. S. Shapley, A value for n-person games, *Contributions to the Theory of Games* II, 1953.
    S. M. Lundberg & S.-I. Lee, A unified approach to interpreting model predictions, NeurIPS 2017.
    M. Sundararajan & A. Najmi, The many Shapley values for model explanation, ICML 2020
    (the baseline Shapley value used here).
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
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


# learning rate and weight decay are traced (the same floats as constants: a head's training
# losses are bit-identical), so one program serves a grid of learning rates
@partial(jax.jit, static_argnames=("graphdef", "steps"))
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
    learning_rate: float | jax.Array = 3e-3,
    weight_decay: float | jax.Array = 1e-2,
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
      learning_rate, weight_decay: AdamW settings: numbers, or scalar arrays (which may be
        traced, e.g. one learning rate per cell of a grid under ``jax.vmap`` or ``lax.map``).

    Returns:
      :class:`FitResult`. Works under ``jax.vmap`` over keys/heads, data and learning rates.
    """
    check_shape("x", x, (None, None, None))
    check_shape("y", y, (x.shape[0],))
    if not jnp.issubdtype(y.dtype, jnp.integer):
        raise ValueError(f"y has dtype {y.dtype}; expected integer class labels")
    w = jnp.ones(y.shape, x.dtype) if weights is None else weights
    check_shape("weights", w, (x.shape[0],))
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"steps={steps!r}; expected an int >= 1")
    if isinstance(learning_rate, int | float):
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


#: Largest number of layers :func:`layer_shapley` takes (it evaluates all 2^L coalitions).
MAX_SHAPLEY_LAYERS = 12


def _coalition_masks(layers: int) -> np.ndarray:
    """``[2^L, L]`` bool: coalition ``c`` keeps layer ``l`` iff bit ``l`` of ``c`` is set."""
    return (np.arange(2**layers)[:, None] >> np.arange(layers)[None, :]) & 1 == 1


def coalition_accuracy(
    head: nnx.Module, x: Float[Array, "batch layers features"], y: Int[Array, " batch"]
) -> Float[Array, " coalitions"]:
    """Accuracy of ``head`` on ``x`` for every coalition of layers: ``[2^L]``, coalition ``c``
    keeping layer ``l`` iff bit ``l`` of ``c`` is set and every other layer replaced by its mean
    over ``x`` (entry 0: no layer kept; entry ``2^L - 1``: all of them).

    Pure (call it inside ``jit``); :func:`layer_shapley` is its compiled use.
    """
    layers = x.shape[1]
    if layers > MAX_SHAPLEY_LAYERS:
        raise ValueError(
            f"x has {layers} layers; exact Shapley values over layers take 2^L coalitions, at "
            f"most {MAX_SHAPLEY_LAYERS} layers"
        )
    mean = jnp.mean(x, axis=0)

    def value(keep):
        kept = jnp.where(keep[None, :, None], x, mean[None])
        return accuracy(jax.vmap(head)(kept), y)

    return jax.lax.map(value, jnp.asarray(_coalition_masks(layers)))


def shapley_values(values: Float[Array, " coalitions"]) -> Float[Array, " layers"]:
    """Exact Shapley values ``[L]`` of a game given by its value on every coalition ``[2^L]``
    (indexed as in :func:`coalition_accuracy`).

    Examples:
        >>> import jax.numpy as jnp
        >>> # two players; v({0}) = v({1}) = v({0, 1}) = 1: each holds the same thing
        >>> shapley_values(jnp.array([0.0, 1.0, 1.0, 1.0])).tolist()
        [0.5, 0.5]
    """
    n = values.shape[-1]
    layers = n.bit_length() - 1
    if n != 2**layers or layers < 1:
        raise ValueError(f"values has {n} entries; expected 2^L for L >= 1 layers")
    masks = _coalition_masks(layers)
    size = masks.sum(axis=1)
    fact = [math.factorial(k) for k in range(layers + 1)]
    out = []
    for layer in range(layers):
        without = np.flatnonzero(~masks[:, layer])
        weight = np.array(
            [fact[size[c]] * fact[layers - size[c] - 1] / fact[layers] for c in without]
        )
        gain = values[..., without | (1 << layer)] - values[..., without]
        weight = jnp.asarray(weight, values.dtype).reshape((1,) * (gain.ndim - 1) + (-1,))
        out.append(jnp.sum(weight * gain, axis=-1))
    return jnp.stack(out, axis=-1)


class LayerShapley(NamedTuple):
    """Shapley values of the layers for a head's accuracy (:func:`layer_shapley`).

    Attributes:
      values: ``[L]`` Shapley value of each layer (accuracy units; they add up to
        ``coalitions[-1] - coalitions[0]``).
      coalitions: ``[2^L]`` accuracy of every coalition (:func:`coalition_accuracy`).
    """

    values: Float[Array, " layers"]
    coalitions: Float[Array, " coalitions"]

    def occlusion(self) -> Float[Array, " layers"]:
        """Accuracy lost when one layer alone is replaced by its mean (the coalitions of all
        layers but one; :func:`layer_attribution`)."""
        n = self.coalitions.shape[-1]
        full = n - 1
        drops = [full ^ (1 << layer) for layer in range(n.bit_length() - 1)]
        return self.coalitions[..., full, None] - self.coalitions[..., jnp.array(drops)]


@nnx.jit
def _shapley(head, x, y):
    values = coalition_accuracy(head, x, y)
    return LayerShapley(shapley_values(values), values)


def layer_shapley(
    head: nnx.Module, x: Float[Array, "batch layers features"], y: Int[Array, " batch"]
) -> LayerShapley:
    """Exact Shapley values of the layers for ``head``'s accuracy on held-out ``x``, ``y``.

    A coalition's value is the accuracy with every layer outside it replaced by its mean over
    ``x`` (module docstring); all ``2^L`` coalitions are evaluated (``L <= 12``).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxpapers.cayley import LayerProbe, layer_shapley
        >>> x = jax.random.normal(jax.random.key(0), (256, 3, 2))
        >>> y = (x[:, 0, 0] > 0).astype(jnp.int32)
        >>> probe = LayerProbe(3, 2, 2, layer=0, key=jax.random.key(1))  # reads layer 0 only
        >>> probe.linear.weight.set_value(jnp.array([[0.0, 0.0], [1.0, 0.0]]))
        >>> probe.linear.bias.set_value(jnp.zeros(2))
        >>> res = layer_shapley(probe, x, y)
        >>> float(res.coalitions[-1]), [float(v) for v in res.values[1:]]
        (1.0, [0.0, 0.0])
        >>> bool(jnp.isclose(res.values.sum(), res.coalitions[-1] - res.coalitions[0]))
        True
    """
    _check_xy(x, y)
    return _shapley(head, x, y)


__all__ = [
    "FitResult",
    "LayerShapley",
    "apply_head",
    "coalition_accuracy",
    "fit_head",
    "layer_attribution",
    "layer_shapley",
    "shapley_values",
]
