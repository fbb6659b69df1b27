r"""Sample-quality metrics against a known class-conditional density, and the Frechet distance.

* :func:`mixture_metrics`: mean class-conditional log-likelihood :math:`\tfrac1n\sum_i \log
  p(x_i \mid c_i)` under the true density (floored at ``floor`` so that a few far outliers do not
  swamp the mean), precision (the fraction of samples whose true log-likelihood reaches the 1%
  quantile ``tau_c`` of exact samples of the same class: inside the class's support) and recall
  (the fraction of exact samples that fall inside the union of k-nearest-neighbour balls of the
  generated samples of the same class; Kynkaanniemi et al. 2019).
* :func:`frechet_distance`: :math:`\|m_1 - m_2\|^2 + \mathrm{tr}(S_1 + S_2 - 2 (S_1^{1/2} S_2
  S_1^{1/2})^{1/2})` between Gaussian fits of two feature sets (Heusel et al. 2017).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from jaxpapers.scale._mixture import ClassMixture


class MixtureMetrics(NamedTuple):
    """``log_lik`` (floored mean), ``precision`` and ``recall`` (fractions in [0, 1])."""

    log_lik: Float[Array, ""]
    precision: Float[Array, ""]
    recall: Float[Array, ""]


def _sq_dists(a: Array, b: Array) -> Array:
    d = jnp.sum(a * a, -1)[:, None] + jnp.sum(b * b, -1)[None, :] - 2.0 * a @ b.T
    return jnp.maximum(d, 0.0)


def _kth_smallest(d: Array, k: int) -> Array:
    """``jnp.sort(d, axis=1)[:, k]`` (NaN read as ``+inf``) by ``k`` rounds of removing one
    minimum: a selection, so the values are exact, and much cheaper than XLA's CPU sort of
    ``[512, 512]`` rows for a small ``k`` (``results/P04/NOTES.md``)."""
    d = jnp.where(jnp.isnan(d), jnp.inf, d)
    cols = jnp.arange(d.shape[1])
    for _ in range(k):
        d = jnp.where(cols[None, :] == jnp.argmin(d, axis=1)[:, None], jnp.inf, d)
    return jnp.min(d, axis=1)


def mixture_metrics(
    mixture: ClassMixture,
    x: Float[Array, "n d"],
    labels: Int[Array, " n"],
    ref: Float[Array, "n d"],
    *,
    k: int = 3,
    floor: float = -20.0,
) -> MixtureMetrics:
    """Log-likelihood, precision and recall of labelled samples ``x`` against exact samples
    ``ref`` drawn for the same ``labels``.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxpapers.scale import checkerboard_mixture, mixture_metrics
        >>> mix = checkerboard_mixture(2)
        >>> lab = jnp.arange(400) % 4
        >>> x, ref = mix.sample(lab, key=jax.random.key(0)), mix.sample(lab, key=jax.random.key(1))
        >>> m = jax.jit(mixture_metrics)(mix, x, lab, ref)  # one program, not op by op
        >>> bool(m.precision > 0.95), bool(m.recall > 0.9)
        (True, True)
    """
    if x.ndim != 2 or x.shape[1] != mixture.dim or ref.shape != x.shape:
        raise ValueError(
            f"x and ref must be [n, {mixture.dim}] with equal shapes; got {x.shape}, {ref.shape}"
        )
    if labels.shape != x.shape[:1]:
        raise ValueError(f"labels has shape {labels.shape}; expected [{x.shape[0]}]")
    ll = jax.vmap(mixture.log_prob)(x, labels)
    ll_ref = jax.vmap(mixture.log_prob)(ref, labels)
    same = labels[:, None] == labels[None, :]
    onehot = jax.nn.one_hot(labels, mixture.num_classes, dtype=bool)
    masked = jnp.where(onehot, ll_ref[:, None], jnp.inf)
    # 1% quantile per class by sorting each class column (n is small here).
    sorted_ll = jnp.sort(masked, axis=0)
    counts = onehot.sum(0)
    tau = sorted_ll[jnp.floor(0.01 * (counts - 1)).astype(jnp.int32), jnp.arange(counts.shape[0])]
    precision = jnp.mean(ll >= tau[labels])
    d_gen = jnp.where(same, _sq_dists(x, x), jnp.inf)
    radius = _kth_smallest(d_gen, k)  # k-th neighbour (index 0 is the point itself)
    d_cross = jnp.where(same, _sq_dists(ref, x), jnp.inf)
    recall = jnp.mean(jnp.any(d_cross <= radius[None, :], axis=1))
    return MixtureMetrics(jnp.mean(jnp.maximum(ll, floor)), precision, recall)


def _sqrtm_psd(a: Array) -> Array:
    vals, vecs = jnp.linalg.eigh(0.5 * (a + a.T))
    return (vecs * jnp.sqrt(jnp.maximum(vals, 0.0))[None, :]) @ vecs.T


def frechet_distance(f1: Float[Array, "n k"], f2: Float[Array, "m k"]) -> Float[Array, ""]:
    """Frechet distance between Gaussian fits of two feature sets ``[n, k]`` and ``[m, k]``.

    Examples:
        >>> import jax
        >>> f = jax.random.normal(jax.random.key(0), (500, 3))
        >>> float(frechet_distance(f, f)) < 1e-4
        True
    """
    if f1.ndim != 2 or f2.ndim != 2 or f1.shape[1] != f2.shape[1]:
        raise ValueError(f"f1, f2 must be [n, k] and [m, k]; got {f1.shape}, {f2.shape}")
    m1, m2 = f1.mean(0), f2.mean(0)
    s1, s2 = jnp.cov(f1, rowvar=False), jnp.cov(f2, rowvar=False)
    r1 = _sqrtm_psd(s1)
    cross = _sqrtm_psd(r1 @ s2 @ r1)
    return jnp.sum((m1 - m2) ** 2) + jnp.trace(s1) + jnp.trace(s2) - 2.0 * jnp.trace(cross)
