"""P07 LAMP experiments, registered for ``jaxpapers reproduce P07``.

* ``mixture_<backbone>_d<d>`` (headline), d in {8, 80, 800}: each backbone with and without LAMP
  at equal NFE on the exact Gaussian-mixture test bed (25 components on a 5x5 grid, the pattern
  tiled to d coordinates; m = 2 random Gaussian measurements, sigma_y = 0.05); metric: sliced
  Wasserstein distance to exact posterior samples, averaged over several measurement problems per
  seed. The verdict uses the paired per-seed difference LAMP - backbone.
* ``mixture_ablation_d80``: LAMP's strength (0.25, 0.5, 1) and which consecutive estimates are
  differenced (data-consistent or denoised), each against its tuned backbone.
* ``unconditional_2m``: with no measurement (A = 0) LAMP reduces to DPM-Solver++(2M) over
  DDIM/DDPM; it must lower the distance to the prior there (checks the lagged term itself).
* ``nfe_equal``: the evaluation counts returned by the samplers are equal (and equal the steps).
* ``one_step_risk``: on a Gaussian prior, where the exact bias-variance expansion predicts that
  LAMP lowers the one-step risk, the Monte-Carlo risk of the actual sampler steps is lower.
* ``digits_<task>`` and ``digits_ssim``: a U-Net denoiser (``core.nn.unet``) trained here on
  sklearn's digits (16x16; channels 16/32 and 2,000 Adam steps in quick mode, 32/64 and 20,000 in
  full); inpainting, deblurring and 2x super-resolution; PSNR and SSIM against the ground truth.
  The extras carry the denoiser's held-out epsilon MSE (1 = predicting zero).

Fairness: each sampler's hyperparameter (DPS zeta, DiffPIR lambda, DDRM eta) is tuned on
separate validation problems over the same 4-point grid, per NFE: once for the backbone and once,
with the same budget, for LAMP over it (the best backbone setting need not be the best one under
the lagged correction). LAMP's strength is fixed at 1 (the second-order method; not tuned). The
backbone rows are run as ``lamp(backbone, 0.0)``, which is
the backbone bit for bit (tested), so both rows share one compiled sampler.
"""

from __future__ import annotations

import functools
import itertools
import math
from pathlib import Path
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxpapers.core.diffusion import CountingDenoiser, VPSchedule, grid_mixture
from jaxpapers.core.experiment import (
    AllOf,
    AnyOf,
    Context,
    Experiment,
    Outcome,
    Threshold,
    register,
)
from jaxpapers.core.image_metrics import ssim
from jaxpapers.core.metrics import psnr, sliced_wasserstein
from jaxpapers.core.nn.mlp import MLPDenoiser
from jaxpapers.core.nn.unet import UNet
from jaxpapers.core.train import train
from jaxpapers.lamp._backbone import sample_posterior
from jaxpapers.lamp._ddrm import DDRM
from jaxpapers.lamp._diffpir import DiffPIR
from jaxpapers.lamp._dps import DPS
from jaxpapers.lamp._lamp import lamp
from jaxpapers.lamp._operators import (
    AveragePool,
    GaussianBlur,
    Inpainting,
    LinearOperator,
    MatrixOperator,
)
from jaxpapers.lamp._risk import monte_carlo_one_step_risk, one_step_risk

SCH = VPSchedule()
BACKBONES = ("DPS", "DiffPIR", "DDRM")
# One tuned knob per backbone, the same 4-point budget for each.
GRIDS = {
    "DPS": ("zeta", (0.3, 1.0, 3.0, 10.0)),
    "DiffPIR": ("lam", (0.3, 1.0, 3.0, 10.0)),
    "DDRM": ("eta", (0.4, 0.7, 0.85, 1.0)),
}


def _build(
    kind: str,
    den: CountingDenoiser,
    op: LinearOperator,
    sigma_y: float,
    hp,
    strength,
    lag: str = "data_consistent",
):
    """The sampler ``lamp(backbone(hp), strength, lag)`` (strength 0: the backbone bit for bit)."""
    if kind == "DPS":
        bb = DPS(den, SCH, op, sigma_y, zeta=hp, eta=1.0)
    elif kind == "DiffPIR":
        bb = DiffPIR(den, SCH, op, sigma_y, lam=hp, zeta=0.3)
    else:
        bb = DDRM(den, SCH, op, sigma_y, eta=hp, eta_b=1.0)
    return lamp(bb, strength, lag)


def _stack(trees: list[Any]) -> Any:
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def _paired_rule(names: list[str], lower_is_better: bool) -> AllOf:
    return AllOf(tuple(Threshold(n, 0.0, below=lower_is_better) for n in names))


# --------------------------------------------------------------------------------------------
# Gaussian-mixture test bed
# --------------------------------------------------------------------------------------------

MIX_SIGMA_Y = 0.05
MIX_M = 2
LEVELS = ("low NFE", "high NFE")


# Dimensions of the mixture test bed; every size runs all three (the exact score and posterior cost
# little even at d = 800: the posterior covariance is a rank-m update of the prior's).
MIX_DIMS = (8, 80, 800)


