r"""Sample-quality metrics for function samples, as reported by FFM (Kerrigan et al., 2024).

* :func:`density_mse`: MSE between the pointwise-value densities of two samples (histograms of
  all grid values pooled, on shared bins over the reference sample's range).
* :func:`spectrum_mse`: MSE between the mean power spectra :math:`\frac1n\sum_i |\hat f_i(k)|^2`
  (``rfft`` normalised by ``"forward"``, so independent of the grid size; on a 2-D grid the 2-D
  spectrum ``rfft2`` over both grid axes).

MMD with RBF kernels is :func:`jaxpapers.core.metrics.mmd_rbf`; the Hilbert Sinkhorn divergence
(:func:`jaxpapers.kffm.hilbert_sinkhorn_divergence`) is a metric too.
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxpapers.kffm._hilbert_ot import check_functions


def density_mse(
    samples: Float[Array, "n ..."], reference: Float[Array, "m ..."], *, bins: int = 50
) -> Float[Array, ""]:
    """MSE between histogram densities of all pointwise values (bins over ``reference``'s range)."""
    check_functions(samples, reference, ("samples", "reference"))
    if bins < 2:
        raise ValueError(f"bins={bins}; expected at least 2 bins")
    lo, hi = jnp.min(reference), jnp.max(reference)
    edges = jnp.linspace(lo, hi, bins + 1)
    width = (hi - lo) / bins

    def density(x):
        counts, _ = jnp.histogram(x.reshape(-1), bins=edges)
        return counts / (x.size * width)

    return jnp.mean((density(samples) - density(reference)) ** 2)


def mean_power_spectrum(samples: Float[Array, "n ..."]) -> Float[Array, " *k"]:
    """Mean over samples of ``|rfftn(f)|^2`` over the grid axes (forward-normalised): ``[k]`` for
    ``[n, grid]`` samples, ``[k1, k2]`` for ``[n, grid1, grid2]`` fields."""
    check_functions(samples, samples, ("samples", "samples"))
    axes = tuple(range(1, samples.ndim))
    return jnp.mean(jnp.abs(jnp.fft.rfftn(samples, axes=axes, norm="forward")) ** 2, axis=0)


def spectrum_mse(
    samples: Float[Array, "n ..."], reference: Float[Array, "m ..."]
) -> Float[Array, ""]:
    """MSE between the mean power spectra of ``samples`` and ``reference``."""
    check_functions(samples, reference, ("samples", "reference"))
    return jnp.mean((mean_power_spectrum(samples) - mean_power_spectrum(reference)) ** 2)


__all__ = ["density_mse", "mean_power_spectrum", "spectrum_mse"]
