"""Time ``make test`` on a fresh clone of this repository and record it.

Usage::

    python scripts/time_suite.py [--out results/bench/suite_time.json]

Clones the current ``HEAD`` into a temporary folder (so nothing built here helps: a new ``.venv``,
empty pytest and compilation caches), runs ``make test`` there, and appends one record to the
JSON list in ``--out``: the date, the commit, the wall seconds of the whole ``make test`` (set-up
of ``.venv`` included) and pytest's own summary (passed, skipped, seconds).
``scripts/readme_tables.py`` renders the records into the README.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "results" / "bench" / "suite_time.json"))
    args = parser.parse_args(argv)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="jaxpapers-suite-") as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        t0 = time.perf_counter()
        proc = subprocess.run(["make", "test"], cwd=clone, capture_output=True, text=True)
        wall = time.perf_counter() - t0
    tail = proc.stdout[-4000:] + proc.stderr[-2000:]
    summary = re.findall(r"=+ (.*?) in ([\d.]+)s", tail)
    if proc.returncode != 0 or not summary:
        print(tail, file=sys.stderr)
        return 1
    counts, pytest_s = summary[-1]
    found = dict((k, int(v)) for v, k in re.findall(r"(\d+) (passed|skipped|failed)", counts))
    record = {
        "date": datetime.date.today().isoformat(),
        "commit": commit,
        "command": "make test (fresh clone)",
        "wall_s": round(wall, 1),
        "pytest_s": float(pytest_s),
        **found,
    }
    out = Path(args.out)
    records = json.loads(out.read_text()) if out.exists() else []
    records.append(record)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(records, indent=1) + "\n")
    print(record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
