"""Smoke run of P01's registered experiments (tiny sizes) through the runner."""

from __future__ import annotations

import json
import math

import numpy as np

from jaxpapers.core.experiment import experiments_for, run_paper


def test_p01_smoke(tmp_path):
    run_paper("P01", tmp_path, size="smoke", seeds=2, log=lambda _: None)
    saved = json.loads((tmp_path / "P01" / "result.json").read_text())
    exps = {e["id"]: e for e in saved["experiments"]}
    assert set(exps) == {
        "pretraining_learns",
        "codi_vs_ibot",
        "low_attention_patches",
        "lambda_sweep",
        "sanity",
    }
    for exp in exps.values():
        assert exp["verdict"] in {"holds", "does not hold", "inconclusive"}
        for row in exp["rows"]:
            assert math.isfinite(row["mean"]) and len(row["seeds"]) == 2, (exp["id"], row)
    assert exps["sanity"]["verdict"] == "holds"
    # Every CODI-vs-iBOT verdict means something only if the pretraining learned: it is declared
    # as their precondition, and a pretraining that did not beat the untrained network (as at
    # this size: 3 steps) leaves them inconclusive with the precondition named.
    declared = {e.id: e.requires for e in experiments_for("P01")}
    dependent = ("codi_vs_ibot", "low_attention_patches", "lambda_sweep")
    assert all(declared[i] == ("pretraining_learns",) for i in dependent)
    assert exps["pretraining_learns"]["verdict"] != "holds"
    for i in dependent:
        assert exps[i]["verdict"] == "inconclusive", i
        assert "pretraining_learns" in exps[i]["precondition"], i
    assert (tmp_path / "P01" / "low_attention_patches.png").exists()
    rows = {r["method"]: r for r in exps["codi_vs_ibot"]["rows"]}
    # The majority-class reference is the background share of the test patches (a label count;
    # about half of the patches in the texture scenes).
    assert 0.3 < rows["majority class dense"]["mean"] < 1.0
    assert rows["majority class dense"]["std"] == 0.0


def test_low_attention_bins_hold_the_same_patches_for_every_model():
    """Both models' errors are binned by one reference attention map: equal error maps give a
    reduction of exactly 0 in every bin, whatever each model's own attention; an error CODI
    removes on the reference's least-attended patches shows up in the lowest bin only."""
    from jaxpapers.codi.experiments._runs import (
        BINS,
        CODI_LAMBDA,
        Pretrained,
        Probes,
        attention_bins,
        low_attention_rows,
    )

    rng = np.random.default_rng(0)
    ref = [rng.random((6, 16)) for _ in range(3)]
    base = [rng.integers(0, 2, (6, 16)).astype(np.uint8) for _ in range(3)]

    def probes(errors):
        bins = [attention_bins(e, m) for e, m in zip(errors, ref, strict=True)]
        return Probes([0.0] * 3, [0.0] * 3, [0.0] * 3, bins, [], errors, [])

    def pretrained(codi_errors):
        by_lambda = {0.0: probes(base), CODI_LAMBDA: probes(codi_errors)}
        return Pretrained(by_lambda, probes(base), probes(base), [], [], {}, ref)

    same = low_attention_rows(pretrained([e.copy() for e in base]))
    for row in same.values():
        np.testing.assert_array_equal(row, 0.0)
    # CODI right on the quarter of the patches the reference attends to least.
    fixed = []
    for e, m in zip(base, ref, strict=True):
        low = m.reshape(-1) <= np.quantile(m, 1 / BINS)
        fixed.append(np.where(low.reshape(e.shape), 0, e).astype(np.uint8))
    rows = low_attention_rows(pretrained(fixed))
    want = [
        float(e.reshape(-1)[np.argsort(m.reshape(-1))[:24]].mean())
        for e, m in zip(base, ref, strict=True)
    ]
    np.testing.assert_allclose(rows["error reduction, lowest-attention bin"], want)
    np.testing.assert_array_equal(rows["error reduction, highest-attention bin"], 0.0)


def test_pretraining_on_the_texture_bed_beats_the_untrained_network_on_a_fixed_seed():
    """The quick bed and recipe (texture scenes, 100 steps), iBOT only, seed 1: the frozen
    teacher's dense probe accuracy and mIoU are above the untrained network's by more than 0.01.

    Measured on seeds 0-4 (2026-12-05, ``results/P01/NOTES.md``): dense differences +0.002,
    +0.019, +0.027, +0.030, -0.017 (mIoU +0.005, +0.016, +0.030, +0.030, -0.024); seed 1 gained
    +0.019 / +0.016, so a margin of 0.01 (about 40 of the 4096 test patches) leaves room for
    round-off between compilers while failing on the shape bed used before (the committed quick
    run's seed 1 there: dense -0.0027, mIoU -0.018). One seed is a regression check of the bed
    and the recipe, not evidence for the claim: that is ``pretraining_learns`` on 5 seeds.
    """
    from jaxpapers.codi.experiments import SIZES
    from jaxpapers.codi.experiments._runs import pretrain_and_probe

    res = pretrain_and_probe([1], SIZES["quick"], (0.0,))
    trained, init = res.by_lambda[0.0], res.untrained
    assert all(res.finite)
    assert trained.dense[0] > init.dense[0] + 0.01, (trained.dense, init.dense)
    assert trained.miou[0] > init.miou[0] + 0.01, (trained.miou, init.miou)
