r"""The local JAX backend: the core decoder LM (:mod:`jaxpapers.core.nn.decoder`) as a chat model.

Dialogue format (one character a token). Every message is ``<role> text <eom>``; a reply is asked
for by a trailing ``<assistant>`` marker and ends at the next ``<eom>``. The prompt is cut to its
last ``context`` tokens and *left*-padded with ``<pad>`` to exactly ``context`` tokens, so a model
sees the same layout in training (:func:`chat_examples`) and in sampling, and ``jax.jit`` compiles
one prompt shape. The reply occupies positions ``context .. max_len - 1``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxpapers.core.chat._base import ROLES, Message, check_sampling, validate_messages
from jaxpapers.core.checks import check_key
from jaxpapers.core.nn.decoder import DecoderLM, sample, token_log_probs

PAD, EOM = 0, 1
_ROLE_ID = {role: 2 + i for i, role in enumerate(ROLES)}
_CHARS = "\n" + "".join(chr(c) for c in range(32, 127))
_OFFSET = 2 + len(ROLES)
_CHAR_ID = {c: _OFFSET + i for i, c in enumerate(_CHARS)}
VOCAB_SIZE = _OFFSET + len(_CHARS)


def encode_text(text: str) -> list[int]:
    """Character ids of ``text`` (characters outside printable ASCII become ``?``)."""
    unknown = _CHAR_ID["?"]
    return [_CHAR_ID.get(c, unknown) for c in text]


def decode_ids(ids: Sequence[int]) -> str:
    """Text of ``ids`` up to the first ``<eom>`` (pads and role markers are dropped)."""
    out = []
    for i in (int(x) for x in ids):
        if i == EOM:
            break
        if i >= _OFFSET:
            out.append(_CHARS[i - _OFFSET])
    return "".join(out)


def encode_prompt(messages: Sequence[Message], context: int) -> np.ndarray:
    """``[context]`` int32: the dialogue, an ``<assistant>`` marker, cut and left-padded."""
    ids: list[int] = []
    for m in validate_messages(messages):
        ids += [_ROLE_ID[m["role"]], *encode_text(m["content"]), EOM]
    ids.append(_ROLE_ID["assistant"])
    ids = ids[-context:]
    return np.asarray([PAD] * (context - len(ids)) + ids, np.int32)


def encode_reply(reply: str, reply_len: int) -> tuple[np.ndarray, int]:
    """``[reply_len]`` ids of ``reply + <eom>`` (cut, right-padded) and how many are real."""
    ids = [*encode_text(reply), EOM][:reply_len]
    return np.asarray(ids + [PAD] * (reply_len - len(ids)), np.int32), len(ids)


class ChatExamples(NamedTuple):
    """Training data for :func:`fit_local_chat`.

    Attributes:
      tokens: ``[N, max_len]`` int32 prompt (``context``) then reply (``max_len - context``).
      mask: ``[N, max_len - 1]`` float32, 1 on the next-token targets that belong to the reply.
    """

    tokens: np.ndarray
    mask: np.ndarray


def chat_examples(
    pairs: Sequence[tuple[Sequence[Message], str]], *, context: int, max_len: int
) -> ChatExamples:
    """Encode ``(messages, reply)`` pairs in the sampling layout of :class:`LocalDecoderChat`."""
    if not 0 < context < max_len:
        raise ValueError(f"context={context}; expected 0 < context < max_len={max_len}")
    if len(pairs) == 0:
        raise ValueError("pairs is empty; expected at least one (messages, reply) pair")
    reply_len = max_len - context
    tokens = np.zeros((len(pairs), max_len), np.int32)
    mask = np.zeros((len(pairs), max_len - 1), np.float32)
    for i, (messages, reply) in enumerate(pairs):
        tokens[i, :context] = encode_prompt(messages, context)
        tokens[i, context:], n = encode_reply(reply, reply_len)
        mask[i, context - 1 : context - 1 + n] = 1.0
    return ChatExamples(tokens, mask)


@jax.jit
def _masked_log_prob(graphdef, state, tokens, mask):
    logits = nnx.merge(graphdef, state)(tokens[:, :-1])
    return jnp.sum(token_log_probs(logits, tokens[:, 1:]) * mask, axis=-1)


class LocalDecoderChat:
    """A :class:`~jaxpapers.core.chat.ChatModel` on a :class:`DecoderLM` with a character tokenizer.

    Sampling is :func:`jaxpapers.core.nn.decoder.sample` (jitted, KV cache, temperature, nucleus
    ``top_p``), stopping at ``<eom>``. A reply has at most ``max_len - context`` characters;
    ``max_tokens`` caps it further.

    Args:
      model: a :class:`DecoderLM` with ``vocab_size == VOCAB_SIZE``.
      context: prompt tokens the model sees (the rest of ``model.max_len`` is the reply).
      top_p: nucleus mass in ``(0, 1]``.
      name: the model id reported by ``jaxpapers serve``.
    """

    def __init__(self, model: DecoderLM, *, context: int, top_p: float = 1.0, name: str = "local"):
        if model.vocab_size != VOCAB_SIZE:
            raise ValueError(
                f"model.vocab_size={model.vocab_size}; expected VOCAB_SIZE={VOCAB_SIZE}"
            )
        if isinstance(context, bool) or not isinstance(context, int):
            raise ValueError(f"context={context!r}; expected an int")
        if not 0 < context < model.max_len:
            raise ValueError(f"context={context}; expected 0 < context < max_len={model.max_len}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p={top_p!r}; expected a nucleus mass in (0, 1]")
        self.graphdef, self.state = nnx.split(model)
        self.context, self.max_len, self.top_p, self.name = context, model.max_len, top_p, name

    @property
    def reply_len(self) -> int:
        """The longest reply in characters (``<eom>`` included)."""
        return self.max_len - self.context

    def chat(
        self,
        messages: Sequence[Message],
        *,
        key: jax.Array,
        temperature: float = 1.0,
        max_tokens: int = 64,
    ) -> str:
        check_sampling(temperature, max_tokens)
        prompt = encode_prompt(messages, self.context)[None]
        out = sample(
            self.graphdef,
            self.state,
            jnp.asarray(prompt),
            key=key,
            max_new_tokens=min(max_tokens, self.reply_len),
            temperature=temperature,
            top_p=self.top_p,
            eos_id=EOM,
        )
        return decode_ids(np.asarray(out[0, self.context :]))

    def logprob(self, messages: Sequence[Message], continuation: str) -> float:
        """``log p(continuation <eom> | messages)`` in nats (``ValueError`` if it does not fit)."""
        return float(self.logprob_many([(messages, continuation)])[0])

    def logprob_many(self, pairs: Sequence[tuple[Sequence[Message], str]]) -> np.ndarray:
        """:meth:`logprob` of many ``(messages, continuation)`` pairs in one jitted call."""
        for _, cont in pairs:
            if len(cont) + 1 > self.reply_len:
                raise ValueError(
                    f"continuation has {len(cont)} characters; expected at most "
                    f"{self.reply_len - 1} (max_len - context - 1)"
                )
        ex = chat_examples(pairs, context=self.context, max_len=self.max_len)
        return np.asarray(
            _masked_log_prob(
                self.graphdef, self.state, jnp.asarray(ex.tokens), jnp.asarray(ex.mask)
            )
        )


@partial(jax.jit, static_argnames=("graphdef", "steps", "batch"))
def _fit(graphdef, params, rest, tokens, mask, key, learning_rate, *, steps, batch):
    optimizer = optax.adam(learning_rate)

    def loss_fn(p, tok, msk):
        lp = _masked_log_prob.__wrapped__(graphdef, nnx.merge_state(p, rest), tok, msk)
        return -jnp.sum(lp) / jnp.maximum(jnp.sum(msk), 1.0)

    def step(carry, i):
        params, opt_state = carry
        idx = jax.random.randint(jax.random.fold_in(key, i), (batch,), 0, tokens.shape[0])
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens[idx], mask[idx])
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), loss

    (params, _), losses = jax.lax.scan(step, (params, optimizer.init(params)), jnp.arange(steps))
    return params, losses


class FitResult(NamedTuple):
    """Output of :func:`fit_local_chat`: the chat model and its per-step loss (nats per token)."""

    chat: LocalDecoderChat
    losses: np.ndarray


def fit_local_chat(
    pairs: Sequence[tuple[Sequence[Message], str]],
    *,
    key: jax.Array,
    context: int,
    max_len: int,
    steps: int,
    batch: int = 32,
    learning_rate: float = 3e-3,
    d_model: int = 64,
    num_heads: int = 4,
    num_layers: int = 2,
    top_p: float = 1.0,
    name: str = "local",
) -> FitResult:
    """Train a fresh :class:`DecoderLM` on ``(messages, reply)`` pairs (teacher forcing on replies).

    Batches are drawn uniformly with ``jax.random.fold_in(key, step)``; the loss is the mean
    next-token cross-entropy over reply characters and ``<eom>``.
    """
    check_key("key", key)
    if steps < 1 or batch < 1:
        raise ValueError(f"steps={steps}, batch={batch}; expected positive ints")
    ex = chat_examples(pairs, context=context, max_len=max_len)
    init_key, data_key = jax.random.split(key)
    model = DecoderLM(
        VOCAB_SIZE,
        d_model=d_model,
        num_heads=num_heads,
        num_layers=num_layers,
        max_len=max_len,
        rngs=nnx.Rngs(params=init_key),
    )
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    params, losses = _fit(
        graphdef,
        params,
        rest,
        jnp.asarray(ex.tokens),
        jnp.asarray(ex.mask),
        data_key,
        jnp.asarray(learning_rate, jnp.float32),
        steps=steps,
        batch=batch,
    )
    model = nnx.merge(graphdef, params, rest)
    chat = LocalDecoderChat(model, context=context, top_p=top_p, name=name)
    return FitResult(chat, np.asarray(losses, np.float64))
