"""Report rows (no aim): what each paper's quick run costs the first time and again.

For every paper, ``jaxpapers reproduce PXX --quick`` runs twice in fresh processes on one new
persistent compilation cache folder: first with the folder empty (cold: every program is
compiled), then again (warm: every executable is read back from the cache). Rows per paper:

- ``quick_run_cold_s_PXX`` / ``quick_run_warm_s_PXX``: wall seconds of the whole command
  (Python start-up, imports, compiling or loading, running, writing results), with the child's
  CPU seconds (user + system) as ``cpu_s``;
- ``quick_run_warm_rows_identical_PXX``: 1 when every per-seed value and verdict of the warm run
  equals the cold run's bit for bit (the cache serves the same executables), else 0.

Totals ``quick_runs_cold_s_total`` / ``quick_runs_warm_s_total`` sum the papers. The difference
between the two is what compiling costs a first run; the warm figure is what a re-run costs.
Measure on a quiet machine: the command runs all nineteen papers twice (about 35 minutes on two
CPU cores). ``--papers P01,P17`` (or ``JAXPAPERS_QUICK_RUNS=P01,P17``) restricts it.

    python benchmarks/quick_runs.py [--papers P01,P17] [--out DIR]   or   jaxpapers bench quick_runs
"""

from __future__ import annotations

import datetime
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jaxpapers.core.bench import row, write_json_atomic
from jaxpapers.core.papers import PAPERS


def _timed(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the child) of ``cmd``; raises if it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _commit() -> str:
    proc = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=Path(__file__).resolve().parent,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() or "unknown"


def _values(path: Path) -> list:
    rec = json.loads(path.read_text())
    return [
        (e["id"], e["verdict"], [(r["method"], r["seeds"]) for r in e["rows"]])
        for e in rec["experiments"]
    ]


def _papers(selected: str | None) -> list[str]:
    ids = [p.id for p in PAPERS if p.implemented]
    if not selected:
        return ids
    chosen = [s.strip() for s in selected.split(",") if s.strip()]
    unknown = [c for c in chosen if c not in ids]
    if unknown or not chosen:
        raise ValueError(f"papers={selected!r}; expected a comma-separated subset of {ids}")
    return chosen


def run(
    quick: bool = True,
    papers: str | None = None,
    out: Path | None = None,
    keep: Path | None = None,
) -> list[dict]:
    """Rows for ``papers``; with ``out``, the finished papers' rows are written after each paper
    (an interrupted run keeps them); with ``keep``, each cold run's output folder is copied to
    ``keep/PXX`` (its ``result.json`` is a quiet cold quick run of the paper)."""
    rows = []
    totals = {"cold": 0.0, "warm": 0.0}
    cli = [sys.executable, "-m", "jaxpapers", "reproduce", "--quick"]
    for paper in _papers(papers or os.environ.get("JAXPAPERS_QUICK_RUNS")):
        with tempfile.TemporaryDirectory(prefix=f"jaxpapers-quick-{paper}-") as tmp:
            cache = Path(tmp) / "xla"
            results = {}
            for kind in ("cold", "warm"):
                out = Path(tmp) / kind
                wall, cpu = _timed([*cli, paper, "--out", str(out), "--compile-cache", str(cache)])
                totals[kind] += wall
                results[kind] = _values(out / paper / "result.json")
                rows.append(
                    row(
                        f"quick_run_{kind}_s_{paper}",
                        "time",
                        wall,
                        "s wall (jaxpapers reproduce --quick, "
                        + ("empty compilation cache)" if kind == "cold" else "warm cache)"),
                        cpu_s=cpu,
                    )
                )
            same = results["cold"] == results["warm"]
            rows.append(
                row(f"quick_run_warm_rows_identical_{paper}", "agreement", float(same), "1 = same")
            )
            if keep is not None:
                shutil.copytree(Path(tmp) / "cold" / paper, Path(keep) / paper, dirs_exist_ok=True)
        if out is not None:
            write_json_atomic(Path(out) / "bench" / "quick_runs.json", rows)
        print(rows[-3:], flush=True)
    stamp = {"date": datetime.date.today().isoformat(), "commit": _commit()}
    rows.append(
        row("quick_runs_cold_s_total", "time", totals["cold"], "s wall, all papers", **stamp)
    )
    rows.append(
        row("quick_runs_warm_s_total", "time", totals["warm"], "s wall, all papers", **stamp)
    )
    return rows


if __name__ == "__main__":
    import argparse

    from jaxpapers.core.bench import render_rows

    parser = argparse.ArgumentParser(prog="benchmarks/quick_runs.py")
    parser.add_argument("--papers", default=None, help="comma-separated paper ids (default all)")
    parser.add_argument("--out", default="results", help="writes OUT/bench/quick_runs.json")
    parser.add_argument("--keep", default=None, help="copy each cold run's output to KEEP/PXX")
    args = parser.parse_args()
    try:
        found = run(papers=args.papers, out=Path(args.out), keep=args.keep)
    except ValueError as err:
        parser.error(str(err))
    write_json_atomic(Path(args.out) / "bench" / "quick_runs.json", found)
    print(render_rows(found))
