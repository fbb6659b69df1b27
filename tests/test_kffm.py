"""kFFM: kernels and Hilbert costs against float64 NumPy definitions, signatures against closed
forms, couplings (marginals, Hungarian limit, Euclidean cross-check), the Hilbert Sinkhorn
divergence, the FFM path, diffrax generation, a tiny end-to-end training, and bad inputs."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy.optimize import linear_sum_assignment

import jaxpapers.kffm as K
from jaxpapers.kffm import gaussian_process_prior, periodic_grid
from jaxpapers.kffm._kernels import grid_gradient as K_grid_gradient


def _functions(key, n, grid=16, shift=0.0):
    prior = gaussian_process_prior(jnp.linspace(0, 1, grid), lengthscale=0.2)
    return prior.sample(n, key=key) + shift


# ------------------------------------------------------------------ kernels and Hilbert costs


def _np_rbf_gram(f, g, ell, feats):
    a, b = feats(f), feats(g)
    d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    return np.exp(-d2 / (2 * ell**2))


def _np_sobolev_feats(lam):
    def feats(f):
        n = f.shape[1]
        df = np.gradient(f, 1.0 / (n - 1), axis=1)
        return np.concatenate([f, np.sqrt(lam) * df], axis=1) / np.sqrt(n)

    return feats


@pytest.mark.parametrize("which", ["rbf", "sobolev", "signature", "linear"])
def test_hilbert_cost_equals_its_definition(x64, rng, which):
    f, g = rng.normal(size=(5, 12)), rng.normal(size=(4, 12)) + 0.3
    if which == "rbf":
        kern, feats = K.RBFKernel(bandwidth=0.7), lambda h: h / np.sqrt(h.shape[1])
    elif which == "sobolev":
        kern, feats = (
            K.SobolevKernel(bandwidth=0.9, derivative_weight=0.02),
            _np_sobolev_feats(0.02),
        )
    elif which == "signature":
        kern = K.SignatureKernel(bandwidth=1.1, depth=3, scale=0.5)
        feats = lambda h: np.asarray(kern.features(jnp.asarray(h)))
    else:
        kern = K.LinearKernel()
    if which == "linear":
        gram = lambda a, b: (a @ b.T) / a.shape[1]
    else:
        gram = lambda a, b: _np_rbf_gram(a, b, kern.bandwidth, feats)
    want = np.diag(gram(f, f))[:, None] + np.diag(gram(g, g))[None, :] - 2 * gram(f, g)
    got = np.asarray(kern.cost_matrix(jnp.asarray(f), jnp.asarray(g)))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        np.asarray(kern.gram(jnp.asarray(f), jnp.asarray(g))), gram(f, g), rtol=1e-9, atol=1e-12
    )
    # The ott geometry carries the same cost, pair by pair (CostFn.__call__) and all pairs.
    geom = K.hilbert_geometry(jnp.asarray(f), jnp.asarray(g), kern)
    np.testing.assert_allclose(np.asarray(geom.cost_matrix), want, rtol=1e-9, atol=1e-10)
    single = geom.cost_fn(geom.x[1], geom.y[2])
    np.testing.assert_allclose(float(single), want[1, 2], rtol=1e-9, atol=1e-12)


def _np_sobolev2d_feats(lam):
    def feats(f):
        n, h, w = f.shape
        d1 = np.gradient(f, 1.0 / (h - 1), axis=1)
        d2 = np.gradient(f, 1.0 / (w - 1), axis=2)
        parts = [
            f.reshape(n, -1),
            np.sqrt(lam) * d1.reshape(n, -1),
            np.sqrt(lam) * d2.reshape(n, -1),
        ]
        return np.concatenate(parts, axis=1) / np.sqrt(h * w)

    return feats


def test_sobolev_kernel_on_2d_fields_uses_the_2d_gradient(x64, rng):
    f, g = rng.normal(size=(5, 6, 7)), rng.normal(size=(4, 6, 7)) + 0.2
    lam, ell = 0.03, 1.3
    kern = K.SobolevKernel(bandwidth=ell, derivative_weight=lam)
    feats = _np_sobolev2d_feats(lam)
    gram = lambda a, b: _np_rbf_gram(a, b, ell, feats)
    want = np.diag(gram(f, f))[:, None] + np.diag(gram(g, g))[None, :] - 2 * gram(f, g)
    got = np.asarray(kern.cost_matrix(jnp.asarray(f), jnp.asarray(g)))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    # The squared feature distance is the H^1 quadrature: L2 part + lam * both partials.
    h = f[0] - g[0]
    dh1, dh2 = np.gradient(h, 1 / 5, axis=0), np.gradient(h, 1 / 6, axis=1)
    h1 = np.mean(h**2) + lam * (np.mean(dh1**2) + np.mean(dh2**2))
    np.testing.assert_allclose(-2 * ell**2 * np.log(1 - got[0, 0] / 2), h1, rtol=1e-8)
    grad = np.asarray(K_grid_gradient(jnp.asarray(f)))
    np.testing.assert_allclose(grad[:, 0], np.gradient(f, 1 / 5, axis=1), rtol=1e-12)
    np.testing.assert_allclose(grad[:, 1], np.gradient(f, 1 / 6, axis=2), rtol=1e-12)
    # L2 kernels treat a field as its flattened grid values.
    flat = lambda a: jnp.asarray(a.reshape(a.shape[0], -1))
    for k in (K.RBFKernel(bandwidth=0.8), K.LinearKernel()):
        np.testing.assert_allclose(
            np.asarray(k.cost_matrix(jnp.asarray(f), jnp.asarray(g))),
            np.asarray(k.cost_matrix(flat(f), flat(g))),
            rtol=1e-12,
        )


def test_periodic_sobolev_kernel_wraps_around(x64, rng):
    """Periodic grid j/n: wrap-around central differences (float64 NumPy loop), exact up to
    O(h^2) for a smooth torus field, and the H^1 quadrature of the kernel's feature distance."""
    n1, n2 = 8, 12
    f = rng.normal(size=(3, n1, n2))
    got = np.asarray(K_grid_gradient(jnp.asarray(f), periodic=True))
    want = np.zeros((3, 2, n1, n2))
    for i in range(n1):
        for j in range(n2):
            want[:, 0, i, j] = (f[:, (i + 1) % n1, j] - f[:, (i - 1) % n1, j]) * n1 / 2
            want[:, 1, i, j] = (f[:, i, (j + 1) % n2] - f[:, i, (j - 1) % n2]) * n2 / 2
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    x, y = np.meshgrid(np.arange(64) / 64, np.arange(64) / 64, indexing="ij")
    field = np.sin(2 * np.pi * x) * np.cos(2 * np.pi * y)
    d = np.asarray(K_grid_gradient(jnp.asarray(field[None]), periodic=True))[0]
    exact = 2 * np.pi * np.cos(2 * np.pi * x) * np.cos(2 * np.pi * y)
    np.testing.assert_allclose(d[0], exact, atol=(2 * np.pi) ** 3 / 6 / 64**2 * 1.01)
    lam, ell = 0.05, 2.0
    kern = K.SobolevKernel(bandwidth=ell, derivative_weight=lam, periodic=True)
    g = rng.normal(size=(1, n1, n2))
    c = float(kern.cost_matrix(jnp.asarray(f[:1]), jnp.asarray(g))[0, 0])
    dh = want[0] - np.asarray(K_grid_gradient(jnp.asarray(g), periodic=True))[0]
    h1 = np.mean((f[0] - g[0]) ** 2) + lam * np.mean(np.sum(dh**2, axis=0))
    np.testing.assert_allclose(-2 * ell**2 * np.log(1 - c / 2), h1, rtol=1e-8)
    # The closed-grid kernel differs (one-sided edges, spacing 1/(n-1)).
    closed = K.SobolevKernel(bandwidth=ell, derivative_weight=lam)
    assert abs(float(closed.cost_matrix(jnp.asarray(f[:1]), jnp.asarray(g))[0, 0]) - c) > 1e-6


