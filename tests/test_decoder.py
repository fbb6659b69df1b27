"""The decoder LM: causal, KV-cache decoding equals the full forward, sampling with and without
the cache draws the same tokens, top-p against a NumPy reference, clear errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import tolerance

from jaxpapers.core.nn.decoder import DecoderLM, filter_top_p, sample, token_log_probs

V, T = 13, 10


@pytest.fixture(scope="module")
def lm():
    return DecoderLM(V, d_model=16, num_heads=2, num_layers=2, max_len=T + 2, rngs=nnx.Rngs(0))


@pytest.fixture(scope="module")
def tokens():
    return jax.random.randint(jax.random.key(1), (3, T), 0, V)


def test_causal_later_tokens_do_not_change_earlier_logits(lm, tokens):
    changed = tokens.at[:, 6:].set((tokens[:, 6:] + 1) % V)
    a, b = np.asarray(lm(tokens)), np.asarray(lm(changed))
    np.testing.assert_allclose(a[:, :6], b[:, :6], **tolerance(np.float32))
    assert np.abs(a[:, 6:] - b[:, 6:]).max() > 1e-3


def test_kv_cache_prefill_then_steps_equals_full_forward(lm, tokens):
    full = lm(tokens)
    logits, cache = lm(tokens[:, :4], cache=lm.init_cache(3))
    chunks = [logits]
    for i in range(4, T):
        logits, cache = lm(tokens[:, i : i + 1], cache=cache)
        chunks.append(logits)
    assert int(cache.index) == T
    np.testing.assert_allclose(
        np.asarray(jnp.concatenate(chunks, 1)), np.asarray(full), **tolerance(np.float32, 10)
    )


def test_sampling_with_cache_equals_recomputation(lm, tokens):
    graphdef, state = nnx.split(lm)
    kw = dict(key=jax.random.key(3), max_new_tokens=7, temperature=1.0, top_p=0.9)
    a = sample(graphdef, state, tokens[:, :3], **kw)
    b = sample(graphdef, state, tokens[:, :3], use_cache=False, **kw)
    assert a.shape == (3, 10)
    np.testing.assert_array_equal(np.asarray(a[:, :3]), np.asarray(tokens[:, :3]))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # greedy decoding picks the argmax of the full forward at every step
    g = sample(
        graphdef, state, tokens[:, :3], key=jax.random.key(0), max_new_tokens=7, temperature=0.0
    )
    want = np.asarray(jnp.argmax(lm(g)[:, 2:-1], -1))
    np.testing.assert_array_equal(np.asarray(g[:, 3:]), want)
    # eos: once emitted it repeats
    e = np.asarray(
        sample(
            graphdef,
            state,
            tokens[:, :3],
            key=jax.random.key(0),
            max_new_tokens=7,
            eos_id=int(g[0, 4]),
            temperature=0.0,
        )
    )
    assert (e[0, 4:] == g[0, 4]).all()


def test_top_p_and_log_probs_against_numpy():
    logits = jnp.log(jnp.array([[0.5, 0.3, 0.15, 0.05]]))
    kept = np.isfinite(np.asarray(filter_top_p(logits, 0.75)))
    np.testing.assert_array_equal(kept, [[True, True, False, False]])
    assert np.isfinite(np.asarray(filter_top_p(logits, 0.01))).sum() == 1
    x = jax.random.normal(jax.random.key(0), (2, 3, 5))
    y = jnp.array([[0, 4, 2], [1, 1, 3]])
    xn = np.asarray(x, np.float64)
    ref = xn - np.log(np.exp(xn).sum(-1, keepdims=True))
    want = np.take_along_axis(ref, np.asarray(y)[..., None], -1)[..., 0]
    np.testing.assert_allclose(np.asarray(token_log_probs(x, y)), want, **tolerance(np.float32))


def test_gradient_flows_through_split_state(lm, tokens):
    graphdef, state = nnx.split(lm)

    def loss(state):
        model = nnx.merge(graphdef, state)
        return -token_log_probs(model(tokens[:, :-1]), tokens[:, 1:]).mean()

    grads = jax.jit(jax.grad(loss))(state)
    norms = [float(jnp.linalg.norm(g)) for g in jax.tree.leaves(grads)]
    assert all(np.isfinite(norms)) and max(norms) > 0


def test_bad_input(lm, tokens):
    graphdef, state = nnx.split(lm)
    with pytest.raises(ValueError, match="num_heads=3 must divide d_model=16"):
        DecoderLM(5, d_model=16, num_heads=3, num_layers=1, max_len=4, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="max_len=12"):
        lm(jnp.zeros((1, 13), jnp.int32))
    with pytest.raises(ValueError, match="expected \\[batch, time\\]"):
        lm(jnp.zeros((13,), jnp.int32))
    with pytest.raises(ValueError, match="exceeds the model's max_len=12"):
        sample(graphdef, state, tokens[:, :6], key=jax.random.key(0), max_new_tokens=7)
    with pytest.raises(ValueError, match="top_p"):
        sample(graphdef, state, tokens[:, :2], key=jax.random.key(0), max_new_tokens=2, top_p=1.5)
    with pytest.raises(ValueError, match="temperature"):
        sample(
            graphdef,
            state,
            tokens[:, :2],
            key=jax.random.key(0),
            max_new_tokens=2,
            temperature=-1.0,
        )
