r"""DDIM and DPM-Solver++(2M) as diffrax solvers on a :class:`DenoiserTerm`, and the DDIM step
algebra they share with posterior samplers.

DDIM step (Song, Meng & Ermon 2021) from :math:`t` to :math:`t' < t` given an estimate
:math:`\hat x_0` (:func:`renoise`, noise level :func:`ddim_noise_std`):

.. math:: x_{t'} = \alpha_{t'} \hat x_0 + \sqrt{\sigma_{t'}^2 - c^2}\,
          \frac{x_t - \alpha_t \hat x_0}{\sigma_t} + c\, z, \qquad
          c = \eta\, \frac{\sigma_{t'}}{\sigma_t}\sqrt{1 - \alpha_t^2 / \alpha_{t'}^2},

``eta = 0`` is deterministic DDIM (the first-order exponential integrator of the probability-flow
ODE in data prediction, DPM-Solver++(1)); ``eta = 1`` is DDPM's ancestral step. The map is affine
in :math:`\hat x_0`, which posterior samplers exploit (slope :func:`renoise_x0_coefficient`).

With :math:`\lambda_t = \log(\alpha_t/\sigma_t)` and :math:`h = \lambda_{t'} - \lambda_t`, the
probability-flow ODE in data prediction, integrated exactly in its linear part (Lu et al. 2022),
is :math:`x_{t'} = \tfrac{\sigma_{t'}}{\sigma_t}x_t + \sigma_{t'}\int_{\lambda_t}^{\lambda_{t'}}
e^{\lambda}\hat x_0\,d\lambda`.

* Holding :math:`\hat x_0` constant over the step gives deterministic DDIM (DPM-Solver++(1)),
  first order: :math:`x_{t'} = \tfrac{\sigma_{t'}}{\sigma_t}x_t + \alpha_{t'}(1-e^{-h})\hat x_0`.
  With ``eta > 0`` the step re-noises with fresh noise (DDIM(eta); ``eta = 1`` is DDPM).
* Extrapolating :math:`\hat x_0` linearly in :math:`\lambda` through the previous step's
  prediction gives DPM-Solver++(2M), second order: the constant is replaced by
  :math:`D = \hat x_0^{(t)} + \kappa(\hat x_0^{(t)} - \hat x_0^{(t_{\rm prev})})` with
  :math:`\kappa = h / (2h_{\rm prev})` (:func:`lagged_coefficient`); the first step and a final
  step to :math:`\sigma_{t'} = 0` (:math:`h = \infty`) are first order.

Both use one denoiser evaluation per step; 2M keeps the previous prediction in the solver state.

NaN contract (see :mod:`jaxpapers.core.checks`): the step algebra (:func:`ddim_noise_std`,
:func:`renoise`, :func:`renoise_x0_coefficient`, :func:`lagged_coefficient`,
:func:`lagged_estimate`) runs inside compiled solves and checks no values: NaN in, NaN out
(``sigma_t = 0`` divides by zero); the solve reports a non-finite state in its result.

References:
  Song, Meng & Ermon, Denoising Diffusion Implicit Models, ICLR 2021,
  https://arxiv.org/abs/2010.02502. Lu et al., DPM-Solver++, https://arxiv.org/abs/2211.01095.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from diffrax._custom_types import Args, Y
from jaxtyping import Array, ArrayLike, Bool, Float, PRNGKeyArray

from jaxpapers.core.diffusion._schedule import VPSchedule
from jaxpapers.core.diffusion._solver import AbstractDiffusionSolver
from jaxpapers.core.diffusion._term import DenoiserTerm


def ddim_noise_std(schedule: VPSchedule, t: ArrayLike, t_next: ArrayLike, eta: ArrayLike) -> Array:
    r"""Standard deviation :math:`c` of the fresh noise of a DDIM(:math:`\eta`) step."""
    a, s = schedule.alpha(t), schedule.sigma(t)
    a1, s1 = schedule.alpha(t_next), schedule.sigma(t_next)
    return eta * (s1 / s) * jnp.sqrt(jnp.maximum(1.0 - (a / a1) ** 2, 0.0))


def renoise(
    x: Float[Array, ...],
    x0: Float[Array, ...],
    noise: Float[Array, ...],
    schedule: VPSchedule,
    t: ArrayLike,
    t_next: ArrayLike,
    noise_std: ArrayLike,
) -> Float[Array, ...]:
    r"""The DDIM-type transition, affine in the estimate ``x0``:

    .. math:: x_{t'} = \alpha_{t'} x_0 + \sqrt{\sigma_{t'}^2 - c^2}\,
              \frac{x_t - \alpha_t x_0}{\sigma_t} + c\, z.

    Args:
      x: state :math:`x_t`.
      x0: estimate of the clean sample (denoised or data-consistent), same shape.
      noise: standard normal :math:`z`, same shape.
      schedule: the VP schedule.
      t, t_next: times, ``t_next < t``.
      noise_std: :math:`c \in [0, \sigma_{t'}]`.

    Returns:
      :math:`x_{t'}`, same shape as ``x``.
    """
    a, s = schedule.alpha(t), schedule.sigma(t)
    a1, s1 = schedule.alpha(t_next), schedule.sigma(t_next)
    k = jnp.sqrt(jnp.maximum(s1**2 - noise_std**2, 0.0))
    return a1 * x0 + k * (x - a * x0) / s + noise_std * noise


def renoise_x0_coefficient(
    schedule: VPSchedule, t: ArrayLike, t_next: ArrayLike, noise_std: ArrayLike
) -> Array:
    r""":math:`\partial x_{t'} / \partial x_0 = \alpha_{t'} - \sqrt{\sigma_{t'}^2 - c^2}\,
    \alpha_t / \sigma_t` of :func:`renoise` (a scalar)."""
    a, s = schedule.alpha(t), schedule.sigma(t)
    a1, s1 = schedule.alpha(t_next), schedule.sigma(t_next)
    return a1 - jnp.sqrt(jnp.maximum(s1**2 - noise_std**2, 0.0)) * a / s


def lagged_coefficient(
    schedule: VPSchedule, t_prev: ArrayLike, t: ArrayLike, t_next: ArrayLike
) -> Array:
    r""":math:`\kappa = h / (2 h_{\rm prev})` in log-SNR time; 0 when :math:`h = \infty`.

    Args:
      schedule: VP schedule.
      t_prev, t, t_next: three consecutive decreasing times.

    Returns:
      Scalar coefficient of the lagged difference of DPM-Solver++(2M).

    Examples:
      >>> from jaxpapers.core.diffusion import VPSchedule, lagged_coefficient
      >>> round(float(lagged_coefficient(VPSchedule(), 0.9, 0.8, 0.7)), 3)
      0.443
    """
    lam_prev, lam, lam_next = (
        schedule.log_snr(t_prev),
        schedule.log_snr(t),
        schedule.log_snr(t_next),
    )
    h, h_prev = lam_next - lam, lam - lam_prev
    ok = jnp.isfinite(h) & (h_prev > 0)
    return jnp.where(ok, h / (2.0 * jnp.where(ok, h_prev, 1.0)), 0.0)


def _scalar(value: ArrayLike) -> Array:
    return jnp.asarray(value)


class DDIM(AbstractDiffusionSolver):
    """DDIM(eta) / DDPM ancestral sampling as a diffrax solver (one evaluation a step).

    Attributes:
      eta: stochasticity, ``0`` (deterministic DDIM) to ``1`` (DDPM ancestral); an array leaf.
      key: PRNG key of the fresh noise (unused when ``eta = 0``).

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxpapers.core.diffusion import DDIM, DenoiserTerm, VPSchedule, solve_diffusion
      >>> term = DenoiserTerm(lambda x, t: jnp.zeros_like(x), VPSchedule())
      >>> sol = solve_diffusion(term, DDIM(), jnp.full(2, 3.0), jnp.linspace(1.0, 0.0, 5))
      >>> [round(float(v), 1) for v in sol.x]  # eps = 0: x0_hat = x / alpha_1
      [456.5, 456.5]
    """

    eta: Float[Array, ""] = eqx.field(converter=_scalar, default=0.0)
    key: PRNGKeyArray | None = eqx.field(default=None, kw_only=True)

    def transition(self, terms, x, t, t_next, args, memory, key, nfe):
        # Signature and types: AbstractDiffusionSolver.transition.
        x0, _, nfe = terms.denoise(x, t, args, nfe)
        c = ddim_noise_std(terms.schedule, t, t_next, self.eta).astype(x.dtype)
        z = jax.random.normal(key, x.shape, x.dtype)
        return renoise(x, x0, z, terms.schedule, t, t_next, c), memory, nfe


class LaggedMemory(NamedTuple):
    """The previous prediction carried by a lagged (multistep) solver.

    Attributes:
      prev_x0: the previous step's prediction (zeros before the first step).
      prev_t: the previous step's time.
      has_prev: whether ``prev_x0`` is set.
    """

    prev_x0: Float[Array, ...]
    prev_t: Float[Array, ""]
    has_prev: Bool[Array, ""]

    @classmethod
    def empty(cls, x: Float[Array, ...]) -> LaggedMemory:
        """The memory before the first step."""
        return cls(jnp.zeros_like(x), jnp.zeros((), x.dtype), jnp.zeros((), bool))


def lagged_estimate(
    schedule: VPSchedule,
    estimate: Float[Array, ...],
    lagged: Float[Array, ...],
    t: Float[Array, ""],
    t_next: Float[Array, ""],
    memory: LaggedMemory,
    strength: ArrayLike,
) -> Float[Array, ...]:
    r""":math:`e + \gamma\kappa\,(\ell_t - \ell_{t_{\rm prev}})` with :math:`\kappa` of
    :func:`lagged_coefficient`; ``estimate`` (:math:`e`) unchanged on the first step.

    Args:
      schedule: VP schedule.
      estimate: the step's estimate of :math:`x_0` that is corrected.
      lagged: the current value :math:`\ell_t` of the differenced quantity.
      t, t_next: current and next time.
      memory: the previous value :math:`\ell_{t_{\rm prev}}` and its time.
      strength: :math:`\gamma` (1: second order; 0: no correction).

    Returns:
      The corrected estimate, same shape as ``estimate``.
    """
    kappa = strength * lagged_coefficient(schedule, memory.prev_t, t, t_next)
    kappa = jnp.where(memory.has_prev, kappa, 0.0).astype(estimate.dtype)
    return estimate + kappa * (lagged - memory.prev_x0)


class DPMSolverPP2M(AbstractDiffusionSolver):
    r"""DPM-Solver++(2M) (multistep, data prediction) as a diffrax solver, with a strength.

    Attributes:
      strength: :math:`\gamma` on the lagged difference (1: DPM-Solver++(2M); 0: DDIM).
      eta: re-noising stochasticity of the underlying DDIM(eta) map (0: the ODE solver).
      key: PRNG key of the fresh noise (unused when ``eta = 0``).

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxpapers.core.diffusion import (
      ...     DenoiserTerm, DPMSolverPP2M, VPSchedule, solve_diffusion)
      >>> term = DenoiserTerm(lambda x, t: 0.5 * x, VPSchedule())
      >>> sol = solve_diffusion(term, DPMSolverPP2M(), jnp.ones(2), jnp.linspace(1.0, 0.01, 9))
      >>> int(sol.nfe), bool(sol.memory.has_prev)
      (8, True)
    """

    strength: Float[Array, ""] = eqx.field(converter=_scalar, default=1.0)
    eta: Float[Array, ""] = eqx.field(converter=_scalar, default=0.0)
    key: PRNGKeyArray | None = eqx.field(default=None, kw_only=True)

    def order(self, terms: DenoiserTerm) -> int | None:
        return 2

    def init_memory(self, terms: DenoiserTerm, y0: Y, args: Args) -> LaggedMemory:
        return LaggedMemory.empty(y0)

    def transition(self, terms, x, t, t_next, args, memory, key, nfe):
        # Signature and types: AbstractDiffusionSolver.transition.
        sch = terms.schedule
        x0, _, nfe = terms.denoise(x, t, args, nfe)
        d = lagged_estimate(sch, x0, x0, t, t_next, memory, self.strength)
        c = ddim_noise_std(sch, t, t_next, self.eta).astype(x.dtype)
        z = jax.random.normal(key, x.shape, x.dtype)
        x_next = renoise(x, d, z, sch, t, t_next, c)
        return x_next, LaggedMemory(x0, t, jnp.ones((), bool)), nfe
