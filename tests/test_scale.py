"""Tests of P04 SCALE: exact mixture scores, loss limits and stop-gradients, samplers (NFE,
determinism, jit/vmap), DPO, the autoregressive variant, metrics and bad inputs."""

from __future__ import annotations

import functools

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
    bed_2d = ("guidance_free", "half_nfe", "precision", "dpo")
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
