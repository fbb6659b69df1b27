"""`jaxpapers serve`: a real OpenAI-compatible endpoint in a subprocess, started and stopped."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request

import jax
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from jaxpapers.audit import make_target
from jaxpapers.cli import main
from jaxpapers.core.chat import OpenAIChat


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_subprocess_answers_chat_completions():
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jaxpapers", "serve", "audit", "echo", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url + "/models", timeout=2) as r:
                    ids = [m["id"] for m in json.load(r)["data"]]
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read().decode()
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.2)
        assert ids == ["auditor", "target", "scorer", "user", "echo"]
        msgs = [
            {"role": "system", "content": "AUDIT scenario=fix_tests"},
            {"role": "user", "content": "hello there"},
        ]
        assert OpenAIChat(url, model="echo").chat(msgs, key=jax.random.key(0)) == "hello there"
        key = jax.random.key(4)
        assert OpenAIChat(url, model="target").chat(msgs, key=key) == make_target().chat(
            msgs, key=key
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stdout.close()


def test_serve_rejects_unknown_models(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "nonsense"])
    assert exit_.value.code == 2
    assert "unknown model 'nonsense'" in capsys.readouterr().err
