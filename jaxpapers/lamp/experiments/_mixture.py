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
from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.core.metrics import sliced_wasserstein
from jaxpapers.core.pytrees import FAST_COMPILE, stack_trees
from jaxpapers.lamp import MatrixOperator, sample_posterior
from jaxpapers.lamp.experiments._common import (
    BACKBONES,
    GRIDS,
    LEVELS,
    SCH,
    Sizes,
    build,
    jit_by_size,
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


_draw_problems = jax.jit(_draw_problems_impl, static_argnames=("m", "n_problems", "n_ref"))


def problems(bed: Bed, sz: Sizes, seeds: list[int]):
    """Measurement problems of ``seeds`` (``problems`` each, seed-major): (prior, stacked
    operators, measurements, exact posterior samples)."""
    prior = make_prior(bed)
    mats, ys, refs = _draw_problems(
        prior, bed.m, bed.sigma_y, sz.problems, sz.samples, jnp.asarray(seeds)
    )
    ops = stack_trees([MatrixOperator(a) for a in np.asarray(mats)])
    return prior, ops, ys, refs


def _samples_impl(kind, num_steps, lag, prior, sigma_y, ops, ys, hps, strengths, key, n):
    """Samples ``[configs, problems, n, d]`` and counted NFE ``[configs, problems, n]`` of
    ``lamp(kind(hp), strength, lag)`` for every (hp, strength) pair; the same keys for every
    configuration and step count (common random numbers)."""
    term = DenoiserTerm(lambda x, t: prior.eps(x, t, SCH), SCH)
    pkeys = jax.random.split(key, ys.shape[0])

    def one_config(hp, strength):
        def one_problem(op, y, k):
            sampler = build(kind, op, sigma_y, hp, strength, lag)
            keys = jax.random.split(k, n)
            out = jax.vmap(
                lambda kk: sample_posterior(term, sampler, y, key=kk, num_steps=num_steps)
            )(keys)
            return out.x, out.nfe

        return jax.vmap(one_problem)(ops, ys, pkeys)

    return jax.vmap(one_config)(hps, strengths)


_STATIC = ("kind", "num_steps", "lag", "n")
_samples_fast = jax.jit(_samples_impl, static_argnames=_STATIC, compiler_options=FAST_COMPILE)
_samples_opt = jax.jit(_samples_impl, static_argnames=_STATIC)
# Measured on 2 cores (d = 8, 12 configurations x 12 problems x 256 samples, 20 steps): XLA's
# default pipeline compiles in 7.8 s and runs in 0.7 s; the cheap pipeline 2.1 s and 2.2 s. Small
# beds are compile-bound, so they use the cheap pipeline; d = 800 is run-bound.
_FAST_MAX_DIM = 100


def _samples(ctx: Context, dim: int):
    return _samples_fast if ctx.size == "smoke" or dim <= _FAST_MAX_DIM else _samples_opt


@jax.jit
def _sw(xs, refs, key):
    """Sliced W2 ``[configs, problems]`` between ``xs [C, P, n, d]`` and ``refs [P, n, d]`` (or
    ``[C, P, n, d]``)."""
    refs = jnp.broadcast_to(refs, xs.shape)
    keys = jax.random.split(key, xs.shape[1])
    per = jax.vmap(lambda x, r, k: sliced_wasserstein(x, r, key=k, n_projections=128))
    return jax.vmap(lambda x, r: per(x, r, keys))(xs, refs)


def _run_configs(ctx, kind, n, lag, probs, sigma_y, hps, strengths, seed):
    prior, ops, ys, _ = probs
    return _samples(ctx, prior.dim)(
        kind,
        n,
        lag,
        prior,
        jnp.asarray(sigma_y),
        ops,
        ys,
        jnp.asarray(hps, jnp.float32),
        jnp.asarray(strengths, jnp.float32),
        jax.random.key(10_000 + seed),
        int(probs[3].shape[1]),
    )


def _per_seed(values: np.ndarray, n_seeds: int) -> list[float]:
    """Mean over each seed's problems of a ``[problems * seeds]`` array (seed-major)."""
    return np.asarray(values).reshape(n_seeds, -1).mean(1).tolist()


def bed_results(ctx: Context, sz: Sizes, bed: Bed, kind: str) -> dict[str, Any]:
    """Both distances of ``kind`` and LAMP over it, per NFE level and seed (cached, shared by the
    posterior and the discretisation experiments)."""

    def compute() -> dict[str, Any]:
        # Validation problems as many as the test problems, so that the tuning call and the test
        # call (every grid value and both strengths, on all seeds at once) share one compile.
        val = problems(bed, sz, [99_999 + s for s in ctx.seed_list])
        test = problems(bed, sz, ctx.seed_list)
        grid = np.asarray(GRIDS[kind][1], np.float32)
        out: dict[str, Any] = {"levels": {}, "ref_nfe": sz.ref_nfe}
        s = len(ctx.seed_list)
        for level, n in zip(LEVELS, sz.nfe, strict=True):
            if sz.tune:
                hps = np.concatenate([grid, grid])
                strengths = np.repeat(np.float32([0.0, 1.0]), grid.size)
                x, _ = _run_configs(ctx, kind, n, DEFAULT_LAG, val, bed.sigma_y, hps, strengths, 0)
                scores = np.asarray(_sw(x, val[3], jax.random.key(1))).mean(1)
                (hp_b, edge_b), (hp_l, edge_l) = (
                    tune(scores[: grid.size], kind, True),
                    tune(scores[grid.size :], kind, True),
                )
                pick = [int(np.argmax(grid == hp_b)), grid.size + int(np.argmax(grid == hp_l))]
                val_scores = scores.round(5).tolist()
            else:
                (hp_b, edge_b), (hp_l, edge_l) = (tune(None, kind, False),) * 2
                hps, strengths, pick = np.float32([hp_b, hp_l]), np.float32([0.0, 1.0]), [0, 1]
                val_scores = None
            x, nfe = _run_configs(ctx, kind, n, DEFAULT_LAG, test, bed.sigma_y, hps, strengths, 7)
            x, nfe = x[np.asarray(pick)], np.asarray(nfe)[np.asarray(pick)]
            x_ref, _ = _run_configs(
                ctx, kind, sz.ref_nfe, DEFAULT_LAG, test, bed.sigma_y, hps[pick], strengths[pick], 7
            )
            post = np.asarray(_sw(x, test[3], jax.random.key(2)))
            disc = np.asarray(_sw(x, x_ref, jax.random.key(3)))
            out["levels"][level] = {
                "nfe": n,
                "tuned": {kind: hp_b, f"{kind}+LAMP": hp_l},
                "tuned_on_grid_edge": {kind: edge_b, f"{kind}+LAMP": edge_l},
                "validation_scores (grid x strength 0, 1)": val_scores,
                "posterior": [_per_seed(post[0], s), _per_seed(post[1], s)],
                "discretisation": [_per_seed(disc[0], s), _per_seed(disc[1], s)],
                "counted_nfe": [
                    int(nfe[0].min()),
                    int(nfe[0].max()),
                    int(nfe[1].min()),
                    int(nfe[1].max()),
                ],
            }
        return out

    return ctx.cached(f"mix_{bed.name}_{kind}_{ctx.size}_{ctx.seeds}", compute, shared=True)


def run_bed(ctx: Context, sz: Sizes, bed: Bed, kind: str, metric: str) -> Outcome:
    """Outcome of one bed and backbone for ``metric`` (``"posterior"`` or
    ``"discretisation"``): rows ``X @level``, ``X+LAMP @level`` and ``LAMP-X @level`` (paired
    per-seed difference)."""
    r = bed_results(ctx, sz, bed, kind)
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
            "nfe": sz.nfe,
            "ref_nfe": sz.ref_nfe,
            "problems": sz.problems,
            "samples": sz.samples,
            "lag": DEFAULT_LAG,
        },
        "knob": GRIDS[kind][0],
        "grid": GRIDS[kind][1],
        "tuned": {k: v["tuned"] for k, v in lv.items()},
        "tuned_on_grid_edge": {k: v["tuned_on_grid_edge"] for k, v in lv.items()},
        "validation_scores": {
            k: v["validation_scores (grid x strength 0, 1)"] for k, v in lv.items()
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
        "levels": dict(zip(LEVELS, sz.nfe, strict=True)),
    }
    return Outcome(values, extras)


