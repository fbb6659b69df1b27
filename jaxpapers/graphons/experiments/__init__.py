"""P19 experiments: sanity, Turan optima, the triangle upper and lower tails, estimator variance.

Seeds and restarts: the optimisation experiments run ``RESTARTS`` random restarts per seed
(restart ``r`` of seed ``s`` has id ``s + 100 r``: its initial graphon and its training points),
all vmapped in one program per problem; a seed's value is its best restart (best training
objective, the constrained density on the grid, for Turan; smallest rate among restarts
meeting the density constraint on the grid for the tails), so every rule is a t test over the
seeds' values. Margins of the "matches" rules are stated beside each rule. Quick-run cost
and its history: ``results/P19/NOTES.md``.
"""

from __future__ import annotations

import dataclasses

from jaxpapers.core.experiment import AllOf, Better, Experiment, NoWorse, Threshold
from jaxpapers.graphons.experiments import _runs

#: random restarts per seed for the optimisation experiments (a seed's value is its best restart)
RESTARTS = 2


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """Every size-dependent setting of P19.

    Attributes:
      restarts: random restarts per seed (optimisation experiments).
      turan_steps, turan_points: Adam steps and sampled points per step of the Turan problems
        (triangle-free, K4-free).
      slack: the forbidden density the shift solver holds during Turan training.
      tail_steps, points: Adam steps and sampled points per step of the tails.
      learning_rate: Adam's peak step (cosine decay to 0).
      sharpness: the initial graphons' logit scale.
      grid, turan_grid: midpoint-grid points of the final evaluation (tails, Turan).
      heatmap: points per axis of the plotted graphons.
      upper, lower: the tails' ``(p, delta)`` settings.
      sanity_reps: Monte Carlo repetitions of the sanity check.
      variance_points, variance_reps: sampled points and repetitions of the variance study.
    """

    restarts: int
    turan_steps: int
    turan_points: tuple[int, int]
    slack: float
    tail_steps: int
    points: int
    learning_rate: float
    sharpness: float
    grid: int
    turan_grid: int
    heatmap: int
    upper: tuple[tuple[float, float], ...]
    lower: tuple[tuple[float, float], ...]
    sanity_reps: int
    variance_points: int
    variance_reps: int


SIZES = {
    "smoke": Config(
        restarts=2,
        turan_steps=20,
        turan_points=(12, 8),
        slack=1e-2,
        tail_steps=20,
        points=16,
        learning_rate=2e-2,
        sharpness=2.0,
        grid=40,
        turan_grid=40,
        heatmap=20,
        upper=((0.2, 1.0), (0.05, 20.0)),
        lower=((0.2, 0.5),),
        sanity_reps=64,
        variance_points=24,
        variance_reps=32,
    ),
    "quick": Config(
        restarts=RESTARTS,
        turan_steps=500,
        turan_points=(48, 24),
        slack=1e-3,
        tail_steps=300,
        points=48,
        learning_rate=2e-2,
        sharpness=2.0,
        grid=200,
        turan_grid=100,
        heatmap=100,
        upper=((0.2, 1.0), (0.05, 20.0)),
        lower=((0.2, 0.5),),
        sanity_reps=256,
        variance_points=48,
        variance_reps=64,
    ),
    "full": Config(
        restarts=4,
        turan_steps=4000,
        turan_points=(128, 48),
        slack=1e-4,
        tail_steps=4000,
        points=128,
        learning_rate=1e-2,
        sharpness=2.0,
        grid=400,
        turan_grid=400,
        heatmap=200,
        upper=((0.2, 1.0), (0.1, 8.0), (0.05, 20.0), (0.02, 50.0)),
        lower=((0.2, 0.5), (0.1, 0.8)),
        sanity_reps=1024,
        variance_points=96,
        variance_reps=1024,
    ),
}

