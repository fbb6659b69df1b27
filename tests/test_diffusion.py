"""Tests of the diffusion core: schedules, parametrisations, exact mixture, the denoiser term and
the DDIM / DPM-Solver++(2M) diffrax solvers (convergence orders against the closed-form Gaussian
flow), the probability-flow ODE and evaluation counting."""

from __future__ import annotations

import itertools

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import tolerance

from jaxpapers.core.diffusion import (
    DDIM,
    CountingDenoiser,
    DenoiserTerm,
    DPMSolverPP2M,
    GaussianMixture,
    VPSchedule,
    clip_x0,
    eps_to_score,
    eps_to_x0,
    grid_mixture,
    probability_flow_ode,
    sample_ddim,
    score_to_eps,
    solve_diffusion,
    time_grid,
    tweedie_denoise,
    x0_to_eps,
    x0_to_score,
    zero_count,
)
from jaxpapers.core.diffusion._nfe import count_trace_calls


@pytest.mark.parametrize("kind", ["linear", "cosine"])
def test_schedule_identities(kind, x64):
    sch = VPSchedule(kind)
    t = jnp.linspace(0.01, 0.95, 17)
    coefficients = jax.jit(lambda u: (sch.alpha(u), sch.sigma(u), sch.beta(u), sch.log_snr(u)))
    a, s, beta, lsnr = coefficients(t)
    np.testing.assert_allclose(a**2 + s**2, 1.0, atol=1e-12)
    beta_ad = jax.jit(jax.vmap(jax.grad(lambda u: -sch.log_alpha_bar(u))))(t)
    np.testing.assert_allclose(beta, beta_ad, rtol=1e-9)
    np.testing.assert_allclose(lsnr, np.log(a / s), rtol=1e-9)
    assert float(sch.alpha(0.0)) == 1.0 and float(sch.log_snr(0.0)) == np.inf
    assert np.all(np.diff(np.asarray(a)) < 0)


def test_linear_schedule_closed_form(x64):
    sch = VPSchedule("linear", beta_min=0.1, beta_max=20.0)
    t = 0.7
    np.testing.assert_allclose(sch.alpha_bar(t), np.exp(-0.1 * t - 0.5 * 19.9 * t * t), rtol=1e-12)


def test_schedule_bad_input():
    with pytest.raises(ValueError, match="kind='quadratic'"):
        VPSchedule("quadratic")
    with pytest.raises(ValueError, match="beta_min"):
        VPSchedule(beta_min=5.0, beta_max=1.0)
    for n in (0, -3, 2.5):
        with pytest.raises(ValueError, match="num_steps"):
            time_grid(n)
    with pytest.raises(ValueError, match="t_min"):
        time_grid(4, t_max=0.5, t_min=0.6)


def test_parametrisation_round_trips(rng, x64):
    x, x0 = rng.normal(size=(2, 5))
    a, s = 0.6, 0.8
    eps = x0_to_eps(x, x0, a, s)
    np.testing.assert_allclose(eps_to_x0(x, eps, a, s), x0, rtol=1e-12)
    np.testing.assert_allclose(score_to_eps(eps_to_score(eps, s), s), eps, rtol=1e-12)
    np.testing.assert_allclose(x0_to_score(x, x0, a, s), -eps / s, rtol=1e-12)
    np.testing.assert_allclose(tweedie_denoise(x, -eps / s, a, s), x0, rtol=1e-12)


def test_clip_x0_against_float64_numpy(rng, x64):
    sch = VPSchedule()
    x, eps = rng.normal(size=(2, 64)) * 2.0
    t = 0.4
    out = clip_x0(lambda y, tt: eps, sch, 1.0)(jnp.asarray(x), jnp.asarray(t))
    a, s = float(sch.alpha(t)), float(sch.sigma(t))
    x0 = (x - s * eps) / a
    expected = (x - a * np.clip(x0, -1.0, 1.0)) / s
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    inside = np.abs(x0) <= 1.0
    assert 0 < inside.sum() < inside.size  # both branches exercised
    np.testing.assert_allclose(np.asarray(out)[inside], eps[inside], rtol=1e-12)
    # DDIM's last step lands on its x0 estimate: a clipped sampler ends inside the box.
    big = lambda y, tt: 5.0 * y
    final = sample_ddim(
        CountingDenoiser(clip_x0(big, sch, 0.5)), sch, (3, 4), key=jax.random.key(0), num_steps=3
    ).x
    assert float(jnp.abs(final).max()) <= 0.5 * (1 + 1e-6)  # float32 round trip via eps
    with pytest.raises(ValueError, match="bound=0"):
        clip_x0(big, sch, 0)


