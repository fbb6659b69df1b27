r"""LAMP: the lagged second-order correction as a plug-in over a posterior-sampling backbone.

Derivation (our reading of the abstract; the paper text is not available to us).

1. *First-order discretisation.* Write :math:`\lambda_t = \log(\alpha_t/\sigma_t)` and
   :math:`h = \lambda_{t'} - \lambda_t > 0`. The probability-flow ODE in data prediction,
   integrated exactly in its linear part (DPM-Solver++, Lu et al. 2022), gives with the
   denoised prediction held constant over the step

   .. math:: x_{t'} = \frac{\sigma_{t'}}{\sigma_t} x_t
             + \alpha_{t'}(1 - e^{-h})\,\hat x_0(x_t),

   which is deterministic DDIM. Every backbone here re-noises a *data-consistent estimate*
   :math:`\tilde x_0` through a map :math:`T(x_t, \tilde x_0)` that is affine in
   :math:`\tilde x_0` (DPS, DiffPIR, DDRM; see ``_backbone.py``). For the deterministic
   re-noising :math:`T = \text{DDIM}`,

   .. math:: x_{t'} = \underbrace{\tfrac{\sigma_{t'}}{\sigma_t} x_t
             + \alpha_{t'}(1-e^{-h})\hat x_0}_{\text{first-order step}}
             + \underbrace{\alpha_{t'}(1-e^{-h})(\tilde x_0 - \hat x_0)}_{\text{residual
             correction}},

   the abstract's "first-order discretisation plus a residual correction capturing the mismatch
   between the denoised prediction and the data-consistent estimate".

2. *Second-order discretisation.* DPM-Solver++(2M) replaces the constant data term by its
   linear extrapolation in :math:`\lambda` through the previous estimate at :math:`t_{\rm prev}`
   (:math:`h_{\rm prev} = \lambda_t - \lambda_{t_{\rm prev}}`, :math:`r = h_{\rm prev}/h`):
   :math:`D = \tilde x_0^{(t)} + \tfrac{1}{2r}(\tilde x_0^{(t)} - \tilde x_0^{(t_{\rm prev})})`.
   Applied to the data-consistent estimates this adds the *lagged temporal correction*

   .. math:: x_{t'}^{\rm LAMP} = T\big(x_t,\ \tilde x_0^{(t)} + \kappa\,
             (\tilde x_0^{(t)} - \tilde x_0^{(t_{\rm prev})})\big), \qquad
             \kappa = \gamma\,\frac{h}{2 h_{\rm prev}},

   with a strength :math:`\gamma` (1 is the second-order method; 0 switches the correction
   off and gives the backbone bit for bit). Because :math:`T` is affine in its second argument,
   this equals the backbone update plus :math:`\kappa\,\partial_{x_0}T\,\Delta`: the same
   re-noising and the same noise draws, so the sampler keeps the backbone's structure (its
   stochastic part and its data step are untouched), and it needs no extra denoiser call, only
   the previous estimate carried in memory. On the first step (no previous estimate) and on a
   final step to :math:`\sigma_{t'} = 0` (:math:`h = \infty`) the step is first order
   (:math:`\kappa = 0`), as DPM-Solver++ does with ``lower_order_final``.

3. *One-step risk (bias-variance).* Let :math:`x^\star_{t'}` be the ideal transition and
   :math:`e = T(x_t, \tilde x_0^{(t)}) - x^\star_{t'}` the backbone's one-step error, and
   :math:`g = \partial_{x_0}T\,\Delta` the lagged increment. Then

   .. math:: R(\kappa) = \mathbb E\lVert e + \kappa g\rVert^2
             = R(0) + 2\kappa\,\mathbb E\langle e, g\rangle + \kappa^2\,\mathbb E\lVert g\rVert^2,

   so LAMP lowers the risk iff :math:`0 < \kappa < 2\kappa^\star`,
   :math:`\kappa^\star = -\mathbb E\langle e, g\rangle / \mathbb E\lVert g\rVert^2`: the
   correction must point against the first-order bias (:math:`\mathbb E\langle e, g\rangle < 0`),
   and its gain is limited by the variance it injects (:math:`\mathbb E\lVert g\rVert^2`, large
   when consecutive estimates fluctuate, e.g. with noisy measurements). See
   :func:`jaxpapers.lamp.one_step_risk`.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Bool, Float

from jaxpapers.core.diffusion import AbstractReverseStep, VPSchedule
from jaxpapers.lamp._backbone import PosteriorBackbone, scalar_field

_LAGS = ("data_consistent", "denoised")


class LampMemory(NamedTuple):
    """What LAMP carries between steps.

    Attributes:
      prev_x0: previous data-consistent estimate (zeros before the first step).
      prev_t: time of the previous step (``t_max`` placeholder before the first step).
      has_prev: whether ``prev_x0`` is set.
    """

    prev_x0: Float[Array, ...]
    prev_t: Float[Array, ""]
    has_prev: Bool[Array, ""]


def lagged_coefficient(
    schedule: VPSchedule, t_prev: ArrayLike, t: ArrayLike, t_next: ArrayLike
) -> Array:
    r""":math:`\kappa/\gamma = h / (2 h_{\rm prev})` in log-SNR time; 0 when :math:`h = \infty`.

    Args:
      schedule: VP schedule.
      t_prev, t, t_next: three consecutive decreasing times.

    Returns:
      Scalar coefficient of the lagged difference.
    """
    lam_prev, lam, lam_next = (
        schedule.log_snr(t_prev),
        schedule.log_snr(t),
        schedule.log_snr(t_next),
    )
    h, h_prev = lam_next - lam, lam - lam_prev
    ok = jnp.isfinite(h) & (h_prev > 0)
    return jnp.where(ok, h / (2.0 * jnp.where(ok, h_prev, 1.0)), 0.0)


class Lamp(AbstractReverseStep):
    """LAMP over a backbone: same estimate, same re-noising, lagged second-order correction.

    Attributes:
      backbone: a :class:`PosteriorBackbone` (DPS, DiffPIR or DDRM).
      strength: :math:`\\gamma` (1: second order; 0: exactly the backbone).
      lag: which consecutive estimates are differenced: ``"data_consistent"``
        (:math:`\\tilde x_0`, the default) or ``"denoised"`` (:math:`\\hat x_0`: the second-order
        step of the unconditional flow plus the backbone's residual correction).
    """

    backbone: PosteriorBackbone
    strength: Array = scalar_field(default=1.0)
    lag: str = eqx.field(static=True, default="data_consistent")

    def __check_init__(self) -> None:
        if self.lag not in _LAGS:
            raise ValueError(f"lag={self.lag!r}; expected one of {_LAGS}")

    @property
    def operator(self):
        return self.backbone.operator

    @property
    def schedule(self) -> VPSchedule:
        return self.backbone.schedule

    def init_memory(self, x: Array, args: Array) -> LampMemory:
        return LampMemory(jnp.zeros_like(x), jnp.zeros((), x.dtype), jnp.zeros((), bool))

    def corrected_estimate(
        self, x0: Array, lagged: Array, t: Array, t_next: Array, memory: LampMemory
    ) -> Array:
        """:math:`\\tilde x_0 + \\kappa(e_t - e_{t_{\\rm prev}})`, where ``lagged`` is the
        current estimate :math:`e_t` that is differenced (see ``lag``)."""
        kappa = self.strength * lagged_coefficient(self.schedule, memory.prev_t, t, t_next)
        kappa = jnp.where(memory.has_prev, kappa, 0.0).astype(x0.dtype)
        return x0 + kappa * (lagged - memory.prev_x0)

    def __call__(self, x, t, t_next, args, memory, key, nfe):
        x0, x0_hat, nfe = self.backbone.estimate(x, t, t_next, args, nfe)
        lagged = x0 if self.lag == "data_consistent" else x0_hat
        d = self.corrected_estimate(x0, lagged, t, t_next, memory)
        x_next = self.backbone.transition(x, d, t, t_next, args, key)
        return x_next, LampMemory(lagged, jnp.asarray(t, x.dtype), jnp.ones((), bool)), nfe


def lamp(
    backbone: PosteriorBackbone, strength: ArrayLike = 1.0, lag: str = "data_consistent"
) -> Lamp:
    """Wrap ``backbone`` with LAMP's lagged correction (a sampler usable wherever it is).

    Args:
      backbone: DPS, DiffPIR or DDRM step.
      strength: :math:`\\gamma`, 1 for the second-order method.
      lag: ``"data_consistent"`` or ``"denoised"`` (see :class:`Lamp`).

    Returns:
      :class:`Lamp`.
    """
    if not isinstance(backbone, PosteriorBackbone):
        raise ValueError(
            f"backbone is a {type(backbone).__name__}; expected a PosteriorBackbone "
            "(DPS, DiffPIR or DDRM)"
        )
    return Lamp(backbone, strength, lag)
