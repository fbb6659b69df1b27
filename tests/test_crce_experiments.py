"""P09 experiments: data sets, the shared training step and a smoke run through the runner."""

from __future__ import annotations

import json
import math

import jax
import numpy as np
from flax import nnx

from jaxpapers.core.experiment import (
    Outcome,
    apply_preconditions,
    experiments_for,
    run_paper,
    summarise,
)
from jaxpapers.core.nn.cnn import CNNConfig
from jaxpapers.crce.experiments import CE, CRCE_ESTIMATED, CRCE_KNOWN, GRADCAM_CE
from jaxpapers.crce.experiments._data import CONTEXT_KINDS, birds
from jaxpapers.crce.experiments._runs import CE_GAP
from jaxpapers.crce.experiments._train import (
    Penalties,
    group_accuracies,
    init_model,
    train_model,
)


def test_birds_groups_follow_labels_and_context():
    bal = birds(16, None, seed=0)
    np.testing.assert_array_equal(np.bincount(np.asarray(bal.groups), minlength=4), [4] * 4)
    aligned = birds(32, 1.0, seed=1)
    labels = np.asarray(aligned.labels)
    np.testing.assert_array_equal(np.asarray(aligned.groups), 3 * labels)
    rev = birds(32, 0.0, seed=1)
    np.testing.assert_array_equal(np.asarray(rev.groups), 2 * labels + 1 - labels)
    # Every image shows one object; stripes (kind 1) vary along lines, smooth noise (kind 3) is
    # bilinear: its pixel-to-pixel differences on the background are far smaller.
    assert CONTEXT_KINDS == (1, 3)
    objects = np.asarray(aligned.objects)
    assert objects.any(axis=(1, 2)).all()
    img = np.asarray(aligned.images)
    rough = np.abs(np.diff(img, axis=2)).mean(axis=(1, 2, 3))
    assert rough[labels == 0].mean() > rough[labels == 1].mean()


def test_group_accuracies_against_loop():
    data = birds(8, None, seed=2)
    pred = np.array([0, 0, 1, 0, 1, 1, 1, 0])
    labels, groups = np.asarray(data.labels), np.asarray(data.groups)
    expected = [
        np.mean([pred[i] == labels[i] for i in range(8) if groups[i] == g]) for g in range(4)
    ]
    np.testing.assert_allclose(group_accuracies(pred, data, 4), expected)


def test_train_step_is_adam_on_ce_plus_weighted_penalty():
    """One step of the shared compiled step equals optax Adam on the loss written directly."""
    from jaxpapers.crce import CRCE, cell_fractions, cr_ce_loss

    data = birds(16, 0.95, seed=3)
    cfg = CNNConfig(channels=3, widths=(4, 8), classes=2, stem_stride=2)
    graphdef, params = init_model(cfg, 0)
    w = Penalties(0.5, 0.25, 0.0)
    got = train_model(graphdef, params, data, w, seed=5, steps=1, batch=8, grid=(8, 8), lr=1e-2)
    idx = np.random.default_rng(5).integers(0, 16, (1, 8))[0]
    x, y = data.images[idx], data.labels[idx]
    ctx = 1.0 - cell_fractions(data.objects[idx], (8, 8))

    def loss(p):
        net = nnx.merge(graphdef, p)
        a = net.features(x)
        crce = cr_ce_loss(net.classify, a, y, ctx, config=CRCE(beta=0.5))
        grad = cr_ce_loss(net.classify, a, y, ctx, config=CRCE(attribution="gradcam"))
        return crce.loss + 0.25 * grad.penalty

    # Adam's first step moves every weight by -lr * g / (|g| + eps): compare where |g| is well
    # above the float32 noise of the gradient (compiled as another program).
    value, g = jax.jit(jax.value_and_grad(loss))(params)  # eager, it dispatches op by op
    assert got.losses.shape == (1,)
    np.testing.assert_allclose(got.losses[-1], value, rtol=1e-4)
    assert got.finite
    moved = jax.tree.map(lambda a, b: np.asarray(a) - np.asarray(b), got.params, params)
    for d, gg in zip(jax.tree.leaves(moved), jax.tree.leaves(g), strict=True):
        big = np.abs(np.asarray(gg)) > 1e-4
        np.testing.assert_allclose(d[big], -1e-2 * np.sign(np.asarray(gg)[big]), rtol=1e-3)
    assert sum(int((np.abs(np.asarray(gg)) > 1e-4).sum()) for gg in jax.tree.leaves(g)) > 100