def test_mixture_score_matches_autodiff(key, x64):
    g = grid_mixture(3, std=0.3, key=key)
    sch = VPSchedule()
    xs = jax.random.normal(jax.random.key(1), (6, 3)) * 2

    @jax.jit
    def both(t):
        a, s = sch.alpha(t), sch.sigma(t)
        auto = jax.vmap(jax.grad(lambda x: g.log_prob_noised(x, a, s)))(xs)
        return jax.vmap(lambda x: g.score(x, a, s))(xs), auto

    for t in (0.05, 0.4, 0.9):
        exact, auto = both(t)
        np.testing.assert_allclose(exact, auto, rtol=1e-9, atol=1e-12)


def test_mixture_tweedie_is_posterior_mean(x64):
    """For one Gaussian N(mu, v I), E[x0 | xt] = mu + a v (xt - a mu) / (a^2 v + s^2)."""
    mu, v = jnp.array([0.5, -1.0]), 0.3
    g = GaussianMixture(mu[None], jnp.ones(1), v)
    sch = VPSchedule()
    t, x = 0.3, jnp.array([0.2, 0.9])
    a, s = sch.alpha(t), sch.sigma(t)
    x0 = tweedie_denoise(x, g.score(x, a, s), a, s)
    np.testing.assert_allclose(x0, mu + a * v * (x - a * mu) / (a**2 * v + s**2), rtol=1e-12)


def test_mixture_posterior_against_importance_sampling(x64):
    """Closed-form posterior moments vs self-normalised importance sampling from the prior."""
    g = GaussianMixture(
        jnp.array([[-1.0, 0.0], [1.0, 0.5], [0.0, -1.5]]), jnp.array([1, 2, 1.0]), 0.2
    )
    a_mat = jnp.array([[1.0, 0.5]])
    y, sigma_y = jnp.array([0.7]), 0.4
    post = g.posterior(a_mat, y, sigma_y)

    @jax.jit
    def moments():
        xs = g.sample(jax.random.key(0), 200_000)
        logw = -0.5 * jnp.sum((y[None, :] - xs @ a_mat.T) ** 2, -1) / sigma_y**2
        w = jax.nn.softmax(logw)
        is_mean = w @ xs
        is_cov = (xs - is_mean[None, :]).T @ ((xs - is_mean[None, :]) * w[:, None])
        exact = post.sample(jax.random.key(1), 200_000)
        return is_mean, is_cov, jnp.cov(exact.T)

    is_mean, is_cov, exact_cov = moments()
    np.testing.assert_allclose(post.mean(), is_mean, atol=0.01)
    np.testing.assert_allclose(exact_cov, is_cov, atol=0.01)
    # The posterior weights are not the prior's: the measurement favours some components.
    assert not np.allclose(np.exp(post.log_weights), np.exp(g.log_weights), atol=0.05)


