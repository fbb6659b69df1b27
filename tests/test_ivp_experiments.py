"""Smoke run of P18's registered experiments (tiny sizes, shapes shared with test_ivp.py)."""

from __future__ import annotations

import json
import math

from jaxpapers.core.experiment import experiments_for, run_paper
from jaxpapers.core.verdicts import AllOf, Better, NoWorse


def test_p18_smoke(tmp_path):
    run_paper("P18", tmp_path, size="smoke", seeds=2, log=lambda _: None)
    saved = json.loads((tmp_path / "P18" / "result.json").read_text())
    exps = {e["id"]: e for e in saved["experiments"]}
    assert set(exps) == {
        "concealment_sweep",
        "indirect_vs_questionnaire",
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


def _parts(rule):
    return [q for p in rule.parts for q in _parts(p)] if isinstance(rule, AllOf) else [rule]


def test_p18_headline_isolates_strategy():
    """The headline compares strategic with random *scenario* questions (both indirect, equal
    turns), not with the questionnaire, whose deficit comes from asking explicitly."""
    exps = {e.id: e for e in experiments_for("P18")}
    head = [p for p in _parts(exps["concealment_sweep"].rule) if isinstance(p, Better)]
    assert [(p.method, p.baseline) for p in head] == [("strategic", "random scenarios")]
    indirect = exps["indirect_vs_questionnaire"].rule
    assert (indirect.method, indirect.baseline) == ("random scenarios", "questionnaire")
    distilled = _parts(exps["distilled_prober"].rule)
    assert ("distilled Value-Prober", "random scenarios") in [
        (p.method, p.baseline) for p in distilled if isinstance(p, Better)
    ]
    assert any(isinstance(p, NoWorse) and p.baseline == "strategic (teacher)" for p in distilled)
    for e in exps.values():
        assert not any(getattr(p, "at_least", False) for p in _parts(e.rule)), e.id


def test_p18_acceptability_is_judged_against_baselines_with_a_stated_margin():
    """Acceptability is non-inferiority against random scenarios (strategic) and the teacher
    (distilled), with a margin > 0 on the metric's scale, not a fixed threshold every prober
    passes."""
    from jaxpapers.core.verdicts import Threshold
    from jaxpapers.ivp.experiments._runs import ACCEPT_MARGIN

    exps = {e.id: e for e in experiments_for("P18")}
    pairs = {
        eid: [
            (p.method, p.baseline, p.margin)
            for p in _parts(exps[eid].rule)
            if isinstance(p, NoWorse) and "acceptability" in p.method
        ]
        for eid in ("concealment_sweep", "distilled_prober")
    }
    assert 0 < ACCEPT_MARGIN <= 0.1
    assert pairs["concealment_sweep"] == [
        ("strategic: social acceptability", "random scenarios: social acceptability", ACCEPT_MARGIN)
    ]
    assert pairs["distilled_prober"] == [
        (
            "distilled Value-Prober: social acceptability",
            "strategic (teacher): social acceptability",
            ACCEPT_MARGIN,
        )
    ]
    for e in exps.values():
        assert not any(
            isinstance(p, Threshold) and "acceptability" in p.row for p in _parts(e.rule)
        ), e.id


def test_p18_built_in_effects_are_labelled_premise_checks():
    """Effects the persona model builds in (explicit items conceal more; a context pull) are
    presented as premise checks of the simulator, not as findings."""
    exps = {e.id: e for e in experiments_for("P18")}
    for eid in ("indirect_vs_questionnaire", "context_dependence"):
        assert exps[eid].claim.startswith("Premise check"), eid
        assert "not a finding" in exps[eid].claim, eid
