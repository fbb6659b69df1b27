"""Two processes joined by ``jax.distributed`` on localhost (CPU, gloo collectives, 2 forced host
devices each: a 4-device global mesh) against one process with 4 devices: the trainer, its orbax
checkpoints, the kFFM pairings, per-process data feeding, and a crashed peer.

Every child process is bounded by a time-out and killed at the end; ports are on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

WORKER = Path(__file__).with_name("distributed_worker.py")
LIMIT_S = 300


def _env() -> dict[str, str]:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2"
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _result(stdout: str) -> dict:
    line = next(x for x in stdout.splitlines() if x.startswith("RESULT"))
    return json.loads(line[len("RESULT") :])


def _run_pair(ckpt: Path, fail_at: int = -1) -> list[subprocess.CompletedProcess]:
    port = _free_port()
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "run", str(pid), str(port), str(ckpt), str(fail_at)],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for pid in (0, 1)
    ]
    done = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=LIMIT_S)
            done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return done


def _single(ckpt: Path, resume_dir: Path | None) -> dict:
    env = _env()
    env["XLA_FLAGS"] = env["XLA_FLAGS"].replace("device_count=2", "device_count=4")
    proc = subprocess.run(
        [sys.executable, str(WORKER), "single", str(ckpt), str(resume_dir or "-")],
        env=env,
        capture_output=True,
        text=True,
        timeout=LIMIT_S,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _result(proc.stdout)


@pytest.mark.slow
def test_two_processes_match_one_and_survive_a_crashed_peer(tmp_path):
    ckpt, crashed = tmp_path / "ckpt", tmp_path / "crashed"
    pair = _run_pair(ckpt)
    for p in pair:
        assert p.returncode == 0, p.stderr[-3000:]
    a, b = (_result(p.stdout) for p in pair)
    assert (a["devices"], a["local_devices"]) == (4, 2)
    # Each process fed only its own steps' local half, and its shards hold only its rows.
    assert a["fed_steps"] == b["fed_steps"] == list(range(6))
    assert a["shards_local"] and b["shards_local"]
    # Replicated state: bitwise the same in both processes.
    assert a["losses"] == b["losses"] and a["w"] == b["w"] and a["b"] == b["b"]

    # A crashed peer: the survivor stops with an error in bounded time, and a single process
    # resumes from the last checkpoint written before the crash.
    crash = _run_pair(crashed, fail_at=4)
    assert crash[1].returncode == 3
    assert crash[0].returncode != 0, "the surviving process should fail, not hang or succeed"

    ref = _single(ckpt, crashed)
    # float32 all-reduces in another order: agree to a few ulps of the loss scale.
    np.testing.assert_allclose(a["losses"], ref["fresh_losses"][:6], rtol=1e-5, atol=1e-6)
    # The 2-process checkpoint restores in one process and continues to the same numbers.
    assert ref["resumed_from"] == 6
    np.testing.assert_allclose(ref["resumed_losses"][:6], a["losses"], rtol=0, atol=0)
    np.testing.assert_allclose(ref["resumed_losses"], ref["fresh_losses"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ref["resumed_w"], ref["fresh_w"], rtol=1e-5, atol=1e-6)
    assert ref["after_fault_from"] == 3
    np.testing.assert_allclose(
        ref["after_fault_losses"], ref["fresh_losses"][:6], rtol=1e-5, atol=1e-6
    )

    # Global pairing across processes equals the single-process solve (coupling entries <= 1/16;
    # float32 log-domain Sinkhorn in another reduction order: 1e-4 of that scale).
    coupling = np.asarray(a["global_coupling"])
    assert np.abs(coupling - np.asarray(ref["coupling"])).max() < 1e-4 / 16
    assert a["global_indices"] == ref["indices"]
    # Local pairing stays inside each device's shard of 4 (indices are shard-local).
    assert all(0 <= i < 4 for i in a["local_indices"]) and len(a["local_indices"]) == 16
