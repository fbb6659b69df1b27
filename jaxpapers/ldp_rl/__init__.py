r"""P15: tabular RL under non-interactive local differential privacy (LDP).

Setting
-------
In episode :math:`k \in [K]` the learner sends a policy to a user, who runs it for :math:`H`
steps and returns one :math:`\epsilon`-LDP message. For :math:`H = 1` this is a contextual
bandit with :math:`S` contexts and :math:`A` arms, whose minimax regret is

.. math::
    \min\Big(K,\ \frac{\sqrt{\max(S, e^\epsilon + 1)\, S A K (e^\epsilon + 1)}}
    {e^\epsilon - 1}\Big)

up to constants and :math:`\sqrt{\log A}`; for :math:`H > 1` and small :math:`\epsilon` the
regret lies between :math:`\Omega(H S \sqrt{AK}/\epsilon)` and
:math:`\tilde O(H^2 S^2 \sqrt{AK}/\epsilon)`.

Mechanisms (derivation)
-----------------------
*Unary encoding* releases the one-hot vector :math:`e_x \in \{0,1\}^d` with each bit kept with
probability :math:`p = e^{\epsilon/2}/(1 + e^{\epsilon/2})`. Two one-hot vectors differ in two
bits, so :math:`P[y|x]/P[y|x'] \le (p/(1-p))^2 = e^\epsilon`; :func:`max_privacy_loss`
confirms this exactly by enumerating all :math:`2^d` outputs. Since
:math:`E[b_j] = (1-p) + (2p-1) x_j`, the debiased :math:`(b - (1-p))/(2p-1)` is unbiased with
per-bit variance :math:`p(1-p)/(2p-1)^2 \approx 1/\epsilon^2` for small :math:`\epsilon`.
*Randomised response* keeps one bit with probability :math:`e^\epsilon/(1+e^\epsilon)`.

LDP EXP3 (H = 1)
----------------
The user encodes the index of :math:`(s, a)` when the loss is 1 (a spare symbol when it is 0)
among :math:`SA + 1` symbols, so one release covers the context, the arm and the reward. The
learner debiases it to :math:`z`, with :math:`E[z_{s,a}] = \rho_s \pi(a|s) \ell(s,a)`, and
runs EXP3 in every context on :math:`\hat\ell_{s,a} = z_{s,a}/(\pi(a|s) + \gamma)`.
Unlike bandit feedback, the privacy noise reaches *every* coordinate, so the second-moment
term of EXP3's bound is :math:`\sigma^2 \sum_a 1/\pi(a|s)`, not :math:`\sigma^2 A`; the
implicit-exploration offset :math:`\gamma` (EXP3-IX) caps it, and the tuning of
:func:`exp3_params` balances :math:`S\log A/\eta + \eta K (A + S\sigma^2A^2/\gamma) + \gamma K`.
That gives :math:`K^{2/3}`, not the paper's :math:`\sqrt{K}`: the abstract names "an adaptation
of EXP3 and a unary encoding mechanism" without the estimator that removes the
:math:`1/\pi` from the noise, and we could not reconstruct it. The ``bandit_rate`` experiment
reports the measured exponents honestly against the minimax rate.

LDP UCBVI (H > 1)
-----------------
Each step's :math:`(s, a, s', r)` is unary-encoded among :math:`2S^2A` symbols at level
:math:`\epsilon/H` (H releases compose to :math:`\epsilon` per episode). Debiased counts are
summed, negative counts clipped, and UCBVI plans by backward induction with a Hoeffding bonus
plus a privacy bonus :math:`H\sigma\sqrt{2SHkL}/n(s,a)` for the summed noise (see
:func:`ucbvi_ldp`); non-private UCBVI is the same code on exact counts.

What is measured
----------------
``bandit_rate``: EXP3-LDP regret over K for several :math:`\epsilon`, fitted exponents with
bootstrap intervals against the minimax rate; ``rl_rate``: UCBVI-LDP vs UCBVI over K against
the lower/upper bound curves; ``privacy_audit``: exact and empirical likelihood ratios;
``large_epsilon_limit`` (sanity): as :math:`\epsilon \to \infty` EXP3-LDP becomes EXP3.

References:
    "Tabular RL under local differential privacy" (NeurIPS 2026), P15.
    Auer, Cesa-Bianchi, Freund & Schapire, "The nonstochastic multiarmed bandit problem", 2002.
    Neu, "Explore no more: improved high-probability regret bounds", NeurIPS 2015 (EXP3-IX).
    Azar, Osband & Munos, "Minimax regret bounds for reinforcement learning", ICML 2017 (UCBVI).
    Wang, Blocki, Li & Jha, "Locally differentially private protocols for frequency
    estimation", USENIX Security 2017 (unary encoding).
    Garcelon, Perchet, Pike-Burke & Pirotta, "Local differential privacy for regret
    minimization in reinforcement learning", NeurIPS 2021.
"""

from jaxpapers.ldp_rl._bandit import (
    BanditResult,
    ContextualBandit,
    Exp3Params,
    exp3_ldp,
    exp3_params,
    exp3_policy,
    importance_weighted_losses,
    random_contextual_bandit,
)
from jaxpapers.ldp_rl._mechanisms import (
    max_privacy_loss,
    randomized_response,
    randomized_response_debias,
    randomized_response_output_probabilities,
    unary_debias,
    unary_encode,
    unary_keep_probability,
    unary_noise_variance,
    unary_output_probabilities,
)
from jaxpapers.ldp_rl._ucbvi import (
    EpisodicMDP,
    RLResult,
    backward_induction,
    estimated_model,
    policy_value,
    random_episodic_mdp,
    ucbvi_ldp,
)

__all__ = [
    "BanditResult",
    "ContextualBandit",
    "EpisodicMDP",
    "Exp3Params",
    "RLResult",
    "backward_induction",
    "estimated_model",
    "exp3_ldp",
    "exp3_params",
    "exp3_policy",
    "importance_weighted_losses",
    "max_privacy_loss",
    "policy_value",
    "random_contextual_bandit",
    "random_episodic_mdp",
    "randomized_response",
    "randomized_response_debias",
    "randomized_response_output_probabilities",
    "ucbvi_ldp",
    "unary_debias",
    "unary_encode",
    "unary_keep_probability",
    "unary_noise_variance",
    "unary_output_probabilities",
]
