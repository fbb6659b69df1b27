"""Metrics shared by several papers: MMD with RBF kernels, sliced Wasserstein, accuracy, PSNR.

All functions are pure, jit-able and differentiable where that makes sense.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_finite, check_int, check_key, check_range


def _flatten_samples(x: jax.Array, name: str) -> jax.Array:
    if x.ndim < 1:
        raise ValueError(f"{name} must have a leading sample axis; got shape {x.shape}")
    return x.reshape(x.shape[0], -1)


def _sq_dists(x: jax.Array, y: jax.Array) -> jax.Array:
    d = jnp.sum(x * x, -1)[:, None] + jnp.sum(y * y, -1)[None, :] - 2.0 * x @ y.T
    return jnp.maximum(d, 0.0)


def mmd_rbf(
    x: Float[Array, "n ..."],
    y: Float[Array, "m ..."],
    bandwidths: Sequence[float] | Float[Array, " k"] = (0.5, 1.0, 2.0, 5.0),
    *,
    unbiased: bool = True,
) -> Float[Array, ""]:
    r"""Squared maximum mean discrepancy with a sum of RBF kernels.

    .. math:: \mathrm{MMD}^2 = \mathbb{E}k(x, x') + \mathbb{E}k(y, y') - 2\,\mathbb{E}k(x, y),
       \qquad k(a, b) = \sum_\ell \exp(-\|a - b\|^2 / (2 \ell^2 D))

    Distances are divided by the flattened dimension D so bandwidths are per coordinate and the
    same values suit any grid size.

    Args:
      x: ``[n, ...]`` samples (each sample flattened).
      y: ``[m, ...]`` samples with the same trailing shape.
      bandwidths: kernel length scales (positive).
      unbiased: U-statistic (drops the diagonal); can be slightly negative.

    Returns:
      Scalar MMD^2.

    Raises:
      ValueError: for mismatched sample shapes, too few samples, bandwidths that are not
        positive, or (when concrete) NaN/inf in ``x``, ``y`` or ``bandwidths``. Under ``jit``
        values are not checked: a NaN sample makes the result NaN.
    """
    check_finite("x", x)
    check_finite("y", y)
    check_range("bandwidths", bandwidths, 0.0, low_open=True)
    x = _flatten_samples(jnp.asarray(x), "x")
    y = _flatten_samples(jnp.asarray(y), "y")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y must have the same sample shape; got {x.shape} and {y.shape}")
    n, m = x.shape[0], y.shape[0]
    if unbiased and (n < 2 or m < 2):
        raise ValueError(f"unbiased MMD needs at least 2 samples each; got n={n}, m={m}")
    bw = jnp.asarray(bandwidths, dtype=x.dtype)
    if bw.ndim != 1:
        raise ValueError(f"bandwidths must be 1-D; got shape {bw.shape}")
    dim = x.shape[1]

    def kernel(a, b):
        d = _sq_dists(a, b) / dim
        return jnp.sum(jnp.exp(-d[None] / (2.0 * bw[:, None, None] ** 2)), axis=0)

    kxx, kyy, kxy = kernel(x, x), kernel(y, y), kernel(x, y)
    if unbiased:
        sxx = (jnp.sum(kxx) - jnp.trace(kxx)) / (n * (n - 1))
        syy = (jnp.sum(kyy) - jnp.trace(kyy)) / (m * (m - 1))
    else:
        sxx, syy = jnp.mean(kxx), jnp.mean(kyy)
    return sxx + syy - 2.0 * jnp.mean(kxy)


def sliced_wasserstein(
    x: Float[Array, "n d"],
    y: Float[Array, "n d"],
    *,
    key: jax.Array,
    n_projections: int = 128,
    p: int = 2,
) -> Float[Array, ""]:
    r"""Sliced p-Wasserstein distance between two equal-size empirical measures.

    .. math:: SW_p(\mu, \nu) = \big(\mathbb{E}_{\theta \sim U(S^{d-1})}
              W_p^p(\theta_\# \mu, \theta_\# \nu)\big)^{1/p},

    each 1-D distance computed exactly by sorting the projections.

    Args:
      x, y: ``[n, d]`` samples (same n).
      key: PRNG key for the random directions.
      n_projections: number of directions.
      p: order.
    """
    check_key("key", key)
    check_int("n_projections", n_projections, minimum=1)
    check_range("p", p, 0.0, low_open=True)
    x, y = jnp.asarray(x), jnp.asarray(y)
    if x.ndim != 2 or y.shape != x.shape:
        raise ValueError(f"x and y must both be [n, d] with equal shapes; got {x.shape}, {y.shape}")
    check_finite("x", x)
    check_finite("y", y)
    theta = jax.random.normal(key, (x.shape[1], n_projections), dtype=x.dtype)
    theta = theta / jnp.linalg.norm(theta, axis=0, keepdims=True)
    px, py = jnp.sort(x @ theta, axis=0), jnp.sort(y @ theta, axis=0)
    return jnp.mean(jnp.abs(px - py) ** p) ** (1.0 / p)


def accuracy(logits: Float[Array, "n c"], labels: Int[Array, " n"]) -> Float[Array, ""]:
    """Fraction of rows whose arg-max equals the label."""
    logits, labels = jnp.asarray(logits), jnp.asarray(labels)
    if logits.ndim != 2 or labels.shape != logits.shape[:1]:
        raise ValueError(
            f"logits must be [n, classes] and labels [n]; got {logits.shape} and {labels.shape}"
        )
    return jnp.mean(jnp.argmax(logits, -1) == labels)


def psnr(x: Float[Array, ...], ref: Float[Array, ...], data_range: float = 1.0) -> jax.Array:
    """Peak signal-to-noise ratio in dB over all axes but the first (one value per sample)."""
    if x.shape != ref.shape:
        raise ValueError(f"x and ref must have equal shapes; got {x.shape} and {ref.shape}")
    if jnp.ndim(x) < 1:
        raise ValueError(f"x has shape {jnp.shape(x)}; expected a leading sample axis")
    check_range("data_range", data_range, 0.0, low_open=True)
    mse = jnp.mean((x - ref).reshape(x.shape[0], -1) ** 2, axis=-1)
    return 10.0 * jnp.log10(data_range**2 / mse)


__all__ = ["accuracy", "mmd_rbf", "psnr", "sliced_wasserstein"]
