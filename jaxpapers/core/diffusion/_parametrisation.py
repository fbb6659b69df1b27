r"""Conversions between the epsilon, x0 and score parametrisations, and Tweedie's denoiser.

For :math:`x_t = \alpha_t x_0 + \sigma_t \epsilon` with Gaussian noise,

.. math:: \nabla \log p_t(x_t) = -\mathbb{E}[\epsilon \mid x_t] / \sigma_t, \qquad
          \mathbb{E}[x_0 \mid x_t] = (x_t + \sigma_t^2 \nabla \log p_t(x_t)) / \alpha_t
          \quad\text{(Tweedie)}.

All functions are elementwise in arrays of any (broadcast-compatible) shape; ``alpha``, ``sigma``
are scalars or arrays broadcastable to ``x``.
"""

from __future__ import annotations

from jaxtyping import Array, ArrayLike, Float


def eps_to_x0(x: ArrayLike, eps: ArrayLike, alpha: ArrayLike, sigma: ArrayLike) -> Array:
    r""":math:`\hat x_0 = (x_t - \sigma_t \hat\epsilon) / \alpha_t`."""
    return (x - sigma * eps) / alpha


def x0_to_eps(x: ArrayLike, x0: ArrayLike, alpha: ArrayLike, sigma: ArrayLike) -> Array:
    r""":math:`\hat\epsilon = (x_t - \alpha_t \hat x_0) / \sigma_t`."""
    return (x - alpha * x0) / sigma


def eps_to_score(eps: ArrayLike, sigma: ArrayLike) -> Array:
    r""":math:`s = -\hat\epsilon / \sigma_t`."""
    return -eps / sigma


def score_to_eps(score: ArrayLike, sigma: ArrayLike) -> Array:
    r""":math:`\hat\epsilon = -\sigma_t s`."""
    return -sigma * score


def x0_to_score(x: ArrayLike, x0: ArrayLike, alpha: ArrayLike, sigma: ArrayLike) -> Array:
    r""":math:`s = (\alpha_t \hat x_0 - x_t) / \sigma_t^2`."""
    return (alpha * x0 - x) / sigma**2


def tweedie_denoise(
    x: Float[Array, ...], score: Float[Array, ...], alpha: ArrayLike, sigma: ArrayLike
) -> Float[Array, ...]:
    r"""Tweedie's posterior mean :math:`\mathbb{E}[x_0 \mid x_t] = (x_t + \sigma_t^2 s) / \alpha_t`.

    Args:
      x: noisy sample :math:`x_t`, any shape.
      score: :math:`\nabla \log p_t(x_t)`, same shape.
      alpha, sigma: schedule coefficients at ``t``.

    Returns:
      The denoised estimate, same shape as ``x``.
    """
    return (x + sigma**2 * score) / alpha
