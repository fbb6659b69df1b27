"""The HTTP backend: an OpenAI-compatible ``/v1/chat/completions`` server via ``openai``.

Requests carry the PRNG key in ``seed`` (:func:`key_to_seed`), so a :mod:`jaxpapers serve
<jaxpapers.core.chat._server>` endpoint reproduces the in-process reply exactly; a real model
server treats it as its usual best-effort seed. Retries with exponential back-off cover time-outs,
connection failures, HTTP 429 and 5xx; every other failure, and a reply without a string
``choices[0].message.content``, raises a :class:`ChatBackendError` that names the server, the
model and what went wrong.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax

from jaxpapers.core.chat._base import Message, check_sampling, key_to_seed, validate_messages

#: Name of the request field with which the jaxpapers server scores a given continuation.
CONTINUATION_FIELD = "jaxpapers_continuation"


class ChatBackendError(RuntimeError):
    """A chat request failed (after its retries) or the server's reply was unusable."""


class ChatTimeoutError(ChatBackendError):
    """Every attempt timed out."""


class MalformedReplyError(ChatBackendError):
    """The server answered, but not with a chat completion holding text."""


class OpenAIChat:
    """A :class:`~jaxpapers.core.chat.ChatModel` that talks to an OpenAI-compatible server.

    Args:
      base_url: e.g. ``"http://127.0.0.1:8000/v1"``; default ``$OPENAI_BASE_URL``, then the
        ``openai`` client's default (the OpenAI API).
      api_key: default ``$OPENAI_API_KEY``; a local server needs none (``"EMPTY"`` is sent).
      model: the model id sent with every request.
      timeout: seconds per attempt.
      max_retries: further attempts after a retryable failure (time-out, connection error,
        HTTP 429 or 5xx).
      backoff: seconds before the first retry; doubled at each further one.
      sleep: the waiting function (tests pass a recorder).
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        model: str = "local",
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.25,
        sleep: Callable[[float], None] = time.sleep,
    ):
        try:
            import openai  # deferred: the dependency matters only to this backend
        except ImportError as err:
            raise ImportError(
                "OpenAIChat needs the openai package: pip install 'jaxpapers[chat]'"
            ) from err

        if not (isinstance(timeout, int | float) and timeout > 0):
            raise ValueError(f"timeout={timeout!r}; expected seconds > 0")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries={max_retries!r}; expected an int >= 0")
        if not (isinstance(backoff, int | float) and backoff >= 0):
            raise ValueError(f"backoff={backoff!r}; expected seconds >= 0")
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        api_key = api_key or os.environ.get("OPENAI_API_KEY")
        if api_key is None:
            if base_url is None:
                raise ValueError(
                    "api_key=None, $OPENAI_API_KEY is unset and no base_url is given; expected "
                    "a key for the OpenAI API or the base_url of a local server"
                )
            api_key = "EMPTY"
        self._openai = openai
        # Our own retry loop (not the client's) so that back-off and the final error are ours.
        self.client = openai.OpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0
        )
        self.base_url = str(self.client.base_url)
        self.model, self.timeout, self.max_retries = model, timeout, max_retries
        self.backoff, self.sleep = backoff, sleep
        self.name = model

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
        reply = self._request(
            messages=messages,
            temperature=temperature,
            max_tokens=max_tokens,
            seed=key_to_seed(key),
        )
        content = _field(reply, "choices", 0, "message", "content")
        if not isinstance(content, str):
            raise MalformedReplyError(
                f"{self._where()}: reply has no string choices[0].message.content "
                f"(got {content!r}); is this an OpenAI-compatible chat-completions endpoint?"
            )
        return content

    def logprob(self, messages: Sequence[Message], continuation: str) -> float:
        """Score ``continuation`` through the jaxpapers extension field (``jaxpapers serve``).

        OpenAI-compatible servers in general cannot score a given continuation through
        chat completions; those replies carry no such score and raise :class:`ChatBackendError`.
        """
        messages = validate_messages(messages)
        if not isinstance(continuation, str):
            raise ValueError(f"continuation is a {type(continuation).__name__}; expected str")
        reply = self._request(
            messages=messages,
            temperature=0.0,
            max_tokens=1,
            seed=0,
            logprobs=True,
            extra_body={CONTINUATION_FIELD: continuation},
        )
        value = _field(reply, "choices", 0, "logprobs", "content", 0, "logprob")
        if not isinstance(value, int | float):
            raise ChatBackendError(
                f"{self._where()}: the server returned no continuation log-probability; only "
                f"servers that implement the '{CONTINUATION_FIELD}' field (jaxpapers serve) "
                "can score a given continuation"
            )
        return float(value)

    def _where(self) -> str:
        return f"model {self.model!r} at {self.base_url}"

    def _request(self, **kwargs: Any) -> Any:
        oa = self._openai
        retryable = (oa.APITimeoutError, oa.APIConnectionError, oa.RateLimitError)
        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                self.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                return self.client.chat.completions.create(model=self.model, **kwargs)
            except retryable as err:
                last = err
            except oa.APIStatusError as err:
                if err.status_code < 500:
                    raise ChatBackendError(
                        f"{self._where()}: HTTP {err.status_code}: {_status_message(err)}"
                    ) from err
                last = err
            except oa.APIResponseValidationError as err:
                raise MalformedReplyError(f"{self._where()}: malformed reply: {err}") from err
            except ValueError as err:  # a body that is not JSON although it says so
                raise MalformedReplyError(
                    f"{self._where()}: reply is not valid JSON ({err})"
                ) from err
        attempts = self.max_retries + 1
        if isinstance(last, oa.APITimeoutError):
            raise ChatTimeoutError(
                f"{self._where()}: timed out after {attempts} attempt(s) of {self.timeout} s"
            ) from last
        raise ChatBackendError(
            f"{self._where()}: failed after {attempts} attempt(s): {type(last).__name__}: {last}"
        ) from last


def _status_message(err: Any) -> str:
    body = getattr(err, "body", None)
    msg = _field(body, "message") if isinstance(body, dict) else None
    return str(msg if msg is not None else err)


def _field(obj: Any, *path: str | int) -> Any:
    """``obj.a[0].b...`` through attributes, dicts and lists; ``None`` where a step is missing."""
    for step in path:
        if obj is None:
            return None
        if isinstance(step, int):
            try:
                obj = obj[step]
            except (IndexError, KeyError, TypeError):
                return None
        elif isinstance(obj, dict):
            obj = obj.get(step)
        else:
            obj = getattr(obj, step, None)
    return obj
