r"""Gaussian-mixture priors: exact noised scores and exact posteriors under linear measurements.

Prior :math:`p(x_0) = \sum_k w_k \mathcal N(x_0; \mu_k, v I)`. Under the VP forward process the
noised marginal is again a mixture, :math:`p_t(x) = \sum_k w_k \mathcal N(x; \alpha_t\mu_k,
(\alpha_t^2 v + \sigma_t^2) I)`, so the score and the ideal epsilon-predictor are exact:

.. math:: \nabla\log p_t(x) = \sum_k r_k(x)\,\frac{\alpha_t\mu_k - x}{\alpha_t^2 v + \sigma_t^2},
          \qquad \hat\epsilon(x, t) = -\sigma_t\nabla\log p_t(x),

with responsibilities :math:`r_k \propto w_k\,\mathcal N(x; \alpha_t\mu_k, \cdot)`.

Under :math:`y = A x_0 + \sigma_y n`, the posterior is the Gaussian mixture

.. math:: p(x_0 \mid y) = \sum_k \tilde w_k\,\mathcal N(m_k, C),\quad
          C = (I/v + A^\top A/\sigma_y^2)^{-1},\quad m_k = C(\mu_k/v + A^\top y/\sigma_y^2),\quad
          \tilde w_k \propto w_k\,\mathcal N(y; A\mu_k, v A A^\top + \sigma_y^2 I).
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxpapers.core.checks import check_int, check_positive
from jaxpapers.core.diffusion._schedule import VPSchedule


class GaussianMixture(eqx.Module):
    """Mixture of isotropic Gaussians with a shared variance (the exact test-bed prior).

    Attributes:
      means: ``[K, d]`` component means.
      log_weights: ``[K]`` normalised log mixture weights.
      var: scalar component variance ``v > 0``.
    """

    means: Float[Array, "k d"]
    log_weights: Float[Array, " k"]
    var: Float[Array, ""]

    def __init__(self, means: ArrayLike, weights: ArrayLike, var: ArrayLike):
        means, weights = jnp.asarray(means), jnp.asarray(weights)
        if means.ndim != 2:
            raise ValueError(f"means must be [K, d]; got shape {means.shape}")
        if weights.shape != means.shape[:1]:
            raise ValueError(f"weights must be [K={means.shape[0]}]; got shape {weights.shape}")
        self.means = means
        self.log_weights = jnp.log(weights) - jnp.log(jnp.sum(weights))
        self.var = jnp.asarray(var, means.dtype)

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    def log_prob_noised(self, x: Float[Array, " d"], alpha: ArrayLike, sigma: ArrayLike) -> Array:
        r""":math:`\log p_t(x)` for the noised mixture with coefficients ``alpha``, ``sigma``."""
        v = alpha**2 * self.var + sigma**2
        sq = jnp.sum((x[None, :] - alpha * self.means) ** 2, axis=-1)
        comp = -0.5 * sq / v - 0.5 * self.dim * jnp.log(2 * math.pi * v)
        return jax.nn.logsumexp(self.log_weights + comp)

    def log_prob(self, x: Float[Array, " d"]) -> Array:
        """:math:`\\log p_0(x)`."""
        return self.log_prob_noised(x, 1.0, 0.0)

    def score(self, x: Float[Array, " d"], alpha: ArrayLike, sigma: ArrayLike) -> Array:
        r"""Exact :math:`\nabla\log p_t(x)` (closed form, no autodiff)."""
        v = alpha**2 * self.var + sigma**2
        diff = alpha * self.means - x[None, :]
        logits = self.log_weights - 0.5 * jnp.sum(diff**2, axis=-1) / v
        r = jax.nn.softmax(logits)
        return (r @ diff) / v

    def eps(self, x: Float[Array, " d"], t: ArrayLike, schedule: VPSchedule) -> Array:
        r"""The ideal epsilon-predictor :math:`-\sigma_t\nabla\log p_t(x)`."""
        s = schedule.sigma(t)
        return -s * self.score(x, schedule.alpha(t), s)

    def sample(self, key: Array, n: int) -> Float[Array, "n d"]:
        """``n`` exact samples."""
        kc, kn = jax.random.split(key)
        comp = jax.random.categorical(kc, self.log_weights, shape=(n,))
        z = jax.random.normal(kn, (n, self.dim), self.means.dtype)
        return self.means[comp] + jnp.sqrt(self.var) * z

    def posterior(
        self, matrix: Float[Array, "m d"], y: Float[Array, " m"], sigma_y: ArrayLike
    ) -> MixturePosterior:
        r"""The exact posterior under :math:`y = A x_0 + \sigma_y n` (``sigma_y > 0``).

        Args:
          matrix: ``[m, d]`` measurement matrix :math:`A`.
          y: ``[m]`` measurement.
          sigma_y: measurement noise standard deviation.

        Returns:
          :class:`MixturePosterior`.
        """
        if matrix.ndim != 2 or matrix.shape[1] != self.dim or y.shape != matrix.shape[:1]:
            raise ValueError(
                f"matrix must be [m, {self.dim}] and y [m]; got {matrix.shape} and {y.shape}"
            )
        v, s2 = self.var, jnp.asarray(sigma_y) ** 2
        m = matrix.shape[0]
        gram = v * matrix @ matrix.T + s2 * jnp.eye(m, dtype=matrix.dtype)
        chol_s = jnp.linalg.cholesky(gram)
        resid = y[None, :] - self.means @ matrix.T
        white = jax.scipy.linalg.solve_triangular(chol_s, resid.T, lower=True).T
        log_det = 2.0 * jnp.sum(jnp.log(jnp.diag(chol_s)))
        log_lik = -0.5 * jnp.sum(white**2, -1) - 0.5 * log_det - 0.5 * m * math.log(2 * math.pi)
        log_w = self.log_weights + log_lik
        log_w = log_w - jax.nn.logsumexp(log_w)
        # Woodbury: C = v I - v^2 A^T S^{-1} A, S = v A A^T + s2 I.
        sa = jax.scipy.linalg.cho_solve((chol_s, True), matrix)
        cov = v * jnp.eye(self.dim, dtype=matrix.dtype) - v**2 * matrix.T @ sa
        # m_k = mu_k + v A^T S^{-1} (y - A mu_k)
        gain = jax.scipy.linalg.cho_solve((chol_s, True), resid.T).T
        means = self.means + v * gain @ matrix
        return MixturePosterior(means, log_w, jnp.linalg.cholesky(0.5 * (cov + cov.T)))


class MixturePosterior(eqx.Module):
    """Mixture of Gaussians with a shared full covariance ``chol @ chol.T``.

    Attributes:
      means: ``[K, d]``; log_weights: ``[K]`` (normalised); chol: ``[d, d]`` lower Cholesky factor.
    """

    means: Float[Array, "k d"]
    log_weights: Float[Array, " k"]
    chol: Float[Array, "d d"]

    def sample(self, key: Array, n: int) -> Float[Array, "n d"]:
        """``n`` exact samples."""
        kc, kn = jax.random.split(key)
        comp = jax.random.categorical(kc, self.log_weights, shape=(n,))
        z = jax.random.normal(kn, (n, self.means.shape[1]), self.means.dtype)
        return self.means[comp] + z @ self.chol.T

    @property
    def weights(self) -> Float[Array, " k"]:
        """Normalised mixture weights :math:`\\tilde w_k`."""
        return jnp.exp(self.log_weights)

    @property
    def component_covariance(self) -> Float[Array, "d d"]:
        """The covariance :math:`C` shared by every component (``chol @ chol.T``)."""
        return self.chol @ self.chol.T

    def mean(self) -> Float[Array, " d"]:
        """Posterior mean."""
        return self.weights @ self.means

    def covariance(self) -> Float[Array, "d d"]:
        r"""Total posterior covariance :math:`C + \sum_k \tilde w_k (m_k - \bar m)(m_k -
        \bar m)^\top`.

        Examples:
          >>> import jax.numpy as jnp
          >>> from jaxpapers.core.diffusion import GaussianMixture
          >>> g = GaussianMixture(jnp.zeros((1, 2)), jnp.ones(1), 1.0)
          >>> post = g.posterior(jnp.eye(1, 2), jnp.ones(1), 1.0)
          >>> post.covariance().round(3).tolist(), post.weights.tolist()
          ([[0.5, 0.0], [0.0, 1.0]], [1.0])
        """
        centred = self.means - self.mean()[None, :]
        return self.component_covariance + (centred.T * self.weights[None, :]) @ centred


def grid_mixture(
    dim: int, *, spacing: float = 1.0, std: float = 0.15, grid: int = 5, key: Array | None = None
) -> GaussianMixture:
    """The 25-Gaussian test bed: means ``spacing * (i, j, i, j, ...)`` on a ``grid x grid`` grid.

    Args:
      dim: dimension ``d`` (even or odd; the pattern ``(i, j)`` is tiled and cut to ``d``).
      spacing: distance between neighbouring means per coordinate pair.
      std: component standard deviation.
      grid: points per axis (5 gives 25 components), centred on 0.
      key: if given, mixture weights are drawn uniformly and normalised; otherwise equal.

    Returns:
      :class:`GaussianMixture` with ``grid**2`` components.
    """
    check_positive("std", std)
    check_positive("spacing", spacing)
    check_int("grid", grid, minimum=1)
    if dim < 1:
        raise ValueError(f"dim={dim}; expected a positive dimension")
    half = (grid - 1) / 2.0
    ii, jj = jnp.meshgrid(jnp.arange(grid) - half, jnp.arange(grid) - half, indexing="ij")
    pair = jnp.stack([ii.reshape(-1), jj.reshape(-1)], -1)
    reps = -(-dim // 2)
    means = spacing * jnp.tile(pair, (1, reps))[:, :dim]
    k = grid * grid
    w = jnp.ones((k,)) if key is None else jax.random.uniform(key, (k,), minval=0.2, maxval=1.0)
    return GaussianMixture(means, w, std**2)
