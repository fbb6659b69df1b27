r"""Synthetic test beds with exact posteriors: Gaussian mixtures (d = 8, 80, 800) and a Gaussian
prior (small backbone bias), each sampler's distance to the exact posterior and to its own
high-NFE output, the strength/lag ablation, the unconditional (A = 0) check and the NFE count.

Two distances per sampler and NFE, both sliced Wasserstein (128 projections) over ``samples``
draws per measurement problem:

* to exact posterior samples (what a user wants; includes the backbone's bias: a backbone's
  converged output is not the posterior);
* to the sampler's own output at ``ref_nfe`` steps with the same hyperparameters and the same
  initial noise (the discretisation error, which a second-order correction targets; LAMP's
  correction vanishes as the step shrinks, so both rows share one limit).

Tuning: each sampler's knob is chosen on separate validation problems over its whole grid, per
NFE, once for the backbone (strength 0) and once for LAMP (strength 1); every grid value is
evaluated in one vmapped call. Seeds are vmapped too: the problems of all seeds run in one call.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.diffusion import DenoiserTerm, GaussianMixture, grid_mixture
from jaxpapers.core.experiment import SIZES as RUN_SIZES
from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.core.metrics import sliced_wasserstein
from jaxpapers.core.pytrees import stack_trees
from jaxpapers.lamp import MatrixOperator, sample_posterior
from jaxpapers.lamp.experiments._common import (
    BACKBONES,
    GRIDS,
    LEVELS,
    SCH,
    Config,
    DiscNfe,
    build,
    tune,
)

DEFAULT_LAG = "denoised"


class Bed(NamedTuple):
    """A synthetic test bed: prior (``"grid"``: 25-Gaussian mixture; ``"gaussian"``: one
    Gaussian N(mu, I)), dimension, number of random Gaussian measurements, noise level."""

    name: str
    prior: str
    dim: int
    m: int
    sigma_y: float


MIXTURE_BEDS = (
    Bed("d8", "grid", 8, 2, 0.05),
    Bed("d80", "grid", 80, 2, 0.05),
    Bed("d800", "grid", 800, 2, 0.05),
)
# Beds too costly for quick mode: run at --full only (``Experiment.sizes``; an explicit
# ``--experiments`` still runs them at any size). Quick mode ran d = 800 untuned at 32 samples on
# one problem per seed, for indicative verdicts only.
FULL_ONLY_DIMS = (800,)


def bed_run_sizes(bed: Bed) -> tuple[str, ...]:
    """The run sizes of a bed's experiments: ``("full",)`` for ``FULL_ONLY_DIMS``, else all."""
    return ("full",) if bed.dim in FULL_ONLY_DIMS else RUN_SIZES


# Small backbone bias: a Gaussian prior (the exact denoiser is linear, so the data steps of DDRM
# and DiffPIR are near-exact posterior updates) with many precise measurements.
GAUSSIAN_BED = Bed("gauss_d16", "gaussian", 16, 8, 0.01)
BEDS = {b.name: b for b in (*MIXTURE_BEDS, GAUSSIAN_BED)}


def make_prior(bed: Bed) -> GaussianMixture:
    if bed.prior == "grid":
        return grid_mixture(bed.dim, key=jax.random.key(1234))
    mean = jax.random.normal(jax.random.key(4321), (1, bed.dim))
    return GaussianMixture(mean, jnp.ones(1), 1.0)


@functools.partial(jax.jit, static_argnames=("m", "n_problems", "n_ref"))
def _draw_problems(prior, m, sigma_y, n_problems, n_ref, seeds):
    def one(seed, p):
        k = jax.random.fold_in(jax.random.key(seed), p)
        ka, kx, kn, kr = jax.random.split(k, 4)
        a_mat = jax.random.normal(ka, (m, prior.dim))
        x_true = prior.sample(kx, 1)[0]
        y = a_mat @ x_true + sigma_y * jax.random.normal(kn, (m,))
        return a_mat, y, prior.posterior(a_mat, y, sigma_y).sample(kr, n_ref)

    grid_s, grid_p = jnp.meshgrid(seeds, jnp.arange(n_problems), indexing="ij")
    return jax.vmap(one)(grid_s.reshape(-1), grid_p.reshape(-1))


