"""P06 scoring: samples of every trained model against held-out data (MMD and extras), the
data-vs-data MMD floor, and the Euler-step curves of the evaluation experiment."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.experiment import Context
from jaxpapers.core.metrics import mmd_rbf
from jaxpapers.kffm import (
    RBFKernel,
    density_mse,
    generate,
    hilbert_sinkhorn_divergence,
    spectrum_mse,
)
from jaxpapers.kffm.experiments._data import Config, Family
from jaxpapers.kffm.experiments._train import model_index, train_all

EULER_STEPS = (1, 2, 3, 4, 6, 8, 12, 16)
# Per-grid-point RBF bandwidths of the MMD: data are scaled to unit variance, so these resolve
# differences well below the typical distance between two functions (~1.4 per point).
BANDWIDTHS = (0.1, 0.2, 0.5, 1.0)
# The per-model scores of the sampled functions (rows of :class:`DatasetScores`).
SCORES = ("mmd", "density_mse", "spectrum_mse", "hsd_rbf", "nfe")


class DatasetScores(NamedTuple):
    """Scores of one data set's models; every ``{method: [value per seed]}``.

    Attributes:
      mmd, density_mse, spectrum_mse, hsd_rbf, nfe: scores of each pairing's samples.
      samples: a few functions shown in the plots: ``"data"`` (held out) and each pairing's.
      mmd_prior: the prior draws' MMD to the held-out data, per seed.
      mmd_floor: the MMD between two random halves of the held-out data, per seed.
      euler_mmd, euler_path_err: per method and seed, the MMD and the RMS distance to the
        adaptive solution after each of ``FamilyScores.euler_steps`` Euler steps (data sets
        in ``Family.curves`` only, else ``None``).
    """

    mmd: dict[str, list[float]]
    density_mse: dict[str, list[float]]
    spectrum_mse: dict[str, list[float]]
    hsd_rbf: dict[str, list[float]]
    nfe: dict[str, list[float]]
    samples: dict[str, list]
    mmd_prior: list[float]
    mmd_floor: list[float]
    euler_mmd: dict[str, list[list[float]]] | None = None
    euler_path_err: dict[str, list[list[float]]] | None = None


class FamilyScores(NamedTuple):
    """Scores of every model of a family: ``datasets[name]``, and the Euler step counts of the
    curves (empty when the family has none)."""

    datasets: dict[str, DatasetScores]
    euler_steps: tuple[int, ...]


def _scorer(apply, solver: str, steps: int, max_steps: int):
    """``score(params, x0, test)`` over stacked models: samples and their scores.

    One model at a time (``lax.map``, one compiled body): under ``vmap`` the batched while loops
    of the adaptive solve and of the HSD's Sinkhorn ran every model for as many steps and
    iterations as the slowest one (``results/P06/NOTES.md``).
    """

    def one(params, x0, test):
        field = lambda t, x: apply(params, x, jnp.full((x.shape[0],), t, dtype=x.dtype))
        gen = generate(
            field, x0, solver=solver, steps=steps, max_steps=max_steps, rtol=1e-3, atol=1e-3
        )
        x = gen.samples
        return {
            "mmd": mmd_rbf(x, test, BANDWIDTHS),
            "density_mse": density_mse(x, test),
            "spectrum_mse": spectrum_mse(x, test),
            "hsd_rbf": hilbert_sinkhorn_divergence(x, test, RBFKernel()).divergence,
            "nfe": gen.nfe,
            "x": x,
        }

    @jax.jit
    def score(params, x0, test):
        return jax.lax.map(lambda a: one(*a), (params, x0, test))

    return score


def _curve_scorer(apply, max_steps: int):
    """``curve(params, x0, test, ref, k)``: MMD to the data and RMS distance (per grid point) to
    the model's own adaptive-solver endpoints ``ref`` after ``k`` Euler steps."""

    @jax.jit
    @functools.partial(jax.vmap, in_axes=(0, 0, 0, 0, None))
    def curve(params, x0, test, ref, k):
        field = lambda t, x: apply(params, x, jnp.full((x.shape[0],), t, dtype=x.dtype))
        x = generate(field, x0, solver="euler", steps=k, max_steps=max_steps).samples
        return {"mmd": mmd_rbf(x, test, BANDWIDTHS), "path_err": jnp.sqrt(jnp.mean((x - ref) ** 2))}

    return curve


@jax.jit
def _floor(test: jax.Array, keys: jax.Array) -> jax.Array:
    """MMD between two random halves of each held-out set: ``test [G, n, ...]``, ``keys [G]``."""

    def one(x, key):
        perm = jax.random.permutation(key, x.shape[0])
        half = x.shape[0] // 2
        return mmd_rbf(x[perm[:half]], x[perm[half : 2 * half]], BANDWIDTHS)

    return jax.vmap(one)(test, keys)


@jax.jit
def _mmd_pairs(x: jax.Array, y: jax.Array) -> jax.Array:
    """MMD of each pair of sets ``x[i]``, ``y[i]``."""
    return jax.vmap(lambda a, b: mmd_rbf(a, b, BANDWIDTHS))(x, y)


