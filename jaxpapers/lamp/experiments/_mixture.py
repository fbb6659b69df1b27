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

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.diffusion import DenoiserTerm, GaussianMixture, grid_mixture
from jaxpapers.core.experiment import SIZES as RUN_SIZES
from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.core.metrics import sliced_wasserstein
from jaxpapers.core.pytrees import FAST_COMPILE, stack_trees
from jaxpapers.lamp import MatrixOperator
from jaxpapers.lamp.experiments._common import (
    BACKBONES,
    GRIDS,
    LEVEL1,
    LEVELS,
    SCH,
    Sizes,
    build,
    padded_grid,
    run_chain,
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
# Beds too costly for quick mode: run at --full only (``Experiment.sizes``; an explicit ``only=``
# still runs them at any size). Quick mode ran d = 800 untuned at 32 samples on one problem per
# seed (indicative verdicts only) for ~23 of the quick run's 169 CPU-s (measured under heavy load).
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


def _draw_problems_impl(prior, m, sigma_y, n_problems, n_ref, seeds):
    def one(seed, p):
        k = jax.random.fold_in(jax.random.key(seed), p)
        ka, kx, kn, kr = jax.random.split(k, 4)
        a_mat = jax.random.normal(ka, (m, prior.dim))
        x_true = prior.sample(kx, 1)[0]
        y = a_mat @ x_true + sigma_y * jax.random.normal(kn, (m,))
        return a_mat, y, prior.posterior(a_mat, y, sigma_y).sample(kr, n_ref)

    grid_s, grid_p = jnp.meshgrid(seeds, jnp.arange(n_problems), indexing="ij")
    return jax.vmap(one)(grid_s.reshape(-1), grid_p.reshape(-1))


# Compile-bound (XLA's default pipeline: 4-5 s per bed, the cheap one 1.6 s; runs in < 0.1 s).
_draw_problems = jax.jit(
    _draw_problems_impl,
    static_argnames=("m", "n_problems", "n_ref"),
    compiler_options=FAST_COMPILE,
)


def problems(bed: Bed, sz: Sizes, seeds: list[int]):
    """Measurement problems of ``seeds`` (``problems`` each, seed-major): (prior, stacked
    operators, measurements, exact posterior samples)."""
    prior = make_prior(bed)
    mats, ys, refs = _draw_problems(
        prior, bed.m, bed.sigma_y, sz.problems, sz.samples, jnp.asarray(seeds)
    )
    ops = stack_trees([MatrixOperator(a) for a in np.asarray(mats)])
    return prior, ops, ys, refs


def _chains_impl(kind, lag, prior, sigma_y, ops, ys, prob, hps, strengths, etas, keys, steps, taus):
    """Samples ``[B, d]`` and counted NFE ``[B]`` of ``B`` independent chains, chain ``b``
    running ``lamp(kind(hps[b]), strengths[b], lag)`` (DPS re-noising ``etas[b]``) on problem
    ``prob[b]`` from key ``keys[b]`` for ``steps`` steps (a traced count: one compile per
    sampler kind, lag and bed serves tuning, testing and the high-NFE reference)."""
    term = DenoiserTerm(lambda x, t: prior.eps(x, t, SCH), SCH)

    def one(p, hp, strength, eta, key):
        op = jax.tree_util.tree_map(lambda a: a[p], ops)
        sampler = build(kind, op, sigma_y, hp, strength, lag, eta)
        return run_chain(term, sampler, ys[p], key, taus, steps)

    return jax.vmap(one)(prob, hps, strengths, etas, keys)


_chains = jax.jit(_chains_impl, static_argnames=("kind", "lag"), compiler_options=LEVEL1)
_chains_smoke = jax.jit(
    _chains_impl, static_argnames=("kind", "lag"), compiler_options=FAST_COMPILE
)


class Block(NamedTuple):
    """One batch of chains (every call of a bed and kind has the same number ``B`` of chains, so
    they share one compiled program): problem index, knob, strength, key and DPS re-noising eta
    (``None``: 1) of each chain."""

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


def run_block(ctx, kind, lag, prior, sigma_y, ops, ys, blk: Block, steps: int, max_steps: int):
    """Run one block of chains for ``steps`` steps: samples ``[B, d]`` and counted NFE ``[B]``."""
    fn = _chains_smoke if ctx.size == "smoke" else _chains
    x, nfe = fn(
        kind,
        lag,
        prior,
        jnp.asarray(sigma_y, jnp.float32),
        ops,
        ys,
        jnp.asarray(blk.prob),
        jnp.asarray(blk.hps),
        jnp.asarray(blk.strengths),
        jnp.ones(blk.prob.shape[0], jnp.float32) if blk.etas is None else jnp.asarray(blk.etas),
        blk.keys,
        jnp.int32(steps),
        padded_grid(steps, max_steps),
    )
    return np.asarray(x), np.asarray(nfe)


def _sw_impl(xs, refs, key):
    """Sliced W2 ``[K]`` between ``xs [K, n, d]`` and ``refs [K, n, d]``."""
    keys = jax.random.split(key, xs.shape[0])
    return jax.vmap(lambda x, r, k: sliced_wasserstein(x, r, key=k, n_projections=128))(
        xs, refs, keys
    )


_sw = jax.jit(_sw_impl, compiler_options=LEVEL1)


def _per_seed(values: np.ndarray, n_seeds: int) -> list[float]:
    """Mean over each seed's problems of a ``[problems * seeds]`` array (seed-major)."""
    return np.asarray(values).reshape(n_seeds, -1).mean(1).tolist()


def bed_sizes(sz: Sizes, bed: Bed) -> Sizes:
    """The sizes of ``bed`` (``sz.per_dim`` overrides for its dimension)."""
    return sz._replace(**(sz.per_dim or {}).get(bed.dim, {}))


def bed_results(ctx: Context, sz: Sizes, bed: Bed, kind: str) -> dict[str, Any]:
    """Both distances of ``kind`` and LAMP over it, per NFE level and seed (cached, shared by the
    posterior and the discretisation experiments)."""
    sz = bed_sizes(sz, bed)

    def compute() -> dict[str, Any]:
        val = problems(bed, sz, [99_999 + s for s in ctx.seed_list])
        test = problems(bed, sz, ctx.seed_list)
        prior, refs = test[0], test[3]
        n_p, n = refs.shape[0], refs.shape[1]
        b = n_p * n
        grid = np.asarray(GRIDS[kind][1], np.float32)
        max_steps = max(sz.ref_nfe, *sz.nfe)
        out: dict[str, Any] = {"levels": {}, "ref_nfe": sz.ref_nfe}
        s = len(ctx.seed_list)
        run = lambda probs, blk, steps: run_block(
            ctx, kind, DEFAULT_LAG, prior, bed.sigma_y, probs[1], probs[2], blk, steps, max_steps
        )
        if sz.tune:
            # Validation: the first `problems` validation problems, n_val samples per cell.
            n_vp = min(sz.problems, n_p)
            tblk, n_val = _tuning_block(grid, n_vp, b)
            vref = val[3][:n_vp, :n_val]
        refs_needed: dict[tuple[float, float], tuple[np.ndarray, str]] = {}
        for level, steps in zip(LEVELS, sz.nfe, strict=True):
            if sz.tune:
                x, _ = run(val, tblk, steps)
                cells = 2 * grid.size * n_vp
                xc = x[: cells * n_val].reshape(cells, n_val, -1)
                rc = jnp.tile(vref, (2 * grid.size, 1, 1))
                scores = np.asarray(_sw(xc, rc, jax.random.key(1))).reshape(2, grid.size, n_vp)
                scores = scores.mean(2)
                (hp_b, edge_b), (hp_l, edge_l) = (
                    tune(scores[0], kind, True),
                    tune(scores[1], kind, True),
                )
                val_scores = scores.round(5).tolist()
            else:
                (hp_b, edge_b), (hp_l, edge_l) = (tune(None, kind, False),) * 2
                val_scores = None
            rows = {}
            for label, hp, g in ((kind, hp_b, 0.0), (f"{kind}+LAMP", hp_l, 1.0)):
                x, nfe = run(test, _config_block(hp, g, n_p, n, 7), steps)
                rows[label] = (x.reshape(n_p, n, -1), nfe)
                refs_needed[(hp, g)] = None
            out["levels"][level] = {
                "nfe": steps,
                "tuned": {kind: hp_b, f"{kind}+LAMP": hp_l},
                "tuned_on_grid_edge": {kind: edge_b, f"{kind}+LAMP": edge_l},
                "validation_scores (strength 0, 1 x grid)": val_scores,
                "_rows": rows,
            }
        # The high-NFE reference of every configuration that was tested (same keys).
        for cfg in refs_needed:
            x, _ = run(test, _config_block(*cfg, n_p, n, 7), sz.ref_nfe)
            refs_needed[cfg] = x.reshape(n_p, n, -1)
        for level in LEVELS:
            lv = out["levels"][level]
            rows = lv.pop("_rows")
            post, disc, counts = [], [], []
            for label, g in ((kind, 0.0), (f"{kind}+LAMP", 1.0)):
                x, nfe = rows[label]
                x_ref = refs_needed[(lv["tuned"][label], g)]
                post.append(_per_seed(np.asarray(_sw(x, refs, jax.random.key(2))), s))
                disc.append(_per_seed(np.asarray(_sw(x, x_ref, jax.random.key(3))), s))
                counts += [int(nfe.min()), int(nfe.max())]
            lv.update(posterior=post, discretisation=disc, counted_nfe=counts)
        out["sizes"] = {"problems": sz.problems, "samples": sz.samples, "tune": sz.tune}
        return out

    return ctx.cached(f"mix_{bed.name}_{kind}_{ctx.size}_{ctx.seeds}", compute, shared=True)


def run_bed(ctx: Context, sz: Sizes, bed: Bed, kind: str, metric: str) -> Outcome:
    """Outcome of one bed and backbone for ``metric`` (``"posterior"`` or
    ``"discretisation"``): rows ``X @level``, ``X+LAMP @level`` and ``LAMP-X @level`` (paired
    per-seed difference)."""
    r = bed_results(ctx, sz, bed, kind)
    bsz = bed_sizes(sz, bed)
    values: dict[str, list[float]] = {}
    for level in LEVELS:
        base, meth = r["levels"][level][metric]
        values[f"{kind} @{level}"] = base
        values[f"{kind}+LAMP @{level}"] = meth
        values[f"LAMP-{kind} @{level}"] = list(np.subtract(meth, base))
    lv = r["levels"]
    extras = {
        "settings": {
            **bed._asdict(),
            "nfe": bsz.nfe,
            "ref_nfe": bsz.ref_nfe,
            "problems": bsz.problems,
            "samples": bsz.samples,
            "tuned_here": bsz.tune,
            "lag": DEFAULT_LAG,
        },
        "knob": GRIDS[kind][0],
        "grid": GRIDS[kind][1],
        "tuned": {k: v["tuned"] for k, v in lv.items()},
        "tuned_on_grid_edge": {k: v["tuned_on_grid_edge"] for k, v in lv.items()},
        "validation_scores": {
            k: v["validation_scores (strength 0, 1 x grid)"] for k, v in lv.items()
        },
        "other_metric": {
            k: {
                "metric": "discretisation" if metric == "posterior" else "posterior",
                "values": v["discretisation" if metric == "posterior" else "posterior"],
            }
            for k, v in lv.items()
        },
        "backbone": kind,
        "metric_kind": metric,
        "levels": dict(zip(LEVELS, bsz.nfe, strict=True)),
    }
    if not bsz.tune:
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


def run_ablation(ctx: Context, sz: Sizes) -> Outcome:
    """Every strength and lag against the backbone tuned at high NFE (its tuned knob reused), on
    the test problems and keys of the headline bed (the same compiled programs)."""
    bed, n_steps = ABLATION_BED, sz.nfe[1]
    sz = bed_sizes(sz, bed)
    test = problems(bed, sz, ctx.seed_list)
    prior, ops, ys, refs = test
    n_p, n = refs.shape[0], refs.shape[1]
    max_steps = max(sz.ref_nfe, *sz.nfe)
    s = len(ctx.seed_list)
    values: dict[str, list[float]] = {}
    tuned = {}
    for kind in BACKBONES:
        hp = bed_results(ctx, sz, bed, kind)["levels"][LEVELS[1]]["tuned"][kind]
        tuned[kind] = hp

        def sw(lag, g, kind=kind, hp=hp):
            blk = _config_block(hp, g, n_p, n, 7)
            x, _ = run_block(ctx, kind, lag, prior, bed.sigma_y, ops, ys, blk, n_steps, max_steps)
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
            "problems": sz.problems,
            "samples": sz.samples,
            "tuned (backbone, reused by every variant)": tuned,
        },
        "lags": ABLATION_LAGS,
    }
    return Outcome(values, extras)