# ---- ablation: strength x lag ----------------------------------------------------------------

ABLATION_STRENGTHS = (0.25, 0.5, 1.0)
ABLATION_LAGS = {"dc": "data_consistent", "den": "denoised"}
ABLATION_BED = BEDS["d80"]


def ablation_row(kind: str, strength: float, lag: str) -> str:
    return f"LAMP-{kind} g={strength:g} {lag}"


def run_ablation(ctx: Context, sz: Sizes) -> Outcome:
    """Every strength and lag against the backbone tuned at high NFE (its tuned knob reused)."""
    bed, n = ABLATION_BED, sz.nfe[1]
    test = problems(bed, sz, ctx.seed_list)
    s = len(ctx.seed_list)
    values: dict[str, list[float]] = {}
    tuned = {}
    for kind in BACKBONES:
        hp = bed_results(ctx, sz, bed, kind)["levels"][LEVELS[1]]["tuned"][kind]
        tuned[kind] = hp
        strengths = np.float32([0.0, *ABLATION_STRENGTHS])
        per_lag = {}
        for short, lag in ABLATION_LAGS.items():
            x, _ = _run_configs(
                ctx, kind, n, lag, test, bed.sigma_y, np.full(strengths.size, hp), strengths, 7
            )
            per_lag[short] = np.asarray(_sw(x, test[3], jax.random.key(2)))
        base = per_lag["dc"][0]
        values[kind] = _per_seed(base, s)
        for i, g in enumerate(ABLATION_STRENGTHS, start=1):
            for short in ABLATION_LAGS:
                values[ablation_row(kind, g, short)] = _per_seed(per_lag[short][i] - base, s)
    extras = {
        "settings": {**bed._asdict(), "nfe": n, "tuned (backbone, reused by every variant)": tuned},
        "lags": ABLATION_LAGS,
    }
    return Outcome(values, extras)


