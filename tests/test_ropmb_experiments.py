"""Smoke run of P12's registered experiments (tiny sizes) through the runner."""

from __future__ import annotations

import json
import math

from jaxpapers.core.experiment import run_paper


def test_p12_smoke(tmp_path):
    run_paper("P12", tmp_path, size="smoke", seeds=2, log=lambda _: None)
    saved = json.loads((tmp_path / "P12" / "result.json").read_text())
    exps = {e["id"]: e for e in saved["experiments"]}
    assert set(exps) == {"pseudo_mask_miou", "boundary_f1", "one_hot_features"}
    for exp in exps.values():
        assert exp["verdict"] in {"holds", "does not hold", "inconclusive"}
        for row in exp["rows"]:
            assert math.isfinite(row["mean"]) and len(row["seeds"]) == 2, (exp["id"], row)
            assert 0.0 <= row["mean"] <= 1.0
    # The sanity answer is known: every method recovers one-hot regions exactly.
    assert exps["one_hot_features"]["verdict"] == "holds"
    assert (tmp_path / "P12" / "pseudo_mask_miou.png").exists()
