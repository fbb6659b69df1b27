"""A worker of tests/test_distributed.py: one process of a 2-process ``jax.distributed`` run on
localhost ("run"), or the single-process reference with the same 4 devices ("single").

    python tests/distributed_worker.py run PID PORT CKPT_DIR FAIL_AT
    python tests/distributed_worker.py single CKPT_DIR RESUME_DIR

Prints one line ``RESULT<json>``. Nothing runs on import (the suite collects doctests here).
"""

from __future__ import annotations

import json
import os
import sys

STEPS, CHECKPOINT_EVERY, GLOBAL_BATCH, FEATURES = 6, 3, 8, 3


def _data():
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.normal(size=(3 * STEPS * GLOBAL_BATCH, FEATURES)).astype(np.float32)
    y = x @ np.asarray([1.0, -2.0, 0.5], np.float32) + 0.1 * rng.normal(size=len(x)).astype(
        np.float32
    )
    fx0 = rng.normal(size=(16, 16)).astype(np.float32)
    fx1 = (rng.normal(size=(16, 16)) + 1.0).astype(np.float32)
    return x, y, fx0, fx1


def _problem():
    import jax.numpy as jnp
    import optax

    def loss(p, b, k):
        del k
        return jnp.mean((b["x"] @ p["w"] + p["b"] - b["y"]) ** 2)

    params = {"w": jnp.zeros(FEATURES), "b": jnp.zeros(())}
    return loss, params, optax.adam(0.1)


def _global_batch(x, y, i):
    rows = slice(i * GLOBAL_BATCH, (i + 1) * GLOBAL_BATCH)
    return {"x": x[rows], "y": y[rows]}


def run(pid: int, port: int, ckpt: str, fail_at: int) -> dict:
    from jaxpapers.core import distributed

    address = f"127.0.0.1:{port}"
    distributed.initialize(address, 2, pid, bind_address=address, heartbeat_timeout=10)

    import jax
    import numpy as np
    from jax.experimental import multihost_utils

    import jaxpapers.kffm as K
    from jaxpapers.core.train import data_parallel_mesh, train

    mesh = data_parallel_mesh()
    x, y, fx0, fx1 = _data()
    half = GLOBAL_BATCH // 2
    fed = []

    def batch_fn(i):
        if i == fail_at and pid == 1:
            os._exit(3)  # a crash: no clean shutdown
        fed.append(i)
        full = _global_batch(x, y, i)
        return {k: v[pid * half : (pid + 1) * half] for k, v in full.items()}

    loss, params, opt = _problem()
    res = train(
        loss,
        params,
        opt,
        batch_fn,
        steps=STEPS,
        key=jax.random.key(0),
        mesh=mesh,
        checkpoint_dir=ckpt,
        checkpoint_every=CHECKPOINT_EVERY,
    )
    # Global pairing over the batch sharded across both processes, and local pairing.
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
    local = slice(pid * 8, (pid + 1) * 8)
    g0 = jax.make_array_from_process_local_data(sharding, fx0[local])
    g1 = jax.make_array_from_process_local_data(sharding, fx1[local])
    shards_local = all(
        np.array_equal(np.asarray(s.data), fx0[s.index]) and s.index[0].start // 8 == pid
        for s in g0.addressable_shards
    )
    pairing = K.EuclideanOTPairing()
    glob = jax.jit(lambda a, b, k: K.make_pairing_fn(pairing)(a, b, key=k))(
        g0, g1, jax.random.key(2)
    )
    loc_fn = K.make_pairing_fn(pairing, scope="local", mesh=mesh)
    loc = jax.jit(lambda a, b, k: loc_fn(a, b, key=k))(g0, g1, jax.random.key(2))
    gather = lambda a: np.asarray(multihost_utils.process_allgather(a, tiled=True))
    out = {
        "pid": pid,
        "devices": len(jax.devices()),
        "local_devices": len(jax.local_devices()),
        "fed_steps": fed,
        "losses": res.losses.tolist(),
        "w": np.asarray(res.params["w"]).tolist(),
        "b": float(res.params["b"]),
        "shards_local": bool(shards_local),
        "global_coupling": gather(glob.coupling).tolist(),
        "global_indices": gather(glob.indices).tolist(),
        "local_indices": gather(loc.indices).tolist(),
    }
    jax.distributed.shutdown()
    return out


def single(ckpt: str, resume_dir: str) -> dict:
    import jax
    import numpy as np

    import jaxpapers.kffm as K
    from jaxpapers.core.train import data_parallel_mesh, train

    mesh = data_parallel_mesh()
    x, y, fx0, fx1 = _data()
    loss, params, opt = _problem()
    batch_fn = lambda i: _global_batch(x, y, i)
    key = jax.random.key(0)
    fresh = train(loss, params, opt, batch_fn, steps=STEPS + 3, key=key, mesh=mesh)
    resumed = train(
        loss, params, opt, batch_fn, steps=STEPS + 3, key=key, mesh=mesh, checkpoint_dir=ckpt
    )
    after_fault = None
    if resume_dir != "-":
        after_fault = train(
            loss, params, opt, batch_fn, steps=STEPS, key=key, mesh=mesh, checkpoint_dir=resume_dir
        )
    one = K.EuclideanOTPairing()(fx0, fx1, key=jax.random.key(2))
    return {
        "devices": len(jax.devices()),
        "fresh_losses": fresh.losses.tolist(),
        "fresh_w": np.asarray(fresh.params["w"]).tolist(),
        "resumed_losses": resumed.losses.tolist(),
        "resumed_from": resumed.resumed_from,
        "resumed_w": np.asarray(resumed.params["w"]).tolist(),
        "after_fault_from": None if after_fault is None else after_fault.resumed_from,
        "after_fault_losses": None if after_fault is None else after_fault.losses.tolist(),
        "coupling": np.asarray(one.coupling).tolist(),
        "indices": np.asarray(one.indices).tolist(),
    }


def main(argv: list[str]) -> None:
    if argv[0] == "run":
        out = run(int(argv[1]), int(argv[2]), argv[3], int(argv[4]))
    else:
        out = single(argv[1], argv[2])
    print("RESULT" + json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
