"""The HTTP backend against local servers: exact replay, time-outs, malformed replies, retries."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import jax
import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("openai")

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from jaxpapers.core.chat import (
    ChatBackendError,
    ChatTimeoutError,
    FunctionChatModel,
    MalformedReplyError,
    OpenAIChat,
    Transcript,
    serve,
    start_server,
)

HI = [{"role": "user", "content": "hi"}]


def _dice(messages, *, key, temperature, max_tokens):
    """Reply depends on the key, temperature, max_tokens and the conversation."""
    draw = int(jax.random.randint(key, (), 0, 10**6))
    return f"{draw}|{temperature}|{max_tokens}|{len(messages)}"


def _completion(content: str) -> dict:
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
    }


class Recorder:
    def __init__(self):
        self.waits = []

    def __call__(self, seconds):
        self.waits.append(seconds)


def test_http_replies_equal_in_process_replies():
    model = FunctionChatModel(_dice, lambda m, c: -float(len(c)), name="dice")
    with serve(model) as server:
        client = OpenAIChat(server.url, model="dice", timeout=10)
        keys = [jax.random.key(0), *jax.random.split(jax.random.key(1), 3)]
        for i, k in enumerate(keys):
            kwargs = {"temperature": 0.25 * i, "max_tokens": 3 + i}
            assert client.chat(HI, key=k, **kwargs) == model.chat(HI, key=k, **kwargs)
        assert client.logprob(HI, "four") == -4.0
        with urllib.request.urlopen(server.url + "/models", timeout=10) as r:
            listed = json.load(r)
        assert [m["id"] for m in listed["data"]] == ["dice"]
        body = json.dumps({"messages": [{"role": "robot", "content": "x"}]}).encode()
        req = urllib.request.Request(
            server.url + "/chat/completions",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as bad:
            urllib.request.urlopen(req, timeout=10)
        assert bad.value.code == 400
        assert "role='robot'" in json.load(bad.value)["error"]["message"]
        with pytest.raises(ChatBackendError, match="HTTP 404"):
            OpenAIChat(server.url, model="nope").chat(HI, key=keys[0])
    with pytest.raises(ValueError, match="role='robot'"):  # checked before any request
        client.chat([{"role": "robot", "content": "x"}], key=keys[0])


def test_local_decoder_over_http_equals_in_process():
    from flax import nnx

    from jaxpapers.core.chat import VOCAB_SIZE, LocalDecoderChat
    from jaxpapers.core.nn.decoder import DecoderLM

    lm = DecoderLM(VOCAB_SIZE, d_model=16, num_heads=2, num_layers=1, max_len=24, rngs=nnx.Rngs(1))
    chat = LocalDecoderChat(lm, context=16, top_p=0.9, name="lm")
    with serve(chat) as server:
        client = OpenAIChat(server.url, model="lm", timeout=60)
        for i in range(2):
            k = jax.random.key(10 + i)
            assert client.chat(HI, key=k, temperature=1.0, max_tokens=8) == chat.chat(
                HI, key=k, temperature=1.0, max_tokens=8
            )
        np.testing.assert_allclose(client.logprob(HI, "ab"), chat.logprob(HI, "ab"), rtol=1e-6)


def _serve_app(app):
    return start_server(app)


def test_timeout_is_retried_then_reported():
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def slow():
        import asyncio

        await asyncio.sleep(3.0)
        return _completion("late")

    waits = Recorder()
    with _serve_app(app) as server:
        client = OpenAIChat(server.url, timeout=0.3, max_retries=1, backoff=0.01, sleep=waits)
        with pytest.raises(ChatTimeoutError, match=r"timed out after 2 attempt\(s\) of 0.3 s"):
            client.chat(HI, key=jax.random.key(0))
    assert waits.waits == [0.01]


def test_malformed_json_and_missing_content_are_clear_errors():
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def broken(request: Request):
        body = await request.json()
        if body["messages"][-1]["content"] == "json":
            return Response("{not json", media_type="application/json")
        return JSONResponse({"id": "x", "choices": []})

    with _serve_app(app) as server:
        client = OpenAIChat(server.url, timeout=5, max_retries=2, sleep=Recorder())
        with pytest.raises(MalformedReplyError, match="not valid JSON|malformed"):
            client.chat([{"role": "user", "content": "json"}], key=jax.random.key(0))
        with pytest.raises(MalformedReplyError, match=r"choices\[0\].message.content"):
            client.chat(HI, key=jax.random.key(0))
        with pytest.raises(ChatBackendError, match="no continuation log-probability"):
            client.logprob(HI, "x")


def test_http_500_is_retried_with_backoff_and_recovers():
    app = FastAPI()
    calls = {"n": 0}

    @app.post("/v1/chat/completions")
    async def flaky():
        calls["n"] += 1
        if calls["n"] <= 2:
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=500)
        return _completion("recovered")

    waits = Recorder()
    with _serve_app(app) as server:
        client = OpenAIChat(server.url, timeout=5, max_retries=3, backoff=0.05, sleep=waits)
        assert client.chat(HI, key=jax.random.key(0)) == "recovered"
        assert calls["n"] == 3 and waits.waits == [0.05, 0.1]
        calls["n"] = -10  # now it fails more often than the client retries
        with pytest.raises(ChatBackendError, match=r"failed after 2 attempt\(s\).*500"):
            OpenAIChat(server.url, max_retries=1, sleep=Recorder()).chat(HI, key=jax.random.key(0))


def test_failing_server_mid_conversation_loses_no_finished_turn(tmp_path):
    app_calls = {"n": 0}
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def dies_after_two(request: Request):
        app_calls["n"] += 1
        if app_calls["n"] > 2:
            return JSONResponse({"error": {"message": "gone"}}, status_code=503)
        body = await request.json()
        return _completion(f"reply {len(body['messages'])}")

    path = tmp_path / "t.json"
    t = Transcript(path=path)
    with _serve_app(app) as server:
        client = OpenAIChat(server.url, max_retries=1, sleep=Recorder())
        with pytest.raises(ChatBackendError, match="503"):
            for i in range(5):
                t.append("user", f"q{i}")
                t.append("assistant", client.chat(t.messages(), key=jax.random.key(i)))
    saved = Transcript.load(path)
    assert [m["content"] for m in saved.messages()] == ["q0", "reply 1", "q1", "reply 3", "q2"]


def test_openai_chat_argument_checks(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="api_key"):
        OpenAIChat()
    with pytest.raises(ValueError, match="timeout"):
        OpenAIChat("http://127.0.0.1:9/v1", timeout=0)
    with pytest.raises(ValueError, match="max_retries"):
        OpenAIChat("http://127.0.0.1:9/v1", max_retries=-1)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert OpenAIChat(model="m").base_url.startswith("http://127.0.0.1:9/v1")
