"""Tests of P07 LAMP: operators, DPS / DiffPIR / DDRM backbones, the LAMP plug-in, and the SSIM
of the digits experiments."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.signal import convolve2d

from jaxpapers.core.diffusion import (
    DenoiserTerm,
    VPSchedule,
    grid_mixture,
    sample_ddim,
)
from jaxpapers.lamp import (
    DDRM,
    DPS,
    AveragePool,
    DiffPIR,
    GaussianBlur,
    Inpainting,
    LampMemory,
    MatrixOperator,
    lagged_coefficient,
    lamp,
    measure,
    sample_posterior,
)
from jaxpapers.lamp._image_metrics import gaussian_window, ssim

SCH = VPSchedule()


def _mixture_problem(d=4, m=2, sigma_y=0.1, seed=0):
    g = grid_mixture(d, std=0.3, key=jax.random.key(seed))
    den = DenoiserTerm(lambda x, t: g.eps(x, t, SCH), SCH)
    a_mat = jax.random.normal(jax.random.key(seed + 1), (m, d))
    op = MatrixOperator(a_mat)
    y = measure(op, g.sample(jax.random.key(seed + 2), 1)[0], sigma_y, key=jax.random.key(9))
    return g, den, op, y


def _backbones(den, op, sigma_y):
    return {
        "dps": DPS(op, sigma_y, zeta=0.3),
        "diffpir": DiffPIR(op, sigma_y, lam=2.0, zeta=0.3),
        "ddrm": DDRM(op, sigma_y),
    }


# ---- operators ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op",
    [
        MatrixOperator(np.random.default_rng(0).normal(size=(3, 6)).astype(np.float32)),
        Inpainting(np.random.default_rng(1).random((6, 6)) > 0.4),
        GaussianBlur((8, 8), 1.2),
        AveragePool((8, 8), 2),
    ],
    ids=["matrix", "inpaint", "blur", "pool"],
)
def test_operator_svd_and_adjoint(op, rng):
    x = jnp.asarray(rng.normal(size=op.in_shape), jnp.float32)
    y = jnp.asarray(rng.normal(size=op.out_shape), jnp.float32)
    np.testing.assert_allclose(op.matrix() @ x.reshape(-1), op(x).reshape(-1), atol=2e-5)
    np.testing.assert_allclose(jnp.vdot(op(x), y), jnp.vdot(x, op.adjoint(y)), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(op.vt @ op.vt.T, np.eye(op.vt.shape[0]), atol=1e-5)


def test_operator_closed_forms():
    x = jnp.arange(16.0).reshape(4, 4)
    np.testing.assert_allclose(AveragePool((4, 4), 2)(x), [[2.5, 4.5], [10.5, 12.5]])
    mask = np.zeros((4, 4), bool)
    mask[1, 2] = mask[3, 0] = True
    np.testing.assert_array_equal(Inpainting(mask)(x), [6.0, 12.0])
    # A periodic blur keeps the mean and smooths a delta symmetrically.
    delta = jnp.zeros((8, 8)).at[0, 0].set(1.0)
    b = GaussianBlur((8, 8), 1.0)(delta)
    np.testing.assert_allclose(b.sum(), 1.0, rtol=1e-5)
    np.testing.assert_allclose(b[0, 1], b[1, 0], rtol=1e-5)
    np.testing.assert_allclose(b[0, 1], b[0, 7], rtol=1e-5)


def test_measure_noise_level(key):
    op = MatrixOperator(jnp.eye(400))
    y = measure(op, jnp.ones(400), 0.3, key=key)
    np.testing.assert_allclose(jnp.std(y), 0.3, rtol=0.15)
    np.testing.assert_allclose(jnp.mean(y), 1.0, atol=0.05)


# ---- bad input --------------------------------------------------------------------------------


def test_bad_inputs(key):
    _g, den, op, y = _mixture_problem()
    with pytest.raises(ValueError, match=r"sigma_y=-0.1"):
        DiffPIR(op, -0.1)
    with pytest.raises(ValueError, match=r"sigma_y=-1"):
        measure(op, jnp.zeros(4), -1, key=key)
    bb = DDRM(op, 0.1)
    with pytest.raises(ValueError, match=r"y has shape \(3,\).*\(2,\)"):
        sample_posterior(den, bb, jnp.zeros(3), key=key, num_steps=5)
    with pytest.raises(ValueError, match=r"x has shape \(5,\).*expects \(4,\)"):
        measure(op, jnp.zeros(5), 0.1, key=key)
    for n in (0, -2, 3.0):
        with pytest.raises(ValueError, match="num_steps"):
            sample_posterior(den, lamp(bb), y, key=key, num_steps=n)
    with pytest.raises(ValueError, match="lag='previous'"):
        lamp(bb, lag="previous")
    with pytest.raises(TypeError, match="backbone is a str"):
        lamp("ddrm")
    with pytest.raises(TypeError, match="term is a CountingDenoiser"):
        sample_posterior(den.denoiser, bb, y, key=key, num_steps=5)
    with pytest.raises(TypeError, match="sampler is a str"):
        sample_posterior(den, "ddrm", y, key=key, num_steps=5)
    with pytest.raises(TypeError, match="operator is a ndarray"):
        DDRM(np.zeros((2, 4)), 0.1)
    with pytest.raises(ValueError, match=r"y of shape \(2,\) holds 1 non-finite"):
        sample_posterior(den, lamp(bb), y.at[0].set(jnp.nan), key=key, num_steps=5)
    bad = DenoiserTerm(lambda x, t: x[:2], SCH)
    with pytest.raises(ValueError, match=r"denoiser returned shape \(2,\) for an input of shape"):
        sample_posterior(bad, lamp(bb), y, key=key, num_steps=5)
    with pytest.raises(ValueError, match="matrix must be 2-D"):
        MatrixOperator(jnp.zeros(3))
    with pytest.raises(ValueError, match="multiples of factor"):
        AveragePool((5, 4), 2)


# ---- reductions --------------------------------------------------------------------------------


def test_samplers_reduce_to_unconditional_when_a_is_zero(key):
    g = grid_mixture(3, std=0.3)
    den = DenoiserTerm(lambda x, t: g.eps(x, t, SCH), SCH)
    op = MatrixOperator(jnp.zeros((2, 3)))
    y = jnp.zeros(2)
    ddim = jax.jit(lambda e: sample_ddim(den.denoiser, SCH, (3,), key=key, num_steps=8, eta=e).x)
    ref0, ref1 = ddim(0.0), ddim(1.0)
    cases = {
        "dps": (DPS(op, 0.1, zeta=1.0, eta=1.0), ref1),
        "diffpir": (DiffPIR(op, 0.1, zeta=0.0), ref0),
        "ddrm": (DDRM(op, 0.1, eta=0.0), ref0),
    }
    for name, (bb, ref) in cases.items():
        out = jax.jit(lambda b=bb: sample_posterior(den, b, y, key=key, num_steps=8))()
        np.testing.assert_allclose(out.x, ref, rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("name", ["dps", "diffpir", "ddrm"])
def test_lamp_switched_off_is_backbone_bit_for_bit(name, key):
    """Strength 0 is the backbone: one step run eagerly (every operation on its own) is bit for
    bit the backbone's step, with a previous estimate in memory; the compiled samplers agree to
    float32 round-off (the tests compile with XLA's fusion emitters off, under which XLA may fuse
    the two programs' arithmetic differently), count the same evaluations, and strength 1
    differs."""
    _, den, op, y = _mixture_problem()
    bb = _backbones(den, op, 0.1)[name]
    x, t, t1 = jnp.array([0.3, -0.2, 1.0, 0.5]), jnp.asarray(0.5), jnp.asarray(0.45)
    memory = LampMemory(jnp.array([0.1, 0.4, -0.3, 0.2]), jnp.asarray(0.55), jnp.ones((), bool))
    n0 = jnp.zeros((), jnp.int32)
    step_base, _, _ = bb.transition(den, x, t, t1, y, None, key, n0)
    step_off, _, _ = lamp(bb, 0.0).transition(den, x, t, t1, y, memory, key, n0)
    step_on, _, _ = lamp(bb, 1.0).transition(den, x, t, t1, y, memory, key, n0)
    np.testing.assert_array_equal(np.asarray(step_off), np.asarray(step_base))
    assert not np.allclose(step_on, step_base)
    keys = jax.random.split(key, 4)
    base = jax.jit(jax.vmap(lambda k: sample_posterior(den, bb, y, key=k, num_steps=9)))(keys)
    run = jax.jit(
        lambda s: jax.vmap(lambda k: sample_posterior(den, lamp(bb, s), y, key=k, num_steps=9))(
            keys
        )
    )
    off, on = run(0.0), run(1.0)
    np.testing.assert_allclose(off.x, base.x, rtol=1e-5, atol=1e-6)
    assert not np.allclose(on.x, base.x)
    np.testing.assert_array_equal(base.nfe, 9)
    np.testing.assert_array_equal(on.nfe, base.nfe)


def test_lamp_unconditional_is_dpm_solver_pp_2m(x64, key):
    """A = 0 and deterministic DiffPIR: LAMP is DPM-Solver++(2M); compare with a float64 loop."""
    g = grid_mixture(3, std=0.3, key=jax.random.key(4))
    den = DenoiserTerm(lambda x, t: g.eps(x, t, SCH), SCH)
    op = MatrixOperator(jnp.zeros((1, 3)))
    bb = DiffPIR(op, 0.1, zeta=0.0)
    out = jax.jit(lambda: sample_posterior(den, lamp(bb), jnp.zeros(1), key=key, num_steps=10))()
    x = np.asarray(jax.random.normal(jax.random.split(key)[0], (3,), jnp.float64))
    ts = np.linspace(1.0, 0.0, 11)
    lam = lambda t: (
        np.inf
        if t == 0
        else 0.5 * np.log(np.exp(SCH.log_alpha_bar(t)) / -np.expm1(SCH.log_alpha_bar(t)))
    )
    prev = None
    for i, (t, t1) in enumerate(itertools.pairwise(ts)):
        a, s = float(SCH.alpha(t)), float(SCH.sigma(t))
        a1, s1 = float(SCH.alpha(t1)), float(SCH.sigma(t1))
        eps = np.asarray(g.eps(jnp.asarray(x), t, SCH))
        d0 = (x - s * eps) / a
        h = lam(t1) - lam(t)
        if prev is None or not np.isfinite(h):
            d = d0
        else:
            r = (lam(t) - lam(ts[i - 1])) / h
            d = (1 + 1 / (2 * r)) * d0 - 1 / (2 * r) * prev
        x = (s1 / s) * x + a1 * (-np.expm1(-h) if np.isfinite(h) else 1.0) * d
        prev = d0
    np.testing.assert_allclose(out.x, x, rtol=1e-8, atol=1e-9)
    # With A = 0 the data-consistent and denoised estimates coincide, so both lags agree.
    den_lag = jax.jit(
        lambda: sample_posterior(den, lamp(bb, lag="denoised"), jnp.zeros(1), key=key, num_steps=10)
    )()
    np.testing.assert_allclose(den_lag.x, x, rtol=1e-8, atol=1e-9)


def test_lagged_coefficient(x64):
    t_prev, t, t1 = 0.6, 0.5, 0.4
    h = SCH.log_snr(t1) - SCH.log_snr(t)
    hp = SCH.log_snr(t) - SCH.log_snr(t_prev)
    np.testing.assert_allclose(lagged_coefficient(SCH, t_prev, t, t1), h / (2 * hp), rtol=1e-12)
    assert float(lagged_coefficient(SCH, 0.2, 0.1, 0.0)) == 0.0


# ---- data steps against independent formulas ----------------------------------------------


def test_diffpir_prox_is_regularised_least_squares(x64):
    _g, den, op, y = _mixture_problem(d=5, m=3)
    bb = DiffPIR(op, 0.2, lam=3.0)
    x, t = jnp.linspace(-1, 1, 5), 0.4
    x0t, x0h, nfe = bb.estimate(den, x, t, 0.3, y, jnp.zeros((), jnp.int32))
    a_mat = np.asarray(op.matrix())
    rho = 3.0 * 0.2**2 / float(SCH.sigma(t) / SCH.alpha(t)) ** 2
    ref = np.linalg.solve(a_mat.T @ a_mat + rho * np.eye(5), a_mat.T @ np.asarray(y) + rho * x0h)
    np.testing.assert_allclose(x0t, ref, rtol=1e-8)
    assert int(nfe) == 1


def test_dps_step_matches_autodiff_of_residual_norm(x64, key):
    g, den, op, y = _mixture_problem(d=4, m=2)
    bb = DPS(op, 0.1, zeta=0.7, eta=1.0)
    x, t, t1 = jnp.array([0.3, -0.2, 1.0, 0.5]), 0.5, 0.45
    out, _, _ = bb.transition(den, x, t, t1, y, None, key, jnp.zeros((), jnp.int32))
    x0_of = lambda z: (z - SCH.sigma(t) * g.eps(z, t, SCH)) / SCH.alpha(t)
    grad = jax.grad(lambda z: jnp.linalg.norm(y - op.matrix() @ x0_of(z)))(x)
    # DDPM step of the unconditional model, drawn with the same key, minus zeta * grad.
    from jaxpapers.core.diffusion import DDIM

    ddpm, _, _ = DDIM(1.0).transition(den, x, t, t1, None, None, key, jnp.zeros((), jnp.int32))
    np.testing.assert_allclose(out, ddpm - 0.7 * grad, rtol=1e-8, atol=1e-10)


def test_ddrm_noiseless_is_data_consistent(key):
    g, den, op, _ = _mixture_problem(d=4, m=2, sigma_y=0.0)
    x_true = g.sample(jax.random.key(3), 1)[0]
    y = measure(op, x_true, 0.0, key=key)
    out = jax.jit(lambda: sample_posterior(den, lamp(DDRM(op, 0.0)), y, key=key, num_steps=12))()
    np.testing.assert_allclose(op(out.x), y, rtol=1e-4, atol=1e-4)


def test_jit_vmap_over_measurements(key):
    g, den, op, _ = _mixture_problem()
    xs = g.sample(jax.random.key(3), 3)
    ys = jax.vmap(lambda x, k: measure(op, x, 0.1, key=k))(xs, jax.random.split(key, 3))
    sampler = lamp(DiffPIR(op, 0.1, zeta=0.2))
    run = lambda y, k: sample_posterior(den, sampler, y, key=k, num_steps=6)
    keys = jax.random.split(jax.random.key(7), 3)
    batched = jax.jit(jax.vmap(run))(ys, keys)
    single = jax.jit(run)
    for i in range(3):
        np.testing.assert_allclose(batched.x[i], single(ys[i], keys[i]).x, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(batched.nfe, 6)
    # The strength is a pytree leaf: vmap over it (strength 0 is the backbone).
    over_s = jax.jit(
        jax.vmap(
            lambda s: (
                sample_posterior(den, lamp(sampler.backbone, s), ys[0], key=keys[0], num_steps=6).x
            )
        )
    )(jnp.array([1.0, 0.0]))
    np.testing.assert_allclose(over_s[0], batched.x[0], rtol=1e-5, atol=1e-5)
    assert not np.allclose(over_s[1], over_s[0])


def test_posterior_mean_close_on_gaussian_prior(key):
    """Single Gaussian prior: DDRM and DiffPIR sample means approach the exact posterior mean."""
    from jaxpapers.core.diffusion import GaussianMixture

    g = GaussianMixture(jnp.zeros((1, 4)), jnp.ones(1), 1.0)
    den = DenoiserTerm(lambda x, t: g.eps(x, t, SCH), SCH)
    op = MatrixOperator(jnp.array([[1.0, 0.0, 0.5, 0.0], [0.0, 1.0, 0.0, -0.5]]))
    y = jnp.array([1.0, -0.5])
    post_mean = g.posterior(op.matrix(), y, 0.1).mean()
    keys = jax.random.split(key, 2000)
    bb = DDRM(op, 0.1)
    run = jax.jit(
        lambda s: jax.vmap(lambda k: sample_posterior(den, lamp(bb, s), y, key=k, num_steps=30).x)(
            keys
        )
    )
    for strength in (0.0, 1.0):
        np.testing.assert_allclose(run(strength).mean(0), post_mean, atol=0.08)


def test_save_ts_trajectory_and_eager_calls_do_not_retrace(key):
    _g, _, op, y = _mixture_problem()
    traces = []

    def eps(x, t):
        traces.append(1)  # trace-time side effect only
        return 0.1 * x

    term = DenoiserTerm(eps, SCH)
    sampler = lamp(DDRM(op, 0.1))
    out = sample_posterior(term, sampler, y, key=key, num_steps=6, save_ts=jnp.array([0.5, 0.0]))
    n = len(traces)
    again = sample_posterior(term, sampler, y, key=key, num_steps=6, save_ts=jnp.array([0.5, 0.0]))
    assert len(traces) == n  # the second eager call reuses the compiled sampler
    np.testing.assert_array_equal(out.x, again.x)
    assert out.ys.shape == (2, 4)
    np.testing.assert_allclose(out.ys[-1], out.x, rtol=1e-6)


# ---- SSIM of the digits experiments ------------------------------------------------------


def _ssim_numpy(x, y, data_range, win=7, sigma=1.5):
    """Float64 reference with scipy's 2-D convolution and an outer-product window."""
    w1 = gaussian_window(win, sigma)
    w = np.outer(w1, w1)
    f = lambda a: convolve2d(a, w[::-1, ::-1], mode="valid")
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    mx, my = f(x), f(y)
    sxx, syy, sxy = f(x * x) - mx**2, f(y * y) - my**2, f(x * y) - mx * my
    m = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx**2 + my**2 + c1) * (sxx + syy + c2))
    return m.mean()


def test_ssim_matches_numpy_reference(rng, x64):
    x = rng.uniform(-1, 1, size=(3, 16, 16))
    y = np.clip(x + 0.3 * rng.normal(size=x.shape), -1, 1)
    ours = np.asarray(ssim(jnp.asarray(x), jnp.asarray(y), data_range=2.0))
    ref = [_ssim_numpy(x[i], y[i], 2.0) for i in range(3)]
    np.testing.assert_allclose(ours, ref, rtol=1e-10)
    np.testing.assert_allclose(ssim(jnp.asarray(x), jnp.asarray(x), data_range=2.0), 1.0)
    worse = ssim(jnp.asarray(x), jnp.asarray(x + rng.normal(size=x.shape)), data_range=2.0)
    assert np.all(np.asarray(worse) < ours)
    with pytest.raises(ValueError, match="equal shapes"):
        ssim(jnp.zeros((1, 16, 16)), jnp.zeros((1, 16, 15)))