# ---- no measurement: LAMP is DPM-Solver++(2M) ------------------------------------------------

UNCOND_SAMPLERS = {"DDIM": 0.0, "DDPM": 1.0}  # re-noising eta of the DPS step with A = 0


UNCOND_BLOCKS = 3  # blocks of chains per configuration: 3 x 1,024 samples per seed in quick


def run_unconditional(ctx: Context, sz: Sizes) -> Outcome:
    """With A = 0 the DPS gradient vanishes: the step is DDIM(eta) on the exact score and LAMP over
    it DPM-Solver++(2M). Runs through the d = 8 bed's DPS program (zero operators, zeta = 0),
    ``UNCOND_BLOCKS`` blocks per configuration (one block, 1,024 samples per seed, left the
    high-NFE DDIM difference inside the seed spread: -0.007 +- 0.007)."""
    bed = MIXTURE_BEDS[0]
    sz = bed_sizes(sz, bed)
    prior = make_prior(bed)
    s = len(ctx.seed_list)
    n_p, n = s * sz.problems, sz.samples
    b = n_p * n
    per_seed = b // s
    ops = stack_trees([MatrixOperator(np.zeros((bed.m, bed.dim), np.float32))] * n_p)
    ys = jnp.zeros((n_p, bed.m))
    max_steps = max(sz.ref_nfe, *sz.nfe)
    ref = jnp.stack(
        [
            prior.sample(jax.random.key(20_000 + seed), per_seed * UNCOND_BLOCKS)
            for seed in ctx.seed_list
        ]
    )
    values: dict[str, list[float]] = {}
    for level, steps in zip(LEVELS, sz.nfe, strict=True):
        for name, eta in UNCOND_SAMPLERS.items():
            sw = []
            for g in (0.0, 1.0):
                xs = []
                for r in range(UNCOND_BLOCKS):
                    blk = _config_block(0.0, g, n_p, n, 30_000 + 97 * r)
                    blk = blk._replace(etas=np.full(b, eta, np.float32))
                    x, _ = run_block(
                        ctx, "DPS", DEFAULT_LAG, prior, 0.05, ops, ys, blk, steps, max_steps
                    )
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
            "nfe": sz.nfe,
        },
        "note": "A = 0: the backbone step is DDIM(eta) with the exact mixture score; LAMP over it "
        "is DPM-Solver++(2M), with the same noise draws",
    }
    return Outcome(values, extras)


