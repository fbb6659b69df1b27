"""P18 experiments, declared for ``jaxpapers reproduce P18``.

* ``concealment_sweep`` (headline): questionnaire, random scenario questions and the strategic
  prober on the same personas from no to high concealment; rows at the highest level, judged
  strategic against random scenarios (equal turns, both indirect: the choice of questions).
  Its social acceptability is judged no worse than random scenarios' (margin 0.05, stated in
  advance from the metric's scale: :data:`ACCEPT_MARGIN`).
* ``indirect_vs_questionnaire`` (premise check, not a finding): random scenario questions
  against the explicit questionnaire. The persona model conceals more on explicit items by
  construction (explicitness 0.8 against 0.05-0.35), so this checks the simulator, not the paper.
* ``context_dependence`` (premise check, not a finding): per-context posteriors against one
  context-blind profile; the personas are built with a context pull (strength 1.2).
* ``distilled_prober``: the decoder LM distilled from the strategic prober's transcripts, judged
  against random scenarios (better) and its teacher (no worse in Spearman, margin 0.03, and in
  social acceptability, margin 0.05).
* ``questionnaire_exact`` (sanity): a deterministic, non-concealing persona whose profiles lie on
  the Likert grid is recovered exactly by the ten questionnaire items.
"""

from __future__ import annotations

from jaxpapers.core.experiment import AllOf, Better, Experiment, NoWorse, Threshold
from jaxpapers.ivp.experiments._plots import plot_contexts, plot_distilled, plot_sweep
from jaxpapers.ivp.experiments._runs import (
    ACCEPT,
    ACCEPT_MARGIN,
    DISTILLED_ACCEPT,
    RANDOM_ACCEPT,
    TEACHER_ACCEPT,
    Config,
    run_contexts,
    run_distilled,
    run_exact,
    run_indirect,
    run_sweep,
)

SIZES = {
    # Smoke shapes equal those of tests/test_ivp.py, so the tests reuse its compiled programs.
    "smoke": Config(
        personas=1,
        library=16,
        scenarios=4,
        turns=5,
        levels=(0.0, 0.9),
        student_steps=10,
        student_batch=8,
        student_width=16,
        student_layers=1,
    ),
    # 64 personas per (level, seed): the per-seed spread of the strategic - random difference is
    # about 0.025 Spearman at 32 personas (0.14 per persona), so 64 give a paired t test over 5
    # seeds about 90% power for a difference of 0.03.
    "quick": Config(
        personas=64,
        library=256,
        scenarios=24,
        turns=12,
        levels=(0.0, 0.3, 0.6, 0.9),
        student_steps=400,
        student_batch=64,
        student_width=48,
        student_layers=2,
    ),
    "full": Config(
        personas=256,
        library=2048,
        scenarios=48,
        turns=16,
        levels=(0.0, 0.3, 0.6, 0.9),
        student_steps=4000,
        student_batch=256,
        student_width=96,
        student_layers=3,
    ),
}

EXPERIMENTS = (
    Experiment(
        id="concealment_sweep",
        claim="When personas conceal (level 0.9), strategic questioning recovers value profiles "
        "better than random scenario questions at equal turns (both ask indirectly, so the gain "
        "is the choice of questions), and is no less socially acceptable than random scenario "
        "questions (margin 0.05)",
        metric="Spearman correlation of recovered and true profile (mean over personas x "
        "contexts); the 'social acceptability' rows are 1 - mean intrusiveness in [0, 1]",
        lower_is_better=False,
        baselines=(
            "random scenarios",
            "questionnaire",
            RANDOM_ACCEPT,
            "questionnaire: social acceptability",
        ),
        methods=("strategic", ACCEPT),
        rule=AllOf(
            (
                Better("strategic", "random scenarios"),
                # Margin from the metric's scale, set before the runs (see ACCEPT_MARGIN): one
                # repeated question or one questionnaire item in place of a scenario per context.
                NoWorse(ACCEPT, RANDOM_ACCEPT, margin=ACCEPT_MARGIN),
            )
        ),
        run=run_sweep,
        plot=plot_sweep,
    ),
    Experiment(
        id="indirect_vs_questionnaire",
        claim="Premise check of the persona model, not a finding: personas conceal more on "
        "explicit items (explicitness 0.8) than on scenarios (0.05-0.35) by construction, so at "
        "concealment 0.9 random scenario questions must recover profiles better than the "
        "questionnaire at equal turns",
        metric="Spearman correlation of recovered and true profile at concealment 0.9",
        lower_is_better=False,
        baselines=("questionnaire",),
        methods=("random scenarios",),
        rule=Better("random scenarios", "questionnaire"),
        run=run_indirect,
    ),
    Experiment(
        id="context_dependence",
        claim="Premise check of the persona model, not a finding: personas are built with a pull "
        "(strength 1.2) towards each context's typical value, so per-context posteriors must "
        "recover the per-context profiles better than one context-blind profile",
        metric="Spearman correlation with each context's true profile (strategic prober, "
        "no concealment)",
        lower_is_better=False,
        baselines=("context-blind profile (pooled posterior)",),
        methods=("per-context posteriors",),
        rule=Better("per-context posteriors", "context-blind profile (pooled posterior)"),
        run=run_contexts,
        plot=plot_contexts,
    ),
    Experiment(
        id="distilled_prober",
        claim="A small decoder LM distilled from the strategic prober's transcripts keeps the "
        "strategy under concealment (0.9): it beats random scenario questions and is comparable "
        "to its teacher (worse by less than 0.03 Spearman, and socially no less acceptable than "
        "the teacher by more than 0.05)",
        metric="Spearman correlation of recovered and true profile at concealment 0.9",
        lower_is_better=False,
        baselines=("questionnaire", "random scenarios", "strategic (teacher)", TEACHER_ACCEPT),
        methods=("distilled Value-Prober", DISTILLED_ACCEPT),
        rule=AllOf(
            (
                Better("distilled Value-Prober", "random scenarios"),
                # "Comparable": 0.03 in Spearman correlation, set on the metric's scale before
                # the runs: one adjacent swap in a 10-value ranking moves it by 12/990 = 0.012,
                # so 0.03 is between two and three such swaps per profile on average.
                NoWorse("distilled Value-Prober", "strategic (teacher)", margin=0.03),
                NoWorse(DISTILLED_ACCEPT, TEACHER_ACCEPT, margin=ACCEPT_MARGIN),
            )
        ),
        run=run_distilled,
        plot=plot_distilled,
    ),
    Experiment(
        id="questionnaire_exact",
        claim="Sanity: a deterministic, non-concealing persona whose profiles lie on the Likert "
        "grid is recovered exactly by the ten questionnaire items",
        metric="Spearman / top-3 accuracy / posterior mass on the true profile (1 = exact)",
        lower_is_better=False,
        baselines=(),
        methods=(
            "questionnaire: Spearman",
            "questionnaire: top-3 accuracy",
            "questionnaire: posterior mass on the true profile",
        ),
        rule=AllOf(
            (
                Threshold("questionnaire: Spearman", 0.999, below=False),
                Threshold("questionnaire: top-3 accuracy", 0.999, below=False),
                Threshold("questionnaire: posterior mass on the true profile", 0.99, below=False),
            )
        ),
        run=run_exact,
    ),
)
