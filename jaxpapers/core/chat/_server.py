"""``jaxpapers serve``: any in-process :class:`ChatModel` behind an OpenAI-compatible API.

``POST /v1/chat/completions`` reads ``messages``, ``temperature`` (default 1), ``max_tokens`` (or
``max_completion_tokens``; default 64) and ``seed`` (default 0), turns ``seed`` back into the PRNG
key with :func:`seed_to_key` and returns the model's reply as a chat completion. With the extra
field ``jaxpapers_continuation`` it returns that continuation with its log-probability under
``choices[0].logprobs.content[0].logprob`` instead of sampling. ``GET /v1/models`` lists the
served models. Bad requests get HTTP 400 with an OpenAI-style ``{"error": {...}}`` body.

Needs the ``[serve]`` extra (fastapi, uvicorn); bind to 127.0.0.1 (the default) unless the host's
network is trusted: there is no authentication.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoint annotations at runtime.
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from jaxpapers.core.chat._base import (
    ChatModel,
    LogprobUnavailableError,
    check_sampling,
    seed_to_key,
    validate_messages,
)
from jaxpapers.core.chat._openai import CONTINUATION_FIELD


def create_app(models: ChatModel | Mapping[str, ChatModel]):
    """A FastAPI app serving ``models`` (one model, or ids -> models; the first is the default)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse
    from starlette.concurrency import run_in_threadpool

    if not isinstance(models, Mapping):
        models = {getattr(models, "name", "local"): models}
    if not models:
        raise ValueError("models is empty; expected at least one chat model")
    models = dict(models)
    default = next(iter(models))
    # JAX dispatch is thread-safe, but one request at a time keeps replies a function of the
    # request alone (no interleaved compilation or host callbacks).
    lock = threading.Lock()
    app = FastAPI(title="jaxpapers chat server")

    def error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
        return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status)

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        data = [{"id": name, "object": "model", "owned_by": "jaxpapers"} for name in models]
        return {"object": "list", "data": data}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        try:
            body = await request.json()
        except ValueError:
            return error(400, "request body is not JSON")
        if not isinstance(body, dict):
            return error(400, "request body must be a JSON object")
        name = body.get("model") or default
        if name not in models:
            return error(404, f"model={name!r}; this server has {list(models)}", "not_found")
        try:
            messages = validate_messages(body.get("messages"))
            given = body.get("temperature")
            temperature = 1.0 if given is None else float(given)
            max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or 64
            check_sampling(temperature, max_tokens)
            key = seed_to_key(body.get("seed") or 0)
            continuation = body.get(CONTINUATION_FIELD)
            if continuation is not None and not isinstance(continuation, str):
                raise ValueError(f"{CONTINUATION_FIELD} must be a string")
        except (ValueError, TypeError) as err:
            return error(400, str(err))
        model = models[name]

        def run() -> tuple[str, float | None]:
            with lock:
                if continuation is not None:
                    return continuation, model.logprob(messages, continuation)
                return model.chat(
                    messages, key=key, temperature=temperature, max_tokens=max_tokens
                ), None

        try:
            content, logprob = await run_in_threadpool(run)
        except LogprobUnavailableError as err:
            return error(400, f"model {name!r} cannot do this: {err}")
        except ValueError as err:
            return error(400, str(err))
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop",
            "logprobs": None,
        }
        if logprob is not None:
            entry = {"token": content, "logprob": logprob, "bytes": None, "top_logprobs": []}
            choice["logprobs"] = {"content": [entry]}
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": name,
            "choices": [choice],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    return app


class ServerHandle:
    """A running server: ``url`` (ends in ``/v1``), :meth:`stop`; a context manager."""

    def __init__(self, server: Any, thread: threading.Thread, host: str, port: int):
        self._server, self._thread = server, thread
        self.host, self.port = host, port
        self.url = f"http://{host}:{port}/v1"

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the server to exit and join its thread."""
        self._server.should_exit = True
        self._thread.join(timeout)

    def __enter__(self) -> "ServerHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_server(
    app: Any, *, host: str = "127.0.0.1", port: int = 0, startup_timeout: float = 30.0
) -> ServerHandle:
    """Run an ASGI ``app`` with uvicorn in a daemon thread; ``port=0`` picks a free port."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="off", ws="none")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the chat server on {host}:{port} did not start")
        time.sleep(0.01)
    return ServerHandle(server, thread, host, port)


def serve(
    models: ChatModel | Mapping[str, ChatModel], *, host: str = "127.0.0.1", port: int = 0
) -> ServerHandle:
    """Serve ``models`` in a background thread (see :func:`create_app`); returns its handle."""
    return start_server(create_app(models), host=host, port=port)
