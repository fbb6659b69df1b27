"""Tests of P04 SCALE: exact mixture scores, loss limits and stop-gradients, samplers (NFE,
determinism, jit/vmap), DPO, the autoregressive variant, metrics and bad inputs."""

from __future__ import annotations

import functools
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from flax import nnx
from helpers import assert_trees_close, tolerance

from jaxpapers.core.diffusion import CountingDenoiser, VPSchedule, sample_ddim
from jaxpapers.core.nn.mlp import MLPDenoiser
from jaxpapers.core.nn.unet import UNet
from jaxpapers.scale import (
    ArrayData,
    Method,
    PreferencePairs,
    ar_conditional_loss,
    ar_sample,
    ar_scale_loss,
    cca_loss,
    checkerboard_mixture,
    conditional_loss,
    dpo_fit,
    dpo_loss,
    fit,
    fit_many,
    frechet_distance,
    gft_loss,
    mg_loss,
    mixture_metrics,
    mlp_denoiser,
    sample_cfg,
    sample_one_pass,
    scale_loss,
    self_samples,
    token_model,
)

SCH = VPSchedule()


@functools.cache
def _net(seeds: int = 2):
    return mlp_denoiser(2, 4, seeds=jnp.arange(seeds), hidden=16, depth=1, emb=8)


def _p(params, i=0):
    return jax.tree.map(lambda a: a[i], params)


# ------------------------------------------------------------------ exact mixture


def _eps_numpy(means, classes, var, x, t, label, num_classes):
    """Float64 loop: -sigma * grad log p_t(x | c) with p_t a Gaussian mixture."""
    log_ab = -0.1 * t - 0.5 * (20.0 - 0.1) * t**2
    a, s = np.exp(0.5 * log_ab), np.sqrt(1 - np.exp(log_ab))
    v = a * a * var + s * s
    logw, grads = [], []
    for mu, c in zip(means, classes, strict=True):
        if label != num_classes and c != label:
            continue
        logw.append(-0.5 * np.sum((x - a * mu) ** 2) / v)
        grads.append((a * mu - x) / v)
    r = np.exp(np.array(logw) - max(logw))
    r /= r.sum()
    return -s * (r[:, None] * np.array(grads)).sum(0)


def test_mixture_eps_and_guided_eps_match_float64_loop(rng):
    mix = checkerboard_mixture(2)
    means, classes = np.asarray(mix.means, np.float64), np.asarray(mix.classes)
    var = float(mix.var)
    for _ in range(5):
        x = rng.normal(size=2) * 1.5
        t = float(rng.uniform(0.05, 0.9))
        lab = int(rng.integers(0, 4))
        e_c = _eps_numpy(means, classes, var, x, t, lab, 4)
        e_u = _eps_numpy(means, classes, var, x, t, 4, 4)
        got = mix.guided_eps(jnp.asarray(x, jnp.float32), t, lab, 2.5, SCH)
        np.testing.assert_allclose(got, e_u + 2.5 * (e_c - e_u), **tolerance(np.float32, 10.0))
        np.testing.assert_allclose(
            mix.eps(jnp.asarray(x, jnp.float32), t, lab, SCH), e_c, **tolerance(np.float32, 10.0)
        )


