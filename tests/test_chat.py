"""The shared chat interface: messages, key/seed transport, transcripts, the local decoder."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxpapers.core.chat import (
    ChatModel,
    FunctionChatModel,
    LocalDecoderChat,
    LogprobUnavailableError,
    Transcript,
    atomic_write_text,
    chat_examples,
    fit_local_chat,
    key_to_seed,
    seed_to_key,
    validate_messages,
)
from jaxpapers.core.chat._local import EOM, decode_ids, encode_prompt, encode_text

HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    "bad, match",
    [
        ([], "empty"),
        ([{"role": "robot", "content": "x"}], "role='robot'"),
        ([{"role": "user", "content": 3}], "content of type int"),
        ([{"role": "user"}], "keys 'role' and 'content'"),
        ("hello", "expected a sequence"),
    ],
)
def test_validate_messages_rejects(bad, match):
    with pytest.raises(ValueError, match=match):
        validate_messages(bad)


def test_validate_messages_accepts_all_roles():
    msgs = [{"role": r, "content": r} for r in ("system", "user", "assistant", "tool")]
    assert validate_messages(msgs) == msgs


def test_key_seed_round_trip_is_exact():
    keys = jax.random.split(jax.random.key(7), 8)
    for k in keys:
        seed = key_to_seed(k)
        assert -(2**63) <= seed < 2**63
        np.testing.assert_array_equal(
            jax.random.key_data(seed_to_key(seed)), jax.random.key_data(k)
        )
    raw = np.array([0xFFFFFFFF, 1], np.uint32)  # high bit set: negative int64 seed
    assert key_to_seed(raw) < 0
    np.testing.assert_array_equal(jax.random.key_data(seed_to_key(key_to_seed(raw))), raw)
    with pytest.raises(ValueError, match="seed"):
        seed_to_key(2**63)


def test_function_chat_model_passes_only_declared_keywords(key):
    got = {}

    def fn(messages, *, key, max_tokens):
        got.update(max_tokens=max_tokens)
        return "ok"

    model = FunctionChatModel(fn)
    assert isinstance(model, ChatModel)
    assert model.chat(HI, key=key, temperature=0.3, max_tokens=5) == "ok"
    assert got == {"max_tokens": 5}
    with pytest.raises(LogprobUnavailableError, match="no logprob_fn"):
        model.logprob(HI, "x")
    with pytest.raises(ValueError, match="expected str"):
        FunctionChatModel(lambda m: 3).chat(HI, key=key)
    with pytest.raises(ValueError, match="temperature"):
        model.chat(HI, key=key, temperature=-1.0)
    with pytest.raises(ValueError, match="max_tokens"):
        model.chat(HI, key=key, max_tokens=0)


def test_transcript_branches_and_json_round_trip():
    t = Transcript(meta={"seed": 3})
    for i in range(4):
        t.append("user" if i % 2 == 0 else "assistant", f"m{i}", idx=i)
    main = t.active
    name = t.rollback(2)
    t.append("assistant", "other")
    assert [m["content"] for m in t.messages()] == ["m0", "m1", "other"]
    assert [m["content"] for m in t.messages(main)] == ["m0", "m1", "m2", "m3"]
    nested = t.rollback(1)
    assert t.branches[nested].parent == name
    assert [m["content"] for m in t.messages()] == ["m0"]
    back = Transcript.from_json(t.to_json())
    assert back == t and back.messages(name) == t.messages(name)
    json.loads(t.to_json())  # plain JSON
    with pytest.raises(ValueError, match="role"):
        t.append("robot", "x")
    with pytest.raises(ValueError, match="keep"):
        t.rollback(5)
    with pytest.raises(ValueError, match="not a jaxpapers.transcript"):
        Transcript.from_json('{"format": "other"}')


def test_transcript_saves_every_turn_atomically(tmp_path):
    path = tmp_path / "run" / "t.json"
    t = Transcript(path=path)
    for i in range(3):
        t.append("user", f"turn {i}")
        assert Transcript.load(path).messages() == t.messages()
    assert sorted(p.name for p in path.parent.iterdir()) == ["t.json"]  # no temporaries left
    loaded = Transcript.load(path)
    loaded.append("assistant", "resumed")
    assert len(Transcript.load(path).messages()) == 4


def test_atomic_write_keeps_old_file_on_failure(tmp_path):
    path = tmp_path / "f.json"
    atomic_write_text(path, "old")

    with pytest.raises(TypeError):
        atomic_write_text(path, 3)  # write() of a non-string fails mid-way
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_dialogue_encoding_layout():
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "ab"}]
    prompt = encode_prompt(msgs, 10)
    assert prompt.shape == (10,) and (prompt[:2] == 0).all() and prompt[2] != 0  # 8 real ids
    assert decode_ids([*encode_text("Hello, world!\n"), EOM, 5]) == "Hello, world!\n"
    ex = chat_examples([(msgs, "xy")], context=10, max_len=16)
    assert ex.tokens.shape == (1, 16) and ex.mask.sum() == 3  # 'x', 'y', <eom>
    np.testing.assert_array_equal(ex.tokens[0, :10], prompt)


def _reference_logprob(model, context_tokens, reply_ids):
    """float64 log-softmax of one full causal forward at the reply's positions, summed."""
    seq = np.asarray([*context_tokens, *reply_ids], np.int32)[None]
    graphdef, state = nnx.split(model)
    logits = jax.jit(lambda s, t: nnx.merge(graphdef, s)(t))(state, jnp.asarray(seq))
    logits = np.asarray(logits[0], np.float64)
    total = 0.0
    for j, tok in enumerate(reply_ids):
        row = logits[len(context_tokens) - 1 + j]
        total += row[tok] - row.max() - np.log(np.exp(row - row.max()).sum())
    return total


