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
from jaxpapers.ropmb.experiments import (
    BANK,
    CAM,
    CAM_VAL,
    CEILING,
    LABEL_ACC,
    ROPMB,
    ROPMB_INIT,
    SANITY_ROWS,
    SANITY_UNTRAINED,
    SEED_PREC,
    SIPE,
)
from jaxpapers.ropmb.experiments._pipeline import OFFSETS


def test_p12_smoke(tmp_path):
    run_paper("P12", tmp_path, size="smoke", seeds=2, log=lambda _: None)
    saved = json.loads((tmp_path / "P12" / "result.json").read_text())
    exps = {e["id"]: e for e in saved["experiments"]}
    assert set(exps) == {
        "seeds_informative",
        "prototype_ceiling",
        "segmenter_miou",
        "segmenter_miou_gnn",
        "pseudo_mask_miou",
        "pseudo_mask_miou_gnn",
        "boundary_f1",
        "one_hot_features",
    }
    for exp in exps.values():
        assert exp["verdict"] in {"holds", "does not hold", "inconclusive"}
        for row in exp["rows"]:
            assert math.isfinite(row["mean"]) and len(row["seeds"]) == 2, (exp["id"], row)
            assert 0.0 <= row["mean"] <= 1.0
    # The sanity answer is known: every method recovers one-hot regions exactly, RO-PMB only
    # once its graph is trained (the graph at its initialisation gets the masks wrong).
    # (Two seeds: the t tests may stay inconclusive; the rows decide here.)
    sanity = exps["one_hot_features"]
    assert sanity["verdict"] in {"holds", "inconclusive"}
    rows = {r["method"]: r for r in sanity["rows"]}
    assert set(rows) == {*SANITY_ROWS.values(), SANITY_UNTRAINED}
    assert rows[SANITY_UNTRAINED]["mean"] > 0.1
    for method in ("cam", "sipe", "bank"):
        assert max(rows[SANITY_ROWS[method]]["seeds"]) < 1e-6, method
    # Training moves the graph towards the answer on every seed (on the 40 smoke scenes one seed
    # stops short of exact; at quick size every seed is exact).
    trained, untrained = rows[SANITY_ROWS["ropmb"]]["seeds"], rows[SANITY_UNTRAINED]["seeds"]
    assert all(a < b for a, b in zip(trained, untrained, strict=True)), (trained, untrained)
    # Every method goes through the same segmenter training, after tuning its offset.
    seg = exps["segmenter_miou"]
    assert {r["method"] for r in seg["rows"]} == {CAM, SIPE, BANK, ROPMB}
    offsets = seg["extras"]["tuned_background_offset"]
    assert all(min(abs(o - g) for g in OFFSETS) < 1e-6 for v in offsets.values() for o in v)
    assert (tmp_path / "P12" / "pseudo_mask_miou.png").exists()
    # The graph at initialisation is a row of every pseudo-mask comparison; boundary F1 is
    # judged at tolerance 0 (tolerance 1 in the extras, never below it).
    for exp_id in ("pseudo_mask_miou", "pseudo_mask_miou_gnn", "boundary_f1"):
        assert ROPMB_INIT in {r["method"] for r in exps[exp_id]["rows"]}
    bf1 = {r["method"]: r["seeds"] for r in exps["boundary_f1"]["rows"]}
    t1 = exps["boundary_f1"]["extras"]["bf1_tolerance_1"]
    assert all(a <= b + 1e-6 for m in bf1 for a, b in zip(bf1[m], t1[m], strict=True))
    assert {r["method"] for r in exps["prototype_ceiling"]["rows"]} == {CEILING, CAM_VAL}


def test_vs_cam_claims_need_the_prototype_ceiling():
    """The vs-CAM claims are judged only where prototypes pooled under the true masks beat CAM
    on the bed (else no prototype method could, whatever its graph does); the GNN's own
    contribution (RO-PMB against the bank without GNN) is judged without that precondition."""
    exps = {e.id: e for e in experiments_for("P12")}
    for exp_id in ("segmenter_miou", "pseudo_mask_miou", "boundary_f1"):
        assert "prototype_ceiling" in exps[exp_id].requires, exp_id
    for exp_id in ("segmenter_miou_gnn", "pseudo_mask_miou_gnn"):
        assert exps[exp_id].requires == ("seeds_informative",), exp_id
    miou = {
        CAM: [0.30, 0.32, 0.28, 0.31, 0.29],
        SIPE: [0.28, 0.3, 0.27, 0.3, 0.28],
        BANK: [0.31, 0.33, 0.3, 0.32, 0.3],
        ROPMB_INIT: [0.31, 0.33, 0.3, 0.32, 0.3],
        ROPMB: [0.40, 0.42, 0.39, 0.41, 0.40],
    }
    strong = {LABEL_ACC: [0.95, 0.96, 0.94, 0.95, 0.97], SEED_PREC: [0.7, 0.75, 0.8, 0.72, 0.7]}
    # The referee's seeds 0 and 3: the true-mask prototypes stay below CAM.
    low = {CEILING: [0.72, 0.62, 0.70, 0.71, 0.69], CAM_VAL: [0.75, 0.75, 0.74, 0.76, 0.75]}
    got = _judge(
        {
            "seeds_informative": strong,
            "prototype_ceiling": low,
            "pseudo_mask_miou": miou,
            "pseudo_mask_miou_gnn": miou,
        }
    )
    assert got["prototype_ceiling"]["verdict"] == "does not hold"
    assert got["pseudo_mask_miou"]["rule_verdict"] == "holds"
    assert got["pseudo_mask_miou"]["verdict"] == "inconclusive"
    assert got["pseudo_mask_miou_gnn"]["verdict"] == "holds"
    high = {CEILING: [0.85, 0.86, 0.84, 0.85, 0.87], CAM_VAL: low[CAM_VAL]}
    got = _judge({"seeds_informative": strong, "prototype_ceiling": high, "pseudo_mask_miou": miou})
    assert got["pseudo_mask_miou"]["verdict"] == "holds"