def test_mixture_posterior_in_high_dimension_matches_dense_float64():
    """The Woodbury posterior of the d = 800 test bed vs a dense NumPy float64 computation:
    per-component Gaussian posterior (precision I / v + A^T A / s^2) and the evidence weights
    N(y; A mu_k, v A A^T + s^2 I)."""
    d, m, sigma_y = 800, 2, 0.05
    g = grid_mixture(d, key=jax.random.key(1234))
    rng = np.random.default_rng(0)
    a_mat = rng.standard_normal((m, d))
    y = rng.standard_normal(m)
    with jax.enable_x64(True):
        post = g.posterior(jnp.asarray(a_mat), jnp.asarray(y), sigma_y)
        means, logw, chol = (
            np.asarray(v, np.float64)
            for v in jax.device_get((post.means, post.log_weights, post.chol))
        )
    mu = np.asarray(g.means, np.float64)
    v = float(g.var)
    cov = np.linalg.inv(np.eye(d) / v + a_mat.T @ a_mat / sigma_y**2)
    np.testing.assert_allclose(chol @ chol.T, cov, atol=1e-9)
    ref_means = (cov @ (mu.T / v + (a_mat.T @ y / sigma_y**2)[:, None])).T
    np.testing.assert_allclose(means, ref_means, atol=1e-7)
    s_cov = v * a_mat @ a_mat.T + sigma_y**2 * np.eye(m)
    r = y[None, :] - mu @ a_mat.T
    ll = -0.5 * np.einsum("ki,ij,kj->k", r, np.linalg.inv(s_cov), r)
    ref = np.log(np.asarray(jnp.exp(g.log_weights), np.float64)) + ll
    ref -= np.logaddexp.reduce(ref)
    np.testing.assert_allclose(logw, ref, atol=1e-6)


def test_mixture_bad_input():
    with pytest.raises(ValueError, match="means must be"):
        GaussianMixture(jnp.zeros(3), jnp.ones(3), 1.0)
    g = grid_mixture(4)
    with pytest.raises(ValueError, match="matrix must be"):
        g.posterior(jnp.zeros((2, 3)), jnp.zeros(2), 0.1)


def _np_gmm_eps(x, t, means, logw, var):
    """Float64 NumPy epsilon of the noised mixture (independent of the JAX code)."""
    la = -0.1 * t - 0.5 * 19.9 * t * t
    a, s = np.exp(0.5 * la), np.sqrt(1 - np.exp(la))
    v = a * a * var + s * s
    diff = a * means - x[None, :]
    lg = logw - 0.5 * np.sum(diff**2, -1) / v
    r = np.exp(lg - lg.max())
    r /= r.sum()
    return -s * (r @ diff) / v, a, s


def test_ddim_through_diffrax_matches_numpy_loop(x64):
    g = grid_mixture(4, std=0.3, key=jax.random.key(2))
    sch = VPSchedule()
    den = CountingDenoiser(lambda x, t: g.eps(x, t, sch))
    key = jax.random.key(5)
    out = jax.jit(lambda: sample_ddim(den, sch, (4,), key=key, num_steps=12, dtype=jnp.float64))()
    x = np.asarray(jax.random.normal(jax.random.split(key)[0], (4,), jnp.float64))
    means, logw, var = np.asarray(g.means), np.asarray(g.log_weights), float(g.var)
    ts = np.linspace(1.0, 0.0, 13)
    for t, t1 in itertools.pairwise(ts):
        eps, a, s = _np_gmm_eps(x, t, means, logw, var)
        x0 = (x - s * eps) / a
        la1 = -0.1 * t1 - 0.5 * 19.9 * t1 * t1
        x = np.exp(0.5 * la1) * x0 + np.sqrt(1 - np.exp(la1)) * eps
    np.testing.assert_allclose(out.x, x, rtol=1e-9, atol=1e-10)
    assert int(out.nfe) == 12


def test_ddpm_is_stochastic_and_counts(key):
    g = grid_mixture(2)
    sch = VPSchedule()
    fn, calls = count_trace_calls(lambda x, t: g.eps(x, t, sch))
    den = CountingDenoiser(fn)
    run = jax.jit(lambda k: sample_ddim(den, sch, (2,), key=k, num_steps=7, eta=1.0))
    a, b = run(key), run(jax.random.key(1))
    jax.effects_barrier()
    assert int(a.nfe) == int(b.nfe) == 7 and len(calls) == 14
    assert not np.allclose(a.x, b.x)


