"""Shared pieces of the P07 experiments: the configuration of a run size, the samplers under test,
tuning grids and the paired verdict rule."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np

from jaxpapers.core.diffusion import VPSchedule
from jaxpapers.core.experiment import AllOf, Threshold
from jaxpapers.lamp import DDRM, DPS, DiffPIR, LinearOperator, lamp

SCH = VPSchedule()
BACKBONES = ("DPS", "DiffPIR", "DDRM")
LEVELS = ("low NFE", "high NFE")
# One tuned knob per backbone. The grids were widened until the optimum is interior where the
# knob's domain allows it: the first 4-point grids had DPS zeta and DiffPIR lambda at their lowest
# value and DDRM eta at 1, the end of its domain [0, 1] (at eta = 1 the DDRM step ignores x_t and
# LAMP extrapolates the estimate at full weight), so eta's grid reaches down to 0.
GRIDS = {
    "DPS": ("zeta", (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)),
    "DiffPIR": ("lam", (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)),
    "DDRM": ("eta", (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)),
}


class DigitsModel(NamedTuple):
    """Denoiser of the digits test bed: ``kind`` ``"unet"`` (U-Net channels per level, Adam
    steps, batch size, checkpoint interval) or ``"kernel"`` (the exact denoiser of
    ``kde_components`` training digits smoothed by a Gaussian kernel of per-pixel variance
    ``kde_var``; no training)."""

    channels: tuple[int, ...] = ()
    steps: int = 0
    batch: int = 0
    checkpoint_every: int = 0
    kind: str = "unet"
    kde_var: float = 0.05
    kde_components: int = 200


class DiscNfe(NamedTuple):
    """Sizes of the discretisation-error-vs-NFE study (``disc_nfe_*``, sized for a CPU; the
    same at every run size: the study runs at ``--full`` only, or when named explicitly)."""

    nfe: tuple[int, ...] = (5, 10, 20, 40)
    ref_nfe: int = 400
    problems: int = 2
    samples: int = 512


DISC_NFE = DiscNfe()


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """Every size-dependent setting of the P07 experiments at one run size.

    Attributes:
      nfe: (low, high) evaluation budgets of the synthetic test beds.
      ref_nfe: steps of each sampler's own converged output (the discretisation reference).
      problems: measurement problems per seed.
      samples: posterior samples per problem.
      tune: whether to tune the knob over ``GRIDS`` (otherwise: the grid's middle value).
      risk_steps: step counts of the one-step risk analysis.
      digits: the digits denoiser.
      digits_nfe: steps of the digits samplers.
      digits_images: test images per seed (and validation images for tuning).
      samples_by_dim: ``((dim, samples), ...)``: posterior samples per problem of the beds of
        these dimensions, instead of ``samples`` (quick mode runs the d = 80 bed smaller).
      disc_nfe: the discretisation-error-vs-NFE study.
    """

    nfe: tuple[int, int]
    ref_nfe: int
    problems: int
    samples: int
    tune: bool
    risk_steps: tuple[int, ...]
    digits: DigitsModel
    digits_nfe: int
    digits_images: int
    samples_by_dim: tuple[tuple[int, int], ...] = ()
    disc_nfe: DiscNfe = DISC_NFE


def build(
    kind: str,
    op: LinearOperator,
    sigma_y: float,
    hp: Any,
    strength: Any,
    lag: str,
    dps_eta: Any = 1.0,
):
    """The sampler ``lamp(backbone(hp), strength, lag)`` (strength 0: the backbone bit for bit);
    ``dps_eta`` is DPS's re-noising stochasticity (1: DDPM, the DPS default)."""
    if kind == "DPS":
        bb = DPS(op, sigma_y, zeta=hp, eta=dps_eta)
    elif kind == "DiffPIR":
        bb = DiffPIR(op, sigma_y, lam=hp, zeta=0.3)
    else:
        bb = DDRM(op, sigma_y, eta=hp, eta_b=1.0)
    return lamp(bb, strength, lag)


def tune(scores: np.ndarray | None, kind: str, tune_enabled: bool) -> tuple[float, bool]:
    """``(best grid value, on_edge)`` from the validation scores over ``GRIDS[kind]`` (lower is
    better); without tuning, the grid's middle value."""
    grid = GRIDS[kind][1]
    if not tune_enabled:
        return float(grid[len(grid) // 2]), False
    i = int(np.nanargmin(scores))
    return float(grid[i]), i in (0, len(grid) - 1)


def paired_rule(names: list[str], lower_is_better: bool) -> AllOf:
    """Every named paired-difference row on the right side of 0."""
    return AllOf(tuple(Threshold(n, 0.0, below=lower_is_better) for n in names))
