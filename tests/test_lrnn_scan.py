"""Every scan order of every recurrence against float64 NumPy loops: values and gradients."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers.lrnn import block_scan, companion_matrices, companion_scan, diagonal_scan
from jaxpapers.lrnn._scan import resolve_mode

MODES = ("sequential", "associative", "chunked")


def np_block_loop(a, b, h0):
    """h_t = A_t h_{t-1} + b_t, a [B, T, G, n, n], b [B, T, G, n]."""
    h, out = h0.copy(), np.zeros_like(b)
    for t in range(b.shape[1]):
        h = np.einsum("bgij,bgj->bgi", a[:, t], h) + b[:, t]
        out[:, t] = h
    return out


def np_block_grads(a, b, h0, c):
    """Adjoint of L = sum_t <c_t, h_t>: (dL/dA, dL/db, dL/dh0)."""
    hs = np_block_loop(a, b, h0)
    prev = np.concatenate([h0[:, None], hs[:, :-1]], axis=1)
    lam = np.zeros_like(b)
    nxt = np.zeros_like(b[:, 0])
    for t in reversed(range(b.shape[1])):
        lam[:, t] = c[:, t] + nxt
        nxt = np.einsum("bgji,bgj->bgi", a[:, t], lam[:, t])
    da = np.einsum("btgi,btgj->btgij", lam, prev)
    return da, lam, nxt


def np_companion_loop(a, b, w0):
    """h_t = sum_k a_{t,k} h_{t-k} + b_t; a [B, T, N, K], w0 [B, N, K] = (h_0, h_{-1}, ...)."""
    w, out = w0.copy(), np.zeros_like(b)
    for t in range(b.shape[1]):
        h = np.sum(a[:, t] * w, axis=-1) + b[:, t]
        w = np.concatenate([h[..., None], w[..., :-1]], axis=-1)
        out[:, t] = h
    return out


def np_companion_grads(a, b, w0, c):
    """Adjoint of L = sum_t <c_t, h_t>: g_t = c_t + sum_k a_{t+k,k} g_{t+k}."""
    t_len, k_ord = b.shape[1], a.shape[-1]
    hs = np_companion_loop(a, b, w0)
    full = np.concatenate([np.flip(w0, axis=-1).transpose(0, 2, 1), hs], axis=1)  # h_{1-K}..h_T
    g = np.zeros_like(b)
    for t in reversed(range(t_len)):
        g[:, t] = c[:, t]
        for k in range(1, k_ord + 1):
            if t + k < t_len:
                g[:, t] += a[:, t + k, :, k - 1] * g[:, t + k]
    da = np.zeros_like(a)
    for k in range(1, k_ord + 1):
        # h_{t-k} sits at index (t - k) + K of `full` for 0-based t.
        da[..., k - 1] = g * full[:, k_ord - k : k_ord - k + t_len]
    return da, g


@pytest.mark.parametrize("mode", MODES)
def test_block_scan_matches_numpy_values_and_grads(mode, rng, x64):
    bsz, t, g, n = 2, 21, 2, 3
    a = rng.normal(size=(bsz, t, g, n, n)) * 0.4
    b = rng.normal(size=(bsz, t, g, n))
    h0 = rng.normal(size=(bsz, g, n))
    c = rng.normal(size=(bsz, t, g, n))

    def loss(a_, b_, h0_):
        out = block_scan(a_, b_, h0_, mode=mode, chunk=8)
        return jnp.sum(out * c), out

    (_, out), (da, db, dh0) = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True))(
        jnp.asarray(a), jnp.asarray(b), jnp.asarray(h0)
    )
    np.testing.assert_allclose(out, np_block_loop(a, b, h0), rtol=1e-10, atol=1e-10)
    ra, rb, rh0 = np_block_grads(a, b, h0, c)
    np.testing.assert_allclose(da, ra, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(db, rb, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(dh0, rh0, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("order", [1, 3])
def test_companion_scan_matches_numpy_values_and_grads(mode, order, rng, x64):
    bsz, t, n = 2, 19, 3
    a = rng.normal(size=(bsz, t, n, order)) * 0.35
    b = rng.normal(size=(bsz, t, n))
    w0 = rng.normal(size=(bsz, n, order))
    c = rng.normal(size=(bsz, t, n))

    def loss(a_, b_):
        out = companion_scan(a_, b_, jnp.asarray(w0), mode=mode, chunk=6)
        return jnp.sum(out * c), out

    (_, out), (da, db) = jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))(
        jnp.asarray(a), jnp.asarray(b)
    )
    np.testing.assert_allclose(out, np_companion_loop(a, b, w0), rtol=1e-10, atol=1e-10)
    ra, rb = np_companion_grads(a, b, w0, c)
    np.testing.assert_allclose(da, ra, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(db, rb, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("mode", MODES)
def test_diagonal_scan_complex_matches_numpy(mode, rng, x64):
    bsz, t, n = 2, 23, 3
    a = rng.normal(size=(bsz, t, n)) + 1j * rng.normal(size=(bsz, t, n))
    a *= rng.uniform(0.5, 1.0, size=a.shape) / np.abs(a)
    b = rng.normal(size=(bsz, t, n)) + 1j * rng.normal(size=(bsz, t, n))
    h0 = rng.normal(size=(bsz, n)) + 1j * rng.normal(size=(bsz, n))
    ref, h = np.zeros_like(b), h0.copy()
    for i in range(t):
        h = a[:, i] * h + b[:, i]
        ref[:, i] = h
    scan = jax.jit(lambda x, y, z: diagonal_scan(x, y, z, mode=mode, chunk=7))
    out = scan(jnp.asarray(a), jnp.asarray(b), jnp.asarray(h0))
    np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("mode", MODES)
def test_diagonal_scan_real_grads_match_adjoint(mode, rng, x64):
    bsz, t, n = 2, 17, 3
    a = rng.uniform(-1, 1, size=(bsz, t, n))
    b = rng.normal(size=(bsz, t, n))
    c = rng.normal(size=(bsz, t, n))
    # A diagonal recurrence is a block recurrence with 1 x 1 blocks: reuse that adjoint.
    ra, rb, _ = np_block_grads(
        a[..., None, None], b[..., None], np.zeros((bsz, n, 1)), c[..., None]
    )
    grad = jax.jit(
        jax.grad(
            lambda a_, b_: jnp.sum(diagonal_scan(a_, b_, mode=mode, chunk=5) * c), argnums=(0, 1)
        )
    )
    da, db = grad(jnp.asarray(a), jnp.asarray(b))
    np.testing.assert_allclose(da, ra[..., 0, 0], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(db, rb[..., 0], rtol=1e-9, atol=1e-9)


def test_scans_jit_and_vmap_agree_with_batched_call(rng):
    a = jnp.asarray(rng.normal(size=(3, 12, 2, 2, 2)) * 0.3, jnp.float32)
    b = jnp.asarray(rng.normal(size=(3, 12, 2, 2)), jnp.float32)
    batched = jax.jit(lambda x, y: block_scan(x, y, mode="associative"))(a, b)
    vmapped = jax.jit(jax.vmap(lambda x, y: block_scan(x, y, mode="chunked", chunk=6)))(a, b)
    np.testing.assert_allclose(vmapped, batched, rtol=1e-5, atol=1e-5)


def test_companion_matrices_shift_structure():
    a = jnp.array([[0.5, -0.25, 0.125]])
    m = companion_matrices(a)[0]
    np.testing.assert_array_equal(m, [[0.5, -0.25, 0.125], [1, 0, 0], [0, 1, 0]])


def test_auto_mode_is_sequential_on_cpu():
    expected = "sequential" if jax.default_backend() == "cpu" else "associative"
    assert resolve_mode("auto") == expected
    assert resolve_mode("chunked") == "chunked"


def test_scan_bad_inputs_raise():
    a = jnp.ones((5, 3))
    with pytest.raises(ValueError, match="b has shape"):
        diagonal_scan(a, jnp.ones((5, 4)))
    with pytest.raises(ValueError, match="mode="):
        diagonal_scan(a, a, mode="fast")
    with pytest.raises(ValueError, match="chunk="):
        diagonal_scan(a, a, mode="chunked", chunk=0)
    with pytest.raises(ValueError, match="h0 has shape"):
        diagonal_scan(a, a, jnp.ones((4,)))
    with pytest.raises(ValueError, match=r"a \[\.\.\., T, G, n, n\]"):
        block_scan(jnp.ones((5, 2, 3, 4)), jnp.ones((5, 2, 3)))
    with pytest.raises(ValueError, match="K >= 1"):
        companion_scan(jnp.ones((5, 3, 2)), jnp.ones((5, 4)))


def test_eager_calls_compile_once(rng):
    """The public scans are compiled inside: a second eager call with new values (same shapes)
    reuses the executable instead of re-tracing every op of the associative scan."""
    from jaxpapers.lrnn import _scan

    a = jnp.asarray(rng.uniform(0.5, 0.9, size=(2, 16, 4)), jnp.float32)
    b = jnp.asarray(rng.normal(size=(2, 16, 4)), jnp.float32)
    first = diagonal_scan(a, b, mode="associative")
    before = _scan._run._cache_size()
    second = diagonal_scan(a * 0.5, b, mode="associative")
    assert _scan._run._cache_size() == before
    ref = diagonal_scan(a * 0.5, b, mode="sequential")
    np.testing.assert_allclose(np.asarray(second), np.asarray(ref), rtol=1e-5, atol=1e-6)
    assert not np.allclose(np.asarray(first), np.asarray(second))