def test_mixture_log_prob_normalised_and_samples_in_class():
    mix = checkerboard_mixture(2, std=0.3)

    @jax.jit
    def check(mix):
        g = jnp.linspace(-4, 4, 161)
        xx = jnp.stack(jnp.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
        mass = jnp.exp(jax.vmap(lambda x: mix.log_prob(x, 2))(xx)).sum() * (g[1] - g[0]) ** 2
        lab = jnp.arange(400) % 4
        x = mix.sample(lab, key=jax.random.key(0))
        own = jax.vmap(mix.log_prob)(x, lab) > jax.vmap(mix.log_prob)(x, (lab + 1) % 4)
        return mass, jnp.mean(own)

    mass, own = check(mix)
    np.testing.assert_allclose(float(mass), 1.0, rtol=1e-3)
    # Class c's samples are likelier under c than under c + 1 (the modes interleave; with
    # std 0.3 about 5% fall nearer a neighbouring class's mode).
    assert float(own) > 0.9


# ------------------------------------------------------------------ losses: limits and sg


def _batch(key, n=32):
    return checkerboard_mixture(2).draw(n, key=key)


def test_losses_reduce_to_conditional_in_their_limits(key):
    net, ps = _net()
    p, q = _p(ps, 0), _p(ps, 1)
    x0, lab = _batch(key)
    k = jax.random.key(3)
    cond = lambda p_: conditional_loss(net, p_, x0, lab, key=k, schedule=SCH)
    cond0 = lambda p_: conditional_loss(net, p_, x0, lab, key=k, schedule=SCH, p_uncond=0.0)
    gft = lambda p_: gft_loss(net, p_, x0, lab, key=k, schedule=SCH, beta_min=1.0)
    mg = lambda p_: mg_loss(net, p_, q, x0, lab, key=k, schedule=SCH, w=1.0)
    sc = lambda p_: scale_loss(
        net, (p_, q), x0, lab, x0, lab, key=k, schedule=SCH, w=1.0, self_weight=0.0
    )
    pairs = ((gft, cond), (mg, cond), (sc, cond0))
    # One program for every value and gradient (eager calls cost a compile per primitive).
    both = jax.jit(
        lambda p_: [(jax.value_and_grad(o)(p_), jax.value_and_grad(r)(p_)) for o, r in pairs]
    )
    tol = tolerance(np.float32, 10.0)
    for (v_other, g_other), (v_ref, g_ref) in both(p):
        np.testing.assert_allclose(v_other, v_ref, **tol)
        for a, b in zip(jax.tree.leaves(g_other), jax.tree.leaves(g_ref), strict=True):
            np.testing.assert_allclose(a, b, **tol)


def test_stop_gradients_where_the_formulas_put_them(key):
    net, ps = _net()
    p, q = _p(ps, 0), _p(ps, 1)
    x0, lab = _batch(key)
    k = jax.random.key(4)
    zero = lambda tree: max(float(jnp.abs(a).max()) for a in jax.tree.leaves(tree))

    # GFT: the null pass is a constant: the gradient equals that of the formula with the null
    # prediction computed outside.
    def gft_manual(p_):
        kn, kd, kb = jax.random.split(k, 3)
        from jaxpapers.scale import drop_labels, noise_batch

        n = noise_batch(x0, key=kn, schedule=SCH)
        lab_ = drop_labels(lab, 0.1, 4, key=kd)
        beta = jnp.where(lab_ == 4, 1.0, jax.random.uniform(kb, n.t.shape, minval=0.2))
        e_null = net(p, n.x_t, n.t, jnp.full_like(lab_, 4), jnp.ones_like(beta))
        pred = beta[:, None] * net(p_, n.x_t, n.t, lab_, beta) + (1 - beta[:, None]) * e_null
        return jnp.mean(jnp.sum((pred - n.eps) ** 2, -1))

    @jax.jit  # one program for every gradient
    def grads(p, q, x0):
        g_ema = jax.grad(lambda e: mg_loss(net, p, e, x0, lab, key=k, schedule=SCH, w=3.0))(q)
        g_pair = jax.grad(
            lambda pair: scale_loss(
                net, pair, x0, lab, x0, lab, key=k, schedule=SCH, w=2.0, self_weight=0.0
            )
        )((p, q))
        g_x = jax.grad(
            lambda xs: scale_loss(net, (p, q), x0, lab, xs, lab, key=k, schedule=SCH, w=2.0)
        )(x0)
        g_gft = jax.grad(lambda p_: gft_loss(net, p_, x0, lab, key=k, schedule=SCH))(p)
        return g_ema, g_pair, g_x, g_gft, jax.grad(gft_manual)(p)

    g_ema, g, g_x, g1, g_ref = grads(p, q, x0)
    # MG: no gradient reaches the EMA teacher.
    assert zero(g_ema) == 0.0
    # SCALE: the real-data term sends nothing to the self network, and nothing flows into the
    # self-generated samples; the self term does train the self network.
    assert zero(g[1]) == 0.0 and zero(g[0]) > 0.0
    assert float(jnp.abs(g_x).max()) == 0.0
    for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g_ref), strict=True):
        np.testing.assert_allclose(a, b, **tolerance(np.float32, 10.0))


# ------------------------------------------------------------------ samplers


def test_cfg_at_w1_is_the_conditional_model_and_nfe_is_exact(key):
    net, ps = _net()
    p = _p(ps)
    lab = jnp.array([0, 1, 2, 3, 4])
    one = sample_one_pass(net, p, lab, key=key, num_steps=6)
    cfg = sample_cfg(net, p, lab, key=key, num_steps=6, w=1.0)
    # The one-pass sampler is the core's diffrax DDIM on the conditional network (same key).
    eps = lambda x, t: net(p, x, jnp.full(lab.shape, t), lab, jnp.ones(lab.shape))
    core = jax.jit(lambda k: sample_ddim(CountingDenoiser(eps), SCH, (5, 2), key=k, num_steps=6))(
        key
    )
    np.testing.assert_allclose(one.x, core.x, **tolerance(np.float32, 10.0))
    assert int(core.nfe) == 6
    np.testing.assert_allclose(cfg.x, one.x, **tolerance(np.float32, 10.0))
    assert int(one.nfe) == 6 and int(cfg.nfe) == 12
    again = sample_one_pass(net, p, lab, key=key, num_steps=6)
    np.testing.assert_array_equal(again.x, one.x)
    other = sample_one_pass(net, p, lab, key=jax.random.key(99), num_steps=6)
    assert float(jnp.abs(other.x - one.x).max()) > 1e-3
    # vmap over seeds' parameters equals the per-seed loop.
    xs = jax.vmap(lambda q: sample_one_pass(net, q, lab, key=key, num_steps=6).x)(ps)
    np.testing.assert_allclose(
        xs[1],
        sample_one_pass(net, _p(ps, 1), lab, key=key, num_steps=6).x,
        **tolerance(np.float32, 10.0),
    )