def _mixture_sizes(ctx: Context) -> dict[str, Any]:
    return {
        "nfe": ctx.pick(smoke=(4, 4), quick=(10, 20), full=(20, 100)),
        "problems": ctx.pick(smoke=2, quick=4, full=8),
        "samples": ctx.pick(smoke=128, quick=512, full=2048),
    }


@functools.partial(jax.jit, static_argnames=("dim", "n_problems", "n_ref"))
def _draw_problems(prior, dim: int, n_problems: int, n_ref: int, seed):
    def one(p):
        k = jax.random.fold_in(jax.random.key(seed), p)
        ka, kx, kn, kr = jax.random.split(k, 4)
        a_mat = jax.random.normal(ka, (MIX_M, dim))
        x_true = prior.sample(kx, 1)[0]
        y = a_mat @ x_true + MIX_SIGMA_Y * jax.random.normal(kn, (MIX_M,))
        return a_mat, y, prior.posterior(a_mat, y, MIX_SIGMA_Y).sample(kr, n_ref)

    return jax.vmap(one)(jnp.arange(n_problems))


def _mixture_problems(dim: int, n_problems: int, n_ref: int, seed: int):
    """Measurement problems (operators, y, exact posterior samples) of one seed."""
    prior = grid_mixture(dim, key=jax.random.key(1234))
    mats, ys, refs = _draw_problems(prior, dim, n_problems, n_ref, seed)
    ops = _stack([MatrixOperator(a) for a in np.asarray(mats)])
    return prior, ops, ys, refs


# Smoke runs (tests) compile with XLA's cheap settings: compile time dominates at that size.
_FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def _jit_by_size(fn, static: tuple[str, ...]):
    opt = jax.jit(fn, static_argnames=static)
    fast = jax.jit(fn, static_argnames=static, compiler_options=_FAST_COMPILE)
    return lambda size: fast if size == "smoke" else opt


def _mixture_run_impl(kind, num_steps, prior, ops, ys, refs, hp, strength, key, lag):
    den = CountingDenoiser(lambda x, t: prior.eps(x, t, SCH))

    def one_problem(op, y, ref, k):
        sampler = _build(kind, den, op, MIX_SIGMA_Y, hp, strength, lag)
        keys = jax.random.split(k, ref.shape[0])
        out = jax.vmap(lambda kk: sample_posterior(sampler, y, key=kk, num_steps=num_steps))(keys)
        sw = sliced_wasserstein(out.x, ref, key=jax.random.fold_in(k, 1), n_projections=128)
        return sw, out.nfe

    keys = jax.random.split(key, ys.shape[0])
    return jax.vmap(one_problem)(ops, ys, refs, keys)


_mixture_run = _jit_by_size(_mixture_run_impl, ("kind", "num_steps", "lag"))


def _mixture_eval(
    kind, n, problems, hp, strength, seed, size, lag="data_consistent"
) -> tuple[float, np.ndarray]:
    prior, ops, ys, refs = problems
    sw, nfe = _mixture_run(size)(
        kind,
        n,
        prior,
        ops,
        ys,
        refs,
        jnp.asarray(hp),
        jnp.asarray(strength),
        jax.random.key(10_000 + seed),
        lag,
    )
    return float(jnp.mean(sw)), np.asarray(nfe)


def _tune(evaluate, kind: str, size: str) -> float:
    """Best grid value of ``kind``'s knob by the validation metric ``evaluate(hp)`` (lower is
    better; the grid's second value, untuned, at smoke size)."""
    _, grid = GRIDS[kind]
    if size == "smoke":
        return float(grid[1])
    scores = [evaluate(hp) for hp in grid]
    return float(grid[int(np.nanargmin(scores))])


