"""P03 vs_lora: LoRA training from cached lower-layer states against the full adapted model with
merged weights, frozen weights untouched, and the cells' training texts shared with the heads."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxpapers.cayley._lora import merge_lora
from jaxpapers.cayley.experiments._lora import lora_model, lower_states, train_lora
from jaxpapers.cayley.experiments._train import cell_order
from jaxpapers.core.nn.bert import Bert, BertConfig, mean_pool

TINY = BertConfig(vocab_size=30, hidden=16, layers=2, heads=2, intermediate=32, max_position=6)


@nnx.jit
def pooled(model, ids, mask):
    return mean_pool(model(ids, mask), mask)


def test_train_lora_matches_full_model_and_trains_only_adapters_and_head():
    model = nnx.jit(lambda: Bert(TINY, rngs=nnx.Rngs(0)))()
    frozen_before = jax.tree.map(np.asarray, nnx.state(model))
    n = 24
    ids = np.asarray(jax.random.randint(jax.random.key(1), (n, 6), 1, TINY.vocab_size))
    mask = np.ones((n, 6), np.int32)
    mask[::3, 4:] = 0
    y = (ids[:, 1] % 2).astype(np.int32)
    h = lower_states(model, ids, mask, 1)  # one adapted layer: training starts at layer 1
    keys = [jax.random.key(5), jax.random.key(6)]
    run = train_lora(
        model, keys, np.stack([h, h]), np.stack([mask, mask]), np.stack([y, y]), h, mask, y,
        rank=4, adapted=1, num_classes=3, steps=40, learning_rate=2e-2, weight_decay=1e-2,
    )  # fmt: skip
    assert run.finite.tolist() == [True, True] and run.losses.shape == (2, 40)
    assert run.adapter == 2 * 4 * (16 + 16) and run.trainable == run.adapter + 16 * 3 + 3
    # the frozen model is untouched, and only the top layer's A, B and the head were trained
    # (the frozen leaves are the model's, in order; the adapted projections nest them in "base")
    frozen_after = jax.tree.leaves(run.frozen)
    assert len(frozen_after) == len(jax.tree.leaves(frozen_before))
    assert all(
        np.array_equal(a, b)
        for a, b in zip(jax.tree.leaves(frozen_before), frozen_after, strict=True)
    )
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(run.params)]
    assert sorted(p.split("'")[-2] for p in paths) == [
        "b",
        "lora_a",
        "lora_a",
        "lora_b",
        "lora_b",
        "w",
    ]
    assert all("[1]" in p for p in paths if "lora" in p)  # layers[1] only
    trained = jax.tree.map(lambda a: a[0], run.params)
    assert float(jnp.abs(trained["lora"]["layers"][1]["value"]["lora_b"][...]).max()) > 0

    # reference: the adapted model with the trained adapters merged into its weights, run from
    # the token ids through every layer, read out by the head on standardised pooled states
    adapted = lora_model(model, rank=4, adapted=1, key=jax.random.key(0))
    nnx.update(adapted, trained["lora"])
    z0 = np.asarray(pooled(model, ids, mask), np.float64)
    z = (np.asarray(pooled(merge_lora(adapted), ids, mask), np.float64) - z0.mean(0)) / np.mean(
        z0.std(0)
    )
    logits = z @ np.asarray(trained["head"]["w"], np.float64) + np.asarray(trained["head"]["b"])
    reference = np.mean(np.argmax(logits, -1) == y)
    assert abs(run.test[0] - reference) <= 1.0 / n  # at most one near-tie flips
    assert min(run.test) >= 0.9  # the training texts are fitted (test = train here)


def test_cells_are_nested_and_seeded():
    a, b = cell_order(0, 1, 50), cell_order(1, 1, 50)
    np.testing.assert_array_equal(a, cell_order(0, 1, 50))
    assert sorted(a) == list(range(50)) and not np.array_equal(a, b)


def test_lora_model_errors():
    model = nnx.eval_shape(lambda: Bert(TINY, rngs=nnx.Rngs(0)))
    with pytest.raises(ValueError, match="adapted=3"):
        lora_model(model, rank=2, adapted=3, key=jax.random.key(0))
