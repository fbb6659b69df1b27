"""P15 experiments: regret rates of EXP3-LDP (H = 1) and UCBVI-LDP (H > 1), a privacy audit.

``large_epsilon_limit`` (known answer: EXP3-LDP at eps = 30 is EXP3 on the same bandits and keys),
``bandit_rate`` (per-seed K-exponents over separately run horizons, and the exponent of the regret
in the minimax rate across (S, A, eps) cells), ``rl_rate`` (UCBVI-LDP at eps = 1 against UCBVI,
sublinear and costlier) and ``privacy_audit`` (exact and sampled likelihood ratios). ``SIZES``
holds one :class:`Config` per run size; the runs live in ``_tasks.py`` (vmapped programs in
``_runs.py``, the audit in ``_audit.py``).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from jaxpapers.core.experiment import AllOf, Better, Experiment, Threshold
from jaxpapers.ldp_rl.experiments import _plots, _tasks


class SanitySizes(NamedTuple):
    S: int
    A: int
    K: int


class BanditSizes(NamedTuple):
    """One run per horizon in ``ks`` (multiples of ``ks[0]``), per epsilon, per (S, A)."""

    ks: tuple[int, ...]
    epsilons: tuple[float, ...] = (0.5, 1.0, 2.0, 8.0)
    grid: tuple[tuple[int, int], ...] = ((4, 4),)


class RLSizes(NamedTuple):
    S: int
    A: int
    H: int
    ks: tuple[int, ...]
    epsilon: float
    privacy_bonus_scale: float = 1.0
    reported_bonus_scale: float | None = 0.3


class AuditSizes(NamedTuple):
    categories: int
    samples: int
    epsilons: tuple[float, ...] = (0.1, 0.5, 1.0, 2.0, 8.0)


def _doubling(first: int, count: int) -> tuple[int, ...]:
    return tuple(first * 2**j for j in range(count))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """The sizes of one run size, one record per experiment."""

    sanity: SanitySizes
    bandit: BanditSizes
    rl: RLSizes
    audit: AuditSizes


# rl: epsilon = 1 is the theorem's small-epsilon regime; S = A = H = 2 keeps the 2 S^2 A =
# 16-symbol encoding (at epsilon / H = 0.5 per step) as small as an H > 1 problem allows. The rule
# judges the privacy bonus constant c_sigma = 1, the only value for which ucbvi_ldp's bonus covers
# the noise with the theorem's union bound. The row of constant 0.3 (~1 / sqrt(L): one standard
# deviation of the noise's effect) is reported, not judged: that value was chosen after seeing
# runs on this very bed.
SIZES = {
    "smoke": Config(
        sanity=SanitySizes(S=2, A=3, K=200),
        bandit=BanditSizes(ks=_doubling(64, 3), grid=((2, 3),)),
        rl=RLSizes(S=2, A=2, H=2, ks=_doubling(32, 2), epsilon=4.0),
        audit=AuditSizes(categories=3, samples=20_000, epsilons=(0.5, 2.0)),
    ),
    "quick": Config(
        sanity=SanitySizes(S=4, A=4, K=4096),
        bandit=BanditSizes(ks=_doubling(2**15, 5), grid=((4, 4), (8, 4), (4, 8))),
        rl=RLSizes(S=2, A=2, H=2, ks=_doubling(2**16, 5), epsilon=1.0),
        audit=AuditSizes(categories=4, samples=400_000),
    ),
    "full": Config(
        sanity=SanitySizes(S=4, A=4, K=100_000),
        bandit=BanditSizes(ks=_doubling(2**17, 6), grid=((4, 4), (8, 4), (4, 8), (16, 4))),
        rl=RLSizes(S=3, A=2, H=3, ks=_doubling(2**18, 6), epsilon=1.0),
        audit=AuditSizes(categories=6, samples=10_000_000),
    ),
}

#: Per-seed K-exponents are judged against 1/2 (the claimed sqrt-K rate) with the tolerance
#: 1/12 fixed before any run: 7/12 is halfway between 1/2 and the 2/3 of an EXP3 variant that
#: sends its policy (the user draws the arm), so the rule tells the two rates apart.
SQRT_K_LOW, SQRT_K_HIGH = 5 / 12, 7 / 12


#: Epsilons whose K-exponent the bandit rule judges.
JUDGED_EPSILONS = (1.0, 2.0, 8.0)


def _sqrt_k(row: str) -> tuple[Threshold, Threshold]:
    return Threshold(row, SQRT_K_HIGH), Threshold(row, SQRT_K_LOW, below=False)


def _bandit_rule() -> AllOf:
    # Judged epsilons: those whose explicit bound at the quick grid's smallest K is below K/4
    # (``_tasks.uncapped``; a test keeps this list equal to it); 0.5 stays a reported row
    # (capped at the quick horizons; the full grid's 2^17 would uncap it).
    parts = [*_sqrt_k("K-exponent EXP3")]
    for e in JUDGED_EPSILONS:
        parts += _sqrt_k(f"K-exponent EXP3-LDP eps={e:g}")
    parts += [
        Threshold("exponent in minimax rate", 1.3),
        Threshold("exponent in minimax rate", 0.7, below=False),
    ]
    return AllOf(tuple(parts))


EXPERIMENTS = (
    Experiment(
        id="large_epsilon_limit",
        claim="sanity (known answer): as epsilon grows the unary encoding becomes exact, so "
        "EXP3-LDP at eps=30 (a bit flips with probability 3e-7) has the regret of EXP3 on the "
        "same bandits and keys, to within 1% per seed",
        metric="cumulative pseudo-regret after K rounds; relative per-seed difference",
        lower_is_better=True,
        baselines=("EXP3",),
        methods=("EXP3-LDP eps=30", "|EXP3-LDP eps=30 - EXP3| / EXP3"),
        rule=Threshold("|EXP3-LDP eps=30 - EXP3| / EXP3", 0.01),
        run=_tasks.large_epsilon_limit,
    ),
    Experiment(
        id="bandit_rate",
        claim="EXP3 on unary-encoded losses (the learner draws each context's arm, so privacy "
        "noise reaches one arm per context) has regret growing as sqrt(K): per-seed exponent of "
        "the final regret over separately run horizons K within 1/2 +- 1/12 at every epsilon "
        "whose rate is not capped at K; and across (S, A, epsilon) its regret follows the "
        "minimax rate min(K, sqrt(max(S, e^eps+1) S A K (e^eps+1))/(e^eps-1)): judged is the "
        "per-seed exponent of the final regret (largest K) in that rate over the uncapped "
        "(S, A, eps) cells, S and A each varied ((4,4), (8,4), (4,8)), within 1 +- 0.3, a "
        "margin fixed before any run; the algorithm's own bound (exp3_regret_bound) has "
        "exponent ~1.1 in that rate over the same cells, so the rule checks that the regret "
        "scales like the rate up to the mechanism's e^eps-dependent constant, not that it "
        "attains the rate's constants",
        metric="fitted log-log exponents (one per seed)",
        lower_is_better=True,
        baselines=("K-exponent EXP3",),
        methods=(
            "K-exponent EXP3-LDP eps=0.5",
            "K-exponent EXP3-LDP eps=1",
            "K-exponent EXP3-LDP eps=2",
            "K-exponent EXP3-LDP eps=8",
            "exponent in minimax rate",
        ),
        rule=_bandit_rule(),
        run=_tasks.bandit_rate,
        plot=_plots.plot_curves,
    ),
    Experiment(
        id="rl_rate",
        claim="at small epsilon (eps = 1, H releases at eps/H) UCBVI with unary-encoded "
        "statistics and the theory's bonus covering the privacy noise (constant c_sigma = 1) "
        "learns: its regret is sublinear in K "
        "(per-seed exponent of the final regret over separately run horizons < 1), and privacy "
        "costs regret against UCBVI on the same MDPs. The quick horizons (2^16..2^20 episodes) "
        "may end inside the exploration phase, which would leave the exponent near 1 "
        "(inconclusive for budget); the row at constant 0.3, chosen after runs on this bed, is "
        "reported, not judged",
        metric="cumulative regret after the largest K / fitted exponent (one per seed)",
        lower_is_better=True,
        baselines=("UCBVI-LDP regret",),
        methods=("UCBVI regret", "K-exponent UCBVI-LDP", "K-exponent UCBVI-LDP c_sigma=0.3"),
        rule=AllOf(
            (
                Better("UCBVI regret", "UCBVI-LDP regret"),
                Threshold("K-exponent UCBVI-LDP", 1.0),
            )
        ),
        run=_tasks.rl_rate,
        plot=_plots.plot_curves,
    ),
    Experiment(
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
        run=_tasks.privacy_audit,
    ),
)