def test_sobolev_2d_cost_is_differentiable_under_jit_and_vmap(x64, rng):
    kern = K.SobolevKernel(bandwidth=1.0)
    f, g = jnp.asarray(rng.normal(size=(3, 5, 5))), jnp.asarray(rng.normal(size=(3, 5, 5)))
    total = jax.jit(lambda a: jnp.sum(kern.cost_matrix(a, g)))
    gr = jax.grad(total)(f)
    eps = 1e-6
    e = jnp.zeros_like(f).at[1, 2, 3].set(eps)
    fd = (float(total(f + e)) - float(total(f - e))) / (2 * eps)
    np.testing.assert_allclose(float(gr[1, 2, 3]), fd, rtol=1e-6)
    batched = jax.vmap(kern.cost_matrix)(jnp.stack([f, g]), jnp.stack([g, f]))
    np.testing.assert_allclose(np.asarray(batched[1]), np.asarray(kern.cost_matrix(g, f)))


def test_linear_kernel_cost_is_squared_l2(x64, rng):
    f, g = rng.normal(size=(6, 20)), rng.normal(size=(7, 20))
    want = ((f[:, None] - g[None]) ** 2).mean(-1)
    np.testing.assert_allclose(np.asarray(K.LinearKernel().cost_matrix(f, g)), want, rtol=1e-12)


