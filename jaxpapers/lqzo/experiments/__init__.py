"""P02 experiments: LQZO vs a QZO-style baseline on INT4 / INT2 models, text and images.

1. ``minilm_vader``: pretrained all-MiniLM-L6-v2, every linear layer quantized group-wise
   (asymmetric, g = 64) to INT4 or INT2, top encoder layer fine-tuned on VADER word sentiment
   (:mod:`._text`). Rows: first-order Adam on the full-precision top layer (upper bound), MeZO on
   the full-precision top layer (smoke and ``--full`` only: the costliest row, which the
   verdicts do not read), QZO-style and LQZO on the quantized scales.
2. ``vit_digits``: cross-modality; a small ViT pretrained in-repo on centred sklearn digits,
   quantized (g = 16, patch embedding in float), fine-tuned on the other digits shifted by one
   pixel (:mod:`._vit`); same rows.
   Each accuracy bed requires its precondition ``zo_learns_text`` / ``zo_learns_vit``: the
   QZO-style INT4 and INT2 rows (the same run, shared through ``ctx.cached``, not trained twice)
   better than the same quantized model before fine-tuning, so that a verdict between ZO
   methods is about models that fine-tuning moved. The starting model is the same for every
   seed; its row repeats its one accuracy per seed. At the quick size the ZO rows are untuned
   (base learning rates).
3. ``estimator_quality``: one-step estimates of the MiniLM top layer's scale gradient, LQZO vs
   QZO-style per bit width, against backprop's gradient: normalised error and cosine, with the
   gradient's effective rank in the natural and the near-square view (:mod:`._estimator`); the
   "LQZO natural view" rows (no near-square view, a diagnostic the rule does not read) run at
   smoke and ``--full`` only.
4. ``estimator_quality_cpu`` (``--full`` only): the same study at a size a 2-core CPU runs in
   minutes (``Config.estimator_cpu``: pool 4096, quantized lower layers, batch 32, 128 directions;
   the CPU-sized ``--full`` run, ``results/full/P02/``, its outcome and diagnosis in
   ``results/full/P02/README.md``). The other ``--full`` sizes (3000-step fine-tuning with the
   learning-rate pilot, 256 directions at batch 64) are for an accelerator.

Every ZO row picks its learning rate per method from ``base * lr_grid`` on validation data (a
pilot run of ``tune_steps`` steps, one seed, the grid vectorised), then runs all seeds; test
accuracy is reported (:mod:`._train`). When ``tune_steps >= steps`` (the smoke size) the pilot
would be as long as the run: every (seed, rate) pair then runs in one program and the rate with
the best seed-mean validation accuracy is chosen (``extras["tuning"][row]["protocol"]``). Quick
mode (2 CPU cores) runs every row at its base rate without a pilot, 60 (text) / 100 (ViT) ZO
steps: too short for ZO fine-tuning to move accuracy much, so a quick "inconclusive" on the two
accuracy experiments says the budget cannot separate the methods; ``--full`` tunes on the widened
grid and trains 3000 steps. Without a learning-rate grid to tune (quick), no validation split is
evaluated and the text experiment draws no validation entries. LQZO adds rank 4, ``nu = 10``,
BAG with k = 4, isotropic views; its two forward passes go through the fused path (the Pallas
kernel on GPU/TPU).

Verdicts: LQZO beats QZO-style at INT4 and at INT2 beyond the seed spread (accuracy), and has a
lower normalised estimator error at both bit widths (estimator quality).

Measurements (run times, budgets, what was tried): ``results/P02/NOTES.md``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

from jaxpapers.core.experiment import SIZES as SIZE_NAMES
from jaxpapers.core.experiment import AllOf, Better, Experiment
from jaxpapers.lqzo.experiments._estimator import run_estimator
from jaxpapers.lqzo.experiments._plots import plot_accuracy, plot_estimator
from jaxpapers.lqzo.experiments._runs import (
    BEDS,
    BEFORE,
    LEARNS,
    REFERENCE_SIZES,
    run_bed,
    run_zo_learns,
)


class Sizes(NamedTuple):
    """The sizes of one study at one run size (keyword fields; see the package docstring)."""

    steps: int = 4
    fo_steps: int = 2
    batch: int = 8
    tune_steps: int = 4
    lr_grid: tuple[float, ...] = (1.0,)
    lr: dict[str, float] | None = None
    bits: tuple[int, ...] = (4, 2)
    n_train: int = 64
    n_val: int = 32
    n_test: int = 64
    group_size: int = 64
    pretrain_steps: int = 10
    est_pool: int = 256
    est_batch: int = 32
    est_group: int = 16
    est_dirs: int = 4
    max_len: int = 8
    quantize_lower: bool = True


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """Every size-dependent setting of P02: one :class:`Sizes` per study.

    Attributes:
      text: ``minilm_vader`` (and ``zo_learns_text``).
      vit: ``vit_digits`` (and ``zo_learns_vit``).
      estimator: ``estimator_quality``.
      estimator_cpu: ``estimator_quality_cpu`` (``--full`` only; the same CPU-sized table at
        every size).
    """

    text: Sizes
    vit: Sizes
    estimator: Sizes
    estimator_cpu: Sizes


TEXT_LR = {"mezo": 1e-4, "scales": 1e-1, "adam": 1e-4}
VIT_LR = {"mezo": 5e-4, "scales": 2e-2, "adam": 1e-3}
#: Learning-rate grid (multiples of the base rates) for ``--full``: widened upward after the
#: earlier (0.3, 1, 3) grid put the tuned rate on its top edge.
GRID = (0.3, 1.0, 3.0, 10.0, 30.0)
#: Quick mode cannot afford the per-method pilot runs on 2 CPU cores (a pilot of one ZO row is a
#: compile plus grid x steps forward passes), so it runs every row at its base rate; the verdict
#: at quick size says whether the rows separate at those rates.
QUICK_GRID = (1.0,)
#: ``estimator_quality_cpu`` (``--full`` only): the estimator study at a size a 2-core CPU runs
#: in minutes: the full pool and quantized lower layers, batch 32 (full: 64), 128
#: directions per seed and bit width (quick: 16, full: 256); run with ``--seeds 5``.
ESTIMATOR_CPU = Sizes(est_pool=4096, est_batch=32, est_dirs=128)

SIZES = {
    "smoke": Config(
        text=Sizes(
            steps=2, fo_steps=2, lr=TEXT_LR, lr_grid=(0.5, 1.0), tune_steps=2, quantize_lower=False
        ),
        vit=Sizes(steps=2, fo_steps=2, lr=VIT_LR, lr_grid=(0.5, 1.0), tune_steps=2, n_val=32),
        estimator=Sizes(est_pool=64, est_batch=8, est_dirs=4),
        estimator_cpu=ESTIMATOR_CPU,
    ),
    "quick": Config(
        text=Sizes(
            steps=60,
            fo_steps=40,
            batch=16,
            tune_steps=20,
            lr_grid=QUICK_GRID,
            lr=TEXT_LR,
            n_train=1024,
            n_val=256,
            n_test=768,
            max_len=6,
            quantize_lower=False,
        ),
        vit=Sizes(
            steps=100,
            fo_steps=40,
            batch=32,
            tune_steps=20,
            lr_grid=QUICK_GRID,
            lr=VIT_LR,
            n_val=100,
            pretrain_steps=300,
        ),
        estimator=Sizes(est_pool=1024, est_batch=16, est_dirs=16, quantize_lower=False),
        estimator_cpu=ESTIMATOR_CPU,
    ),
    "full": Config(
        text=Sizes(
            steps=3000,
            fo_steps=500,
            batch=64,
            tune_steps=1000,
            lr_grid=GRID,
            lr=TEXT_LR,
            n_train=4096,
            n_val=500,
            n_test=1234,
        ),
        vit=Sizes(
            steps=3000,
            fo_steps=500,
            batch=64,
            tune_steps=1000,
            lr_grid=GRID,
            lr=VIT_LR,
            n_val=100,
            pretrain_steps=3000,
        ),
        estimator=Sizes(est_pool=4096, est_batch=64, est_dirs=256),
        estimator_cpu=ESTIMATOR_CPU,
    ),
}

_RULE = AllOf((Better("LQZO INT4", "QZO-style INT4"), Better("LQZO INT2", "QZO-style INT2")))
_METHODS = ("LQZO INT4", "LQZO INT2")
_QZO_ROWS = ("QZO-style INT4", "QZO-style INT2")
_CLAIMS = {
    "minilm_vader": (
        "On INT4 and INT2 MiniLM, LQZO fine-tuning reaches higher accuracy than QZO-style "
        "quantized ZO (narrowing the gap to full precision)",
        "test accuracy (%) on VADER word sentiment",
    ),
    "vit_digits": (
        "Cross-modality: on an INT4 / INT2 ViT, LQZO fine-tuning beats QZO-style",
        "test accuracy (%) on shifted digits",
    ),
}


def _bed_experiments(bed: str) -> tuple[Experiment, Experiment]:
    """An accuracy bed and its precondition ``zo_learns_*`` (one computation, shared)."""
    claim, metric = _CLAIMS[bed]
    return (
        Experiment(
            id=bed,
            claim=claim + f" (judged when {LEARNS[bed]} holds: ZO fine-tuning moved the model)",
            metric=metric,
            lower_is_better=False,
            baselines=("FO full precision", "MeZO full precision", *_QZO_ROWS),
            methods=_METHODS,
            rule=_RULE,
            run=functools.partial(run_bed, bed=bed),
            plot=plot_accuracy,
            row_sizes=REFERENCE_SIZES,
            requires=(LEARNS[bed],),
        ),
        Experiment(
            id=LEARNS[bed],
            claim=f"Precondition of {bed}: on {BEDS[bed][1]}, QZO-style ZO fine-tuning raises "
            "the test accuracy of the INT4 and of the INT2 model above the same model before "
            "fine-tuning (at the quick size the ZO rows run at their base learning rates, "
            "untuned: see extras.tuning)",
            metric=metric + "; the 'before' rows are the starting model, the same every seed",
            lower_is_better=False,
            baselines=tuple(BEFORE.format(bits=b) for b in (4, 2)),
            methods=_QZO_ROWS,
            rule=AllOf(tuple(Better(f"QZO-style INT{b}", BEFORE.format(bits=b)) for b in (4, 2))),
            run=functools.partial(run_zo_learns, bed=bed),
        ),
    )


def _estimator_experiment(id: str, study: str, note: str, sizes: tuple[str, ...]) -> Experiment:
    """``estimator_quality`` or its CPU-sized ``--full`` study (``config.<study>``)."""
    return Experiment(
        id=id,
        claim="LQZO's low-rank BAG estimate of a quantized layer's scale gradient has a lower "
        f"error than the QZO-style dense estimate at INT4 and INT2{note}",
        metric="E||g_hat - g||^2 / ||g||^2 of one two-point estimate (MiniLM top layer scales)",
        lower_is_better=True,
        baselines=(
            "QZO-style INT4",
            "QZO-style INT2",
            "LQZO natural view INT4",
            "LQZO natural view INT2",
        ),
        methods=_METHODS,
        rule=_RULE,
        run=functools.partial(run_estimator, study=study),
        plot=plot_estimator,
        sizes=sizes,
        row_sizes={f"LQZO natural view INT{b}": ("smoke", "full") for b in (4, 2)},
    )


EXPERIMENTS = (
    *(exp for bed in BEDS for exp in _bed_experiments(bed)),
    _estimator_experiment("estimator_quality", "estimator", "", SIZE_NAMES),
    _estimator_experiment(
        "estimator_quality_cpu", "estimator_cpu", " (CPU-sized --full study)", ("full",)
    ),
)

__all__ = ["EXPERIMENTS", "SIZES", "Config", "Sizes"]
