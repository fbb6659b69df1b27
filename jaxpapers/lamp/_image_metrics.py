r"""SSIM (Wang et al., IEEE TIP 2004) of the P07 digits experiments; PSNR lives in
:mod:`jaxpapers.core.metrics`.

.. math:: \mathrm{SSIM}(x, y) = \operatorname{mean}_{\text{window}}
          \frac{(2\mu_x\mu_y + C_1)(2\sigma_{xy} + C_2)}{(\mu_x^2 + \mu_y^2 + C_1)
          (\sigma_x^2 + \sigma_y^2 + C_2)}, \qquad C_i = (k_i L)^2,

with local statistics under a normalised Gaussian window (``valid`` positions only, no padding).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_finite, check_positive


def gaussian_window(size: int, sigma: float) -> np.ndarray:
    """Normalised 1-D Gaussian window of odd length ``size``."""
    if size < 1 or size % 2 == 0:
        raise ValueError(f"size={size}; expected an odd positive window length")
    check_positive("sigma", sigma)
    r = np.arange(size) - size // 2
    w = np.exp(-0.5 * (r / sigma) ** 2)
    return w / w.sum()


def _filter(img: Array, w: Array) -> Array:
    """Separable 'valid' filtering of ``[n, h, w, c]`` along axes 1 and 2."""
    k = w.shape[0]
    h = sum(w[i] * img[:, i : img.shape[1] - k + 1 + i] for i in range(k))
    return sum(w[i] * h[:, :, i : h.shape[2] - k + 1 + i] for i in range(k))


def ssim(
    x: Float[Array, "n h w *c"],
    ref: Float[Array, "n h w *c"],
    *,
    data_range: float = 1.0,
    window: int = 7,
    sigma: float = 1.5,
    k1: float = 0.01,
    k2: float = 0.03,
) -> Float[Array, " n"]:
    """Mean structural similarity per image (channels averaged).

    Args:
      x, ref: ``[n, h, w]`` or ``[n, h, w, c]`` images with ``h, w >= window``.
      data_range: dynamic range ``L`` of the pixel values (2 for ``[-1, 1]``).
      window: odd Gaussian window length; sigma: its standard deviation.
      k1, k2: stabilising constants.

    Returns:
      ``[n]`` SSIM values (1 for identical images).
    """
    x, ref = jnp.asarray(x), jnp.asarray(ref)
    if x.shape != ref.shape or x.ndim not in (3, 4):
        raise ValueError(
            f"x and ref must have equal shapes [n, h, w(, c)]; got {x.shape} and {ref.shape}"
        )
    if min(x.shape[1:3]) < window:
        raise ValueError(f"images {x.shape[1:3]} are smaller than window={window}")
    check_positive("data_range", data_range)
    check_finite("x", x)
    check_finite("ref", ref)
    if x.ndim == 3:
        x, ref = x[..., None], ref[..., None]
    w = jnp.asarray(gaussian_window(window, sigma), x.dtype)
    c1, c2 = (k1 * data_range) ** 2, (k2 * data_range) ** 2
    mx, my = _filter(x, w), _filter(ref, w)
    sxx = _filter(x * x, w) - mx**2
    syy = _filter(ref * ref, w) - my**2
    sxy = _filter(x * ref, w) - mx * my
    smap = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx**2 + my**2 + c1) * (sxx + syy + c2))
    return jnp.mean(smap.reshape(smap.shape[0], -1), axis=-1)


__all__ = ["gaussian_window", "ssim"]
