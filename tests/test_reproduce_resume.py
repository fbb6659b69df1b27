"""A `jaxpapers reproduce` killed with SIGKILL and restarted with --resume keeps every finished
result and ends with the same numbers as an uninterrupted run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from jaxpapers.core.experiment import run_paper

EXPERIMENTS = ["queries_gridworld_5pct_error", "any_model"]


def _numbers(record: dict) -> dict:
    return {
        (e["id"], r["method"]): list(r["seeds"]) for e in record["experiments"] for r in e["rows"]
    }


@pytest.mark.slow
def test_sigkill_then_resume_loses_nothing(tmp_path):
    reference = run_paper(
        "P17", tmp_path / "ref", size="smoke", seeds=2, only=EXPERIMENTS, log=lambda m: None
    )
    out = tmp_path / "killed"
    cmd = [
        sys.executable,
        "-m",
        "jaxpapers",
        "reproduce",
        "P17",
        "--smoke",
        "--seeds",
        "2",
        "--experiments",
        ",".join(EXPERIMENTS),
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    result = out / "P17" / "result.json"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if result.exists() and len(json.loads(result.read_text())["experiments"]) >= 1:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be interrupted"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = json.loads(result.read_text())  # still whole JSON: written by atomic rename
    assert [e["id"] for e in partial["experiments"]] == EXPERIMENTS[:1]

    resumed = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, check=True)
    assert f"P17/{EXPERIMENTS[0]}: finished earlier, kept" in resumed.stderr
    final = json.loads(result.read_text())
    assert [e["id"] for e in final["experiments"]] == EXPERIMENTS
    assert _numbers(final) == _numbers(reference)
    assert final["experiments"][0] == partial["experiments"][0]
    assert (out / "RESULTS.md").exists()
