r"""One chat-model interface for every paper that evaluates agents built on chat models.

A :class:`ChatModel` has two methods::

    chat(messages, *, key, temperature=1.0, max_tokens=64) -> str
    logprob(messages, continuation) -> float    # log p(continuation | messages), nats

with ``messages`` a sequence of :class:`Message` dicts (``role`` in ``system``, ``user``,
``assistant``, ``tool``; ``content`` a string; checked by :func:`validate_messages`). Backends:

- :class:`FunctionChatModel`: a Python function (rule-based or probabilistic agents).
- :class:`LocalDecoderChat`: the core decoder transformer (:mod:`jaxpapers.core.nn.decoder`) with a
  character tokenizer and jitted KV-cache sampling (temperature, top-p); :func:`fit_local_chat`
  trains one on ``(messages, reply)`` pairs.
- :class:`OpenAIChat`: any OpenAI-compatible chat-completions server through the official
  ``openai`` client (``base_url``/``api_key`` or ``$OPENAI_BASE_URL``/``$OPENAI_API_KEY``),
  with time-outs, retries with back-off and :class:`ChatBackendError` on unusable replies.

:func:`serve` (``jaxpapers serve`` on the command line; extra ``[serve]``) puts any backend behind
``/v1/chat/completions`` on 127.0.0.1. The PRNG key travels as the request's ``seed``
(:func:`key_to_seed` / :func:`seed_to_key`, exact), so an :class:`OpenAIChat` pointed at a served
model returns the same replies as the model in process. :class:`Transcript` records conversations
with branches (rollback) and saves itself atomically after every turn.

Examples:
    >>> import jax
    >>> from jaxpapers.core.chat import FunctionChatModel, Transcript
    >>> bot = FunctionChatModel(lambda messages, *, key: f"you said {messages[-1]['content']}")
    >>> t = Transcript()
    >>> _ = t.append("user", "hi")
    >>> _ = t.append("assistant", bot.chat(t.messages(), key=jax.random.key(0)))
    >>> t.messages()[-1]
    {'role': 'assistant', 'content': 'you said hi'}
"""

from jaxpapers.core.chat._base import (
    ROLES,
    ChatModel,
    FunctionChatModel,
    LogprobUnavailableError,
    Message,
    check_sampling,
    key_to_seed,
    message,
    seed_to_key,
    validate_messages,
)
from jaxpapers.core.chat._local import (
    VOCAB_SIZE,
    ChatExamples,
    FitResult,
    LocalDecoderChat,
    chat_examples,
    fit_local_chat,
)
from jaxpapers.core.chat._openai import (
    ChatBackendError,
    ChatTimeoutError,
    MalformedReplyError,
    OpenAIChat,
)
from jaxpapers.core.chat._server import ServerHandle, create_app, serve, start_server
from jaxpapers.core.chat._transcript import Branch, Transcript, Turn, atomic_write_text

__all__ = [
    "ROLES",
    "VOCAB_SIZE",
    "Branch",
    "ChatBackendError",
    "ChatExamples",
    "ChatModel",
    "ChatTimeoutError",
    "FitResult",
    "FunctionChatModel",
    "LocalDecoderChat",
    "LogprobUnavailableError",
    "MalformedReplyError",
    "Message",
    "OpenAIChat",
    "ServerHandle",
    "Transcript",
    "Turn",
    "atomic_write_text",
    "chat_examples",
    "check_sampling",
    "create_app",
    "fit_local_chat",
    "key_to_seed",
    "message",
    "seed_to_key",
    "serve",
    "start_server",
    "validate_messages",
]
