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

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxpapers.core.diffusion import VPSchedule, ddim_noise_std, renoise, renoise_x0_coefficient
from jaxpapers.lamp._backbone import PosteriorBackbone, scalar_field
from jaxpapers.lamp._operators import LinearOperator


class DPS(PosteriorBackbone):
    """DPS step over DDPM (``eta = 1``) or DDIM(``eta``) re-noising, as a diffrax solver.

    Attributes:
      operator: the measurement operator.
      sigma_y: measurement noise standard deviation (DPS does not use it; kept for the
        interface).
      zeta: step size on the gradient of the residual norm.
      eta: re-noising stochasticity (1 = DDPM ancestral, the DPS default).
      key: PRNG key of the re-noising (set by :func:`sample_posterior`).

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxpapers.lamp import DPS, MatrixOperator
      >>> float(DPS(MatrixOperator(jnp.eye(2, 3)), 0.05, zeta=0.5).zeta)
      0.5
    """

    operator: LinearOperator
    sigma_y: Float[Array, ""] = scalar_field()
    zeta: Float[Array, ""] = scalar_field(default=1.0)
    eta: Float[Array, ""] = scalar_field(default=1.0)
    key: PRNGKeyArray | None = eqx.field(default=None, kw_only=True)

    def estimate(self, term, x, t, t_next, y, nfe):
        def x0_of(z):
            x0, _, count = term.denoise(z, t, y, nfe)
            return x0, count

        x0, vjp, nfe = jax.vjp(x0_of, x, has_aux=True)
        resid = y - self.operator.apply(x0)
        norm = jnp.sqrt(jnp.sum(resid**2))
        direction = self.operator.adjoint(-resid / jnp.maximum(norm, 1e-12))
        (grad,) = vjp(direction)
        sch = term.schedule
        c = renoise_x0_coefficient(sch, t, t_next, ddim_noise_std(sch, t, t_next, self.eta))
        return x0 - (self.zeta / c) * grad, x0, nfe

    def renoise_step(self, schedule: VPSchedule, x, x0, t, t_next, y, key):
        z = jax.random.normal(key, x.shape, x.dtype)
        std = ddim_noise_std(schedule, t, t_next, self.eta)
        return renoise(x, x0, z, schedule, t, t_next, std)