def test_ddim_jit_vmap_equal_loop(key):
    g = grid_mixture(2)
    sch = VPSchedule()
    den = CountingDenoiser(lambda x, t: g.eps(x, t, sch))
    keys = jax.random.split(key, 3)
    run = lambda k: sample_ddim(den, sch, (2,), key=k, num_steps=5)
    batched = jax.jit(jax.vmap(run))(keys)
    single = jax.jit(run)
    for i in range(3):
        np.testing.assert_allclose(batched.x[i], single(keys[i]).x, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(batched.nfe, 5)


@pytest.mark.parametrize("solver", [diffrax.Euler(), diffrax.Heun(), diffrax.Tsit5()])
def test_pf_ode_nfe_is_exact(solver, key):
    g = grid_mixture(2)
    sch = VPSchedule()
    fn, calls = count_trace_calls(lambda x, t: g.eps(x, t, sch))
    out = jax.jit(
        lambda x: probability_flow_ode(CountingDenoiser(fn), sch, x, num_steps=6, solver=solver)
    )(jax.random.normal(key, (2,)))
    jax.effects_barrier()
    assert int(out.nfe) == len(calls)


def test_pf_ode_gaussian_flow_map(x64):
    """For N(mu, v I) the PF-ODE map is affine: x0 = mu + sqrt(v / (a^2 v + s^2)) (x_T - a mu)
    (followed by Tweedie at t_min); compare with Tsit5 at 40 steps."""
    mu, v = jnp.array([1.0, -0.5, 0.25]), 0.2
    g = GaussianMixture(mu[None], jnp.ones(1), v)
    sch = VPSchedule()
    den = CountingDenoiser(lambda x, t: g.eps(x, t, sch))
    x_t = jnp.array([0.3, -1.2, 0.8])
    out = jax.jit(
        lambda: probability_flow_ode(
            den, sch, x_t, num_steps=40, solver=diffrax.Tsit5(), t_min=1e-3
        )
    )()
    a1, s1 = sch.alpha(1.0), sch.sigma(1.0)
    a0, s0 = sch.alpha(1e-3), sch.sigma(1e-3)
    x_tmin = a0 * mu + jnp.sqrt((a0**2 * v + s0**2) / (a1**2 * v + s1**2)) * (x_t - a1 * mu)
    expected = mu + a0 * v * (x_tmin - a0 * mu) / (a0**2 * v + s0**2)
    np.testing.assert_allclose(out.x, expected, rtol=1e-6)
    assert int(out.nfe) == 40 * 6 + 1 + 1


def test_pf_ode_bad_input(key):
    den = CountingDenoiser(lambda x, t: x)
    with pytest.raises(ValueError, match="solver=ImplicitEuler"):
        probability_flow_ode(
            den, VPSchedule(), jnp.zeros(2), num_steps=3, solver=diffrax.ImplicitEuler()
        )
    with pytest.raises(ValueError, match="num_steps=0"):
        probability_flow_ode(den, VPSchedule(), jnp.zeros(2), num_steps=0)
    with pytest.raises(ValueError, match="num_steps=0"):
        sample_ddim(den, VPSchedule(), (2,), key=key, num_steps=0)


def test_counting_denoiser_grad(key):
    """The counted denoiser is differentiable and counts one evaluation per call."""
    den = CountingDenoiser(lambda x, t: jnp.sin(x) * t)
    g, nfe = (
        jax.grad(lambda x: den(x, 0.5, zero_count())[0].sum(), has_aux=False)(jnp.ones(3)),
        den(jnp.ones(3), 0.5, zero_count())[1],
    )
    np.testing.assert_allclose(g, 0.5 * np.cos(1.0), rtol=1e-6)
    assert int(nfe) == 1


# ---- the denoiser term and the diffrax solvers -------------------------------------------------

GAUSS_MU, GAUSS_V = (1.0, -0.5, 0.25), 0.1


def _gaussian_term():
    mu = jnp.asarray(GAUSS_MU)
    g = GaussianMixture(mu[None], jnp.ones(1, mu.dtype), GAUSS_V)
    sch = VPSchedule()
    return DenoiserTerm(lambda x, t: g.eps(x, t, sch), sch), mu


def _gaussian_flow(sch, mu, x_start, t_start, t_end):
    """Closed-form probability-flow map of N(mu, v I): x_t - a_t mu scales by s_t / s_start,
    s_t = sqrt(a_t^2 v + sigma_t^2)."""
    sd = lambda t: jnp.sqrt(sch.alpha(t) ** 2 * GAUSS_V + sch.sigma(t) ** 2)
    return sch.alpha(t_end) * mu + sd(t_end) / sd(t_start) * (x_start - sch.alpha(t_start) * mu)


T_MIN = 0.05
X_T = (0.3, -1.2, 0.8)


def test_term_with_tsit5_is_the_exact_flow(x64):
    """diffrax's own Tsit5 on the term (time tau = -t) reproduces the closed-form flow."""
    term, mu = _gaussian_term()
    x_t = jnp.asarray(X_T)
    sol = jax.jit(
        lambda: diffrax.diffeqsolve(
            term,
            diffrax.Tsit5(),
            -1.0,
            -T_MIN,
            None,
            x_t,
            stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-10),
        )
    )()
    exact = _gaussian_flow(term.schedule, mu, x_t, 1.0, T_MIN)
    np.testing.assert_allclose(sol.ys[0], exact, rtol=1e-8, atol=1e-9)


