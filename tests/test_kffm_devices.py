"""Data-parallel pairing on 4 forced host devices (in a subprocess): global pairing equals the
single-device solve; local pairing pairs within each device's shard; both train."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import json
    import jax, jax.numpy as jnp, numpy as np, optax
    from jax.sharding import NamedSharding, PartitionSpec as P
    import jaxpapers.kffm as K
    from jaxpapers.kffm import gaussian_process_prior
    from jaxpapers.core.train import data_parallel_mesh, train

    mesh = data_parallel_mesh()
    prior = gaussian_process_prior(jnp.linspace(0, 1, 16), lengthscale=0.2)
    x0 = prior.sample(16, key=jax.random.key(0))
    x1 = prior.sample(16, key=jax.random.key(1)) + 1.0
    key = jax.random.key(2)
    pairing = K.KernelOTPairing(K.RBFKernel(bandwidth=1.0))
    sh = NamedSharding(mesh, P("data"))
    x0s, x1s = jax.device_put(x0, sh), jax.device_put(x1, sh)
    out = {"devices": len(jax.devices())}
    glob_fn = K.make_pairing_fn(pairing, scope="global")
    loc_fn = K.make_pairing_fn(pairing, scope="local", mesh=mesh)
    glob = jax.jit(lambda a, b, k: glob_fn(a, b, key=k))(x0s, x1s, key)
    single = pairing(x0, x1, key=key)
    out["global_coupling_err"] = float(jnp.max(jnp.abs(glob.coupling - single.coupling)))
    out["global_pairs_equal"] = bool(jnp.all(glob.x1 == single.x1))
    loc = jax.jit(lambda a, b, k: loc_fn(a, b, key=k))(x0s, x1s, key)
    out["local_coupling_shape"] = list(loc.coupling.shape)
    out["local_row_sums"] = np.asarray(loc.coupling.sum(1)).tolist()
    out["local_n_iters"] = np.asarray(loc.n_iters).tolist()
    # Each pair's data function comes from the same device shard as its prior draw.
    x1n, pairs = np.asarray(x1), np.asarray(loc.x1)
    src = [int(np.argmin(np.abs(x1n - pairs[i]).max(1))) for i in range(16)]
    out["local_same_shard"] = all(s // 4 == i // 4 for i, s in enumerate(src))

    # A pointwise linear field keeps the compile small; the pairing is what is under test.
    params = {"w": jnp.ones(()), "b": jnp.zeros(())}
    apply = lambda p, x, t: p["w"] * x + p["b"] * t[:, None]
    data = np.asarray(x1)
    for name, fn in (("global", glob_fn), ("local", loc_fn)):
        loss = lambda p, b, k, fn=fn: K.flow_matching_loss(apply, p, b, key=k, prior=prior,
                                                           pairing=fn)
        res = train(loss, params, optax.adam(1e-3), lambda i: data, steps=2,
                    key=jax.random.key(3), mesh=mesh)
        out[f"{name}_losses"] = res.losses.tolist()
    print("RESULT" + json.dumps(out))
    """
)


def test_global_and_local_pairing_on_forced_host_devices():
    # The subprocess inherits the suite's fast-compile XLA flags (conftest) and adds 4 devices.
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4"
    env = dict(os.environ, XLA_FLAGS=flags.strip(), JAX_PLATFORMS="cpu")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=1800
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))
    out = json.loads(line[len("RESULT") :])
    assert out["devices"] == 4
    # The 4-device solve reduces in another order; log-domain Sinkhorn turns float32 rounding of
    # the potentials into relative errors of about eps_f32 * |f| / epsilon ~ 1e-5 on the coupling,
    # whose entries are at most 1/16: compare at 1e-4 of that scale (measured: up to 1.1e-6).
    assert out["global_coupling_err"] < 1e-4 / 16, out["global_coupling_err"]
    assert out["global_pairs_equal"]
    assert out["local_coupling_shape"] == [16, 4]
    assert all(abs(s - 0.25) < 1e-3 for s in out["local_row_sums"])
    assert len(out["local_n_iters"]) == 4 and min(out["local_n_iters"]) > 0
    assert out["local_same_shard"]
    for name in ("global", "local"):
        losses = out[f"{name}_losses"]
        assert len(losses) == 2 and all(0 < v < 100 for v in losses)
