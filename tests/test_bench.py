"""The benchmark timing helpers, on a fake clock (no wall-clock assertions)."""

from __future__ import annotations

import pytest

from jaxpapers.core import bench


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now

    def work(self, seconds):
        def fn():
            self.now += seconds
            return 0

        return fn


def test_paired_time_ratio_is_median_of_pairwise_ratios(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(bench.time, "perf_counter", clock.perf_counter)
    # Baseline alternates between 1 s and 3 s (a load change); fn always costs 1.1 x baseline's
    # current cost, because the load change lasts for a whole pair.
    state = {"load": 1.0, "calls": 0}

    def baseline():
        clock.now += state["load"]
        state["calls"] += 1
        if state["calls"] % 2 == 0:
            state["load"] = 4.0 - state["load"]

    def fn():
        clock.now += 1.1 * state["load"]

    out = bench.paired_time_ratio(fn, baseline, repeats=9, warmup=0)
    assert out["ratio"] == pytest.approx(1.1, rel=0.15)
    assert out["q25"] <= out["ratio"] <= out["q75"]


def test_paired_time_ratio_exact_on_constant_costs(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(bench.time, "perf_counter", clock.perf_counter)
    out = bench.paired_time_ratio(clock.work(0.3), clock.work(0.2), repeats=5, warmup=2)
    assert out["ratio"] == pytest.approx(1.5)
    assert out["time"] == pytest.approx(0.3) and out["baseline_time"] == pytest.approx(0.2)


def test_paired_time_ratio_rejects_no_repeats():
    with pytest.raises(ValueError, match="repeats=0"):
        bench.paired_time_ratio(lambda: 0, lambda: 0, repeats=0)
    with pytest.raises(ValueError, match="settle=-1"):
        bench.paired_time_ratio(lambda: 0, lambda: 0, settle=-1)


def test_paired_time_ratio_settle_times_only_the_settled_call(monkeypatch):
    # A call right after the other callable is slow (its threads still spin); settled calls are
    # not. With settle=2 every timed call follows two untimed calls of the same callable.
    clock = FakeClock()
    monkeypatch.setattr(bench.time, "perf_counter", clock.perf_counter)
    state = {"last": None, "calls": {"fn": 0, "base": 0}}

    def make(name, cost):
        def f():
            clock.now += cost * (3.0 if state["last"] not in (None, name) else 1.0)
            state["last"] = name
            state["calls"][name] += 1

        return f

    fn, base = make("fn", 0.2), make("base", 0.1)
    out = bench.paired_time_ratio(fn, base, repeats=4, warmup=0, settle=2)
    assert out["ratio"] == pytest.approx(2.0)
    assert state["calls"] == {"fn": 12, "base": 12}
    # Without settling, the ABBA order times half the calls right after the other callable.
    unsettled = bench.paired_time_ratio(fn, base, repeats=4, warmup=0)
    assert unsettled["time"] == pytest.approx(0.4)
    assert unsettled["baseline_time"] == pytest.approx(0.2)


def test_executable_memory_counts_arguments_and_outputs():
    import jax
    import jax.numpy as jnp

    a = jnp.ones((32, 16), jnp.float32)
    b = jnp.ones((16, 8), jnp.float32)
    f = lambda x, y: x @ y
    mem = bench.executable_memory(jax.jit(f).lower(a, b).compile())
    assert mem["argument"] == 4 * (32 * 16 + 16 * 8)
    assert mem["output"] == 4 * 32 * 8
    assert mem["peak"] == mem["argument"] + mem["output"] + mem["temp"] - mem["alias"]
    assert bench.compiled_memory(f, a, b) == mem


# ---- the peer rows' own references (issue 38): each checked against brute force -------------


def _load_benchmark(name):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"test_bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cfshap_closed_form_matches_brute_force_interventional_shapley():
    # Brute force: v(S) = mean_b f(x_S, b_-S) on all 2^n coalitions, Shapley weights, float64.
    import itertools
    import math

    import numpy as np

    mod = _load_benchmark("cfshap")
    n = 5
    terms, bg, X = mod._polynomial_problem(n, seed=3)
    lin, Q, c3, idx = mod._model_arrays(terms, n)
    f = lambda Z: Z @ lin + np.einsum("...i,ij,...j->...", Z, Q, Z) + np.prod(Z[..., idx], -1) @ c3
    X = X[:4]
    want = np.zeros_like(X)
    for p, x in enumerate(X):
        v = {}
        for S in itertools.product((0, 1), repeat=n):
            mask = np.array(S, bool)
            v[S] = f(np.where(mask, x, bg)).mean()
        for S, vs in v.items():
            k = sum(S)
            for i in range(n):
                if S[i]:
                    continue
                T = tuple(1 if j == i else s for j, s in enumerate(S))
                w = math.factorial(k) * math.factorial(n - k - 1) / math.factorial(n)
                want[p, i] += w * (v[T] - vs)
    got = mod._closed_form(terms, bg, X)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)  # float64, O(1) values
    assert len([t for t in terms if len(t[1]) == 3]) == n // 2  # third-order terms present


def test_ldp_estimators_are_unbiased_with_the_closed_form_variance():
    # 512 seeds of 4000 users, d = 8: per category the mean error is ~0 and the variance is the
    # closed form. Relative s.e. of a variance from 512 draws is sqrt(2 / 512) = 0.0625 per
    # category, 0.022 averaged over 8, so 0.12 is > 5 s.e.
    import jax
    import numpy as np

    mod = _load_benchmark("ldp_rl")
    d, n = 8, mod.BLOCK
    values = np.random.default_rng(0).integers(0, d, n).astype(np.int32)
    truth = np.bincount(values, minlength=d).astype(np.float64)
    keys = jax.random.split(jax.random.key(0), 512)
    for mech, fn in (("ue", mod._ue_counts), ("rr", mod._krr_counts)):
        est = np.asarray(jax.vmap(lambda k, fn=fn: fn(k, values, d))(keys), np.float64)
        var = mod.closed_form_variance(mech, d, truth)
        ratio = ((est - truth) ** 2).mean(0) / var
        assert abs(ratio.mean() - 1.0) < 0.12, (mech, ratio)
        z = (est.mean(0) - truth) / np.sqrt(var / len(keys))
        assert np.abs(z).max() < 4.5, (mech, z)


def test_numpy_k4_density_matches_all_injective_tuples():
    import itertools
    import math

    import numpy as np

    mod = _load_benchmark("graphons")
    m = 7
    rng = np.random.default_rng(0)
    A = rng.random((m, m))
    A = (A + A.T) / 2
    total = sum(
        math.prod(A[t[a], t[b]] for a, b in itertools.combinations(range(4), 2))
        for t in itertools.permutations(range(m), 4)
    )
    want = total / math.prod(range(m - 3, m + 1))
    assert mod.numpy_k4_density(A) == pytest.approx(want, rel=1e-12)
