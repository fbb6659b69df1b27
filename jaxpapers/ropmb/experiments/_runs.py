"""Runs of the P12 experiments: the shared pipeline (CNNs, banks, PRDC, four methods), the one-hot
sanity check, and the run functions that turn them into rows."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers.core.experiment import Context, Outcome
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
    extract,
    init_models,
    prototype_stage,
    train_classifiers,
)

if TYPE_CHECKING:
    from jaxpapers.ropmb.experiments import Config


class Pipeline(NamedTuple):
    """The shared pipeline's numbers, per seed (lists) and per method (``{method: [...]}``).

    Attributes:
      miou, bf1: pseudo-mask mIoU and boundary F1 of each method.
      cnn_final_loss: the classifier's mean training loss over its last 10 steps.
      prdc_loss_first_last: the PRDC loss at its first and last step.
      seed_precision: share of foreground seed pixels on their own class (test split).
      label_accuracy: the classifier's per-label accuracy on the test split.
      example_truth: ``[EXAMPLES, H, W]`` true masks of the first test images of seed 0.
      example_masks: each method's pseudo-masks of those images.
    """

    miou: dict[str, list[float]]
    bf1: dict[str, list[float]]
    cnn_final_loss: list[float]
    prdc_loss_first_last: list[list[float]]
    seed_precision: list[float]
    label_accuracy: list[float]
    example_truth: np.ndarray
    example_masks: dict[str, np.ndarray]


def pipeline(seeds: list[int], config: Config, refine: RefineConfig) -> Pipeline:
    """Train one multi-label CNN per seed, fill its memory bank, train its PRDC and measure the
    pseudo-masks of the four methods on held-out scenes."""
    keys = jax.vmap(jax.random.key)(jnp.asarray(seeds))
    train = make_splits(config.train_n, jax.vmap(lambda k: jax.random.fold_in(k, 0))(keys))
    test = make_splits(config.test_n, jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys))
    cnn = CNNConfig(
        channels=3, widths=config.widths, classes=SCENES.num_classes, stem_stride=config.stem_stride
    )
    graphdef, params = init_models(cnn, seeds)
    tkeys = jax.vmap(lambda k: jax.random.fold_in(k, 2))(keys)
    params, losses = train_classifiers(
        graphdef,
        params,
        train.images,
        train.labels,
        tkeys,
        steps=config.steps,
        batch=config.batch,
    )
    ev = prototype_stage(
        extract(graphdef, params, train.images),
        train.labels,
        extract(graphdef, params, test.images),
        test.labels,
        test.masks,
        jax.vmap(lambda k: jax.random.fold_in(k, 3))(keys),
        bank=MemoryBank(SCENES.num_classes, config.k, config.momentum),
        config=refine,
        bank_batch=config.bank_batch,
        prdc_steps=config.prdc_steps,
        prdc_batch=config.prdc_batch,
    )
    miou, bf1 = np.asarray(ev.miou), np.asarray(ev.bf1)
    return Pipeline(
        miou={m: miou[:, i].tolist() for i, m in enumerate(METHODS)},
        bf1={m: bf1[:, i].tolist() for i, m in enumerate(METHODS)},
        cnn_final_loss=np.asarray(losses)[:, -10:].mean(1).tolist(),
        prdc_loss_first_last=np.asarray(ev.prdc_losses)[:, [0, -1]].tolist(),
        seed_precision=np.asarray(ev.seed_precision).tolist(),
        label_accuracy=np.asarray(ev.label_accuracy).tolist(),
        example_truth=np.asarray(test.masks[0, :EXAMPLES]),
        example_masks={m: np.asarray(ev.examples[0, i]) for i, m in enumerate(METHODS)},
    )


def encode_masks(masks: jax.Array) -> list[list[str]]:
    """Label maps ``[n, H, W]`` with ids < 10 as rows of digit strings (compact in JSON)."""
    return [["".join(str(int(v)) for v in row) for row in m] for m in np.asarray(masks)]


def decode_masks(rows: list[list[str]]) -> np.ndarray:
    """Inverse of :func:`encode_masks`."""
    return np.array([[[int(c) for c in row] for row in m] for m in rows], np.int32)


#: PRDC training in the one-hot sanity check: Adam steps and learning rate (large enough that
#: the graph moves far from its initialisation; the loss first/last is in the extras).
SANITY_PRDC_STEPS, SANITY_PRDC_LR = 40, 1e-2


class OneHotSanity(NamedTuple):
    """Per method the mIoU of every seed (``{method: [...]}``), the PRDC loss at its first and
    last step, and ``|trained - initial| / |initial|`` of the graph's weights, per seed."""

    miou: dict[str, list[float]]
    prdc_loss_first_last: list[list[float]]
    prdc_relative_change: list[float]


