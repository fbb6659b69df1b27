"""scripts/compare_results.py: the refactor check that two runs' result.json agree seed by seed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location(
        "compare_results", ROOT / "scripts/compare_results.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _record(values, verdict="holds"):
    rows = [{"method": m, "seeds": v} for m, v in values.items()]
    return {"experiments": [{"id": "e", "verdict": verdict, "rows": rows}]}


def test_identical_records_agree_and_moves_are_measured(tmp_path):
    cmp = _module()
    old = _record({"a": [1.0, 2.0], "b": [3.0, None]})
    assert cmp.compare(old, old)[1]
    lines, same = cmp.compare(old, _record({"a": [1.0, 2.0 * (1 + 1e-7)], "b": [3.0, None]}))
    assert not same and "max rel 1e-07" in lines[0]
    assert cmp.compare(old, _record({"a": [1.0, 2.0 * (1 + 1e-7)], "b": [3.0, None]}), 1e-6)[1]
    lines, same = cmp.compare(old, _record({"a": [1.0, 2.0], "b": [3.0, None]}, "inconclusive"))
    assert not same and "verdict holds -> inconclusive" in lines[0]
    lines, same = cmp.compare(old, _record({"a": [1.0, 2.0]}))
    assert not same and "row 'b' only in the old file" in lines[0]


def test_command_line_exit_status(tmp_path, capsys):
    cmp = _module()
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_record({"a": [1.0]})))
    b.write_text(json.dumps(_record({"a": [1.5]})))
    assert cmp.main([str(a), str(a)]) == 0
    assert cmp.main([str(a), str(b)]) == 1
    assert "differs" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="missing.json"):
        cmp.main([str(a), str(tmp_path / "missing.json")])
    with pytest.raises(SystemExit):
        cmp.main([str(a), str(b), "--rtol", "-1"])


def test_readme_run_cost_tables_are_rendered_from_the_measurements():
    """The README's cold/warm and fresh-clone tables come from results/bench, never by hand."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts/readme_tables.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
