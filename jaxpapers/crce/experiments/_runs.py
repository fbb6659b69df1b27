"""Run functions of the P09 experiments (declared in ``__init__``)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.core.nn.cnn import CNNConfig
from jaxpapers.crce import (
    cell_fractions,
    class_activation_map,
    context_share,
    contrastive_cam,
    deletion_insertion,
    grad_cam,
    mask_agreement,
    pointing_game,
)
from jaxpapers.crce.experiments._data import birds
from jaxpapers.crce.experiments._train import (
    BETAS,
    METHODS,
    group_accuracies,
    init_model,
    penalties,
    predict,
    train_model,
)

GRID = (8, 8)  # feature map of a 32x32 image after the stride-2 stem and one stride-2 stage
MAPS = ("ContrastiveCAM", "Grad-CAM", "CAM")
GROUPS = ("square/stripes", "square/noise", "ring/stripes", "ring/noise")
#: Seed of the balanced validation set on which beta was chosen (the test sets use seeds 7 and 8).
VALIDATION_SEED = 17


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """Everything that depends on the run size.

    Attributes:
      steps, batch, lr: Adam steps, minibatch size and learning rate of every model.
      train_n: training images per seed; test_n: images of each balanced, reversed and
        validation test set; faith_n: images explained by ``faithfulness``.
      curve_steps: removal steps of the deletion and insertion curves.
      widths: channels of the CNN's stages.
    """

    steps: int
    batch: int
    train_n: int
    test_n: int
    faith_n: int
    curve_steps: int
    widths: tuple[int, ...]
    lr: float


def _cnn(config: Config, classes: int) -> CNNConfig:
    return CNNConfig(channels=3, widths=config.widths, classes=classes, stem_stride=2)


class MethodRuns(NamedTuple):
    """One method trained on every seed's training set: one entry per seed.

    Attributes:
      worst, mean: worst-group and mean-group accuracy on the balanced test set.
      groups: the four group accuracies (:data:`GROUPS`) on the balanced test set.
      reversed: accuracy on the reversed-context test set.
      context_share: mean ContrastiveCAM share on context cells on the balanced test set.
      validation_worst: worst-group accuracy on the beta-selection set.
      finite: whether every training step was finite.
      constant: whether the model predicts one class for every balanced test image.
      params: the trained parameters' leaves (float32 arrays; CE only, ``()`` otherwise).
    """

    worst: list[float]
    mean: list[float]
    groups: list[list[float]]
    reversed: list[float]
    context_share: list[float]
    validation_worst: list[float]
    finite: list[bool]
    constant: list[bool]
    params: list[list[np.ndarray]]


def _train_birds(
    ctx: Context, config: Config, agree: float, methods: tuple[str, ...]
) -> dict[str, MethodRuns]:
    """Train every method on the same per-seed training set (context agreement ``agree``);
    accuracies per group on a balanced and on a reversed test set, and the attribution share on
    context of each model's ContrastiveCAM on the balanced set."""
    balanced = birds(config.test_n, None, seed=7)
    reversed_ = birds(config.test_n, 0.0, seed=8)
    validation = birds(config.test_n, None, seed=VALIDATION_SEED)
    context = 1.0 - cell_fractions(balanced.objects, GRID)
    out = {n: MethodRuns(*([] for _ in MethodRuns._fields)) for n in methods}
    for s in ctx.seed_list:
        train = birds(config.train_n, agree, seed=100 + s)
        for name in methods:
            graphdef, params = init_model(_cnn(config, 2), s)
            run = train_model(
                graphdef,
                params,
                train,
                penalties(name),
                seed=200 + s,
                steps=config.steps,
                batch=config.batch,
                grid=GRID,
                lr=config.lr,
            )
            pred = predict(graphdef, run.params, balanced.images)
            acc = group_accuracies(pred, balanced, 4)
            rev = predict(graphdef, run.params, reversed_.images)
            val = group_accuracies(predict(graphdef, run.params, validation.images), validation, 4)
            share = _share(graphdef, run.params, balanced.images, balanced.labels, context)
            row = out[name]
            row.worst.append(float(np.nanmin(acc)))
            row.mean.append(float(np.nanmean(acc)))
            row.groups.append(acc.tolist())
            row.reversed.append(float(np.mean(rev == np.asarray(reversed_.labels))))
            row.context_share.append(float(share))
            row.validation_worst.append(float(np.nanmin(val)))
            row.finite.append(run.finite)
            row.constant.append(bool(len(np.unique(pred)) == 1))
            if name == "CE":
                row.params.append([np.asarray(x) for x in jax.tree.leaves(run.params)])
    return out