def problems(bed: Bed, n_problems: int, samples: int, seeds: list[int]):
    """Measurement problems of ``seeds`` (``n_problems`` each, seed-major): (prior, stacked
    operators, measurements, ``samples`` exact posterior samples of each)."""
    prior = make_prior(bed)
    mats, ys, refs = _draw_problems(
        prior, bed.m, bed.sigma_y, n_problems, samples, jnp.asarray(seeds)
    )
    ops = stack_trees([MatrixOperator(a) for a in np.asarray(mats)])
    return prior, ops, ys, refs


@functools.partial(jax.jit, static_argnames=("kind", "lag", "steps"))
def _chains(kind, lag, steps, prior, sigma_y, ops, ys, prob, hps, strengths, etas, keys):
    """Samples ``[B, d]`` and counted NFE ``[B]`` of ``B`` independent chains, chain ``b``
    running ``lamp(kind(hps[b]), strengths[b], lag)`` (DPS re-noising ``etas[b]``) on problem
    ``prob[b]`` from key ``keys[b]`` for ``steps`` steps of :func:`sample_posterior`."""
    term = DenoiserTerm(lambda x, t: prior.eps(x, t, SCH), SCH)

    def one(p, hp, strength, eta, key):
        op = jax.tree.map(lambda a: a[p], ops)
        sampler = build(kind, op, sigma_y, hp, strength, lag, eta)
        out = sample_posterior(term, sampler, ys[p], key=key, num_steps=steps, throw=False)
        return out.x, out.nfe

    return jax.vmap(one)(prob, hps, strengths, etas, keys)


class Block(NamedTuple):
    """One batch of chains (every call of a bed and kind has the same number ``B`` of chains, so
    the calls at one step count share one compiled program): problem index, knob, strength, key
    and DPS re-noising eta (``None``: 1) of each chain."""

    prob: np.ndarray
    hps: np.ndarray
    strengths: np.ndarray
    keys: jax.Array
    etas: np.ndarray | None = None


def _keys(seed: int, n_problems: int, n: int) -> jax.Array:
    """Keys ``[n_problems * n]`` (problem-major); the same for every configuration (common random
    numbers between the backbone, LAMP and the high-NFE reference)."""
    base = jax.random.key(10_000 + seed)
    return jax.vmap(lambda i: jax.random.fold_in(base, i))(jnp.arange(n_problems * n))


def _config_block(hp: float, strength: float, n_problems: int, n: int, key_seed: int) -> Block:
    """Every problem x sample chain of one configuration."""
    b = n_problems * n
    return Block(
        np.repeat(np.arange(n_problems), n).astype(np.int32),
        np.full(b, hp, np.float32),
        np.full(b, strength, np.float32),
        _keys(key_seed, n_problems, n),
    )


def _tuning_block(grid: np.ndarray, n_problems: int, b: int) -> tuple[Block, int]:
    """Chains of every (strength 0/1, grid value, validation problem) cell, ``n_val`` samples
    each, padded to ``b`` chains; returns the block and ``n_val``."""
    cells = 2 * grid.size * n_problems
    n_val = b // cells
    if n_val < 8:
        raise ValueError(f"{b} chains leave {n_val} samples per tuning cell; expected >= 8")
    strengths = np.repeat(np.float32([0.0, 1.0]), grid.size * n_problems * n_val)
    hps = np.tile(np.repeat(grid, n_problems * n_val), 2).astype(np.float32)
    prob = np.tile(np.repeat(np.arange(n_problems), n_val), 2 * grid.size).astype(np.int32)
    keys = jnp.tile(_keys(1, n_problems, n_val), 2 * grid.size)
    pad = b - cells * n_val
    blk = Block(
        np.concatenate([prob, np.zeros(pad, np.int32)]),
        np.concatenate([hps, np.full(pad, grid[0], np.float32)]),
        np.concatenate([strengths, np.zeros(pad, np.float32)]),
        jnp.concatenate([keys, _keys(2, 1, pad)]),
    )
    return blk, n_val


def run_block(kind, lag, prior, sigma_y, ops, ys, blk: Block, steps: int):
    """Run one block of chains for ``steps`` steps: samples ``[B, d]`` and counted NFE ``[B]``."""
    x, nfe = _chains(
        kind,
        lag,
        steps,
        prior,
        jnp.asarray(sigma_y, jnp.float32),
        ops,
        ys,
        jnp.asarray(blk.prob),
        jnp.asarray(blk.hps),
        jnp.asarray(blk.strengths),
        jnp.ones(blk.prob.shape[0], jnp.float32) if blk.etas is None else jnp.asarray(blk.etas),
        blk.keys,
    )
    return np.asarray(x), np.asarray(nfe)


