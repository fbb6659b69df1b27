"""Smoke run of P19's registered experiments (tiny sizes): every row has one value per seed (a
seed's best restart), the tails' reference rows are 1, and the sanity values meet their known
answers."""

from __future__ import annotations

import json
import math

from jaxpapers.core.experiment import run_paper


def test_p19_smoke(tmp_path):
    run_paper("P19", tmp_path, size="smoke", seeds=2, log=lambda _: None)
    saved = json.loads((tmp_path / "P19" / "result.json").read_text())
    exps = {e["id"]: e for e in saved["experiments"]}
    assert set(exps) == {"sanity", "turan", "upper_tail", "lower_tail", "estimator_variance"}
    for exp in exps.values():
        assert exp["verdict"] in {"holds", "does not hold", "inconclusive"}
        for row in exp["rows"]:
            assert len(row["seeds"]) == 2, (exp["id"], row)
    # known answers even at smoke size (the z-score's t bound over 2 seeds may stay inconclusive)
    assert exps["sanity"]["verdict"] in {"holds", "inconclusive"}
    sanity = {r["method"]: r["seeds"] for r in exps["sanity"]["rows"]}
    assert max(sanity["step_closed_form_error"] + sanity["shift_residual"]) < 1e-5
    assert max(sanity["mc_zscore_max"]) < 4
    for tail in ("upper_tail", "lower_tail"):
        rows = {r["method"]: r for r in exps[tail]["rows"]}
        for name, row in rows.items():
            if name.endswith("_reference"):
                assert row["seeds"] == [1.0, 1.0]
        # two restarts per seed, each with a feasibility flag
        for flags in exps[tail]["extras"]["feasible"].values():
            assert len(flags) == 2 and all(len(f) == 2 for f in flags)
    for row in exps["turan"]["rows"] + exps["estimator_variance"]["rows"]:
        assert all(math.isfinite(v) for v in row["seeds"]), row
