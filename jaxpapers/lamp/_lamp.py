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

3. *Which estimates to lag (the default: the denoised prediction).* Step 2 extrapolates the
   data term in :math:`\lambda`; that is justified for a quantity that is a smooth function of
   :math:`\lambda` along the trajectory. The denoised prediction :math:`\hat x_0(x_t)` is: it is
   the data prediction of the probability-flow ODE, whose :math:`\lambda`-derivative is what
   DPM-Solver++(2M) approximates. The data-consistent estimate is not, in general: for DPS,
   :math:`\tilde x_0^{(t)} = \hat x_0^{(t)} - (\zeta/c_t)\,g_t` with :math:`g_t` the gradient of
   the residual norm and :math:`c_t = \partial x_{t'}/\partial x_0` the re-noising slope of the
   step, so after the re-noising (slope :math:`c_t`) the lagged guidance part is

   .. math:: \kappa c_t\big(-\tfrac{\zeta}{c_t}g_t + \tfrac{\zeta}{c_{\rm prev}}g_{\rm prev}\big)
             = -\kappa\zeta\big(g_t - \tfrac{c_t}{c_{\rm prev}}\,g_{\rm prev}\big),

   i.e. DPS's guidance becomes :math:`-\zeta[(1+\kappa)g_t - \kappa (c_t/c_{\rm prev})
   g_{\rm prev}]`. The ratio :math:`c_t/c_{\rm prev}` of step-size normalisations (1.2-2.3 on a
   uniform grid) dominates the lagged difference, not the trajectory's curvature: the
   "correction" amplifies the guidance by a schedule artefact. Lagging :math:`\hat x_0` instead
   gives

   .. math:: x_{t'}^{\rm LAMP} = T\big(x_t,\ \tilde x_0^{(t)} + \kappa(\hat x_0^{(t)} -
             \hat x_0^{(t_{\rm prev})})\big),

   which (for deterministic re-noising) is exactly the DPM-Solver++(2M) step of the unconditional
   flow plus the backbone's residual correction :math:`\alpha_{t'}(1-e^{-h})(\tilde x_0 -
   \hat x_0)`: the abstract's "second-order update plus the residual correction". With no
   measurement (or ``A = 0``) both choices coincide. ``lag="data_consistent"`` keeps the other
   reading available.

4. *One-step risk (bias-variance).* Let :math:`x^\star_{t'}` be the ideal transition and
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

import equinox as eqx
import jax.numpy as jnp
from diffrax._custom_types import Args
from jaxtyping import Array, ArrayLike, Float, Int, PRNGKeyArray

from jaxpapers.core.checks import check_finite
from jaxpapers.core.diffusion import (
    AbstractDiffusionSolver,
    DenoiserTerm,
    LaggedMemory,
    VPSchedule,
    lagged_coefficient,
    lagged_estimate,
)
from jaxpapers.lamp._backbone import PosteriorBackbone, scalar_field
from jaxpapers.lamp._operators import LinearOperator

_LAGS = ("data_consistent", "denoised")
DEFAULT_LAG = "denoised"

LampMemory = LaggedMemory
"""What LAMP carries between steps: the previous differenced estimate, its time, and whether it
is set (:class:`jaxpapers.core.diffusion.LaggedMemory`)."""

__all__ = ["Lamp", "LampMemory", "lagged_coefficient", "lamp"]


class Lamp(AbstractDiffusionSolver):
    """LAMP over a backbone: same estimate, same re-noising, lagged second-order correction.

    A diffrax solver: its step evaluates the :class:`~jaxpapers.core.diffusion.DenoiserTerm`
    through the backbone's estimate and keeps the previous estimate in the solver state.

    Attributes:
      backbone: a :class:`PosteriorBackbone` (DPS, DiffPIR or DDRM).
      strength: :math:`\\gamma` (1: second order; 0: exactly the backbone).
      lag: which consecutive estimates are differenced: ``"denoised"`` (:math:`\\hat x_0`,
        the default: the second-order step of the unconditional flow plus the backbone's
        residual correction) or ``"data_consistent"`` (:math:`\\tilde x_0`).

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxpapers.lamp import DDRM, Lamp, MatrixOperator
      >>> Lamp(DDRM(MatrixOperator(jnp.eye(2, 3)), 0.05)).lag
      'denoised'
    """

    backbone: PosteriorBackbone
    strength: Float[Array, ""] = scalar_field(default=1.0)
    lag: str = eqx.field(static=True, default=DEFAULT_LAG)

    def __check_init__(self) -> None:
        if not isinstance(self.backbone, PosteriorBackbone):
            raise TypeError(
                f"backbone is a {type(self.backbone).__name__}; expected a PosteriorBackbone "
                "(DPS, DiffPIR or DDRM)"
            )
        if self.lag not in _LAGS:
            raise ValueError(f"lag={self.lag!r}; expected one of {_LAGS}")

    @property
    def operator(self) -> LinearOperator:
        return self.backbone.operator

    @property
    def key(self) -> PRNGKeyArray | None:
        return self.backbone.key

    def with_key(self, key: PRNGKeyArray | None) -> Lamp:
        """A copy whose backbone draws its re-noising from ``key``."""
        return eqx.tree_at(lambda s: s.backbone, self, self.backbone.with_key(key))

    def order(self, terms: DenoiserTerm) -> int | None:
        return 2

    def init_memory(self, terms: DenoiserTerm, y0: Float[Array, ...], args: Args) -> LampMemory:
        return LampMemory.empty(y0)

    def corrected_estimate(
        self,
        schedule: VPSchedule,
        x0: Float[Array, ...],
        lagged: Float[Array, ...],
        t: Float[Array, ""],
        t_next: Float[Array, ""],
        memory: LampMemory,
    ) -> Float[Array, ...]:
        """:math:`\\tilde x_0 + \\gamma\\kappa(e_t - e_{t_{\\rm prev}})`, where ``lagged`` is the
        current estimate :math:`e_t` that is differenced (see ``lag``)."""
        return lagged_estimate(schedule, x0, lagged, t, t_next, memory, self.strength)

    def transition(
        self,
        terms: DenoiserTerm,
        x: Float[Array, ...],
        t: Float[Array, ""],
        t_next: Float[Array, ""],
        args: Float[Array, ...],
        memory: LampMemory,
        key: PRNGKeyArray,
        nfe: Int[Array, ""],
    ) -> tuple[Float[Array, ...], LampMemory, Int[Array, ""]]:
        """One LAMP step: the backbone's estimate, the lagged correction, the backbone's
        re-noising (one evaluation of ``terms``)."""
        bb, sch = self.backbone, terms.schedule
        x0, x0_hat, nfe = bb.estimate(terms, x, t, t_next, args, nfe)
        lagged = x0 if self.lag == "data_consistent" else x0_hat
        d = self.corrected_estimate(sch, x0, lagged, t, t_next, memory)
        x_next = bb.renoise_step(sch, x, d, t, t_next, args, key)
        return x_next, LampMemory(lagged, jnp.asarray(t, x.dtype), jnp.ones((), bool)), nfe


def lamp(backbone: PosteriorBackbone, strength: ArrayLike = 1.0, lag: str = DEFAULT_LAG) -> Lamp:
    """Wrap ``backbone`` with LAMP's lagged correction (a sampler usable wherever it is).

    Args:
      backbone: DPS, DiffPIR or DDRM solver.
      strength: :math:`\\gamma`, 1 for the second-order method.
      lag: ``"denoised"`` or ``"data_consistent"`` (see :class:`Lamp`).

    Returns:
      :class:`Lamp`.

    Raises:
      TypeError: ``backbone`` is not a :class:`PosteriorBackbone`.
    """
    check_finite("strength", strength)
    return Lamp(backbone, strength, lag)