def test_default_bandwidth_is_the_rms_distance_and_scale_free(x64, rng):
    from jaxpapers.kffm._kernels import rms_bandwidth

    a, b = rng.normal(size=(6, 10)), rng.normal(size=(5, 10)) + 1
    z = np.concatenate([a, b])
    d2 = [((z[i] - z[j]) ** 2).sum() for i in range(11) for j in range(11) if i != j]
    np.testing.assert_allclose(float(rms_bandwidth(a, b)), np.sqrt(np.mean(d2)), rtol=1e-10)
    f, g = rng.normal(size=(6, 10)), rng.normal(size=(6, 10))
    kern = K.RBFKernel()
    np.testing.assert_allclose(
        np.asarray(kern.cost_matrix(f, g)),
        np.asarray(kern.cost_matrix(10 * f, 10 * g)),
        rtol=1e-10,
    )


def test_signature_closed_forms(x64, rng):
    # A straight line: S_n = delta^{(x)n} / n!, whatever the parametrisation.
    delta = np.array([0.7, -1.3])
    line = np.outer(np.array([0.0, 0.1, 0.5, 1.0]), delta)
    sig = np.asarray(K.path_signature(jnp.asarray(line), 3))
    want = np.concatenate(
        [
            delta,
            np.outer(delta, delta).ravel() / 2,
            np.einsum("i,j,k->ijk", delta, delta, delta).ravel() / 6,
        ]
    )
    np.testing.assert_allclose(sig, want, rtol=1e-12)
    # Level 2: the antisymmetric part is the Levy area (shoelace formula around the chord).
    path = rng.normal(size=(7, 2))
    s2 = np.asarray(K.path_signature(jnp.asarray(path), 2))[2:].reshape(2, 2)
    z = path - path[0]
    area = 0.5 * np.sum(z[:-1, 0] * z[1:, 1] - z[1:, 0] * z[:-1, 1])
    np.testing.assert_allclose(0.5 * (s2[0, 1] - s2[1, 0]), area, rtol=1e-12)
    inc = path[-1] - path[0]
    np.testing.assert_allclose(0.5 * (s2 + s2.T), np.outer(inc, inc) / 2, rtol=1e-12)
    # Chen: the signature of a concatenation is the tensor product of the signatures.
    a = np.asarray(K.path_signature(jnp.asarray(path[:4]), 2))
    b = np.asarray(K.path_signature(jnp.asarray(path[3:]), 2))
    ab = np.concatenate([a[:2] + b[:2], a[2:] + b[2:] + np.outer(a[:2], b[:2]).ravel()])
    np.testing.assert_allclose(np.asarray(K.path_signature(jnp.asarray(path), 2)), ab, rtol=1e-12)


# ------------------------------------------------------------------ couplings and pairings


