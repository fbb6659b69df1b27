"""P15 experiments: registrations and the table of sizes (runs live in ``_tasks.py``)."""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

from jaxpapers.core.experiment import AllOf, Better, Experiment, Threshold, register
from jaxpapers.ldp_rl.experiments import _plots, _tasks

PAPER = "P15"


class BanditSizes(NamedTuple):
    S: int
    A: int
    K: int
    epsilons: tuple[float, ...] = (0.1, 0.5, 1.0, 2.0, 8.0)
    grid: tuple[tuple[int, int], ...] = ((4, 4),)


class RLSizes(NamedTuple):
    S: int
    A: int
    H: int
    K: int
    epsilon: float


class AuditSizes(NamedTuple):
    categories: int
    samples: int
    epsilons: tuple[float, ...] = (0.1, 0.5, 1.0, 2.0, 8.0)


SANITY = {
    "smoke": BanditSizes(S=2, A=3, K=200),
    "quick": BanditSizes(S=4, A=4, K=4000),
    "full": BanditSizes(S=4, A=4, K=100_000),
}
BANDIT = {
    "smoke": BanditSizes(S=2, A=3, K=256, epsilons=(1.0, 8.0)),
    "quick": BanditSizes(S=4, A=4, K=4096, grid=((4, 4), (8, 4))),
    "full": BanditSizes(S=4, A=4, K=262_144, grid=((4, 4), (8, 4), (4, 8), (16, 4))),
}
RL = {
    "smoke": RLSizes(S=2, A=2, H=2, K=64, epsilon=4.0),
    "quick": RLSizes(S=3, A=2, H=3, K=2048, epsilon=8.0),
    "full": RLSizes(S=5, A=3, H=5, K=65_536, epsilon=1.0),
}
AUDIT = {
    "smoke": AuditSizes(categories=3, samples=20_000, epsilons=(0.5, 2.0)),
    "quick": AuditSizes(categories=4, samples=400_000),
    "full": AuditSizes(categories=6, samples=10_000_000),
}

register(
    Experiment(
        paper=PAPER,
        id="large_epsilon_limit",
        claim="sanity: as epsilon grows the unary encoding becomes exact, so EXP3-LDP "
        "(eps=30) has the regret of EXP3 on the same bandits and keys",
        metric="cumulative pseudo-regret after K rounds",
        lower_is_better=True,
        baselines=("EXP3",),
        methods=("EXP3-LDP eps=30",),
        rule=AllOf(
            (
                Better("EXP3-LDP eps=30", "EXP3", at_least=True),
                Better("EXP3", "EXP3-LDP eps=30", at_least=True),
            )
        ),
        run=partial(_tasks.large_epsilon_limit, sizes=SANITY),
    )
)

register(
    Experiment(
        paper=PAPER,
        id="bandit_rate",
        claim="EXP3 with unary-encoded losses has sublinear regret in K, and its regret across "
        "epsilon follows the minimax rate min(K, sqrt(max(S, e^eps+1) S A K (e^eps+1))/(e^eps-1))"
        " (exponent 1 in that rate)",
        metric="fitted log-log exponents (per seed)",
        lower_is_better=True,
        baselines=("K-exponent EXP3",),
        methods=(
            "K-exponent EXP3-LDP eps=1",
            "K-exponent EXP3-LDP eps=8",
            "exponent in minimax rate S=4,A=4",
        ),
        rule=AllOf(
            (
                Threshold("K-exponent EXP3-LDP eps=1", 0.9),
                Threshold("K-exponent EXP3-LDP eps=8", 0.9),
                Threshold("exponent in minimax rate S=4,A=4", 0.7, below=False),
                Threshold("exponent in minimax rate S=4,A=4", 1.3),
            )
        ),
        run=partial(_tasks.bandit_rate, sizes=BANDIT),
        plot=_plots.plot_curves,
    )
)

register(
    Experiment(
        paper=PAPER,
        id="rl_rate",
        claim="UCBVI with unary-encoded statistics learns (sublinear regret in K) below the "
        "H^2 S^2 sqrt(AK)/eps upper-bound curve, and privacy costs regret against UCBVI",
        metric="cumulative regret after K episodes / fitted exponent",
        lower_is_better=True,
        baselines=("UCBVI regret",),
        methods=(
            "UCBVI-LDP regret",
            "UCBVI-LDP regret / upper-bound curve",
            "K-exponent UCBVI-LDP",
        ),
        rule=AllOf(
            (
                Better("UCBVI regret", "UCBVI-LDP regret"),
                Threshold("UCBVI-LDP regret / upper-bound curve", 1.0),
                Threshold("K-exponent UCBVI-LDP", 0.9),
            )
        ),
        run=partial(_tasks.rl_rate, sizes=RL),
        plot=_plots.plot_curves,
    )
)

register(
    Experiment(
        paper=PAPER,
        id="privacy_audit",
        claim="released messages never exceed likelihood ratio e^eps: exactly (enumeration) "
        "for unary encoding and randomised response, and empirically (sampled releases)",
        metric="max log likelihood ratio / eps (rows over eps); share of sampled cells above "
        "e^eps by > 3 s.e.",
        lower_is_better=True,
        baselines=("randomised response exact loss / eps",),
        methods=("unary exact loss / eps", "unary share of significant excesses"),
        rule=AllOf(
            (
                Threshold("unary exact loss / eps", 1.0 + 1e-9),
                Threshold("randomised response exact loss / eps", 1.0 + 1e-9),
                Threshold("unary share of significant excesses", 0.01),
            )
        ),
        run=partial(_tasks.privacy_audit, sizes=AUDIT),
    )
)
