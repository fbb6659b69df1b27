"""Runs of the P12 experiments: the shared pipeline (CNNs, banks, PRDC, four methods tuned on a
validation split, a segmenter per method), the one-hot sanity check, and the run functions that
turn them into rows."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.core.fit import fit
from jaxpapers.core.segmentation_metrics import mean_iou
from jaxpapers.ropmb import (
    METHODS,
    PRDC,
    MemoryBank,
    RefineConfig,
    class_activation_maps,
    colour_affinity,
    prdc_loss,
    pseudo_masks,
    refined_scores,
    seed_masks,
)
from jaxpapers.ropmb.experiments._data import SCENES, make_splits
from jaxpapers.ropmb.experiments._pipeline import (
    CEILING_ALPHAS,
    EXAMPLES,
    INIT,
    OFFSETS,
    Split,
    extract,
    init_classifiers,
    prdc_grid,
    prototype_stage,
    segmenter_stage,
    train_classifiers,
)

if TYPE_CHECKING:
    from jaxpapers.ropmb.experiments import Config


class Pipeline(NamedTuple):
    """The shared pipeline's numbers, per seed (lists) and per row (``{row: [...]}``; rows:
    ``METHODS`` and ``INIT``, the graph at initialisation; the segmenter: ``METHODS`` only).

    Attributes:
      segmenter_miou: test mIoU of the segmenter trained on each method's pseudo-masks.
      miou, bf1, bf1_t1: mIoU and boundary F1 (tolerance 0 and 1) of each row's pseudo-masks of
        the training images.
      offsets: the background offset each row chose on the validation split.
      setting: the setting each row chose on the validation split (index into its grid).
      val_miou: each row's validation pseudo-mask mIoU at every setting and offset.
      cnn_final_loss: the classifier's mean training loss over its last 10 steps.
      prdc_loss_first_last: PRDC's objective at its first and last step, per setting.
      ceiling_val_miou, cam_val_miou: the prototype ceiling's and CAM's best validation mIoU.
      seed_precision: share of foreground seed pixels on their own class (test split).
      label_accuracy: the classifier's per-label accuracy on the test split.
      example_truth: ``[EXAMPLES, H, W]`` true masks of the first training images of seed 0.
      example_masks: each method's pseudo-masks of those images.
    """

    segmenter_miou: dict[str, list[float]]
    miou: dict[str, list[float]]
    bf1: dict[str, list[float]]
    bf1_t1: dict[str, list[float]]
    offsets: dict[str, list[float]]
    setting: dict[str, list[int]]
    val_miou: dict[str, list]
    cnn_final_loss: list[float]
    prdc_loss_first_last: list[list[list[float]]]
    ceiling_val_miou: list[float]
    cam_val_miou: list[float]
    seed_precision: list[float]
    label_accuracy: list[float]
    example_truth: np.ndarray
    example_masks: dict[str, np.ndarray]


def scene_count(config: Config) -> int:
    """Scenes generated per seed: the training, validation and test splits in one call."""
    return config.train_n + config.val_n + config.test_n


def pipeline(seeds: list[int], config: Config, refine: RefineConfig) -> Pipeline:
    """Train one multi-label CNN per seed; fill its memory bank and train its PRDC on the
    training split; tune every method's background offset on the validation split; train one
    segmenter per method on its pseudo-masks of the training images; test on held-out scenes."""
    keys = jax.vmap(jax.random.key)(jnp.asarray(seeds))

    def fold(i):
        return jax.vmap(lambda k: jax.random.fold_in(k, i))(keys)

    # One generator call (one compiled program) for all three splits.
    data = make_splits(scene_count(config), fold(0))
    a, b = config.train_n, config.train_n + config.val_n
    train, val, test = (
        jax.tree.map(lambda x, s=s: x[:, s], data)
        for s in (slice(0, a), slice(a, b), slice(b, None))
    )
    params = init_classifiers(fold(6), width=config.width, classes=SCENES.num_classes)
    params, losses = train_classifiers(
        params,
        train.images,
        train.labels,
        fold(2),
        steps=config.steps,
        batch=config.batch,
        lr=config.lr,
    )

    def split(s):
        return Split(extract(params, s.images), s.labels, s.images, s.masks)

    out = prototype_stage(
        split(train),
        split(val),
        split(test),
        fold(3),
        bank=MemoryBank(SCENES.num_classes, config.k, config.momentum),
        config=refine,
        bank_batch=config.bank_batch,
        prdc_steps=config.prdc_steps,
        prdc_smooth_weights=config.prdc_smooth_weights,
        bank_alphas=config.bank_alphas,
        prdc_batch=config.prdc_batch,
        prdc_lr=config.prdc_lr,
        top_fraction=config.top_fraction,
    )
    seg = segmenter_stage(
        train.images,
        out.train_masks,
        test.images,
        test.masks,
        fold(5),
        classes=SCENES.num_classes + 1,
        steps=config.seg_steps,
        batch=config.seg_batch,
        width=config.seg_width,
        lr=config.seg_lr,
    )
    seg = np.asarray(seg)
    rows = (*METHODS, INIT)

    def per_row(x):
        x = np.asarray(x)
        return {m: x[:, i].tolist() for i, m in enumerate(rows)}

    return Pipeline(
        segmenter_miou={m: seg[:, i].tolist() for i, m in enumerate(METHODS)},
        miou=per_row(out.miou),
        bf1=per_row(out.bf1),
        bf1_t1=per_row(out.bf1_t1),
        offsets=per_row(out.offsets),
        setting=per_row(out.setting),
        val_miou={m: np.asarray(v).tolist() for m, v in out.val_miou.items()},
        cnn_final_loss=np.asarray(losses)[:, -10:].mean(1).tolist(),
        prdc_loss_first_last=np.asarray(out.prdc_losses).tolist(),
        ceiling_val_miou=np.asarray(out.ceiling_val_miou).tolist(),
        cam_val_miou=np.asarray(out.cam_val_miou).tolist(),
        seed_precision=np.asarray(out.seed_precision).tolist(),
        label_accuracy=np.asarray(out.label_accuracy).tolist(),
        example_truth=np.asarray(train.masks[0, :EXAMPLES]),
        example_masks={m: np.asarray(out.examples[0, i]) for i, m in enumerate(METHODS)},
    )


def encode_masks(masks: jax.Array) -> list[list[str]]:
    """Label maps ``[n, H, W]`` with ids < 10 as rows of digit strings (compact in JSON)."""
    return [["".join(str(int(v)) for v in row) for row in m] for m in np.asarray(masks)]


def decode_masks(rows: list[list[str]]) -> np.ndarray:
    """Inverse of :func:`encode_masks`."""
    return np.array([[[int(c) for c in row] for row in m] for m in rows], np.int32)


#: PRDC in the one-hot sanity check: Adam steps, learning rate, and the scale of the message
#: weights at initialisation (large, so that the untrained graph mixes the classes' prototypes
#: and the rows depend on what training learns).
SANITY_PRDC_STEPS, SANITY_PRDC_LR, SANITY_INIT_SCALE = 200, 1e-2, 5.0
#: ... and of its attention projections (sharp attention: node-specific messages).
SHARP = 3.0
#: The sanity check reads the refined prototypes' global part alone (``alpha = 1``): the local
#: prototypes of exact seeds would give the exact mask whatever the graph outputs.
SANITY_REFINE = RefineConfig(alpha=1.0)


class OneHotSanity(NamedTuple):
    """Per method the mIoU of every seed (``{method: [...]}``, RO-PMB with the trained graph),
    the mIoU of RO-PMB with the graph at its initialisation, PRDC's objective at its first and
    last step, and ``|trained - initial| / |initial|`` of the graph's weights, per seed."""

    miou: dict[str, list[float]]
    untrained_miou: list[float]
    prdc_loss_first_last: list[list[float]]
    prdc_relative_change: list[float]


