"""Function-valued data: GP covariances (sklearn), sample covariances, SDE moments, PDE solutions
against closed forms (Cole-Hopf for Burgers, the logistic-type ODE for Allen-Cahn, Fourier decay
for heat)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers.core.data import functional as F


@pytest.mark.parametrize(("name", "nu"), [("matern12", 0.5), ("matern32", 1.5), ("matern52", 2.5)])
def test_matern_covariance_matches_sklearn(x64, name, nu):
    from sklearn.gaussian_process.kernels import Matern

    x = np.linspace(0, 1, 9)
    want = 1.7 * Matern(length_scale=0.3, nu=nu)(x[:, None])
    got = F.covariance(jnp.asarray(x), jnp.asarray(x), kernel=name, lengthscale=0.3, variance=1.7)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("method", ["cholesky", "spectral"])
@pytest.mark.parametrize("kernel", ["rbf", "matern52"])
def test_gp_samples_have_the_kernel_covariance(method, kernel):
    grid = jnp.linspace(0, 1, 12)
    x = F.gp_sample(
        jax.random.key(0), 20_000, grid, kernel=kernel, lengthscale=0.3, variance=2.0, method=method
    )
    emp = np.cov(np.asarray(x, np.float64), rowvar=False)
    want = np.asarray(F.covariance(grid, grid, kernel=kernel, lengthscale=0.3, variance=2.0))
    np.testing.assert_allclose(emp, want, atol=0.12)
    assert abs(float(x.mean())) < 0.05


def test_gp_prior_is_jittable_and_validates():
    prior = F.gaussian_process_prior(jnp.linspace(0, 1, 16), lengthscale=0.2)
    a = jax.jit(prior.sample, static_argnums=1)(jax.random.key(3), 4)
    np.testing.assert_allclose(
        np.asarray(a), np.asarray(prior.sample(jax.random.key(3), 4)), rtol=1e-5, atol=1e-6
    )
    with pytest.raises(ValueError, match="lengthscale=0"):
        F.gaussian_process_prior(jnp.linspace(0, 1, 8), lengthscale=0)
    with pytest.raises(ValueError, match="grid must be 1-D"):
        F.gaussian_process_prior(jnp.ones((3, 3)))
    with pytest.raises(ValueError, match="kernel='cosine'"):
        F.gaussian_process_prior(jnp.linspace(0, 1, 8), kernel="cosine")


@pytest.mark.parametrize("kernel", ["rbf", "matern52"])
def test_covariance_of_2d_points_matches_sklearn(x64, kernel):
    from sklearn.gaussian_process.kernels import RBF, Matern

    pts = np.random.default_rng(0).uniform(size=(7, 2))
    ref = RBF(length_scale=0.3) if kernel == "rbf" else Matern(length_scale=0.3, nu=2.5)
    got = F.covariance(jnp.asarray(pts), jnp.asarray(pts), kernel=kernel, lengthscale=0.3)
    np.testing.assert_allclose(np.asarray(got), ref(pts), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match=r"got shapes \(7, 2\) and \(7, 3\)"):
        F.covariance(jnp.asarray(pts), jnp.ones((7, 3)))


@pytest.mark.parametrize("method", ["cholesky", "spectral"])
@pytest.mark.parametrize("kernel", ["rbf", "matern52"])
def test_2d_gp_samples_have_the_isotropic_kernel_covariance(method, kernel):
    # A 4 x 3 grid with unequal spacings: the covariance must use the Euclidean distance of the
    # points (closed form), not a product of per-axis kernels.
    axes = (jnp.linspace(0, 1, 4), jnp.linspace(0, 0.5, 3))
    x = F.gp_sample(
        jax.random.key(1), 20_000, axes, kernel=kernel, lengthscale=0.4, variance=1.5, method=method
    )
    assert x.shape == (20_000, 4, 3)
    g1, g2 = np.meshgrid(np.asarray(axes[0]), np.asarray(axes[1]), indexing="ij")
    pts = np.stack([g1.ravel(), g2.ravel()], axis=-1)
    d = np.sqrt(((pts[:, None] - pts[None]) ** 2).sum(-1)) / 0.4
    if kernel == "rbf":
        want = 1.5 * np.exp(-0.5 * d**2)
    else:
        want = 1.5 * (1 + np.sqrt(5) * d + 5 * d**2 / 3) * np.exp(-np.sqrt(5) * d)
    emp = np.cov(np.asarray(x, np.float64).reshape(20_000, -1), rowvar=False)
    np.testing.assert_allclose(emp, want, atol=0.1)
    assert abs(float(x.mean())) < 0.05


def test_2d_gp_prior_shapes_and_validation():
    axis = F.periodic_grid(8)
    prior = F.gaussian_process_prior((axis, axis[:6]), lengthscale=0.2)
    assert prior.grid_shape == (8, 6) and prior.factor.shape == (48, 48)
    a = jax.jit(prior.sample, static_argnums=1)(jax.random.key(0), 3)
    assert a.shape == (3, 8, 6)
    spectral = F.gaussian_process_prior((axis, axis), method="spectral", n_features=64)
    assert spectral.sample(jax.random.key(0), 2).shape == (2, 8, 8)
    # 1-D priors keep their [n, grid] samples.
    assert F.gaussian_process_prior(axis).sample(jax.random.key(0), 2).shape == (2, 8)
    with pytest.raises(ValueError, match=r"grid must be 1-D .* got shape \[\(8,\), \(1,\)\]"):
        F.gaussian_process_prior((axis, axis[:1]))
    with pytest.raises(ValueError, match="grid must be 1-D"):
        F.gaussian_process_prior((axis, axis, axis))


def test_ou_paths_match_the_closed_form_moments():
    grid = jnp.linspace(0, 1, 33)
    theta, sigma = 4.0, 1.0
    x = np.asarray(F.ou_paths(jax.random.key(0), 4000, grid, theta=theta, sigma=sigma), np.float64)
    for i in (4, 32):
        t = float(grid[i])
        var = np.exp(-2 * theta * t) / 3.0 + sigma**2 / (2 * theta) * (1 - np.exp(-2 * theta * t))
        np.testing.assert_allclose(x[:, i].var(), var, rtol=0.08)
        assert abs(x[:, i].mean()) < 4 * np.sqrt(var / 4000)
    # Correlation between times decays like exp(-theta |t - s|) at stationarity.
    c = np.corrcoef(x[:, 24], x[:, 32])[0, 1]
    np.testing.assert_allclose(c, np.exp(-theta * 0.25), atol=0.05)


def test_oscillator_paths_follow_the_damped_oscillator_without_noise(x64):
    grid = jnp.linspace(0, 1, 65)
    omega, gamma = 2 * np.pi * 1.5, 1.0
    x = np.asarray(
        F.oscillator_paths(jax.random.key(1), 3, grid, omega=omega, gamma=gamma, sigma=1e-8)
    )
    wd = np.sqrt(omega**2 - gamma**2 / 4)
    t = np.asarray(grid)
    x0 = x[:, :1]
    want = x0 * np.exp(-gamma * t / 2) * (np.cos(wd * t) + gamma / (2 * wd) * np.sin(wd * t))
    np.testing.assert_allclose(x, want, atol=2e-2)


def test_burgers_matches_cole_hopf(x64):
    nu, a, t_final, n = 0.05, 1.0, 0.2, 64
    x = np.arange(n) / n
    got = np.asarray(
        F.burgers_solve(jnp.asarray(a * np.sin(2 * np.pi * x))[None], nu=nu, t_final=t_final)
    )[0]
    # Cole-Hopf: u = -2 nu phi_x / phi with phi solving the heat equation exactly (Fourier).
    m = 512
    xf = np.arange(m) / m
    phi0 = np.exp(-a * (1 - np.cos(2 * np.pi * xf)) / (4 * np.pi * nu))
    k = 2 * np.pi * np.fft.fftfreq(m, 1.0 / m)
    ph = np.fft.fft(phi0) * np.exp(-nu * k**2 * t_final)
    phi, dphi = np.fft.ifft(ph).real, np.fft.ifft(1j * k * ph).real
    want = (-2 * nu * dphi / phi)[:: m // n]
    np.testing.assert_allclose(got, want, atol=2e-4 * np.abs(want).max() + 1e-6)
    assert np.abs(want).max() > 0.3


def test_allen_cahn_uniform_state_follows_the_ode(x64):
    u0, r, t = 0.1, 5.0, 0.5
    got = np.asarray(F.reaction_diffusion_solve(jnp.full((1, 16), u0), rate=r, t_final=t))
    want = u0 * np.exp(r * t) / np.sqrt(1 + u0**2 * (np.exp(2 * r * t) - 1))
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_allen_cahn_samples_have_plateaus_and_resolved_fronts():
    x = np.asarray(F.reaction_diffusion_solutions(jax.random.key(0), 64, 64), np.float64)
    assert np.abs(x).max() < 1.05  # bounded by the stable states (no Gibbs overshoot)
    assert 0.3 < np.mean(np.abs(x) > 0.9) < 0.8  # plateaus formed, fronts still present
    assert x.std(axis=1).min() > 0.2  # no sample has converged to a constant
    signs = np.sign(x)
    changes = np.sum(signs != np.roll(signs, 1, axis=1), axis=1)
    assert changes.mean() >= 2 and np.all(changes % 2 == 0)  # periodic: fronts come in pairs
    # Front width sqrt(2 D / r) ~ 3 points: a jump between neighbours stays well below 2.
    assert np.abs(x - np.roll(x, 1, axis=1)).max() < 0.6


def test_heat2d_single_mode_decays_exactly(x64):
    n, kappa, t = 16, 0.01, 0.3
    x = np.arange(n) / n
    u0 = np.sin(2 * np.pi * x)[:, None] * np.cos(4 * np.pi * x)[None, :]
    got = np.asarray(F.heat2d_solve(jnp.asarray(u0)[None], diffusivity=kappa, t_final=t))[0]
    np.testing.assert_allclose(got, u0 * np.exp(-kappa * 20 * np.pi**2 * t), atol=1e-12)


def test_generators_are_seeded_and_finite():
    grid = jnp.linspace(0, 1, 32)
    for fn in (
        lambda k: F.gp_mixture_paths(k, 8, grid),
        lambda k: F.reaction_diffusion_solutions(k, 4, 32),
        lambda k: F.heat2d_solutions(k, 2, 16),
    ):
        a, b = fn(jax.random.key(5)), fn(jax.random.key(5))
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert bool(jnp.all(jnp.isfinite(a))) and float(jnp.std(a)) > 0.05
    with pytest.raises(ValueError, match="nu=-1"):
        F.burgers_solve(jnp.ones((2, 8)), nu=-1)
    with pytest.raises(ValueError, match=r"u0 must be \[n, grid\]"):
        F.burgers_solve(jnp.ones(8))
