"""Shared pieces of the P07 experiments: the size table's type, the samplers under test, tuning
grids and the paired verdict rule."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np

from jaxpapers.core.diffusion import VPSchedule
from jaxpapers.core.experiment import AllOf, Threshold
from jaxpapers.core.pytrees import FAST_COMPILE
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
    """Denoiser of the digits test bed: U-Net channels per level, Adam steps, batch size."""

    channels: tuple[int, ...]
    steps: int
    batch: int
    checkpoint_every: int


class Sizes(NamedTuple):
    """Sizes of every P07 experiment at one size (``smoke``, ``quick``, ``full``).

    Attributes:
      nfe: (low, high) evaluation budgets of the synthetic test beds.
      ref_nfe: steps of each sampler's own converged output (the discretisation reference).
      problems: measurement problems per seed.
      samples: posterior samples per problem.
      tune: whether to tune the knob over ``GRIDS`` (smoke: the grid's middle value).
      risk_steps: step counts of the one-step risk analysis.
      digits: the digits denoiser.
      digits_nfe: steps of the digits samplers.
      digits_images: test images per seed (and validation images for tuning).
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


def build(kind: str, op: LinearOperator, sigma_y: float, hp: Any, strength: Any, lag: str):
    """The sampler ``lamp(backbone(hp), strength, lag)`` (strength 0: the backbone bit for bit)."""
    if kind == "DPS":
        bb = DPS(op, sigma_y, zeta=hp, eta=1.0)
    elif kind == "DiffPIR":
        bb = DiffPIR(op, sigma_y, lam=hp, zeta=0.3)
    else:
        bb = DDRM(op, sigma_y, eta=hp, eta_b=1.0)
    return lamp(bb, strength, lag)


def tune(scores: np.ndarray, kind: str, tune_enabled: bool) -> tuple[float, bool]:
    """``(best grid value, on_edge)`` from the validation scores over ``GRIDS[kind]`` (lower is
    better); at smoke size the grid's middle value, untuned."""
    grid = GRIDS[kind][1]
    if not tune_enabled:
        return float(grid[len(grid) // 2]), False
    i = int(np.nanargmin(scores))
    return float(grid[i]), i in (0, len(grid) - 1)


def paired_rule(names: list[str], lower_is_better: bool) -> AllOf:
    return AllOf(tuple(Threshold(n, 0.0, below=lower_is_better) for n in names))


def jit_by_size(fn, static: tuple[str, ...]):
    """``jit(fn)`` with cheap XLA settings at smoke size (compiling dominates there)."""
    opt = jax.jit(fn, static_argnames=static)
    fast = jax.jit(fn, static_argnames=static, compiler_options=FAST_COMPILE)
    return lambda ctx: fast if ctx.size == "smoke" else opt
