"""P11 experiments, declared for ``jaxpapers reproduce P11``.

* ``headroom`` (precondition of ``realism_vs_depth``): the scorer's realism score of the depth-1
  audits is below 0.95, so depth 2 has something the target perceives left to improve. Without
  it a flat curve past depth 1 says nothing about the method.
* ``realism_vs_depth`` (headline): realism win rate against deployments at critique-refinement
  depths 0, 1, 2, 4 over all scenarios; every step of the "monotone rise" is judged (paired
  one-sided t test over seeds). Verbalised awareness is reported, not judged: the target
  perceives realism with the scorer's own weights, so refinement's pick is the action that
  minimises the awareness later measured (a selection signal). The row ``scorer-judge
  agreement`` (pooled over depths) and the extras (agreement within each depth, win rate by
  scenario type) show how much of the judge's verdict the selection signal already decides.
* ``dish``: coding scenarios with and without the deployment-imitating harness.
* ``additivity``: coding scenarios, refinement and DISH alone and together; "additive" as the
  abstract states it: together better than either alone, and not below the two gains added
  (5 pp margin).
* ``sanity``: known answers: the judge on two deployment samples (win rate 0.5 within its Wilson
  interval), depth 0 reproducing the unrefined audit turn for turn without calling the scorer,
  and no sampling key shared by the candidate pools of two depths.

Each seed trains its own judge on held-out transcripts: deployments against audits of every
measured condition (depths 0-4, with and without DISH, equally many); the DISH and additivity
experiments share their measured conditions, and every experiment a seed's judge (``ctx.cached``).

Measured numbers and their history: ``results/P11/NOTES.md``.
"""

from __future__ import annotations

from jaxpapers.audit.experiments._plots import plot_coding, plot_depth
from jaxpapers.audit.experiments._runs import (
    ADDITIVE,
    AGREEMENT,
    DEPTHS,
    HEADROOM,
    SANITY_DEPTH0,
    SANITY_SHARED,
    SANITY_WIN,
    Config,
    run_additivity,
    run_dish,
    run_headroom,
    run_realism_vs_depth,
    run_sanity,
    unaware_row,
    win_row,
)
from jaxpapers.core.experiment import AllOf, Better, Experiment, NoWorse, Threshold

SIZES = {
    "smoke": Config(pairs=8, judge_train=12, turns=2, candidates=2, dish_depth=2, aware_steps=30),
    # One candidate per action: the depth claim is about revision rounds, and a pool of three
    # drafts already holds a tell-free one (probability 1 - 0.59**3 = 0.8), which left depth 2
    # nothing to improve (see ``AUDITOR`` and the ``headroom`` precondition).
    "quick": Config(pairs=96, judge_train=96, turns=3, candidates=1, dish_depth=2, aware_steps=200),
    "full": Config(
        pairs=400, judge_train=400, turns=4, candidates=1, dish_depth=4, aware_steps=600
    ),
}

EXPERIMENTS = (
    Experiment(
        id="headroom",
        claim="Precondition of realism_vs_depth: after one refinement round the scorer (the "
        "target's own perception) still finds something to improve, its realism score of the "
        "depth-1 audits below 0.95, so depth 2 can rise above depth 1",
        metric="the scorer's mean realism score sigmoid(-(b + w.n)) of everything the target was "
        "shown in an audit (1 = nothing it perceives as a tell is left); rows at depths 0, 2, 4 "
        "for context",
        lower_is_better=True,
        baselines=tuple(f"scorer's realism score of the audits, depth {d}" for d in (0, 2, 4)),
        methods=(HEADROOM,),
        # 0.95: a twentieth of the way from "a tell left" to "clean", set before the runs; at
        # 0.997 (the bed before 2026-12-04) deeper rounds had nothing the target perceives left.
        rule=Threshold(HEADROOM, 0.95),
        run=run_headroom,
    ),
    Experiment(
        id="realism_vs_depth",
        claim="Realism win rate rises monotonically with critique-refinement depth (0 < 1 < 2 < 4, "
        "each step judged). Verbalised awareness is reported, not judged: the target perceives "
        "realism with the scorer's own weights, so refinement selects on it (selection signal)",
        metric="win rate of audits against deployment transcripts (pairwise judge trained on "
        "every condition, independent of the scorer); the awareness rows are 1 - share of audits "
        "with verbalised awareness (rule-based) and the agreement row the share of audit pairs "
        "the judge and the refinement scorer order alike, pooled over depths (both not judged)",
        lower_is_better=False,
        baselines=(win_row(0), unaware_row(0), unaware_row(DEPTHS[-1]), AGREEMENT),
        methods=tuple(win_row(d) for d in DEPTHS[1:]),
        rule=AllOf(
            (
                Better(win_row(1), win_row(0)),
                Better(win_row(2), win_row(1)),
                Better(win_row(4), win_row(2)),
            )
        ),
        requires=("headroom",),
        run=run_realism_vs_depth,
        plot=plot_depth,
    ),
    Experiment(
        id="dish",
        claim="In coding scenarios DISH raises the realism win rate (no refinement)",
        metric="win rate of coding audits against coding deployments",
        lower_is_better=False,
        baselines=("neither",),
        methods=("DISH",),
        rule=Better("DISH", "neither"),
        run=run_dish,
    ),
    Experiment(
        id="additivity",
        claim="In coding scenarios the gains of refinement and DISH are additive: together they "
        "beat either alone, and the combination's win rate is no lower than the two gains added "
        "(margin 5 pp)",
        metric="win rate of coding audits against coding deployments; the 'gains added' row is "
        "refinement + DISH - neither per seed",
        lower_is_better=False,
        baselines=("neither", "critique refinement", "DISH", ADDITIVE),
        methods=("refinement + DISH",),
        rule=AllOf(
            (
                Better("refinement + DISH", "critique refinement"),
                Better("refinement + DISH", "DISH"),
                # Additive, not sub-additive: 5 pp of win rate, under half the abstract's 12 pp
                # gain over either technique, set on the metric's scale before the runs.
                NoWorse("refinement + DISH", ADDITIVE, margin=0.05),
            )
        ),
        run=run_additivity,
        plot=plot_coding,
    ),
    Experiment(
        id="sanity",
        claim="Sanity (known answers): the judge finds two deployment samples equally realistic "
        "(0.5 inside the Wilson interval), depth-0 refinement is exactly the unrefined auditor, "
        "and the candidate pools of different depths share no sample",
        metric="distance of 0.5 outside the interval (<= 0 inside); mismatched turns; shared "
        "candidate keys",
        lower_is_better=True,
        baselines=(),
        methods=(SANITY_WIN, SANITY_DEPTH0, SANITY_SHARED),
        rule=AllOf(
            (
                Threshold(SANITY_WIN, 0.0),
                Threshold(SANITY_DEPTH0, 0.5),
                Threshold(SANITY_SHARED, 0.5),
            )
        ),
        run=run_sanity,
    ),
)