@jax.jit
def _sw(xs, refs, key):
    """Sliced W2 ``[K]`` between ``xs [K, n, d]`` and ``refs [K, n, d]``."""
    keys = jax.random.split(key, xs.shape[0])
    return jax.vmap(lambda x, r, k: sliced_wasserstein(x, r, key=k, n_projections=128))(
        xs, refs, keys
    )


def _per_seed(values: np.ndarray, n_seeds: int) -> list[float]:
    """Mean over each seed's problems of a ``[problems * seeds]`` array (seed-major)."""
    return np.asarray(values).reshape(n_seeds, -1).mean(1).tolist()


def bed_config(config: Config, bed: Bed) -> Config:
    """The configuration of ``bed``: ``samples`` from ``config.samples_by_dim`` for its
    dimension."""
    samples = dict(config.samples_by_dim).get(bed.dim, config.samples)
    return dataclasses.replace(config, samples=samples)


class Level(NamedTuple):
    """The runs of one bed and backbone at one NFE level.

    Attributes:
      nfe: steps (= denoiser evaluations) of the level.
      tuned: the knob of the backbone and of LAMP over it, ``{row label: value}``.
      tuned_on_grid_edge: whether each tuned knob is at an end of its grid.
      validation_scores: the validation distances ``[strength 0, 1][grid]`` (``None`` untuned).
      posterior: per-seed sliced W2 to the exact posterior, ``(backbone, LAMP)``.
      discretisation: per-seed sliced W2 to the sampler's own ``ref_nfe``-step output.
      counted_nfe: ``(backbone min, max, LAMP min, max)`` counted evaluations over the chains.
    """

    nfe: int
    tuned: dict[str, float]
    tuned_on_grid_edge: dict[str, bool]
    validation_scores: list[list[float]] | None
    posterior: tuple[list[float], list[float]]
    discretisation: tuple[list[float], list[float]]
    counted_nfe: tuple[int, int, int, int]


def bed_results(ctx: Context, config: Config, bed: Bed, kind: str) -> dict[str, Level]:
    """Both distances of ``kind`` and LAMP over it, per NFE level (``{level: Level}``); cached,
    shared by the posterior and the discretisation experiments, the ablation and the NFE count."""
    config = bed_config(config, bed)

    def compute() -> dict[str, Level]:
        val = problems(bed, config.problems, config.samples, [99_999 + s for s in ctx.seed_list])
        test = problems(bed, config.problems, config.samples, ctx.seed_list)
        prior, refs = test[0], test[3]
        n_p, n = refs.shape[0], refs.shape[1]
        b = n_p * n
        grid = np.asarray(GRIDS[kind][1], np.float32)
        s = len(ctx.seed_list)

        def run(probs, blk, steps):
            return run_block(kind, DEFAULT_LAG, prior, bed.sigma_y, probs[1], probs[2], blk, steps)

        if config.tune:
            # Validation: the first `problems` validation problems, n_val samples per cell.
            n_vp = min(config.problems, n_p)
            tblk, n_val = _tuning_block(grid, n_vp, b)
            vref = val[3][:n_vp, :n_val]
        refs_needed: dict[tuple[float, float], np.ndarray | None] = {}
        runs = {}
        for level, steps in zip(LEVELS, config.nfe, strict=True):
            if config.tune:
                x, _ = run(val, tblk, steps)
                cells = 2 * grid.size * n_vp
                xc = x[: cells * n_val].reshape(cells, n_val, -1)
                rc = jnp.tile(vref, (2 * grid.size, 1, 1))
                scores = np.asarray(_sw(xc, rc, jax.random.key(1))).reshape(2, grid.size, n_vp)
                scores = scores.mean(2)
                hp_b, edge_b = tune(scores[0], kind, True)
                hp_l, edge_l = tune(scores[1], kind, True)
                val_scores = scores.round(5).tolist()
            else:
                (hp_b, edge_b), (hp_l, edge_l) = (tune(None, kind, False),) * 2
                val_scores = None
            rows = {}
            for label, hp, g in ((kind, hp_b, 0.0), (f"{kind}+LAMP", hp_l, 1.0)):
                x, nfe = run(test, _config_block(hp, g, n_p, n, 7), steps)
                rows[label] = (x.reshape(n_p, n, -1), nfe)
                refs_needed[(hp, g)] = None
            tuned = {kind: hp_b, f"{kind}+LAMP": hp_l}
            runs[level] = (steps, tuned, {kind: edge_b, f"{kind}+LAMP": edge_l}, val_scores, rows)
        # The high-NFE reference of every configuration that was tested (same keys).
        for cfg in refs_needed:
            x, _ = run(test, _config_block(*cfg, n_p, n, 7), config.ref_nfe)
            refs_needed[cfg] = x.reshape(n_p, n, -1)
        out = {}
        for level, (steps, tuned, edges, val_scores, rows) in runs.items():
            post, disc, counts = [], [], []
            for label, g in ((kind, 0.0), (f"{kind}+LAMP", 1.0)):
                x, nfe = rows[label]
                x_ref = refs_needed[(tuned[label], g)]
                post.append(_per_seed(np.asarray(_sw(x, refs, jax.random.key(2))), s))
                disc.append(_per_seed(np.asarray(_sw(x, x_ref, jax.random.key(3))), s))
                counts += [int(nfe.min()), int(nfe.max())]
            out[level] = Level(
                steps, tuned, edges, val_scores, tuple(post), tuple(disc), tuple(counts)
            )
        return out

    return ctx.cached(f"mix_{bed.name}_{kind}", compute)