# ---- equal evaluation counts -------------------------------------------------------------------


def run_nfe(ctx: Context, sz: Sizes) -> Outcome:
    """Counted evaluations of every backbone and LAMP over it on the d = 8 bed (the counts
    returned by the runs of the headline experiments)."""
    values: dict[str, list[float]] = {}
    counts = {}
    for kind in BACKBONES:
        r = bed_results(ctx, sz, MIXTURE_BEDS[0], kind)
        ratios, per_step = [], []
        for level in LEVELS:
            lv = r["levels"][level]
            b_min, b_max, l_min, l_max = lv["counted_nfe"]
            counts[f"{kind} NFE={lv['nfe']}"] = lv["counted_nfe"]
            ratios.append((l_min / b_min + l_max / b_max) / 2)
            per_step.append(max(b_max, l_max) / lv["nfe"] if b_min == b_max else np.nan)
        values[f"{kind}+LAMP / {kind} NFE"] = [float(np.mean(ratios))] * len(ctx.seed_list)
        values[f"{kind} NFE / steps"] = [float(np.mean(per_step))] * len(ctx.seed_list)
    return Outcome(values, {"counts [backbone min, max, LAMP min, max]": counts})


# ---- --full study: discretisation error against NFE (CPU-sized) ------------------------------


class DiscNfeSizes(NamedTuple):
    """Sizes of the discretisation-error-vs-NFE study (one table: it runs at ``--full`` only,
    sized for a CPU)."""

    nfe: tuple[int, ...] = (5, 10, 20, 40)
    ref_nfe: int = 400
    problems: int = 2
    samples: int = 512


