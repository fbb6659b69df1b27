"""Run functions of the P09 experiments (registered in ``__init__``)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.core.nn.cnn import CNNConfig
from jaxpapers.core.pytrees import FAST_COMPILE
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


def _cnn(sizes: Any, classes: int) -> CNNConfig:
    return CNNConfig(channels=3, widths=sizes.widths, classes=classes, stem_stride=2)


def _fast(ctx: Context) -> bool:
    return ctx.pick(smoke=True, quick=False, full=False)


def _train_birds(
    ctx: Context, sizes: Any, agree: float, methods: tuple[str, ...]
) -> dict[str, Any]:
    """Train every method on the same per-seed training set (context agreement ``agree``);
    accuracies per group on a balanced and on a reversed test set, and the attribution share on
    context of each model's ContrastiveCAM on the balanced set."""
    fast = _fast(ctx)
    balanced = birds(sizes.test_n, None, seed=7)
    reversed_ = birds(sizes.test_n, 0.0, seed=8)
    validation = birds(sizes.test_n, None, seed=VALIDATION_SEED)
    context = 1.0 - cell_fractions(balanced.objects, GRID)
    out: dict[str, Any] = {n: {} for n in methods}
    for s in ctx.seed_list:
        train = birds(sizes.train_n, agree, seed=100 + s)
        for name in methods:
            graphdef, params = init_model(_cnn(sizes, 2), s, fast=fast)
            run = train_model(
                graphdef,
                params,
                train,
                penalties(name),
                seed=200 + s,
                steps=sizes.steps,
                batch=sizes.batch,
                grid=GRID,
                lr=sizes.lr,
                fast=fast,
            )
            pred = predict(graphdef, run.params, balanced.images, fast=fast)
            acc = group_accuracies(pred, balanced, 4)
            rev = predict(graphdef, run.params, reversed_.images, fast=fast)
            val = group_accuracies(
                predict(graphdef, run.params, validation.images, fast=fast), validation, 4
            )
            share = _EVAL_SHARE[fast](
                graphdef, run.params, balanced.images, balanced.labels, context
            )
            row = out[name]
            row.setdefault("worst", []).append(float(np.nanmin(acc)))
            row.setdefault("mean", []).append(float(np.nanmean(acc)))
            row.setdefault("groups", []).append(acc.tolist())
            row.setdefault("reversed", []).append(
                float(np.mean(rev == np.asarray(reversed_.labels)))
            )
            row.setdefault("context_share", []).append(float(share))
            row.setdefault("validation_worst", []).append(float(np.nanmin(val)))
            row.setdefault("finite", []).append(run.finite)
            row.setdefault("constant", []).append(bool(len(np.unique(pred)) == 1))
            if name == "CE":
                row.setdefault("params", []).append(
                    [np.asarray(x) for x in jax.tree.leaves(run.params)]
                )
    return out


def _share_impl(graphdef, params, images, labels, context):
    net = nnx.merge(graphdef, params)
    a = net.features(images)
    return jnp.mean(context_share(contrastive_cam(net.classify, a, labels), context))


_EVAL_SHARE = {
    f: jax.jit(_share_impl, static_argnums=0, compiler_options=FAST_COMPILE if f else None)
    for f in (False, True)
}


def _summary(res: dict[str, Any]) -> dict[str, Any]:
    return {
        "balanced_mean_accuracy": {n: r["mean"] for n, r in res.items()},
        "reversed_context_accuracy": {n: r["reversed"] for n, r in res.items()},
        "group_accuracy " + str(GROUPS): {n: r["groups"] for n, r in res.items()},
        "contrastive_cam_share_on_context": {n: r["context_share"] for n, r in res.items()},
        "validation_worst_group_accuracy (beta selection set)": {
            n: r["validation_worst"] for n, r in res.items()
        },
        "constant_predictor (collapsed) per seed": {n: r["constant"] for n, r in res.items()},
        "all_losses_finite": all(all(r["finite"]) for r in res.values()),
    }


def _shift_models(ctx: Context, sizes: Any) -> dict[str, Any]:
    return ctx.cached(
        "birds_0.95", lambda: _train_birds(ctx, sizes, 0.95, tuple(METHODS)), shared=True
    )


#: The row of ``context_shift_exists``.
CE_GAP = "CE: mean-group minus worst-group accuracy"


def run_shift_exists(ctx: Context, sizes: Any) -> Outcome:
    res = _shift_models(ctx, sizes)["CE"]
    gap = [m - w for m, w in zip(res["mean"], res["worst"], strict=True)]
    extras = {
        "CE worst-group accuracy": res["worst"],
        "CE balanced mean accuracy": res["mean"],
        "CE group accuracy " + str(GROUPS): res["groups"],
    }
    return Outcome({CE_GAP: gap}, extras)


#: The row of ``maps_can_differ``.
SHARED_RATIO = "CE head: |mean_c W_c| / rms_c |W_c - mean|"