def evaluate_all(ctx: Context, config: Config, fam: Family) -> FamilyScores:
    """Scores of every model of ``fam`` (package docstring: scoring)."""
    tr = train_all(ctx, config, fam)
    sizes = config.sizes(fam)
    seeds = ctx.seed_list
    n_d, n_s, n_m = len(fam.datasets), len(seeds), len(fam.methods)
    n_test = tr.test.shape[1]
    idx = [(d, m, j) for d in range(n_d) for m in range(n_m) for j in range(n_s)]
    prior_keys = [jax.random.key(10_000 + seeds[j]) for *_, j in idx]
    x0 = jnp.stack([tr.prior.sample(n_test, key=k) for k in prior_keys])
    test = jnp.asarray(tr.test)[jnp.asarray([d for d, _, _ in idx])]
    n_shown = 6 if fam.ndim == 1 else 4

    # Smoke size integrates with 2 Euler steps (one cheap compilation); otherwise adaptive Tsit5.
    solver, steps = config.solver, config.solver_steps
    max_steps = steps if solver == "euler" else 4096
    values = _scorer(tr.apply, solver, steps, max_steps)(tr.params, x0, test)
    samples = values.pop("x")
    values = {k: np.asarray(values[k]) for k in SCORES}
    mmd_prior = np.asarray(_mmd_pairs(x0, test))
    floor_keys = jnp.stack([jax.random.key(20_000 + s) for d in range(n_d) for s in seeds])
    floor = np.asarray(_floor(jnp.repeat(jnp.asarray(tr.test), n_s, axis=0), floor_keys))

    curves: dict[str, tuple[dict, dict]] = {}
    ks = tuple(config.euler_steps) if fam.curves else ()
    for dname in fam.curves:
        n_curve = min(n_test, sizes.n_curve)
        d = fam.datasets.index(dname)
        block = slice(d * n_m * n_s, (d + 1) * n_m * n_s)  # this data set's models, contiguous
        params = jax.tree.map(lambda p, block=block: p[block], tr.params)
        curve = _curve_scorer(tr.apply, max(ks))
        runs = [
            curve(
                params, x0[block, :n_curve], test[block], samples[block, :n_curve], jnp.asarray(k)
            )
            for k in ks
        ]
        mmd = np.stack([np.asarray(r["mmd"]) for r in runs], axis=1)  # [models, ks]
        err = np.stack([np.asarray(r["path_err"]) for r in runs], axis=1)
        per_method = lambda a: {
            mname: a[[m * n_s + j for j in range(n_s)]].tolist()
            for m, mname in enumerate(fam.methods)
        }
        curves[dname] = (per_method(mmd), per_method(err))

    out: dict[str, DatasetScores] = {}
    for d, dname in enumerate(fam.datasets):
        rows = {
            mname: [model_index(d, m, j, n_s, n_m) for j in range(n_s)]
            for m, mname in enumerate(fam.methods)
        }
        scores = {k: {m: [float(values[k][i]) for i in r] for m, r in rows.items()} for k in SCORES}
        shown = {"data": tr.test[d, :n_shown].tolist()}
        shown |= {m: np.asarray(samples[r[0], :n_shown]).tolist() for m, r in rows.items()}
        euler_mmd, euler_path_err = curves.get(dname, (None, None))
        out[dname] = DatasetScores(
            **scores,
            samples=shown,
            mmd_prior=[float(mmd_prior[model_index(d, 0, j, n_s, n_m)]) for j in range(n_s)],
            mmd_floor=[float(floor[d * n_s + j]) for j in range(n_s)],
            euler_mmd=euler_mmd,
            euler_path_err=euler_path_err,
        )
    return FamilyScores(out, ks)


def results(ctx: Context, config: Config, fam: Family) -> FamilyScores:
    """The scores of ``fam``, computed once per run and shared by the experiments."""
    return ctx.cached(f"scores_{fam.name}", lambda: evaluate_all(ctx, config, fam))


def steps_to_tolerance(ks: list[int], errors: list[float], tol: float) -> float:
    """Euler steps at which the error curve ``errors`` (over step counts ``ks``) reaches ``tol``.

    Log-log interpolation between the two grid points that bracket ``tol``; outside the grid the
    first-order rate of Euler's method (error ~ 1 / k) extrapolates from the nearest end, so the
    result is a continuous number that can be averaged over seeds.
    """
    k, e = np.log(np.asarray(ks, float)), np.log(np.maximum(np.asarray(errors, float), 1e-30))
    lt = np.log(tol)
    if e[0] <= lt:
        return float(np.exp(k[0] + e[0] - lt))
    for i in range(1, len(k)):
        if e[i] <= lt:
            frac = (e[i - 1] - lt) / (e[i - 1] - e[i])
            return float(np.exp(k[i - 1] + frac * (k[i] - k[i - 1])))
    return float(np.exp(k[-1] + e[-1] - lt))
