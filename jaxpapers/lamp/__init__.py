r"""P07 LAMP: lagged second-order diffusion posterior sampling over DPS, DiffPIR and DDRM.

``lamp(backbone)`` wraps a posterior-sampling step with LAMP's lagged correction; both run
through :func:`sample_posterior` with the same number of denoiser evaluations. The derivation
(first-order step + residual correction, the DPM-Solver++(2M)-style lagged term, the one-step
bias-variance risk) is in the docstring of ``jaxpapers/lamp/_lamp.py``.

Design: the denoiser lives in a :class:`~jaxpapers.core.diffusion.DenoiserTerm` (the
probability-flow vector field of the prior, a diffrax term); DPS, DiffPIR, DDRM and
:class:`Lamp` are custom ``diffrax.AbstractSolver``s whose ``step`` evaluates that term and keeps
LAMP's previous estimate, the PRNG key and the evaluation count in the solver state, so
``SaveAt(ts=...)`` trajectories (``save_ts``), progress meters and adjoints come from diffrax.
:func:`sample_posterior` is the one sampling loop: it is jit- and vmap-friendly (the strength
and the backbones' knobs are array leaves), so a batch of chains over knobs, strengths and
measurements is one ``jax.vmap`` of it.

Lag: LAMP differences the *denoised* predictions by default (``lag="denoised"``): the
second-order update of the unconditional flow plus the backbone's residual correction. Lagging
the data-consistent estimates (``lag="data_consistent"``) turns DPS's guidance into
:math:`-\zeta[(1+\kappa)g_t - \kappa(c_t/c_{\rm prev})g_{\rm prev}]`, dominated by the ratio of
re-noising slopes rather than by the trajectory (derivation in ``_lamp.py``).

What the miniature experiments measure (``jaxpapers reproduce P07``; their design is in
``jaxpapers.lamp.experiments``): two distances per sampler, to the exact posterior
(``mixture_*``, ``gaussian_*``) and to the sampler's own output at ``ref_nfe`` steps (``*_disc``:
the discretisation error that a second-order correction targets), each with its own verdict;
knobs tuned per sampler over widened grids, with grid-edge flags in the extras. ``results/P07``
has every number, ``results/P07/NOTES.md`` what they showed over time.

Example::

    term = DenoiserTerm(eps_fn, VPSchedule())          # the denoiser lives in a diffrax term
    bb = DDRM(MatrixOperator(A), sigma_y=0.05)          # backbones are diffrax solvers
    out = sample_posterior(term, lamp(bb), y, key=key, num_steps=20)   # out.nfe == 20
"""

from jaxpapers.lamp._backbone import PosteriorBackbone, PosteriorSample, sample_posterior
from jaxpapers.lamp._ddrm import DDRM
from jaxpapers.lamp._diffpir import DiffPIR
from jaxpapers.lamp._dps import DPS
from jaxpapers.lamp._lamp import Lamp, LampMemory, lagged_coefficient, lamp
from jaxpapers.lamp._operators import (
    AveragePool,
    GaussianBlur,
    Inpainting,
    LinearOperator,
    MatrixOperator,
    measure,
)
from jaxpapers.lamp._risk import OneStepRisk, monte_carlo_one_step_risk, one_step_risk

__all__ = [
    "DDRM",
    "DPS",
    "AveragePool",
    "DiffPIR",
    "GaussianBlur",
    "Inpainting",
    "Lamp",
    "LampMemory",
    "LinearOperator",
    "MatrixOperator",
    "OneStepRisk",
    "PosteriorBackbone",
    "PosteriorSample",
    "lagged_coefficient",
    "lamp",
    "measure",
    "monte_carlo_one_step_risk",
    "one_step_risk",
    "sample_posterior",
]