def test_samplers_keep_the_float32_state_under_x64(key):
    """Issue 35: under x64 ``sample_cfg``'s guidance weight became a float64 array, the guided
    eps of the float32 network float64, and the DDIM loop (float32 state) refused to trace. The
    samplers keep the state's dtype; the samples equal the float32 run's up to the round-off of
    the float64 guidance product (4 steps of O(1) values: float32 tolerance)."""
    net, ps = _net()
    p = _p(ps)
    lab = jnp.array([0, 1, 2, 3])
    ref_cfg = sample_cfg(net, p, lab, key=key, num_steps=4, w=2.0)
    ref_one = sample_one_pass(net, p, lab, key=key, num_steps=4, scalar=0.5)
    with jax.enable_x64(True):
        cfg = sample_cfg(net, p, lab, key=key, num_steps=4, w=2.0)
        one = sample_one_pass(net, p, lab, key=key, num_steps=4, scalar=0.5)
    assert cfg.x.dtype == one.x.dtype == jnp.float32
    np.testing.assert_allclose(cfg.x, ref_cfg.x, **tolerance(np.float32, 10.0))
    np.testing.assert_allclose(one.x, ref_one.x, **tolerance(np.float32, 10.0))
    assert int(cfg.nfe) == 8 and int(one.nfe) == 4
    # the oracle's two-network sampler and a small SCALE fit (self samples, replay buffer) too
    from jaxpapers.scale._oracle import sample_scg

    psi = _p(ps, 1)
    ref_scg = sample_scg(net, p, psi, lab, key=key, num_steps=4, w=2.0)
    m = Method("scale", w=1.5, refresh=5, self_steps=3, self_batch=8, replay=2, warmup=4)
    mix = checkerboard_mixture(2)
    ref_fit = fit(net, m, p, mix, key=key, steps=10, batch=16)
    with jax.enable_x64(True):
        scg = sample_scg(net, p, psi, lab, key=key, num_steps=4, w=2.0)
        fitted = fit(net, m, p, mix, key=key, steps=10, batch=16)
    assert scg.x.dtype == jnp.float32 and int(scg.nfe) == 8
    np.testing.assert_allclose(scg.x, ref_scg.x, **tolerance(np.float32, 10.0))
    # (x64 draws its noise in float64: other random numbers, so the losses are not compared)
    assert all(a.dtype == jnp.float32 for a in jax.tree.leaves(fitted.params))
    assert fitted.buffer.x.dtype == jnp.float32 and fitted.losses.shape == ref_fit.losses.shape
    assert bool(jnp.all(jnp.isfinite(fitted.losses))) and bool(fitted.finite)


def test_x0_range_clips_every_sampler_and_leaves_a_wide_box_unchanged(key):
    net, ps = _net()
    p = _p(ps)
    lab = jnp.array([0, 1, 2, 3])
    plain = sample_one_pass(net, p, lab, key=key, num_steps=4)
    wide = sample_one_pass(net, p, lab, key=key, num_steps=4, x0_range=1e6)
    np.testing.assert_allclose(wide.x, plain.x, **tolerance(np.float32, 10.0))
    # DDIM's last step lands on its clipped x0 estimate: inside the box, and not the final clip
    # of the unclipped sampler.
    r = 0.5 * float(jnp.abs(plain.x).max())
    one = sample_one_pass(net, p, lab, key=key, num_steps=4, x0_range=r)
    cfg = sample_cfg(net, p, lab, key=key, num_steps=4, w=2.0, x0_range=r)
    for x in (one.x, cfg.x):
        assert float(jnp.abs(x).max()) <= r * (1 + 1e-6)
    assert float(jnp.abs(one.x - jnp.clip(plain.x, -r, r)).max()) > 1e-4
    # SCALE's self samples use the method's x0_range.
    method = Method("scale", w=1.5, self_steps=3, self_batch=8, x0_range=r)
    x, labels = self_samples(net, method, (p, p), checkerboard_mixture(2), key=key, w=1.5)
    assert x.shape == (8, 2) and labels.shape == (8,)
    assert float(jnp.abs(x).max()) <= r * (1 + 1e-6)


def test_fit_vmap_over_seeds_matches_single_runs_and_scale_runs():
    net, ps = _net()
    mix = checkerboard_mixture(2)
    keys = jax.random.split(jax.random.key(0), 2)
    method = Method("scale", w=1.5, refresh=5, self_steps=3, self_batch=16)
    run = lambda p, k: fit(net, method, p, mix, key=k, steps=10, batch=16)
    # Both in one program (one compile): the vmapped run and the single run of seed 1.
    res, single = jax.jit(lambda ps, keys: (jax.vmap(run)(ps, keys), run(_p(ps, 1), keys[1])))(
        ps, keys
    )
    np.testing.assert_allclose(res.losses[1], single.losses, rtol=1e-4, atol=1e-5)
    assert bool(jnp.all(res.finite)) and res.losses.shape == (2, 10)


def test_fit_many_matches_fit_of_each_method():
    net, ps = _net()
    mix = checkerboard_mixture(2)
    methods = (Method("conditional"), Method("gft"), Method("mg", w=2.0, warmup=3))
    p0, key = _p(ps, 0), jax.random.key(3)
    kw = dict(key=key, steps=6, batch=16)
    # One program: the shared loop and the three separate ones.
    many, single = jax.jit(
        lambda p: (
            fit_many(net, methods, p, mix, **kw),
            [fit(net, m, p, mix, **kw) for m in methods],
        )
    )(p0)
    assert many.losses.shape == (3, 6) and bool(many.finite)
    for i, s in enumerate(single):  # equal up to float32 round-off (other batching)
        np.testing.assert_allclose(many.losses[i], s.losses, rtol=1e-5, atol=1e-6)
        assert_trees_close(jax.tree.map(lambda a, i=i: a[i], many.params), s.params)
    with pytest.raises(ValueError, match="kinds"):
        fit_many(net, (Method("scale"),), p0, mix, **kw)


