"""Function-valued data: GP covariances (sklearn), sample covariances, SDE moments, PDE solutions
against closed forms (Cole-Hopf for Burgers, the logistic-type ODE for Allen-Cahn, Fourier decay
for heat)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers.kffm import _functional_data as F


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
        20_000,
        grid,
        key=jax.random.key(0),
        kernel=kernel,
        lengthscale=0.3,
        variance=2.0,
        method=method,
    )
    emp = np.cov(np.asarray(x, np.float64), rowvar=False)
    want = np.asarray(F.covariance(grid, grid, kernel=kernel, lengthscale=0.3, variance=2.0))
    np.testing.assert_allclose(emp, want, atol=0.12)
    assert abs(float(x.mean())) < 0.05


def test_gp_prior_is_jittable_and_validates():
    prior = F.gaussian_process_prior(jnp.linspace(0, 1, 16), lengthscale=0.2)
    a = jax.jit(prior.sample, static_argnums=0)(4, key=jax.random.key(3))
    np.testing.assert_allclose(
        np.asarray(a), np.asarray(prior.sample(4, key=jax.random.key(3))), rtol=1e-5, atol=1e-6
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
        20_000,
        axes,
        key=jax.random.key(1),
        kernel=kernel,
        lengthscale=0.4,
        variance=1.5,
        method=method,
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
    a = jax.jit(prior.sample, static_argnums=0)(3, key=jax.random.key(0))
    assert a.shape == (3, 8, 6)
    spectral = F.gaussian_process_prior((axis, axis), method="spectral", n_features=64)
    assert spectral.sample(2, key=jax.random.key(0)).shape == (2, 8, 8)
    # 1-D priors keep their [n, grid] samples.
    assert F.gaussian_process_prior(axis).sample(2, key=jax.random.key(0)).shape == (2, 8)
    with pytest.raises(ValueError, match=r"grid must be 1-D .* got shape \[\(8,\), \(1,\)\]"):
        F.gaussian_process_prior((axis, axis[:1]))
    with pytest.raises(ValueError, match="grid must be 1-D"):
        F.gaussian_process_prior((axis, axis, axis))


def test_ou_paths_match_the_closed_form_moments():
    grid = jnp.linspace(0, 1, 33)
    theta, sigma = 4.0, 1.0
    x = np.asarray(
        F.ou_paths(4000, grid, key=jax.random.key(0), theta=theta, sigma=sigma), np.float64
    )
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
        F.oscillator_paths(3, grid, key=jax.random.key(1), omega=omega, gamma=gamma, sigma=1e-8)
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
    x = np.asarray(F.reaction_diffusion_solutions(64, 64, key=jax.random.key(0)), np.float64)
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
        lambda k: F.gp_mixture_paths(8, grid, key=k),
        lambda k: F.reaction_diffusion_solutions(4, 32, key=k),
        lambda k: F.heat2d_solutions(2, 16, key=k),
    ):
        a, b = fn(jax.random.key(5)), fn(jax.random.key(5))
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert bool(jnp.all(jnp.isfinite(a))) and float(jnp.std(a)) > 0.05
    with pytest.raises(ValueError, match="nu=-1"):
        F.burgers_solve(jnp.ones((2, 8)), nu=-1)
    with pytest.raises(ValueError, match=r"u0 must be \[n, grid\]"):
        F.burgers_solve(jnp.ones(8))


# --- 2-D Navier-Stokes (vorticity form) --------------------------------------------------------


def _grid2d(n):
    x = np.arange(n) / n
    return x[:, None], x[None, :]


def test_ns2d_laplacian_eigenmode_decays_exactly(x64):
    # Any combination of modes with one |k| (here |k|^2 = 5: (1, 2), (2, -1), (2, 1)) has
    # psi = w / |2 pi k|^2, so u.grad w = 0 exactly and w(t) = w0 exp(-nu |2 pi k|^2 t): the
    # Taylor-Green-type decay, which the integrating factor reproduces to round-off.
    n, nu, t = 16, 0.02, 1.5
    x, y = _grid2d(n)
    w0 = (
        np.cos(2 * np.pi * (x + 2 * y))
        + 0.5 * np.sin(2 * np.pi * (2 * x - y))
        + 0.3 * np.cos(2 * np.pi * 2 * x) * np.sin(2 * np.pi * y)
    )
    got = F.navier_stokes2d_solve(
        jnp.asarray(w0)[None], viscosity=nu, t_final=t, forcing=None, steps=7
    )
    want = w0 * np.exp(-nu * 4 * np.pi**2 * 5 * t)
    np.testing.assert_allclose(np.asarray(got)[0], want, atol=1e-12)
    assert np.abs(want).max() < 0.2 * np.abs(w0).max()  # a visible decay (factor ~0.003)


def test_ns2d_forced_kolmogorov_mode_approaches_the_laminar_state(x64):
    # The forcing f is itself an eigenmode (k = (1, 1)); from w0 = 0 the exact solution is
    # w(t) = f (1 - exp(-lam t)) / lam with lam = nu |2 pi k|^2 = 8 pi^2 nu.
    n, nu, t = 16, 0.01, 2.0
    lam = 8 * np.pi**2 * nu
    got = F.navier_stokes2d_solve(jnp.zeros((n, n)), viscosity=nu, t_final=t, steps=20)
    x, y = _grid2d(n)
    f = 0.1 * (np.sin(2 * np.pi * (x + y)) + np.cos(2 * np.pi * (x + y)))
    np.testing.assert_allclose(np.asarray(got), f * (1 - np.exp(-lam * t)) / lam, atol=1e-8)


def _energy_enstrophy(w):
    n = w.shape[-1]
    h = np.fft.fft2(w) / n**2
    k = 2 * np.pi * np.fft.fftfreq(n, 1.0 / n)
    k2 = k[:, None] ** 2 + k[None, :] ** 2
    k2[0, 0] = np.inf
    return 0.5 * np.sum(np.abs(h) ** 2 / k2), 0.5 * np.sum(np.abs(h) ** 2)


def test_ns2d_inviscid_unforced_flow_conserves_energy_and_enstrophy(x64):
    w0 = F.random_vorticity(1, 16, key=jax.random.key(0), rms=2.0, dtype=jnp.float64)[0]
    w = F.navier_stokes2d_solve(w0, viscosity=0.0, t_final=1.0, forcing=None, steps=100)
    w0, w = np.asarray(w0), np.asarray(w)
    e0, z0 = _energy_enstrophy(w0)
    e1, z1 = _energy_enstrophy(w)
    assert np.linalg.norm(w - w0) > 0.3 * np.linalg.norm(w0)  # the flow really moved
    np.testing.assert_allclose([e1, z1], [e0, z0], rtol=1e-6)
    # With viscosity both decay; the energy balance dE/dt = -2 nu Z holds over a short time.
    nu, dt = 0.01, 0.01
    w2 = np.asarray(F.navier_stokes2d_solve(w0, viscosity=nu, t_final=dt, forcing=None, steps=2))
    e2, z2 = _energy_enstrophy(w2)
    assert z2 < z0
    np.testing.assert_allclose((e2 - e0) / dt, -2 * nu * z0, rtol=2e-2)


def test_ns2d_mean_vorticity_is_conserved_with_forcing(x64):
    w0 = F.random_vorticity(2, 16, key=jax.random.key(1), dtype=jnp.float64)
    np.testing.assert_allclose(np.asarray(w0).mean(axis=(1, 2)), 0.0, atol=1e-14)
    np.testing.assert_allclose(np.asarray(w0).std(), 1.0, rtol=0.3)  # rms ~ 1 (2 samples)
    w = np.asarray(F.navier_stokes2d_solve(w0 + 0.25, t_final=2.0, steps=40))
    np.testing.assert_allclose(w.mean(axis=(1, 2)), 0.25, atol=1e-12)
    assert np.abs(w - np.asarray(w0)).max() > 0.1


def test_ns2d_rk4_converges_at_fourth_order_in_time(x64):
    w0 = F.random_vorticity(2, 16, key=jax.random.key(2), rms=2.0, dtype=jnp.float64)
    run = lambda steps: np.asarray(F.navier_stokes2d_solve(w0, t_final=2.0, steps=steps))
    ref = run(160)
    e1, e2 = np.abs(run(20) - ref).max(), np.abs(run(40) - ref).max()
    assert 1e-9 < e2 < e1
    assert 10 < e1 / e2 < 24  # ~ 2^4 (the reference's own error is 1/256 of e1)


def test_ns2d_jit_and_vmap_equal_the_loop():
    w0 = F.random_vorticity(3, 16, key=jax.random.key(3))
    solve = lambda w: F.navier_stokes2d_solve(w, t_final=1.0, steps=10)
    loop = np.stack([np.asarray(solve(w)) for w in w0])
    np.testing.assert_allclose(np.asarray(jax.jit(jax.vmap(solve))(w0)), loop, atol=1e-5)
    np.testing.assert_allclose(np.asarray(solve(w0)), loop, atol=1e-5)
    assert np.abs(loop - np.asarray(w0)).max() > 0.05


def test_ns2d_solutions_are_seeded_resolved_and_validated():
    a = F.navier_stokes2d_solutions(2, 16, key=jax.random.key(5))
    b = F.navier_stokes2d_solutions(2, 16, key=jax.random.key(5))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert a.shape == (2, 16, 16) and bool(jnp.all(jnp.isfinite(a))) and float(jnp.std(a)) > 0.3
    # The default solver grid (2x) is fine enough: a 4x finer solve with half the time step
    # agrees at the output points (measured ~1e-3 of the field's scale).
    fine = F.navier_stokes2d_solutions(2, 16, key=jax.random.key(5), upsample=4)
    np.testing.assert_allclose(np.asarray(a), np.asarray(fine), atol=5e-3 * float(jnp.abs(a).max()))
    w = jnp.zeros((16, 16))
    for kwargs, msg in [
        (dict(w0=jnp.zeros((16, 12))), r"w0 must be \[\.\.\., grid, grid\].*\(16, 12\)"),
        (dict(w0=jnp.zeros((15, 15))), "w0 grid=15"),
        (dict(w0=jnp.zeros((6, 6))), "w0 grid=6"),
        (dict(w0=w.at[3, 4].set(jnp.nan)), "w0 has non-finite values.*nan"),
        (dict(w0=w, viscosity=-0.1), "viscosity=-0.1"),
        (dict(w0=w, viscosity=float("nan")), "viscosity=nan"),
        (dict(w0=w, t_final=0.0), "t_final=0.0"),
        (dict(w0=w, steps=0), "steps=0"),
        (dict(w0=w, forcing=jnp.zeros((8, 8))), r"forcing must be \[16, 16\]"),
        (dict(w0=w, forcing="shear"), "forcing='shear'"),
    ]:
        with pytest.raises(ValueError, match=msg):
            F.navier_stokes2d_solve(**kwargs)
    with pytest.raises(ValueError, match="n_grid=15"):
        F.navier_stokes2d_solutions(2, 15, key=jax.random.key(0))