@pytest.mark.parametrize(
    "pairing",
    [
        K.EuclideanOTPairing(),
        K.KernelOTPairing(K.RBFKernel()),
        K.KernelOTPairing(K.SobolevKernel()),
        K.KernelOTPairing(K.SignatureKernel()),
    ],
    ids=["euclid", "rbf", "sobolev", "signature"],
)
def test_couplings_have_uniform_marginals(pairing):
    x0 = _functions(jax.random.key(0), 32)
    x1 = _functions(jax.random.key(1), 32, shift=1.0)
    out = jax.jit(lambda a, b, k: pairing(a, b, key=k))(x0, x1, jax.random.key(2))
    # ott stops once the L1 marginal error is below its threshold (1e-3).
    assert np.abs(np.asarray(out.coupling.sum(1)) - 1 / 32).sum() < 1e-3
    assert np.abs(np.asarray(out.coupling.sum(0)) - 1 / 32).sum() < 1e-3
    np.testing.assert_allclose(float(out.coupling.sum()), 1.0, atol=1e-4)
    assert 0 < int(out.n_iters) < 2000
    np.testing.assert_array_equal(np.asarray(out.x0), np.asarray(x0))
    # Every paired data function is one of the batch, the one the returned index names.
    np.testing.assert_array_equal(np.asarray(out.x1), np.asarray(x1)[np.asarray(out.indices)])
    assert bool(out.converged)
    # OT pairs are closer (in the kernel's cost) than the input order.
    assert float(jnp.mean((out.x1 - out.x0) ** 2)) < float(jnp.mean((x1 - x0) ** 2))


@pytest.mark.parametrize(
    "kernel", [K.RBFKernel(bandwidth=1.0), K.SobolevKernel(bandwidth=2.0)], ids=["rbf", "sobolev"]
)
def test_small_epsilon_pairing_is_the_hungarian_assignment(kernel):
    x0 = _functions(jax.random.key(3), 8)
    x1 = _functions(jax.random.key(4), 8, shift=0.5)
    pairing = K.KernelOTPairing(kernel, epsilon=1e-3, max_iterations=20_000, threshold=1e-5)
    out = jax.jit(lambda a, b, k: pairing(a, b, key=k))(x0, x1, jax.random.key(5))
    cost = np.asarray(kernel.cost_matrix(x0, x1), np.float64)
    _rows, cols = linear_sum_assignment(cost)
    np.testing.assert_allclose(np.asarray(out.coupling) * 8, np.eye(8)[cols], atol=0.05)
    np.testing.assert_array_equal(np.asarray(out.x1), np.asarray(x1)[cols])


def test_kernel_domain_solve_and_draws_without_replacement():
    """The kernel-domain solve on the row/column-shifted cost gives the log-domain coupling (same
    plan, up to the stopping threshold); draws without replacement form a permutation."""
    x0 = _functions(jax.random.key(6), 24)
    x1 = _functions(jax.random.key(7), 24, shift=0.7)
    key = jax.random.key(8)
    for cls in (
        lambda **kw: K.EuclideanOTPairing(**kw),
        lambda **kw: K.KernelOTPairing(K.RBFKernel(), **kw),
    ):
        lse = jax.jit(lambda u, v, k, p=cls(): p(u, v, key=k))(x0, x1, key)
        ker = jax.jit(lambda u, v, k, p=cls(lse_mode=False): p(u, v, key=k))(x0, x1, key)
        # Plain log-domain Sinkhorn (no Anderson acceleration): the reference plan.
        plain = jax.jit(lambda u, v, k, p=cls(anderson=0): p(u, v, key=k))(x0, x1, key)
        # All stop at an L1 marginal error of 1e-3: couplings (entries ~1/24) agree to that.
        for out in (lse, ker):
            assert np.abs(np.asarray(out.coupling) - np.asarray(plain.coupling)).sum() < 3e-3
            assert bool(out.converged)
        # Anderson acceleration (default, memory 3) needs fewer iterations than plain Sinkhorn.
        assert int(lse.n_iters) < int(plain.n_iters)
        perm = jax.jit(lambda u, v, k, p=cls(replace=False): p(u, v, key=k))(x0, x1, key)
        assert sorted(np.asarray(perm.indices).tolist()) == list(range(24))
        np.testing.assert_array_equal(np.asarray(perm.x1), np.asarray(x1)[perm.indices])


