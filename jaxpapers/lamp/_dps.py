r"""DPS: diffusion posterior sampling (Chung et al., ICLR 2023).

.. math:: x_{t'} = \mathrm{DDPM}(x_t, \hat x_0) - \zeta\, \nabla_{x_t}
          \lVert y - A\hat x_0(x_t) \rVert_2 .

The DDPM/DDIM re-noising :math:`T(x_t, x_0)` is affine in :math:`x_0` with slope
:math:`c = \partial x_{t'}/\partial x_0` (:func:`renoise_x0_coefficient`), so DPS is exactly
:math:`T(x_t, \tilde x_0)` with the data-consistent estimate
:math:`\tilde x_0 = \hat x_0 - (\zeta / c)\,\nabla_{x_t}\lVert y - A\hat x_0(x_t)\rVert`.
The gradient is one reverse-mode pass through the denoiser and counts with its forward pass as one
evaluation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array

from jaxpapers.core.diffusion import ddim_noise_std, renoise, renoise_x0_coefficient
from jaxpapers.lamp._backbone import PosteriorBackbone, scalar_field


class DPS(PosteriorBackbone):
    """DPS step over DDPM (``eta = 1``) or DDIM(``eta``) re-noising.

    Attributes:
      zeta: step size on the gradient of the residual norm.
      eta: re-noising stochasticity (1 = DDPM ancestral, the DPS default).
    """

    zeta: Array = scalar_field(default=1.0)
    eta: Array = scalar_field(default=1.0)

    def estimate(self, x, t, t_next, y, nfe):
        def x0_of(z):
            x0, _, count = self.denoiser.denoise(z, t, self.schedule, nfe)
            return x0, count

        x0, vjp, nfe = jax.vjp(x0_of, x, has_aux=True)
        resid = y - self.operator.apply(x0)
        norm = jnp.sqrt(jnp.sum(resid**2))
        direction = self.operator.adjoint(-resid / jnp.maximum(norm, 1e-12))
        (grad,) = vjp(direction)
        c = renoise_x0_coefficient(self.schedule, t, t_next, self._noise_std(t, t_next))
        return x0 - (self.zeta / c) * grad, x0, nfe

    def _noise_std(self, t: Array, t_next: Array) -> Array:
        return ddim_noise_std(self.schedule, t, t_next, self.eta)

    def transition(self, x, x0, t, t_next, y, key):
        z = jax.random.normal(key, x.shape, x.dtype)
        return renoise(x, x0, z, self.schedule, t, t_next, self._noise_std(t, t_next))
