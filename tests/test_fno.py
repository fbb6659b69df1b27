"""Fourier Neural Operators: spectral convolutions against a float64 NumPy DFT, resolution
independence, jit/vmap/grad, bad inputs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxpapers.kffm._fno import FNO1d, FNO2d, SpectralConv1d, SpectralConv2d


def _numpy_spectral1d(v, w, modes):
    """Float64 loop: c_k = (1/n) sum_x v(x) e^{-2 pi i k x / n}; out = real inverse with R_k."""
    b, n, _ci = v.shape
    out = np.zeros((b, n, w.shape[-1]))
    xs = np.arange(n)
    for k in range(modes):
        basis = np.exp(-2j * np.pi * k * xs / n)
        coeff = np.einsum("bxi,x->bi", v, basis) / n
        mixed = coeff @ w[k]
        scale = 1.0 if k == 0 or (n % 2 == 0 and k == n // 2) else 2.0
        out += scale * np.real(mixed[:, None, :] * np.conj(basis)[None, :, None])
    return out


def test_spectral_conv1d_matches_numpy_dft(x64, rng):
    conv = SpectralConv1d(3, 2, 5, rngs=nnx.Rngs(0))
    v = rng.normal(size=(2, 16, 3))
    w = np.asarray(conv.weight[0]) + 1j * np.asarray(conv.weight[1])
    got = np.asarray(conv(jnp.asarray(v)))
    np.testing.assert_allclose(got, _numpy_spectral1d(v, w, 5), rtol=1e-5, atol=1e-6)


def test_spectral_conv1d_is_resolution_independent():
    conv = SpectralConv1d(1, 4, 6, rngs=nnx.Rngs(1))

    def f(n):  # band-limited (frequencies < 6): the same function at any resolution
        x = jnp.arange(n) / n
        return (jnp.sin(2 * jnp.pi * x) + 0.5 * jnp.cos(2 * jnp.pi * 3 * x) + 0.2)[None, :, None]

    coarse, fine = conv(f(32)), conv(f(128))
    np.testing.assert_allclose(np.asarray(fine[:, ::4]), np.asarray(coarse), atol=1e-5)
    assert float(jnp.max(jnp.abs(coarse))) > 1e-3


def test_spectral_conv2d_matches_numpy_fft(x64, rng):
    conv = SpectralConv2d(2, 3, 3, 2, rngs=nnx.Rngs(0))
    v = rng.normal(size=(2, 8, 8, 2))
    coeffs = np.fft.rfft2(v, axes=(1, 2)) / 64
    wp = np.asarray(conv.weight_pos[0]) + 1j * np.asarray(conv.weight_pos[1])
    wn = np.asarray(conv.weight_neg[0]) + 1j * np.asarray(conv.weight_neg[1])
    mixed = np.zeros((2, 8, 5, 3), complex)
    for kx in range(3):
        for ky in range(2):
            mixed[:, kx, ky] = coeffs[:, kx, ky] @ wp[kx, ky]
            mixed[:, 8 - 3 + kx, ky] = coeffs[:, 8 - 3 + kx, ky] @ wn[kx, ky]
    want = np.fft.irfft2(mixed * 64, s=(8, 8), axes=(1, 2))
    np.testing.assert_allclose(np.asarray(conv(jnp.asarray(v))), want, rtol=1e-5, atol=1e-6)


def test_fno1d_jit_vmap_grad():
    model = FNO1d(width=8, modes=4, depth=2, rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(model, nnx.Param)
    u = jax.random.normal(jax.random.key(1), (3, 16, 1))
    t = jnp.array([0.1, 0.5, 0.9])

    @jax.jit
    def apply(p, u, t):
        return nnx.merge(graphdef, p)(u, t)

    out = apply(params, u, t)
    # vmap over an extra leading axis equals one call per slice.
    stacked = jax.jit(jax.vmap(apply, in_axes=(None, 0, None)))(params, jnp.stack([u, 2 * u]), t)
    np.testing.assert_allclose(np.asarray(stacked[0]), np.asarray(out), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        np.asarray(stacked[1]), np.asarray(apply(params, 2 * u, t)), rtol=1e-5, atol=1e-6
    )
    # The time input matters and gradients reach every parameter.
    assert float(jnp.max(jnp.abs(apply(params, u, t + 0.3) - out))) > 1e-4
    grads = jax.jit(jax.grad(lambda p: jnp.sum(apply(p, u, t) ** 2)))(params)
    norms = [float(jnp.linalg.norm(g)) for g in jax.tree.leaves(grads)]
    assert all(np.isfinite(norms)) and min(norms) > 0


def test_fno_runs_at_several_resolutions():
    model = FNO1d(width=8, modes=4, depth=1, rngs=nnx.Rngs(0))
    for n in (8, 40):
        out = model(jnp.ones((2, n, 1)), 0.5)
        assert out.shape == (2, n, 1) and bool(jnp.all(jnp.isfinite(out)))
    model2 = FNO2d(width=4, modes=3, depth=1, rngs=nnx.Rngs(0))
    out = model2(jnp.ones((2, 8, 12, 1)), jnp.array([0.1, 0.2]))
    assert out.shape == (2, 8, 12, 1)
    assert float(jnp.abs(out[0] - out[1]).max()) > 0  # different t, different output


def test_fno_bad_inputs():
    model = FNO1d(width=8, modes=4, depth=1, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=r"u must have shape \[batch, n, 1\]"):
        model(jnp.ones((2, 16)), 0.5)
    with pytest.raises(ValueError, match="at least 2 \\* modes"):
        model(jnp.ones((2, 6, 1)), 0.5)
    with pytest.raises(ValueError, match="t must be a scalar or have shape"):
        model(jnp.ones((2, 16, 1)), jnp.ones(3))
    with pytest.raises(ValueError, match="t=None"):
        model(jnp.ones((2, 16, 1)))
    with pytest.raises(ValueError, match="modes=0"):
        SpectralConv1d(1, 1, 0, rngs=nnx.Rngs(0))
