r"""DiffPIR: denoising diffusion models for plug-and-play image restoration (Zhu et al., CVPR
2023).

Data step (closed-form proximal operator), with :math:`\bar\sigma_t = \sigma_t / \alpha_t` and
:math:`\rho_t = \lambda \sigma_y^2 / \bar\sigma_t^2`:

.. math:: \tilde x_0 = \arg\min_z \lVert y - A z\rVert^2 + \rho_t \lVert z - \hat x_0\rVert^2
          = \hat x_0 + V \operatorname{diag}\!\Big(\frac{s}{s^2 + \rho_t}\Big)
            (U^\top y - \operatorname{diag}(s) V^\top \hat x_0).

Re-noising with the zeta-mixed noise, :math:`\hat\epsilon = (x_t - \alpha_t\tilde x_0)/\sigma_t`:

.. math:: x_{t'} = \alpha_{t'}\tilde x_0 + \sigma_{t'}\big(\sqrt{1-\zeta}\,\hat\epsilon
          + \sqrt{\zeta}\, z\big),

i.e. :func:`renoise` with noise standard deviation :math:`\sigma_{t'}\sqrt\zeta`.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxpapers.core.diffusion import VPSchedule, renoise
from jaxpapers.lamp._backbone import PosteriorBackbone, scalar_field
from jaxpapers.lamp._operators import LinearOperator


class DiffPIR(PosteriorBackbone):
    """DiffPIR step, as a diffrax solver.

    Attributes:
      operator: the measurement operator.
      sigma_y: measurement noise standard deviation.
      lam: regularisation weight :math:`\\lambda` of the proximal step.
      zeta: noise mixing :math:`\\zeta \\in [0, 1]` (0: deterministic, 1: fresh noise).
      key: PRNG key of the re-noising (set by :func:`sample_posterior`).

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxpapers.lamp import DiffPIR, MatrixOperator
      >>> float(DiffPIR(MatrixOperator(jnp.eye(2, 3)), 0.05, lam=3.0).lam)
      3.0
    """

    operator: LinearOperator
    sigma_y: Float[Array, ""] = scalar_field()
    lam: Float[Array, ""] = scalar_field(default=1.0)
    zeta: Float[Array, ""] = scalar_field(default=0.3)
    key: PRNGKeyArray | None = eqx.field(default=None, kw_only=True)

    def estimate(self, term, x, t, t_next, y, nfe):
        x0, _, nfe = term.denoise(x, t, y, nfe)
        op = self.operator
        sbar2 = (term.schedule.sigma(t) / term.schedule.alpha(t)) ** 2
        rho = self.lam * self.sigma_y**2 / sbar2
        s = op.s
        coef = jnp.where(s > 0, s / jnp.where(s > 0, s**2 + rho, 1.0), 0.0)
        flat = x0.reshape(-1)
        spec = coef * (op.u.T @ y.reshape(-1) - s * (op.vt @ flat))
        return (flat + op.vt.T @ spec).reshape(x0.shape), x0, nfe

    def renoise_step(self, schedule: VPSchedule, x, x0, t, t_next, y, key):
        z = jax.random.normal(key, x.shape, x.dtype)
        std = schedule.sigma(t_next) * jnp.sqrt(self.zeta)
        return renoise(x, x0, z, schedule, t, t_next, std)
