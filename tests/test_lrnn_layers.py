"""Gate-normalised recurrences, layers and models: NumPy references, stability, bad input."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxpapers.lrnn import (
    BDLRU,
    HLRU,
    LRU,
    SequenceModel,
    bdlru_recurrence,
    block_scan,
    hlru_recurrence,
    l1_normalise,
    lru_lambda,
    lru_recurrence,
)
from jaxpapers.lrnn._models import parse_mixer

MODES = ("sequential", "associative", "chunked")


def np_l1(g):
    return g / np.maximum(np.abs(g).sum(axis=-1, keepdims=True), 1.0)


def np_hlru(gates, values):
    """float64 loop: h_t = sum_k alpha_k h_{t-k} + alpha_0 v_t, gates [T, N, K+1]."""
    t_len, n, k1 = gates.shape
    alpha = np_l1(gates)
    hist = np.zeros((k1 - 1, n))  # hist[k] = h_{t-1-k}
    out = np.zeros((t_len, n))
    for t in range(t_len):
        h = np.sum(alpha[t, :, :-1].T * hist, axis=0) + alpha[t, :, -1] * values[t]
        hist = np.concatenate([h[None], hist[:-1]], axis=0)
        out[t] = h
    return out


def np_bdlru(gates, values):
    """float64 loop over blocks: gates [T, G, n, n+1], values [T, G*n]."""
    t_len, g, n, _ = gates.shape
    alpha = np_l1(gates)
    h = np.zeros((g, n))
    out = np.zeros((t_len, g * n))
    for t in range(t_len):
        v = values[t].reshape(g, n)
        h = np.einsum("gij,gj->gi", alpha[t, :, :, :-1], h) + alpha[t, :, :, -1] * v
        out[t] = h.reshape(-1)
    return out


def np_lru(nu_log, theta_log, u):
    lam = np.exp(-np.exp(nu_log) + 1j * np.exp(theta_log))
    h = np.zeros(u.shape[-1], complex)
    out = np.zeros_like(u)
    for t in range(u.shape[0]):
        h = lam * h + u[t]
        out[t] = h
    return out


def fd_grad(f, x, idx, eps=1e-6):
    """Central finite differences of a float64 NumPy function at the flat indices ``idx``."""
    out = []
    for i in idx:
        xp, xm = x.copy(), x.copy()
        xp.flat[i] += eps
        xm.flat[i] -= eps
        out.append((f(xp) - f(xm)) / (2 * eps))
    return np.array(out)


def test_l1_normalise_scales_only_rows_outside_the_ball(rng):
    g = np.concatenate([rng.normal(size=(3, 4)) * 0.05, rng.normal(size=(3, 4)) * 5.0])
    out = np.asarray(l1_normalise(jnp.asarray(g)))
    np.testing.assert_allclose(out[:3], g[:3], rtol=1e-6)
    np.testing.assert_allclose(np.abs(out[3:]).sum(-1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(out, np_l1(g), rtol=1e-6)


@pytest.mark.parametrize("order", [1, 3])
def test_hlru_recurrence_all_modes_match_numpy_values_and_grads(order, rng, x64):
    t_len, n = 19, 3
    gates = rng.normal(size=(t_len, n, order + 1))
    values = rng.normal(size=(t_len, n))
    c = rng.normal(size=(t_len, n))

    @jax.jit
    def run(g, v):
        outs = [hlru_recurrence(g, v, mode=m, chunk=5) for m in MODES]
        grads = [
            jax.grad(lambda g_, m=m: jnp.sum(hlru_recurrence(g_, v, mode=m, chunk=5) * c))(g)
            for m in MODES
        ]
        return outs, grads

    outs, grads = run(jnp.asarray(gates), jnp.asarray(values))
    ref = np_hlru(gates, values)
    for out in outs:
        np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-10)
    idx = rng.choice(gates.size, size=8, replace=False)
    fd = fd_grad(lambda g: np.sum(np_hlru(g, values) * c), gates, idx)
    for grad in grads:
        np.testing.assert_allclose(np.asarray(grad).flat[idx], fd, rtol=1e-5, atol=1e-6)


def test_bdlru_recurrence_all_modes_match_numpy_values_and_grads(rng, x64):
    t_len, g, n = 17, 2, 3
    gates = rng.normal(size=(t_len, g, n, n + 1))
    values = rng.normal(size=(t_len, g * n))
    c = rng.normal(size=(t_len, g * n))

    @jax.jit
    def run(gt, v):
        outs = [bdlru_recurrence(gt, v, mode=m, chunk=4) for m in MODES]
        grads = [
            jax.grad(lambda g_, m=m: jnp.sum(bdlru_recurrence(g_, v, mode=m, chunk=4) * c))(gt)
            for m in MODES
        ]
        return outs, grads

    outs, grads = run(jnp.asarray(gates), jnp.asarray(values))
    ref = np_bdlru(gates, values)
    for out in outs:
        np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-10)
    idx = rng.choice(gates.size, size=8, replace=False)
    fd = fd_grad(lambda gt: np.sum(np_bdlru(gt, values) * c), gates, idx)
    for grad in grads:
        np.testing.assert_allclose(np.asarray(grad).flat[idx], fd, rtol=1e-5, atol=1e-6)


def test_lru_recurrence_matches_numpy_values_and_eigenvalue_grads(rng, x64):
    t_len, n = 23, 4
    nu_log = np.log(-np.log(rng.uniform(0.8, 0.99, size=n)))
    theta_log = np.log(rng.uniform(0.1, 3.0, size=n))
    u = rng.normal(size=(t_len, n)) + 1j * rng.normal(size=(t_len, n))
    c = rng.normal(size=(t_len, n))

    @jax.jit
    def run(nu, th):
        outs = [lru_recurrence(nu, th, jnp.asarray(u), mode=m, chunk=6) for m in MODES]
        grads = [
            jax.grad(
                lambda a, b, m=m: jnp.sum(
                    lru_recurrence(a, b, jnp.asarray(u), mode=m, chunk=6).real * c
                ),
                argnums=(0, 1),
            )(nu, th)
            for m in MODES
        ]
        return outs, grads

    outs, grads = run(jnp.asarray(nu_log), jnp.asarray(theta_log))
    for out in outs:
        np.testing.assert_allclose(out, np_lru(nu_log, theta_log, u), rtol=1e-10, atol=1e-10)
    idx = np.arange(n)
    fd_nu = fd_grad(lambda x: np.sum(np_lru(x, theta_log, u).real * c), nu_log, idx)
    fd_th = fd_grad(lambda x: np.sum(np_lru(nu_log, x, u).real * c), theta_log, idx)
    for g_nu, g_th in grads:
        np.testing.assert_allclose(g_nu, fd_nu, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(g_th, fd_th, rtol=1e-5, atol=1e-6)


def test_normalised_state_stays_bounded_for_1e4_steps_of_adversarial_input(rng):
    """||h||_inf <= max ||v||_inf for any gates; raw (unnormalised) gates overflow instead."""
    t_len = 10_000
    # Adversarial: large random gates (far outside the L1 ball), plus a stretch where every
    # gate is +big and every value +1, which pushes the state to its largest possible value.
    h_gates = rng.normal(size=(t_len, 4, 5)).astype(np.float32) * 10.0
    h_gates[:2000] = 50.0
    b_gates = rng.normal(size=(t_len, 2, 8, 9)).astype(np.float32) * 10.0
    b_gates[:2000] = 50.0
    values = rng.uniform(-1, 1, size=(t_len, 16)).astype(np.float32)
    values[:2000] = 1.0

    @jax.jit
    def run(hg, bg, v):
        return (
            hlru_recurrence(hg, v[:, :4], mode="sequential"),
            bdlru_recurrence(bg, v, mode="sequential"),
            bdlru_recurrence(bg, v, mode="chunked", chunk=256),
            block_scan(bg[..., :-1], bg[..., -1] * v.reshape(t_len, 2, 8), mode="sequential"),
        )

    hl, bd, bd_chunked, raw = run(h_gates, b_gates, values)
    for h in (hl, bd, bd_chunked):
        assert np.all(np.isfinite(h))
        assert float(jnp.max(jnp.abs(h))) <= 1.0 + 1e-4
    assert float(jnp.max(jnp.abs(bd[:2000]))) > 0.99  # the bound is reached, not trivially met
    raw = np.asarray(raw)
    assert not np.all(np.isfinite(raw)) or np.max(np.abs(raw)) > 1e30


def _layer(kind: str, mode: str, debug: bool = False):
    rngs = nnx.Rngs(3)
    if kind == "lru":
        return LRU(6, 5, mode=mode, chunk=4, debug=debug, rngs=rngs)
    if kind == "hlru":
        return HLRU(6, 5, 3, mode=mode, chunk=4, debug=debug, rngs=rngs)
    return BDLRU(6, 8, 4, mode=mode, chunk=4, debug=debug, rngs=rngs)


@pytest.mark.parametrize("kind", ["lru", "hlru", "bdlru"])
def test_layer_modes_agree_under_jit_vmap_and_grad(kind, rng):
    x = jnp.asarray(rng.normal(size=(3, 13, 6)), jnp.float32)
    layers = [_layer(kind, m) for m in MODES]
    graphdef = [nnx.split(layer, nnx.Param)[0] for layer in layers]
    params = nnx.split(layers[0], nnx.Param)[1]

    @jax.jit
    def run(p, x):
        outs, grads, vmapped = [], [], []
        for gd in graphdef:
            f = lambda p_, x_, gd=gd: nnx.merge(gd, p_)(x_)
            outs.append(f(p, x))
            grads.append(jax.grad(lambda p_, f=f: jnp.sum(f(p_, x) ** 2))(p))
            vmapped.append(jax.vmap(f, in_axes=(None, 0))(p, x))
        return outs, grads, vmapped

    outs, grads, vmapped = run(params, x)
    for out, vm in zip(outs, vmapped, strict=True):
        np.testing.assert_allclose(out, outs[0], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(vm, outs[0], rtol=1e-4, atol=1e-4)
    leaves0 = jax.tree.leaves(grads[0])
    assert any(float(jnp.max(jnp.abs(g))) > 0 for g in leaves0)
    for g in grads[1:]:
        for a, b in zip(jax.tree.leaves(g), leaves0, strict=True):
            np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-4)


def test_lru_ring_initialisation():
    layer = LRU(4, 256, r_min=0.4, r_max=0.9, max_phase=math.pi / 4, rngs=nnx.Rngs(0))
    lam = np.asarray(lru_lambda(layer.nu_log[...], layer.theta_log[...]))
    assert np.all(np.abs(lam) >= 0.4 - 1e-5) and np.all(np.abs(lam) <= 0.9 + 1e-5)
    assert np.all(np.angle(lam) >= 0) and np.all(np.angle(lam) <= math.pi / 4 + 1e-5)
    np.testing.assert_allclose(
        np.exp(layer.gamma_log[...]), np.sqrt(1 - np.abs(lam) ** 2), rtol=1e-4
    )


def test_sequence_model_output_and_param_grads(rng):
    model = SequenceModel(7, 3, mixer="bdlru2", d_model=8, d_state=4, rngs=nnx.Rngs(0))
    tokens = jnp.asarray(rng.integers(7, size=(2, 9)), jnp.int32)
    graphdef, params = nnx.split(model, nnx.Param)

    @jax.jit
    def run(p, tok):
        f = lambda p_, t_: nnx.merge(graphdef, p_)(t_)
        changed = tok.at[:, -1].set((tok[:, -1] + 1) % 7)
        grads = jax.grad(lambda p_: jnp.sum(f(p_, tok) ** 2))(p)
        return f(p, tok), f(p, changed), grads

    logits, logits2, grads = run(params, tokens)
    assert logits.shape == (2, 9, 3)
    # Causality: changing the last token leaves every earlier output unchanged.
    np.testing.assert_allclose(logits2[:, :-1], logits[:, :-1], rtol=1e-6, atol=1e-6)
    assert float(jnp.max(jnp.abs(logits2[:, -1] - logits[:, -1]))) > 0
    assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))
    assert any(float(jnp.max(jnp.abs(g))) > 0 for g in jax.tree.leaves(grads))


def test_bad_inputs_raise_clear_errors(rng):
    layer = _layer("hlru", "sequential")
    with pytest.raises(ValueError, match=r"x has shape \(6,\)"):
        layer(jnp.ones((6,)))
    with pytest.raises(ValueError, match=r"x has shape \(4, 7\).*\[\.\.\., T, 6\]"):
        layer(jnp.ones((4, 7)))
    with pytest.raises(ValueError, match="order=0"):
        HLRU(6, 5, 0, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="block=3 must be a positive divisor of d_state=8"):
        BDLRU(6, 8, 3, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="mode="):
        LRU(6, 5, mode="parallel", rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="r_min"):
        LRU(6, 5, r_min=0.9, r_max=0.5, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="mixer='gru'"):
        parse_mixer("gru")
    x = np.asarray(rng.normal(size=(5, 6)), np.float32)
    x[2, 3] = np.nan
    for kind in ("lru", "hlru", "bdlru"):
        with pytest.raises(ValueError, match=r"x of shape \(5, 6\) holds 1 non-finite"):
            _layer(kind, "sequential", debug=True)(jnp.asarray(x))
    dbg = _layer("bdlru", "sequential", debug=True)
    with pytest.raises(ValueError, match="debug=True"):
        jax.jit(lambda v: dbg(v))(jnp.ones((5, 6)))
    with pytest.raises(ValueError, match="gates has shape"):
        hlru_recurrence(jnp.ones((5, 3, 1)), jnp.ones((5, 3)))
    with pytest.raises(ValueError, match="values has shape"):
        bdlru_recurrence(jnp.ones((5, 2, 3, 4)), jnp.ones((5, 5)))
    model = SequenceModel(7, 3, mixer="lru", d_model=6, d_state=4, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="integer tokens"):
        model(jnp.ones((2, 5)))