def one_hot_sanity(seeds: list[int], n: int, k: int) -> OneHotSanity:
    """Features one-hot per region of real scene masks (feature 0 = background, ``c + 1`` =
    class ``c``), head ``W = I[:, 1:]``: CAMs are the region indicators, so seeds, local and bank
    prototypes are the one-hot codes and every method should give mIoU 1. PRDC is trained on
    these exact seeds with its own loss (:func:`~jaxpapers.ropmb.prdc_loss`, full batch,
    ``SANITY_PRDC_STEPS`` Adam steps): the graph it learns must keep the arg-max on every region.
    ``n`` scenes per seed, ``k`` bank prototypes per class."""
    c = SCENES.num_classes
    weights = jnp.eye(c + 1)[:, 1:]
    config = RefineConfig()
    bank = MemoryBank(c, k)
    opt = optax.adam(SANITY_PRDC_LR)

    def one(masks, key):
        labels = jnp.stack([jnp.any(masks == i + 1, axis=(1, 2)) for i in range(c)], -1)
        labels = labels.astype(jnp.float32)
        feats = jax.nn.one_hot(masks, c + 1)
        seeds_ = seed_masks(class_activation_maps(feats, weights, labels), labels, config=config)
        state = bank.init(feats, seeds_, key=key)

        def step(carry, _):
            g, st = carry
            val, grad = jax.value_and_grad(prdc_loss)(
                g, state, feats, weights, labels, config=config
            )
            u, st = opt.update(grad, st, g)
            return (optax.apply_updates(g, u), st), val

        init = PRDC(c + 1, key=jax.random.fold_in(key, 1))
        (prdc, _), losses = jax.lax.scan(
            step, (init, opt.init(init)), None, length=SANITY_PRDC_STEPS
        )
        moved = _norm(jax.tree.map(jnp.subtract, prdc, init)) / _norm(init)
        out = []
        for method in METHODS:
            scores = refined_scores(
                method, feats, weights, labels, config=config, bank=state, prdc=prdc
            )
            pred = pseudo_masks(scores, labels, masks.shape[-1])
            out.append(mean_iou(pred, masks, c + 1))
        return jnp.stack(out), losses[jnp.asarray([0, -1])], moved

    keys = jax.vmap(jax.random.key)(1000 + jnp.asarray(seeds))
    masks = make_splits(n, keys).masks
    res, losses, moved = jax.jit(jax.vmap(one))(masks, keys)
    res = np.asarray(res)
    return OneHotSanity(
        {m: res[:, i].tolist() for i, m in enumerate(METHODS)},
        np.asarray(losses).tolist(),
        np.asarray(moved).tolist(),
    )


def _norm(tree) -> jax.Array:
    return jnp.sqrt(sum(jnp.sum(x**2) for x in jax.tree.leaves(tree)))


# --------------------------------------------------------------------------------------------
# Run functions: rows of each experiment from the shared computations (``ctx.cached``).

#: The thresholds and mixing weights of every method (:class:`~jaxpapers.ropmb.RefineConfig`).
REFINE = RefineConfig()
CAM, SIPE, BANK, ROPMB = "CAM", "SIPE (self-prototypes)", "bank, no GNN", "RO-PMB"
ROWS = {"cam": CAM, "sipe": SIPE, "bank": BANK, "ropmb": ROPMB}
SANITY_ROWS = {m: f"1 - mIoU, {r}" for m, r in ROWS.items()}
LABEL_ACC, SEED_PREC = "classifier per-label test accuracy", "foreground seed precision"


def _pipeline(ctx: Context, config: Config) -> Pipeline:
    return ctx.cached("pipeline", lambda: pipeline(ctx.seed_list, config, REFINE))


def _diagnosis(res: Pipeline) -> str:
    acc = float(np.mean(res.label_accuracy))
    prec = float(np.mean(res.seed_precision))
    return (
        f"Every prototype method starts from the CAM seeds. Here the classifier's per-label test "
        f"accuracy is {acc:.3f} and {prec:.3f} of the foreground seed pixels carry the right "
        "class: prototypes pooled under wrong seeds describe the wrong region, and the bank and "
        "the GNN average such errors rather than remove them. The methods can only separate once "
        "the seeds are mostly right (a better-trained classifier: --full trains 20x longer on "
        "16x more images with a deeper CNN at full feature resolution); the sanity experiment "
        "shows the refinement itself is exact when features and seeds are."
    )


def run_pseudo_masks(ctx: Context, config: Config, *, metric: str, label: str) -> Outcome:
    """Rows of one pseudo-mask metric (``"miou"`` or ``"bf1"``) per method."""
    res = _pipeline(ctx, config)
    other = "bf1" if metric == "miou" else "miou"
    extras = {
        "metric_label": label,
        other: {ROWS[m]: v for m, v in getattr(res, other).items()},
        "classifier_label_accuracy": res.label_accuracy,
        "cnn_final_loss": res.cnn_final_loss,
        "seed_precision": res.seed_precision,
        "prdc_loss_first_last": res.prdc_loss_first_last,
        "config": {f.name: getattr(REFINE, f.name) for f in dataclasses.fields(REFINE)},
        "diagnosis": _diagnosis(res),
    }
    if metric == "miou":  # the example pseudo-masks are stored (and drawn) once
        extras["example_truth"] = encode_masks(res.example_truth)
        extras["example_masks"] = {ROWS[m]: encode_masks(v) for m, v in res.example_masks.items()}
    return Outcome({ROWS[m]: v for m, v in getattr(res, metric).items()}, extras)


def run_seeds_informative(ctx: Context, config: Config) -> Outcome:
    res = _pipeline(ctx, config)
    values = {LABEL_ACC: res.label_accuracy, SEED_PREC: res.seed_precision}
    extras = {"cnn_final_loss": res.cnn_final_loss, "diagnosis": _diagnosis(res)}
    return Outcome(values, extras)


def run_one_hot_sanity(ctx: Context, config: Config) -> Outcome:
    # The test split's size: its scene generator is already compiled for that shape.
    res = ctx.cached(
        "one_hot_sanity", lambda: one_hot_sanity(ctx.seed_list, config.test_n, config.k)
    )
    values = {SANITY_ROWS[m]: [1.0 - v for v in res.miou[m]] for m in ROWS}
    extras = {
        "prdc_loss_first_last (PRDC trained on the exact seeds)": res.prdc_loss_first_last,
        "prdc_relative_weight_change": res.prdc_relative_change,
    }
    return Outcome(values, extras)
