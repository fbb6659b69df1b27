"""P13 experiments: sizes and experiments as data (data, training and plots in the modules).

State tracking (Grazzi et al., 2024 protocol at miniature size): every mixer is trained on
sequences of 40 symbols with a label at every prefix (so on all lengths 1..40; bracket task:
expressions of odd length 3..39, one label per sequence) with the same optimiser, learning rate,
steps and width (``_tracking.py``). The rows are the baseline and the two mixers the verdicts
name (LRU, H-LRU K = 2, BD-LRU b = 8, ``RULE_MIXERS``), trained at every size; H-LRU K = 4 and
BD-LRU b = 2, 4 are trained at ``--full`` only and reported in the extras ``more_mixers`` (quick
mode cannot afford six compiled trainings). Quick mode trains parity and mod 5 only
(``QUICK_TASKS``: the two tasks whose verdicts it resolves; S_5 and the bracket task run at
``--smoke`` and ``--full``). Two verdicts per task, from the same trained models:
``tracking_<task>`` judges accuracy at the training lengths (what the abstract claims: the
structured mixers can *represent and learn* the task), and ``generalisation_<task>`` accuracy at
lengths 41..256 (positions 41..256 of 256-symbol sequences; brackets: expressions of length
41..255), which the abstract does not claim and which needs transitions that stay exact over
products of hundreds of steps.

Which structured mixer each verdict names follows from the L1 gate normalisation (module docstring
of :mod:`jaxpapers.lrnn`): a transition must have every row in the unit L1 ball, so

* parity (Z_2) needs a transition with eigenvalue -1: H-LRU with ``a = (-1, 0)`` (order 2);
* mod-5 addition (Z_5) needs an element of order 5 with bounded powers: a 5-cycle permutation
  matrix, inside the L1 ball only for blocks ``b >= 5`` (a 2-D rotation by 72 degrees has row norm
  ``|cos| + |sin| = 1.26 > 1``; the order-4 companion of ``z^4 + z^3 + z^2 + z + 1`` has first-row
  norm 4): BD-LRU b = 8;
* S_5 needs 5 x 5 permutation matrices: BD-LRU b = 8;
* the bracket task is context-free (needs a stack) and is not expected to be solved by any
  finite-precision linear RNN; BD-LRU b = 8 is tested against the LRU all the same.

``handset_bdlru8`` is the sanity experiment with a known answer: BD-LRU b = 8 with hand-set
transitions (``_handset.py``) tracks Z_5 and S_5 exactly at every length up to 256 through the
library's own recurrence and associative scan. It separates "the parameterisation cannot express
the group" (it can) from "training does not find it" (what the measurements found beyond the
training length, where the learned transitions contract instead of staying on the unit sphere;
``results/P13/NOTES.md``).

``s5_recipe`` (``_recipe.py``, ``--full`` only, its own CPU-sized sizes ``RECIPE``): S_5 alone,
2,000 steps, with a length curriculum (labelled prefix length 4 -> 40 over the first half of the
steps) against the same training without it, to separate "too few steps / too hard a start" from
"the optimiser does not find the permutation transitions" (its measured rows and what
is left untried: ``results/P13/NOTES.md``).

Sizes (``SIZES``, one :class:`Config` per run size): the quick size trains the three
``RULE_MIXERS`` on ``QUICK_TASKS`` with batch 16 for 300 steps (fewer steps, or batch 8, made a
seed miss a task the verdicts read), and the language models 200 steps of batch 8. Models keep
the embedding and head padded to all four tasks and their replica indices, so the rows of a task
do not depend on which other tasks a size trains. Runs of up to 1,000 steps write no orbax
checkpoint: their result, kept with ``ctx.cached``, is the resume point.

Language modelling (``_lm.py``): the docstrings of pure-Python standard-library modules, LRU vs
H-LRU K = 2 vs BD-LRU b = 4 with the state width of each chosen so that the models' total
parameter counts match the LRU's (within one block), validation bits per character.
"""

from __future__ import annotations

import dataclasses
import functools

from jaxpapers.core.experiment import AllOf, Better, Experiment, Threshold
from jaxpapers.lrnn import TASKS
from jaxpapers.lrnn.experiments._lm import LMSizes
from jaxpapers.lrnn.experiments._recipe import RecipeSizes
from jaxpapers.lrnn.experiments._runs import (
    QUICK_TASKS,
    RULE_MIXERS,
    SOLVED,
    SOLVER,
    TASK_NAMES,
    lm_plot,
    recipe_plot,
    run_handset,
    run_lm,
    run_recipe,
    run_tracking,
    tracking_plot,
)
from jaxpapers.lrnn.experiments._tracking import MIXERS, TrackingSizes


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """Every size-dependent setting of P13.

    Attributes:
      tracking: the state-tracking trainings (also the hand-set check's lengths).
      lm: the character language models.
      recipe: the S_5 recipe study (``--full`` only; the same CPU-sized table at every size).
    """

    tracking: TrackingSizes
    lm: LMSizes
    recipe: RecipeSizes


#: S_5 with a training recipe (``_recipe.py``): ``--full`` only, sized to run on CPU in
#: minutes (the "full" label names the run size, not a GPU size).
RECIPE = RecipeSizes(
    d_model=32, d_state=32, n_layers=1, batch=16, steps=2000, train_len=40, test_len=256,
    eval_batch=64, lr=3e-3, start_len=4, ramp=0.5,
)  # fmt: skip