def test_draw_indices_follows_the_coupling():
    """A permutation coupling is drawn exactly both ways; without replacement every column is
    used once; bad couplings are named in the error."""
    perm = np.array([3, 0, 4, 1, 2])
    plan = jnp.asarray(np.eye(5)[perm] / 5)
    for replace in (True, False):
        idx = K.draw_indices(plan, key=jax.random.key(0), replace=replace)
        np.testing.assert_array_equal(np.asarray(idx), perm)
    flat = jnp.full((6, 6), 1 / 36)
    idx = np.asarray(K.draw_indices(flat, key=jax.random.key(1), replace=False))
    assert sorted(idx.tolist()) == list(range(6))
    with pytest.raises(ValueError, match=r"coupling must be a \[B, B'\] matrix; got shape \(6,\)"):
        K.draw_indices(flat[0], key=jax.random.key(0))
    with pytest.raises(ValueError, match=r"replace=False needs .* got coupling shape \(6, 3\)"):
        K.draw_indices(flat[:, :3], key=jax.random.key(0), replace=False)


def test_pairing_settings_are_validated_once():
    with pytest.raises(ValueError, match="epsilon=-1"):
        K.EuclideanOTPairing(epsilon=-1.0)
    with pytest.raises(ValueError, match="kernel='rbf'; expected a FunctionKernel"):
        K.KernelOTPairing("rbf")
    with pytest.raises(ValueError, match="max_iterations=0"):
        K.KernelOTPairing(K.RBFKernel(), max_iterations=0)
    with pytest.raises(ValueError, match="anderson=-1"):
        K.EuclideanOTPairing(anderson=-1)
    pairing = K.KernelOTPairing(K.RBFKernel(bandwidth=0.5), epsilon=0.1)
    leaves, tree = jax.tree.flatten(pairing)
    assert len(leaves) == 1  # the bandwidth: everything else is static structure
    again = jax.tree.unflatten(tree, [object()])  # no validation on unflatten
    assert again.epsilon == 0.1


def test_linear_kernel_pairing_equals_euclidean_ot():
    x0 = _functions(jax.random.key(6), 24)
    x1 = _functions(jax.random.key(7), 24, shift=0.7)
    key = jax.random.key(8)
    linear, euclid = K.KernelOTPairing(K.LinearKernel()), K.EuclideanOTPairing()
    a = jax.jit(lambda u, v, k: linear(u, v, key=k))(x0, x1, key)
    b = jax.jit(lambda u, v, k: euclid(u, v, key=k))(x0, x1, key)
    np.testing.assert_allclose(np.asarray(a.coupling), np.asarray(b.coupling), rtol=1e-3, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(a.x1), np.asarray(b.x1))


def test_independent_pairing_and_vmap():
    x0 = _functions(jax.random.key(0), 6)
    x1 = _functions(jax.random.key(1), 6)
    out = K.IndependentPairing()(x0, x1, key=jax.random.key(0))
    np.testing.assert_array_equal(np.asarray(out.x1), np.asarray(x1))
    xs0, xs1 = jnp.stack([x0, x1]), jnp.stack([x1, x0 + 1])
    keys = jax.random.split(jax.random.key(2), 2)
    for anderson in (0, 3):
        pairing = K.KernelOTPairing(K.RBFKernel(), anderson=anderson)
        pair = lambda a, b, k, pairing=pairing: pairing(a, b, key=k)
        batched = jax.jit(jax.vmap(pair))(xs0, xs1, keys)
        for i in range(2):
            one = jax.jit(pair)(xs0[i], xs1[i], keys[i])
            got, want = np.asarray(batched.coupling[i]), np.asarray(one.coupling)
            if anderson == 0:  # the same iterations, batched: equal to float32 rounding
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-7)
            else:  # Anderson's extrapolation amplifies rounding: both stop within 1e-3 (L1)
                assert np.abs(got - want).sum() < 2e-3


