"""jaxpapers.lqzo: quantization, quantized layers, ZO estimators, optax composition."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from jaxpapers.lqzo import (
    QuantizedLinear,
    QuantScale,
    ZOState,
    dequantize,
    estimate_to_gradient,
    lqzo,
    make_config,
    matrix_view_shape,
    mezo,
    near_square_shape,
    perturbation_tree,
    quantize,
    quantize_linears,
    qzo,
    zo_estimate,
    zo_gradient,
    zo_state,
)
from jaxpapers.lqzo._zo import step_seeds

# ---- quantization ---------------------------------------------------------------------------


def np_quantize(w: np.ndarray, bits: int, g: int, symmetric: bool):
    """Independent float64 NumPy quantizer (same grid definition)."""
    k_in, n = w.shape
    out = np.empty_like(w)
    codes = np.empty(w.shape, np.int64)
    qmax = 2**bits - 1
    for gi in range(k_in // g):
        blk = w[gi * g : (gi + 1) * g]
        for j in range(n):
            col = blk[:, j]
            if symmetric:
                s = max(np.abs(col).max() / max(2 ** (bits - 1) - 1, 1), 1e-8)
                z = 2 ** (bits - 1)
            else:
                lo, hi = min(col.min(), 0.0), max(col.max(), 0.0)
                s = max((hi - lo) / qmax, 1e-8)
                z = np.clip(np.round(-lo / s), 0, qmax)
            q = np.clip(np.round(col / s) + z, 0, qmax)
            codes[gi * g : (gi + 1) * g, j] = q
            out[gi * g : (gi + 1) * g, j] = s * (q - z)
    return codes, out


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("symmetric", [False, True])
def test_quantize_matches_numpy(bits, symmetric, rng):
    w = rng.normal(size=(64, 12)).astype(np.float32)
    qt = quantize(jnp.asarray(w), bits=bits, group_size=16, symmetric=symmetric)
    _, want = np_quantize(w.astype(np.float64), bits, 16, symmetric)
    got = np.asarray(dequantize(qt))
    # round-half cases may fall either way in float32: allow one grid step on a few entries
    close = np.isclose(got, want, atol=1e-5)
    assert close.mean() > 0.99
    steps = np.asarray(qt.scales).repeat(16, axis=0)
    assert np.all(np.abs(got - want) <= steps * 1.001 + 1e-6)
    assert qt.codes.dtype == jnp.int8 and qt.codes.shape == (64 * bits // 8, 12)
    if not symmetric:  # inside the group's range the error is at most half a step
        assert np.all(np.abs(got - w) <= steps / 2 + 1e-5)


def test_quantize_jit_vmap_grad(rng):
    ws = jnp.asarray(rng.normal(size=(3, 32, 8)), jnp.float32)
    f = jax.jit(lambda w: dequantize(quantize(w, bits=4, group_size=8)))
    batched = jax.vmap(f)(ws)
    np.testing.assert_allclose(np.asarray(batched[1]), np.asarray(f(ws[1])), atol=1e-6)
    qt = quantize(ws[0], bits=4, group_size=8)
    # d/ds sum(c * dequant(s)) = sum over each group of c * (q - z): closed form
    c = jnp.asarray(rng.normal(size=(32, 8)), jnp.float32)
    grad = jax.grad(lambda s: jnp.sum(c * dequantize(qt, s)))(qt.scales)
    q_minus_z = dequantize(qt, jnp.ones_like(qt.scales))
    want = jnp.sum((c * q_minus_z).reshape(4, 8, 8), axis=1)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(want), rtol=1e-5, atol=1e-5)


def test_quantize_bad_input():
    w = jnp.ones((64, 8))
    with pytest.raises(ValueError, match="bits=3"):
        quantize(w, bits=3, group_size=16)
    with pytest.raises(ValueError, match="group_size=24"):
        quantize(w, bits=4, group_size=24)
    with pytest.raises(ValueError, match="w has shape"):
        quantize(jnp.ones((64,)), bits=4, group_size=16)
    qt = quantize(w, bits=4, group_size=16)
    with pytest.raises(ValueError, match="scales has shape"):
        dequantize(qt, jnp.ones((3, 8)))


class _MLP(nnx.Module):
    def __init__(self, rngs):
        self.l1 = nnx.Linear(32, 64, rngs=rngs)
        self.l2 = nnx.Linear(64, 5, rngs=rngs)

    def __call__(self, x):
        return self.l2(jax.nn.relu(self.l1(x)))


def test_quantize_linears_and_kernel_path(rng):
    x = jnp.asarray(rng.normal(size=(7, 32)), jnp.float32)
    ref = _MLP(nnx.Rngs(0))
    y_fp = ref(x)
    model = quantize_linears(nnx.clone(ref), bits=8, group_size=16)
    assert isinstance(model.l1, QuantizedLinear) and isinstance(model.l2, QuantizedLinear)
    # the quantized model equals the float model with dequantized kernels
    w1, w2 = dequantize(model.l1.tensor), dequantize(model.l2.tensor)
    want = jax.nn.relu(x @ w1 + ref.l1.bias[...][None]) @ w2 + ref.l2.bias[...][None]
    np.testing.assert_allclose(np.asarray(model(x)), np.asarray(want), atol=1e-5)
    assert float(jnp.abs(model(x) - y_fp).max()) < 0.05  # INT8 is close to float
    kmodel = quantize_linears(nnx.clone(ref), bits=8, group_size=16, use_kernel=True)
    np.testing.assert_allclose(np.asarray(kmodel(x)), np.asarray(model(x)), atol=1e-4)
    scales = nnx.state(model, QuantScale)
    assert {tuple(v.shape) for v in jax.tree.leaves(scales)} == {(2, 64), (4, 5)}
    with pytest.raises(ValueError, match="group_size=24"):
        quantize_linears(nnx.clone(ref), bits=4, group_size=24)


# ---- isotropy and perturbations ----------------------------------------------------------


def test_near_square_shape():
    assert near_square_shape(6 * 384) == (48, 48)
    assert near_square_shape(24 * 384) == (96, 96)
    assert near_square_shape(13) == (1, 13)
    assert near_square_shape(2 * 1536) == (48, 64)
    assert matrix_view_shape((6, 384), isotropic=False) == (6, 384)
    with pytest.raises(ValueError, match="size=0"):
        near_square_shape(0)


def test_low_rank_perturbation_structure():
    params = {"a": jnp.zeros((6, 384)), "b": jnp.zeros((4, 10))}
    cfg = make_config(rank=3, noise="bag", isotropic=True, nu=5)
    seeds = jnp.asarray([1, 2], jnp.uint32)
    z = perturbation_tree(params, seeds, config=cfg)
    za = np.asarray(z["a"]).reshape(48, 48)
    assert np.linalg.matrix_rank(za) == 3
    # the same seeds regenerate the same z; the natural view is far from rank 3
    np.testing.assert_array_equal(
        np.asarray(perturbation_tree(params, seeds, config=cfg)["a"]), z["a"]
    )
    assert np.linalg.matrix_rank(np.asarray(z["a"])) == 6
    # V is shared within a window of nu steps, U is not
    key = jax.random.key(0)
    s0, s1, s5 = (np.asarray(step_seeds(key, t, 5)) for t in (0, 1, 5))
    assert s0[1] == s1[1] and s0[1] != s5[1] and s0[0] != s1[0]


@pytest.mark.parametrize(
    "cfg",
    [
        dict(rank=0, noise="gaussian"),
        dict(rank=2, noise="bag", isotropic=True),
        dict(rank=2, noise="gaussian", isotropic=False),
        dict(rank=2, noise="rademacher", isotropic=True),
    ],
)
def test_estimator_is_unbiased(cfg, x64):
    """Average of g Z over many seeds (vmap) approaches the true gradient."""
    rng = np.random.default_rng(1)
    a = jnp.asarray(rng.normal(size=(4, 6)))
    theta = {"s": jnp.asarray(rng.normal(size=(4, 6)))}
    loss = lambda p: 0.5 * jnp.sum((p["s"] - a) ** 2)
    config = make_config(eps=1e-3, **cfg)

    def one(seed):
        seeds = jnp.stack([seed, seed + jnp.uint32(7919)]).astype(jnp.uint32)
        est = zo_estimate(loss, theta, seeds, config=config)
        return estimate_to_gradient(est, theta, config=config)["s"]

    n = 20000
    grads = jax.jit(jax.vmap(one))(jnp.arange(n, dtype=jnp.uint32))
    mean = np.asarray(grads.mean(0))
    want = np.asarray(theta["s"] - a)
    err = np.abs(mean - want).max() / np.abs(want).max()
    assert err < 0.12, err


def test_central_difference_is_exact_for_quadratics(x64):
    rng = np.random.default_rng(2)
    h = rng.normal(size=(20, 20))
    h = jnp.asarray(h @ h.T)
    b = jnp.asarray(rng.normal(size=(20,)))
    theta = {"s": jnp.asarray(rng.normal(size=(4, 5)))}
    loss = lambda p: 0.5 * p["s"].reshape(-1) @ h @ p["s"].reshape(-1) + b @ p["s"].reshape(-1)
    cfg = make_config(eps=0.3, rank=2, noise="bag", isotropic=True)
    seeds = jnp.asarray([3, 4], jnp.uint32)
    est = zo_estimate(loss, theta, seeds, config=cfg)
    grad = jax.grad(loss)(theta)["s"]
    z = perturbation_tree(theta, seeds, config=cfg)["s"]
    np.testing.assert_allclose(float(est.projected_grad), float(jnp.sum(grad * z)), rtol=1e-9)
    d = est.direction["s"]
    np.testing.assert_allclose(np.asarray(d.u @ d.v.T / math.sqrt(2)).reshape(4, 5), z)


def test_bag_lowers_estimator_second_moment(x64):
    """E||g Z||^2 of a rank-1 estimator with Rademacher/BAG factors < with Gaussian factors."""
    rng = np.random.default_rng(3)
    grad = jnp.asarray(rng.normal(size=(16, 16)))
    theta = {"s": jnp.zeros((16, 16))}
    loss = lambda p: jnp.sum(grad * p["s"])

    def second_moment(noise):
        config = make_config(eps=1e-2, rank=1, noise=noise, bag_k=1, isotropic=False)

        def one(seed):
            seeds = jnp.stack([seed, seed + jnp.uint32(1)]).astype(jnp.uint32)
            est = zo_estimate(loss, theta, seeds, config=config)
            return jnp.sum(estimate_to_gradient(est, theta, config=config)["s"] ** 2)

        return float(jax.vmap(one)(jnp.arange(0, 40000, 2, dtype=jnp.uint32)).mean())

    gauss, rad = second_moment("gaussian"), second_moment("rademacher")
    g2 = float(jnp.sum(grad**2))
    # rank 1: E||<G,uv^T> uv^T||^2 = E[(u^T G v)^2 |u|^2 |v|^2]; Rademacher: exactly 256 |G|^2
    np.testing.assert_allclose(rad / g2, 256.0, rtol=0.05)
    assert gauss > 1.05 * rad


def test_clipping_bounds_projected_grad():
    theta = {"s": jnp.zeros((8, 8))}
    loss = lambda p: 1e3 * jnp.sum(p["s"])
    cfg = make_config(eps=1e-2, clip=5.0, rank=2, noise="bag", isotropic=True)
    est = zo_estimate(loss, theta, jnp.asarray([1, 2], jnp.uint32), config=cfg)
    assert abs(float(est.projected_grad)) == pytest.approx(5.0)
    assert abs(float(est.raw_projected_grad)) > 5.0


def test_optax_chain_descends_and_jits():
    rng = np.random.default_rng(4)
    a = jnp.asarray(rng.normal(size=(8, 24)), jnp.float32)
    params = {"s": jnp.zeros((8, 24), jnp.float32)}
    loss = lambda p: jnp.sum((p["s"] - a) ** 2)
    sched = optax.linear_schedule(2e-3, 5e-4, 400)
    for opt in (
        optax.chain(
            zo_gradient(
                config=make_config(eps=1e-3, rank=2, nu=10, noise="bag", isotropic=True),
                key=jax.random.key(0),
            ),
            optax.add_decayed_weights(1e-4),
            optax.sgd(sched),
        ),
        mezo(2e-3, key=jax.random.key(1)),
        qzo(2e-3, key=jax.random.key(2)),
        lqzo(2e-3, key=jax.random.key(3), rank=2),
    ):
        state = opt.init(params)

        @jax.jit
        def step(p, s, opt=opt):
            u, s = opt.update(None, s, p, value_fn=loss)
            return optax.apply_updates(p, u), s

        p = params
        for _ in range(400):
            p, state = step(p, state)
        assert isinstance(zo_state(state), ZOState)
        assert int(zo_state(state).count) == 400
        assert float(loss(p)) < 0.5 * float(loss(params))


def test_zo_bad_input():
    with pytest.raises(ValueError, match="eps=0"):
        make_config(eps=0.0)
    with pytest.raises(ValueError, match="eps=-1"):
        lqzo(1e-3, key=jax.random.key(0), eps=-1.0)
    with pytest.raises(ValueError, match="noise="):
        make_config(noise="uniform")
    with pytest.raises(ValueError, match="nu=0"):
        make_config(nu=0)
    opt = lqzo(1e-3, key=jax.random.key(0), rank=7, isotropic=False)
    with pytest.raises(ValueError, match="rank=7 exceeds min"):
        opt.init({"s": jnp.zeros((6, 384))})
    opt = lqzo(1e-3, key=jax.random.key(0), rank=7, isotropic=True)
    assert opt.init({"s": jnp.zeros((6, 384))}) is not None  # 48 x 48 view allows rank 7


def test_dense_z_is_drawn_tensor_by_tensor():
    """MeZO's z of a leaf depends only on the step seed and the leaf's index (Algorithm 1)."""
    cfg = make_config()
    seeds = jnp.asarray([7, 8], jnp.uint32)
    one = perturbation_tree({"a": jnp.zeros((5, 3))}, seeds, config=cfg)
    two = perturbation_tree({"a": jnp.zeros((5, 3)), "b": jnp.zeros((40,))}, seeds, config=cfg)
    np.testing.assert_array_equal(np.asarray(one["a"]), np.asarray(two["a"]))
    # independent float64 reference: Gaussian value of the counter hash of (leaf seed, position)
    from scipy.special import erfinv

    def lowbias32(x):
        x = np.asarray(x, np.uint64) & 0xFFFFFFFF
        x ^= x >> 16
        x = (x * 0x7FEB352D) & 0xFFFFFFFF
        x ^= x >> 15
        x = (x * 0x846CA68B) & 0xFFFFFFFF
        return x ^ (x >> 16)

    def hash_(seed, index):
        base = lowbias32(np.asarray([seed]))[0]
        return lowbias32((np.asarray(index, np.uint64) * 0x9E3779B1 + base) & 0xFFFFFFFF)

    leaf_seed = int(hash_(7, [1])[0])  # leaf_seeds(seeds, 1)[0]
    top = (hash_(leaf_seed, np.arange(40)) >> 8).astype(np.float64)
    want = np.sqrt(2.0) * erfinv((2.0 * top + 1.0) / 2.0**24 - 1.0)
    np.testing.assert_allclose(np.asarray(two["b"]), want, rtol=2e-6, atol=2e-6)
    # 2-D leaves use the row-major flat position
    three = perturbation_tree({"a": jnp.zeros((5, 3)), "b": jnp.zeros((8, 5))}, seeds, config=cfg)
    np.testing.assert_allclose(np.asarray(three["b"]).reshape(-1), want, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("method", ["mezo", "qzo"])
def test_share_direction_matches_regenerated_direction(method):
    """share_direction=True forms Z once per leaf: the same update as regenerating it per use,
    and both equal the two-point formula evaluated in float64 NumPy from ``perturbation_tree``."""
    rng = np.random.default_rng(5)
    a = {"w": jnp.asarray(rng.normal(size=(6, 10)), jnp.float32), "b": jnp.ones((7,))}
    params = {"w": jnp.zeros((6, 10), jnp.float32), "b": jnp.zeros((7,), jnp.float32)}
    loss = lambda p: jnp.sum((p["w"] - a["w"]) ** 2) + jnp.sum(jnp.cos(p["b"] - a["b"]))
    make = {"mezo": mezo, "qzo": qzo}[method]
    lr, eps = 1e-2, 1e-2
    updates = {}
    for share in (False, True):
        opt = make(lr, key=jax.random.key(3), eps=eps, share_direction=share)
        state = opt.init(params)
        step = jax.jit(lambda p, s, opt=opt: opt.update(None, s, p, value_fn=loss)[0])
        updates[share] = jax.tree.map(np.asarray, step(params, state))
    seeds = step_seeds(jax.random.key(3), jnp.int32(0), 1)
    z = {
        k: np.asarray(v, np.float64)
        for k, v in perturbation_tree(params, seeds, config=make_config()).items()
    }
    aw, ab = np.asarray(a["w"], np.float64), np.asarray(a["b"], np.float64)
    np_loss = lambda w, b: np.sum((w - aw) ** 2) + np.sum(np.cos(b - ab))
    g = (np_loss(eps * z["w"], eps * z["b"]) - np_loss(-eps * z["w"], -eps * z["b"])) / (2 * eps)
    for k in ("w", "b"):
        np.testing.assert_allclose(updates[True][k], updates[False][k], rtol=1e-6, atol=1e-7)
        # float32 losses of size ~60 differenced over 2 eps: ~1e-3 relative round-off in g
        np.testing.assert_allclose(updates[True][k], -lr * g * z[k], rtol=2e-3, atol=1e-5)
    with pytest.raises(ValueError, match="share_direction=True"):
        make_config(rank=2, noise="bag", fused=True, share_direction=True)