def test_key_schedule_is_the_block_schedule():
    """The per-step keys ``fit`` hands to ``core.fit.fit``: ``key`` split into one key per block
    of ``refresh`` steps, each block key into its buffer key and its steps' keys (the schedule
    of the block-wise loop the rows were measured with)."""
    from jaxpapers.scale._train import _key_schedule

    key, steps, block = jax.random.key(7), 12, 4
    buffer_keys, step_keys = _key_schedule(key, steps, block)
    data = jax.random.key_data
    for b, kb in enumerate(jax.random.split(key, steps // block)):
        kbuf, ksteps = jax.random.split(kb)
        np.testing.assert_array_equal(data(buffer_keys[b]), data(kbuf))
        np.testing.assert_array_equal(
            data(step_keys[b * block : (b + 1) * block]), data(jax.random.split(ksteps, block))
        )


def test_fit_freezes_on_a_non_finite_loss_and_dpo_returns_a_fit_result(key):
    net, ps = _net()
    p0 = _p(ps)
    x = jnp.zeros((8, 2)).at[3, 0].set(jnp.nan)  # batches drawing row 3 have a NaN loss
    data = ArrayData(x, jnp.arange(8) % 4)
    res = fit(net, Method("conditional"), p0, data, key=key, steps=20, batch=4)
    assert not bool(res.finite) and not bool(jnp.all(jnp.isfinite(res.losses)))
    assert all(
        bool(jnp.all(jnp.isfinite(a))) for a in jax.tree.leaves((res.params, res.ema_params))
    )
    x0, lab = _batch(key, 8)
    out = dpo_fit(net, p0, PreferencePairs(x0, x0[::-1], lab), key=key, steps=3, batch=4)
    assert out.losses.shape == (3,) and bool(out.finite)
    assert jax.tree.structure(out.params) == jax.tree.structure(p0)


# ------------------------------------------------------------------ DPO, AR, metrics


def test_dpo_tied_pairs_give_log2_and_no_gradient(key):
    net, ps = _net()
    p, q = _p(ps, 0), _p(ps, 1)
    x0, lab = _batch(key, 8)
    pairs = PreferencePairs(x0, x0, lab)
    f = lambda p_: dpo_loss(net, p_, q, pairs, key=key, schedule=SCH, beta=2.0)
    np.testing.assert_allclose(f(p), np.log(2.0), rtol=1e-6)
    assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(jax.grad(f)(p))) < 1e-6
    swapped = PreferencePairs(x0, x0[::-1], lab)
    assert float(dpo_loss(net, p, q, swapped, key=key, schedule=SCH, beta=2.0)) != np.log(2.0)


@functools.cache
def _tokens():
    return token_model(4, seeds=jnp.arange(2), d_model=16, num_heads=2, num_layers=1, bins=8)


def test_ar_limits_cca_at_reference_and_sampler_nfe(key):
    tm, ps = _tokens()
    p, q = _p(ps, 0), _p(ps, 1)
    x, lab = _batch(key, 16)
    tok = tm.quantise(x)
    k = jax.random.key(2)

    @jax.jit  # one compile for the lot
    def run(p, q, tok, lab, key):
        ref = ar_conditional_loss(tm, p, tok, lab, key=k, p_uncond=0.0)
        sc = ar_scale_loss(tm, (p, q), tok, lab, tok, lab, w=1.0, self_weight=0.0)
        cca = cca_loss(tm, p, p, tok, lab, key=k, lam=0.5)
        one = ar_sample(tm, p, lab, key=key)
        return ref, sc, cca, one, ar_sample(tm, p, lab, key=key, mode="cfg", w=1.0)

    ref, sc, cca, one, cfg1 = run(p, q, tok, lab, key)
    np.testing.assert_allclose(sc, ref, rtol=1e-5)
    # CCA at the reference: Delta = 0, the loss is (1 + lambda) log 2.
    np.testing.assert_allclose(cca, 1.5 * np.log(2), rtol=1e-6)
    np.testing.assert_array_equal(one.tokens, cfg1.tokens)
    assert int(one.nfe) == 2 and int(cfg1.nfe) == 4
    assert one.tokens.shape == (16, 2) and int(one.tokens.max()) < 8


def test_frechet_matches_scipy_and_mixture_metrics_on_exact_samples(rng, key):
    a = rng.normal(size=(300, 4))
    b = rng.normal(size=(300, 4)) @ np.diag([1.0, 2.0, 0.5, 1.0]) + 0.3
    s1, s2 = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    ref = np.sum((a.mean(0) - b.mean(0)) ** 2) + np.trace(
        s1 + s2 - 2 * scipy.linalg.sqrtm(s1 @ s2).real
    )
    fd = jax.jit(frechet_distance)
    np.testing.assert_allclose(fd(jnp.asarray(a), jnp.asarray(b)), ref, rtol=1e-3)
    lab = jnp.arange(512) % 4

    @jax.jit  # one program for both scores
    def scores(mix, key):
        x, y = mix.sample(lab, key=key), mix.sample(lab, key=jax.random.key(5))
        wrong = mix.sample((lab + 1) % 4, key=key)
        return mixture_metrics(mix, x, lab, y), mixture_metrics(mix, wrong, lab, y)

    m, wrong = scores(checkerboard_mixture(2), key)
    assert float(m.precision) > 0.95 and float(m.recall) > 0.9
    # Samples of the neighbouring class, scored as the intended one, fall outside its support.
    assert float(wrong.precision) < 0.1


# ------------------------------------------------------------------ bad inputs


def test_bad_inputs_raise_value_errors_naming_the_argument(key):
    net, ps = _net()
    p = _p(ps)
    with pytest.raises(ValueError, match="labels holds values"):
        sample_one_pass(net, p, jnp.array([0, 5]), key=key, num_steps=2)
    with pytest.raises(ValueError, match="labels has dtype"):
        sample_one_pass(net, p, jnp.array([0.0, 1.0]), key=key, num_steps=2)
    with pytest.raises(ValueError, match="w="):
        sample_cfg(net, p, jnp.array([0, 1]), key=key, num_steps=2, w=-0.5)
    with pytest.raises(ValueError, match="w="):
        mg_loss(net, p, p, *_batch(key), key=key, schedule=SCH, w=-1.0)
    with pytest.raises(ValueError, match="x0_range=0"):
        sample_one_pass(net, p, jnp.array([0, 1]), key=key, num_steps=2, x0_range=0)
    with pytest.raises(ValueError, match="x0_range=-1.0"):
        Method("scale", x0_range=-1.0)
    with pytest.raises(ValueError, match="kind="):
        Method("cfg++")
    with pytest.raises(ValueError, match="w="):
        Method("scale", w=0.5)
    with pytest.raises(ValueError, match=r"labels must be integer \[b=3\]"):
        MLPDenoiser(2, hidden=4, depth=1, emb=4, num_classes=4, rngs=nnx.Rngs(0))(
            jnp.zeros((3, 2)), jnp.ones(3), jnp.zeros(2, jnp.int32)
        )
    unet = nnx.eval_shape(lambda: UNet(1, (8, 16), emb=16, num_classes=10, rngs=nnx.Rngs(0)))
    with pytest.raises(ValueError, match=r"x must be \[b, h, w, 1\]"):
        unet(jnp.zeros((2, 8, 8, 3)), jnp.ones(2), jnp.zeros(2, jnp.int32))
    with pytest.raises(ValueError, match="labels holds values"):
        unet(jnp.zeros((2, 8, 8, 1)), jnp.ones(2), jnp.array([3, 11]))
    tm, tps = _tokens()
    with pytest.raises(ValueError, match="mode="):
        ar_sample(tm, _p(tps), jnp.array([0]), key=key, mode="beam")
    with pytest.raises(ValueError, match="steps=10 must be a multiple of refresh=3"):
        fit(net, Method("scale", refresh=3), p, checkerboard_mixture(2), key=key, steps=10, batch=4)


def test_conditioned_unet_uses_its_label_and_stays_jittable(key):
    make = lambda: UNet(1, (8, 16), emb=16, num_classes=10, scalar_cond=True, rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(nnx.eval_shape(make), nnx.Param)[0], None
    params = jax.jit(lambda: nnx.split(make(), nnx.Param)[1])()
    x = jax.random.normal(key, (2, 8, 8, 1))

    @jax.jit
    def run(p):
        m = nnx.merge(graphdef, p)
        t = jnp.full((2,), 0.5)
        return m(x, t, jnp.array([1, 2])), m(x, t, jnp.array([3, 4])), m(x, t)

    a, b, null = run(params)
    assert float(jnp.abs(a - b).max()) > 1e-5 and float(jnp.abs(a - null).max()) > 1e-5


def test_quick_mode_runs_the_2d_bed_and_every_study_runs_at_smoke():
    from jaxpapers.core.experiment import experiments_for

    exps = experiments_for("P04")
    quick = {e.id for e in exps if "quick" in e.sizes}
    bed_2d = ("guidance_free", "half_nfe", "precision", "dpo", "self_score_fit")
    assert quick == {"sanity_limits", *(f"mixture2d_{k}" for k in bed_2d)}
    assert all("smoke" in e.sizes and "full" in e.sizes for e in exps)
    assert {"digits_accuracy", "digits_frechet", "ar_cca"} <= {e.id for e in exps}


def test_dpo_verdict_is_judged_on_what_the_pairs_were_not_ranked_by():
    """Issue 32: DPO's pairs are ranked by the true log-likelihood, so ``mixture2d_dpo`` may not
    be scored by it (it held while DPO collapsed). With the referee's measurement (log-likelihood
    up, recall 0.81 -> 0.41, sliced Wasserstein 0.39 -> 1.08) the verdict fails; a DPO step that
    lowers SW and keeps recall holds; the log-likelihood is no row of the rule."""
    from jaxpapers.core.experiment import experiments_for
    from jaxpapers.core.verdicts import RowStats
    from jaxpapers.scale.experiments import DPO_MISS, DPO_SW, RECALL_MARGIN

    exp = {e.id: e for e in experiments_for("P04")}["mixture2d_dpo"]
    assert exp.lower_is_better and exp.requires == ("sanity_limits",)
    assert set(exp.rule.names()) == {
        f"{m} {q}" for m in ("SCALE", "SCALE+DPO") for q in (DPO_SW, DPO_MISS)
    }
    jitter = np.array([0.0, 0.01, -0.01, 0.02, -0.02])

    def decide(sw, recall):
        vals = {}
        for m, s, r in zip(("SCALE", "SCALE+DPO"), sw, recall, strict=True):
            vals[f"{m} {DPO_SW}"] = s + jitter
            vals[f"{m} {DPO_MISS}"] = 1.0 - (r + jitter)
        rows = {k: RowStats.from_values(k, "row", v) for k, v in vals.items()}
        return exp.rule.decide(rows, exp.lower_is_better)

    assert decide((0.39, 1.08), (0.81, 0.41)) == "does not hold"
    assert decide((0.39, 0.30), (0.81, 0.81 - RECALL_MARGIN / 5)) == "holds"
    assert decide((0.39, 0.30), (0.81, 0.81 - 2 * RECALL_MARGIN)) == "does not hold"


# ------------------------------------------------------------------ SCG target (issue 35)


class _ExactNet:
    """A stub denoiser on the 2-D mixture: role 1 (the self network) returns the exact
    unconditional eps (a known self score); role 0 returns ``candidate(x, t, c)`` plus a
    correction ``a + b_d eps_d + b_u eps_u`` (the exact conditional and unconditional eps, which
    span the SCG target) whose gradient at 0 tests stationarity."""

    def __init__(self, mix, candidate):
        self.mix, self.candidate, self.num_classes = mix, candidate, mix.num_classes

    def __call__(self, params, x, t, labels, scalar):
        null = jnp.full_like(labels, self.num_classes)
        psi = jax.vmap(lambda x, t, c: self.mix.eps(x, t, c, SCH))(x, t, null)
        e_d = jax.vmap(lambda x, t, c: self.mix.eps(x, t, c, SCH))(x, t, labels)
        base = jax.vmap(self.candidate)(x, t, labels)
        theta = base + params["a"][None, :] + params["b"][0] * e_d + params["b"][1] * psi
        return jnp.where(params["role"] > 0, psi, theta)


def test_scg_optimum_with_a_frozen_known_self_score_is_exact_cfg(key):
    """Known answer for SCALE's real-data term with psi frozen at the exact unconditional score:
    the optimum theta* = eps_d + (w - 1)(eps_d - psi) is exact CFG of scale w
    (``ClassMixture.guided_eps``). The expected gradient of ``scale_loss`` (self_weight 0) and of
    ``scg_loss`` in a correction around theta* vanishes (|t| < 4 over 16 independent batches of
    8,192), and is clearly non-zero (|t| > 8) around the unguided eps_d and around CFG
    of a wrong scale (the ``w``-coefficient CFG target ``eps_d + w (eps_d - psi)``)."""
    from jaxpapers.scale._oracle import scg_loss, scg_target

    mix = checkerboard_mixture(2)
    w = 3.0
    eps = lambda x, t, c: mix.eps(x, t, c, SCH)
    null = mix.num_classes
    exact = lambda x, t, c: mix.guided_eps(x, t, c, w, SCH)
    via_target = lambda x, t, c: scg_target(eps(x, t, c), eps(x, t, null), w)
    wrong = lambda x, t, c: scg_target(eps(x, t, c), eps(x, t, null), w + 1.0)
    theta0 = {"a": jnp.zeros(2), "b": jnp.zeros(2), "role": jnp.zeros(())}
    psi = {**theta0, "role": jnp.ones(())}
    keys = jax.random.split(key, 16)

    def tstats(candidate, which):
        net = _ExactNet(mix, candidate)

        def grad(k):
            kd, kl = jax.random.split(k)
            labels = jax.random.randint(kd, (8192,), 0, mix.num_classes)
            x0 = mix.sample(labels, key=jax.random.fold_in(kd, 1))
            if which == "scale":
                f = lambda th: scale_loss(
                    net, (th, psi), x0, labels, x0[:8], labels[:8], key=kl, schedule=SCH,
                    w=w, self_weight=0.0,
                )  # fmt: skip
            else:
                f = lambda th: scg_loss(net, th, psi, x0, labels, key=kl, schedule=SCH, w=w)
            g = jax.grad(f)(theta0)
            return jnp.concatenate([g["a"], g["b"]])

        g = np.asarray(jax.jit(jax.vmap(grad))(keys), np.float64)
        return np.abs(g.mean(0)) / (g.std(0, ddof=1) / np.sqrt(len(g)))

    # theta* from the formula equals the exact guided eps pointwise
    x = jax.random.normal(key, (64, 2))
    t = jnp.linspace(0.05, 0.95, 64)
    c = jnp.arange(64) % mix.num_classes
    np.testing.assert_allclose(
        jax.vmap(via_target)(x, t, c), jax.vmap(exact)(x, t, c), **tolerance(np.float32, 100.0)
    )
    for which in ("scale", "scg"):
        assert np.max(tstats(via_target, which)) < 4.0, which
        assert np.max(tstats(eps, which)) > 8.0, which
        assert np.max(tstats(wrong, which)) > 8.0, which


def test_oracle_scg_pieces_fit_and_the_diagnostic_is_zero_against_itself(key):
    """The oracle's pieces (issue 35): ``fit_self_score`` lowers the denoising error on the
    samples it is fitted to, ``fit_scg`` leaves psi frozen and trains theta, and
    ``self_score_error`` is (0, contrast > 0) for a self network against itself."""
    from jaxpapers.scale._oracle import fit_scg, fit_self_score, self_score_error

    mix = checkerboard_mixture(2)
    net, ps = _net()
    p0 = _p(ps)
    lab = jnp.arange(256) % mix.num_classes
    x = mix.sample(lab, key=key)
    psi = fit_self_score(net, p0, x, lab, key=key, steps=60, batch=64)
    err = lambda p: float(
        conditional_loss(net, p, x, lab, key=jax.random.key(3), schedule=SCH, p_uncond=0.0)
    )
    assert err(psi) < err(p0)
    theta = fit_scg(net, p0, psi, mix, key=key, steps=20, batch=32, w=2.0)
    assert not all(
        bool(jnp.all(a == b))
        for a, b in zip(jax.tree.leaves(theta), jax.tree.leaves(p0), strict=True)
    )
    e, c = self_score_error(net, psi, psi, mix, x, lab, key=key)
    assert float(e) == 0.0 and float(c) > 0.0
    e2, _ = self_score_error(net, p0, psi, mix, x, lab, key=key)
    assert float(e2) > 0.0


def test_mixture_study_tunes_mg_scale_and_oracle_on_the_cfg_grid():
    """Issue 35: on the mixture bed MG, SCALE and oracle SCG are tuned on the same grid and
    validation draw as CFG and GFT (a chosen scale per seed, from ``W_GRID``); DPO's base is the
    SCALE model at ``scale_w``; the self-score diagnostic is reported. The study compiles four
    programs of its own."""
    import dataclasses

    from jaxpapers.scale.experiments import SIZES
    from jaxpapers.scale.experiments._mixture import ORACLE, SCALE_AT_W, W_GRID, mixture_study

    config = dataclasses.replace(
        SIZES["smoke"], steps=20, n_eval=32, self_batch=16, dpo_pairs=16, dpo_steps=4,
        self_fit_samples=64, self_fit_steps=4,
    )  # fmt: skip
    compiled = []

    class Programs(logging.Handler):
        def emit(self, record):
            msg = record.getMessage()
            if msg.startswith("Finished XLA compilation of "):
                compiled.append(msg.split()[4])

    handler = Programs()
    logging.getLogger("jax").addHandler(handler)
    try:
        with jax.log_compiles():
            r = mixture_study(config, 2, [0, 1], with_dpo=True, with_sanity=True)
    finally:
        logging.getLogger("jax").removeHandler(handler)
    # the study's own programs: three training programs, then one for DPO, the evaluation and
    # the sanity numbers (each program compiled costs seconds; P04's quick budget)
    own = ("baselines", "scale", "all_self_fits", "self_fits", "evaluate", "<lambda>")
    assert [n for n in compiled if n[4:-1] in own] == [
        "jit(baselines)", "jit(scale)", "jit(all_self_fits)", "jit(evaluate)"
    ]  # fmt: skip
    assert set(r.sanity) >= {"cfg", "gft", "mg", "scale", "to_guided", "to_conditional"}
    for row in ("CFG", "GFT", "MG", "SCALE", ORACLE):
        assert len(r.w[row]) == 2 and set(r.w[row]) <= set(W_GRID), row
        assert row in r.rows
    assert {SCALE_AT_W, "SCALE+DPO"} <= set(r.rows)
    fit = r.self_score_fit
    assert len(fit["error"]) == len(fit["contrast"]) == len(fit["floor"]) == 2
    assert all(np.isfinite(fit["error"])) and min(fit["contrast"]) > 0
    # the refit-vs-refit floor: a second refit on fresh samples is not the first one
    assert all(np.isfinite(fit["floor"])) and min(fit["floor"]) > 0
    # Diffusion-DPO's beta is tuned per seed on the validation draw over the configured grid
    assert len(r.dpo_beta) == 2 and set(r.dpo_beta) <= set(config.dpo_betas)


# ------------------------------------------------------------------ replay buffer, traced w, oracle


def test_self_buffer_is_a_ring_of_the_last_replay_refreshes(key):
    """``Method.replay = R``: SCALE's self buffer holds the last R refreshes (R * self_batch
    rows, R distinct slots, the oldest overwritten), each step draws self_batch rows from the
    filled slots only; ``replay = 1`` keeps the last refresh alone (the original scheme)."""
    from jaxpapers.scale._train import draw_self_buffer, push_self_buffer

    refresh = lambda i: (jnp.full((3, 2), float(i)), jnp.full((3,), i, jnp.int32))
    buf = push_self_buffer(None, *refresh(0), replay=4)
    assert buf.x.shape == (12, 2) and int(buf.count) == 1
    x, lab = draw_self_buffer(buf, 64, replay=4, key=key)  # only the filled slot is drawn
    assert x.shape == (64, 2) and set(np.asarray(lab).tolist()) == {0}
    for i in range(1, 6):
        buf = push_self_buffer(buf, *refresh(i), replay=4)
    # refreshes 0..5 in a ring of 4: slots hold 4, 5, 2, 3
    assert np.asarray(buf.labels).reshape(4, 3)[:, 0].tolist() == [4, 5, 2, 3]
    _, lab = draw_self_buffer(buf, 256, replay=4, key=key)
    assert set(np.asarray(lab).tolist()) == {2, 3, 4, 5}
    one = push_self_buffer(push_self_buffer(None, *refresh(0), replay=1), *refresh(1), replay=1)
    x1, lab1 = draw_self_buffer(one, 3, replay=1, key=key)
    assert x1.shape == (3, 2) and np.asarray(lab1).tolist() == [1, 1, 1]

    # Inside SCALE's training: 40 steps, a refresh every 5 -> 8 refreshes, the last 4 kept.
    net, ps = _net()
    mix = checkerboard_mixture(2)
    method = Method("scale", w=1.5, refresh=5, self_steps=3, self_batch=8, replay=4)
    res = fit(net, method, _p(ps), mix, key=key, steps=40, batch=16)
    assert res.buffer.x.shape == (32, 2) and int(res.buffer.count) == 8
    slots = np.asarray(res.buffer.x).reshape(4, 8, 2)
    for i in range(4):
        for j in range(i):
            assert np.abs(slots[i] - slots[j]).max() > 1e-3  # four distinct refreshes
    res1 = fit(net, Method("scale", w=1.5, refresh=5, self_steps=3, self_batch=8), _p(ps), mix,
               key=key, steps=40, batch=16)  # fmt: skip
    assert res1.buffer.x.shape == (8, 2)
    with pytest.raises(ValueError, match="replay"):
        Method("scale", replay=0)


def test_replay_lowers_the_self_networks_error_on_a_fixed_self_distribution():
    """On a toy whose self distribution is fixed (every refresh draws 2 fresh exact samples of a
    4-Gaussian mixture, through SCALE's own loss, buffer and refresh loop, 50 steps a refresh),
    the self network's mean squared error to the exact eps of that distribution falls on every
    one of 8 seeds when the buffer replays 16 refreshes instead of 1 (same steps, same samples
    drawn per refresh and per step): the variance of fitting a few points at a time is what
    replay removes (measured: mean 0.46 -> 0.35)."""
    import optax

    from jaxpapers.scale import ClassMixture
    from jaxpapers.scale._oracle import self_score_error
    from jaxpapers.scale._train import _loss, push_self_buffer, refreshing_fit

    corners = jnp.array([[-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0], [1.0, 1.0]])
    fixed = ClassMixture(corners, jnp.arange(4), 0.1)  # the self distribution
    data = checkerboard_mixture(2)  # the real data of the guided branch
    net, ps = mlp_denoiser(2, 4, seeds=jnp.arange(8), hidden=16, depth=1, emb=8)
    steps, refresh, n = 500, 50, 2
    test_labels = jnp.arange(4096) % 4
    x_test = fixed.sample(test_labels, key=jax.random.key(5))

    def psi_error(replay, p0, key):
        method = Method("scale", w=1.5, refresh=refresh, self_batch=n, replay=replay)

        def make_buffer(_p, k, _t):
            labels = jax.random.randint(k, (n,), 0, 4)
            return fixed.sample(labels, key=jax.random.fold_in(k, 1)), labels

        res = refreshing_fit(
            lambda p, ema, buf, k, t: _loss(net, method, p, ema, data, buf, k, t, SCH, 32),
            (p0, p0),
            optax.adam(1e-2),
            key=key,
            steps=steps,
            block=refresh,
            make_buffer=make_buffer,
            push_buffer=lambda old, fresh: push_self_buffer(old, *fresh, replay=replay),
        )
        psi = res.params[1]  # its error to the exact eps of ``fixed`` (the "contrast" slot)
        return self_score_error(net, psi, psi, fixed, x_test, test_labels, key=jax.random.key(9))[1]

    keys = jax.random.split(jax.random.key(0), 8)
    errs = {
        r: np.asarray(jax.jit(jax.vmap(functools.partial(psi_error, r)))(ps, keys)) for r in (1, 16)
    }
    assert np.all(errs[16] < errs[1]), errs
    assert errs[16].mean() < 0.85 * errs[1].mean(), errs


def test_fit_takes_the_trained_scale_as_a_traced_input():
    """``fit(..., w=w)`` (a traced scale, vmappable) equals ``fit`` of ``Method(w=w)`` for SCALE
    and MG (one program for several trained scales); a scale below 1 is refused."""
    import dataclasses

    net, ps = _net()
    mix = checkerboard_mixture(2)
    p0, key, kw = _p(ps), jax.random.key(4), dict(steps=10, batch=16)
    for method in (
        Method("scale", w=1.5, refresh=5, self_steps=3, self_batch=8, replay=2, warmup=4),
        Method("mg", w=2.0, warmup=4),
    ):
        grid = jnp.array([1.5, 3.0])
        traced = jax.jit(
            jax.vmap(lambda w, m=method: fit(net, m, p0, mix, key=key, w=w, **kw).losses)
        )(grid)
        for i, w in enumerate((1.5, 3.0)):
            static = fit(net, dataclasses.replace(method, w=w), p0, mix, key=key, **kw).losses
            np.testing.assert_allclose(traced[i], static, rtol=1e-4, atol=1e-5)
        with pytest.raises(ValueError, match="w="):
            fit(net, method, p0, mix, key=key, w=0.5, **kw)


def test_sample_scg_with_the_exact_unconditional_self_score_is_cfg(key):
    """Known answer for the oracle's sampler: SCG at sampling time,
    eps_c + (w - 1)(eps_c - eps_psi), with eps_c the exact conditional eps and eps_psi the exact
    unconditional one, is exact CFG of scale w: the same DDIM samples as ``sample_cfg`` of the
    exact mixture denoiser; at w = 1 it is the conditional model's one-pass sampler."""
    from jaxpapers.scale._oracle import sample_scg

    mix = checkerboard_mixture(2)

    class Exact:  # params["role"] 0: the exact conditional eps; 1: the exact unconditional eps
        num_classes, event_shape = mix.num_classes, (2,)

        def __call__(self, params, x, t, labels, scalar):
            null = jnp.full_like(labels, mix.num_classes)
            lab = jnp.where(params["role"] > 0, null, labels)
            return jax.vmap(lambda x, t, c: mix.eps(x, t, c, SCH))(x, t, lab)

    net = Exact()
    cond, psi = {"role": jnp.zeros(())}, {"role": jnp.ones(())}
    labels = jnp.arange(64) % mix.num_classes
    for w in (1.0, 2.5):
        out = sample_scg(net, cond, psi, labels, key=key, num_steps=8, w=w)
        ref = sample_cfg(net, cond, labels, key=key, num_steps=8, w=w)
        assert int(out.nfe) == 16
        np.testing.assert_allclose(out.x, ref.x, **tolerance(np.float32, 100.0))
    one = sample_one_pass(net, cond, labels, key=key, num_steps=8).x
    scg1 = sample_scg(net, cond, psi, labels, key=key, num_steps=8, w=1.0).x
    np.testing.assert_allclose(scg1, one, **tolerance(np.float32, 10.0))


def test_self_score_fit_reports_a_floor_and_requires_the_sanity_limits():
    """Referee (2026-12-05): the self-score diagnostic's rows include a refit-vs-refit floor and
    the error over it, its claim says what the threshold supports (error below contrast), and it
    requires ``sanity_limits`` like every 2-D claim."""
    from jaxpapers.scale.experiments import EXPERIMENTS
    from jaxpapers.scale.experiments._runs import SELF_FLOOR, SELF_OVER_FLOOR

    exp = {e.id: e for e in EXPERIMENTS}["mixture2d_self_score_fit"]
    assert exp.requires == ("sanity_limits",)
    assert SELF_FLOOR in exp.baselines and SELF_OVER_FLOOR in exp.methods
    assert "mostly signal" not in exp.claim and "below the contrast" in exp.claim
