"""core.train: determinism, resume from orbax checkpoints (also after SIGKILL), 4-device data
parallelism matching one device, and clear errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxpapers.core.train import data_parallel_mesh, shard_batch, train

SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    import jax, jax.numpy as jnp, numpy as np, optax
    from jaxpapers.core.train import train

    W = np.linspace(-1.0, 1.0, 8).astype(np.float32)

    def batch_fn(step):
        if SLOW:
            time.sleep(0.05)
        rng = np.random.default_rng(step)
        x = rng.normal(size=(16, 8)).astype(np.float32)
        return {"x": x, "y": np.tanh(x @ W) + 0.05 * rng.normal(size=16).astype(np.float32)}

    def loss_fn(p, batch, key):
        noise = 0.01 * jax.random.normal(key, p["w1"].shape)
        h = jnp.tanh(batch["x"] @ (p["w1"] + noise))
        return jnp.mean((h @ p["w2"] - batch["y"]) ** 2)

    k1, k2 = jax.random.split(jax.random.key(0))
    params = {"w1": 0.3 * jax.random.normal(k1, (8, 16)), "w2": 0.3 * jax.random.normal(k2, (16,))}
    SLOW = len(sys.argv) > 2
    result = train(loss_fn, params, optax.adam(3e-2), batch_fn, steps=60, key=jax.random.key(1),
                   checkpoint_dir=sys.argv[1] if sys.argv[1] != "-" else None,
                   checkpoint_every=5)
    print(json.dumps({"losses": result.losses.tolist(), "devices": len(jax.devices()),
                      "resumed_from": result.resumed_from}))
    """
)


def _run_script(tmp_path: Path, *args: str, devices: int | None = None) -> dict:
    script = tmp_path / "train_script.py"
    script.write_text(SCRIPT)
    env = dict(os.environ)
    if devices is not None:
        flags = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
        env["XLA_FLAGS"] = flags.strip()
    out = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _problem():
    w_true = np.arange(1.0, 5.0, dtype=np.float32)

    def batch_fn(step):
        rng = np.random.default_rng(step)
        x = rng.normal(size=(8, 4)).astype(np.float32)
        return {"x": x, "y": x @ w_true}

    def loss_fn(p, batch, key):
        return jnp.mean((batch["x"] @ p["w"] - batch["y"]) ** 2)

    return loss_fn, {"w": jnp.zeros(4)}, batch_fn


def test_training_reduces_loss_and_is_deterministic():
    loss_fn, params, batch_fn = _problem()
    a = train(loss_fn, params, optax.sgd(0.05), batch_fn, steps=80, key=jax.random.key(0))
    b = train(loss_fn, params, optax.sgd(0.05), batch_fn, steps=80, key=jax.random.key(0))
    assert a.losses[-1] < 1e-3 * a.losses[0]
    np.testing.assert_array_equal(a.losses, b.losses)
    np.testing.assert_allclose(a.params["w"], np.arange(1.0, 5.0), atol=1e-2)
    assert params["w"].sum() == 0  # the caller's arrays are not donated away


def test_resume_from_checkpoint_continues_exactly(tmp_path):
    loss_fn, params, batch_fn = _problem()
    full = train(loss_fn, params, optax.adam(0.1), batch_fn, steps=40, key=jax.random.key(0))
    part = train(
        loss_fn,
        params,
        optax.adam(0.1),
        batch_fn,
        steps=40,
        key=jax.random.key(0),
        checkpoint_dir=tmp_path,
        checkpoint_every=10,
        stop_after=17,
    )
    assert len(part.losses) == 17
    rest = train(
        loss_fn,
        params,
        optax.adam(0.1),
        batch_fn,
        steps=40,
        key=jax.random.key(0),
        checkpoint_dir=tmp_path,
        checkpoint_every=10,
    )
    assert rest.resumed_from == 17
    np.testing.assert_array_equal(rest.losses, full.losses)
    np.testing.assert_array_equal(rest.params["w"], full.params["w"])


