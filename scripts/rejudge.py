"""Judge committed results again by the rules registered now, from their stored per-seed rows.

Usage::

    python scripts/rejudge.py results results/full           # list the verdicts that would move
    python scripts/rejudge.py results results/full --write   # and rewrite the result.json files

For a change to the verdict rules (a test, a level, a threshold, a precondition): no experiment
runs (:func:`jaxpapers.core.experiment.rejudge`). Prints one line per experiment whose verdict or
rule verdict moves; regenerate ``results/RESULTS.md`` afterwards with
``jaxpapers.core.experiment.render_markdown``. ``tests/test_committed_results.py`` fails while the
committed results differ from what the rules compute.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from jaxpapers.core.experiment import rejudge, write_json_atomic


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="folders holding */result.json")
    parser.add_argument("--write", action="store_true", help="rewrite the result.json files")
    args = parser.parse_args()
    moved = 0
    for folder in args.folders:
        for path in sorted(folder.glob("*/result.json")):
            old = json.loads(path.read_text())
            new = rejudge(old)
            for a, b in zip(old["experiments"], new["experiments"], strict=True):
                pair_old = (a["verdict"], a.get("rule_verdict", a["verdict"]))
                pair_new = (b["verdict"], b["rule_verdict"])
                if pair_old != pair_new:
                    moved += 1
                    print(
                        f"{path.parent}: {a['id']}: {pair_old[0]} -> {pair_new[0]} "
                        f"(rule alone: {pair_old[1]} -> {pair_new[1]})"
                    )
            if args.write:
                write_json_atomic(path, new)
    print(f"{moved} verdicts move" + ("; files rewritten" if args.write else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
