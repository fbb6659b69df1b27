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
    """One jitted step (plain ``jax.jit``, static loss and optimiser): a second run with the same
    loss function and optimiser compiles nothing new."""
    from jaxpapers.core.train import _step

    loss_fn, params, batch_fn = _problem()
    opt = optax.sgd(0.05)
    train(loss_fn, params, opt, batch_fn, steps=2, key=jax.random.key(0))
    before = _step._cache_size()
    train(loss_fn, params, opt, batch_fn, steps=2, key=jax.random.key(1))
    assert _step._cache_size() == before


def test_same_step_as_fit():
    """``train`` runs ``core.fit``'s step: with a key-free loss and the same batches, the same
    losses and parameters as ``fit``'s scan."""
    from jaxpapers.core.fit import fit

    loss_fn, params, batch_fn = _problem()
    opt = optax.adam(0.1)
    a = train(loss_fn, params, opt, batch_fn, steps=15, key=jax.random.key(0))
    batches = jax.tree.map(lambda *x: np.stack(x), *[batch_fn(i) for i in range(15)])
    b = fit(loss_fn, params, opt, steps=15, key=jax.random.key(0), batches=batches)
    assert a.finite and bool(b.finite)
    np.testing.assert_allclose(a.losses, np.asarray(b.losses), rtol=1e-6)
    np.testing.assert_allclose(a.params["w"], b.params["w"], rtol=1e-6)


def test_non_finite_loss_freezes_like_fit(tmp_path):
    """A non-finite loss at step 5 is not applied: the parameters stay those after step 4 for
    the rest of the run, ``finite`` is False, and a resumed run stays frozen."""
    loss_fn, params, batch_fn = _problem()

    def poisoned(step):
        batch = batch_fn(step)
        return {**batch, "y": batch["y"] * (np.nan if step == 5 else 1.0)}

    opt = optax.sgd(0.05)
    ref = train(loss_fn, params, opt, batch_fn, steps=5, key=jax.random.key(0))
    res = train(loss_fn, params, opt, poisoned, steps=12, key=jax.random.key(0))
    assert ref.finite and not res.finite
    np.testing.assert_array_equal(res.params["w"], ref.params["w"])
    np.testing.assert_array_equal(res.losses[:5], ref.losses)
    assert np.isnan(res.losses[5])
    part = train(
        loss_fn,
        params,
        opt,
        poisoned,
        steps=12,
        key=jax.random.key(0),
        checkpoint_dir=tmp_path,
        checkpoint_every=4,
        stop_after=8,
    )
    assert not part.finite
    rest = train(
        loss_fn, params, opt, batch_fn, steps=12, key=jax.random.key(0), checkpoint_dir=tmp_path
    )
    assert rest.resumed_from == 8 and not rest.finite
    np.testing.assert_array_equal(rest.params["w"], ref.params["w"])


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
