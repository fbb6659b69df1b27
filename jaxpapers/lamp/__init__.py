"""P07 LAMP: lagged second-order diffusion posterior sampling over DPS, DiffPIR and DDRM.

``lamp(backbone)`` wraps a posterior-sampling step with LAMP's lagged correction; both run
through :func:`sample_posterior` with the same number of denoiser evaluations. The derivation
(first-order step + residual correction, the DPM-Solver++(2M)-style lagged term, the one-step
bias-variance risk) is in the docstring of ``jaxpapers/lamp/_lamp.py``.

What the miniature experiments measured (``results/RESULTS.md``, ``jaxpapers reproduce P07``):
with no measurement the lagged term is DPM-Solver++(2M) and clearly helps (``unconditional_2m``);
over the posterior backbones it mostly does not: on the exact mixture test bed (d = 8, 80, 800)
it raises the distance to the posterior for every backbone, and on digits the sign depends on
backbone and task (e.g. +0.5 dB over DDRM for deblurring, -3 dB over DPS for inpainting). The data
steps make consecutive data-consistent estimates fluctuate, which the one-step risk analysis
(``one_step_risk``) identifies as the regime where the correction hurts. ``strength`` < 1 and
``lag="denoised"`` (difference the denoised predictions instead) shrink the harm on the mixture
(``mixture_ablation_d80``: the excess distance grows monotonically with the strength) but turn
no backbone into a win there.

Example::

    bb = DDRM(CountingDenoiser(eps_fn), VPSchedule(), MatrixOperator(A), sigma_y=0.05)
    out = sample_posterior(lamp(bb), y, key=key, num_steps=20)   # out.x, out.nfe == 20
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
