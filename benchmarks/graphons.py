"""P19 benchmark: variance of symmetry-aware vs plain Monte Carlo densities, and throughput.

Random neural graphons (``NeuralGraphon.init``, sharpness 2). "Equal samples" means equal sampled
points: the symmetric estimator uses ``m`` uniform points (and evaluates each of their
``m (m - 1) / 2`` unordered pairs once), plain Monte Carlo ``m / k`` independent ``k``-tuples.
The symmetric estimator subtracts the step-graphon control variate on a 16 x 16 grid
(``control_grid=16``); ``*_no_control`` rows use the U-statistic alone. The
``*_equal_evaluations`` rows give plain Monte Carlo as many graphon evaluations instead
(``(m (m - 1) / 2 + g (g + 1) / 2) / e(H)`` tuples, the grid's evaluations counted).
"""

from __future__ import annotations

import jax
import numpy as np

from jaxpapers.core.bench import bench_main, median_time, row
from jaxpapers.graphons import (
    NeuralGraphon,
    cycle,
    plain_mc_density,
    symmetric_mc_density,
    triangle,
)

CONTROL_GRID = 16


def _variance_ratios(H, m: int, reps: int, seeds: int, control: int) -> tuple[float, float]:
    """Median over random graphons of var(symmetric) / var(plain) at equal sampled points and
    at equal graphon evaluations (the control variate's ``g (g + 1) / 2`` grid evaluations
    counted)."""
    points, evals = [], []
    evaluations = m * (m - 1) // 2 + control * (control + 1) // 2
    for seed in range(seeds):
        g = NeuralGraphon.init(jax.random.key(seed), sharpness=2.0)
        keys = jax.random.split(jax.random.key(100 + seed), reps)
        sym = jax.vmap(
            lambda k, g=g: symmetric_mc_density(H, g, key=k, num_points=m, control_grid=control)
        )(keys).var()
        for n, out in ((m // H.num_nodes, points), (evaluations // H.num_edges, evals)):
            plain = jax.vmap(lambda k, g=g, n=n: plain_mc_density(H, g, key=k, num_tuples=n))(keys)
            out.append(float(sym / plain.var()))
    return float(np.median(points)), float(np.median(evals))


def run(quick: bool = True) -> list[dict]:
    m = 48 if quick else 128
    reps = 256 if quick else 2048
    seeds = 3 if quick else 10
    rows = []
    for name, H in (("k3", triangle()), ("c4", cycle(4))):
        for tag, control in (("", CONTROL_GRID), ("_no_control", 0)):
            at_points, at_evals = _variance_ratios(H, m, reps, seeds, control)
            note = f"m={m}, control grid {control}" if control else f"m={m}, U-statistic alone"
            rows.append(
                row(
                    f"symmetric_over_plain_mc_variance_{name}{tag}",
                    "ratio",
                    at_points,
                    f"equal points, {note}",
                )
            )
            rows.append(
                row(
                    f"symmetric_over_plain_mc_variance_{name}{tag}_equal_evaluations",
                    "ratio",
                    at_evals,
                    f"equal graphon evaluations, {note}",
                )
            )
            print(rows[-2:], flush=True)
    rows.append(
        row(
            "symmetric_over_plain_mc_variance",
            "ratio",
            max(r["value"] for r in rows if r["case"].endswith(("_k3", "_c4"))),
            f"worst of K3 and C4 at equal sampled points (U-statistic + step control variate, "
            f"grid {CONTROL_GRID})",
        )
    )
    g = NeuralGraphon.init(jax.random.key(0), sharpness=2.0)
    key = jax.random.key(1)
    sym = jax.jit(lambda k: symmetric_mc_density(triangle(), g, key=k, num_points=m))
    copies = m * (m - 1) * (m - 2) // 6
    rows.append(
        row(
            "mc_samples_per_s_k3",
            "throughput",
            copies / median_time(sym, key),
            "triangle copies / s",
        )
    )
    n = m * (m - 1) // 6
    plain = jax.jit(lambda k: plain_mc_density(triangle(), g, key=k, num_tuples=n))
    rows.append(
        row("plain_mc_samples_per_s_k3", "throughput", n / median_time(plain, key), "tuples / s")
    )
    print(rows[-2:], flush=True)
    return rows


if __name__ == "__main__":
    bench_main("graphons", run)