EXPERIMENTS = (
    Experiment(
        id="sanity",
        claim=(
            "known answers: exact step-graphon densities equal the closed forms (constant p^5 "
            "for C5, clique a^3, hub 3b^2 - 2b^3); both Monte Carlo estimators are unbiased for "
            "t(C4) of a step graphon (|z| < 4); the shift solver meets its edge-density target"
        ),
        metric="absolute error / z-score / residual",
        lower_is_better=True,
        baselines=(),
        methods=("step_closed_form_error", "mc_zscore_max", "shift_residual"),
        rule=AllOf(
            (
                Threshold("step_closed_form_error", 1e-5),
                Threshold("mc_zscore_max", 4.0),
                Threshold("shift_residual", 1e-5),
            )
        ),
        run=_runs.sanity,
    ),
    Experiment(
        id="turan",
        claim=(
            "gradient descent on a neural graphon, with no structure given, rediscovers the Turan "
            "optima: triangle-free maximum edge density 1/2 and K4-free maximum triangle density "
            "2/9 (a seed's value: its random restart with the best training objective, rounded at "
            "1/2; over seeds, "
            "within 0.03 of the optimum and forbidden density below 0.005)"
        ),
        metric="|t(K_r, W rounded) - known optimum| / t(H, W rounded) (grid quadrature)",
        lower_is_better=True,
        baselines=(),
        methods=(
            "triangle_free_edge",
            "k4_free_triangle",
            "triangle_free_edge_forbidden",
            "k4_free_triangle_forbidden",
            # reported, not judged: share of a seed's restarts whose own rounded forbidden
            # density is below 0.005 (the seed's value is its best restart by training objective)
            "triangle_free_edge_restart_pass_share",
            "k4_free_triangle_restart_pass_share",
        ),
        # "rediscovers" = matches a known optimum: a non-inferiority margin of 0.03 in density
        # (kept from before these runs): the nearest wrong structures are far beyond it (the
        # K4-free bipartite graphon has triangle density 0, 0.22 below 2/9; a complete
        # bipartite graphon 0.03 below 1/2 has parts 0.38 / 0.62), while the grid quadrature
        # and rounding move the value by < 0.01. The forbidden bound 0.005 is 5x the slack
        # (1e-3) the solver holds during training.
        rule=AllOf(
            (
                Threshold("triangle_free_edge", 0.03),
                Threshold("k4_free_triangle", 0.03),
                Threshold("triangle_free_edge_forbidden", 0.005),
                Threshold("k4_free_triangle_forbidden", 0.005),
            )
        ),
        run=_runs.turan,
        plot=_runs.plot_heatmaps,
    ),
    Experiment(
        id="upper_tail",
        claim=(
            "triangle upper tail, rate (1/2) iint h_p(W) at t(K3) = (1 + delta) p^3 (a seed's "
            "value: its best restart meeting the density constraint on the grid, over the best "
            "reference's rate): at p = 0.2, delta = 1 (replica-symmetric region: the constant "
            "graphon is the optimum) it matches the constant within 2%; at p = 0.05, delta = 20 it "
            "improves upon the Lubetzky-Zhao planted clique (the best reference there)"
        ),
        metric="rate / best reference rate",
        lower_is_better=True,
        baselines=("p0.2_d1_reference", "p0.05_d20_reference"),
        methods=("p0.2_d1", "p0.05_d20"),
        # "improve upon" (the abstract) is Better at p = 0.05, delta = 20; at p = 0.2, delta = 1
        # nothing can improve on the constant, so that setting checks that the tail machinery
        # finds a known optimum: non-inferiority with a margin of 2% of its rate (kept from
        # before these runs), below the gap between competing structures (at p = 0.05,
        # delta = 20 the constant is 5.0% above the clique; at p = 0.2, delta = 1 the hub and
        # the clique are 5.4x and 6.3x the constant).
        rule=AllOf(
            (
                NoWorse("p0.2_d1", "p0.2_d1_reference", margin=0.02),
                Better("p0.05_d20", "p0.05_d20_reference"),
            )
        ),
        run=_runs.upper_tail,
        plot=_runs.plot_heatmaps,
    ),
    Experiment(
        id="lower_tail",
        claim=(
            "triangle lower tail at p = 0.2, delta = 0.5: the rate at t(K3) = (1 - delta) p^3 (a "
            "seed's value: its best restart meeting the density constraint on the grid) matches "
            "the replica-symmetric constant graphon within 2% of its rate (below 1 would be a new "
            "candidate)"
        ),
        metric="rate / constant-graphon rate",
        lower_is_better=True,
        baselines=("p0.2_d0.5_reference",),
        methods=("p0.2_d0.5",),
        # non-inferiority margin: 2% of the reference rate, as for the upper tail (kept from
        # before these runs)
        rule=NoWorse("p0.2_d0.5", "p0.2_d0.5_reference", margin=0.02),
        run=_runs.lower_tail,
        plot=_runs.plot_heatmaps,
    ),
    Experiment(
        id="estimator_variance",
        claim=(
            "the symmetry-aware Monte Carlo estimator (U-statistic over all injective copies "
            "among m sampled points: m (m - 1) / 2 graphon evaluations) has lower variance than "
            "plain Monte Carlo given as many graphon evaluations (independent k-tuples, e(H) "
            "evaluations each) for t(K3) and t(C4) of random neural graphons (per-seed variance "
            "ratio < 1); reported, not claimed: the step-graphon control variate (rows *_cv_*, "
            "not in the abstract; plain Monte Carlo then gets its 136 extra evaluations too) and "
            "the comparisons at equal sampled points (m points against m / k tuples)"
        ),
        metric="variance ratio symmetric / plain",
        lower_is_better=True,
        baselines=(),
        methods=(
            "K3_equal_evaluations",
            "C4_equal_evaluations",
            "K3_cv_equal_evaluations",
            "C4_cv_equal_evaluations",
            "K3_equal_points",
            "C4_equal_points",
            "K3_cv_equal_points",
            "C4_cv_equal_points",
        ),
        rule=AllOf(
            (Threshold("K3_equal_evaluations", 1.0), Threshold("C4_equal_evaluations", 1.0))
        ),
        run=_runs.estimator_variance,
    ),
)
