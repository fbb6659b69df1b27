"""Verdict rules against scipy's t tests: paired, Welch, one-sample; margins, ratios, thresholds,
preconditions and the seed counts an inconclusive comparison would need."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from jaxpapers.core import experiment as ex
from jaxpapers.core.experiment import Context, Experiment, Outcome
from jaxpapers.core.verdicts import (
    FAILS,
    HOLDS,
    UNSURE,
    AllOf,
    AnyOf,
    Better,
    NoWorse,
    Ratio,
    RowStats,
    Threshold,
    describe_comparison,
    seeds_needed,
    t_quantile,
)


def _rows(**values):
    return {k: RowStats.from_values(k, "method", v) for k, v in values.items()}


# Method m and baseline b share seeds: b varies a lot from seed to seed, m is b + ~0.1.
BASE = [0.40, 0.55, 0.70, 0.48, 0.62]
SHIFTED = [0.51, 0.64, 0.81, 0.57, 0.73]


def test_paired_and_unpaired_rows_are_told_apart():
    rows = _rows(m=SHIFTED, b=BASE)
    assert Better("m", "b").decide(rows, False) == HOLDS
    assert Better("m", "b").decide(rows, False, paired=False) == UNSURE
    # scipy says the same: the paired test rejects, Welch's does not.
    assert stats.ttest_rel(SHIFTED, BASE, alternative="greater").pvalue < 0.05
    assert stats.ttest_ind(SHIFTED, BASE, equal_var=False, alternative="greater").pvalue > 0.05
    # Different seed counts cannot be paired: Welch's test decides.
    rows = _rows(m=SHIFTED, b=BASE[:4])
    (c,) = Better("m", "b").evaluate(rows, False).comparisons
    assert c.test == "Welch t"


@pytest.mark.parametrize("seed", range(6))
def test_better_matches_scipy_paired_and_welch(seed):
    rng = np.random.default_rng(seed)
    b = rng.normal(size=6)
    m = b + rng.normal(0.3 * (seed - 2), 0.5, size=6)
    for paired in (True, False):
        c = Better("m", "b").evaluate(_rows(m=m, b=b), False, paired=paired).comparisons[0]
        if paired:
            greater = stats.ttest_rel(m, b, alternative="greater").pvalue
            less = stats.ttest_rel(m, b, alternative="less").pvalue
        else:
            greater = stats.ttest_ind(m, b, equal_var=False, alternative="greater").pvalue
            less = stats.ttest_ind(m, b, equal_var=False, alternative="less").pvalue
        expected = HOLDS if greater < 0.05 else FAILS if less < 0.05 else UNSURE
        assert c.verdict == expected
        assert c.low < c.estimate < c.high
        assert c.estimate == pytest.approx(np.mean(m) - np.mean(b), abs=1e-12)


def test_better_holds_fails_inconclusive_and_lower_is_better():
    assert Better("m", "b").decide(_rows(m=SHIFTED, b=BASE), False) == HOLDS
    assert Better("b", "m").decide(_rows(m=SHIFTED, b=BASE), False) == FAILS
    assert Better("m", "b").decide(_rows(m=SHIFTED, b=BASE), True) == FAILS
    noisy = [x + e for x, e in zip(BASE, [0.1, -0.08, 0.05, -0.06, 0.02], strict=True)]
    assert Better("m", "b").decide(_rows(m=noisy, b=BASE), False) == UNSURE
    # An exact tie with no spread never supports "improves".
    assert Better("m", "b").decide(_rows(m=[1.0, 1.0], b=[1.0, 1.0]), False) == FAILS
    # A diverged method does not hold; a diverged baseline is inconclusive.
    assert Better("m", "b").decide(_rows(m=[1.0, math.nan], b=[0.0, 0.0]), False) == FAILS
    assert Better("m", "b").decide(_rows(m=[1.0, 1.0], b=[0.0, math.inf]), False) == UNSURE


def test_noworse_needs_a_margin_and_uses_it():
    with pytest.raises(ValueError, match="margin=0"):
        NoWorse("m", "b", margin=0)
    with pytest.raises(ValueError, match="margin=nan"):
        NoWorse("m", "b", margin=float("nan"))
    slightly_worse = [
        x - 0.01 + e for x, e in zip(BASE, [0.002, -0.001, 0.0, 0.001, -0.002], strict=True)
    ]
    rows = _rows(m=slightly_worse, b=BASE)
    assert NoWorse("m", "b", margin=0.05).decide(rows, False) == HOLDS
    assert NoWorse("m", "b", margin=0.005).decide(rows, False) == FAILS
    assert Better("m", "b").decide(rows, False) == FAILS
    # Lower is better: the method may exceed the baseline by less than the margin.
    rows = _rows(m=[x + 0.01 for x in BASE], b=BASE)
    assert NoWorse("m", "b", margin=0.05).decide(rows, True) == HOLDS
    assert "+ 0.05" in NoWorse("m", "b", margin=0.05).describe(True)


def test_ratio_uses_per_seed_ratios():
    rows = _rows(vi=[2000.0, 2100.0, 1900.0], ie=[10.0, 10.5, 9.5], same=[1900.0, 2000.0, 1850.0])
    assert Ratio("vi", "ie", 20).decide(rows, True) == HOLDS  # ratios are 200 on every seed
    assert Ratio("vi", "same", 20).decide(rows, True) == FAILS
    r = np.array([1.2, 0.9, 1.1])
    rows = _rows(n=r * 10, d=[10.0, 10.0, 10.0])
    c = Ratio("n", "d", 1.0).evaluate(rows, True).comparisons[0]
    assert c.verdict == UNSURE and c.test == "paired t"
    half = t_quantile(2) * r.std(ddof=1) / math.sqrt(3)
    assert (c.low, c.high) == pytest.approx((r.mean() - half, r.mean() + half))
    # Unpaired: the ratio of means with a delta-method bound on its log.
    c = (
        Ratio("vi", "ie", 20)
        .evaluate(rows | _rows(vi=[2000.0, 2100.0], ie=[10.0, 10.5, 9.5]), True, paired=True)
        .comparisons[0]
    )
    assert c.test.startswith("Welch") and c.verdict == HOLDS


def test_threshold_is_a_one_sample_t_test():
    x = [0.8, 1.1, 0.95, 1.05]
    for value in (0.9, 1.0, 1.2, 1.5):
        below = Threshold("x", value).decide(_rows(x=x), True)
        p_below = stats.ttest_1samp(x, value, alternative="less").pvalue
        p_above = stats.ttest_1samp(x, value, alternative="greater").pvalue
        assert below == (HOLDS if p_below < 0.05 else FAILS if p_above < 0.05 else UNSURE)
    assert Threshold("x", 0.5, below=False).decide(_rows(x=x), True) == HOLDS
    assert Threshold("x", 1.0).decide(_rows(x=[1.0, math.nan]), True) == FAILS
    # Exact values (no spread): decided on the value; a tie does not hold.
    assert Threshold("x", 1.0).decide(_rows(x=[0.0, 0.0]), True) == HOLDS
    assert Threshold("x", 0.0).decide(_rows(x=[0.0]), True) == FAILS


def test_allof_anyof_keep_every_comparison():
    rows = _rows(m=SHIFTED, b=BASE, c=[x + 1 for x in BASE])
    both = AllOf((Better("m", "b"), Better("m", "c")))
    a = both.evaluate(rows, False)
    assert a.verdict == FAILS and [c.verdict for c in a.comparisons] == [HOLDS, FAILS]
    assert AnyOf((Better("m", "b"), Better("m", "c"))).decide(rows, False) == HOLDS


def test_anyof_tests_each_part_at_a_bonferroni_level():
    """With k parts each part is a one-sided test at 1 - 0.05 / k (scipy's t quantile): values
    whose mean clears 0.5 at 95% but not at 97.5% hold alone and not as one of two parts; two
    one-sided parts on one quantity are scipy's two-sided 95% test; nested levels compound."""
    x = [0.6, 0.72, 0.48, 0.55, 0.65]
    mean, se = np.mean(x), np.std(x, ddof=1) / np.sqrt(5)
    t = (mean - 0.5) / se
    assert stats.t.ppf(0.95, 4) < t < stats.t.ppf(0.975, 4)
    rows = _rows(x=x)
    above, below = Threshold("x", 0.5, below=False), Threshold("x", 0.5)
    assert above.decide(rows, True) == HOLDS
    a = AnyOf((above, below)).evaluate(rows, True)
    assert a.verdict == UNSURE
    c = a.comparisons[0]
    assert c.confidence == pytest.approx(0.975)
    np.testing.assert_allclose(c.low, mean - stats.t.ppf(0.975, 4) * se, rtol=1e-12)
    two_sided = stats.ttest_1samp(x, 0.5).pvalue
    assert (two_sided < 0.05) == (a.verdict == HOLDS)
    assert "97.5% bounds" in describe_comparison(c)
    assert "each at one-sided 97.5% (Bonferroni)" in AnyOf((above, below)).describe(True)
    inner = AnyOf((above, below)).evaluate  # inside a two-part AnyOf: 1 - 0.025 / 2
    nested = AnyOf((AnyOf((above, below)), Threshold("x", 0.0))).evaluate(rows, True)
    assert nested.comparisons[0].confidence == pytest.approx(0.9875)
    assert inner(rows, True).comparisons[0].confidence == pytest.approx(0.975)
    with pytest.raises(ValueError, match="confidence"):
        t_quantile(3, confidence=1.0)


def test_allof_confirms_a_failing_part_at_a_bonferroni_level():
    """AllOf's "does not hold" is a union over its parts, so a part that fails at 95% is judged
    again at 1 - 0.05 / k (scipy's t quantile): values below 0.5 at 95% but not at 97.5% make a
    lone rule fail and a two-part rule inconclusive; below at 97.5%, both fail; holding parts keep
    their 95% bounds (an intersection needs no correction)."""
    x = [0.4, 0.28, 0.52, 0.45, 0.35]  # mean 0.4: below 0.5 at 95% (t = -2.43), not at 97.5%
    mean, se = np.mean(x), np.std(x, ddof=1) / np.sqrt(5)
    t = (mean - 0.5) / se
    assert -stats.t.ppf(0.975, 4) < t < -stats.t.ppf(0.95, 4)
    rows = _rows(x=x, y=[0.9, 0.95, 0.85, 0.92, 0.88])
    fails, holds = Threshold("x", 0.5, below=False), Threshold("y", 0.5, below=False)
    assert AllOf((fails,)).evaluate(rows, True).verdict == FAILS
    a = AllOf((fails, holds)).evaluate(rows, True)
    assert a.verdict == UNSURE
    c_fail, c_hold = a.comparisons
    assert c_fail.verdict == UNSURE and c_fail.confidence == pytest.approx(0.975)
    np.testing.assert_allclose(c_fail.high, mean + stats.t.ppf(0.975, 4) * se, rtol=1e-12)
    assert c_hold.verdict == HOLDS and c_hold.confidence == pytest.approx(0.95)
    assert "a part does not hold only at one-sided 97.5% (Bonferroni)" in AllOf(
        (fails, holds)
    ).describe(True)
    clear = _rows(x=[0.3, 0.25, 0.35, 0.28, 0.32], y=rows["y"].seeds)
    assert AllOf((fails, holds)).evaluate(clear, True).verdict == FAILS
    # Inside a two-part AnyOf (level 0.975) a two-part AllOf confirms failures at 0.9875.
    nested = AnyOf((AllOf((fails, holds)), Threshold("y", 2.0, below=False))).evaluate(clear, True)
    assert nested.comparisons[0].confidence == pytest.approx(0.9875)


def test_seeds_needed_is_the_smallest_count_that_resolves_the_effect():
    effect, std = 0.1, 0.3
    n = seeds_needed(effect, std)
    assert n is not None and n > 5
    assert t_quantile(n - 1) * std / math.sqrt(n) < effect
    assert t_quantile(n - 2) * std / math.sqrt(n - 1) >= effect
    assert seeds_needed(0.0, 1.0) is None and seeds_needed(1.0, 0.0) is None
    noisy = [x + e for x, e in zip(BASE, [0.1, -0.08, 0.05, -0.06, 0.02], strict=True)]
    c = Better("m", "b").evaluate(_rows(m=noisy, b=BASE), False).comparisons[0]
    d = np.subtract(noisy, BASE)
    assert c.seeds_needed == seeds_needed(d.mean(), d.std(ddof=1))
    assert c.agree == int(np.sum(np.sign(d) == np.sign(d.mean())))
    line = describe_comparison(c)
    assert "paired t, n=5" in line and f"would need {c.seeds_needed} seeds" in line
    assert f"{c.agree}/5 seeds" in line


def _chain(tmp_path, monkeypatch, pretrain_values):
    def run_pre(ctx, config):
        return Outcome({"trained": pretrain_values, "untrained": [0.5] * ctx.seeds})

    def run_head(ctx, config):
        return Outcome({"ours": [x + 0.2 for x in BASE[: ctx.seeds]], "base": BASE[: ctx.seeds]})

    common = dict(claim="c", metric="m", lower_is_better=False)
    exps = [
        Experiment(id="pre", baselines=("untrained",), methods=("trained",),
                   rule=Better("trained", "untrained"), run=run_pre, **common),
        Experiment(id="head", baselines=("base",), methods=("ours",), rule=Better("ours", "base"),
                   run=run_head, requires=("pre",), **common),
        Experiment(id="tail", baselines=("base",), methods=("ours",), rule=Better("ours", "base"),
                   run=run_head, requires=("head",), **common),
    ]  # fmt: skip
    monkeypatch.setattr(ex, "experiments_for", lambda paper: exps)
    return ex.run_paper("P17", tmp_path, size="smoke", seeds=3, log=lambda m: None)


def test_requires_chain_propagates(tmp_path, monkeypatch):
    rec = _chain(tmp_path / "ok", monkeypatch, [0.9, 0.95, 0.92])
    assert [e["verdict"] for e in rec["experiments"]] == [HOLDS, HOLDS, HOLDS]
    rec = _chain(tmp_path / "bad", monkeypatch, [0.4, 0.45, 0.42])
    pre, head, tail = rec["experiments"]
    assert pre["verdict"] == FAILS
    assert head["rule_verdict"] == HOLDS and head["verdict"] == UNSURE
    assert head["precondition"] == "not met: pre (does not hold)"
    assert tail["verdict"] == UNSURE and tail["precondition"] == "not met: head (inconclusive)"
    on_disk = json.loads((tmp_path / "bad" / "P17" / "result.json").read_text())
    assert on_disk["experiments"][2]["precondition"] == "not met: head (inconclusive)"
    md = ex.render_markdown(tmp_path / "bad")
    assert "precondition not met: pre (does not hold); the rule alone: holds" in md
    assert "one-sided 95% bounds" in md


def test_requires_is_validated():
    def run(ctx: Context, config) -> Outcome:
        return Outcome({})

    common = dict(
        claim="c", metric="m", lower_is_better=True, baselines=("b",), methods=("m",),
        rule=Better("m", "b"), run=run,
    )  # fmt: skip
    with pytest.raises(ValueError, match="requires="):
        Experiment(id="a", requires=("a",), **common)
    a = Experiment(id="a", requires=("b",), **common)
    b = Experiment(id="b", requires=("a",), **common)
    with pytest.raises(ValueError, match="cycle: a -> b -> a"):
        ex._precondition_order([a, b])


def test_paper_seeds_default_and_reason(monkeypatch):
    import types

    module = types.ModuleType("fake")
    monkeypatch.setattr(ex.importlib, "import_module", lambda name: module)
    assert ex.paper_seeds("P17", "quick") == (5, None)
    module.SEEDS = {"quick": 3}
    with pytest.raises(ValueError, match="state why in SEEDS_REASON"):
        ex.paper_seeds("P17", "quick")
    module.SEEDS_REASON = "each seed trains a network for 30 s"
    assert ex.paper_seeds("P17", "quick") == (3, "each seed trains a network for 30 s")
    assert ex.paper_seeds("P17", "smoke") == (2, None)
    module.SEEDS = {"quick": 0}
    with pytest.raises(ValueError, match="expected positive ints"):
        ex.paper_seeds("P17", "quick")
