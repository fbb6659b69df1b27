"""Smoke run of P18's registered experiments (tiny sizes, shapes shared with test_ivp.py)."""

from __future__ import annotations

import json
import math

from jaxpapers.core.experiment import run_paper


def test_p18_smoke(tmp_path):
    run_paper("P18", tmp_path, size="smoke", seeds=2, log=lambda _: None)
    saved = json.loads((tmp_path / "P18" / "result.json").read_text())
    exps = {e["id"]: e for e in saved["experiments"]}
    assert set(exps) == {
        "concealment_sweep",
        "context_dependence",
        "distilled_prober",
        "questionnaire_exact",
    }
    for exp in exps.values():
        assert exp["verdict"] in {"holds", "does not hold", "inconclusive"}
        for row in exp["rows"]:
            assert math.isfinite(row["mean"]) and len(row["seeds"]) == 2, (exp["id"], row)
    # The sanity check has a known answer even at smoke size.
    assert exps["questionnaire_exact"]["verdict"] == "holds"
    for name in ("concealment_sweep", "context_dependence", "distilled_prober"):
        assert (tmp_path / "P18" / f"{name}.png").exists()
