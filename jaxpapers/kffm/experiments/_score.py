"""P06 scoring: samples of every trained model against held-out data (MMD and extras), the
data-vs-data MMD floor, and the Euler-step curves of the evaluation experiment."""

from __future__ import annotations

import functools
import json
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.experiment import Context, write_json_atomic
from jaxpapers.core.metrics import mmd_rbf
from jaxpapers.core.pytrees import FAST_COMPILE
from jaxpapers.kffm import (
    RBFKernel,
    density_mse,
    generate,
    hilbert_sinkhorn_divergence,
    spectrum_mse,
)
from jaxpapers.kffm.experiments._data import Family, Sizes
from jaxpapers.kffm.experiments._train import model_index, shared_dir, train_all

EULER_STEPS = (1, 2, 3, 4, 6, 8, 12, 16)
# Per-grid-point RBF bandwidths of the MMD: data are scaled to unit variance, so these resolve
# differences well below the typical distance between two functions (~1.4 per point).
BANDWIDTHS = (0.1, 0.2, 0.5, 1.0)


def _scorer(apply, solver: str, steps: int, max_steps: int, n_shown: int):
    """``score(params, x0, test)`` over stacked models: samples and their scores.

    One model at a time (``lax.map``, one compiled body): under ``vmap`` the batched while loops
    of the adaptive solve and of the HSD's Sinkhorn ran every model for as many steps and
    iterations as the slowest one (package docstring, session 7).
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

    # Compile-dominated (15 models, 128 draws): the cheap compiler settings save CPU seconds.
    @functools.partial(jax.jit, compiler_options=FAST_COMPILE)
    @functools.partial(jax.vmap, in_axes=(0, 0, 0, 0, None))
    def curve(params, x0, test, ref, k):
        field = lambda t, x: apply(params, x, jnp.full((x.shape[0],), t, dtype=x.dtype))
        x = generate(field, x0, solver="euler", steps=k, max_steps=max_steps).samples
        return {"mmd": mmd_rbf(x, test, BANDWIDTHS), "path_err": jnp.sqrt(jnp.mean((x - ref) ** 2))}

    return curve


@functools.partial(jax.jit, compiler_options=FAST_COMPILE)
def _floor(test: jax.Array, keys: jax.Array) -> jax.Array:
    """MMD between two random halves of each held-out set: ``test [G, n, ...]``, ``keys [G]``."""

    def one(x, key):
        perm = jax.random.permutation(key, x.shape[0])
        half = x.shape[0] // 2
        return mmd_rbf(x[perm[:half]], x[perm[half : 2 * half]], BANDWIDTHS)

    return jax.vmap(one)(test, keys)


def evaluate_all(ctx: Context, fam: Family, sizes: Sizes) -> dict[str, Any]:
    """Scores of every model of ``fam`` (package docstring: scoring)."""
    tr = train_all(ctx, fam, sizes)
    seeds = ctx.seed_list
    n_d, n_s, n_m = len(fam.datasets), len(seeds), len(fam.methods)
    n_test = tr.test.shape[1]
    idx = [(d, m, j) for d in range(n_d) for m in range(n_m) for j in range(n_s)]
    x0 = jnp.stack([tr.prior.sample(jax.random.key(10_000 + seeds[j]), n_test) for _, _, j in idx])
    test = jnp.asarray(tr.test)[jnp.asarray([d for d, _, _ in idx])]
    n_shown = 6 if fam.ndim == 1 else 4

    # Smoke size integrates with 2 Euler steps (one cheap compilation); otherwise adaptive Tsit5.
    solver, steps = ctx.pick(smoke=("euler", 2), quick=("tsit5", 0), full=("tsit5", 0))
    max_steps = steps if solver == "euler" else 4096
    values = _scorer(tr.apply, solver, steps, max_steps, n_shown)(tr.params, x0, test)
    samples = values.pop("x")
    values = {k: np.asarray(v) for k, v in values.items()}
    mmd_vmap = jax.jit(
        jax.vmap(lambda a, b: mmd_rbf(a, b, BANDWIDTHS)), compiler_options=FAST_COMPILE
    )
    mmd_prior = np.asarray(mmd_vmap(x0, test))
    floor_keys = jnp.stack([jax.random.key(20_000 + s) for d in range(n_d) for s in seeds])
    floor = np.asarray(_floor(jnp.repeat(jnp.asarray(tr.test), n_s, axis=0), floor_keys))

    out: dict[str, Any] = {"euler_steps": []}
    for d, dname in enumerate(fam.datasets):
        res: dict[str, Any] = {k: {} for k in values}
        res["samples"] = {"data": tr.test[d, :n_shown].tolist()}
        for m, mname in enumerate(fam.methods):
            rows = [model_index(d, m, j, n_s, n_m) for j in range(n_s)]
            for k in values:
                res[k][mname] = [float(values[k][i]) for i in rows]
            res["samples"][mname] = np.asarray(samples[rows[0], :n_shown]).tolist()
        res["mmd_prior"] = [float(mmd_prior[model_index(d, 0, j, n_s, n_m)]) for j in range(n_s)]
        res["mmd_floor"] = [float(floor[d * n_s + j]) for j in range(n_s)]
        out[dname] = res

    for dname in fam.curves:
        ks = ctx.pick(smoke=(1, 2), quick=EULER_STEPS, full=(*EULER_STEPS, 24, 32))
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
        out["euler_steps"] = list(ks)
        res = out[dname]
        res["euler_mmd"], res["euler_path_err"] = {}, {}
        for m, mname in enumerate(fam.methods):
            rows = [m * n_s + j for j in range(n_s)]
            res["euler_mmd"][mname] = mmd[rows].tolist()
            res["euler_path_err"][mname] = err[rows].tolist()
    return out


def results(ctx: Context, fam: Family, sizes: Sizes) -> dict[str, Any]:
    """The scores of ``fam``, computed once per run and shared by the experiments."""
    path = shared_dir(ctx) / f"scores_{fam.name}_{ctx.size}_{ctx.seeds}.json"
    if path.exists():
        with path.open() as f:
            return json.load(f)
    res = evaluate_all(ctx, fam, sizes)
    write_json_atomic(path, res)
    return res


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