def _mixture_experiment(kind: str, dim: int) -> Experiment:
    def run(ctx: Context) -> Outcome:
        sz = {"dim": dim, **_mixture_sizes(ctx)}
        val = _mixture_problems(dim, sz["problems"], sz["samples"], seed=99_999)
        values: dict[str, list[float]] = {}
        tuned = {}
        for level, n in zip(LEVELS, sz["nfe"], strict=True):
            hp_b, hp_l = (
                ctx.cached(
                    f"tuned_{n}_strength{strength:g}",
                    lambda n=n, strength=strength: _tune(
                        lambda h: _mixture_eval(kind, n, val, h, strength, 99_999, ctx.size)[0],
                        kind,
                        ctx.size,
                    ),
                )
                for strength in (0.0, 1.0)
            )
            tuned[n] = {kind: hp_b, f"{kind}+LAMP": hp_l}
            for seed in ctx.seed_list:

                def measure_seed(n=n, hp_b=hp_b, hp_l=hp_l, seed=seed):
                    probs = _mixture_problems(dim, sz["problems"], sz["samples"], seed)
                    base, nfe_b = _mixture_eval(kind, n, probs, hp_b, 0.0, seed, ctx.size)
                    meth, nfe_l = _mixture_eval(kind, n, probs, hp_l, 1.0, seed, ctx.size)
                    return {
                        "base": base,
                        "lamp": meth,
                        "nfe_b": nfe_b.tolist(),
                        "nfe_l": nfe_l.tolist(),
                    }

                r = ctx.cached(f"n{n}_seed{seed}", measure_seed)
                values.setdefault(f"{kind} @{level}", []).append(r["base"])
                values.setdefault(f"{kind}+LAMP @{level}", []).append(r["lamp"])
                values.setdefault(f"LAMP-{kind} @{level}", []).append(r["lamp"] - r["base"])
        knob = GRIDS[kind][0]
        extras = {
            "settings": {**sz, "m": MIX_M, "sigma_y": MIX_SIGMA_Y, f"tuned_{knob}": tuned},
            "backbone": kind,
            "levels": dict(zip(LEVELS, sz["nfe"], strict=True)),
        }
        return Outcome(values, extras)

    return Experiment(
        paper="P07",
        id=f"mixture_{kind.lower()}_d{dim}",
        claim=f"LAMP over {kind} lowers the sliced Wasserstein distance to the exact "
        f"Gaussian-mixture posterior in d={dim} at equal NFE (low and high NFE)",
        metric="sliced W2 to exact posterior samples (25-Gaussian prior, y = Ax + noise); "
        "LAMP-X rows: paired per-seed difference",
        lower_is_better=True,
        baselines=tuple(f"{kind} @{lv}" for lv in LEVELS),
        methods=tuple(f"{kind}+LAMP @{lv}" for lv in LEVELS)
        + tuple(f"LAMP-{kind} @{lv}" for lv in LEVELS),
        rule=_paired_rule([f"LAMP-{kind} @{lv}" for lv in LEVELS], lower_is_better=True),
        run=run,
        plot=_plot_levels,
    )


def _plot_levels(outcome: Outcome, path: Path) -> None:
    import matplotlib.pyplot as plt

    kind, levels = outcome.extras["backbone"], outcome.extras["levels"]
    nfes = [levels[lv] for lv in LEVELS]
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    for label, fmt in ((kind, "o--"), (f"{kind}+LAMP", "s-")):
        m = [np.mean(outcome.values[f"{label} @{lv}"]) for lv in LEVELS]
        s = [np.std(outcome.values[f"{label} @{lv}"]) for lv in LEVELS]
        ax.errorbar(nfes, m, yerr=s, fmt=fmt, label=label, capsize=3)
    ax.set_xlabel("NFE")
    ax.set_ylabel("sliced W2 to exact posterior")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


# --------------------------------------------------------------------------------------------
# Ablation: is there a LAMP setting that helps? (strength x which estimates are differenced)
# --------------------------------------------------------------------------------------------

ABLATION_STRENGTHS = (0.25, 0.5, 1.0)
ABLATION_LAGS = {"dc": "data_consistent", "den": "denoised"}
ABLATION_DIM = MIX_DIMS[1]


def _ablation_row(kind: str, strength: float, lag: str) -> str:
    return f"LAMP-{kind} g={strength:g} {lag}"


def _run_ablation(ctx: Context) -> Outcome:
    sz = {"dim": ABLATION_DIM, **_mixture_sizes(ctx)}
    n = sz["nfe"][1]
    val = _mixture_problems(ABLATION_DIM, sz["problems"], sz["samples"], seed=99_999)
    values: dict[str, list[float]] = {}
    tuned = {}
    for kind in BACKBONES:
        hp = ctx.cached(
            f"tuned_{kind}",
            lambda kind=kind: _tune(
                lambda h: _mixture_eval(kind, n, val, h, 0.0, 99_999, ctx.size)[0],
                kind,
                ctx.size,
            ),
        )
        tuned[kind] = hp
        for seed in ctx.seed_list:

            def measure(kind=kind, hp=hp, seed=seed):
                probs = _mixture_problems(ABLATION_DIM, sz["problems"], sz["samples"], seed)
                out = {"base": _mixture_eval(kind, n, probs, hp, 0.0, seed, ctx.size)[0]}
                for g in ABLATION_STRENGTHS:
                    for short, lag in ABLATION_LAGS.items():
                        sw = _mixture_eval(kind, n, probs, hp, g, seed, ctx.size, lag)[0]
                        out[_ablation_row(kind, g, short)] = sw - out["base"]
                return out

            r = ctx.cached(f"{kind}_seed{seed}", measure)
            values.setdefault(kind, []).append(r.pop("base"))
            for name, diff in r.items():
                values.setdefault(name, []).append(diff)
    extras = {
        "settings": {**sz, "nfe": n, "tuned (backbone, reused by every variant)": tuned},
        "lags": ABLATION_LAGS,
    }
    return Outcome(values, extras)


