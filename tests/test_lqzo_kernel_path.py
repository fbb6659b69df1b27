"""LQZO's zeroth-order passes through the Pallas kernel (interpret mode) vs the jnp path."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import tolerance
from jaxpapers_kernels import LowRankSpec

from jaxpapers.lqzo import (
    PerturbedScales,
    lqzo,
    make_config,
    materialize,
    merge_scaled,
    quantize_linears,
    split_scales,
    zo_estimate,
    zo_finetune,
)
from jaxpapers.lqzo._finetune import zeros_like_tree


class _Tiny(nnx.Module):
    def __init__(self, rngs):
        self.l1 = nnx.Linear(64, 48, rngs=rngs)
        self.l2 = nnx.Linear(48, 4, rngs=rngs)

    def __call__(self, x):
        return self.l2(jnp.tanh(self.l1(x)))


def _data(rng_seed=0):
    rng = np.random.default_rng(rng_seed)
    return (
        jnp.asarray(rng.normal(size=(32, 64)), jnp.float32),
        jnp.asarray(rng.integers(0, 4, 32), jnp.int32),
    )


def _xent_loss(gd):
    def loss(d, aux, b):
        logits = merge_scaled(gd, aux[0], d, aux[1])(b[0])
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), b[1][:, None], 1))

    return loss


def _problem(use_kernel, rng_seed=0):
    model = quantize_linears(_Tiny(nnx.Rngs(0)), bits=4, group_size=16, use_kernel=use_kernel)
    gd, s0, rest = split_scales(model)
    return _xent_loss(gd), s0, (s0, rest), _data(rng_seed)


def test_perturbed_scales_stay_lazy_and_materialize():
    seeds = jnp.asarray([3, 4], jnp.uint32)
    spec = LowRankSpec(2, 4, (6, 8))
    base = jnp.linspace(0.1, 1.0, 48).reshape(4, 12)
    s0 = jnp.full((4, 12), 2.0)
    p = PerturbedScales(base, None, seeds, jnp.float32(0.05), spec)
    q = (1.0 + p) * s0
    assert isinstance(q, PerturbedScales) and q.mult is not None
    dense = p.materialize()
    np.testing.assert_allclose(np.asarray(q.materialize()), np.asarray((1.0 + dense) * s0), 1e-6)
    # jnp functions and other arithmetic materialise through __jax_array__
    np.testing.assert_allclose(float(jnp.sum(p)), float(jnp.sum(dense)), rtol=1e-6)
    tree = materialize({"a": p, "b": base})
    np.testing.assert_array_equal(np.asarray(tree["a"]), np.asarray(dense))
    with pytest.raises(ValueError, match="base has shape"):
        PerturbedScales(jnp.ones(4), None, seeds, jnp.float32(0.1), spec)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_fused_two_point_losses_kernel_equals_reference(dtype):
    """Same seed: the +-eps losses through the kernel (interpret) and the jnp path agree."""
    cfg = make_config(eps=1e-2, rank=3, noise="bag", isotropic=True, fused=True)
    seeds = jnp.asarray([11, 12], jnp.uint32)
    out = {}
    for mode in ("interpret", False):
        loss, s0, aux, data = _problem(mode)
        x = data[0].astype(dtype)
        delta = zeros_like_tree(s0)
        est = jax.jit(
            lambda d, loss=loss, aux=aux, x=x: zo_estimate(
                lambda q: loss(q, aux, (x, data[1])), d, seeds, config=cfg
            )
        )(delta)
        out[mode] = est
    a, b = out["interpret"], out[False]
    np.testing.assert_allclose(float(a.loss), float(b.loss), **tolerance(dtype))
    # the difference of the two passes is a small number: compare it at the loss scale
    scale = float(b.loss) / float(cfg.eps)
    np.testing.assert_allclose(
        float(a.raw_projected_grad),
        float(b.raw_projected_grad),
        rtol=0,
        atol=100 * tolerance(dtype)["rtol"] * scale,
    )
    assert abs(float(b.raw_projected_grad)) > 0


def test_fused_equals_dense_path_and_same_trajectory():
    """fused (lazy leaves) == materialised theta +- eps Z; kernel and jnp trajectories agree."""
    loss, s0, aux, data = _problem(False)
    delta = zeros_like_tree(s0)
    seeds = jnp.asarray([5, 6], jnp.uint32)
    kw = dict(eps=1e-2, rank=2, noise="bag", isotropic=True)
    value = lambda q: loss(q, aux, data)
    # jitted: one compile each instead of an eager op-by-op run
    estimate = jax.jit(lambda d, c: zo_estimate(value, d, seeds, config=c))
    fused = estimate(delta, make_config(**kw, fused=True))
    dense = estimate(delta, make_config(**kw))
    np.testing.assert_allclose(float(fused.loss), float(dense.loss), rtol=1e-6)
    np.testing.assert_allclose(
        float(fused.raw_projected_grad), float(dense.raw_projected_grad), rtol=1e-3, atol=1e-4
    )
    runs = {}
    for mode in ("interpret", False):
        loss, s0, aux, data = _problem(mode)
        res = zo_finetune(
            loss,
            zeros_like_tree(s0),
            aux,
            lambda key: lqzo(5e-2, key=key, rank=2, nu=2, eps=1e-2),
            data,
            steps=4,
            batch_size=8,
            seeds=[0, 1],
        )
        runs[mode] = res
    np.testing.assert_allclose(runs["interpret"].losses, runs[False].losses, rtol=1e-4)
    for a, b in zip(jax.tree.leaves(runs["interpret"].params), jax.tree.leaves(runs[False].params)):
        # g = (L+ - L-) / (2 eps) carries ~1e-7 / 1e-2 relative float32 error per step, and the
        # update is a sum of +- g Z terms: compare at 1e-3 of the parameters' scale
        b = np.asarray(b)
        np.testing.assert_allclose(np.asarray(a), b, rtol=0, atol=1e-3 * np.abs(b).max())
    assert float(np.abs(np.asarray(jax.tree.leaves(runs[False].params)[0])).max()) > 0


def test_kernel_mode_and_bad_input():
    model = quantize_linears(_Tiny(nnx.Rngs(0)), bits=4, group_size=16)
    assert model.l1.use_kernel == "auto"
    want = None if jax.default_backend() == "cpu" else False
    assert model.l1.kernel_mode() == want
    with pytest.raises(ValueError, match="use_kernel='yes'"):
        quantize_linears(_Tiny(nnx.Rngs(0)), bits=4, group_size=16, use_kernel="yes")
    with pytest.raises(ValueError, match="fused=True with rank=0"):
        make_config(fused=True)
    with pytest.raises(ValueError, match="fused=True with rank=2, noise='gaussian'"):
        make_config(fused=True, rank=2)
    opt = lqzo(1e-3, key=jax.random.key(0), rank=1)
    with pytest.raises(ValueError, match="fused=True perturbs"):
        opt.init({"v": jnp.zeros(8)})


def test_zo_finetune_stacked_aux_equals_separate_runs():
    """Two models of one structure in one program (stacked_aux) == one run per model."""
    models = []
    for init in (0, 1):
        model = quantize_linears(_Tiny(nnx.Rngs(init)), bits=4, group_size=16, use_kernel=False)
        models.append(split_scales(model))
    gd = models[0][0]
    assert models[1][0] == gd
    data, loss = _data(0), _xent_loss(gd)
    delta = zeros_like_tree(models[0][1])
    auxes = [(s0, rest) for _, s0, rest in models]
    kw = dict(steps=3, batch_size=8, seeds=[0, 1])
    make = lambda key, lr: lqzo(lr, key=key, rank=2, nu=2, eps=1e-2)
    stacked_aux = jax.tree.map(lambda *a: jnp.stack(a), *auxes)
    joint = zo_finetune(
        loss, delta, stacked_aux, make, data, learning_rates=[0.05, 0.1], stacked_aux=True, **kw
    )
    assert joint.losses.shape == (2, 2, 2, 3) and joint.finite.shape == (2, 2, 2)
    assert joint.finite.all()
    for a, aux in enumerate(auxes):
        alone = zo_finetune(loss, delta, aux, make, data, learning_rates=[0.05, 0.1], **kw)
        np.testing.assert_allclose(joint.losses[a], alone.losses, rtol=1e-5)
        for x, y in zip(jax.tree.leaves(joint.params), jax.tree.leaves(alone.params)):
            y = np.asarray(y)
            # float32 rounding of the batched passes, amplified by g = dL / (2 eps): 1e-4 of
            # the parameters' scale
            np.testing.assert_allclose(np.asarray(x[a]), y, rtol=0, atol=1e-4 * np.abs(y).max())
    # the two models really differ
    assert np.abs(joint.losses[0] - joint.losses[1]).max() > 1e-3
    bad = (auxes[0][0], jax.tree.map(lambda x: x[None], auxes[0][1]))
    with pytest.raises(ValueError, match="stacked_aux=True"):
        zo_finetune(loss, delta, bad, make, data, learning_rates=[0.1], stacked_aux=True, **kw)