@functools.partial(jax.jit, static_argnums=0)
def _share(graphdef, params, images, labels, context):
    net = nnx.merge(graphdef, params)
    a = net.features(images)
    return jnp.mean(context_share(contrastive_cam(net.classify, a, labels), context))


def _summary(res: dict[str, MethodRuns]) -> dict[str, Any]:
    return {
        "balanced_mean_accuracy": {n: r.mean for n, r in res.items()},
        "reversed_context_accuracy": {n: r.reversed for n, r in res.items()},
        "group_accuracy " + str(GROUPS): {n: r.groups for n, r in res.items()},
        "contrastive_cam_share_on_context": {n: r.context_share for n, r in res.items()},
        "validation_worst_group_accuracy (beta selection set)": {
            n: r.validation_worst for n, r in res.items()
        },
        "constant_predictor (collapsed) per seed": {n: r.constant for n, r in res.items()},
        "all_losses_finite": all(all(r.finite) for r in res.values()),
    }


def _shift_models(ctx: Context, config: Config) -> dict[str, MethodRuns]:
    """The context-shift models (shared by ``context_shift`` and its precondition)."""
    return ctx.cached("birds_0.95", lambda: _train_birds(ctx, config, 0.95, tuple(METHODS)))


#: The row of ``context_shift_exists``.
CE_GAP = "CE: mean-group minus worst-group accuracy"


def run_shift_exists(ctx: Context, config: Config) -> Outcome:
    res = _shift_models(ctx, config)["CE"]
    gap = [m - w for m, w in zip(res.mean, res.worst, strict=True)]
    extras = {
        "CE worst-group accuracy": res.worst,
        "CE balanced mean accuracy": res.mean,
        "CE group accuracy " + str(GROUPS): res.groups,
    }
    return Outcome({CE_GAP: gap}, extras)


#: The row of ``maps_can_differ``.
SHARED_RATIO = "CE head: |mean_c W_c| / rms_c |W_c - mean|"


def run_maps_differ(ctx: Context, config: Config) -> Outcome:
    res = _faithfulness_cached(ctx, config)
    return Outcome({SHARED_RATIO: res.shared_head_weight_ratio.tolist()})


def run_context_shift(ctx: Context, config: Config) -> Outcome:
    res = _shift_models(ctx, config)
    values = {n: r.worst for n, r in res.items()}
    extras = {
        "train_context_agreement": 0.95,
        **_summary(res),
        "beta (chosen on the validation set)": dict(BETAS),
        "steps": config.steps,
    }
    return Outcome(values, extras)


#: The models trained without context information; the faithfulness experiment explains their CE
#: models (one step of the run cache: whichever experiment runs first trains them).
NO_CONTEXT_METHODS = ("CE", "CR-CE (known context)")


def _no_context_models(ctx: Context, config: Config) -> dict[str, MethodRuns]:
    return ctx.cached("birds_0.5", lambda: _train_birds(ctx, config, 0.5, NO_CONTEXT_METHODS))


