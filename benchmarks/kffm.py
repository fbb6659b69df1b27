"""P06 kFFM speed: training-step time with and without OT pairing, Sinkhorn iterations and time.

A step is one Adam update of a small FNO (width 32, 12 modes, 4 layers) on a 64-point grid with
the flow-matching loss; the paired step adds drawing pairs from an entropic OT coupling (ott-jax,
relative epsilon 0.05 x std of the cost). Times are medians of interleaved repeats after a compile
warm-up; ``pairing_overhead_b128`` is (paired step / unpaired step) - 1 at batch 128 with the
Sobolev kernel.

    python benchmarks/kffm.py [--full] [--out DIR]      or      jaxpapers bench kffm
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import nnx

import jaxpapers.kffm as K
from jaxpapers.core.bench import bench_main, interleaved_median_times, median_time, row
from jaxpapers.core.data.functional import gaussian_process_prior, gp_mixture_paths
from jaxpapers.core.nn.fno import FNO1d
from jaxpapers.core.train import make_train_step

GRID = 64


def _step_fn(pairing, batch: int):
    grid = jnp.linspace(0.0, 1.0, GRID)
    prior = gaussian_process_prior(grid, lengthscale=0.1)
    graphdef, params = nnx.split(FNO1d(width=32, modes=12, depth=4, rngs=nnx.Rngs(0)), nnx.Param)
    apply = lambda p, x, t: nnx.merge(graphdef, p)(x[..., None], t)[..., 0]
    loss = lambda p, x1, key: K.flow_matching_loss(
        apply, p, x1, key=key, prior=prior, pairing=pairing
    )
    optimizer = optax.adam(1e-3)
    step = jax.jit(make_train_step(loss, optimizer))
    data = gp_mixture_paths(jax.random.key(1), batch, grid)
    state = (params, optimizer.init(params))
    key = jax.random.key(2)
    return lambda: step(state[0], state[1], data, key)


def run(quick: bool = True) -> list[dict]:
    rows = []
    repeats = 7 if quick else 21
    kernels = {
        "euclid": K.EuclideanOTPairing(),
        "kffm_rbf": K.KernelOTPairing(K.RBFKernel()),
        "kffm_sobolev": K.KernelOTPairing(K.SobolevKernel()),
        "kffm_signature": K.KernelOTPairing(K.SignatureKernel()),
    }
    for batch in (64, 128, 256) if quick else (64, 128, 256, 512):
        fns = {"independent": _step_fn(K.IndependentPairing(), batch)}
        names = ("euclid", "kffm_sobolev") if batch != 128 else tuple(kernels)
        for name in names:
            fns[name] = _step_fn(kernels[name], batch)
        times = interleaved_median_times(fns, repeats=repeats)
        for name, t in times.items():
            rows.append(row(f"train_step_b{batch}_{name}", "time", t, "s"))
        rows.append(
            row(
                f"pairing_overhead_b{batch}",
                "ratio",
                times["kffm_sobolev"] / times["independent"] - 1.0,
                "paired step / unpaired step - 1 (Sobolev kernel)",
            )
        )
        if batch == 128:
            for name in ("euclid", "kffm_rbf", "kffm_signature"):
                rows.append(
                    row(
                        f"pairing_overhead_b128_{name}",
                        "ratio",
                        times[name] / times["independent"] - 1.0,
                        f"paired step / unpaired step - 1 ({name})",
                    )
                )
    # Sinkhorn alone: iterations and time per solve (pairs drawn included).
    grid = jnp.linspace(0.0, 1.0, GRID)
    prior = gaussian_process_prior(grid, lengthscale=0.1)
    for batch in (128, 256):
        x0 = prior.sample(jax.random.key(0), batch)
        x1 = gp_mixture_paths(jax.random.key(1), batch, grid)
        for name, pairing in kernels.items():
            solve = jax.jit(lambda a, b, k, pairing=pairing: pairing(a, b, key=k))
            out = solve(x0, x1, jax.random.key(2))
            t = median_time(solve, x0, x1, jax.random.key(2), repeats=repeats)
            rows.append(row(f"sinkhorn_b{batch}_{name}", "iterations", int(out.n_iters), "iters"))
            rows.append(row(f"sinkhorn_b{batch}_{name}", "time", t, "s"))
    return rows


if __name__ == "__main__":
    bench_main("kffm", run)
