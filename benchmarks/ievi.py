"""P17 benchmark: time per jitted Bellman sweep, and true-model queries of VI vs IE-VI.

Random MDPs with Dirichlet(1) rows and A = 8, float64 (VI cannot reach 1e-6 in float32 at
gamma 0.999). Queries are counted to sup-norm error 1e-6 against V* from policy iteration; the
approximate models have row-wise L1 error 0.1 (1 - gamma) ("small") or 0.05 ("5pct").
Quick mode counts queries at S = 100 and 1000 and times sweeps (float32 and float64; models with
normalised uniform rows, cheap to draw) at S = 100, 1000, 5000; --full also counts queries at
S = 5000 (VI alone then needs ~20k sweeps of an 8 x 5000 x 5000 model).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.bench import bench_main, median_time, paired_time_ratio, row
from jaxpapers.ievi import (
    TabularMDP,
    a_ie_vi,
    bellman,
    gridworld,
    ie_vi,
    optimal_values,
    perturbed_model,
    random_mdp,
    value_iteration,
)

GAMMA = 0.999


def _uniform_rows_mdp(S: int, dtype) -> TabularMDP:
    """A dense MDP for timing sweeps (normalised uniform rows: cheap to draw at S = 5000)."""
    kp, kr = jax.random.split(jax.random.key(0))
    P = jax.random.uniform(kp, (S, 8, S), dtype=dtype)
    P = P / P.sum(-1, keepdims=True)
    R = jax.random.uniform(kr, (S, 8), dtype=dtype)
    return TabularMDP(P, R, gamma=jnp.asarray(GAMMA, dtype))


def _sweep_time(mdp) -> float:
    """Seconds per Bellman sweep: sweeps run in a jitted ``fori_loop`` long enough (~2e8
    multiply-adds a call) that dispatch overhead does not count."""
    count = max(5, int(2e8) // (mdp.num_actions * mdp.num_states**2))

    @jax.jit
    def sweeps(V):
        return jax.lax.fori_loop(0, count, lambda _, v: bellman(mdp, v), V)

    V0 = jnp.zeros(mdp.num_states, mdp.R.dtype)
    return median_time(sweeps, V0, repeats=5) / count


@jax.jit
def _vi_queries(mdp, v_star):
    return value_iteration(mdp, v_star=v_star, max_queries=200_000)


QUERY_CAP = 200  # a run that has not converged by then is reported as not converged


@partial(jax.jit, static_argnums=3)
def _ie_queries(mdp, model, v_star, cap):
    """IE-VI with the fixed step 100 / (1 - gamma) and A-IE-VI, stopped after ``cap`` queries:
    with a model error large against 1 - gamma that fixed step can stall (see the README)."""
    ie = ie_vi(mdp, model, h=100.0 / (1.0 - GAMMA), v_star=v_star, max_queries=cap)
    ad = a_ie_vi(mdp, model, v_star=v_star, max_queries=cap)
    return ie, ad


def _query_rows(case: str, vi, ie, ad) -> list[dict]:
    out = [row(f"vi_queries_{case}", "queries", int(vi.queries), "sweeps")]
    for name, res in (("ievi", ie), ("aievi", ad)):
        out.append(
            row(
                f"{name}_queries_{case}",
                "queries",
                int(res.queries),
                "sweeps",
                converged=bool(res.converged),
            )
        )
        converged = bool(res.converged)
        out.append(
            row(
                f"vi_over_{name}_queries_{case}",
                "ratio",
                int(vi.queries) / int(res.queries) if converged else float("nan"),
                f"VI queries / {name.upper()} queries"
                + ("" if converged else f" (not converged within {QUERY_CAP}: no ratio)"),
            )
        )
    print(out, flush=True)
    return out


def _numpy_value_iteration(P2d: np.ndarray, R: np.ndarray, gamma: float, tol: float):
    """Plain NumPy VI with our certified stopping rule ``gamma ||TV - V|| <= tol (1 - gamma)``:
    ``P2d`` is ``P[S, A, S']`` as ``[S * A, S]``, ``R`` is ``[S, A]``. Returns ``(V, sweeps)``."""
    S, A = R.shape
    V = np.zeros(S)
    sweeps = 0
    while True:
        TV = (R + gamma * (P2d @ V).reshape(S, A)).max(1)
        sweeps += 1
        r = np.abs(TV - V).max()
        V = TV
        if gamma * r <= tol * (1 - gamma):
            return V, sweeps


def _one_sweep_1thread(tool, V):
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return tool._bellmanOperator(V)


def _peer_rows(quick: bool) -> list[dict]:
    """Our jitted Bellman sweep and VI solve against pymdptoolbox's sweep and a NumPy VI loop
    (S = 1000, A = 8, float64, gamma 0.99), and VI vs IE-VI wall time to 1e-6 at gamma 0.999
    (IE-VI's model solves included). Peers come from the ``bench`` extra."""
    import mdptoolbox.mdp
    from threadpoolctl import threadpool_limits

    rows = []
    S, gamma, tol = 1000, 0.99, 1e-6
    mdp = random_mdp(S, 8, gamma, key=jax.random.key(0))
    P = np.asarray(mdp.P)
    P = P / P.sum(-1, keepdims=True)  # pymdptoolbox rejects rows that miss 1 by 1e-15
    R = np.asarray(mdp.R)
    mdp = TabularMDP(jnp.asarray(P), jnp.asarray(R), gamma=gamma)
    tool = mdptoolbox.mdp.ValueIteration(list(P.transpose(1, 0, 2)), R, gamma)  # [A, S, S]
    V_np = np.linspace(0.0, 50.0, S)
    V_jx = jnp.asarray(V_np)
    sweep = jax.jit(bellman)
    np.testing.assert_allclose(
        np.asarray(sweep(mdp, V_jx)), tool._bellmanOperator(V_np)[1], rtol=1e-12
    )

    # The row: time per sweep inside a planner's loop, K sweeps in one compiled fori_loop
    # (what value_iteration runs) against K sweeps of pymdptoolbox's Bellman operator in a
    # Python loop (what its ValueIteration.run does), with default and single-threaded BLAS.
    K = 20
    sweeps = jax.jit(lambda m, v: jax.lax.fori_loop(0, K, lambda _, x: bellman(m, x), v))

    def peer_sweeps():
        v = V_np
        for _ in range(K):
            v = tool._bellmanOperator(v)[1]
        return v

    def peer_sweeps_1thread():
        with threadpool_limits(1):
            return peer_sweeps()

    np.testing.assert_allclose(np.asarray(sweeps(mdp, V_jx)), peer_sweeps(), rtol=1e-10)
    loops = {"default BLAS": peer_sweeps, "single-threaded BLAS": peer_sweeps_1thread}
    ours_loop = lambda: sweeps(mdp, V_jx)
    # settle: untimed calls before each timed one, so that neither side is timed while the other
    # library's threads still spin on the 2 cores (OpenBLAS spins ~0.1 s after a call).
    in_loop = {k: paired_time_ratio(f, ours_loop, repeats=11, settle=3) for k, f in loops.items()}
    # The single-call figure (one jitted sweep per call, dispatch included), reported alongside.
    ours_one = lambda: sweep(mdp, V_jx)
    calls = {
        "default BLAS": lambda: tool._bellmanOperator(V_np),
        "single-threaded BLAS": lambda: _one_sweep_1thread(tool, V_np),
    }
    single = {k: paired_time_ratio(f, ours_one, repeats=21, settle=60) for k, f in calls.items()}
    fastest = min(in_loop, key=lambda k: in_loop[k]["time"])
    fastest_one = min(single, key=lambda k: single[k]["time"])
    m, m1 = in_loop[fastest], single[fastest_one]
    rows.append(
        row(
            "pymdptoolbox_over_jax_vi_sweep_time_S1000",
            "ratio",
            m["ratio"],
            f"time per Bellman sweep inside a planner loop: {K} pymdptoolbox sweeps in a Python"
            f" loop / {K} of our sweeps in one jitted fori_loop (faster peer: {fastest}; median"
            " of paired ratios, float64, A=8); single_call_*: one jitted sweep per call,"
            " dispatch included",
            q25=m["q25"],
            q75=m["q75"],
            ours_ms=m["baseline_time"] / K * 1e3,
            peer_ms={k: v["time"] / K * 1e3 for k, v in in_loop.items()},
            single_call_ratio=m1["ratio"],
            single_call_q25=m1["q25"],
            single_call_q75=m1["q75"],
            single_call_faster_peer=fastest_one,
            single_call_ours_ms=m1["baseline_time"] * 1e3,
            single_call_peer_ms={k: v["time"] * 1e3 for k, v in single.items()},
        )
    )

    # The whole solve, same stopping rule (certified bound), same sweeps.
    P2d = P.reshape(-1, S)
    solve = jax.jit(value_iteration)
    jax_solve = lambda: solve(mdp, tol=tol, max_queries=100_000)
    np_solve = lambda: _numpy_value_iteration(P2d, R, gamma, tol)
    ours_res, (v_np, sweeps_np) = jax_solve(), np_solve()
    np.testing.assert_allclose(np.asarray(ours_res.V), v_np, rtol=1e-12)
    m = paired_time_ratio(np_solve, jax_solve, repeats=3 if quick else 7, settle=1)
    rows.append(
        row(
            "numpy_over_jax_vi_solve_time_S1000_g0.99",
            "ratio",
            m["ratio"],
            "NumPy VI loop / our value_iteration, to the certified 1e-6 bound (median of paired"
            " ratios)",
            q25=m["q25"],
            q75=m["q75"],
            sweeps_jax=int(ours_res.queries),
            sweeps_numpy=sweeps_np,
            ours_s=m["baseline_time"],
        )
    )

    # VI vs IE-VI wall time at gamma 0.999 (oracle stopping at 1e-6, as the query counts).
    hard = random_mdp(S, 8, GAMMA, key=jax.random.key(0))
    v_star = optimal_values(hard)
    model = perturbed_model(hard.P, 0.1 * (1 - GAMMA), key=jax.random.key(1))
    vi = jax.jit(value_iteration)
    ie = jax.jit(ie_vi)
    vi_run = lambda: vi(hard, v_star=v_star, max_queries=100_000)
    ie_run = lambda: ie(hard, model, h=100.0 / (1.0 - GAMMA), v_star=v_star)
    m = paired_time_ratio(vi_run, ie_run, repeats=1 if quick else 3)
    vi_res, ie_res = vi_run(), ie_run()
    rows.append(
        row(
            f"vi_over_ievi_wall_time_S1000_g{GAMMA}",
            "ratio",
            m["ratio"],
            "VI wall time / IE-VI wall time to sup-norm error 1e-6 (IE-VI's model solves"
            " included; model L1 error 0.1 (1 - gamma))",
            vi_s=m["time"],
            ievi_s=m["baseline_time"],
            vi_queries=int(vi_res.queries),
            ievi_queries=int(ie_res.queries),
            ievi_model_solves=int(ie_res.model_solves),
        )
    )
    print(rows, flush=True)
    return rows


def run(quick: bool = True) -> list[dict]:
    rows = []
    with jax.enable_x64(True):
        rows += _peer_rows(quick)
    count_at = (100, 1000) if quick else (100, 1000, 5000)
    with jax.enable_x64(True):
        for S in (100, 1000, 5000):
            for dtype, tag in ((jnp.float32, "f32"), (jnp.float64, "f64")):
                t = _sweep_time(_uniform_rows_mdp(S, dtype))
                rows.append(row(f"sweep_S{S}_A8_{tag}", "time", t * 1e3, "ms"))
                print(rows[-1], flush=True)
            if S not in count_at:
                continue
            mdp = random_mdp(S, 8, GAMMA, key=jax.random.key(0))
            v_star = optimal_values(mdp)
            vi = _vi_queries(mdp, v_star)
            for label, err in (("small", 0.1 * (1 - GAMMA)), ("5pct", 0.05)):
                model = perturbed_model(mdp.P, err, key=jax.random.key(1))
                ie, ad = _ie_queries(mdp, model, v_star, min(int(vi.queries), QUERY_CAP))
                rows += _query_rows(f"S{S}_g{GAMMA}_{label}_model", vi, ie, ad)
        # The gridworld is stiff and slow-mixing: there the model's error does cost queries.
        for size in (10, 30):
            mdp = gridworld(size, GAMMA, slip=0.2)
            v_star = optimal_values(mdp)
            vi = _vi_queries(mdp, v_star)
            for label, err in (("small", 0.1 * (1 - GAMMA)), ("5pct", 0.05)):
                model = perturbed_model(mdp.P, err, key=jax.random.key(1))
                ie, ad = _ie_queries(mdp, model, v_star, min(int(vi.queries), QUERY_CAP))
                rows += _query_rows(f"grid{size}x{size}_g{GAMMA}_{label}_model", vi, ie, ad)
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