def run_maps_differ(ctx: Context, sizes: Any) -> Outcome:
    res = ctx.cached("faithfulness", lambda: _faithfulness(ctx, sizes), shared=True)
    return Outcome({SHARED_RATIO: res["shared_head_weight_ratio"]})


def run_context_shift(ctx: Context, sizes: Any) -> Outcome:
    res = _shift_models(ctx, sizes)
    values = {n: r["worst"] for n, r in res.items()}
    extras = {
        "train_context_agreement": 0.95,
        **_summary(res),
        "beta (chosen on the validation set)": dict(BETAS),
        "steps": sizes.steps,
    }
    return Outcome(values, extras)


#: The models trained without context information; the faithfulness experiment explains their CE
#: models (``ctx.cached(shared=True)``: whichever experiment runs first trains them).
NO_CONTEXT_METHODS = ("CE", "CR-CE (known context)")


def _no_context_models(ctx: Context, sizes: Any) -> dict[str, Any]:
    return ctx.cached(
        "birds_0.5", lambda: _train_birds(ctx, sizes, 0.5, NO_CONTEXT_METHODS), shared=True
    )


def run_no_context(ctx: Context, sizes: Any) -> Outcome:
    res = {n: r for n, r in _no_context_models(ctx, sizes).items()}
    values = {n: r["mean"] for n, r in res.items()}
    extras = {
        "train_context_agreement": 0.5,
        "worst_group_accuracy": {n: r["worst"] for n, r in res.items()},
        **_summary(res),
    }
    return Outcome(values, extras)


def _evaluate_impl(graphdef, curve_steps, params, images, objects):
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
        res[name] = {
            "deletion_auc": jnp.mean(curves.deletion_auc),
            "insertion_auc": jnp.mean(curves.insertion_auc),
            "deletion_curve": jnp.mean(curves.deletion, 0),
            "insertion_curve": jnp.mean(curves.insertion, 0),
            "pointing_game": jnp.mean(pointing_game(m, objects)),
            "mask_agreement": jnp.mean(mask_agreement(m, objects)),
            "examples": m[:4],
        }
    # The component of the head shared by every class (what ContrastiveCAM removes) relative to
    # the class-specific part: softmax-CE gradients sum to zero over the logits, so only the
    # initialisation and Adam's per-coordinate scaling give the head a shared component.
    kernel = net.head.kernel[...]
    shared = jnp.mean(kernel, axis=1, keepdims=True)
    res["shared_head_weight_ratio"] = (
        jnp.linalg.norm(shared) / jnp.linalg.norm(kernel - shared) * jnp.sqrt(kernel.shape[1])
    )
    return res, target


_EVALUATE = {
    f: jax.jit(_evaluate_impl, static_argnums=(0, 1), compiler_options=FAST_COMPILE if f else None)
    for f in (False, True)
}


def _faithfulness(ctx: Context, sizes: Any) -> dict[str, Any]:
    fast = _fast(ctx)
    trained = _no_context_models(ctx, sizes)["CE"]
    test = birds(sizes.faith_n, None, seed=9)
    per_seed = []
    for s, leaves in zip(ctx.seed_list, trained["params"], strict=True):
        graphdef, params = init_model(_cnn(sizes, 2), s, fast=fast)
        params = jax.tree.unflatten(
            jax.tree.structure(params), [jnp.asarray(x, jnp.float32) for x in leaves]
        )
        res, target = _EVALUATE[fast](
            graphdef, sizes.curve_steps, params, test.images, test.objects
        )
        res = jax.tree.map(np.asarray, res)
        res["accuracy"] = float(np.mean(np.asarray(target) == np.asarray(test.labels)))
        per_seed.append(res)
    out = jax.tree.map(lambda *x: np.stack(x).tolist(), *per_seed)
    out["images"] = np.asarray(test.images[:4]).tolist()
    return out


def run_faithfulness(ctx: Context, sizes: Any) -> Outcome:
    res = ctx.cached("faithfulness", lambda: _faithfulness(ctx, sizes), shared=True)
    values = {m: res[m]["deletion_auc"] for m in MAPS}
    extras = {
        "insertion_auc (higher is faithful)": {m: res[m]["insertion_auc"] for m in MAPS},
        "pointing_game": {m: res[m]["pointing_game"] for m in MAPS},
        "mask_agreement": {m: res[m]["mask_agreement"] for m in MAPS},
        "test_accuracy": res["accuracy"],
        "shared_head_weight_ratio (|mean_c W_c| / rms_c |W_c - mean|)": res[
            "shared_head_weight_ratio"
        ],
        "deletion_curves": {m: np.mean(res[m]["deletion_curve"], 0).tolist() for m in MAPS},
        "insertion_curves": {m: np.mean(res[m]["insertion_curve"], 0).tolist() for m in MAPS},
        "examples": {m: res[m]["examples"][0] for m in MAPS},
        "images": res["images"],
    }
    return Outcome(values, extras)
