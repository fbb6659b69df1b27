"""Tests of the flax.nnx U-Net and MLP denoisers."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from jaxpapers.core.nn.mlp import MLPDenoiser, sinusoidal_embedding
from jaxpapers.core.nn.unet import UNet

# Cheap XLA settings: these tests are dominated by compilation.


@functools.cache
def _unet(seed: int):
    """(graphdef, params) of a small U-Net, initialised inside one jit (eager init compiles many
    tiny kernels)."""
    make = lambda: UNet(1, (8, 16), emb=16, rngs=nnx.Rngs(seed))
    graphdef = nnx.split(nnx.eval_shape(make), nnx.Param)[0]
    return graphdef, jax.jit(lambda: nnx.split(make(), nnx.Param)[1])()


@pytest.mark.parametrize("size", [8, 32])
def test_unet_batch_consistent_and_time_dependent(size, key):
    graphdef, params = _unet(0)
    x = jax.random.normal(key, (3, size, size, 1))
    t = jnp.array([0.1, 0.5, 0.9])

    @jax.jit
    def run(p):
        model = nnx.merge(graphdef, p)
        # Each sample's output depends only on that sample (GroupNorm is per sample).
        single = jax.vmap(lambda xi, ti: model(xi[None], ti[None])[0])(x, t)
        return model(x, t), single, model(x, t + 0.3)

    out, single, shifted = run(params)
    assert out.shape == x.shape
    np.testing.assert_allclose(out, single, rtol=1e-4, atol=1e-5)
    assert float(jnp.abs(shifted - out).max()) > 1e-4


def test_unet_fits_a_batch(key):
    """A few Adam steps on a fixed target lower the loss: gradients flow through every level."""
    graphdef, params = _unet(1)
    x = jax.random.normal(key, (4, 8, 8, 1))
    t = jnp.full((4,), 0.3)
    target = jnp.roll(x, 1, axis=1)

    def loss(p):
        return jnp.mean((nnx.merge(graphdef, p)(x, t) - target) ** 2)

    opt = optax.adam(3e-3)
    state = opt.init(params)

    @jax.jit
    def step(p, s):
        val, g = jax.value_and_grad(loss)(p)
        upd, s = opt.update(g, s, p)
        return optax.apply_updates(p, upd), s, val

    losses = []
    for _ in range(20):
        params, state, val = step(params, state)
        losses.append(float(val))
    assert losses[-1] < 0.5 * losses[0]


def test_unet_bad_input():
    # Shapes are checked before any computation: an abstract (eval_shape) model suffices.
    model = nnx.eval_shape(lambda: UNet(1, (8, 16), emb=16, rngs=nnx.Rngs(0)))
    with pytest.raises(ValueError, match="divisible by 2"):
        model(jnp.zeros((1, 9, 9, 1)), jnp.zeros(1))
    with pytest.raises(ValueError, match=r"x must be \[b, h, w, 1\]"):
        model(jnp.zeros((1, 8, 8, 3)), jnp.zeros(1))


def test_mlp_denoiser_and_embedding():
    emb = sinusoidal_embedding(jnp.array([0.0, 0.25]), 8)
    np.testing.assert_allclose(emb[0], [0, 0, 0, 0, 1, 1, 1, 1], atol=1e-7)
    np.testing.assert_allclose(emb[1, 0], np.sin(250.0), rtol=1e-5)
    model = MLPDenoiser(5, hidden=16, depth=2, emb=8, rngs=nnx.Rngs(0))
    out = model(jnp.ones((2, 5)), jnp.array([0.1, 0.9]))
    assert out.shape == (2, 5) and not np.allclose(out[0], out[1])
    with pytest.raises(ValueError, match=r"x must be \[b, 5\]"):
        model(jnp.ones((2, 4)), jnp.ones(2))
