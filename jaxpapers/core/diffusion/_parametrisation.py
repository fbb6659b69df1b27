r"""Conversions between the epsilon, x0 and score parametrisations, and Tweedie's denoiser.

For :math:`x_t = \alpha_t x_0 + \sigma_t \epsilon` with Gaussian noise,

.. math:: \nabla \log p_t(x_t) = -\mathbb{E}[\epsilon \mid x_t] / \sigma_t, \qquad
          \mathbb{E}[x_0 \mid x_t] = (x_t + \sigma_t^2 \nabla \log p_t(x_t)) / \alpha_t
          \quad\text{(Tweedie)}.

All functions are elementwise in arrays of any (broadcast-compatible) shape; ``alpha``, ``sigma``
are scalars or arrays broadcastable to ``x``.

NaN contract (see :mod:`jaxpapers.core.checks`): these conversions run inside compiled sampler
steps, so they check no values: NaN or inf in an input gives NaN or inf in the same entries of the
output, and ``sigma = 0`` (or ``alpha = 0`` where it divides) gives inf. The public samplers check
their inputs at their own boundary.
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxpapers.core.checks import check_positive


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


def clip_x0(
    eps_fn: Callable[[Array, Array], Array], schedule, bound: float
) -> Callable[[Array, Array], Array]:
    r"""Static thresholding: ``eps_fn`` whose implied :math:`\hat x_0` is clipped to ``[-bound,
    bound]`` at every call.

    Returns ``eps'(x, t) = (x - alpha_t clip(x0_hat)) / sigma_t`` with ``x0_hat = (x - sigma_t
    eps(x, t)) / alpha_t``, so any sampler that reads the prediction as :math:`\hat x_0` (DDIM,
    DPM-Solver++) steps from the clipped estimate: Ho et al. (2020)'s clip of the predicted image
    to the data range in DDPM sampling, which keeps a weak or guided network's few-step samples
    off the saturated corners of the box. Where :math:`\hat x_0` already lies inside the box the
    prediction is unchanged. Use it for data on a known bounded range (images in ``[-1, 1]``),
    never on unbounded data.

    Args:
      eps_fn: ``eps_fn(x, t) -> eps`` on a sample ``x`` and a scalar time ``t > 0``.
      schedule: the :class:`~jaxpapers.core.diffusion.VPSchedule` the network was trained with.
      bound: the data range's half-width, ``> 0``.
    """
    check_positive("bound", bound)

    def clipped(x: Array, t: Array) -> Array:
        alpha, sigma = schedule.alpha(t), schedule.sigma(t)
        x0 = jnp.clip(eps_to_x0(x, eps_fn(x, t), alpha, sigma), -bound, bound)
        return x0_to_eps(x, x0, alpha, sigma)

    return clipped