def run_bed(ctx: Context, config: Config, *, bed: Bed, kind: str, metric: str) -> Outcome:
    """Outcome of one bed and backbone for ``metric`` (``"posterior"`` or
    ``"discretisation"``): rows ``X @level``, ``X+LAMP @level`` and ``LAMP-X @level`` (paired
    per-seed difference)."""
    levels = bed_results(ctx, config, bed, kind)
    bcfg = bed_config(config, bed)
    other = "discretisation" if metric == "posterior" else "posterior"
    values: dict[str, list[float]] = {}
    for level in LEVELS:
        base, meth = getattr(levels[level], metric)
        values[f"{kind} @{level}"] = base
        values[f"{kind}+LAMP @{level}"] = meth
        values[f"LAMP-{kind} @{level}"] = list(np.subtract(meth, base))
    extras = {
        "settings": {
            **bed._asdict(),
            "nfe": bcfg.nfe,
            "ref_nfe": bcfg.ref_nfe,
            "problems": bcfg.problems,
            "samples": bcfg.samples,
            "tuned_here": bcfg.tune,
            "lag": DEFAULT_LAG,
        },
        "knob": GRIDS[kind][0],
        "grid": GRIDS[kind][1],
        "tuned": {k: v.tuned for k, v in levels.items()},
        "tuned_on_grid_edge": {k: v.tuned_on_grid_edge for k, v in levels.items()},
        "validation_scores": {k: v.validation_scores for k, v in levels.items()},
        "other_metric": {
            k: {"metric": other, "values": list(getattr(v, other))} for k, v in levels.items()
        },
        "backbone": kind,
        "metric_kind": metric,
        "levels": dict(zip(LEVELS, bcfg.nfe, strict=True)),
    }
    if not bcfg.tune:
        extras["note"] = (
            "not tuned at this size: every knob at its grid's middle value (tuned at --full)"
        )
    return Outcome(values, extras)


# ---- ablation: strength x lag ----------------------------------------------------------------

ABLATION_STRENGTHS = (0.25, 0.5, 1.0)
ABLATION_LAGS = {"dc": "data_consistent", "den": "denoised"}
ABLATION_BED = BEDS["d80"]


def ablation_row(kind: str, strength: float, lag: str) -> str:
    return f"LAMP-{kind} g={strength:g} {lag}"


