"""Messages, the :class:`ChatModel` protocol, PRNG-key <-> seed transport and function backends."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Protocol, TypedDict, runtime_checkable

import jax
import numpy as np

from jaxpapers.core.checks import check_key

ROLES = ("system", "user", "assistant", "tool")


class Message(TypedDict):
    """One chat turn, the OpenAI chat-completions message shape restricted to text.

    ``role`` is one of ``"system"``, ``"user"``, ``"assistant"``, ``"tool"``; ``content`` is text.
    A plain ``dict`` with these two keys is a ``Message``.
    """

    role: str
    content: str


def message(role: str, content: str) -> Message:
    """A checked :class:`Message` (``ValueError`` on an unknown role or non-string content)."""
    msg = Message(role=role, content=content)
    validate_messages([msg])
    return msg


def validate_messages(messages: Sequence[Message]) -> list[Message]:
    """Check a conversation and return it as a list of plain ``Message`` dicts.

    Raises:
      ValueError: ``messages`` is empty or not a sequence, a message is not a mapping with a
        ``role`` in :data:`ROLES` and a string ``content``.
    """
    if isinstance(messages, str | bytes | dict) or not isinstance(messages, Sequence):
        raise ValueError(
            f"messages is a {type(messages).__name__}; expected a sequence of "
            "{'role': ..., 'content': ...} dicts"
        )
    if len(messages) == 0:
        raise ValueError("messages is empty; expected at least one message")
    out: list[Message] = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or "role" not in msg or "content" not in msg:
            raise ValueError(
                f"messages[{i}]={msg!r}; expected a dict with keys 'role' and 'content'"
            )
        if msg["role"] not in ROLES:
            raise ValueError(f"messages[{i}] has role={msg['role']!r}; expected one of {ROLES}")
        if not isinstance(msg["content"], str):
            raise ValueError(
                f"messages[{i}] has content of type {type(msg['content']).__name__}; expected str"
            )
        out.append(Message(role=msg["role"], content=msg["content"]))
    return out


class LogprobUnavailableError(ValueError):
    """The model cannot score a continuation: a rule-based agent built without ``logprob_fn``.

    Such an agent is a complete chat model; roles that need scores (judges, probers) take a
    model that has them (:class:`LocalDecoderChat`, or a ``logprob_fn``). ``jaxpapers serve``
    answers HTTP 400 for it.
    """


@runtime_checkable
class ChatModel(Protocol):
    """What every chat backend provides: sampling a reply and scoring a given continuation.

    ``chat`` is deterministic given ``(messages, key, temperature, max_tokens)``: the same key gives
    the same reply, in process and over HTTP (the key travels as the request's ``seed``, see
    :func:`key_to_seed`). ``logprob`` returns ``log p(continuation | messages)`` in nats, the
    continuation being the next assistant message.
    """

    def chat(
        self,
        messages: Sequence[Message],
        *,
        key: jax.Array,
        temperature: float = 1.0,
        max_tokens: int = 64,
    ) -> str: ...

    def logprob(self, messages: Sequence[Message], continuation: str) -> float: ...


def key_to_seed(key: jax.Array) -> int:
    """Pack a PRNG key into one signed 64-bit int (exact for the default threefry keys).

    The inverse is :func:`seed_to_key`; together they carry a key through the ``seed`` field of a
    chat-completions request, so a server reproduces the in-process sample exactly.
    """
    check_key("key", key)
    data = np.asarray(jax.random.key_data(key) if _is_typed_key(key) else key, np.uint32)
    if data.shape != (2,):
        raise ValueError(
            f"key has key data of shape {data.shape}; expected one threefry key (shape (2,))"
        )
    packed = (int(data[0]) << 32) | int(data[1])
    return packed - 2**64 if packed >= 2**63 else packed  # int64 two's complement, as servers take


def seed_to_key(seed: int) -> jax.Array:
    """The typed PRNG key that :func:`key_to_seed` packed into ``seed``."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(f"seed={seed!r}; expected an int in [-2**63, 2**63)")
    if not -(2**63) <= int(seed) < 2**63:
        raise ValueError(f"seed={seed!r}; expected an int in [-2**63, 2**63)")
    seed = int(seed) % 2**64
    data = np.array([seed >> 32, seed & 0xFFFFFFFF], np.uint32)
    return jax.random.wrap_key_data(data)


def _is_typed_key(key: jax.Array) -> bool:
    return jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)


def check_sampling(temperature: float, max_tokens: int) -> None:
    """``ValueError`` unless ``temperature >= 0`` is finite and ``max_tokens`` is an int >= 1."""
    if not (isinstance(temperature, int | float) and np.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature={temperature!r}; expected a finite float >= 0")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens={max_tokens!r}; expected an int >= 1")


class FunctionChatModel:
    """A :class:`ChatModel` from a Python function: rule-based and probabilistic agents.

    Args:
      fn: ``fn(messages, *, key, temperature, max_tokens) -> str``; keyword arguments that ``fn``
        does not declare are not passed (``fn(messages, *, key)`` is enough for most agents).
      logprob_fn: optional ``logprob_fn(messages, continuation) -> float``; without it
        :meth:`logprob` raises :class:`LogprobUnavailableError`.
      name: the model id reported by ``jaxpapers serve``.

    Examples:
        >>> import jax
        >>> echo = FunctionChatModel(lambda messages, *, key: messages[-1]["content"].upper())
        >>> echo.chat([{"role": "user", "content": "hi"}], key=jax.random.key(0))
        'HI'
    """

    def __init__(
        self,
        fn: Callable[..., str],
        logprob_fn: Callable[[Sequence[Message], str], float] | None = None,
        *,
        name: str = "function",
    ):
        if not callable(fn):
            raise ValueError(f"fn={fn!r}; expected a callable returning the reply text")
        self.fn, self.logprob_fn, self.name = fn, logprob_fn, name
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):  # builtins without a signature get every keyword
            params = {}
        var_kw = not params or any(p.kind is p.VAR_KEYWORD for p in params.values())
        self._kwargs = tuple(
            k for k in ("key", "temperature", "max_tokens") if var_kw or k in params
        )

    def chat(
        self,
        messages: Sequence[Message],
        *,
        key: jax.Array,
        temperature: float = 1.0,
        max_tokens: int = 64,
    ) -> str:
        messages = validate_messages(messages)
        check_sampling(temperature, max_tokens)
        given = {"key": key, "temperature": temperature, "max_tokens": max_tokens}
        reply = self.fn(messages, **{k: given[k] for k in self._kwargs})
        if not isinstance(reply, str):
            raise ValueError(f"{self.name}: fn returned {type(reply).__name__}; expected str")
        return reply

    def logprob(self, messages: Sequence[Message], continuation: str) -> float:
        messages = validate_messages(messages)
        if self.logprob_fn is None:
            raise LogprobUnavailableError(
                f"{self.name}: cannot score continuations (no logprob_fn was given)"
            )
        return float(self.logprob_fn(messages, continuation))