def test_non_finite_step_freezes_the_run():
    """A step whose loss is not finite is not applied, nor any later one (the freeze of
    core.fit.fit): the parameters stay the initial ones and the run is marked."""
    data = birds(16, 0.95, seed=3)
    data = data._replace(images=data.images.at[:].set(np.nan))
    cfg = CNNConfig(channels=3, widths=(4, 8), classes=2, stem_stride=2)
    graphdef, params = init_model(cfg, 0)
    got = train_model(
        graphdef, params, data, Penalties(1.0, 0.0, 0.0), seed=5, steps=2, batch=8, grid=(8, 8)
    )
    assert not got.finite and not np.isfinite(got.losses).any()
    for a, b in zip(jax.tree.leaves(got.params), jax.tree.leaves(params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_p09_smoke(tmp_path):
    run_paper("P09", tmp_path, size="smoke", seeds=2, log=lambda _: None)
    saved = json.loads((tmp_path / "P09" / "result.json").read_text())
    exps = {e["id"]: e for e in saved["experiments"]}
    assert set(exps) == {
        "maps_can_differ",
        "context_shift_exists",
        "faithfulness",
        "context_shift",
        "no_context_information",
    }
    for exp in exps.values():
        assert exp["verdict"] in {"holds", "does not hold", "inconclusive"}
        for row in exp["rows"]:
            assert math.isfinite(row["mean"]) and len(row["seeds"]) == 2, (exp["id"], row)
    shift = exps["context_shift"]["extras"]
    assert shift["all_losses_finite"] is True
    for accs in shift["balanced_mean_accuracy"].values():
        assert all(0.0 <= a <= 1.0 for a in accs)
    assert (tmp_path / "P09" / "faithfulness.png").exists()
    assert (tmp_path / "P09" / "context_shift.png").exists()


def _judge(values: dict[str, dict[str, list[float]]]) -> dict[str, dict]:
    """Verdicts of the registered P09 experiments on constructed per-seed rows."""
    exps = [e for e in experiments_for("P09") if e.id in values]
    records = [summarise(e, Outcome(values[e.id])) for e in exps]
    return {r["id"]: r for r in apply_preconditions(records, exps)}


def test_no_context_tie_is_a_two_sided_equivalence():
    """A consistent difference well inside the margin is a tie (the old pair of margin-free
    "at least" rules read it as "does not hold"); one beyond the margin is not."""
    ce = [0.95, 0.94, 0.96, 0.95, 0.93]
    close = [v - 0.005 + d for v, d in zip(ce, (0.001, -0.001, 0.0, 0.002, -0.002), strict=True)]
    tie = _judge({"no_context_information": {CE: ce, CRCE_KNOWN: close}})
    assert tie["no_context_information"]["verdict"] == "holds"
    far = [v - 0.1 for v in close]
    apart = _judge({"no_context_information": {CE: ce, CRCE_KNOWN: far}})
    assert apart["no_context_information"]["verdict"] == "does not hold"


def test_context_shift_needs_the_shift_to_hurt_ce():
    """Without a gap between CE's mean and worst group the worst-group comparison says nothing:
    it is inconclusive whatever the rows; with the gap it is judged on the rows."""
    rows = {
        CE: [0.1, 0.2, 0.15, 0.05, 0.1],
        GRADCAM_CE: [0.1, 0.05, 0.1, 0.0, 0.1],
        CRCE_KNOWN: [0.7, 0.8, 0.6, 0.75, 0.7],
        CRCE_ESTIMATED: [0.3, 0.2, 0.4, 0.1, 0.2],
    }
    no_gap = _judge(
        {"context_shift_exists": {CE_GAP: [0.02, 0.01, 0.03, 0.0, 0.02]}, "context_shift": rows}
    )
    assert no_gap["context_shift_exists"]["verdict"] == "does not hold"
    assert no_gap["context_shift"]["rule_verdict"] == "holds"
    assert no_gap["context_shift"]["verdict"] == "inconclusive"
    gap = _judge(
        {"context_shift_exists": {CE_GAP: [0.4, 0.35, 0.45, 0.4, 0.5]}, "context_shift": rows}
    )
    assert gap["context_shift"]["verdict"] == "holds"


def test_p09_rules_have_no_margin_free_no_worse():
    for exp in experiments_for("P09"):
        rules = [exp.rule, *getattr(exp.rule, "parts", ())]
        assert not any(getattr(r, "at_least", False) for r in rules), exp.id
