r"""DDRM: denoising diffusion restoration models (Kawar et al., NeurIPS 2022), in VP coordinates.

DDRM works in the variance-exploding frame :math:`\bar x_t = x_t/\alpha_t` with noise level
:math:`\bar\sigma_t = \sigma_t/\alpha_t` and in the SVD basis of :math:`A = U\,\mathrm{diag}(s)
V^\top`: spectral coordinates :math:`c = V^\top x`, :math:`\bar y = (U^\top y)/s`. With the
denoised :math:`\hat c_0 = V^\top\hat x_0` and :math:`\bar\sigma' = \bar\sigma_{t'}`, the three
cases of Kawar et al. (their eq. 7-8) are written as a data-consistent estimate plus re-noising:

* null space (:math:`s_i = 0`): :math:`\tilde c_i = \hat c_{0,i}`,
  :math:`c'_i = \tilde c_i + \sqrt{1-\eta^2}\,\bar\sigma'(c_{t,i} - \tilde c_i)/\bar\sigma_t
  + \eta\bar\sigma' z_i`;
* :math:`\bar\sigma' < \sigma_y / s_i`: :math:`\tilde c_i = (1-w_i)\hat c_{0,i} + w_i\bar y_i`
  with :math:`w_i = \sqrt{1-\eta^2}\,\bar\sigma' s_i/\sigma_y`, and :math:`c'_i = \tilde c_i +
  \eta\bar\sigma' z_i`;
* :math:`\bar\sigma' \ge \sigma_y / s_i`: :math:`\tilde c_i = (1-\eta_b)\hat c_{0,i} +
  \eta_b\bar y_i`, :math:`c'_i = \tilde c_i + \sqrt{\bar\sigma'^2 - \eta_b^2\sigma_y^2/s_i^2}
  \, z_i`.

The re-noising is affine in :math:`\tilde c`, and :math:`x_{t'} = \alpha_{t'} V c'`.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxpapers.core.diffusion import VPSchedule
from jaxpapers.lamp._backbone import PosteriorBackbone, scalar_field
from jaxpapers.lamp._operators import LinearOperator


class DDRM(PosteriorBackbone):
    """DDRM step, as a diffrax solver.

    Attributes:
      operator: the measurement operator.
      sigma_y: measurement noise standard deviation.
      eta: null-space / low-SNR noise mixing :math:`\\eta` (paper default 0.85).
      eta_b: weight of the measurement in the high-SNR directions :math:`\\eta_b` (default 1).
      key: PRNG key of the re-noising (set by :func:`sample_posterior`).

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxpapers.lamp import DDRM, MatrixOperator
      >>> round(float(DDRM(MatrixOperator(jnp.eye(2, 3)), 0.05).eta), 2)
      0.85
    """

    operator: LinearOperator
    sigma_y: Float[Array, ""] = scalar_field()
    eta: Float[Array, ""] = scalar_field(default=0.85)
    eta_b: Float[Array, ""] = scalar_field(default=1.0)
    key: PRNGKeyArray | None = eqx.field(default=None, kw_only=True)

    def _spectral(self, schedule: VPSchedule, t_next: Array) -> tuple[Array, Array, Array]:
        """(range mask, data weight w, range noise std) per singular direction."""
        s = self.operator.s
        pos = s > 0
        sig1 = schedule.sigma(t_next) / schedule.alpha(t_next)
        s_safe = jnp.where(pos, s, 1.0)
        noise_ratio = self.sigma_y / s_safe
        high = sig1 >= noise_ratio
        w_low = jnp.sqrt(1.0 - self.eta**2) * sig1 * s_safe / jnp.maximum(self.sigma_y, 1e-30)
        w = jnp.where(pos, jnp.where(high, self.eta_b, w_low), 0.0)
        std_high = jnp.sqrt(jnp.maximum(sig1**2 - self.eta_b**2 * noise_ratio**2, 0.0))
        std = jnp.where(pos, jnp.where(high, std_high, self.eta * sig1), 0.0)
        return pos, w, std

    def estimate(self, term, x, t, t_next, y, nfe):
        x0, _, nfe = term.denoise(x, t, y, nfe)
        op = self.operator
        pos, w, _ = self._spectral(term.schedule, t_next)
        ybar = jnp.where(pos, op.u.T @ y.reshape(-1) / jnp.where(pos, op.s, 1.0), 0.0)
        flat = x0.reshape(-1)
        c0 = op.vt @ flat
        return (flat + op.vt.T @ (w * (ybar - c0))).reshape(x0.shape), x0, nfe

    def renoise_step(self, schedule: VPSchedule, x, x0, t, t_next, y, key):
        op = self.operator
        pos, _, std = self._spectral(schedule, t_next)
        a, a1 = schedule.alpha(t), schedule.alpha(t_next)
        sig, sig1 = schedule.sigma(t) / a, schedule.sigma(t_next) / a1
        vt = op.vt

        def null(v):
            return v - vt.T @ (pos * (vt @ v))

        flat0 = x0.reshape(-1)
        z = jax.random.normal(key, flat0.shape, flat0.dtype)
        direction = null(x.reshape(-1) / a - flat0)
        out = (
            flat0
            + jnp.sqrt(1.0 - self.eta**2) * (sig1 / sig) * direction
            + self.eta * sig1 * null(z)
            + vt.T @ (std * (vt @ z))
        )
        return (a1 * out).reshape(x.shape)
