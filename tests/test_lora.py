"""cayley._lora, the adapters of P03's LoRA baseline: against a float64 NumPy reference, B = 0
leaves the frozen model exact, merged weights equal the adapter path, only adapter parameters are
trainable, clear errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import tolerance

from jaxpapers.cayley._lora import LoRALinear, add_lora, lora_param_count, merge_lora
from jaxpapers.core.nn.bert import Bert, BertConfig

TINY = BertConfig(vocab_size=40, hidden=16, layers=1, heads=2, intermediate=32, max_position=8)


_TINY_BERT = []


def tiny_bert() -> Bert:
    """A fresh copy of one random tiny BERT (initialised once: eager initialisation is slow)."""
    if not _TINY_BERT:  # initialised in one compiled program (eager, each op compiles alone)
        _TINY_BERT.append(nnx.jit(lambda: Bert(TINY, rngs=nnx.Rngs(0)))())
    return nnx.clone(_TINY_BERT[0])


@nnx.jit
def forward(model, ids, mask):
    """Every layer's states (compiled: op-by-op dispatch of the eager model is far slower)."""
    return model(ids, mask, all_layers=True)


def tokens():
    ids = jax.random.randint(jax.random.key(3), (5, 8), 1, TINY.vocab_size)
    mask = jnp.ones((5, 8), jnp.int32).at[:, 6:].set(0)
    return ids, mask


def randomise_b(model, key):
    """Give every B a nonzero value (at init B = 0 hides the adapter path)."""
    lora = nnx.state(model, nnx.LoRAParam)
    leaves, tree = jax.tree.flatten(lora)
    keys = jax.random.split(key, len(leaves))
    new = [0.3 * jax.random.normal(k, v.shape) for k, v in zip(keys, leaves, strict=True)]
    nnx.update(model, jax.tree.unflatten(tree, new))


def test_lora_linear_against_numpy_float64():
    base = nnx.Linear(6, 5, rngs=nnx.Rngs(1))
    layer = LoRALinear(base, 3, key=jax.random.key(2), alpha=1.5)
    layer.lora_b.set_value(jax.random.normal(jax.random.key(4), (3, 5)))
    x = jax.random.normal(jax.random.key(5), (7, 6))
    f64 = [np.asarray(a, np.float64) for a in (x, base.kernel[...], base.bias[...])]
    a, b = (np.asarray(v[...], np.float64) for v in (layer.lora_a, layer.lora_b))
    expected = f64[0] @ f64[1] + f64[2] + (1.5 / 3) * (f64[0] @ a) @ b
    np.testing.assert_allclose(layer(x), expected, **tolerance(np.float32, 10.0))
    assert layer.scale == 0.5 and LoRALinear(base, 4, key=jax.random.key(0)).scale == 2.0


def test_zero_b_is_the_frozen_model_exactly():
    model = tiny_bert()
    ids, mask = tokens()
    before = forward(model, ids, mask)
    assert add_lora(model.layers, ("query", "value"), rank=4, key=jax.random.key(1)) == 2
    assert isinstance(model.layers[0].value, LoRALinear)
    # A is random, B is exactly zero: the added term is exactly 0, so the output is bit-identical
    assert float(jnp.abs(model.layers[0].query.lora_a[...]).min()) > 0
    np.testing.assert_array_equal(forward(model, ids, mask), before)


def test_merged_weights_equal_the_adapter_path():
    model = tiny_bert()
    add_lora(model.layers, ("query", "value"), rank=4, key=jax.random.key(1))
    randomise_b(model, jax.random.key(2))
    ids, mask = tokens()
    merged = merge_lora(model)
    assert lora_param_count(merged) == 0 and not isinstance(merged.layers[0].query, LoRALinear)
    assert isinstance(model.layers[0].query, LoRALinear)  # the adapted model is left as it was
    lora = model.layers[0].query
    expected = np.asarray(lora.base.kernel[...], np.float64) + lora.scale * (
        np.asarray(lora.lora_a[...], np.float64) @ np.asarray(lora.lora_b[...], np.float64)
    )
    np.testing.assert_allclose(
        merged.layers[0].query.kernel[...], expected, **tolerance(np.float32)
    )
    np.testing.assert_array_equal(merged.layers[0].query.bias[...], lora.base.bias[...])
    # the adapter changes the output, and the merged model reproduces it
    adapted = forward(model, ids, mask)
    assert float(jnp.abs(adapted - forward(tiny_bert(), ids, mask)).max()) > 1e-3
    np.testing.assert_allclose(forward(merged, ids, mask), adapted, **tolerance(np.float32, 10.0))


def test_gradient_reaches_only_adapters():
    model = tiny_bert()
    add_lora(model.layers, ("query", "value"), rank=4, key=jax.random.key(1))
    randomise_b(model, jax.random.key(2))
    ids, mask = tokens()

    def loss(m):
        return jnp.sum(m(ids, mask) ** 2)

    @nnx.jit
    def grads_of(model):
        lora = nnx.grad(loss, argnums=nnx.DiffState(0, nnx.LoRAParam))(model)
        rest = nnx.grad(loss, argnums=nnx.DiffState(0, nnx.Not(nnx.LoRAParam)))(model)
        return lora, rest

    grads, frozen_grads = grads_of(model)
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(grads)]
    assert len(paths) == 1 * 2 * 2
    assert all(p.split("'")[-2] in ("lora_a", "lora_b") for p in paths)
    assert all(float(jnp.abs(g).max()) > 0 for g in jax.tree.leaves(grads))
    # closed form: layers * projections * r * (d_in + d_out)
    assert lora_param_count(model) == 1 * 2 * 4 * (16 + 16)
    # the frozen parameters do shape the loss: what keeps them fixed is the split, not their role
    _, frozen = nnx.split(model, nnx.LoRAParam, ...)[1:]
    assert float(jnp.abs(frozen_grads.layers[0].key.kernel[...]).max()) > 0
    assert len(jax.tree.leaves(frozen)) == len(jax.tree.leaves(nnx.state(tiny_bert())))


def test_bad_input():
    model = tiny_bert()
    with pytest.raises(ValueError, match="rank=0"):
        add_lora(model.layers, ("query",), rank=0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="'attn_ln' is a LayerNorm"):
        add_lora(model.layers, ("attn_ln",), rank=2, key=jax.random.key(0))
    with pytest.raises(ValueError, match="expected at least one"):
        add_lora([], ("query",), rank=2, key=jax.random.key(0))
    add_lora(model.layers, ("query",), rank=2, key=jax.random.key(0))
    with pytest.raises(ValueError, match="is a LoRALinear; expected an nnx.Linear"):
        add_lora(model.layers, ("query",), rank=2, key=jax.random.key(0))
    with pytest.raises(ValueError, match="base is a LayerNorm"):
        LoRALinear(model.layers[0].attn_ln, 2, key=jax.random.key(0))