def test_config_holds_every_prdc_knob():
    """PRDC's learning rate, smoothness weights, top fraction and steps live in Config (no
    hidden defaults in the pipeline), and the bank gets as many settings as PRDC."""
    import dataclasses
    import inspect

    from jaxpapers.ropmb.experiments import SIZES, Config
    from jaxpapers.ropmb.experiments._pipeline import prototype_stage

    names = {f.name for f in dataclasses.fields(Config)}
    knobs = {"prdc_smooth_weights", "bank_alphas", "prdc_lr", "top_fraction", "sanity_restarts"}
    assert knobs <= names
    for cfg in SIZES.values():
        assert 2 * len(cfg.prdc_smooth_weights) == len(cfg.bank_alphas) >= 2
    params = inspect.signature(prototype_stage.__wrapped__).parameters
    assert all(p.default is inspect.Parameter.empty for p in params.values())


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
        ROPMB_INIT: [0.31, 0.33, 0.3, 0.32, 0.3],
        ROPMB: [0.40, 0.42, 0.39, 0.41, 0.40],
    }
    weak = {LABEL_ACC: [0.7, 0.75, 0.8, 0.72, 0.78], SEED_PREC: [0.18, 0.3, 0.52, 0.4, 0.35]}
    got = _judge(
        {
            "seeds_informative": weak,
            "segmenter_miou_gnn": miou,
            "pseudo_mask_miou_gnn": miou,
        }
    )
    assert got["seeds_informative"]["verdict"] == "does not hold"
    for exp in ("segmenter_miou_gnn", "pseudo_mask_miou_gnn"):
        assert got[exp]["rule_verdict"] == "holds"
        assert got[exp]["verdict"] == "inconclusive"
        assert "seeds_informative" in got[exp]["precondition"]
    strong = {LABEL_ACC: [0.95, 0.96, 0.94, 0.95, 0.97], SEED_PREC: [0.7, 0.75, 0.8, 0.72, 0.7]}
    got = _judge(
        {"seeds_informative": strong, "segmenter_miou_gnn": miou, "pseudo_mask_miou_gnn": miou}
    )
    assert got["pseudo_mask_miou_gnn"]["verdict"] == "holds"
    assert got["segmenter_miou_gnn"]["verdict"] == "holds"


def test_sanity_needs_the_untrained_graph_to_fail():
    """The one-hot sanity tests something learned: if the graph at initialisation already gave
    the exact masks, the check would not depend on training, and it does not hold."""
    exact = {r: [0.0] * 5 for r in SANITY_ROWS.values()}
    got = _judge({"one_hot_features": {**exact, SANITY_UNTRAINED: [0.4, 0.5, 0.45, 0.6, 0.5]}})
    assert got["one_hot_features"]["verdict"] == "holds"
    got = _judge({"one_hot_features": {**exact, SANITY_UNTRAINED: [0.0] * 5}})
    assert got["one_hot_features"]["verdict"] == "does not hold"


def test_sanity_restarts_free_the_graphs_that_got_stuck():
    """Fresh seeds 7 and 9 (not judged; quick judges 0-4): from one initialisation the trained
    graph stopped in a local minimum (objective ~0.16 against ~0.02 exact; 8 of seeds 5-29, see
    NOTES.md); the best of three initialisations by final objective (no truth used) is exact."""
    from jaxpapers.ropmb.experiments._runs import one_hot_sanity

    one = one_hot_sanity([7, 9], 64, 2, pool=896, restarts=1)
    assert min(1.0 - v for v in one.miou["ropmb"]) > 0.1
    best = one_hot_sanity([7, 9], 64, 2, pool=896, restarts=3)
    assert max(1.0 - v for v in best.miou["ropmb"]) < 1e-6
