"""P06 experiments at smoke size through the runner: rows with finite numbers, computed verdicts,
plots, and a resumed run that repeats no work."""

from __future__ import annotations

import json
import math

from jaxpapers.core.experiment import run_paper


def test_p06_smoke_run(tmp_path):
    record = run_paper("P06", tmp_path, size="smoke", seeds=2, log=lambda s: None)
    saved = json.loads((tmp_path / "P06" / "result.json").read_text())
    assert saved["paper"] == "P06" and saved["size"] == "smoke"
    ids = [e["id"] for e in saved["experiments"]]
    assert ids == ["mmd_gp_mixture", "mmd_oscillator", "mmd_burgers", "evals_burgers"]
    for exp in saved["experiments"]:
        assert exp["verdict"] in {"holds", "does not hold", "inconclusive"}
        names = {r["method"] for r in exp["rows"]}
        assert {"ffm", "ot_euclid", "kffm_rbf", "kffm_sobolev", "kffm_signature"} == names
        for r in exp["rows"]:
            assert len(r["seeds"]) == 2
            assert all(math.isfinite(v) for v in r["seeds"])
        assert (tmp_path / "P06" / exp["plots"][0]).stat().st_size > 1000
    mmd = saved["experiments"][0]
    assert all(abs(r["mean"]) < 5 for r in mmd["rows"])  # MMD^2 with 4 kernels is below 2 * 4
    assert set(mmd["extras"]) >= {"density_mse", "spectrum_mse", "hsd_rbf", "nfe", "samples"}
    # A resumed run keeps every finished experiment and returns the same numbers.
    again = run_paper("P06", tmp_path, size="smoke", seeds=2, resume=True, log=lambda s: None)
    means = lambda rec: [[r["mean"] for r in e["rows"]] for e in rec["experiments"]]
    assert means(again) == means(record)
