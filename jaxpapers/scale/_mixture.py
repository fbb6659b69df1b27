r"""Class-conditional Gaussian mixtures: exact densities, noised scores and the exact CFG target.

Each class :math:`c` owns a subset of the components, :math:`p(x_0 \mid c) = \sum_{k \in c}
w_{k \mid c}\,\mathcal N(x_0; \mu_k, v I)`, and the unconditional density is
:math:`p(x_0) = \sum_c \pi_c\, p(x_0 \mid c)`. Under the VP forward process every component stays
Gaussian, :math:`\mathcal N(\alpha_t\mu_k, (\alpha_t^2 v + \sigma_t^2) I)`, so the ideal
epsilon-predictors :math:`\hat\epsilon(x, t, c) = -\sigma_t\nabla\log p_t(x \mid c)` and
:math:`\hat\epsilon(x, t, \varnothing) = -\sigma_t\nabla\log p_t(x)` are closed forms, and so is
the exactly guided prediction that classifier-free guidance approximates,

.. math:: \hat\epsilon_w = \hat\epsilon(x, t, \varnothing)
          + w\,\big(\hat\epsilon(x, t, c) - \hat\epsilon(x, t, \varnothing)\big)
          = -\sigma_t \nabla \log\big(p_t(x)\, p_t(c \mid x)^{w}\big).
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int

from jaxpapers.core.checks import check_positive
from jaxpapers.core.diffusion import VPSchedule


class ClassMixture(eqx.Module):
    """Class-conditional mixture of isotropic Gaussians with a shared variance.

    Attributes:
      means: ``[K, d]`` component means.
      classes: ``[K]`` integer class of each component, every class in ``[0, C)`` present.
      log_weights: ``[K]`` normalised log weights of the joint (component) distribution.
      var: component variance ``v``.
      num_classes: ``C`` (static).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> m = ClassMixture(jnp.array([[-1.0, 0.0], [1.0, 0.0]]), jnp.array([0, 1]), 0.04)
        >>> x = m.sample(jnp.array([0, 0, 1]), key=jax.random.key(0))
        >>> x.shape, bool(x[2, 0] > 0)
        ((3, 2), True)
    """

    means: Float[Array, "k d"]
    classes: Int[Array, " k"]
    log_weights: Float[Array, " k"]
    var: Float[Array, ""]
    num_classes: int = eqx.field(static=True)

    def __init__(
        self,
        means: ArrayLike,
        classes: ArrayLike,
        var: ArrayLike,
        weights: ArrayLike | None = None,
    ):
        means = jnp.asarray(means)
        classes = jnp.asarray(classes)
        if means.ndim != 2:
            raise ValueError(f"means must be [K, d]; got shape {means.shape}")
        if classes.shape != means.shape[:1] or not jnp.issubdtype(classes.dtype, jnp.integer):
            raise ValueError(
                f"classes must be integer [K={means.shape[0]}]; got {classes.shape} {classes.dtype}"
            )
        check_positive("var", var)
        num = int(classes.max()) + 1
        if set(range(num)) - {int(c) for c in classes}:
            raise ValueError(f"classes must cover 0 .. {num - 1}; got {classes.tolist()}")
        w = jnp.ones(means.shape[:1]) if weights is None else jnp.asarray(weights)
        self.means = means
        self.classes = classes.astype(jnp.int32)
        self.log_weights = (jnp.log(w) - jnp.log(jnp.sum(w))).astype(means.dtype)
        self.var = jnp.asarray(var, means.dtype)
        self.num_classes = num

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    def class_log_prior(self) -> Float[Array, " c"]:
        r""":math:`\log\pi_c`, the class marginal."""
        onehot = jax.nn.one_hot(self.classes, self.num_classes, dtype=self.means.dtype)
        return jax.nn.logsumexp(self.log_weights[:, None], axis=0, b=onehot)

    def _component_logits(self, x: Array, label: Array, alpha: Array, sigma: Array) -> Array:
        """Log of weight x density of each component; components of other classes get -inf
        unless ``label`` is the null label ``num_classes`` (the unconditional density)."""
        v = alpha**2 * self.var + sigma**2
        sq = jnp.sum((x[None, :] - alpha * self.means) ** 2, axis=-1)
        comp = self.log_weights - 0.5 * sq / v - 0.5 * self.dim * jnp.log(2 * math.pi * v)
        keep = (self.classes == label) | (label == self.num_classes)
        return jnp.where(keep, comp, -jnp.inf)

    def log_prob(self, x: Float[Array, " d"], label: Int[Array, ""]) -> Float[Array, ""]:
        r""":math:`\log p(x \mid c)` (``label = num_classes`` gives :math:`\log p(x)`)."""
        prior = jnp.append(self.class_log_prior(), 0.0)[label]
        return jax.nn.logsumexp(self._component_logits(x, label, 1.0, 0.0)) - prior

    def eps(
        self, x: Float[Array, " d"], t: ArrayLike, label: Int[Array, ""], schedule: VPSchedule
    ) -> Float[Array, " d"]:
        r"""Ideal :math:`\hat\epsilon(x, t, c) = -\sigma_t\nabla\log p_t(x\mid c)` (closed form)."""
        a, s = schedule.alpha(t), schedule.sigma(t)
        v = a**2 * self.var + s**2
        r = jax.nn.softmax(self._component_logits(x, label, a, s))
        return -s * (r @ (a * self.means - x[None, :])) / v

    def guided_eps(
        self,
        x: Float[Array, " d"],
        t: ArrayLike,
        label: Int[Array, ""],
        w: ArrayLike,
        schedule: VPSchedule,
    ) -> Float[Array, " d"]:
        r"""The exactly guided :math:`\hat\epsilon_\varnothing + w(\hat\epsilon_c -
        \hat\epsilon_\varnothing)` that CFG with scale ``w`` approximates."""
        e_c = self.eps(x, t, label, schedule)
        e_u = self.eps(x, t, jnp.asarray(self.num_classes), schedule)
        return e_u + w * (e_c - e_u)

    def sample(self, labels: Int[Array, " n"], *, key: Array) -> Float[Array, "n d"]:
        """Exact samples of :math:`p(x \\mid c)` for each label."""
        kc, kn = jax.random.split(key)
        logits = jnp.where(
            self.classes[None, :] == labels[:, None], self.log_weights[None, :], -jnp.inf
        )
        comp = jax.random.categorical(kc, logits, axis=-1)
        z = jax.random.normal(kn, (labels.shape[0], self.dim), self.means.dtype)
        return self.means[comp] + jnp.sqrt(self.var) * z

    def sample_labels(self, n: int, *, key: Array) -> Int[Array, " n"]:
        """``n`` labels from the class marginal."""
        return jax.random.categorical(key, self.class_log_prior(), shape=(n,)).astype(jnp.int32)

    def draw(self, n: int, *, key: Array) -> tuple[Float[Array, "n d"], Int[Array, " n"]]:
        """``n`` labelled exact samples ``(x, labels)`` (the training-data interface)."""
        kl, kx = jax.random.split(key)
        labels = self.sample_labels(n, key=kl)
        return self.sample(labels, key=kx), labels


def checkerboard_mixture(
    dim: int, *, num_classes: int = 4, grid: int = 4, spacing: float = 1.0, std: float = 0.2
) -> ClassMixture:
    """A ``grid x grid`` lattice of Gaussians whose classes interleave (component ``(i, j)`` has
    class ``(i + 2 j) mod num_classes``), so that neighbouring modes belong to different classes
    and a poorly conditioned model leaks mass across classes. For ``dim > 2`` the 2-D pattern is
    tiled over coordinate pairs (the last odd coordinate repeats ``i``).

    Args:
      dim: dimension ``d >= 2``.
      num_classes: number of classes ``C``.
      grid: points per axis.
      spacing: distance between neighbouring means.
      std: component standard deviation.

    Returns:
      :class:`ClassMixture` with ``grid**2`` components.
    """
    if dim < 2:
        raise ValueError(f"dim={dim}; expected >= 2")
    if num_classes < 2 or num_classes > grid * grid:
        raise ValueError(f"num_classes={num_classes}; expected 2 .. grid**2={grid * grid}")
    # built in NumPy (exact float32 values): no small eager programs to compile
    half = (grid - 1) / 2.0
    ii, jj = np.meshgrid(np.arange(grid), np.arange(grid), indexing="ij")
    ii, jj = ii.reshape(-1), jj.reshape(-1)
    pair = np.stack([ii - half, jj - half], -1).astype(np.float32)
    means = np.float32(spacing) * np.tile(pair, (1, -(-dim // 2)))[:, :dim]
    classes = ((ii + 2 * jj) % num_classes).astype(np.int32)
    return ClassMixture(means, classes, std**2)