def _fitted_order(errors, steps):
    return -np.polyfit(np.log(steps), np.log(errors), 1)[0]


def _log_snr_grid(sch, n):
    """n steps uniform in log-SNR from t = 1 to T_MIN (the linear schedule inverted in closed
    form: log alpha_bar = -softplus(-2 lambda) = -b0 t - (b1 - b0) t^2 / 2)."""
    lam = jnp.linspace(sch.log_snr(1.0), sch.log_snr(T_MIN), n + 1)
    la = -jax.nn.softplus(-2.0 * lam)
    a, b0 = 0.5 * (sch.beta_max - sch.beta_min), sch.beta_min
    ts = (-b0 + jnp.sqrt(b0**2 - 4.0 * a * la)) / (2.0 * a)
    return ts.at[0].set(1.0).at[-1].set(T_MIN)


def test_convergence_orders_ddim_1_and_2m_2(x64):
    """Error to the exact flow (diffrax Tsit5, checked against the closed form above) over
    N = 32..256 steps uniform in log-SNR: DDIM's fitted order ~ 1, DPM-Solver++(2M) ~ 2 (the
    measured local slopes of 2M are 2.8, 2.6, 2.4, 2.25: it approaches 2 from above)."""
    term, mu = _gaussian_term()
    x_t = jnp.asarray(X_T)
    exact = _gaussian_flow(term.schedule, mu, x_t, 1.0, T_MIN)
    steps = (32, 64, 128, 256)

    def err(solver, n):
        ts = _log_snr_grid(term.schedule, n)
        return jnp.linalg.norm(solve_diffusion(term, solver, x_t, ts).x - exact)

    run = jax.jit(lambda: [[err(s, n) for n in steps] for s in (DDIM(), DPMSolverPP2M())])
    e_ddim, e_2m = (np.asarray(e) for e in run())
    assert 0.9 < _fitted_order(e_ddim, steps) < 1.1
    assert 1.9 < _fitted_order(e_2m, steps) < 2.6
    assert np.all(e_2m < e_ddim / 30)


def test_2m_strength_zero_is_ddim_bit_for_bit():
    term, _ = _gaussian_term()
    ts = jnp.linspace(1.0, 0.0, 9)
    x = jnp.asarray(X_T, jnp.float32)
    run = jax.jit(
        lambda: (
            solve_diffusion(term, DDIM(), x, ts),
            solve_diffusion(term, DPMSolverPP2M(strength=0.0), x, ts),
        )
    )
    a, b = run()
    np.testing.assert_array_equal(a.x, b.x)
    assert int(a.nfe) == int(b.nfe) == 8


def test_saveat_trajectory_and_progress_meter():
    """save_ts returns the states at grid times (equal to solving up to them); a tqdm progress
    meter runs through diffrax unchanged."""
    term, _ = _gaussian_term()
    ts = jnp.linspace(1.0, 0.0, 9)
    x = jnp.asarray(X_T, jnp.float32)
    full = solve_diffusion(
        term,
        DPMSolverPP2M(),
        x,
        ts,
        save_ts=ts[jnp.array([2, 5])],
        progress_meter=diffrax.TqdmProgressMeter(refresh_steps=4),
    )
    for j, i in enumerate((2, 5)):
        part = solve_diffusion(term, DPMSolverPP2M(), x, ts[: i + 1])
        np.testing.assert_allclose(full.ys[j], part.x, **tolerance(jnp.float32, 10.0))
    np.testing.assert_allclose(full.ts, ts[jnp.array([2, 5])])


