"""core.metrics against float64 NumPy loops, SciPy and closed forms."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import wasserstein_distance

from jaxpapers.core.metrics import accuracy, mmd_rbf, psnr, sliced_wasserstein


def _mmd_loop(x, y, bws):
    x, y = x.reshape(len(x), -1), y.reshape(len(y), -1)
    d = x.shape[1]

    def k(a, b):
        return sum(np.exp(-np.sum((a - b) ** 2) / d / (2 * bw**2)) for bw in bws)

    n, m = len(x), len(y)
    kxx = sum(k(x[i], x[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    kyy = sum(k(y[i], y[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    kxy = sum(k(x[i], y[j]) for i in range(n) for j in range(m)) / (n * m)
    return kxx + kyy - 2 * kxy


def test_mmd_matches_float64_loop(x64, rng):
    x, y = rng.normal(size=(9, 3, 2)), rng.normal(0.5, 1.0, size=(7, 3, 2))
    bws = (0.5, 2.0)
    np.testing.assert_allclose(mmd_rbf(x, y, bws), _mmd_loop(x, y, bws), rtol=1e-10)
    assert float(mmd_rbf(x, x[::-1], bws, unbiased=False)) == pytest.approx(0.0, abs=1e-12)


def test_mmd_is_jittable_and_differentiable(rng):
    x = jnp.asarray(rng.normal(size=(16, 4)), jnp.float32)
    y = x + 1.0
    g = jax.grad(lambda shift: jax.jit(mmd_rbf)(x + shift, y))(0.0)
    assert float(g) < 0  # moving x towards y lowers the discrepancy


def test_sliced_wasserstein_in_one_dimension_is_exact(rng):
    x, y = rng.normal(size=(200, 1)), rng.normal(1.0, 2.0, size=(200, 1))
    sw1 = sliced_wasserstein(jnp.asarray(x), jnp.asarray(y), key=jax.random.key(0), p=1)
    np.testing.assert_allclose(sw1, wasserstein_distance(x[:, 0], y[:, 0]), rtol=1e-5)


def test_sliced_wasserstein_of_a_shift(rng):
    x = jnp.asarray(rng.normal(size=(500, 5)), jnp.float32)
    shift = jnp.array([[3.0, 0, 0, 0, 0]])
    sw = sliced_wasserstein(x, x + shift, key=jax.random.key(1), n_projections=2000)
    # E_theta (3 theta_1)^2 = 9 / d for directions uniform on the sphere.
    np.testing.assert_allclose(sw, np.sqrt(9 / 5), rtol=0.05)


def test_accuracy_and_psnr():
    logits = jnp.array([[2.0, 1.0], [0.0, 3.0], [1.0, 0.0]])
    assert float(accuracy(logits, jnp.array([0, 1, 1]))) == pytest.approx(2 / 3)
    x = jnp.zeros((2, 4, 4))
    ref = x.at[0].set(0.1).at[1].set(0.01)
    np.testing.assert_allclose(psnr(x, ref), [20.0, 40.0], rtol=1e-5)


def test_bad_inputs():
    with pytest.raises(ValueError, match="same sample shape"):
        mmd_rbf(jnp.ones((3, 2)), jnp.ones((3, 3)))
    with pytest.raises(ValueError, match="at least 2 samples"):
        mmd_rbf(jnp.ones((1, 2)), jnp.ones((3, 2)))
    with pytest.raises(ValueError, match="equal shapes"):
        sliced_wasserstein(jnp.ones((3, 2)), jnp.ones((4, 2)), key=jax.random.key(0))
    with pytest.raises(ValueError, match=r"logits must be \[n, classes\]"):
        accuracy(jnp.ones((3,)), jnp.ones((3,), jnp.int32))
    with pytest.raises(ValueError, match="equal shapes"):
        psnr(jnp.ones((2, 3)), jnp.ones((2, 4)))
