"""Benchmark helpers: median wall time after a compile warm-up, compiled memory, JSON rows.

Benchmark scripts live in ``benchmarks/NAME.py`` and define ``run(quick: bool) -> list[dict]``;
``jaxpapers bench NAME --out DIR`` writes the rows to ``DIR/bench/NAME.json``. Each row is
``{"case": str, "metric": str, "value": float, "unit": str}`` (ratios are rows with metric
``"ratio"`` whose case names what is divided by what).
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from jaxpapers.core.experiment import write_json_atomic


def row(case: str, metric: str, value: float, unit: str, **extra: Any) -> dict[str, Any]:
    """One benchmark row."""
    return {"case": case, "metric": metric, "value": float(value), "unit": unit, **extra}


def median_time(fn: Callable[..., Any], *args: Any, repeats: int = 7, warmup: int = 1) -> float:
    """Median seconds per call of ``fn(*args)`` after ``warmup`` calls (compilation excluded).

    Outputs are blocked on with ``jax.block_until_ready`` so asynchronous dispatch is timed in full.
    """
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def interleaved_median_times(
    fns: dict[str, Callable[[], Any]], *, repeats: int = 7, warmup: int = 1
) -> dict[str, float]:
    """Median seconds of several zero-argument callables, timed interleaved so that machine noise
    hits all of them alike (use this for ratios)."""
    for fn in fns.values():
        for _ in range(warmup):
            jax.block_until_ready(fn())
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            jax.block_until_ready(fn())
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def paired_time_ratio(
    fn: Callable[[], Any],
    baseline: Callable[[], Any],
    *,
    repeats: int = 21,
    warmup: int = 1,
    settle: int = 0,
) -> dict[str, float]:
    """Robust ``time(fn) / time(baseline)`` on a noisy machine.

    Each repeat times both callables back to back, alternating which goes first (ABBA), and
    forms one ratio; the result is the median ratio with its quartiles. A load change that lasts
    longer than one pair cancels in the ratio, which a ratio of two separate medians does not do.

    ``settle`` untimed calls precede each timed call. Use it when the two callables run on
    different thread pools: OpenBLAS's threads keep spinning on the cores for ~0.1 s after a
    call, so a call timed right after the other library's is slowed by threads it does not own
    (measured on 2 cores: a jitted Bellman sweep took 3.3 ms right after a NumPy/OpenBLAS one,
    1.6 ms in its own steady state; ``settle=3`` recovers the latter).

    Returns:
      ``{"ratio", "q25", "q75", "time", "baseline_time"}`` (times: medians in seconds).
    """
    if repeats < 1:
        raise ValueError(f"repeats={repeats}; expected >= 1")
    if settle < 0:
        raise ValueError(f"settle={settle}; expected >= 0")
    for _ in range(warmup):
        jax.block_until_ready(fn())
        jax.block_until_ready(baseline())

    def timed(f: Callable[[], Any]) -> float:
        for _ in range(settle):
            jax.block_until_ready(f())
        t0 = time.perf_counter()
        jax.block_until_ready(f())
        return time.perf_counter() - t0

    ratios, t_fn, t_base = [], [], []
    for i in range(repeats):
        if i % 2 == 0:
            a = timed(fn)
            b = timed(baseline)
        else:
            b = timed(baseline)
            a = timed(fn)
        ratios.append(a / b)
        t_fn.append(a)
        t_base.append(b)
    q25, med, q75 = (float(v) for v in np.quantile(ratios, [0.25, 0.5, 0.75]))
    return {
        "ratio": med,
        "q25": q25,
        "q75": q75,
        "time": statistics.median(t_fn),
        "baseline_time": statistics.median(t_base),
    }


def executable_memory(compiled: Any) -> dict[str, int]:
    """XLA's ``memory_analysis()`` of an already compiled executable, in bytes.

    ``peak`` is arguments + outputs + temporaries - aliased bytes (what the executable holds).
    Use this on the executable you time, so nothing is compiled twice.
    """
    mem = compiled.memory_analysis()
    if mem is None:
        raise RuntimeError("this backend reports no memory analysis")
    out = {
        "argument": int(mem.argument_size_in_bytes),
        "output": int(mem.output_size_in_bytes),
        "temp": int(mem.temp_size_in_bytes),
        "alias": int(mem.alias_size_in_bytes),
        "generated_code": int(mem.generated_code_size_in_bytes),
    }
    out["peak"] = out["argument"] + out["output"] + out["temp"] - out["alias"]
    return out


def compiled_memory(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, int]:
    """:func:`executable_memory` of ``jax.jit(fn, **kwargs)`` compiled for ``args``."""
    return executable_memory(jax.jit(fn, **kwargs).lower(*args).compile())


def find_benchmarks_dir() -> Path:
    """``./benchmarks`` if present, else the ``benchmarks/`` beside the installed source tree."""
    here = Path.cwd() / "benchmarks"
    if here.is_dir():
        return here
    src = Path(__file__).resolve().parents[2] / "benchmarks"
    if src.is_dir():
        return src
    raise FileNotFoundError(
        "no benchmarks/ folder found: run `jaxpapers bench` from a source checkout"
    )


def available_benchmarks() -> list[str]:
    """Names of the benchmark scripts in ``benchmarks/`` (files starting with ``_`` are helpers)."""
    try:
        folder = find_benchmarks_dir()
    except FileNotFoundError:
        return []
    return sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))


def run_benchmark(name: str, out: Path, *, quick: bool = True) -> list[dict[str, Any]]:
    """Import ``benchmarks/NAME.py``, call its ``run(quick)`` and write ``out/bench/NAME.json``."""
    path = find_benchmarks_dir() / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"jaxpapers_bench_{name}", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    rows = module.run(quick=quick)
    write_json_atomic(Path(out) / "bench" / f"{name}.json", rows)
    return rows


def render_rows(rows: Sequence[dict[str, Any]]) -> str:
    """A plain-text table of benchmark rows: case, metric, value, unit."""
    width = max((len(r["case"]) for r in rows), default=4)
    return "\n".join(
        f"{r['case']:<{width}}  {r['metric']:<14} {r['value']:>14.6g} {r['unit']}" for r in rows
    )


def bench_main(
    name: str, run: Callable[..., list[dict[str, Any]]], argv: Sequence[str] | None = None
) -> None:
    """Entry point for ``python benchmarks/NAME.py [--full] [--out DIR]``."""
    import argparse

    parser = argparse.ArgumentParser(prog=f"benchmarks/{name}.py")
    parser.add_argument("--full", action="store_true", help="larger sizes (GPU/TPU)")
    parser.add_argument("--out", default="results", help="writes OUT/bench/NAME.json")
    args = parser.parse_args(argv)
    rows = run(quick=not args.full)
    write_json_atomic(Path(args.out) / "bench" / f"{name}.json", rows)
    print(render_rows(rows))