def test_gradient_through_sampler_matches_finite_differences(x64):
    """Reverse-mode through diffeqsolve (RecursiveCheckpointAdjoint) vs central differences."""
    term, _ = _gaussian_term()
    ts = jnp.linspace(1.0, T_MIN, 7)

    def f(x):
        return jnp.sum(solve_diffusion(term, DPMSolverPP2M(), x, ts).x ** 2)

    x = jnp.asarray(X_T)
    g = jax.jit(jax.grad(f))(x)
    fd = jax.jit(jax.vmap(lambda e: (f(x + 1e-6 * e) - f(x - 1e-6 * e)) / 2e-6))(jnp.eye(3))
    np.testing.assert_allclose(g, fd, rtol=1e-6)


def test_ddpm_solver_key_in_state_is_reproducible(key):
    term, _ = _gaussian_term()
    ts = jnp.linspace(1.0, 0.0, 6)
    x = jnp.zeros(3)
    run = jax.jit(lambda k: solve_diffusion(term, DDIM(1.0, key=k), x, ts).x)
    a, b, c = run(key), run(key), run(jax.random.key(7))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_nonfinite_state_stops_the_solve():
    calls = []

    def bad(x, t):
        jax.debug.callback(lambda: calls.append(1))
        return jnp.where(t < 0.5, jnp.nan, 0.1) * x

    term = DenoiserTerm(bad, VPSchedule())
    ts = jnp.linspace(1.0, 0.0, 11)
    sol = jax.jit(lambda: solve_diffusion(term, DDIM(), jnp.ones(2), ts, throw=False))()
    jax.effects_barrier()
    assert sol.result != diffrax.RESULTS.successful
    assert len(calls) < 10  # stopped at the first non-finite step, not run to the end
    with pytest.raises(Exception, match="(?i)nonfinite"):  # opt-in: the default is throw=False
        solve_diffusion(term, DDIM(), jnp.ones(2), ts, throw=True)


def test_term_bad_input():
    with pytest.raises(ValueError, match=r"denoiser returned shape \(3,\) for an input of shape"):
        solve_diffusion(
            DenoiserTerm(lambda x, t: x[:3], VPSchedule()),
            DDIM(),
            jnp.ones(4),
            jnp.linspace(1.0, 0.0, 3),
        )
    with pytest.raises(TypeError, match="denoiser is a int"):
        DenoiserTerm(3, VPSchedule())
    with pytest.raises(TypeError, match="term is a"):
        solve_diffusion(diffrax.ODETerm(lambda t, y, a: y), DDIM(), jnp.ones(2), jnp.ones(2))
    with pytest.raises(TypeError, match="solver is a Tsit5"):
        solve_diffusion(
            DenoiserTerm(lambda x, t: x, VPSchedule()), diffrax.Tsit5(), jnp.ones(2), jnp.ones(2)
        )
    with pytest.raises(ValueError, match="ts must be 1-D"):
        solve_diffusion(
            DenoiserTerm(lambda x, t: x, VPSchedule()), DDIM(), jnp.ones(2), jnp.ones(1)
        )


def test_sample_ddim_eager_calls_do_not_retrace(key):
    traces = []

    def eps(x, t):
        traces.append(1)  # runs at trace time only
        return 0.1 * x

    den = CountingDenoiser(eps)
    sample_ddim(den, VPSchedule(), (2,), key=key, num_steps=4)
    n = len(traces)
    sample_ddim(den, VPSchedule(), (2,), key=jax.random.key(3), num_steps=4)
    assert len(traces) == n


# ---- no host callbacks: the unchecked grid controller --------------------------------------------


def _host_callbacks(lowered) -> list[str]:
    """The host-callback custom calls (``xla_python_cpu_callback``, ``xla_ffi_python_cpu_callback``
    and the GPU/TPU variants: every target names a callback) of a lowered program."""
    text = lowered.as_text()
    return [line for line in text.splitlines() if "callback" in line]