SIZES = {
    "smoke": Config(
        tracking=TrackingSizes(
            d_model=8, d_state=8, n_layers=1, batch=4, steps=4, train_len=12, test_len=24,
            eval_batch=4, lr=3e-3, mixers=RULE_MIXERS, tasks=TASKS,
        ),
        lm=LMSizes(
            d_model=8, d_state=8, n_layers=1, batch=4, steps=3, seq=16, eval_windows=4, lr=3e-3,
            max_chars=20_000,
        ),
        recipe=RECIPE,
    ),
    "quick": Config(
        tracking=TrackingSizes(
            d_model=32, d_state=32, n_layers=1, batch=16, steps=300, train_len=40, test_len=256,
            eval_batch=64, lr=3e-3, mixers=RULE_MIXERS, tasks=QUICK_TASKS,
        ),
        lm=LMSizes(
            d_model=32, d_state=32, n_layers=2, batch=8, steps=200, seq=64, eval_windows=64,
            lr=3e-3, max_chars=None,
        ),
        recipe=RECIPE,
    ),
    "full": Config(
        tracking=TrackingSizes(
            d_model=64, d_state=64, n_layers=2, batch=64, steps=5000, train_len=40, test_len=256,
            eval_batch=256, lr=1e-3, mixers=MIXERS, tasks=TASKS,
        ),
        lm=LMSizes(
            d_model=128, d_state=128, n_layers=4, batch=32, steps=5000, seq=256,
            eval_windows=256, lr=1e-3, max_chars=None,
        ),
        recipe=RECIPE,
    ),
}  # fmt: skip


def _tracking_experiments(task: str) -> tuple[Experiment, Experiment]:
    """``tracking_<task>`` and ``generalisation_<task>``: one training, two length ranges."""
    solver = SOLVER[task]
    sizes = tuple(size for size, config in SIZES.items() if task in config.tracking.tasks)
    common = dict(
        lower_is_better=False,
        baselines=("lru",),
        methods=tuple(m for m in RULE_MIXERS if m != "lru"),
        rule=AllOf((Better(solver, "lru"), Threshold(solver, SOLVED, below=False))),
        sizes=sizes,
    )
    return (
        Experiment(
            id=f"tracking_{task}",
            claim=(
                f"{TASK_NAMES[task]}: the structured mixer {solver} learns it at the training "
                f"lengths (accuracy >= {SOLVED}) and beats the diagonal LRU"
            ),
            metric="accuracy on prefixes/expressions of the training lengths (<= 40), held out",
            run=functools.partial(run_tracking, task=task, split="train"),
            plot=tracking_plot(task, "lengths <= 40"),
            **common,
        ),
        Experiment(
            id=f"generalisation_{task}",
            claim=(
                f"{TASK_NAMES[task]}: {solver} generalises beyond the training length "
                f"(accuracy >= {SOLVED} at lengths 41-256) and beats the diagonal LRU"
            ),
            metric="accuracy on positions/expressions of length 41-256 after training on <= 40",
            run=functools.partial(run_tracking, task=task, split="test"),
            plot=tracking_plot(task, "lengths 41-256"),
            **common,
        ),
    )


EXPERIMENTS = (
    *(exp for task in TASKS for exp in _tracking_experiments(task)),
    Experiment(
        id="handset_bdlru8",
        claim=(
            "sanity: BD-LRU with 8 x 8 blocks and hand-set permutation transitions (inside the "
            "L1-normalised parameterisation) tracks Z_5 and S_5 exactly at every length up to "
            "256 (accuracy 1 to within 1e-3)"
        ),
        metric="accuracy at lengths beyond the training length, hand-set BD-LRU b = 8",
        lower_is_better=False,
        baselines=(),
        methods=("handset_mod5", "handset_s5"),
        rule=AllOf(
            (
                Threshold("handset_mod5", 0.999, below=False),
                Threshold("handset_s5", 0.999, below=False),
            )
        ),
        run=run_handset,
    ),
    Experiment(
        id="char_lm",
        claim=(
            "structured state mixing improves character-level language modelling: H-LRU "
            "(K=2) and BD-LRU (b=4) reach lower validation bits per character than the "
            "diagonal LRU at matched parameter count"
        ),
        metric="validation bits per character (stdlib docstrings)",
        lower_is_better=True,
        baselines=("lru",),
        methods=("hlru2", "bdlru4"),
        rule=AllOf((Better("hlru2", "lru"), Better("bdlru4", "lru"))),
        run=run_lm,
        plot=lm_plot,
    ),
    Experiment(
        id="s5_recipe",
        claim=(
            f"permutation composition in S_5: with a length curriculum and {RECIPE.steps} steps "
            f"(S_5 alone), BD-LRU b = 8 learns it at the training lengths (accuracy >= {SOLVED}) "
            "and beats the diagonal LRU"
        ),
        metric="accuracy on prefixes of the training lengths (<= 40), held out",
        lower_is_better=False,
        baselines=("lru",),
        methods=("bdlru8_flat", "bdlru8_curriculum"),
        rule=AllOf(
            (
                Better("bdlru8_curriculum", "lru"),
                Threshold("bdlru8_curriculum", SOLVED, below=False),
            )
        ),
        run=run_recipe,
        plot=recipe_plot,
        sizes=("full",),
    ),
)

__all__ = ["EXPERIMENTS", "RECIPE", "SIZES", "Config"]