def _ablation_experiment() -> Experiment:
    per_kind = []
    methods = []
    for kind in BACKBONES:
        rows = [
            _ablation_row(kind, g, short) for g in ABLATION_STRENGTHS for short in ABLATION_LAGS
        ]
        methods += rows
        per_kind.append(AnyOf(tuple(Threshold(r, 0.0, below=True) for r in rows)))
    return Experiment(
        paper="P07",
        id=f"mixture_ablation_d{ABLATION_DIM}",
        claim="For each backbone some LAMP setting (strength 0.25/0.5/1, differencing the "
        "data-consistent (dc) or the denoised (den) estimates) lowers the sliced Wasserstein "
        f"distance to the exact posterior (d={ABLATION_DIM}, high NFE)",
        metric="sliced W2 (backbone rows) and paired per-seed difference LAMP variant - backbone",
        lower_is_better=True,
        baselines=BACKBONES,
        methods=tuple(methods),
        rule=AllOf(tuple(per_kind)),
        run=_run_ablation,
    )


# --------------------------------------------------------------------------------------------
# No measurement: LAMP is DPM-Solver++(2M) (a check that the lagged term itself is right)
# --------------------------------------------------------------------------------------------

UNCOND_SAMPLERS = {"DDIM": 0.0, "DDPM": 1.0}  # re-noising eta of the DPS step with A = 0


def _unconditional_impl(kind_eta, num_steps, prior, op, ref, strength, key):
    den = CountingDenoiser(lambda x, t: prior.eps(x, t, SCH))
    # With A = 0 the DPS gradient vanishes: the step is DDIM(eta) on the prior's exact score.
    sampler = lamp(DPS(den, SCH, op, MIX_SIGMA_Y, zeta=0.0, eta=kind_eta), strength)
    y = jnp.zeros((MIX_M,), ref.dtype)
    keys = jax.random.split(key, ref.shape[0])
    x = jax.vmap(lambda k: sample_posterior(sampler, y, key=k, num_steps=num_steps).x)(keys)
    return sliced_wasserstein(x, ref, key=jax.random.fold_in(key, 1), n_projections=128)


_unconditional = _jit_by_size(_unconditional_impl, ("num_steps",))


def _run_unconditional(ctx: Context) -> Outcome:
    sz = _mixture_sizes(ctx)
    prior = grid_mixture(MIX_DIMS[0], key=jax.random.key(1234))
    op = MatrixOperator(np.zeros((MIX_M, MIX_DIMS[0]), np.float32))
    n_samples = sz["samples"] * sz["problems"]
    values: dict[str, list[float]] = {}
    for seed in ctx.seed_list:
        ref = prior.sample(jax.random.key(20_000 + seed), n_samples)
        for name, eta in UNCOND_SAMPLERS.items():
            for level, n in zip(LEVELS, sz["nfe"], strict=True):
                sw = [
                    float(
                        _unconditional(ctx.size)(
                            jnp.asarray(eta),
                            n,
                            prior,
                            op,
                            ref,
                            jnp.asarray(strength),
                            jax.random.key(30_000 + seed),
                        )
                    )
                    for strength in (0.0, 1.0)
                ]
                values.setdefault(f"{name} @{level}", []).append(sw[0])
                values.setdefault(f"{name}+LAMP @{level}", []).append(sw[1])
                values.setdefault(f"LAMP-{name} @{level}", []).append(sw[1] - sw[0])
    extras = {
        "settings": {"dim": MIX_DIMS[0], "samples": n_samples, "nfe": sz["nfe"]},
        "note": "A = 0: the backbone step is DDIM(eta) with the exact mixture score; LAMP over it "
        "is DPM-Solver++(2M) (midpoint form), with the same noise draws",
    }
    return Outcome(values, extras)


def _unconditional_experiment() -> Experiment:
    names = tuple(UNCOND_SAMPLERS)
    diffs = [f"LAMP-{k} @{lv}" for k in names for lv in LEVELS]
    return Experiment(
        paper="P07",
        id="unconditional_2m",
        claim="Sanity check of the lagged term: with no measurement (A = 0) LAMP is "
        "DPM-Solver++(2M) and lowers the sliced Wasserstein distance to the prior (d=8 mixture) "
        "over DDIM and DDPM at equal NFE",
        metric="sliced W2 to exact prior samples; LAMP-X rows: paired per-seed difference",
        lower_is_better=True,
        baselines=tuple(f"{k} @{lv}" for k in names for lv in LEVELS),
        methods=tuple(f"{k}+LAMP @{lv}" for k in names for lv in LEVELS) + tuple(diffs),
        rule=_paired_rule(diffs, lower_is_better=True),
        run=_run_unconditional,
    )


# --------------------------------------------------------------------------------------------
# Equal evaluation counts
# --------------------------------------------------------------------------------------------