def test_default_solves_hold_no_host_callback(key):
    """sample_ddim, solve_diffusion and the PF-ODE lower to programs without host callbacks
    (diffrax's StepTo checks its grid with equinox.error_if, a host callback, which made such a
    program run synchronously); solve_diffusion(throw=True) keeps diffrax's checked path."""
    term, _ = _gaussian_term()
    sch = term.schedule
    den = CountingDenoiser(lambda x, t: 0.1 * x)
    ts = jnp.linspace(1.0, 0.0, 6)
    x = jnp.zeros(3)
    programs = {
        "sample_ddim": (lambda k: sample_ddim(den, sch, (3,), key=k, num_steps=5, eta=1.0), key),
        "ddim": (lambda y: solve_diffusion(term, DDIM(1.0, key=key), y, ts), x),
        "dpm2m": (lambda y: solve_diffusion(term, DPMSolverPP2M(), y, ts), x),
        "pf_ode": (lambda y: probability_flow_ode(den, sch, y, num_steps=4), x),
        "ddim_traced_grid": (lambda g: solve_diffusion(term, DDIM(), x, g), ts),
    }
    for name, (fn, arg) in programs.items():
        assert _host_callbacks(jax.jit(fn).lower(arg)) == [], name
    checked = jax.jit(lambda y: solve_diffusion(term, DDIM(), y, ts, throw=True)).lower(x)
    assert _host_callbacks(checked)  # the detector sees diffrax's error_if


@pytest.mark.parametrize("solver", ["ddpm", "dpm2m"])
def test_unchecked_grid_is_bit_identical_to_diffrax_step_to(solver, key):
    """The default (UncheckedStepTo, no host callbacks) and diffrax's own StepTo path
    (throw=True) give the same samples, trajectories and counts, bit for bit."""
    term, _ = _gaussian_term()
    ts = jnp.linspace(1.0, 0.0, 9)
    save_ts = ts[jnp.array([2, 5])]
    x = jnp.asarray(X_T, jnp.float32)
    make = {
        "ddpm": lambda: DDIM(1.0, key=key),
        "dpm2m": lambda: DPMSolverPP2M(eta=0.5, key=key),
    }[solver]

    def run(throw):
        return jax.jit(
            lambda y: solve_diffusion(term, make(), y, ts, save_ts=save_ts, throw=throw)
        )(x)

    new, old = run(False), run(True)
    for a, b in ((new.x, old.x), (new.ys, old.ys), (new.nfe, old.nfe)):
        np.testing.assert_array_equal(a, b)
    assert bool(jnp.all(jnp.isfinite(new.x))) and int(new.nfe) == 8


def test_sample_ddim_is_bit_identical_to_diffrax_step_to(key):
    """sample_ddim (default path) equals its program run on diffrax's StepTo (the same key
    split and initial state), to the last bit with XLA:CPU's fusion emitters on (its default);
    the tests compile with them off, where sample_ddim's NaN mask changes how XLA fuses one
    float32 operation (1 ulp). A standard diffrax solver stepping with UncheckedStepTo equals
    diffrax.StepTo bit for bit."""
    from jaxpapers.core.diffusion._solver import UncheckedStepTo

    term, _ = _gaussian_term()
    sch = term.schedule
    den = term.denoiser

    def reference(k):
        k0, k1 = jax.random.split(k)
        x_init = jax.random.normal(k0, (3,), jnp.float32)
        return solve_diffusion(term, DDIM(1.0, key=k1), x_init, time_grid(7), throw=True)

    new = jax.jit(lambda k: sample_ddim(den, sch, (3,), key=k, num_steps=7, eta=1.0))(key)
    old = jax.jit(reference)(key)
    np.testing.assert_array_max_ulp(new.x, old.x, maxulp=1)
    assert int(new.nfe) == int(old.nfe) == 7

    taus = -jnp.linspace(1.0, T_MIN, 6)

    def heun(controller):
        sol = diffrax.diffeqsolve(
            term,
            diffrax.Heun(),
            taus[0],
            taus[-1],
            None,
            jnp.asarray(X_T),
            stepsize_controller=controller(ts=taus),
            max_steps=5,
            throw=False,
        )
        return sol.ys, sol.stats["num_steps"]

    (ys_new, n_new), (ys_old, n_old) = (
        jax.jit(lambda c=c: heun(c))() for c in (UncheckedStepTo, diffrax.StepTo)
    )
    np.testing.assert_array_equal(ys_new, ys_old)
    assert int(n_new) == int(n_old) == 5


