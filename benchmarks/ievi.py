"""P17 benchmark: time per jitted Bellman sweep, and true-model queries of VI vs IE-VI.

Random MDPs with Dirichlet(1) rows and A = 8, float64 (VI cannot reach 1e-6 in float32 at
gamma 0.999). Queries are counted to sup-norm error 1e-6 against V* from policy iteration; the
approximate models have row-wise L1 error 0.1 (1 - gamma) ("small") or 0.05 ("5pct").
Quick mode counts queries at S = 100 and 1000 and times sweeps at S = 100, 1000, 5000; --full
also counts queries at S = 5000 (VI alone then needs ~20k sweeps of an 8 x 5000 x 5000 model).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxpapers.core.bench import bench_main, median_time, row
from jaxpapers.ievi import (
    bellman,
    ie_vi,
    optimal_values,
    perturbed_model,
    random_mdp,
    value_iteration,
)

GAMMA = 0.999
SWEEPS_PER_CALL = 20


def _sweep_time(mdp) -> float:
    @jax.jit
    def sweeps(V):
        return jax.lax.fori_loop(0, SWEEPS_PER_CALL, lambda _, v: bellman(mdp, v), V)

    V0 = jnp.zeros(mdp.num_states, mdp.R.dtype)
    return median_time(sweeps, V0, repeats=5) / SWEEPS_PER_CALL


@jax.jit
def _vi_queries(mdp, v_star):
    return value_iteration(mdp, v_star=v_star, max_queries=200_000)


@jax.jit
def _ie_queries(mdp, model, v_star):
    return ie_vi(mdp, model, 100.0 / (1.0 - GAMMA), v_star=v_star)


def run(quick: bool = True) -> list[dict]:
    rows = []
    count_at = (100, 1000) if quick else (100, 1000, 5000)
    with jax.enable_x64(True):
        for S in (100, 1000, 5000):
            mdp = random_mdp(jax.random.key(0), S, 8, GAMMA)
            rows.append(row(f"sweep_S{S}_A8_f64", "time", _sweep_time(mdp) * 1e3, "ms"))
            if S not in count_at:
                continue
            v_star = optimal_values(mdp)
            vi = _vi_queries(mdp, v_star)
            for label, err in (("small", 0.1 * (1 - GAMMA)), ("5pct", 0.05)):
                model = perturbed_model(jax.random.key(1), mdp.P, err)
                ie = _ie_queries(mdp, model, v_star)
                vi_q, ie_q, ok = int(vi.queries), int(ie.queries), bool(vi.converged & ie.converged)
                case = f"S{S}_g{GAMMA}_{label}_model"
                rows.append(row(f"vi_queries_{case}", "queries", vi_q, "sweeps"))
                rows.append(row(f"ievi_queries_{case}", "queries", ie_q, "sweeps", converged=ok))
                rows.append(
                    row(
                        f"vi_over_ievi_queries_{case}",
                        "ratio",
                        vi_q / ie_q,
                        "VI queries / IE-VI queries",
                    )
                )
        largest = max(count_at)
        headline = next(
            r for r in rows if r["case"] == f"vi_over_ievi_queries_S{largest}_g{GAMMA}_small_model"
        )
        rows.append(
            row(
                f"vi_over_ievi_queries_g{GAMMA}",
                "ratio",
                headline["value"],
                f"VI queries / IE-VI queries (S={largest}, model L1 error 0.1(1-gamma))",
            )
        )
    return rows


if __name__ == "__main__":
    bench_main("ievi", run)