def _fields(key, n, grid=8, shift=0.0):
    axis = periodic_grid(grid)
    prior = gaussian_process_prior((axis, axis), lengthscale=0.3)
    return prior.sample(n, key=key) + shift


def test_pairings_on_2d_fields():
    x0 = _fields(jax.random.key(0), 24)
    x1 = _fields(jax.random.key(1), 24, shift=1.0)
    key = jax.random.key(2)
    flat = lambda a: a.reshape(a.shape[0], -1)
    for pairing in (K.EuclideanOTPairing(), K.KernelOTPairing(K.SobolevKernel())):
        out = jax.jit(lambda a, b, k, pairing=pairing: pairing(a, b, key=k))(x0, x1, key)
        assert out.x0.shape == out.x1.shape == (24, 8, 8)
        assert np.abs(np.asarray(out.coupling.sum(1)) - 1 / 24).sum() < 1e-3
        assert np.abs(np.asarray(out.coupling.sum(0)) - 1 / 24).sum() < 1e-3
        d = np.abs(flat(np.asarray(out.x1))[:, None] - flat(np.asarray(x1))[None]).max(-1)
        assert np.all(d.min(1) == 0)  # every paired field is one of the batch
        assert float(jnp.mean((out.x1 - out.x0) ** 2)) < float(jnp.mean((x1 - x0) ** 2))
    # Euclidean OT on fields is Euclidean OT on the flattened grids.
    euclid = jax.jit(lambda a, b, k: K.EuclideanOTPairing()(a, b, key=k).coupling)
    np.testing.assert_allclose(
        np.asarray(euclid(x0, x1, key)), np.asarray(euclid(flat(x0), flat(x1), key)), rtol=1e-5
    )


def test_2d_spectrum_is_the_rfft2_power(x64, rng):
    x = rng.normal(size=(5, 6, 8))
    want = np.mean(np.abs(np.fft.rfft2(x) / 48) ** 2, axis=0)
    np.testing.assert_allclose(np.asarray(K.mean_power_spectrum(jnp.asarray(x))), want, rtol=1e-12)
    np.testing.assert_allclose(
        float(K.spectrum_mse(2 * x, x)), np.mean((3 * want) ** 2), rtol=1e-12
    )


# ------------------------------------------------------------------ Hilbert Sinkhorn divergence


def test_hilbert_sinkhorn_divergence_properties():
    kern = K.SobolevKernel(bandwidth=1.0)
    hsd = jax.jit(lambda a, b: K.hilbert_sinkhorn_divergence(a, b, kern))
    x = _functions(jax.random.key(0), 24)
    y = _functions(jax.random.key(1), 24, shift=0.8)
    z = _functions(jax.random.key(2), 24)
    same = hsd(x, x)
    assert abs(float(same.divergence)) < 1e-4 and bool(same.converged)
    xy, yx = float(hsd(x, y).divergence), float(hsd(y, x).divergence)
    np.testing.assert_allclose(xy, yx, rtol=1e-2)
    xz = float(hsd(x, z).divergence)
    assert 0 <= xz < xy  # same law < shifted law
    assert hsd(x, y).n_iters.shape == (3,)
    # Anderson acceleration (default) against plain Sinkhorn: same divergence to the threshold.
    plain = jax.jit(lambda a, b: K.hilbert_sinkhorn_divergence(a, b, kern, anderson=0))(x, y)
    np.testing.assert_allclose(xy, float(plain.divergence), rtol=1e-2)
    assert int(jnp.sum(hsd(x, y).n_iters)) <= int(jnp.sum(plain.n_iters))


def test_gradients_flow_through_the_divergence():
    kern = K.RBFKernel(bandwidth=1.0)
    x = _functions(jax.random.key(0), 16)
    y = _functions(jax.random.key(1), 16, shift=1.0)
    value_and_grad = jax.jit(
        jax.value_and_grad(lambda a: K.hilbert_sinkhorn_divergence(a, y, kern).divergence)
    )
    before, g = value_and_grad(x)
    assert bool(jnp.all(jnp.isfinite(g))) and float(jnp.linalg.norm(g)) > 0
    # A small step against the gradient lowers the divergence by about |g|^2 * step.
    step = 0.05 / float(jnp.linalg.norm(g))
    after, _ = value_and_grad(x - step * g)
    np.testing.assert_allclose(float(before) - float(after), step * float(jnp.sum(g * g)), rtol=0.2)


