"""P19 benchmark: variance of symmetry-aware vs plain Monte Carlo densities, and throughput.

Random neural graphons (``NeuralGraphon``, sharpness 2). "Equal samples" means equal sampled
points: the symmetric estimator uses ``m`` uniform points (and evaluates each of their
``m (m - 1) / 2`` unordered pairs once), plain Monte Carlo ``m / k`` independent ``k``-tuples.
The symmetric estimator subtracts the step-graphon control variate on a 16 x 16 grid
(``control_grid=16``); ``*_no_control`` rows use the U-statistic alone. The
``*_equal_evaluations`` rows give plain Monte Carlo as many graphon evaluations instead
(``(m (m - 1) / 2 + g (g + 1) / 2) / e(H)`` tuples, the grid's evaluations counted).

Peer row ``numpy_over_ours_time_density_K4_m512``: the K4 U-statistic of one
512-point sample (the injective homomorphism density of the weighted graph ``A_ij = W(x_i, x_j)``,
``sum over ordered 4-tuples of distinct points of prod_{6 edges} A / (m)_4``), float64 NumPy
against our :func:`jaxpapers.graphons._density.matrix_density` (float32, jitted) on the same
matrix. NumPy's ``einsum`` finds no contraction path below ``m^4`` for K4 and runs it as one
naive loop (4e11 multiply-adds at m = 512), so the NumPy side is written as a NumPy user would
speed it up: ``sum_a z_a^T (Z o (Z diag(z_a) Z)) z_a`` (``Z`` = ``A`` with a zero diagonal,
``z_a`` its row ``a``), one BLAS product per point. Agreement row: relative difference.
In quick mode the two are timed as one ABBA pair (two ratios; ~30 s a NumPy call on idle cores).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.bench import bench_main, median_time, paired_time_ratio, row
from jaxpapers.graphons import (
    NeuralGraphon,
    clique,
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
        g = NeuralGraphon(key=jax.random.key(seed), sharpness=2.0)
        keys = jax.random.split(jax.random.key(100 + seed), reps)
        sym = jax.vmap(
            lambda k, g=g: symmetric_mc_density(H, g, key=k, num_points=m, control_grid=control)
        )(keys).var()
        for n, out in ((m // H.num_nodes, points), (evaluations // H.num_edges, evals)):
            plain = jax.vmap(lambda k, g=g, n=n: plain_mc_density(H, g, key=k, num_tuples=n))(keys)
            out.append(float(sym / plain.var()))
    return float(np.median(points)), float(np.median(evals))


def numpy_k4_density(A: np.ndarray) -> float:
    """K4 U-statistic of the weighted graph ``A`` (diagonal ignored), float64 NumPy."""
    Z = np.array(A, np.float64)
    np.fill_diagonal(Z, 0.0)
    m = Z.shape[0]
    total = 0.0
    for a in range(m):
        za = Z[a]
        total += za @ (Z * ((Z * za) @ Z)) @ za
    return total / math.prod(range(m - 3, m + 1))


def _k4_rows(quick: bool, m: int = 512) -> list[dict]:
    from jaxpapers.graphons._density import matrix_density

    g = NeuralGraphon(key=jax.random.key(0), sharpness=2.0)
    x = jax.random.uniform(jax.random.key(3), (m,))
    xs, ys = jnp.meshgrid(x, x, indexing="ij")
    A = g(xs, ys)  # symmetric by construction
    A64 = np.asarray(A, np.float64)
    # matrix_density divides by the falling factorial (m)_4 as a Python int; above 2^31 (m = 512:
    # 6.8e10) JAX rejects it as an int32 argument unless x64 is on (the float32 result is
    # unchanged: the array operands stay float32).
    with jax.enable_x64(True):
        ours_fn = jax.jit(lambda A: matrix_density(clique(4), A))
        ours_value = float(ours_fn(A))  # compile + value
        m_ = paired_time_ratio(
            lambda: numpy_k4_density(A64), lambda: ours_fn(A), repeats=2 if quick else 5, warmup=0
        )
    peer_value = numpy_k4_density(A64)
    rows = [
        row(
            f"numpy_over_ours_time_density_K4_m{m}",
            "ratio",
            m_["ratio"],
            f"float64 NumPy K4 U-statistic / ours (float32), {m} points; median of ABBA-paired "
            "ratios",
            q25=m_["q25"],
            q75=m_["q75"],
            peer_s=m_["time"],
            ours_s=m_["baseline_time"],
        ),
        row(
            f"numpy_vs_ours_density_K4_m{m}_relative_diff",
            "agreement",
            abs(ours_value - peer_value) / abs(peer_value),
            f"|ours - NumPy| / NumPy (density {peer_value:.6g}; float32 sums of ~{m}^4 terms)",
        ),
    ]
    print(rows, flush=True)
    return rows


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
    g = NeuralGraphon(key=jax.random.key(0), sharpness=2.0)
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
    return rows + _k4_rows(quick)


if __name__ == "__main__":
    bench_main("graphons", run)