def one_hot_sanity(
    seeds: list[int], n: int, k: int, *, pool: int, restarts: int = 3
) -> OneHotSanity:
    """Features one-hot per region of real scene masks (feature 0 = background, ``c + 1`` =
    class ``c``), head ``W = I[:, 1:]``: CAMs are the region indicators, so seeds, local and bank
    prototypes are the one-hot codes. The graph starts with large message weights
    (``SANITY_INIT_SCALE``), so the enriched prototypes mix the classes, and is trained with its
    own objective (:func:`~jaxpapers.ropmb.prdc_loss`: image labels and colour affinity, the
    one-hot features serving as the image; full batch, ``SANITY_PRDC_STEPS`` Adam steps) from
    ``restarts`` initialisations; the graph with the lowest final objective is kept (a choice
    that uses no truth: from one initialisation training sometimes stops in a local minimum
    whose objective is several times the exact one's, see ``NOTES.md``). The
    refinement reads the global part alone (``SANITY_REFINE``). Known answer: CAM, SIPE and the
    bank give the exact mask; RO-PMB gives it after training and not before (the objective's
    optimum is the true mask and training reaches it). ``n`` scenes per seed (the first of
    ``pool`` generated, so that the pipeline's compiled generator is reused), ``k`` bank
    prototypes per class."""
    c = SCENES.num_classes
    weights = jnp.eye(c + 1)[:, 1:]
    config = SANITY_REFINE
    bank = MemoryBank(c, k)

    def one(masks, key):
        labels = jnp.stack([jnp.any(masks == i + 1, axis=(1, 2)) for i in range(c)], -1)
        labels = labels.astype(jnp.float32)
        feats = jax.nn.one_hot(masks, c + 1)
        seeds_ = seed_masks(class_activation_maps(feats, weights, labels), labels, config=config)
        state = bank.init(feats, seeds_, key=key)
        affinity = colour_affinity(feats, feats.shape[1])

        def loss_fn(g, _batch, _key):
            return prdc_loss(g, state, feats, weights, labels, config=config, affinity=affinity)

        def train(r):
            init = PRDC(c + 1, key=jax.random.fold_in(key, 1 + r), out_scale=SANITY_INIT_SCALE)
            # Sharp attention: each prototype takes its messages from a few others.
            init = eqx.tree_at(lambda g: (g.w_q, g.w_k), init, (init.w_q * SHARP, init.w_k * SHARP))
            res = fit(loss_fn, init, optax.adam(SANITY_PRDC_LR), steps=SANITY_PRDC_STEPS, key=key)
            return init, res.params, res.losses, loss_fn(res.params, None, None)

        # Restarts: the graph whose final objective is lowest (no truth used in the choice).
        inits, trained, all_losses, final = jax.vmap(train)(jnp.arange(restarts))
        best = jnp.argmin(final)
        init, params, losses = jax.tree.map(lambda x: x[best], (inits, trained, all_losses))
        moved = _norm(jax.tree.map(jnp.subtract, params, init)) / _norm(init)

        def miou(method, prdc):
            scores = refined_scores(
                method, feats, weights, labels, config=config, bank=state, prdc=prdc
            )
            return mean_iou(pseudo_masks(scores, labels, masks.shape[-1]), masks, c + 1)

        out = jnp.stack([miou(m, params) for m in METHODS])
        return out, miou("ropmb", init), losses[jnp.asarray([0, -1])], moved

    keys = jax.vmap(jax.random.key)(1000 + jnp.asarray(seeds))
    masks = make_splits(pool, keys).masks[:, :n]
    res, untrained, losses, moved = jax.jit(jax.vmap(one))(masks, keys)
    res = np.asarray(res)
    return OneHotSanity(
        {m: res[:, i].tolist() for i, m in enumerate(METHODS)},
        np.asarray(untrained).tolist(),
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
ROPMB_INIT = "RO-PMB, graph at initialisation"
ROWS = {"cam": CAM, "sipe": SIPE, "bank": BANK, "ropmb": ROPMB}
#: The pseudo-mask rows: the four methods and the graph at initialisation.
MASK_ROWS = {**ROWS, INIT: ROPMB_INIT}
SANITY_ROWS = {m: f"1 - mIoU, {r}" for m, r in ROWS.items()}
SANITY_UNTRAINED = "1 - mIoU, RO-PMB with the graph at initialisation"
LABEL_ACC, SEED_PREC = "classifier per-label test accuracy", "foreground seed precision"
CEILING = "prototype ceiling (true-seed bank and local prototypes)"
CAM_VAL = "CAM (validation)"


def _pipeline(ctx: Context, config: Config) -> Pipeline:
    return ctx.cached("pipeline", lambda: pipeline(ctx.seed_list, config, REFINE))


def _diagnosis(res: Pipeline) -> str:
    acc = float(np.mean(res.label_accuracy))
    prec = float(np.mean(res.seed_precision))
    ceil, cam = float(np.mean(res.ceiling_val_miou)), float(np.mean(res.cam_val_miou))
    return (
        f"Every prototype method starts from the CAM seeds. Here the classifier's per-label test "
        f"accuracy is {acc:.3f} and {prec:.3f} of the foreground seed pixels carry the right "
        "class (levels of seeds_informative: 0.9 and 0.5). Prototypes pooled under the TRUE "
        f"masks reach a validation mIoU of {ceil:.3f} against CAM's {cam:.3f} "
        "(prototype_ceiling)."
    )


def _common_extras(res: Pipeline, config: Config) -> dict:
    return {
        "classifier_label_accuracy": res.label_accuracy,
        "cnn_final_loss": res.cnn_final_loss,
        "seed_precision": res.seed_precision,
        "prdc_grid_steps_smooth_weight": [
            list(g) for g in prdc_grid(config.prdc_steps, config.prdc_smooth_weights)
        ],
        "bank_alpha_grid": list(config.bank_alphas),
        "prdc_loss_first_last_per_smooth_weight": res.prdc_loss_first_last,
        "chosen_setting": {MASK_ROWS[m]: v for m, v in res.setting.items()},
        "tuned_background_offset": {MASK_ROWS[m]: v for m, v in res.offsets.items()},
        "offset_grid": list(OFFSETS),
        "validation_miou_per_setting_and_offset": {
            MASK_ROWS[m]: v for m, v in res.val_miou.items()
        },
        "config": {f.name: getattr(REFINE, f.name) for f in dataclasses.fields(REFINE)},
        "diagnosis": _diagnosis(res),
    }


def run_segmenter(ctx: Context, config: Config) -> Outcome:
    """Rows: the test mIoU of the segmenter trained on each method's pseudo-masks."""
    res = _pipeline(ctx, config)
    extras = {
        "metric_label": "segmenter test mIoU (7 classes incl. background)",
        "pseudo_mask_miou": {MASK_ROWS[m]: v for m, v in res.miou.items()},
    }
    extras.update(_common_extras(res, config))
    return Outcome({ROWS[m]: v for m, v in res.segmenter_miou.items()}, extras)


def run_pseudo_masks(ctx: Context, config: Config, *, metric: str, label: str) -> Outcome:
    """Rows of one pseudo-mask metric (``"miou"`` or ``"bf1"``, boundary F1 at tolerance 0; the
    tolerance-1 values go to the extras) per row, on the training images (the masks the
    segmenters train on)."""
    res = _pipeline(ctx, config)
    other = "bf1" if metric == "miou" else "miou"
    extras = {
        "metric_label": label,
        other: {MASK_ROWS[m]: v for m, v in getattr(res, other).items()},
        "bf1_tolerance_1": {MASK_ROWS[m]: v for m, v in res.bf1_t1.items()},
    }
    extras.update(_common_extras(res, config))
    if metric == "miou":  # the example pseudo-masks are stored (and drawn) once
        extras["example_truth"] = encode_masks(res.example_truth)
        extras["example_masks"] = {ROWS[m]: encode_masks(v) for m, v in res.example_masks.items()}
    return Outcome({MASK_ROWS[m]: v for m, v in getattr(res, metric).items()}, extras)


def run_prototype_ceiling(ctx: Context, config: Config) -> Outcome:
    """Rows: the best validation pseudo-mask mIoU of prototypes pooled under the true masks
    (bank and local prototypes; ``CEILING_ALPHAS`` x ``OFFSETS``) and CAM's (``OFFSETS``)."""
    res = _pipeline(ctx, config)
    values = {CEILING: res.ceiling_val_miou, CAM_VAL: res.cam_val_miou}
    extras = {
        "ceiling_alpha_grid": list(CEILING_ALPHAS),
        "offset_grid": list(OFFSETS),
        "diagnosis": _diagnosis(res),
    }
    return Outcome(values, extras)


def run_seeds_informative(ctx: Context, config: Config) -> Outcome:
    res = _pipeline(ctx, config)
    values = {LABEL_ACC: res.label_accuracy, SEED_PREC: res.seed_precision}
    extras = {"cnn_final_loss": res.cnn_final_loss, "diagnosis": _diagnosis(res)}
    return Outcome(values, extras)


def run_one_hot_sanity(ctx: Context, config: Config) -> Outcome:
    res = ctx.cached(
        "one_hot_sanity",
        lambda: one_hot_sanity(
            ctx.seed_list,
            config.sanity_n,
            config.k,
            pool=scene_count(config),
            restarts=config.sanity_restarts,
        ),
    )
    values = {SANITY_ROWS[m]: [1.0 - v for v in res.miou[m]] for m in ROWS}
    values[SANITY_UNTRAINED] = [1.0 - v for v in res.untrained_miou]
    extras = {
        "prdc_loss_first_last": res.prdc_loss_first_last,
        "prdc_relative_weight_change": res.prdc_relative_change,
    }
    return Outcome(values, extras)
