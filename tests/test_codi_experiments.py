"""Smoke run of P01's registered experiments (tiny sizes) through the runner."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from jaxpapers.core.experiment import experiments_for, run_paper


def test_p01_smoke(tmp_path):
    run_paper("P01", tmp_path, size="smoke", seeds=2, log=lambda _: None)
    saved = json.loads((tmp_path / "P01" / "result.json").read_text())
    exps = {e["id"]: e for e in saved["experiments"]}
    assert set(exps) == {
        "pretraining_learns",
        "targets_informative",
        "attention_informative",
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
    pre = ("pretraining_learns", "targets_informative")
    assert all(declared[i][:2] == pre for i in dependent)
    assert declared["low_attention_patches"] == (*pre, "attention_informative")
    assert exps["pretraining_learns"]["verdict"] != "holds"
    for i in dependent:
        assert exps[i]["verdict"] == "inconclusive", i
        assert "pretraining_learns" in exps[i]["precondition"], i
    assert (tmp_path / "P01" / "low_attention_patches.png").exists()
    rows = {r["method"]: r for r in exps["codi_vs_ibot"]["rows"]}
    # The majority-class reference is the background share of the test patches (a label count;
    # about half of the patches in the texture scenes). Each model seed draws its own scenes
    # (``_scenes(config, 11 + seed)``), so it differs between seeds (it did not before
    # 2026-12-05, when every seed shared one draw).
    assert 0.3 < rows["majority class dense"]["mean"] < 1.0
    assert rows["majority class dense"]["std"] > 0.0
    fg = exps["attention_informative"]["extras"]["foreground fraction of the test patches"]
    assert len(set(fg)) == 2, fg


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
    everything = [np.ones((6, 16), bool) for _ in range(3)]

    def probes(errors, fg):
        bins = [attention_bins(e, m, f) for e, m, f in zip(errors, ref, fg, strict=True)]
        return Probes([0.0] * 3, [0.0] * 3, [0.0] * 3, bins, [], errors, [])

    def pretrained(codi_errors, fg=everything):
        by_lambda = {0.0: probes(base, fg), CODI_LAMBDA: probes(codi_errors, fg)}
        return Pretrained(by_lambda, probes(base, fg), probes(base, fg), [], [], {}, ref, fg, {})

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


def test_attention_bins_hold_foreground_patches_only():
    """Background patches are left out of the bins: with the background on the least-attended
    patches (as an attention map that finds the objects puts it), the lowest bin still holds
    foreground patches, and an error CODI removes on the background changes no bin."""
    from jaxpapers.codi.experiments._runs import (
        CODI_LAMBDA,
        Pretrained,
        Probes,
        attention_bins,
        foreground_fraction_bins,
        low_attention_rows,
    )

    rng = np.random.default_rng(1)
    mass = rng.random((8, 16))
    fg = mass > np.quantile(mass, 0.5)  # the upper half of the mass is foreground
    err = rng.integers(0, 2, (8, 16)).astype(np.uint8)
    flat_m, flat_e = mass.reshape(-1)[fg.reshape(-1)], err.reshape(-1)[fg.reshape(-1)]
    want = flat_e[np.argsort(flat_m)].reshape(4, -1).mean(1)
    np.testing.assert_allclose(attention_bins(err, mass, fg), want)
    np.testing.assert_allclose(foreground_fraction_bins(mass, fg), [0, 0, 1, 1])
    codi = np.where(fg, err, 0).astype(np.uint8)  # CODI right on every background patch

    def probes(errors):
        return Probes([0.0], [0.0], [0.0], [], [], errors, [])

    res = Pretrained(
        {0.0: probes([err]), CODI_LAMBDA: probes([codi])},
        probes([err]),
        probes([err]),
        [],
        [],
        {},
        [mass],
        [fg],
        {},
    )
    for row in low_attention_rows(res).values():
        np.testing.assert_array_equal(row, 0.0)


def _judge(exp_id: str, outcome):
    from jaxpapers.core.experiment import summarise

    (exp,) = [e for e in experiments_for("P01") if e.id == exp_id]
    return summarise(exp, outcome)["verdict"]


def test_targets_informative_rejects_uniform_and_collapsed_targets():
    """The rule on the collapse diagnostics the run computes: the committed quick run's nearly
    uniform targets (per-image 3.34-3.44, mean 3.459-3.464 of log K = 3.466, the referee's
    numbers) do not hold, a collapse to one prototype does not hold, sharp and spread targets
    hold."""
    from jaxpapers.codi.experiments._runs import Pretrained, run_targets_informative

    log_k = float(np.log(32))

    def verdict(per_image, mean):
        n = len(per_image)
        diag = {
            "cls_entropy": list(per_image),
            "cls_entropy_of_mean": list(mean),
            "patch_entropy": list(per_image),
            "patch_entropy_of_mean": list(mean),
            "log_K": [log_k] * n,
        }
        runs = [(0.0, s) for s in range(n)]
        res = Pretrained({}, None, None, [], runs, diag, [], [], diag)

        class Ctx:
            def cached(self, name, compute):
                return res

        config = type("C", (), {"out_dim": 32, "lambdas": (0.0, 0.1)})()
        return _judge("targets_informative", run_targets_informative(Ctx(), config))

    assert verdict([3.34, 3.40, 3.44, 3.38, 3.42], [3.459, 3.46, 3.464, 3.462, 3.461]) != "holds"
    assert verdict([0.01, 0.02, 0.0, 0.01, 0.03], [0.05, 0.1, 0.02, 0.04, 0.08]) != "holds"
    assert verdict([0.9, 1.1, 1.0, 0.8, 1.2], [2.4, 2.6, 2.5, 2.3, 2.7]) == "holds"


def test_attention_separation_auc_and_verdict():
    """The foreground AUC against a pairwise count (ties 1/2); a map unrelated to the foreground
    (AUC near 0.5, as the referee measured: 0.513) does not make attention_informative hold, a
    map that puts more mass on the objects does."""
    from jaxpapers.codi.experiments._runs import ATTENTION_ROWS, attention_separation
    from jaxpapers.core.experiment import Outcome

    rng = np.random.default_rng(2)
    mass = np.round(rng.random((5, 16)), 1) + 0.1  # ties on purpose
    fg = rng.random((5, 16)) > 0.5
    pos, neg = mass[fg], mass[~fg]
    pairs = (pos[:, None] > neg[None]).mean() + 0.5 * (pos[:, None] == neg[None]).mean()
    sep = attention_separation(mass, fg)
    np.testing.assert_allclose(sep["auc"], pairs)
    np.testing.assert_allclose(sep["max_min_ratio"], np.mean(mass.max(1) / mass.min(1)))

    def verdict(shift):
        aucs = []
        for s in range(5):
            r = np.random.default_rng(10 + s)
            f = r.random((64, 16)) > 0.5
            aucs.append(attention_separation(r.random((64, 16)) + shift * f, f)["auc"])
        return _judge("attention_informative", Outcome({ATTENTION_ROWS[0]: aucs}, {}))

    assert verdict(0.0) != "holds"
    assert verdict(0.3) == "holds"


def test_pretraining_on_the_texture_bed_seed1_regression_pin():
    """A regression pin of the quick bed and recipe (texture scenes, a three-block ViT with a
    batch-normalised head, 300 steps), iBOT only, model seed 1 on its own scene draw
    (``_scenes(config, 12)``): the frozen teacher beats the untrained network on dense accuracy,
    mIoU and k-NN, and its final [CLS] targets are sharp (per-image entropy below 0.8 log K).

    Measured on 2026-12-05 (``results/P01/NOTES.md``), iBOT minus untrained on model seeds 1, 2,
    3: dense +0.033, +0.057, +0.063; mIoU +0.063, +0.089, +0.120; k-NN +0.102, +0.082, +0.145.
    Seed 1 is pinned because it gains least (the pin then fails first when a change weakens the
    pretraining); its margins are half of its gains (dense 0.016 is 66 of the 4096 test patches,
    k-NN 0.05 thirteen of the 256 test images): room for round-off between compilers, none for
    losing the gain. The claim itself is ``pretraining_learns`` on the eight quick seeds.
    """
    from jaxpapers.codi.experiments import SIZES
    from jaxpapers.codi.experiments._runs import pretrain_and_probe

    res = pretrain_and_probe([1], SIZES["quick"], (0.0,))
    trained, init = res.by_lambda[0.0], res.untrained
    assert all(res.finite)
    assert trained.dense[0] > init.dense[0] + 0.016, (trained.dense, init.dense)
    assert trained.miou[0] > init.miou[0] + 0.03, (trained.miou, init.miou)
    assert trained.knn[0] > init.knn[0] + 0.05, (trained.knn, init.knn)
    d = res.diagnostics
    assert d["cls_entropy"][0] < 0.8 * d["log_K"][0], d


def test_quick_pretrains_iBOT_and_CODI_only_and_the_sweep_every_lambda(monkeypatch):
    """Quick mode pretrains lambda = 0 and CODI's lambda (``Config.lambdas``) and leaves
    ``lambda_sweep`` out; the sweep, when it runs (named, or at ``--full``), pretrains every lambda
    of ``LAMBDAS`` under its own cache name, so it never reads a sweep that lacks lambda = 0.3.
    A ``lambdas`` without iBOT or CODI's lambda is rejected before any training."""
    from jaxpapers.codi.experiments import EXPERIMENTS, SIZES
    from jaxpapers.codi.experiments import _runs as R

    quick = SIZES["quick"]
    assert quick.lambdas == (0.0, R.CODI_LAMBDA)
    assert SIZES["full"].lambdas == R.LAMBDAS
    (sweep,) = [e for e in EXPERIMENTS if e.id == "lambda_sweep"]
    assert "quick" not in sweep.sizes and "full" in sweep.sizes

    asked = []

    def fake(seeds, config, lambdas):
        asked.append(tuple(lambdas))
        probe = R.Probes([0.5] * len(seeds), [0.3] * len(seeds), [0.6] * len(seeds), [], [], [], [])
        return R.Pretrained({lam: probe for lam in lambdas}, *([None] * 8))

    monkeypatch.setattr(R, "pretrain_and_probe", fake)
    names = []

    class Ctx:
        seed_list = (0, 1)

        def cached(self, name, compute):
            names.append(name)
            return compute()

    R._pretrained(Ctx(), quick)
    out = R.run_lambda_sweep(Ctx(), quick)
    assert asked == [quick.lambdas, R.LAMBDAS]
    assert len(set(names)) == 2
    assert set(out.values) == {f"lambda={lam:g}" for lam in R.LAMBDAS}
    with pytest.raises(ValueError, match="lambdas"):
        R._pretrained(Ctx(), quick, (0.0, 0.3))


def test_dense_accuracy_by_patch_kind_splits_the_dense_accuracy():
    """Foreground and background accuracies against a direct count; weighted by the patch counts
    they give back the overall dense accuracy (the probe's 0/1 errors, two seeds)."""
    from jaxpapers.codi.experiments._runs import Probes, dense_by_patch_kind

    rng = np.random.default_rng(3)
    errors = [rng.random((6, 16)) < p for p in (0.2, 0.4)]
    fg = [rng.random((6, 16)) < 0.5 for _ in range(2)]
    probes = Probes([float(1 - e.mean()) for e in errors], [], [], [], [], errors, [])
    out = dense_by_patch_kind(probes, fg)
    for j in range(2):
        e, f = errors[j], fg[j]
        right_fg = sum(not e[i, k] for i in range(6) for k in range(16) if f[i, k])
        assert out["foreground"][j] == pytest.approx(right_fg / f.sum())
        n_fg = f.sum()
        total = out["foreground"][j] * n_fg + out["background"][j] * (f.size - n_fg)
        assert total / f.size == pytest.approx(probes.dense[j])
