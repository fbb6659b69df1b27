"""The run functions of the P13 experiments: rows and extras from the trained (cached) models.

``run_tracking`` serves every ``tracking_<task>`` and ``generalisation_<task>`` experiment (one
training per mixer, shared through ``ctx.cached``), ``run_handset`` the hand-set sanity check,
``run_lm`` the character language models and ``run_recipe`` the S_5 recipe study.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.lrnn import TASKS, task_spec
from jaxpapers.lrnn._corpus import load_corpus
from jaxpapers.lrnn.experiments._handset import handset_accuracy
from jaxpapers.lrnn.experiments._lm import LM_MIXERS, lm_results
from jaxpapers.lrnn.experiments._plots import bar_plot
from jaxpapers.lrnn.experiments._recipe import recipe_results
from jaxpapers.lrnn.experiments._tracking import tracking_results

#: The structured mixer each task's verdicts name (see the package docstring).
SOLVER: dict[str, str] = {
    "parity": "hlru2",
    "mod5": "bdlru8",
    "s5": "bdlru8",
    "mod5_brackets": "bdlru8",
}
SOLVED = 0.9  # accuracy that counts as solving a task
#: The baseline and the mixers the verdicts name: trained at every size (the rows of the tables).
#: The other structured mixers (hlru4, bdlru2, bdlru4) are trained at --full only and reported in
#: the extras ``more_mixers``.
RULE_MIXERS: tuple[str, ...] = ("lru", "hlru2", "bdlru8")
#: The tasks quick mode trains (the other two, S_5 and the bracket task, at --smoke and --full).
QUICK_TASKS: tuple[str, ...] = ("parity", "mod5")
TASK_NAMES = {
    "parity": "parity (Z_2)",
    "mod5": "mod-5 addition without brackets (Z_5)",
    "mod5_brackets": "mod-5 arithmetic (+, -) with brackets",
    "s5": "permutation composition in S_5",
}
#: Rows of the recipe study.
RECIPE_ROWS: tuple[str, ...] = ("lru", "bdlru8_flat", "bdlru8_curriculum")


def run_tracking(ctx: Context, config: Any, *, task: str, split: str) -> Outcome:
    """Accuracy of the rule's mixers on ``task`` at the training lengths (``split="train"``) or
    beyond them (``"test"``); the other split, the other mixers and the sizes in the extras."""
    sizes = config.tracking
    if task not in sizes.tasks:  # named explicitly (--experiments) at a size without it
        sizes = sizes._replace(tasks=tuple(t for t in TASKS if t in (*sizes.tasks, task)))
    res = tracking_results(ctx, sizes)
    other = "test" if split == "train" else "train"
    values = {m: getattr(res[m], split)[task] for m in RULE_MIXERS}
    extras = {
        f"{other}_length_accuracy": {m: getattr(res[m], other)[task] for m in sizes.mixers},
        "more_mixers": {
            m: getattr(res[m], split)[task] for m in sizes.mixers if m not in RULE_MIXERS
        },
        "n_params": {m: res[m].n_params for m in sizes.mixers},
        "sizes": sizes._asdict(),
        "chance": 1.0 / task_spec(task).n_classes,
    }
    return Outcome(values, extras)


def tracking_plot(task: str, label: str):
    """The bar plot of one tracking experiment (``label``: which lengths)."""

    def plot(outcome: Outcome, path: Path) -> None:
        bar_plot(outcome, path, f"accuracy, {label}", f"P13 {TASK_NAMES[task]}: {label}")

    return plot


def run_handset(ctx: Context, config: Any) -> Outcome:
    """The hand-set BD-LRU b = 8 on Z_5 and S_5 at the tracking experiments' lengths."""
    sizes = config.tracking
    values, extras = {}, {}
    for task in ("mod5", "s5"):
        runs = [
            handset_accuracy(
                task, batch=sizes.eval_batch, length=sizes.test_len, split=sizes.train_len, seed=s
            )
            for s in ctx.seed_list
        ]
        values[f"handset_{task}"] = [r["longer"] for r in runs]
        extras[f"handset_{task}_train_lengths"] = [r["train_lengths"] for r in runs]
        extras[f"handset_{task}_max_deviation_from_one_hot"] = max(
            r["max_deviation_from_one_hot"] for r in runs
        )
    extras["chance"] = {"mod5": 0.2, "s5": 1 / 120}
    return Outcome(values, extras)


def run_lm(ctx: Context, config: Any) -> Outcome:
    """Validation bits per character of the LM mixers at matched parameter counts."""
    sizes = config.lm
    res = lm_results(ctx, sizes)
    corpus = load_corpus(max_chars=sizes.max_chars)
    extras = {
        "n_params": {m: res[m].n_params for m in LM_MIXERS},
        "d_state": {m: res[m].d_state for m in LM_MIXERS},
        "corpus_chars": {"train": int(corpus.train.size), "valid": int(corpus.valid.size)},
        "sizes": sizes._asdict(),
    }
    return Outcome({m: res[m].bpc for m in LM_MIXERS}, extras)


def lm_plot(outcome: Outcome, path: Path) -> None:
    """Bar plot of the LM rows."""
    bar_plot(outcome, path, "validation bits / char", "P13 char LM, matched parameters")


def run_recipe(ctx: Context, config: Any) -> Outcome:
    """S_5 with and without the length curriculum (``config.recipe``)."""
    res = recipe_results(ctx, config.recipe)
    extras = {
        "test_length_accuracy": {r: res.rows[r].test for r in RECIPE_ROWS},
        "n_params": res.n_params,
        "sizes": config.recipe._asdict(),
        "chance": 1.0 / 120,
    }
    return Outcome({r: res.rows[r].train for r in RECIPE_ROWS}, extras)


def recipe_plot(outcome: Outcome, path: Path) -> None:
    """Bar plot of the recipe rows."""
    bar_plot(outcome, path, "accuracy, lengths <= 40", "P13 S_5, curriculum recipe")
