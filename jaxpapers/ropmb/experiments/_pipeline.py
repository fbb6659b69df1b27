"""The P12 pipeline, seeds stacked on a leading axis: multi-label CNNs, memory banks, PRDC
training and the evaluation of the four pseudo-mask methods."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from jaxpapers.core.nn.cnn import CNNConfig, ConvNet
from jaxpapers.core.segmentation_metrics import boundary_f1, mean_iou
from jaxpapers.ropmb import (
    METHODS,
    PRDC,
    MemoryBank,
    RefineConfig,
    class_activation_maps,
    prdc_loss,
    pseudo_masks,
    refined_scores,
    seed_masks,
)

#: Test images whose pseudo-masks are kept for the figure.
EXAMPLES = 3


def init_models(cfg: CNNConfig, seeds: list[int]) -> tuple[nnx.GraphDef, object]:
    """Graph definition and CNN parameters stacked over ``seeds``."""
    states = [nnx.split(ConvNet(cfg, rngs=nnx.Rngs(s)))[1] for s in seeds]
    graphdef = nnx.split(ConvNet(cfg, rngs=nnx.Rngs(0)))[0]
    return graphdef, jax.tree.map(lambda *x: jnp.stack(x), *states)


@functools.partial(jax.jit, static_argnames=("graphdef", "steps", "batch", "lr"))
def train_classifiers(
    graphdef, params, images, labels, keys, *, steps: int, batch: int, lr: float = 1e-2
):
    """Adam on the multi-label (sigmoid cross-entropy) loss of each seed's CNN.

    ``images [S, N, H, W, 3]`` (in ``[0, 1]``; centred at 0.5 on the way in), ``labels [S, N,
    C]``, ``keys [S]``. Returns ``(params, losses
    [S, steps])``. Seeds run one after the other (``lax.map``): vmapped convolutions over weights
    become grouped convolutions, which XLA:CPU runs several times slower.
    """
    opt = optax.adam(optax.cosine_decay_schedule(lr, steps, alpha=0.1))

    def loss(p, x, y):
        logits = nnx.merge(graphdef, p)(x - 0.5)
        return jnp.mean(optax.sigmoid_binary_cross_entropy(logits, y))

    def one(args):
        p, x, y, k = args

        def body(carry, kk):
            p, s = carry
            idx = jax.random.randint(kk, (batch,), 0, x.shape[0])
            val, g = jax.value_and_grad(loss)(p, x[idx], y[idx])
            u, s = opt.update(g, s, p)
            return (optax.apply_updates(p, u), s), val

        (p, _), losses = jax.lax.scan(body, (p, opt.init(p)), jax.random.split(k, steps))
        return p, losses

    return jax.lax.map(one, (params, images, labels, keys))


class Features(NamedTuple):
    """Frozen CNN outputs per seed: ``features [S, N, h, w, D]``, ``logits [S, N, C]`` and the
    head kernel ``weights [S, D, C]``."""

    features: jax.Array
    logits: jax.Array
    weights: jax.Array


@functools.partial(jax.jit, static_argnames=("graphdef",))
def extract(graphdef, params, images) -> Features:
    """Feature maps and logits of each seed's CNN on its own ``images [S, N, H, W, 3]``."""

    def one(args):
        p, x = args
        out = nnx.merge(graphdef, p).forward(x - 0.5)
        return out.features, out.logits

    feats, logits = jax.lax.map(one, (params, images))
    return Features(feats, logits, params["head"]["kernel"])


class Evaluation(NamedTuple):
    """Per-seed numbers: ``miou``, ``bf1`` ``[S, methods]``, ``prdc_losses [S, steps]``,
    seed precision ``seed_precision [S]`` (share of foreground seed pixels of the right class),
    ``label_accuracy [S]`` (per-label accuracy of the classifier on the test split) and the
    pseudo-masks of the first ``examples`` test images ``[S, methods, examples, H, W]``."""

    miou: jax.Array
    bf1: jax.Array
    prdc_losses: jax.Array
    seed_precision: jax.Array
    label_accuracy: jax.Array
    examples: jax.Array


