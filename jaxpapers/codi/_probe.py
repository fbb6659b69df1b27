"""Frozen-feature evaluation: a linear probe (dense labels) and weighted k-NN (images).

The probe's mIoU is :func:`jaxpapers.core.segmentation_metrics.mean_iou`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_labels, check_shape


class ProbeResult(NamedTuple):
    """``predictions [M]`` on the test features and the probe's final training loss."""

    predictions: Int[Array, " m"]
    train_loss: Float[Array, ""]


@functools.partial(jax.jit, static_argnames=("num_classes", "steps"))
def _fit_probe(x, y, xt, num_classes: int, steps: int, lr: float, l2: float):
    mu, sd = jnp.mean(x, 0, keepdims=True), jnp.std(x, 0, keepdims=True) + 1e-6
    x, xt = (x - mu) / sd, (xt - mu) / sd
    params = (jnp.zeros((x.shape[1], num_classes)), jnp.zeros((num_classes,)))
    opt = optax.adam(lr)

    def loss(p):
        logits = x @ p[0] + p[1][None]
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        return ce + l2 * jnp.sum(p[0] ** 2)

    def body(c, _):
        p, s = c
        val, g = jax.value_and_grad(loss)(p)
        u, s = opt.update(g, s, p)
        return (optax.apply_updates(p, u), s), val

    (params, _), losses = jax.lax.scan(body, (params, opt.init(params)), None, length=steps)
    return jnp.argmax(xt @ params[0] + params[1][None], -1), losses[-1]


def linear_probe(
    train_features: Float[Array, "n d"],
    train_labels: Int[Array, " n"],
    test_features: Float[Array, "m d"],
    num_classes: int,
    *,
    steps: int = 300,
    lr: float = 0.05,
    l2: float = 1e-4,
) -> ProbeResult:
    """Multinomial logistic regression on standardised frozen features (full-batch Adam).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxpapers.codi import linear_probe
        >>> x = jnp.array([[0.0], [1.0], [2.0], [3.0]])
        >>> linear_probe(x, jnp.array([0, 0, 1, 1]), x, 2).predictions
        Array([0, 0, 1, 1], dtype=int32)
    """
    if train_features.ndim != 2 or test_features.ndim != 2:
        raise ValueError(
            f"features must be [n, d]; got {train_features.shape} and {test_features.shape}"
        )
    check_shape("test_features", test_features, (None, train_features.shape[1]))
    check_shape("train_labels", train_labels, (train_features.shape[0],))
    check_labels("train_labels", train_labels, num_classes)
    pred, last = _fit_probe(train_features, train_labels, test_features, num_classes, steps, lr, l2)
    return ProbeResult(pred.astype(jnp.int32), last)


def knn_classify(
    train_features: Float[Array, "n d"],
    train_labels: Int[Array, " n"],
    test_features: Float[Array, "m d"],
    num_classes: int,
    *,
    k: int = 10,
    temperature: float = 0.07,
) -> Int[Array, " m"]:
    """Cosine k-NN with ``exp(sim / T)`` weighted votes (the DINO evaluation protocol)."""
    check_shape("test_features", test_features, (None, train_features.shape[-1]))
    check_shape("train_labels", train_labels, (train_features.shape[0],))
    check_labels("train_labels", train_labels, num_classes)
    if not 1 <= k <= train_features.shape[0]:
        raise ValueError(f"k={k}; expected 1 <= k <= {train_features.shape[0]}")

    def unit(x: jax.Array) -> jax.Array:
        return x / (jnp.linalg.norm(x, axis=-1, keepdims=True) + 1e-8)

    sim = unit(test_features) @ unit(train_features).T
    top, idx = jax.lax.top_k(sim, k)
    votes = jax.nn.one_hot(train_labels[idx], num_classes) * jnp.exp(top / temperature)[..., None]
    return jnp.argmax(jnp.sum(votes, 1), -1).astype(jnp.int32)


__all__ = ["ProbeResult", "knn_classify", "linear_probe"]
