"""Shared pieces of the P07 experiments: the size table's type, the samplers under test, the lean
sampling loop, tuning grids and the paired verdict rule."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.diffusion import DenoiserTerm, VPSchedule
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
      per_dim: overrides of ``problems``, ``samples``, ``tune`` per bed dimension (quick mode
        runs the d = 80 bed smaller).
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
    per_dim: dict[int, dict[str, Any]] | None = None


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


# XLA's backend optimisation level 1: compiles the sampling programs in about half the time of the
# default pipeline and runs them as fast (measured on 2 cores, d = 80, 3,072 chains x 100 steps:
# DPS compile 3.9 s -> 2.0 s, run 2.0 s -> 2.2 s); level 0 (FAST_COMPILE) runs them 3-5x slower.
LEVEL1 = {"xla_backend_optimization_level": 1}


def padded_grid(num_steps: int, max_steps: int) -> jax.Array:
    """Diffusion-time grid of ``num_steps`` uniform steps (``time_grid``), as diffrax times
    ``-t``, padded with zeros to ``max_steps + 1`` entries (one shape for every step count)."""
    from jaxpapers.core.diffusion import time_grid

    if not 1 <= num_steps <= max_steps:
        raise ValueError(f"num_steps={num_steps}; expected 1 <= num_steps <= {max_steps}")
    ts = time_grid(num_steps)
    return -jnp.concatenate([ts, jnp.zeros(max_steps - num_steps, ts.dtype)])


def run_chain(term: DenoiserTerm, sampler: Any, y: jax.Array, key: jax.Array, taus, num_steps):
    """One posterior sample: the steps of ``sample_posterior`` in a ``fori_loop`` whose trip
    count ``num_steps`` is a traced integer, over the padded grid ``taus`` (``padded_grid``).

    Same initial draw, same solver ``init``/``step`` calls on the same times as
    :func:`jaxpapers.lamp.sample_posterior` (bit for bit, tested), without diffrax's
    ``diffeqsolve`` bookkeeping: one compiled program serves every step count of an experiment
    (the low, high and reference NFE), where ``sample_posterior`` compiles one per count.
    Returns ``(x, counted nfe)``.
    """
    k0, k1 = jax.random.split(key)
    x = jax.random.normal(k0, sampler.operator.in_shape, y.dtype)
    solver = sampler.with_key(k1)
    taus = taus.astype(x.dtype)
    state = solver.init(term, taus[0], taus[-1], x, y)

    def body(i, carry):
        x, st = carry
        x, _, _, st, _ = solver.step(term, taus[i], taus[i + 1], x, y, st, False)
        return x, st

    x, state = jax.lax.fori_loop(0, num_steps, body, (x, state))
    return x, state.nfe


def jit_by_size(fn, static: tuple[str, ...]):
    """``jit(fn)`` with cheap XLA settings at smoke size (compiling dominates there) and XLA's
    backend optimisation level 1 otherwise (``LEVEL1``)."""
    opt = jax.jit(fn, static_argnames=static, compiler_options=LEVEL1)
    fast = jax.jit(fn, static_argnames=static, compiler_options=FAST_COMPILE)
    return lambda ctx: fast if ctx.size == "smoke" else opt
