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