def run_ablation(ctx: Context, config: Config) -> Outcome:
    """Every strength and lag against the backbone tuned at high NFE (its tuned knob reused), on
    the test problems and keys of the headline bed."""
    bed, n_steps = ABLATION_BED, config.nfe[1]
    config = bed_config(config, bed)
    prior, ops, ys, refs = problems(bed, config.problems, config.samples, ctx.seed_list)
    n_p, n = refs.shape[0], refs.shape[1]
    s = len(ctx.seed_list)
    values: dict[str, list[float]] = {}
    tuned = {}
    for kind in BACKBONES:
        hp = bed_results(ctx, config, bed, kind)[LEVELS[1]].tuned[kind]
        tuned[kind] = hp

        def sw(lag, g, kind=kind, hp=hp):
            blk = _config_block(hp, g, n_p, n, 7)
            x, _ = run_block(kind, lag, prior, bed.sigma_y, ops, ys, blk, n_steps)
            return np.asarray(_sw(x.reshape(n_p, n, -1), refs, jax.random.key(2)))

        base = sw(DEFAULT_LAG, 0.0)
        values[kind] = _per_seed(base, s)
        for g in ABLATION_STRENGTHS:
            for short, lag in ABLATION_LAGS.items():
                values[ablation_row(kind, g, short)] = _per_seed(sw(lag, g) - base, s)
    extras = {
        "settings": {
            **bed._asdict(),
            "nfe": n_steps,
            "problems": config.problems,
            "samples": config.samples,
            "tuned (backbone, reused by every variant)": tuned,
        },
        "lags": ABLATION_LAGS,
    }
    return Outcome(values, extras)


# ---- no measurement: LAMP is DPM-Solver++(2M) ------------------------------------------------

UNCOND_SAMPLERS = {"DDIM": 0.0, "DDPM": 1.0}  # re-noising eta of the DPS step with A = 0


UNCOND_BLOCKS = 3  # blocks of chains per configuration: 3 x 1,024 samples per seed in quick


def run_unconditional(ctx: Context, config: Config) -> Outcome:
    """With A = 0 the DPS gradient vanishes: the step is DDIM(eta) on the exact score and LAMP over
    it DPM-Solver++(2M). Runs through the d = 8 bed's DPS program (zero operators, zeta = 0),
    ``UNCOND_BLOCKS`` blocks per configuration (one block, 1,024 samples per seed, left the
    high-NFE DDIM difference inside the seed spread: -0.007 +- 0.007)."""
    bed = MIXTURE_BEDS[0]
    config = bed_config(config, bed)
    prior = make_prior(bed)
    s = len(ctx.seed_list)
    n_p, n = s * config.problems, config.samples
    b = n_p * n
    per_seed = b // s
    ops = stack_trees([MatrixOperator(np.zeros((bed.m, bed.dim), np.float32))] * n_p)
    ys = jnp.zeros((n_p, bed.m))
    ref = jnp.stack(
        [
            prior.sample(jax.random.key(20_000 + seed), per_seed * UNCOND_BLOCKS)
            for seed in ctx.seed_list
        ]
    )
    values: dict[str, list[float]] = {}
    for level, steps in zip(LEVELS, config.nfe, strict=True):
        for name, eta in UNCOND_SAMPLERS.items():
            sw = []
            for g in (0.0, 1.0):
                xs = []
                for r in range(UNCOND_BLOCKS):
                    blk = _config_block(0.0, g, n_p, n, 30_000 + 97 * r)
                    blk = blk._replace(etas=np.full(b, eta, np.float32))
                    x, _ = run_block("DPS", DEFAULT_LAG, prior, 0.05, ops, ys, blk, steps)
                    xs.append(x.reshape(s, per_seed, -1))
                x = np.concatenate(xs, axis=1)
                sw.append(np.asarray(_sw(x, ref, jax.random.key(1))))
            values[f"{name} @{level}"] = sw[0].tolist()
            values[f"{name}+LAMP @{level}"] = sw[1].tolist()
            values[f"LAMP-{name} @{level}"] = (sw[1] - sw[0]).tolist()
    extras = {
        "settings": {
            "dim": bed.dim,
            "samples per seed": per_seed * UNCOND_BLOCKS,
            "nfe": config.nfe,
        },
        "note": "A = 0: the backbone step is DDIM(eta) with the exact mixture score; LAMP over it "
        "is DPM-Solver++(2M), with the same noise draws",
    }
    return Outcome(values, extras)


# ---- equal evaluation counts -------------------------------------------------------------------


