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