WORDS = ["yes", "no", "maybe", "ok"]
PAIRS = [([{"role": "user", "content": f"say {w}"}], w) for w in WORDS]


@pytest.fixture(scope="module")
def trained():
    return fit_local_chat(
        PAIRS,
        key=jax.random.key(0),
        context=16,
        max_len=24,
        steps=120,
        batch=8,
        d_model=32,
        num_heads=2,
        num_layers=1,
    )


def test_fit_local_chat_learns_replies(trained):
    assert trained.losses[-10:].mean() < 0.1 * trained.losses[:5].mean()
    for msgs, w in PAIRS:
        assert trained.chat.chat(msgs, key=jax.random.key(1), temperature=0.0, max_tokens=8) == w
    lps = trained.chat.logprob_many([(PAIRS[0][0], w) for w in WORDS])
    assert lps[0] > lps[1:].max() + 3  # "say yes" -> "yes" is far likelier than the others


def test_local_decoder_logprob_matches_full_forward_reference(trained):
    chat = trained.chat
    lm = nnx.merge(chat.graphdef, chat.state)
    msgs = PAIRS[2][0]
    for reply in ("maybe", "no"):
        ref = _reference_logprob(lm, encode_prompt(msgs, 16), [*encode_text(reply), EOM])
        # float32 logits, float64 reference sums over <= 6 tokens: a few float32 ulps of the sum.
        np.testing.assert_allclose(chat.logprob(msgs, reply), ref, rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError, match="continuation has"):
        chat.logprob(msgs, "x" * 8)


def test_local_decoder_sampling_is_a_function_of_the_key(trained):
    msgs, k = PAIRS[0][0], jax.random.key(3)
    a = trained.chat.chat(msgs, key=k, temperature=1.5, max_tokens=8)
    assert a == trained.chat.chat(msgs, key=k, temperature=1.5, max_tokens=8)
    draws = {
        trained.chat.chat(msgs, key=jax.random.key(i), temperature=3.0, max_tokens=8)
        for i in range(6)
    }
    assert len(draws) > 1  # a hot temperature really samples
    with pytest.raises(ValueError, match="context=30"):
        LocalDecoderChat(nnx.merge(trained.chat.graphdef, trained.chat.state), context=30)
