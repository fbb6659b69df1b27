"""The run functions of the P02 accuracy beds and their preconditions.

An accuracy bed (``minilm_vader``: :func:`._text.run_text`; ``vit_digits``:
:func:`._vit.run_vit`) is computed once per run and kept with ``ctx.cached``: the bed's experiment
and its ``zo_learns_*`` precondition read the same rows (the QZO-style rows are trained once).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.lqzo.experiments._text import run_text
from jaxpapers.lqzo.experiments._vit import run_vit

#: The accuracy beds: experiment id -> (run function, the bed's name in the claims).
BEDS: dict[str, tuple[Callable[[Context, Any], Outcome], str]] = {
    "minilm_vader": (run_text, "MiniLM / VADER"),
    "vit_digits": (run_vit, "ViT / shifted digits"),
}
#: The precondition experiment of each bed (``zo_learns_<bed>``).
LEARNS = {"minilm_vader": "zo_learns_text", "vit_digits": "zo_learns_vit"}
#: Rows of the starting model's test accuracy in the ``zo_learns_*`` experiments.
BEFORE = "INT{bits} before fine-tuning"
#: The MeZO reference row (ZO on the full-precision layer) runs at smoke and ``--full`` only: at
#: the quick size it is the costliest row of both accuracy beds (its program the slowest to
#: compile), and the verdict does not read it.
REFERENCE_SIZES = {"MeZO full precision": ("smoke", "full")}


def run_bed(ctx: Context, config: Any, *, bed: str) -> Outcome:
    """One accuracy bed's rows and extras, computed once per run and shared (``ctx.cached``) by
    the bed's experiment and its ``zo_learns_*`` precondition.

    The computation leaves out the bed's own ``row_sizes`` rows (:data:`REFERENCE_SIZES`),
    whichever of the two experiments asks first.
    """
    run, _ = BEDS[bed]
    skip = frozenset(row for row, sizes in REFERENCE_SIZES.items() if ctx.size not in sizes)
    bed_ctx = dataclasses.replace(ctx, skip_rows=skip)
    return ctx.cached(f"bed_{bed}", lambda: run(bed_ctx, config))


def run_zo_learns(ctx: Context, config: Any, *, bed: str) -> Outcome:
    """QZO-style INT4 / INT2 after fine-tuning against the same quantized model before it.

    The starting model (pretrained weights quantized, the bed's frozen head) is the same for
    every seed: the seeds vary the fine-tuning's batches and directions. The "before" row
    therefore repeats its one test accuracy once per seed, and the paired test judges the
    fine-tuned row's per-seed spread around it. Extras: the learning rates and whether they
    were tuned (``tuning``; untuned at the quick size).
    """
    out = run_bed(ctx, config, bed=bed)
    before = out.extras["accuracy_before_finetuning"]
    n = len(ctx.seed_list)
    values: dict[str, list[float]] = {}
    for bits in (4, 2):
        values[BEFORE.format(bits=bits)] = [float(before[f"INT{bits}"])] * n
        values[f"QZO-style INT{bits}"] = list(out.values[f"QZO-style INT{bits}"])
    extras = {
        "accuracy_before_finetuning": before,
        "learning_rate": {k: v for k, v in out.extras["learning_rate"].items() if "QZO" in k},
        "tuning": {k: v for k, v in out.extras["tuning"].items() if "QZO" in k},
    }
    return Outcome(values, extras)