def _run_nfe(ctx: Context) -> Outcome:
    sz = {"dim": MIX_DIMS[0], **_mixture_sizes(ctx)}
    values: dict[str, list[float]] = {}
    counts = {}
    for seed in ctx.seed_list:
        probs = _mixture_problems(sz["dim"], sz["problems"], sz["samples"], seed)
        for kind in BACKBONES:
            ratios = []
            for n in sz["nfe"]:
                hp = GRIDS[kind][1][1]
                _, nfe_b = _mixture_eval(kind, n, probs, hp, 0.0, seed, ctx.size)
                _, nfe_l = _mixture_eval(kind, n, probs, hp, 1.0, seed, ctx.size)
                ratios.append(float(np.mean(nfe_l / nfe_b)))
                counts[f"{kind} NFE={n}"] = [
                    int(nfe_b.min()),
                    int(nfe_b.max()),
                    int(nfe_l.min()),
                    int(nfe_l.max()),
                ]
            values.setdefault(f"{kind}+LAMP / {kind} NFE", []).append(float(np.mean(ratios)))
            values.setdefault(f"{kind} NFE / steps", []).append(
                float(np.mean([counts[f"{kind} NFE={n}"][1] / n for n in sz["nfe"]]))
            )
    return Outcome(values, {"counts [backbone min, max, LAMP min, max]": counts})


def _nfe_rule() -> AllOf:
    parts = []
    for kind in BACKBONES:
        for row in (f"{kind}+LAMP / {kind} NFE", f"{kind} NFE / steps"):
            parts += [
                Threshold(row, 1.0 + 1e-9, below=True),
                Threshold(row, 1.0 - 1e-9, below=False),
            ]
    return AllOf(tuple(parts))


# --------------------------------------------------------------------------------------------
# One-step risk analysis on a Gaussian prior
# --------------------------------------------------------------------------------------------

RISK_STRENGTHS = (0.5, 1.0, 2.0, 4.0)
RISK_SIGMAS = (0.02, 0.3)


def _risk_cell_impl(mean, matrix, y, sigma_y, t_prev, t, t_next, key):
    exact = one_step_risk(mean, 0.5, matrix, y, sigma_y, SCH, t_prev, t, t_next)
    strengths = jnp.asarray(RISK_STRENGTHS, mean.dtype)
    predicted = jax.vmap(exact.risk)(strengths) / exact.risk_backbone
    mc = jax.vmap(
        lambda g: monte_carlo_one_step_risk(
            mean, 0.5, matrix, y, sigma_y, SCH, t_prev, t, t_next, g, key=key, n=4096
        )
    )(strengths)
    return predicted, mc[1] / mc[0], exact


_risk_cell = _jit_by_size(_risk_cell_impl, ())


