"""P06 kFFM speed: training-step time with and without OT pairing, Sinkhorn iterations and time.

A step is one Adam update of a small FNO (width 32, 12 modes, 4 layers) on a 64-point grid with
the flow-matching loss; the paired step adds drawing pairs from an entropic OT coupling (ott-jax,
relative epsilon 0.05 x std of the cost). Step times are medians after a compile warm-up; each
overhead is the median of paired ratios (each repeat times the paired and the unpaired step back to
back, alternating which goes first: :func:`jaxpapers.core.bench.paired_time_ratio`, quartiles in
the row), so load changes on a shared machine cancel. ``pairing_overhead_b128`` is
(paired step / unpaired step) - 1 at batch 128 with the Sobolev kernel.

    python benchmarks/kffm.py [--full] [--out DIR]      or      jaxpapers bench kffm
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

import jaxpapers.kffm as K
from jaxpapers.core.bench import bench_main, median_time, paired_time_ratio, row
from jaxpapers.core.train import make_train_step
from jaxpapers.kffm import FNO1d, gaussian_process_prior, gp_mixture_paths

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
    data = gp_mixture_paths(batch, grid, key=jax.random.key(1))
    state = (params, optimizer.init(params))
    key = jax.random.key(2)
    return lambda: step(state[0], state[1], data, key)


def _pot_rows(quick: bool) -> list[dict]:
    """Our Euclidean OT pairing (ott Sinkhorn, relative epsilon 0.05 x std of the cost, pairs
    drawn) against POT's exact ``emd`` and POT's Sinkhorn at the matched absolute epsilon, on
    128-point GP functions; both peers get the float64 cost matrix (``ot.dist``) inside their
    timing. Quality: transport cost <P, C> of each coupling over emd's (1 = optimal)."""
    import ot

    rows = []
    grid = jnp.linspace(0.0, 1.0, 128)
    prior = gaussian_process_prior(grid, lengthscale=0.1)
    for batch in (128, 512):
        x0 = prior.sample(batch, key=jax.random.key(0))
        x1 = gp_mixture_paths(batch, grid, key=jax.random.key(1))
        a0, a1 = np.asarray(x0, np.float64), np.asarray(x1, np.float64)
        w = np.full(batch, 1.0 / batch)
        cost = ot.dist(a0, a1)
        eps = 0.05 * float(cost.std())
        optimal = float((ot.emd(w, w, cost) * cost).sum())
        peers = {
            "pot_emd": lambda a0=a0, a1=a1, w=w: ot.emd(w, w, ot.dist(a0, a1)),
            "pot_sinkhorn": lambda a0=a0, a1=a1, w=w, eps=eps: ot.sinkhorn(
                w, w, ot.dist(a0, a1), eps
            ),
        }
        quality = {"pot_emd": 1.0, "pot_sinkhorn": float((peers["pot_sinkhorn"]() * cost).sum())}
        quality["pot_sinkhorn"] /= optimal
        # Default (log domain, Anderson memory 3), kernel domain (+ Anderson), plain ott Sinkhorn.
        variants = {"": {}, "_kernel_domain": {"lse_mode": False}, "_plain": {"anderson": 0}}
        for tag, settings in variants.items():
            pairing = K.EuclideanOTPairing(**settings)
            ours = jax.jit(lambda u, v, k, pairing=pairing: pairing(u, v, key=k))
            key = jax.random.key(2)
            out = ours(x0, x1, key)
            ours_q = float((np.asarray(out.coupling, np.float64) * cost).sum()) / optimal
            for peer in ("pot_emd", "pot_sinkhorn"):
                m = paired_time_ratio(
                    peers[peer],
                    lambda ours=ours, x0=x0, x1=x1, k=key: ours(x0, x1, k),
                    repeats=11 if quick else 21,
                    settle=5,
                )
                rows.append(
                    row(
                        f"{peer}_over_ott_pairing_time_b{batch}{tag}",
                        "ratio",
                        m["ratio"],
                        f"{peer} / our pairing ({pairing.lse_mode=}, {pairing.anderson=}); "
                        "median of paired ratios",
                        q25=m["q25"],
                        q75=m["q75"],
                        ours_ms=m["baseline_time"] * 1e3,
                        peer_ms=m["time"] * 1e3,
                        ours_cost_over_emd=ours_q,
                        peer_cost_over_emd=quality[peer],
                        sinkhorn_iterations=int(out.n_iters),
                    )
                )
                print(rows[-1], flush=True)
    return rows


def run(quick: bool = True) -> list[dict]:
    rows = _pot_rows(quick)
    repeats = 11 if quick else 21
    kernels = {
        "euclid": K.EuclideanOTPairing(),
        "kffm_rbf": K.KernelOTPairing(K.RBFKernel()),
        "kffm_sobolev": K.KernelOTPairing(K.SobolevKernel()),
        "kffm_signature": K.KernelOTPairing(K.SignatureKernel()),
    }
    for batch in (64, 128, 256) if quick else (64, 128, 256, 512):
        base = _step_fn(K.IndependentPairing(), batch)
        names = ("euclid", "kffm_sobolev") if batch != 128 else tuple(kernels)
        base_times = []
        for name in names:
            p = paired_time_ratio(_step_fn(kernels[name], batch), base, repeats=repeats)
            base_times.append(p["baseline_time"])
            rows.append(row(f"train_step_b{batch}_{name}", "time", p["time"], "s"))
            spread = {"q25": p["q25"] - 1.0, "q75": p["q75"] - 1.0, "repeats": repeats}
            label = "Sobolev kernel" if name == "kffm_sobolev" else name
            # The Sobolev kernel's row is the issue's `pairing_overhead_b<batch>`.
            case = f"pairing_overhead_b{batch}" + ("" if name == "kffm_sobolev" else f"_{name}")
            rows.append(
                row(
                    case,
                    "ratio",
                    p["ratio"] - 1.0,
                    f"paired step / unpaired step - 1 ({label})",
                    **spread,
                )
            )
        t_base = float(np.median(base_times))
        rows.append(row(f"train_step_b{batch}_independent", "time", t_base, "s"))
    # Sinkhorn alone: iterations and time per solve (pairs drawn included).
    grid = jnp.linspace(0.0, 1.0, GRID)
    prior = gaussian_process_prior(grid, lengthscale=0.1)
    for batch in (128, 256):
        x0 = prior.sample(batch, key=jax.random.key(0))
        x1 = gp_mixture_paths(batch, grid, key=jax.random.key(1))
        for name, pairing in kernels.items():
            solve = jax.jit(lambda a, b, k, pairing=pairing: pairing(a, b, key=k))
            out = solve(x0, x1, jax.random.key(2))
            t = median_time(solve, x0, x1, jax.random.key(2), repeats=repeats)
            rows.append(row(f"sinkhorn_b{batch}_{name}", "iterations", int(out.n_iters), "iters"))
            rows.append(row(f"sinkhorn_b{batch}_{name}", "time", t, "s"))
    return rows


if __name__ == "__main__":
    bench_main("kffm", run)
