"""P12 experiments, registered for ``jaxpapers reproduce P12``.

One pipeline per seed (seeds stacked): a multi-label GAP CNN trained with image labels on 32x32
co-occurrence scenes, its CAM seeds, a memory bank filled over the training split, a PRDC graph
trained with the seed loss (CNN frozen), and the pseudo-masks of the four methods on held-out
scenes. Its numbers are shared (``ctx.cached``) by

* ``seeds_informative`` (precondition of the next two): the classifier's per-label test accuracy
  and the precision of its foreground CAM seeds, each above a stated level;
* ``pseudo_mask_miou`` (headline): mIoU of CAM, SIPE self-prototypes, bank without GNN, RO-PMB;
* ``boundary_f1``: boundary F1 (1-pixel tolerance) of the same pseudo-masks;
* ``one_hot_features`` (sanity, known answer): features one-hot per region and a PRDC trained on
  the resulting exact seeds; every method recovers the mask. It checks the refinement path and
  that the learned graph keeps exact seeds exact, not that refinement corrects wrong seeds.

Every rule is a one-sided 95% t test on per-seed values (paired across methods: all methods of a
seed share its CNN, bank and test scenes).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from jaxpapers.core.experiment import (
    AllOf,
    Better,
    Context,
    Experiment,
    Outcome,
    Threshold,
    register,
)
from jaxpapers.ropmb import RefineConfig
from jaxpapers.ropmb.experiments._plots import plot_masks
from jaxpapers.ropmb.experiments._runs import Sizes, one_hot_sanity, pipeline


def sizes(ctx: Context) -> Sizes:
    return ctx.pick(
        smoke=Sizes(
            train_n=16,
            test_n=16,
            widths=(4,),
            stem_stride=2,
            steps=3,
            batch=8,
            k=2,
            momentum=0.9,
            bank_batch=8,
            prdc_steps=3,
            prdc_batch=4,
            fast_compile=True,
        ),
        quick=Sizes(
            train_n=512,
            test_n=256,
            widths=(16,),
            stem_stride=2,
            steps=200,
            batch=16,
            k=2,
            momentum=0.9,
            bank_batch=32,
            prdc_steps=50,
            prdc_batch=16,
            fast_compile=False,
        ),
        full=Sizes(
            train_n=8192,
            test_n=1024,
            widths=(32, 64),
            stem_stride=1,
            steps=4000,
            batch=64,
            k=4,
            momentum=0.99,
            bank_batch=64,
            prdc_steps=1000,
            prdc_batch=32,
            fast_compile=False,
        ),
    )


CONFIG = RefineConfig()
CAM, SIPE, BANK, ROPMB = "CAM", "SIPE (self-prototypes)", "bank, no GNN", "RO-PMB"
ROWS = {"cam": CAM, "sipe": SIPE, "bank": BANK, "ropmb": ROPMB}


def _shared(ctx: Context) -> dict:
    return ctx.cached(
        f"pipeline_{ctx.size}_{ctx.seeds}",
        lambda: pipeline(ctx.seed_list, sizes(ctx), CONFIG),
        shared=True,
    )


def _outcome(ctx: Context, metric: str, label: str) -> Outcome:
    res = _shared(ctx)
    values = {ROWS[m]: v for m, v in res[metric].items()}
    other = "bf1" if metric == "miou" else "miou"
    extras = {
        "metric_label": label,
        other: {ROWS[m]: v for m, v in res[other].items()},
        "classifier_label_accuracy": res["label_accuracy"],
        "cnn_final_loss": res["cnn_final_loss"],
        "seed_precision": res["seed_precision"],
        "prdc_loss_first_last": res["prdc_loss_first_last"],
        "config": {f.name: getattr(CONFIG, f.name) for f in dataclasses.fields(CONFIG)},
        "diagnosis": _diagnosis(res),
    }
    if metric == "miou":  # the example pseudo-masks are stored (and drawn) once
        extras["example_truth"] = res["example_truth"]
        extras["example_masks"] = {ROWS[m]: v for m, v in res["example_masks"].items()}
    return Outcome(values, extras)


def _diagnosis(res: dict) -> str:
    acc = float(np.mean(res["label_accuracy"]))
    prec = float(np.mean(res["seed_precision"]))
    return (
        f"Every prototype method starts from the CAM seeds. Here the classifier's per-label test "
        f"accuracy is {acc:.3f} and {prec:.3f} of the foreground seed pixels carry the right "
        "class: prototypes pooled under wrong seeds describe the wrong region, and the bank and "
        "the GNN average such errors rather than remove them. The methods can only separate once "
        "the seeds are mostly right (a better-trained classifier: --full trains 20x longer on "
        "16x more images with a deeper CNN at full feature resolution); the sanity experiment "
        "shows the refinement itself is exact when features and seeds are."
    )


def run_miou(ctx: Context) -> Outcome:
    return _outcome(ctx, "miou", "pseudo-mask mIoU (7 classes incl. background)")


def run_boundary(ctx: Context) -> Outcome:
    return _outcome(ctx, "bf1", "boundary F1 (1-pixel tolerance)")


_SANITY = {m: f"1 - mIoU, {r}" for m, r in ROWS.items()}


LABEL_ACC, SEED_PREC = "classifier per-label test accuracy", "foreground seed precision"


def run_seeds_informative(ctx: Context) -> Outcome:
    res = _shared(ctx)
    values = {LABEL_ACC: res["label_accuracy"], SEED_PREC: res["seed_precision"]}
    extras = {"cnn_final_loss": res["cnn_final_loss"], "diagnosis": _diagnosis(res)}
    return Outcome(values, extras)


def run_sanity(ctx: Context) -> Outcome:
    # The test split's size: its scene generator is already compiled for that shape.
    s = sizes(ctx)
    res = ctx.cached("sanity", lambda: one_hot_sanity(ctx.seed_list, s.test_n, s.k))
    values = {_SANITY[m]: [1.0 - v for v in res[m]] for m in ROWS}
    extras = {
        "prdc_loss_first_last (PRDC trained on the exact seeds)": res["prdc_loss_first_last"],
        "prdc_relative_weight_change": res["prdc_relative_change"],
    }
    return Outcome(values, extras)


#: ``seeds_informative``: every prototype method pools features under the CAM seeds, so the
#: comparisons mean something only when the seeds mostly mark the right class. Levels: the
#: classifier's per-label accuracy above 0.9 (each scene shows 2-4 of the 6 classes, so always
#: answering "absent" already scores about 0.5; 0.9 removes four fifths of that error), and more
#: than half of the foreground seed pixels on their own class (below that a prototype pooled
#: under a seed describes mostly another region). Chosen before the 5-seed numbers were seen.
LABEL_ACC_MIN, SEED_PREC_MIN = 0.9, 0.5

register(
    Experiment(
        paper="P12",
        id="seeds_informative",
        claim="Precondition: the classifier's CAM seeds mean something (per-label test accuracy "
        f"above {LABEL_ACC_MIN}, foreground seed precision above {SEED_PREC_MIN})",
        metric="fraction (0-1) on the held-out scenes",
        lower_is_better=False,
        baselines=(),
        methods=(LABEL_ACC, SEED_PREC),
        rule=AllOf(
            (
                Threshold(LABEL_ACC, LABEL_ACC_MIN, below=False),
                Threshold(SEED_PREC, SEED_PREC_MIN, below=False),
            )
        ),
        run=run_seeds_informative,
    )
)

register(
    Experiment(
        paper="P12",
        id="pseudo_mask_miou",
        claim="RO-PMB's pseudo-masks have a higher mIoU than plain CAMs and than the memory bank "
        "without the GNN (the SIPE self-prototype row is a further baseline)",
        metric="pseudo-mask mIoU on held-out scenes (background + 6 classes)",
        lower_is_better=False,
        baselines=(CAM, SIPE, BANK),
        methods=(ROPMB,),
        rule=AllOf((Better(ROPMB, CAM), Better(ROPMB, BANK))),
        run=run_miou,
        plot=plot_masks,
        requires=("seeds_informative",),
    )
)

register(
    Experiment(
        paper="P12",
        id="boundary_f1",
        claim="RO-PMB's pseudo-masks have more precise boundaries than plain CAMs",
        metric="boundary F1 of the pseudo-masks (1-pixel tolerance)",
        lower_is_better=False,
        baselines=(CAM, SIPE, BANK),
        methods=(ROPMB,),
        rule=Better(ROPMB, CAM),
        run=run_boundary,
        plot=plot_masks,
        requires=("seeds_informative",),
    )
)

register(
    Experiment(
        paper="P12",
        id="one_hot_features",
        claim="Sanity (known answer: exact masks): with features one-hot per region and the "
        "matching CAM head, CAM, SIPE, the bank and RO-PMB with a PRDC trained on these exact "
        "seeds all recover the mask; tests the refinement path and that the learned graph keeps "
        "exact seeds exact, not that refinement corrects wrong seeds",
        metric="1 - mIoU against the true mask",
        lower_is_better=True,
        baselines=(),
        methods=tuple(_SANITY.values()),
        rule=AllOf(tuple(Threshold(r, 1e-6) for r in _SANITY.values())),
        run=run_sanity,
    )
)
