"""core.fit: the one scanned training loop, against a step-by-step Python loop of the same optax
optimiser, with freezing on non-finite losses, vmap over seeds, masked subsets and carried state."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxpapers.core.fit import FitResult, fit

STEPS = 12


def _problem(rng):
    x = jnp.asarray(rng.normal(size=(STEPS, 16, 3)), jnp.float32)
    y = x @ jnp.asarray([1.0, -2.0, 0.5], jnp.float32) + 0.3
    params = {"w": jnp.zeros(3, jnp.float32), "b": jnp.zeros((), jnp.float32)}
    return params, (x, y)


def _loss(p, batch, key):
    x, y = batch
    noise = 0.01 * jax.random.normal(key, y.shape)
    return jnp.mean((x @ p["w"] + p["b"] - y - noise) ** 2)


def _python_loop(params, batches, opt, keys, steps):
    state = opt.init(params)
    losses = []
    for t in range(steps):
        batch = jax.tree.map(lambda a, t=t: a[t], batches)
        loss, g = jax.value_and_grad(_loss)(params, batch, keys[t])
        updates, state = opt.update(g, state, params)
        params = optax.apply_updates(params, updates)
        losses.append(float(loss))
    return params, np.asarray(losses)


def test_matches_python_loop(rng, key):
    params, batches = _problem(rng)
    opt = optax.adam(0.05)
    res = fit(_loss, params, opt, steps=STEPS, key=key, batches=batches)
    ref, ref_losses = _python_loop(params, batches, opt, jax.random.split(key, STEPS), STEPS)
    assert isinstance(res, FitResult) and bool(res.finite)
    # float32, 12 Adam steps of a 3-parameter least squares: agreement to a few ulps of O(1) values
    np.testing.assert_allclose(res.losses, ref_losses, rtol=1e-5, atol=1e-6)
    for name in params:
        np.testing.assert_allclose(res.params[name], ref[name], rtol=1e-5, atol=1e-6)
    assert float(res.losses[-1]) < float(res.losses[0])


def test_batch_fn_equals_batches(rng, key):
    params, batches = _problem(rng)
    opt = optax.sgd(0.1)
    a = fit(_loss, params, opt, steps=STEPS, key=key, batches=batches)
    b = fit(
        _loss,
        params,
        opt,
        steps=STEPS,
        key=key,
        batch_fn=lambda t, k: jax.tree.map(lambda v: v[t], batches),
    )
    np.testing.assert_allclose(a.losses, b.losses, rtol=1e-6)
    np.testing.assert_allclose(a.params["w"], b.params["w"], rtol=1e-6)


def test_explicit_step_keys(rng, key):
    params, batches = _problem(rng)
    keys = jax.random.split(key, STEPS)
    a = fit(_loss, params, optax.sgd(0.1), steps=STEPS, key=key, batches=batches)
    b = fit(_loss, params, optax.sgd(0.1), steps=STEPS, key=keys, batches=batches)
    np.testing.assert_array_equal(a.losses, b.losses)


def _poisoned(rng, at):
    params, (x, y) = _problem(rng)
    y = y.at[at].set(jnp.nan)
    return params, (x, y)


def test_freezes_on_non_finite_loss(rng, key):
    at = 5
    params, batches = _poisoned(rng, at)
    opt = optax.sgd(0.1)
    res = fit(_loss, params, opt, steps=STEPS, key=key, batches=batches)
    assert not bool(res.finite)
    assert np.isnan(res.losses[at])
    # the parameters are those after the `at` finite steps, and stay finite
    head = jax.tree.map(lambda v: v[:at], batches)
    ref = fit(_loss, params, opt, steps=at, key=jax.random.split(key, STEPS)[:at], batches=head)
    for name in params:
        np.testing.assert_allclose(res.params[name], ref.params[name], rtol=1e-6)
        assert np.all(np.isfinite(res.params[name]))


def test_vmap_over_seeds_freezes_each_alone(rng, key):
    params, clean = _problem(rng)
    _, poisoned = _poisoned(np.random.default_rng(0), 3)
    batches = jax.tree.map(lambda a, b: jnp.stack([a, b]), clean, poisoned)
    keys = jax.random.split(key, 2)
    run = jax.vmap(lambda b, k: fit(_loss, params, optax.sgd(0.1), steps=STEPS, key=k, batches=b))
    res = run(batches, keys)
    np.testing.assert_array_equal(np.asarray(res.finite), [True, False])
    alone = fit(_loss, params, optax.sgd(0.1), steps=STEPS, key=keys[0], batches=clean)
    np.testing.assert_allclose(res.params["w"][0], alone.params["w"], rtol=1e-5, atol=1e-7)


def test_masked_subset_keeps_frozen_leaves_exactly(rng, key):
    params, batches = _problem(rng)
    params = {**params, "b": jnp.asarray(0.7, jnp.float32)}
    opt = optax.multi_transform(
        {"train": optax.adam(0.05), "frozen": optax.set_to_zero()}, {"w": "train", "b": "frozen"}
    )
    res = fit(_loss, params, opt, steps=STEPS, key=key, batches=batches)
    assert res.params["b"] == params["b"]  # zero updates leave the float32 value bit for bit
    assert not np.allclose(res.params["w"], 0.0)


def _fit_with_state(loss, params, key, batches, state, after_step, **kw):
    """``fit`` with SGD(0.1) over ``batches``, an aux-returning loss and a carried state."""
    return fit(
        loss,
        params,
        optax.sgd(0.1),
        steps=STEPS,
        key=key,
        batches=batches,
        has_aux=True,
        state=state,
        after_step=after_step,
        **kw,
    )


def test_carried_state_ema_and_aux(rng, key):
    params, batches = _problem(rng)
    decay = 0.9

    def loss(p, batch, k, ema):
        value = _loss(p, batch, k)
        return value, {"ema_w0": ema["w"][0]}

    def ema_step(ema, p, t, k):
        return jax.tree.map(lambda e, q: decay * e + (1 - decay) * q, ema, p)

    res = _fit_with_state(loss, params, key, batches, params, ema_step)
    # reference: the EMA of the iterates of the same run, in float64 NumPy
    ema = np.zeros(3)
    p = params
    opt = optax.sgd(0.1)
    st = opt.init(p)
    keys = jax.random.split(key, STEPS)
    for t in range(STEPS):
        batch = jax.tree.map(lambda a, t=t: a[t], batches)
        g = jax.grad(_loss)(p, batch, keys[t])
        u, st = opt.update(g, st, p)
        p = optax.apply_updates(p, u)
        ema = decay * ema + (1 - decay) * np.asarray(p["w"], np.float64)
    np.testing.assert_allclose(res.state["w"], ema, rtol=1e-5, atol=1e-7)
    assert res.aux["ema_w0"].shape == (STEPS,)
    assert float(res.aux["ema_w0"][0]) == 0.0


def test_after_step_receives_the_steps_aux(rng, key):
    """With ``after_step_aux`` the state update sees what the loss computed at that step: here a
    running sum of the per-step losses, which must equal the sum of the returned losses."""
    params, batches = _problem(rng)

    def loss(p, batch, k, total):
        value = _loss(p, batch, k)
        return value, {"loss": value}

    res = _fit_with_state(
        loss,
        params,
        key,
        batches,
        jnp.zeros(()),
        lambda total, p, t, k, aux: total + aux["loss"],
        after_step_aux=True,
    )
    np.testing.assert_allclose(res.state, np.sum(np.asarray(res.losses, np.float64)), rtol=1e-5)
    with pytest.raises(ValueError, match="after_step_aux"):
        fit(
            _loss,
            params,
            optax.sgd(0.1),
            steps=STEPS,
            key=key,
            batches=batches,
            state=jnp.zeros(()),
            after_step=lambda s, p, t, k: s,
            after_step_aux=True,
        )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"steps": 0}, "steps"),
        ({"key": 3}, "key"),
        ({"key": "keys3"}, r"key has shape \(3,\)"),
        ({"batch_fn": lambda t, k: None}, "batches or batch_fn"),
        ({"batches": (jnp.zeros((STEPS + 1, 2)),)}, "leading axis"),
        ({"after_step": lambda s, p, t, k: s}, "state="),
    ],
)
def test_bad_input(rng, key, kwargs, match):
    params, batches = _problem(rng)
    args = {"steps": STEPS, "key": key, "batches": batches}
    if kwargs.get("key") == "keys3":
        kwargs = {"key": jax.random.split(key, 3)}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        fit(_loss, params, optax.sgd(0.1), **args)