@pytest.mark.slow
def test_sigkill_mid_training_then_resume_matches_uninterrupted(tmp_path):
    reference = _run_script(tmp_path, "-")
    ckpt = tmp_path / "ckpt"
    script = tmp_path / "train_script.py"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(ckpt), "slow"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        steps = [int(p.name) for p in ckpt.glob("*") if p.name.isdigit()]
        if steps and max(steps) >= 15:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    resumed = _run_script(tmp_path, str(ckpt))
    assert 15 <= resumed["resumed_from"] < 60
    np.testing.assert_allclose(resumed["losses"], reference["losses"], rtol=1e-6, atol=1e-7)


@pytest.mark.slow
def test_four_devices_match_one_device(tmp_path):
    one = _run_script(tmp_path, "-", devices=1)
    four = _run_script(tmp_path, "-", devices=4)
    assert (one["devices"], four["devices"]) == (1, 4)
    assert four["losses"][-1] < 0.5 * four["losses"][0]
    np.testing.assert_allclose(four["losses"], one["losses"], rtol=2e-5, atol=1e-6)


def test_bad_inputs():
    loss_fn, params, batch_fn = _problem()
    with pytest.raises(ValueError, match="steps=0"):
        train(loss_fn, params, optax.sgd(0.1), batch_fn, steps=0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="checkpoint_every=0"):
        train(
            loss_fn,
            params,
            optax.sgd(0.1),
            batch_fn,
            steps=3,
            key=jax.random.key(0),
            checkpoint_every=0,
        )
    with pytest.raises(ValueError, match="leading batch axis"):
        train(
            loss_fn,
            params,
            optax.sgd(0.1),
            lambda s: {"x": np.float32(1.0)},
            steps=1,
            key=jax.random.key(0),
        )
    mesh = data_parallel_mesh()
    assert mesh.shape["data"] == len(jax.devices())
    np.testing.assert_array_equal(shard_batch({"x": np.ones((2, 3))}, mesh)["x"], np.ones((2, 3)))


def test_repeated_calls_reuse_the_compiled_step():
    from jaxpapers.core.train import _jitted_step

    loss_fn, params, batch_fn = _problem()
    opt = optax.sgd(0.05)
    train(loss_fn, params, opt, batch_fn, steps=2, key=jax.random.key(0))
    before = _jitted_step.cache_info().hits
    train(loss_fn, params, opt, batch_fn, steps=2, key=jax.random.key(1))
    assert _jitted_step.cache_info().hits == before + 1


def test_compiler_options_reach_the_step_program():
    """A lower LLVM optimisation level compiles another program with the same arithmetic; an
    unknown option is XLA's error, not silently ignored."""
    from jaxpapers.core.train import _jitted_step

    loss_fn, params, batch_fn = _problem()
    opt = optax.sgd(0.05)
    a = train(loss_fn, params, opt, batch_fn, steps=20, key=jax.random.key(0))
    misses = _jitted_step.cache_info().misses
    level1 = {"xla_backend_optimization_level": 1}
    b = train(
        loss_fn, params, opt, batch_fn, steps=20, key=jax.random.key(0), compiler_options=level1
    )
    assert _jitted_step.cache_info().misses == misses + 1  # its own compiled step
    # float32 over 20 steps of a 4-parameter model: codegen may reorder a few operations.
    np.testing.assert_allclose(b.losses, a.losses, rtol=1e-5)
    with pytest.raises(RuntimeError, match="no_such_option"):
        train(
            loss_fn,
            params,
            opt,
            batch_fn,
            steps=1,
            key=jax.random.key(0),
            compiler_options={"no_such_option": 1},
        )


def test_stack_trees_on_the_host_matches_the_device_stack():
    """``host=True`` gives NumPy leaves with the same values and compiles nothing."""
    from jaxpapers.core.pytrees import stack_trees

    trees = [{"w": jnp.full((2, 3), float(i)), "b": np.arange(3) + i} for i in range(4)]
    host = stack_trees(trees, host=True)
    device = stack_trees(trees)
    assert all(isinstance(x, np.ndarray) for x in jax.tree.leaves(host))
    jax.tree.map(np.testing.assert_array_equal, host, jax.tree.map(np.asarray, device))
    with pytest.raises(ValueError, match="at least one pytree"):
        stack_trees([], host=True)