def run_no_context(ctx: Context, config: Config) -> Outcome:
    res = _no_context_models(ctx, config)
    values = {n: r.mean for n, r in res.items()}
    extras = {
        "train_context_agreement": 0.5,
        "worst_group_accuracy": {n: r.worst for n, r in res.items()},
        **_summary(res),
    }
    return Outcome(values, extras)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _evaluate(graphdef, curve_steps, params, images, objects):
    net = nnx.merge(graphdef, params)
    out = net.forward(images)
    target = jnp.argmax(out.logits, -1)
    maps = {
        "ContrastiveCAM": contrastive_cam(net.classify, out.features, target),
        "Grad-CAM": grad_cam(net.classify, out.features, target),
        "CAM": class_activation_map(out.features, net.head.kernel[...], target),
    }
    res = {}
    for name, m in maps.items():
        curves = deletion_insertion(net, images, m, target, steps=curve_steps)
        res[name] = MapScores(
            deletion_auc=jnp.mean(curves.deletion_auc),
            insertion_auc=jnp.mean(curves.insertion_auc),
            deletion_curve=jnp.mean(curves.deletion, 0),
            insertion_curve=jnp.mean(curves.insertion, 0),
            pointing_game=jnp.mean(pointing_game(m, objects)),
            mask_agreement=jnp.mean(mask_agreement(m, objects)),
            examples=m[:4],
        )
    # The component of the head shared by every class (what ContrastiveCAM removes) relative to
    # the class-specific part: softmax-CE gradients sum to zero over the logits, so only the
    # initialisation and Adam's per-coordinate scaling give the head a shared component.
    kernel = net.head.kernel[...]
    shared = jnp.mean(kernel, axis=1, keepdims=True)
    ratio = jnp.linalg.norm(shared) / jnp.linalg.norm(kernel - shared) * jnp.sqrt(kernel.shape[1])
    return res, ratio, target


class MapScores(NamedTuple):
    """Faithfulness of one attribution map (per seed when stacked): mean deletion and insertion
    AUC and curves over the test images, pointing game, mask agreement, the first 4 maps."""

    deletion_auc: np.ndarray
    insertion_auc: np.ndarray
    deletion_curve: np.ndarray
    insertion_curve: np.ndarray
    pointing_game: np.ndarray
    mask_agreement: np.ndarray
    examples: np.ndarray


class Faithfulness(NamedTuple):
    """``faithfulness`` on the no-context CE models, every array with a leading seed axis
    (float64): the scores of each map of :data:`MAPS`, the head's shared-component ratio, the
    models' test accuracy, and the first 4 test images."""

    maps: dict[str, MapScores]
    shared_head_weight_ratio: np.ndarray
    accuracy: np.ndarray
    images: np.ndarray


def _faithfulness(ctx: Context, config: Config) -> Faithfulness:
    trained = _no_context_models(ctx, config)["CE"]
    test = birds(config.faith_n, None, seed=9)
    per_seed = []
    for s, leaves in zip(ctx.seed_list, trained.params, strict=True):
        graphdef, params = init_model(_cnn(config, 2), s)
        params = jax.tree.unflatten(
            jax.tree.structure(params), [jnp.asarray(x, jnp.float32) for x in leaves]
        )
        res, ratio, target = _evaluate(
            graphdef, config.curve_steps, params, test.images, test.objects
        )
        accuracy = np.mean(np.asarray(target) == np.asarray(test.labels))
        per_seed.append((res, ratio, accuracy))
    maps, ratio, accuracy = jax.tree.map(
        lambda *x: np.stack([np.asarray(v) for v in x]).astype(np.float64), *per_seed
    )
    return Faithfulness(maps, ratio, accuracy, np.asarray(test.images[:4], np.float64))


def _faithfulness_cached(ctx: Context, config: Config) -> Faithfulness:
    """:func:`_faithfulness` (shared by ``faithfulness`` and its precondition)."""
    return ctx.cached("faithfulness", lambda: _faithfulness(ctx, config))


def run_faithfulness(ctx: Context, config: Config) -> Outcome:
    res = _faithfulness_cached(ctx, config)
    values = {m: res.maps[m].deletion_auc.tolist() for m in MAPS}
    extras = {
        "insertion_auc (higher is faithful)": {m: res.maps[m].insertion_auc for m in MAPS},
        "pointing_game": {m: res.maps[m].pointing_game for m in MAPS},
        "mask_agreement": {m: res.maps[m].mask_agreement for m in MAPS},
        "test_accuracy": res.accuracy,
        "shared_head_weight_ratio (|mean_c W_c| / rms_c |W_c - mean|)": (
            res.shared_head_weight_ratio
        ),
        "deletion_curves": {m: np.mean(res.maps[m].deletion_curve, 0).tolist() for m in MAPS},
        "insertion_curves": {m: np.mean(res.maps[m].insertion_curve, 0).tolist() for m in MAPS},
        "examples": {m: res.maps[m].examples[0] for m in MAPS},
        "images": res.images,
    }
    return Outcome(values, extras)
