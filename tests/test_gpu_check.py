"""``make gpu-check`` in its dry mode (GPU_CHECK_DRY=1): the script runs on CPU before any GPU."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_dry_run_lists_every_item_and_runs_one_of_each_kind(tmp_path, monkeypatch):
    from jaxpapers.core.bench import available_benchmarks
    from jaxpapers.core.papers import PAPERS

    gpu_check = _module()
    monkeypatch.setenv("GPU_CHECK_DRY", "1")
    assert gpu_check.main(["--out", str(tmp_path)]) == 0
    table = (tmp_path / "gpu" / "README.md").read_text()
    record = json.loads((tmp_path / "gpu" / "gpu_check.json").read_text())
    import jax

    assert record["dry"] and f"jax {jax.__version__}" in table and "Device: " in table
    rows = {(i["kind"], i["name"]): i for i in record["items"]}
    ran = {k: v for k, v in rows.items() if v["status"] != "listed (dry run)"}
    assert {k[0] for k in ran} == {"pallas", "smoke", "bench"}
    assert all(v["status"] == "pass" for v in ran.values()), ran
    for p in PAPERS:
        if p.implemented:
            assert rows[("smoke", p.id)]["status"] == "listed (dry run)"
    for name in available_benchmarks():
        assert (("bench", name) in rows) == (name not in gpu_check.CPU_ONLY_BENCHMARKS)
    assert ("pallas", "kernels_compiled") in rows
    assert f"{len(available_benchmarks())} benchmark scripts import" in table
    assert (tmp_path / "gpu" / "logs").is_dir()


def test_failures_and_budget_are_reported(tmp_path, monkeypatch):
    gpu_check = _module()
    py = sys.executable
    items = [
        gpu_check.Item("pallas", "ok", [py, "-c", "print('fine')"], 30),
        gpu_check.Item("smoke", "bad", [py, "-c", "import sys; print('boom'); sys.exit(3)"], 30),
        gpu_check.Item("bench", "slow", [py, "-c", "import time; time.sleep(30)"], 1),
    ]
    monkeypatch.setattr(gpu_check, "plan", lambda out, dry: items)
    monkeypatch.delenv("GPU_CHECK_DRY", raising=False)
    assert gpu_check.main(["--out", str(tmp_path), "--budget", "60"]) == 1
    status = {i.name: (i.status, i.detail) for i in items}
    assert status["ok"] == ("pass", "fine")
    assert status["bad"] == ("FAIL (exit 3)", "boom")
    assert status["slow"][0] == "FAIL (timeout 1 s)"
    table = (tmp_path / "gpu" / "README.md").read_text()
    assert "| smoke | bad | FAIL (exit 3) |" in table


def test_budget_spent_leaves_items_not_run(tmp_path, monkeypatch):
    gpu_check = _module()
    items = [gpu_check.Item("bench", "never", [sys.executable, "-c", "pass"], 30)]
    monkeypatch.setattr(gpu_check, "plan", lambda out, dry: items)
    monkeypatch.delenv("GPU_CHECK_DRY", raising=False)
    assert gpu_check.main(["--out", str(tmp_path), "--budget", "1"]) == 0
    assert items[0].status == "not run (budget)"
    with pytest.raises(SystemExit):
        gpu_check.main(["--out", str(tmp_path), "--budget", "0"])
