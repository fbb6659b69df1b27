"""Compare two runs' ``result.json`` row by row and seed by seed.

Usage::

    python scripts/compare_results.py results/P17/result.json /tmp/new/P17/result.json

Prints, per experiment, whether the verdict is the same and the largest absolute and relative
difference of any row's per-seed value; lists rows and experiments present in only one file. The
exit status is 0 when every verdict and every per-seed value is the same within ``--rtol`` (default
0: bit for bit), 1 otherwise, 2 on unreadable input. Used to check that a refactor left a paper's
numbers unchanged.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def _load(path: str) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise SystemExit(f"{path}: {err}") from None


def compare(old: dict, new: dict, rtol: float = 0.0) -> tuple[list[str], bool]:
    """Lines describing the differences of two ``result.json`` records, and whether they agree."""
    lines, same = [], True
    old_e = {e["id"]: e for e in old.get("experiments", [])}
    new_e = {e["id"]: e for e in new.get("experiments", [])}
    for only, where in ((old_e.keys() - new_e.keys(), "old"), (new_e.keys() - old_e.keys(), "new")):
        for i in sorted(only):
            lines.append(f"{i}: only in the {where} file")
            same = False
    for i in [k for k in old_e if k in new_e]:
        a, b = old_e[i], new_e[i]
        rows_a = {r["method"]: r for r in a["rows"]}
        rows_b = {r["method"]: r for r in b["rows"]}
        worst_abs, worst_rel, notes = 0.0, 0.0, []
        for m in sorted(rows_a.keys() ^ rows_b.keys()):
            notes.append(f"row {m!r} only in the {'old' if m in rows_a else 'new'} file")
        for m in [k for k in rows_a if k in rows_b]:
            sa, sb = rows_a[m]["seeds"], rows_b[m]["seeds"]
            if len(sa) != len(sb):
                notes.append(f"row {m!r}: {len(sa)} vs {len(sb)} seeds")
                continue
            for x, y in zip(sa, sb, strict=True):
                if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)):
                    if not (x == y or (x != x and y != y)):
                        notes.append(f"row {m!r}: {x} vs {y}")
                    continue
                d = abs(x - y)
                worst_abs = max(worst_abs, d)
                worst_rel = max(worst_rel, d / max(abs(x), abs(y), 1e-300))
        verdict_same = a.get("verdict") == b.get("verdict")
        ok = verdict_same and not notes and worst_rel <= rtol
        same &= ok
        verdict = "same verdict" if verdict_same else f"verdict {a['verdict']} -> {b['verdict']}"
        lines.append(
            f"{i}: {verdict}; max |diff| {worst_abs:.3g}, max rel {worst_rel:.3g}"
            + ("".join(f"; {n}" for n in notes))
            + ("" if ok else "  <-- differs")
        )
    return lines, same


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rtol", type=float, default=0.0, help="relative tolerance (default 0)")
    args = parser.parse_args(argv)
    if not args.rtol >= 0:
        parser.error(f"--rtol must be >= 0, got {args.rtol}")
    lines, same = compare(_load(args.old), _load(args.new), args.rtol)
    print("\n".join(lines))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