def _risk_seed(steps: tuple[int, ...], seed: int, size: str) -> dict[str, Any]:
    """Predicted and measured risk ratios of every cell of one seed's problem."""
    with jax.enable_x64(True):
        k = jax.random.split(jax.random.key(seed), 4)
        mean = jax.random.normal(k[0], (8,), jnp.float64)
        matrix = jax.random.normal(k[1], (4, 8), jnp.float64)
        x_true = mean + jnp.sqrt(0.5) * jax.random.normal(k[2], (8,), jnp.float64)
        help_ratios, hurt_ratios, agree, cells = [], [], [], []
        for n, sigma_y in itertools.product(steps, RISK_SIGMAS):
            ts = np.linspace(1.0, 0.0, n + 1)
            y = matrix @ x_true + sigma_y * jax.random.normal(k[3], (4,), jnp.float64)
            for i in sorted({1, n // 2, n - 2}):
                pred, meas, exact = _risk_cell(size)(
                    mean, matrix, y, sigma_y, ts[i - 1], ts[i], ts[i + 1], k[3]
                )
                for g, p, m in zip(RISK_STRENGTHS, np.asarray(pred), np.asarray(meas), strict=True):
                    (help_ratios if p < 1 else hurt_ratios).append(float(m))
                    agree.append(float((p < 1) == (m < 1)))
                    cells.append(
                        [seed, n, sigma_y, i, g, float(p), float(m), float(exact.best_strength)]
                    )
    return {
        "help": float(np.mean(help_ratios)) if help_ratios else math.nan,
        "hurt": float(np.mean(hurt_ratios)) if hurt_ratios else math.nan,
        "agree": float(np.mean(agree)),
        "cells": cells,
    }


def _run_risk(ctx: Context) -> Outcome:
    steps = ctx.pick(smoke=(5,), quick=(5, 10, 20), full=(5, 10, 20, 50))
    values: dict[str, list[float]] = {}
    table = []
    for seed in ctx.seed_list:
        r = ctx.cached(f"seed{seed}", lambda seed=seed: _risk_seed(steps, seed, ctx.size))
        values.setdefault("measured R_LAMP/R_backbone where predicted to help", []).append(
            math.nan if r["help"] is None else r["help"]
        )
        values.setdefault("measured R_LAMP/R_backbone where predicted to hurt", []).append(
            math.nan if r["hurt"] is None else r["hurt"]
        )
        values.setdefault("sign agreement (prediction vs measurement)", []).append(r["agree"])
        table += r["cells"]
    extras = {
        "columns": [
            "seed",
            "steps",
            "sigma_y",
            "step index",
            "strength",
            "predicted ratio",
            "measured ratio",
            "best strength",
        ],
        "cells": table,
        "setting": "Gaussian prior N(mu, 0.5 I), d=8, m=4, deterministic DiffPIR (lam=1), "
        "x_prev from the exact posterior marginal, 4096 Monte-Carlo draws per cell",
    }
    return Outcome(values, extras)


# --------------------------------------------------------------------------------------------
# Digits (trained denoiser)
# --------------------------------------------------------------------------------------------

DIGITS_SIGMA_Y = 0.05
TASKS = ("inpaint", "deblur", "sr2")
_DIGITS_MEMO: dict[tuple[str, str], Any] = {}


@functools.cache
def load_digits16() -> np.ndarray:
    """sklearn's 1,797 digits, bilinearly upsampled from 8x8 to 16x16, scaled to [-1, 1]."""
    from scipy.ndimage import zoom
    from sklearn.datasets import load_digits

    x = load_digits().images.astype(np.float32) / 16.0
    up = zoom(x, (1, 2, 2), order=1, grid_mode=True, mode="nearest")
    return (np.clip(up, 0.0, 1.0) * 2.0 - 1.0).astype(np.float32)


class NNXEps(eqx.Module):
    """Epsilon function on one ``[16, 16]`` image from a flax.nnx denoiser (MLP or U-Net)."""

    graphdef: Any = eqx.field(static=True)
    params: Any
    kind: str = eqx.field(static=True)

    def __call__(self, x, t):
        model = nnx.merge(self.graphdef, self.params)
        if self.kind == "unet":
            return model(x[None, :, :, None], t[None])[0, :, :, 0]
        return model(x.reshape(1, -1), t[None]).reshape(x.shape)


class DigitsDenoiser(NamedTuple):
    """Denoiser of the digits test bed at one size.

    Attributes:
      kind: ``"unet"`` (:class:`~jaxpapers.core.nn.unet.UNet`) or ``"mlp"``.
      channels: U-Net channels per level (MLP: hidden width, depth 3).
      steps, batch: Adam steps and batch size of the training run.
    """

    kind: str
    channels: tuple[int, ...]
    steps: int
    batch: int


def _denoiser_spec(ctx: Context) -> DigitsDenoiser:
    # Quick mode trains a narrow U-Net (~40 ms a step on 2 CPU cores); full mode the wider one.
    return ctx.pick(
        smoke=DigitsDenoiser("unet", (8, 16), 20, 16),
        quick=DigitsDenoiser("unet", (16, 32), 2000, 64),
        full=DigitsDenoiser("unet", (32, 64), 20_000, 128),
    )


def _new_model(spec: DigitsDenoiser, seed: int = 0):
    rngs = nnx.Rngs(seed)
    if spec.kind == "unet":
        return UNet(1, spec.channels, emb=64, rngs=rngs)
    return MLPDenoiser(256, hidden=spec.channels[0], depth=3, emb=64, rngs=rngs)


def _digits_model(ctx: Context) -> NNXEps:
    """Train (or load from the shared orbax checkpoint) the digits denoiser."""
    spec = _denoiser_spec(ctx)
    kind, steps, batch = spec.kind, spec.steps, spec.batch
    shared = Context(ctx.size, ctx.seeds, ctx.workdir.parent / "_digits")
    tag = "x".join(map(str, spec.channels))
    ckpt = shared.checkpoint_dir(f"{kind}{tag}_{steps}_b{batch}")
    memo_key = (str(ckpt), kind)
    if memo_key in _DIGITS_MEMO:
        return _DIGITS_MEMO[memo_key]
    data = load_digits16()[:1400]
    graphdef, params = nnx.split(_new_model(spec), nnx.Param)

    def batch_fn(step: int) -> np.ndarray:
        idx = np.random.default_rng(step).integers(0, data.shape[0], batch)
        return data[idx]

    def loss_fn(p, x0, key):
        kt, ke = jax.random.split(key)
        t = jax.random.uniform(kt, (x0.shape[0],), minval=1e-3, maxval=1.0)
        eps = jax.random.normal(ke, x0.shape)
        a, s = SCH.alpha(t)[:, None, None], SCH.sigma(t)[:, None, None]
        xt = a * x0 + s * eps
        model = nnx.merge(graphdef, p)
        pred = (
            model(xt[..., None], t)[..., 0]
            if kind == "unet"
            else model(xt.reshape(xt.shape[0], -1), t).reshape(xt.shape)
        )
        return jnp.mean((pred - eps) ** 2)

    opt = optax.adam(optax.cosine_decay_schedule(2e-3, steps, alpha=0.05))
    res = train(
        loss_fn,
        params,
        opt,
        batch_fn,
        steps=steps,
        key=jax.random.key(0),
        checkpoint_dir=ckpt,
        checkpoint_every=ctx.pick(smoke=steps, quick=500, full=2000),
        desc="digits denoiser",
    )
    eps = NNXEps(graphdef, res.params, kind)
    _DIGITS_MEMO[memo_key] = eps
    return eps


@jax.jit
def _heldout_eps_mse(eps_module: NNXEps, images: jax.Array) -> jax.Array:
    """Epsilon-prediction MSE on held-out digits at 16 fixed noise levels (1 = predicting 0)."""
    ts = jnp.linspace(0.02, 0.98, 16)

    def at(t, k):
        z = jax.random.normal(k, images.shape)
        xt = SCH.alpha(t) * images + SCH.sigma(t) * z
        pred = jax.vmap(lambda x: eps_module(x, t))(xt)
        return jnp.mean((pred - z) ** 2)

    return jnp.mean(jax.vmap(at)(ts, jax.random.split(jax.random.key(123), ts.shape[0])))


def _digits_operator(task: str) -> LinearOperator:
    if task == "inpaint":
        return Inpainting(np.random.default_rng(0).random((16, 16)) < 0.3)
    if task == "deblur":
        return GaussianBlur((16, 16), 1.5)
    return AveragePool((16, 16), 2)


def _digits_run_impl(eps_module, kind, num_steps, op, ys, hp, strength, key):
    den = CountingDenoiser(eps_module)
    sampler = _build(kind, den, op, DIGITS_SIGMA_Y, hp, strength)
    keys = jax.random.split(key, ys.shape[0])
    out = jax.vmap(lambda y, k: sample_posterior(sampler, y, key=k, num_steps=num_steps))(ys, keys)
    return jnp.clip(out.x, -1.0, 1.0), out.nfe


_digits_run = _jit_by_size(_digits_run_impl, ("kind", "num_steps"))


@jax.jit
def _digits_measure_impl(op: LinearOperator, images: jax.Array, seed) -> jax.Array:
    keys = jax.random.split(jax.random.key(50_000 + seed), images.shape[0])
    clean = jax.vmap(op.apply)(images)
    noise = jax.vmap(lambda k: jax.random.normal(k, op.out_shape))(keys)
    return clean + DIGITS_SIGMA_Y * noise


def _digits_measure(op: LinearOperator, images: np.ndarray, seed: int) -> jax.Array:
    return _digits_measure_impl(op, jnp.asarray(images), seed)


@jax.jit
def _image_scores(x: jax.Array, truth: jax.Array) -> tuple[jax.Array, jax.Array]:
    return (
        jnp.mean(psnr(x, truth, data_range=2.0)),
        jnp.mean(ssim(x, truth, data_range=2.0)),
    )


def _digits_task(ctx: Context, task: str) -> dict[str, Any]:
    """PSNR/SSIM of every backbone with and without LAMP on one task (shared across the PSNR and
    SSIM experiments through a cached JSON file)."""
    shared = Context(ctx.size, ctx.seeds, ctx.workdir.parent / "_digits")

    def compute() -> dict[str, Any]:
        eps = _digits_model(ctx)
        op = _digits_operator(task)
        n = ctx.pick(smoke=4, quick=20, full=50)
        n_img = ctx.pick(smoke=4, quick=24, full=64)
        data = load_digits16()
        val, test = data[1400 : 1400 + n_img], data[1500:]
        y_val = _digits_measure(op, val, 77_777)
        out: dict[str, Any] = {"nfe": n, "tuned": {}, "psnr": {}, "ssim": {}, "examples": {}}
        spec = _denoiser_spec(ctx)
        out["denoiser"] = {
            **spec._asdict(),
            "heldout_eps_mse": float(_heldout_eps_mse(eps, jnp.asarray(data[1500:]))),
        }
        for kind in BACKBONES:
            for strength, label in ((0.0, kind), (1.0, f"{kind}+LAMP")):

                def score(hp, kind=kind, strength=strength):
                    x, _ = _digits_run(ctx.size)(
                        eps,
                        kind,
                        n,
                        op,
                        y_val,
                        jnp.asarray(hp),
                        jnp.asarray(strength),
                        jax.random.key(3),
                    )
                    return -float(_image_scores(x, jnp.asarray(val))[0])

                hp = _tune(score, kind, ctx.size)
                out["tuned"][label] = hp
                ps, ss = [], []
                for seed in ctx.seed_list:
                    idx = np.random.default_rng(seed).choice(test.shape[0], n_img, replace=False)
                    truth = test[idx]
                    y = _digits_measure(op, truth, seed)
                    x, nfe = _digits_run(ctx.size)(
                        eps,
                        kind,
                        n,
                        op,
                        y,
                        jnp.asarray(hp),
                        jnp.asarray(strength),
                        jax.random.key(seed),
                    )
                    if not int(nfe.min()) == int(nfe.max()) == n:
                        raise RuntimeError(f"{label}: counted NFE {nfe} differs from {n} steps")
                    p_val, s_val = _image_scores(x, jnp.asarray(truth))
                    ps.append(float(p_val))
                    ss.append(float(s_val))
                    if seed == 0:
                        out["examples"][label] = np.asarray(x[:4]).round(3).tolist()
                        out["examples"]["truth"] = truth[:4].round(3).tolist()
                        out["examples"]["measurement"] = (
                            np.asarray(jax.vmap(op.adjoint)(y[:4])).round(3).tolist()
                        )
                out["psnr"][label], out["ssim"][label] = ps, ss
        return out

    return shared.cached(f"{task}", compute)


def _digits_psnr_experiment(task: str) -> Experiment:
    def run(ctx: Context) -> Outcome:
        r = _digits_task(ctx, task)
        values = {}
        for kind in BACKBONES:
            values[kind] = r["psnr"][kind]
            values[f"{kind}+LAMP"] = r["psnr"][f"{kind}+LAMP"]
            values[f"LAMP-{kind}"] = list(np.subtract(r["psnr"][f"{kind}+LAMP"], r["psnr"][kind]))
        extras = {
            "nfe": r["nfe"],
            "denoiser": r.get("denoiser"),
            "tuned": r["tuned"],
            "examples": r["examples"],
            "task": task,
            "sigma_y": DIGITS_SIGMA_Y,
        }
        return Outcome(values, extras)

    return Experiment(
        paper="P07",
        id=f"digits_{task}",
        claim=f"LAMP raises PSNR over each backbone on digits {task} at equal NFE",
        metric="PSNR in dB on held-out 16x16 digits (LAMP-X rows: paired per-seed difference)",
        lower_is_better=False,
        baselines=BACKBONES,
        methods=tuple(f"{k}+LAMP" for k in BACKBONES) + tuple(f"LAMP-{k}" for k in BACKBONES),
        rule=_paired_rule([f"LAMP-{k}" for k in BACKBONES], lower_is_better=False),
        run=run,
        plot=_plot_examples,
    )


def _run_ssim(ctx: Context) -> Outcome:
    values: dict[str, list[float]] = {}
    for task in TASKS:
        r = _digits_task(ctx, task)
        for kind in BACKBONES:
            values[f"{task} {kind}"] = r["ssim"][kind]
            values[f"{task} {kind}+LAMP"] = r["ssim"][f"{kind}+LAMP"]
    pooled = {}
    for kind in BACKBONES:
        diffs = [np.subtract(values[f"{t} {kind}+LAMP"], values[f"{t} {kind}"]) for t in TASKS]
        pooled[f"LAMP-{kind} (mean over tasks)"] = list(np.mean(diffs, axis=0))
    return Outcome({**values, **pooled})


def _plot_examples(outcome: Outcome, path: Path) -> None:
    import matplotlib.pyplot as plt

    ex = outcome.extras["examples"]
    cols = ["truth", "measurement", *[k for b in BACKBONES for k in (b, f"{b}+LAMP")]]
    rows = len(ex["truth"])
    fig, axes = plt.subplots(rows, len(cols), figsize=(1.1 * len(cols), 1.15 * rows))
    for j, name in enumerate(cols):
        for i in range(rows):
            axes[i, j].imshow(np.asarray(ex[name][i]), cmap="gray", vmin=-1, vmax=1)
            axes[i, j].axis("off")
        axes[0, j].set_title(name, fontsize=6)
    fig.suptitle(f"digits {outcome.extras['task']} (NFE {outcome.extras['nfe']})", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


# --------------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------------

for _kind in BACKBONES:
    for _dim in MIX_DIMS:
        register(_mixture_experiment(_kind, _dim))

register(_ablation_experiment())
register(_unconditional_experiment())

register(
    Experiment(
        paper="P07",
        id="nfe_equal",
        claim="LAMP uses exactly the backbone's number of denoiser evaluations (= steps)",
        metric="ratio of counted evaluations (mean over NFE levels and problems)",
        lower_is_better=True,
        baselines=tuple(f"{k} NFE / steps" for k in BACKBONES),
        methods=tuple(f"{k}+LAMP / {k} NFE" for k in BACKBONES),
        rule=_nfe_rule(),
        run=_run_nfe,
    )
)

register(
    Experiment(
        paper="P07",
        id="one_step_risk",
        claim="Where the one-step bias-variance expansion predicts LAMP lowers the risk of the "
        "reverse transition (Gaussian prior), the measured risk is lower",
        metric="Monte-Carlo one-step risk ratio R_LAMP / R_backbone (agreement: fraction)",
        lower_is_better=True,
        baselines=("measured R_LAMP/R_backbone where predicted to hurt",),
        methods=(
            "measured R_LAMP/R_backbone where predicted to help",
            "sign agreement (prediction vs measurement)",
        ),
        rule=AllOf(
            (
                Threshold("measured R_LAMP/R_backbone where predicted to help", 1.0, below=True),
                Threshold("sign agreement (prediction vs measurement)", 0.9, below=False),
            )
        ),
        run=_run_risk,
    )
)

for _task in TASKS:
    register(_digits_psnr_experiment(_task))

register(
    Experiment(
        paper="P07",
        id="digits_ssim",
        claim="LAMP raises SSIM over each backbone on digits (mean over the three tasks)",
        metric="SSIM (7x7 Gaussian window) on held-out 16x16 digits",
        lower_is_better=False,
        baselines=tuple(f"{t} {k}" for t in TASKS for k in BACKBONES),
        methods=tuple(f"{t} {k}+LAMP" for t in TASKS for k in BACKBONES)
        + tuple(f"LAMP-{k} (mean over tasks)" for k in BACKBONES),
        rule=_paired_rule([f"LAMP-{k} (mean over tasks)" for k in BACKBONES], False),
        run=_run_ssim,
    )
)