DISC_NFE = DiscNfeSizes()
DISC_NFE_BEDS = (BEDS["gauss_d16"], BEDS["d8"])


def disc_nfe_row(kind: str, nfe: int, lamp_on: bool | None) -> str:
    """Row name: backbone (``False``), LAMP over it (``True``), paired difference (``None``)."""
    name = {False: kind, True: f"{kind}+LAMP", None: f"LAMP-{kind}"}[lamp_on]
    return f"{name} @NFE {nfe}"


def run_disc_nfe(ctx: Context, bed: Bed, kind: str, sz: DiscNfeSizes = DISC_NFE) -> Outcome:
    """Discretisation error (sliced W2 to the same sampler's ``ref_nfe``-step output, same knob,
    same initial noise and re-noising keys) of ``kind`` and LAMP over it at every NFE of
    ``sz.nfe``; the knob fixed at its grid's middle value (the error is measured against the
    same knob's converged output, so it is defined for any knob), the distance to the exact
    posterior in the extras. One compiled program (traced step count) serves every NFE and the
    reference."""
    prob_sz = Sizes(sz.nfe[:2], sz.ref_nfe, sz.problems, sz.samples, False, (), None, 0, 0)
    prior, ops, ys, refs = problems(bed, prob_sz, ctx.seed_list)
    n_p, n = refs.shape[0], refs.shape[1]
    s = len(ctx.seed_list)
    hp, _ = tune(None, kind, False)
    max_steps = max(sz.ref_nfe, *sz.nfe)
    values: dict[str, list[float]] = {}
    posterior: dict[str, list[float]] = {}
    for g, lamp_on in ((0.0, False), (1.0, True)):
        blk = _config_block(hp, g, n_p, n, 7)

        def run(steps, blk=blk):
            x, _ = run_block(
                ctx, kind, DEFAULT_LAG, prior, bed.sigma_y, ops, ys, blk, steps, max_steps
            )
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