# ---- no measurement: LAMP is DPM-Solver++(2M) ------------------------------------------------

UNCOND_SAMPLERS = {"DDIM": 0.0, "DDPM": 1.0}  # re-noising eta of the DPS step with A = 0


def _unconditional_impl(etas, num_steps, prior, op, key, n):
    from jaxpapers.lamp import DPS, lamp

    term = DenoiserTerm(lambda x, t: prior.eps(x, t, SCH), SCH)
    y = jnp.zeros(op.out_shape)
    keys = jax.random.split(key, n)

    def one(eta, strength):
        # With A = 0 the DPS gradient vanishes: the step is DDIM(eta) on the exact score.
        sampler = lamp(DPS(op, 0.05, zeta=0.0, eta=eta), strength)
        return jax.vmap(lambda k: sample_posterior(term, sampler, y, key=k, num_steps=num_steps).x)(
            keys
        )

    return jax.vmap(one)(etas, jnp.tile(jnp.float32([0.0, 1.0]), etas.shape[0] // 2))


_unconditional = jit_by_size(_unconditional_impl, ("num_steps", "n"))


def run_unconditional(ctx: Context, sz: Sizes) -> Outcome:
    bed = MIXTURE_BEDS[0]
    prior = make_prior(bed)
    op = MatrixOperator(np.zeros((bed.m, bed.dim), np.float32))
    n_samples = sz.samples * sz.problems
    etas = jnp.repeat(jnp.float32(list(UNCOND_SAMPLERS.values())), 2)
    values: dict[str, list[float]] = {}
    for seed in ctx.seed_list:
        ref = prior.sample(jax.random.key(20_000 + seed), n_samples)
        for level, n in zip(LEVELS, sz.nfe, strict=True):
            x = _unconditional(ctx)(etas, n, prior, op, jax.random.key(30_000 + seed), n_samples)
            sw = np.asarray(_sw(x[:, None], ref[None], jax.random.key(1)))[:, 0]
            for i, name in enumerate(UNCOND_SAMPLERS):
                base, meth = float(sw[2 * i]), float(sw[2 * i + 1])
                values.setdefault(f"{name} @{level}", []).append(base)
                values.setdefault(f"{name}+LAMP @{level}", []).append(meth)
                values.setdefault(f"LAMP-{name} @{level}", []).append(meth - base)
    extras = {
        "settings": {"dim": bed.dim, "samples": n_samples, "nfe": sz.nfe},
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