def _prototype_stage(
    train: Features,
    train_labels,
    test: Features,
    test_labels,
    test_masks,
    key,
    *,
    bank: MemoryBank,
    config: RefineConfig,
    bank_batch: int,
    prdc_steps: int,
    prdc_batch: int,
    prdc_lr: float,
):
    """One seed: fill the bank over the training split, train PRDC, evaluate every method."""
    feats, weights = train.features, train.weights
    n = feats.shape[0] // bank_batch * bank_batch
    cams = class_activation_maps(feats, weights, train_labels)
    seeds = seed_masks(cams, train_labels, config=config)
    kb, kp, kt = jax.random.split(key, 3)
    state = bank.init(feats[:bank_batch], seeds[:bank_batch], key=kb)
    shape = (n // bank_batch, bank_batch)

    def fill(st, batch):
        f, s = batch
        return bank.update(st, f, s), None

    state, _ = jax.lax.scan(
        fill,
        state,
        (
            feats[:n].reshape(*shape, *feats.shape[1:]),
            seeds[:n].reshape(*shape, *seeds.shape[1:]),
        ),
    )

    prdc = PRDC(feats.shape[-1], key=kp)
    opt = optax.adam(prdc_lr)

    def step(carry, kk):
        g, s = carry
        idx = jax.random.randint(kk, (prdc_batch,), 0, feats.shape[0])
        val, grad = jax.value_and_grad(prdc_loss)(
            g, state, feats[idx], weights, train_labels[idx], config=config
        )
        u, s = opt.update(grad, s, g)
        return (optax.apply_updates(g, u), s), val

    (prdc, _), losses = jax.lax.scan(step, (prdc, opt.init(prdc)), jax.random.split(kt, prdc_steps))

    size = test_masks.shape[-1]
    miou, bf1, examples = [], [], []
    for method in METHODS:
        scores = refined_scores(
            method, test.features, test.weights, test_labels, config=config, bank=state, prdc=prdc
        )
        pred = pseudo_masks(scores, test_labels, size)
        miou.append(mean_iou(pred, test_masks, test_labels.shape[1] + 1))
        bf1.append(boundary_f1(pred, test_masks))
        examples.append(pred[:EXAMPLES])

    test_seeds = seed_masks(
        class_activation_maps(test.features, test.weights, test_labels),
        test_labels,
        config=config,
    )
    small = jax.image.resize(
        jax.nn.one_hot(test_masks, test_labels.shape[1] + 1), test_seeds.shape, "linear"
    )
    fg = test_seeds[..., 1:]
    precision = jnp.sum(fg * small[..., 1:]) / jnp.maximum(jnp.sum(fg), 1.0)
    acc = jnp.mean((test.logits > 0) == (test_labels > 0))
    return Evaluation(jnp.stack(miou), jnp.stack(bf1), losses, precision, acc, jnp.stack(examples))


@functools.partial(
    jax.jit,
    static_argnames=("bank", "config", "bank_batch", "prdc_steps", "prdc_batch", "prdc_lr"),
)
def prototype_stage(
    train: Features,
    train_labels,
    test: Features,
    test_labels,
    test_masks,
    keys,
    *,
    bank: MemoryBank,
    config: RefineConfig,
    bank_batch: int,
    prdc_steps: int,
    prdc_batch: int,
    prdc_lr: float = 3e-3,
) -> Evaluation:
    """:func:`_prototype_stage` vmapped over seeds (no convolutions here, so vmap is cheap)."""
    run = functools.partial(
        _prototype_stage,
        bank=bank,
        config=config,
        bank_batch=bank_batch,
        prdc_steps=prdc_steps,
        prdc_batch=prdc_batch,
        prdc_lr=prdc_lr,
    )
    return jax.vmap(run)(train, train_labels, test, test_labels, test_masks, keys)