# ------------------------------------------------------------------ flow matching and generation


def test_ffm_path_and_target(x64, rng):
    x0, x1 = rng.normal(size=(4, 9)), rng.normal(size=(4, 9))
    t = rng.uniform(size=4)
    s = 1e-4
    xt = np.asarray(K.ffm_interpolant(x0, x1, t, s))
    np.testing.assert_allclose(xt, t[:, None] * x1 + (1 - (1 - s) * t[:, None]) * x0)
    ratio = (x1 - (1 - s) * xt) / (1 - (1 - s) * t[:, None])
    np.testing.assert_allclose(np.asarray(K.ffm_target(x0, x1, s)), ratio, rtol=1e-9)
    # d x_t / d t is the target.
    h = 1e-6
    fd = (np.asarray(K.ffm_interpolant(x0, x1, t + h, s)) - xt) / h
    np.testing.assert_allclose(fd, np.asarray(K.ffm_target(x0, x1, s)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(K.ffm_interpolant(x0, x1, np.zeros(4), s)), x0)


def test_generate_against_the_exponential(x64):
    a = -1.3
    field = lambda t, x: a * x
    x0 = jnp.ones((2, 5))
    for solver in ("tsit5", "dopri5"):
        out = K.generate(field, x0, solver=solver, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(np.asarray(out.samples), math.exp(a), rtol=1e-6)
        assert int(out.nfe) == 6 * int(out.steps) + 1 or int(out.nfe) > 6 * int(out.steps)
    euler = K.generate(field, x0, solver="euler", steps=7)
    np.testing.assert_allclose(np.asarray(euler.samples), (1 + a / 7) ** 7, rtol=1e-10)
    assert int(euler.nfe) == 7
    heun = K.generate(field, x0, solver="heun", steps=5)
    np.testing.assert_allclose(
        np.asarray(heun.samples), (1 + a / 5 + (a / 5) ** 2 / 2) ** 5, rtol=1e-10
    )
    assert int(heun.nfe) == 10
    traced = jax.jit(lambda k: K.generate(field, x0, solver="euler", steps=k, max_steps=16))
    np.testing.assert_allclose(np.asarray(traced(7).samples), np.asarray(euler.samples))
    with pytest.raises(ValueError, match="steps=None"):
        K.generate(field, x0, solver="euler")
    with pytest.raises(ValueError, match="solver='rk4'"):
        K.generate(field, x0, solver="rk4")


def test_trained_field_transports_the_prior_to_the_data():
    from flax import nnx

    from jaxpapers.core.metrics import mmd_rbf
    from jaxpapers.core.train import train

    grid = jnp.linspace(0, 1, 16)
    prior = gaussian_process_prior(grid, lengthscale=0.2)
    data = np.asarray(prior.sample(512, key=jax.random.key(9)) * 0.3 + 2 * jnp.sin(3 * grid)[None])
    graphdef, params = nnx.split(K.FNO1d(width=12, modes=4, depth=2, rngs=nnx.Rngs(0)), nnx.Param)
    apply = lambda p, x, t: nnx.merge(graphdef, p)(x[..., None], t)[..., 0]
    pairing = K.KernelOTPairing(K.SobolevKernel())
    loss = lambda p, batch, key: K.flow_matching_loss(
        apply, p, batch, key=key, prior=prior, pairing=pairing
    )
    batch_fn = lambda i: data[np.random.default_rng(i).integers(0, 512, 32)]
    # 100 steps (measured: loss ratio 0.14, MMD ratio 0.004 against the bounds 0.5 and 0.25).
    res = train(loss, params, optax.adam(3e-3), batch_fn, steps=100, key=jax.random.key(1))
    assert res.losses[-20:].mean() < 0.5 * res.losses[:5].mean()
    x0 = prior.sample(256, key=jax.random.key(2))
    field = lambda t, x: apply(res.params, x, jnp.full((x.shape[0],), t))
    x1 = jax.jit(lambda z: K.generate(field, z, solver="euler", steps=8).samples)(x0)
    held_out = jnp.asarray(data[:256])
    assert float(mmd_rbf(x1, held_out)) < 0.25 * float(mmd_rbf(x0, held_out))


def test_metrics_values(x64, rng):
    x = rng.normal(size=(200, 16))
    assert float(K.density_mse(x, x)) == 0.0 and float(K.spectrum_mse(x, x)) == 0.0
    assert float(K.density_mse(x + 1.0, x)) > 0.01
    np.testing.assert_allclose(
        float(K.spectrum_mse(2 * x, x)), np.mean((3 * np.asarray(K.mean_power_spectrum(x))) ** 2)
    )


# ------------------------------------------------------------------ bad inputs


def test_bad_inputs_raise_clear_errors():
    x0 = _functions(jax.random.key(0), 8, grid=16)
    x1 = _functions(jax.random.key(1), 8, grid=32)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match=r"x0 and x1 must live on the same grid; got 16 and 32"):
        K.KernelOTPairing(K.RBFKernel())(x0, x1, key=key)
    with pytest.raises(ValueError, match="same grid"):
        K.hilbert_sinkhorn_divergence(x0, x1, K.RBFKernel())
    prior = gaussian_process_prior(jnp.linspace(0, 1, 16))
    with pytest.raises(ValueError, match="prior samples and x1 must live on the same grid"):
        K.flow_matching_loss(
            lambda p, x, t: x, None, x1, key=key, prior=prior, pairing=K.IndependentPairing()
        )
    for bad in (0.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match="epsilon="):
            K.EuclideanOTPairing(epsilon=bad)
        with pytest.raises(ValueError, match="epsilon="):
            K.KernelOTPairing(K.RBFKernel(), epsilon=bad)
        with pytest.raises(ValueError, match="bandwidth="):
            K.RBFKernel(bandwidth=bad)
        with pytest.raises(ValueError, match="bandwidth="):
            K.SobolevKernel(bandwidth=bad)
    with pytest.raises(ValueError, match="epsilon=-1"):
        K.hilbert_sinkhorn_divergence(x0, x0, K.RBFKernel(), epsilon=-1)
    nan_data = x0.at[2, 3].set(jnp.nan)
    with pytest.raises(ValueError, match=r"x1 \(shape \(8, 16\)\) contains 1 NaN"):
        K.EuclideanOTPairing()(x0, nan_data, key=key)
    with pytest.raises(ValueError, match="contains 1 NaN"):
        K.hilbert_sinkhorn_divergence(nan_data, x0, K.SobolevKernel())
    with pytest.raises(ValueError, match=r"must be \[n, grid\]"):
        K.KernelOTPairing(K.RBFKernel())(x0[0], x0[0], key=key)
    with pytest.raises(ValueError, match="depth=0"):
        K.SignatureKernel(depth=0)
    # 2-D: a prior on another grid than the data, a path kernel on fields, 4-D arrays.
    fields = _fields(jax.random.key(3), 4, grid=8)
    axis = periodic_grid(8)
    wrong = gaussian_process_prior((axis[:4], periodic_grid(16)))
    with pytest.raises(
        ValueError, match=r"prior samples and x1 must live on the same grid; got 4x16 and 8x8"
    ):
        K.flow_matching_loss(
            lambda p, x, t: x, None, fields, key=key, prior=wrong, pairing=K.IndependentPairing()
        )
    with pytest.raises(
        ValueError, match=r"must be \[n, grid\] \(1-D paths\); got shape \(4, 8, 8\)"
    ):
        K.SignatureKernel().features(fields)
    with pytest.raises(ValueError, match=r"got shape \(4, 8, 8, 1\)"):
        K.KernelOTPairing(K.SobolevKernel())(fields[..., None], fields[..., None], key=key)
    with pytest.raises(ValueError, match="expected a FunctionKernel"):
        K.KernelOTPairing("rbf")