def run_nfe(ctx: Context, config: Config) -> Outcome:
    """Counted evaluations of every backbone and LAMP over it on the d = 8 bed (the counts
    returned by the runs of the headline experiments)."""
    values: dict[str, list[float]] = {}
    counts = {}
    for kind in BACKBONES:
        levels = bed_results(ctx, config, MIXTURE_BEDS[0], kind)
        ratios, per_step = [], []
        for level in LEVELS:
            lv = levels[level]
            b_min, b_max, l_min, l_max = lv.counted_nfe
            counts[f"{kind} NFE={lv.nfe}"] = list(lv.counted_nfe)
            ratios.append((l_min / b_min + l_max / b_max) / 2)
            per_step.append(max(b_max, l_max) / lv.nfe if b_min == b_max else np.nan)
        values[f"{kind}+LAMP / {kind} NFE"] = [float(np.mean(ratios))] * len(ctx.seed_list)
        values[f"{kind} NFE / steps"] = [float(np.mean(per_step))] * len(ctx.seed_list)
    return Outcome(values, {"counts [backbone min, max, LAMP min, max]": counts})


# ---- --full study: discretisation error against NFE (CPU-sized) ------------------------------


DISC_NFE_BEDS = (BEDS["gauss_d16"], BEDS["d8"])


def disc_nfe_row(kind: str, nfe: int, lamp_on: bool | None) -> str:
    """Row name: backbone (``False``), LAMP over it (``True``), paired difference (``None``)."""
    name = {False: kind, True: f"{kind}+LAMP", None: f"LAMP-{kind}"}[lamp_on]
    return f"{name} @NFE {nfe}"


def run_disc_nfe(ctx: Context, config: Config, *, bed: Bed, kind: str) -> Outcome:
    """Discretisation error (sliced W2 to the same sampler's ``ref_nfe``-step output, same knob,
    same initial noise and re-noising keys) of ``kind`` and LAMP over it at every NFE of
    ``config.disc_nfe.nfe``; the knob fixed at its grid's middle value (the error is measured
    against the same knob's converged output, so it is defined for any knob), the distance to
    the exact posterior in the extras."""
    sz: DiscNfe = config.disc_nfe
    prior, ops, ys, refs = problems(bed, sz.problems, sz.samples, ctx.seed_list)
    n_p, n = refs.shape[0], refs.shape[1]
    s = len(ctx.seed_list)
    hp, _ = tune(None, kind, False)
    values: dict[str, list[float]] = {}
    posterior: dict[str, list[float]] = {}
    for g, lamp_on in ((0.0, False), (1.0, True)):
        blk = _config_block(hp, g, n_p, n, 7)

        def run(steps, blk=blk):
            x, _ = run_block(kind, DEFAULT_LAG, prior, bed.sigma_y, ops, ys, blk, steps)
            return x.reshape(n_p, n, -1)

        x_ref = run(sz.ref_nfe)
        posterior[f"{kind if not lamp_on else kind + '+LAMP'} @NFE {sz.ref_nfe}"] = _per_seed(
            np.asarray(_sw(x_ref, refs, jax.random.key(2))), s
        )
        for steps in sz.nfe:
            x = run(steps)
            values[disc_nfe_row(kind, steps, lamp_on)] = _per_seed(
                np.asarray(_sw(x, x_ref, jax.random.key(3))), s
            )
            posterior[disc_nfe_row(kind, steps, lamp_on)] = _per_seed(
                np.asarray(_sw(x, refs, jax.random.key(2))), s
            )
    for steps in sz.nfe:
        values[disc_nfe_row(kind, steps, None)] = list(
            np.subtract(
                values[disc_nfe_row(kind, steps, True)], values[disc_nfe_row(kind, steps, False)]
            )
        )
    slopes = {}
    for lamp_on in (False, True):
        e = [np.mean(values[disc_nfe_row(kind, k, lamp_on)]) for k in sz.nfe]
        slopes[kind + ("+LAMP" if lamp_on else "")] = float(
            np.polyfit(np.log(sz.nfe), np.log(np.maximum(e, 1e-12)), 1)[0]
        )
    extras = {
        "settings": {
            **bed._asdict(),
            **sz._asdict(),
            "knob": GRIDS[kind][0],
            "value": hp,
            "lag": DEFAULT_LAG,
        },
        "log-log slope of the mean discretisation error against NFE": slopes,
        "sliced W2 to the exact posterior (per seed)": posterior,
    }
    return Outcome(values, extras)
