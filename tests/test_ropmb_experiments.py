"""Smoke run of P12's registered experiments (tiny sizes) through the runner."""

from __future__ import annotations

import json
import math

from jaxpapers.core.experiment import (
    Outcome,
    apply_preconditions,
    experiments_for,
    run_paper,
    summarise,
)
from jaxpapers.ropmb.experiments import BANK, CAM, LABEL_ACC, ROPMB, SEED_PREC, SIPE


def test_p12_smoke(tmp_path):
    run_paper("P12", tmp_path, size="smoke", seeds=2, log=lambda _: None)
    saved = json.loads((tmp_path / "P12" / "result.json").read_text())
    exps = {e["id"]: e for e in saved["experiments"]}
    assert set(exps) == {"seeds_informative", "pseudo_mask_miou", "boundary_f1", "one_hot_features"}
    for exp in exps.values():
        assert exp["verdict"] in {"holds", "does not hold", "inconclusive"}
        for row in exp["rows"]:
            assert math.isfinite(row["mean"]) and len(row["seeds"]) == 2, (exp["id"], row)
            assert 0.0 <= row["mean"] <= 1.0
    # The sanity answer is known: every method recovers one-hot regions exactly.
    assert exps["one_hot_features"]["verdict"] == "holds"
    # ... with a PRDC that training moved well away from its random initialisation.
    moved = exps["one_hot_features"]["extras"]["prdc_relative_weight_change"]
    assert min(moved) > 0.1, moved
    assert (tmp_path / "P12" / "pseudo_mask_miou.png").exists()


def _judge(values: dict[str, dict[str, list[float]]]) -> dict[str, dict]:
    """Verdicts of the registered P12 experiments on constructed per-seed rows."""
    exps = [e for e in experiments_for("P12") if e.id in values]
    records = [summarise(e, Outcome(values[e.id])) for e in exps]
    return {r["id"]: r for r in apply_preconditions(records, exps)}


def test_pseudo_mask_comparisons_need_informative_seeds():
    """With the classifier of the 3-seed runs (label accuracy 0.70-0.80, seed precision
    0.18-0.52) the pseudo-mask comparisons are inconclusive whatever the rows show; with a
    classifier above both levels they are judged."""
    miou = {
        CAM: [0.30, 0.32, 0.28, 0.31, 0.29],
        SIPE: [0.28, 0.3, 0.27, 0.3, 0.28],
        BANK: [0.31, 0.33, 0.3, 0.32, 0.3],
        ROPMB: [0.40, 0.42, 0.39, 0.41, 0.40],
    }
    weak = {LABEL_ACC: [0.7, 0.75, 0.8, 0.72, 0.78], SEED_PREC: [0.18, 0.3, 0.52, 0.4, 0.35]}
    got = _judge({"seeds_informative": weak, "pseudo_mask_miou": miou, "boundary_f1": miou})
    assert got["seeds_informative"]["verdict"] == "does not hold"
    for exp in ("pseudo_mask_miou", "boundary_f1"):
        assert got[exp]["rule_verdict"] == "holds"
        assert got[exp]["verdict"] == "inconclusive"
        assert "seeds_informative" in got[exp]["precondition"]
    strong = {LABEL_ACC: [0.95, 0.96, 0.94, 0.95, 0.97], SEED_PREC: [0.7, 0.75, 0.8, 0.72, 0.7]}
    got = _judge({"seeds_informative": strong, "pseudo_mask_miou": miou})
    assert got["pseudo_mask_miou"]["verdict"] == "holds"