def test_bad_concrete_grid_raises_value_error():
    """A concrete grid is checked in Python (before tracing; also when a jitted function closes
    over it); a traced grid is not (documented), unless throw=True checks it at run time."""
    from jaxpapers.core.diffusion import check_time_grid

    term = DenoiserTerm(lambda x, t: 0.1 * x, VPSchedule())
    x = jnp.ones(2)
    for bad in ([1.0, 0.5, 0.5, 0.0], [0.0, 0.5, 1.0], [1.0, float("nan"), 0.0]):
        with pytest.raises(ValueError, match="ts must be strictly decreasing"):
            solve_diffusion(term, DDIM(), x, jnp.asarray(bad))
        with pytest.raises(ValueError, match="ts must be strictly decreasing"):
            check_time_grid(np.asarray(bad))
        with pytest.raises(ValueError, match="ts must be strictly decreasing"):
            jax.jit(lambda y, g=jnp.asarray(bad): solve_diffusion(term, DDIM(), y, g)).lower(x)
    with pytest.raises(ValueError, match="ts must be 1-D"):
        check_time_grid(jnp.ones((2, 2)))
    # A sampler's own grid is checked at trace time, in its dtype (300 steps collapse in bf16).
    den = CountingDenoiser(lambda y, t: 0.1 * y)
    with pytest.raises(ValueError, match="ts must be strictly decreasing.*bfloat16"):
        jax.jit(
            lambda k: sample_ddim(den, VPSchedule(), (2,), key=k, num_steps=300, dtype=jnp.bfloat16)
        ).lower(jax.random.key(0))
    with pytest.raises(ValueError, match="ts must be strictly decreasing.*bfloat16"):
        probability_flow_ode(den, VPSchedule(), jnp.ones(2, jnp.bfloat16), num_steps=300)
    np.testing.assert_array_equal(check_time_grid([1.0, 0.0]), [1.0, 0.0])
    bad = jnp.array([1.0, 0.5, 0.5, 0.0])
    jax.jit(lambda g: solve_diffusion(term, DDIM(), x, g).x)(bad)  # traced: unchecked, no raise
    checked = jax.jit(lambda g: solve_diffusion(term, DDIM(), x, g, throw=True).x)
    with pytest.raises(Exception, match="strictly increasing"):
        checked(bad).block_until_ready()


def test_sample_ddim_marks_a_failed_solve_with_nan(key):
    """sample_ddim never raises at run time: a non-finite state stops the solve and the sample is
    all NaN, with the evaluations made counted."""

    def bad(x, t):
        return jnp.where(t < 0.5, jnp.nan, 0.1) * x

    out = jax.jit(
        lambda k: sample_ddim(CountingDenoiser(bad), VPSchedule(), (4,), key=k, num_steps=10)
    )(key)
    assert bool(jnp.all(jnp.isnan(out.x)))
    assert int(out.nfe) == 7  # t = 1.0, ..., 0.4: the first step to fail evaluates at t = 0.4


def test_sample_ddim_checks_its_grid_on_the_host(monkeypatch):
    """The grid check runs while a caller is traced; an eager JAX computation there (the old
    ``jax.ensure_compile_time_eval`` check) waits for every program dispatched before it, so no
    compile overlapped a run. The check is NumPy only, and still catches a grid that collapses in
    bfloat16 and bad end times."""
    import jaxpapers.core.diffusion._samplers as samplers

    def refuse(*args, **kwargs):
        raise AssertionError("the grid check ran a JAX computation")

    monkeypatch.setattr(samplers, "time_grid", refuse)
    monkeypatch.setattr(samplers, "jax", None)
    monkeypatch.setattr(samplers, "jnp", None)
    samplers._check_grid(64, np.float32, t_max=1.0)
    with pytest.raises(ValueError, match="strictly decreasing"):
        samplers._check_grid(4000, jnp.bfloat16, t_max=1.0)
    with pytest.raises(ValueError, match="t_max"):
        samplers._check_grid(8, np.float32, t_max=1.5)
