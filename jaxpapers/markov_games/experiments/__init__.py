"""P14 experiments: registrations and sizes only (runs in ``_runs.py``)."""

from __future__ import annotations

from typing import NamedTuple

from jaxpapers.core.experiment import AllOf, Better, Experiment, Threshold, register
from jaxpapers.markov_games.experiments import _runs

PAPER = "P14"


class Sizes(NamedTuple):
    states: int
    actions: int
    horizon: int
    players: tuple[int, ...]
    horizons: tuple[int, ...]
    epsilon: float
    cap: int
    bootstrap: int
    arms: int
    rounds: int
    gap: float
    spread: float


SIZES = {
    "smoke": Sizes(
        states=2,
        actions=2,
        horizon=2,
        players=(2, 3, 4),
        horizons=(2, 3, 4),
        epsilon=1.0,
        cap=1 << 12,
        bootstrap=100,
        arms=4,
        rounds=300,
        gap=0.1,
        spread=0.02,
    ),
    "quick": Sizes(
        states=2,
        actions=2,
        horizon=2,
        players=(2, 3, 4, 5),
        horizons=(2, 3, 4, 5),
        epsilon=0.5,
        cap=1 << 16,
        bootstrap=1000,
        arms=8,
        rounds=4000,
        gap=0.05,
        spread=0.02,
    ),
    "full": Sizes(
        states=4,
        actions=3,
        horizon=3,
        players=(2, 3, 4, 5, 6),
        horizons=(2, 3, 4, 6, 8),
        epsilon=0.25,
        cap=1 << 22,
        bootstrap=2000,
        arms=16,
        rounds=100_000,
        gap=0.02,
        spread=0.02,
    ),
}


def _sizes(ctx) -> Sizes:
    return ctx.pick(smoke=SIZES["smoke"], quick=SIZES["quick"], full=SIZES["full"])


register(
    Experiment(
        paper=PAPER,
        id="sanity",
        claim=(
            "Known answers: Chicken's welfare-maximising CCE (LP) has welfare 10.5; the "
            "backward-induction LP CCE of random games has CCE gap 0; the history-tree gap of a "
            "one-component mixture equals the Markov DP gap; the simulator learner reaches "
            "gap < epsilon on Chicken, Shapley's game and a 3-player congestion game"
        ),
        metric="absolute errors; learned gap / epsilon (worst seed per game)",
        lower_is_better=True,
        baselines=(),
        methods=(
            "chicken_lp_welfare_error",
            "random_game_lp_gap",
            "mixture_vs_markov_gap_diff",
            "matrix_games_gap_over_epsilon",
        ),
        rule=AllOf(
            (
                Threshold("chicken_lp_welfare_error", 1e-6),
                Threshold("random_game_lp_gap", 1e-4),
                Threshold("mixture_vs_markov_gap_diff", 1e-4),
                Threshold("matrix_games_gap_over_epsilon", 1.0),
            )
        ),
        run=lambda ctx: _runs.run_sanity(ctx, _sizes(ctx)),
    )
)

register(
    Experiment(
        paper=PAPER,
        id="players_scaling",
        claim=(
            "With max_i A_i = 2 fixed and m growing, the samples the paper's simulator learner "
            "needs to certify an epsilon-CCE stay flat in sum_i A_i (bootstrap upper end of the "
            "log-log slope < 0.5) while the Li et al.-style baseline's grow (lower end > 0.5)"
        ),
        metric="log-log slope of samples vs sum_i A_i (rows *_high/_low: bootstrap ends)",
        lower_is_better=True,
        baselines=("baseline_slope", "baseline_slope_low"),
        methods=("paper_slope", "paper_slope_high"),
        rule=AllOf(
            (
                Threshold("paper_slope_high", 0.5),
                Threshold("baseline_slope_low", 0.5, below=False),
            )
        ),
        run=lambda ctx: _runs.run_players(ctx, _sizes(ctx)),
        plot=_runs.plot_players,
    )
)

register(
    Experiment(
        paper=PAPER,
        id="horizon_scaling",
        claim=(
            "Samples to a certified epsilon-CCE grow in H no faster than H^4 with a simulator "
            "and H^5 online (bootstrap upper ends of the log-log slopes), the online rate "
            "improving on V-learning's"
        ),
        metric="log-log slope of samples vs H (rows *_high: bootstrap upper ends)",
        lower_is_better=True,
        baselines=(
            "simulator_baseline_slope",
            "simulator_baseline_slope_high",
            "online_baseline_slope",
            "online_baseline_slope_high",
        ),
        methods=(
            "simulator_paper_slope",
            "simulator_paper_slope_high",
            "online_paper_slope",
            "online_paper_slope_high",
        ),
        rule=AllOf(
            (
                Threshold("simulator_paper_slope_high", 4.0),
                Threshold("online_paper_slope_high", 5.0),
                Better("online_paper_slope", "online_baseline_slope"),
            )
        ),
        run=lambda ctx: _runs.run_horizon(ctx, _sizes(ctx)),
        plot=_runs.plot_horizon,
    )
)

register(
    Experiment(
        paper=PAPER,
        id="bandit_variance",
        claim=(
            "On low-variance losses the empirical-Bernstein bandit has lower regret than EXP3, "
            "and it is no worse on Bernoulli losses"
        ),
        metric="pseudo-regret after all rounds",
        lower_is_better=True,
        baselines=("exp3_low_variance", "exp3_bernoulli"),
        methods=("bernstein_low_variance", "bernstein_bernoulli"),
        rule=AllOf(
            (
                Better("bernstein_low_variance", "exp3_low_variance"),
                Better("bernstein_bernoulli", "exp3_bernoulli", at_least=True),
            )
        ),
        run=lambda ctx: _runs.run_bandit_variance(ctx, _sizes(ctx)),
        plot=_runs.plot_bandit,
    )
)
