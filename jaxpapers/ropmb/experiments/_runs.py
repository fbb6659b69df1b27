"""Runs of the P12 experiments: the shared pipeline (CNNs, banks, PRDC, four methods) and the
one-hot sanity check."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers.core.nn.cnn import CNNConfig
from jaxpapers.core.segmentation_metrics import mean_iou
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
from jaxpapers.ropmb.experiments._data import SCENES, make_splits
from jaxpapers.ropmb.experiments._pipeline import (
    EXAMPLES,
    compiled,
    init_models,
    prototype_stage,
)


class Sizes(NamedTuple):
    """Sizes of one mode (keyword fields; see ``experiments/__init__.py``)."""

    train_n: int
    test_n: int
    widths: tuple[int, ...]
    stem_stride: int
    steps: int
    batch: int
    k: int
    momentum: float
    bank_batch: int
    prdc_steps: int
    prdc_batch: int
    fast_compile: bool


def pipeline(seeds: list[int], s: Sizes, config: RefineConfig) -> dict[str, Any]:
    """Train one multi-label CNN per seed, fill its memory bank, train its PRDC and measure the
    pseudo-masks of the four methods on held-out scenes (JSON-ready)."""
    keys = jax.vmap(jax.random.key)(jnp.asarray(seeds))
    train = make_splits(s.train_n, jax.vmap(lambda k: jax.random.fold_in(k, 0))(keys))
    test = make_splits(s.test_n, jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys))
    cnn = CNNConfig(
        channels=3, widths=s.widths, classes=SCENES.num_classes, stem_stride=s.stem_stride
    )
    graphdef, params = init_models(cnn, seeds)
    train_classifiers, extract = compiled(s.fast_compile)
    tkeys = jax.vmap(lambda k: jax.random.fold_in(k, 2))(keys)
    params, losses = train_classifiers(
        graphdef, params, train.images, train.labels, tkeys, steps=s.steps, batch=s.batch
    )
    ev = prototype_stage(
        extract(graphdef, params, train.images),
        train.labels,
        extract(graphdef, params, test.images),
        test.labels,
        test.masks,
        jax.vmap(lambda k: jax.random.fold_in(k, 3))(keys),
        bank=MemoryBank(SCENES.num_classes, s.k, s.momentum),
        config=config,
        bank_batch=s.bank_batch,
        prdc_steps=s.prdc_steps,
        prdc_batch=s.prdc_batch,
    )
    miou, bf1 = np.asarray(ev.miou), np.asarray(ev.bf1)
    return {
        "miou": {m: miou[:, i].tolist() for i, m in enumerate(METHODS)},
        "bf1": {m: bf1[:, i].tolist() for i, m in enumerate(METHODS)},
        "cnn_final_loss": np.asarray(losses)[:, -10:].mean(1).tolist(),
        "prdc_loss_first_last": np.asarray(ev.prdc_losses)[:, [0, -1]].tolist(),
        "seed_precision": np.asarray(ev.seed_precision).tolist(),
        "label_accuracy": np.asarray(ev.label_accuracy).tolist(),
        "example_truth": encode_masks(test.masks[0, :EXAMPLES]),
        "example_masks": {m: encode_masks(ev.examples[0, i]) for i, m in enumerate(METHODS)},
    }


def encode_masks(masks: jax.Array) -> list[list[str]]:
    """Label maps ``[n, H, W]`` with ids < 10 as rows of digit strings (compact in JSON)."""
    return [["".join(str(int(v)) for v in row) for row in m] for m in np.asarray(masks)]


def decode_masks(rows: list[list[str]]) -> np.ndarray:
    """Inverse of :func:`encode_masks`."""
    return np.array([[[int(c) for c in row] for row in m] for m in rows], np.int32)


#: PRDC training in the one-hot sanity check: Adam steps and learning rate (large enough that
#: the graph moves far from its initialisation; the loss first/last is in the extras).
SANITY_PRDC_STEPS, SANITY_PRDC_LR = 40, 1e-2


def one_hot_sanity(seeds: list[int], n: int, k: int) -> dict[str, Any]:
    """Features one-hot per region of real scene masks (feature 0 = background, ``c + 1`` =
    class ``c``), head ``W = I[:, 1:]``: CAMs are the region indicators, so seeds, local and bank
    prototypes are the one-hot codes and every method should give mIoU 1. PRDC is trained on
    these exact seeds with its own loss (:func:`~jaxpapers.ropmb.prdc_loss`, full batch,
    ``SANITY_PRDC_STEPS`` Adam steps): the graph it learns must keep the arg-max on every region.
    Returns ``{method: [mIoU per seed]}``, ``"prdc_loss_first_last"`` and
    ``"prdc_relative_change"`` (``|trained - initial| / |initial|`` of the graph's weights)."""
    c = SCENES.num_classes
    weights = jnp.eye(c + 1)[:, 1:]
    config = RefineConfig()
    bank = MemoryBank(c, k)
    opt = optax.adam(SANITY_PRDC_LR)

    def one(masks, key):
        labels = jnp.stack([jnp.any(masks == i + 1, axis=(1, 2)) for i in range(c)], -1)
        labels = labels.astype(jnp.float32)
        feats = jax.nn.one_hot(masks, c + 1)
        seeds_ = seed_masks(class_activation_maps(feats, weights, labels), labels, config)
        state = bank.init(feats, seeds_, key=key)

        def step(carry, _):
            g, st = carry
            val, grad = jax.value_and_grad(prdc_loss)(g, state, feats, weights, labels, config)
            u, st = opt.update(grad, st, g)
            return (optax.apply_updates(g, u), st), val

        init = PRDC(c + 1, key=jax.random.fold_in(key, 1))
        (prdc, _), losses = jax.lax.scan(
            step, (init, opt.init(init)), None, length=SANITY_PRDC_STEPS
        )
        moved = _norm(jax.tree.map(jnp.subtract, prdc, init)) / _norm(init)
        out = []
        for method in METHODS:
            scores = refined_scores(method, feats, weights, labels, config, bank=state, prdc=prdc)
            pred = pseudo_masks(scores, labels, masks.shape[-1])
            out.append(mean_iou(pred, masks, c + 1))
        return jnp.stack(out), losses[jnp.asarray([0, -1])], moved

    keys = jax.vmap(jax.random.key)(1000 + jnp.asarray(seeds))
    masks = make_splits(n, keys).masks
    res, losses, moved = jax.jit(jax.vmap(one))(masks, keys)
    res = np.asarray(res)
    out: dict[str, Any] = {m: res[:, i].tolist() for i, m in enumerate(METHODS)}
    out["prdc_loss_first_last"] = np.asarray(losses).tolist()
    out["prdc_relative_change"] = np.asarray(moved).tolist()
    return out


def _norm(tree) -> jax.Array:
    return jnp.sqrt(sum(jnp.sum(x**2) for x in jax.tree.leaves(tree)))
