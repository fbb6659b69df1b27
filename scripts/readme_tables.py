"""Render the README's table of run costs from the measured JSON files (never typed by hand).

Usage::

    python scripts/readme_tables.py          # rewrite the block in README.md
    python scripts/readme_tables.py --check  # exit 1 if README.md differs from the rendering

Sources: ``results/bench/quick_runs_*.json`` (earlier snapshots: ``{"date", "commit", "command",
"rows"}``), ``results/bench/quick_runs.json`` (the latest ``jaxpapers bench quick_runs``; its total
rows carry the date and commit) and ``results/bench/suite_time.json`` (``scripts/time_suite.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- quick-runs:begin -->", "<!-- quick-runs:end -->"


def _snapshots(bench: Path) -> list[dict]:
    snaps = [json.loads(p.read_text()) for p in sorted(bench.glob("quick_runs_*.json"))]
    latest = bench / "quick_runs.json"
    if latest.exists():
        rows = json.loads(latest.read_text())
        total = next(r for r in rows if r["case"] == "quick_runs_cold_s_total")
        snaps.append(
            {
                "date": total["date"],
                "commit": total["commit"],
                "command": "jaxpapers bench quick_runs",
                "rows": rows,
            }
        )
    return sorted(snaps, key=lambda s: s["date"])


def render(bench: Path) -> str:
    snaps = _snapshots(bench)
    values = [{r["case"]: r for r in s["rows"]} for s in snaps]
    papers = sorted(
        {c.rsplit("_", 1)[1] for v in values for c in v if c.startswith("quick_run_cold_s_P")}
    )
    head = (
        "| paper | "
        + " | ".join(f"cold s ({s['date']}) | warm s ({s['date']})" for s in snaps)
        + " |"
    )
    lines = [
        "Quick run of each paper (`jaxpapers reproduce PXX --quick`, 5 seeds, 2 quiet CPU cores),",
        "wall seconds, first with an empty compilation cache (cold) and then again on it (warm):",
        "",
        head,
        "|---|" + "---|---|" * len(snaps),
    ]

    def cell(v, case):
        r = v.get(case)
        return f"{r['value']:.0f}" if r else "-"

    for p in papers:
        lines.append(
            f"| {p} | "
            + " | ".join(
                f"{cell(v, f'quick_run_cold_s_{p}')} | {cell(v, f'quick_run_warm_s_{p}')}"
                for v in values
            )
            + " |"
        )
    lines.append(
        "| all | "
        + " | ".join(
            f"{cell(v, 'quick_runs_cold_s_total')} | {cell(v, 'quick_runs_warm_s_total')}"
            for v in values
        )
        + " |"
    )
    lines += [
        "",
        "Commands: "
        + "; ".join(f"{s['date']} at {s['commit']}: {s['command']}" for s in snaps)
        + ".",
    ]
    suite = bench / "suite_time.json"
    if suite.exists():
        lines += [
            "",
            "| `make test` on a fresh clone | commit | wall s | pytest s | passed | skipped |",
            "|---|---|---|---|---|---|",
        ]
        for r in json.loads(suite.read_text()):
            lines.append(
                f"| {r['date']} | {r['commit']} | {r['wall_s']:.0f} | {r['pytest_s']:.0f} | "
                f"{r.get('passed', 0)} | {r.get('skipped', 0)} |"
            )
        lines += ["", "(`python scripts/time_suite.py` measures and records a row.)"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--readme", default=str(ROOT / "README.md"))
    parser.add_argument("--bench", default=str(ROOT / "results" / "bench"))
    args = parser.parse_args(argv)
    readme = Path(args.readme)
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        print(f"{readme}: no {BEGIN} ... {END} block", file=sys.stderr)
        return 2
    a, b = text.index(BEGIN) + len(BEGIN), text.index(END)
    new = text[:a] + "\n" + render(Path(args.bench)) + "\n" + text[b:]
    if args.check:
        if new != text:
            print(f"{readme} is out of date: run python scripts/readme_tables.py", file=sys.stderr)
            return 1
        return 0
    readme.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
