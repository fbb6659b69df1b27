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
The learner draws, with its own coins, one arm :math:`b_s \sim \pi_k(\cdot|s)` per context and
sends the deterministic policy :math:`s \mapsto b_s`. The user draws :math:`s \sim \rho`, plays
:math:`b_s` and releases the unary encoding of ``s`` when the loss is 1 (of a spare symbol when it
is 0) among :math:`S + 1` symbols. The played arm is a function of the context and the public
policy, so one release is :math:`\epsilon`-LDP for the whole (context, arm, reward). The
learner debiases it to :math:`z` (:math:`E[z_s \mid b] = \rho_s \ell(s, b_s)`) and adds
:math:`\hat\ell_{s,a} = 1[a = b_s]\, z_s / \pi(a|s)`, unbiased for :math:`\rho_s \ell(s,a)`,
to every context's cumulative losses; it plays
:math:`\pi = (1-\gamma)\,\mathrm{softmax}(-\eta \hat L) + \gamma/A`.

*Why this gives* :math:`\sqrt K`. EXP3's bound per context is
:math:`\log A/\eta + \eta \sum_k E\langle \pi_k, \hat\ell_k^2\rangle + \gamma K \rho_s`, valid
when :math:`\eta\hat\ell \ge -1`. Because the privacy noise of :math:`z_s` reaches only the drawn
arm, :math:`\sum_a \pi(a|s) E[\hat\ell_{s,a}^2] = \sum_a E[z_s^2 \mid b_s = a]
\le A(\sigma^2 + \rho_s)`, whatever :math:`\pi`, with :math:`\sigma^2 = p(1-p)/(2p-1)^2` the
variance of a debiased bit. A debiased bit is at least :math:`-c`, :math:`c = (1-p)/(2p-1)`, so
:math:`\gamma = \eta A c` gives :math:`\pi \ge \gamma/A` and :math:`\eta\hat\ell \ge -1`. Summed
over contexts:

.. math::
    R_K \le \frac{S\log A}{\eta} + \eta K A (1 + S\sigma^2 + c)
    = 2\sqrt{S A K \log A\,(1 + S\sigma^2 + c)}

at :math:`\eta = \sqrt{S\log A / (KA(1 + S\sigma^2 + c))}` (:func:`exp3_params`,
:func:`exp3_regret_bound`; no constant is tuned). For small :math:`\epsilon`,
:math:`\sigma^2 \approx 4/\epsilon^2` and the bound is :math:`\approx 4 S\sqrt{AK\log A}/\epsilon`,
the minimax :math:`S\sqrt{2AK}/\epsilon` up to constants and :math:`\sqrt{\log A}`; for
:math:`e^{\epsilon/2} \ge S` it is the non-private :math:`\sqrt{SAK\log A}`. In between
(:math:`e^{\epsilon/2} < S < e^\epsilon`) symmetric unary encoding's variance
:math:`\approx e^{-\epsilon/2}` leaves it a factor up to :math:`e^{\epsilon/4}` above the minimax
rate (an optimised unary encoding, whose variance is :math:`\approx 4e^{-\epsilon}`, would
close it). Sending the policy itself instead (the user draws the arm) would let the noise
reach every arm (second moment :math:`\sigma^2\sum_a 1/\pi(a|s)`); capping that needs
:math:`\gamma \propto K^{-1/3}` and gives :math:`K^{2/3}`.

LDP UCBVI (H > 1)
-----------------
Each step's :math:`(s, a, s', r)` is unary-encoded among :math:`2S^2A` symbols at level
:math:`\epsilon/H` (H releases compose to :math:`\epsilon` per episode). Debiased counts are
summed, negative counts clipped, and UCBVI plans by backward induction with a Hoeffding bonus
plus a privacy bonus :math:`H\sigma\sqrt{2SHkL}/n(s,a)` that covers the summed noise of the
counts at the confidence level of :math:`L` (its constant is 1; see :func:`ucbvi_ldp`);
non-private UCBVI is the same code on exact counts. The MDP is
:class:`jaxpapers.core.mdp.TabularMDP` (re-exported here) with ``P[S, A, S']``, reward means
``R[S, A]`` in ``[0, 1]``, ``horizon=H``, ``gamma = 1`` and start state 0.

What is measured
----------------
Every K-exponent is fitted over separately run horizons: the run for horizon :math:`K` is tuned
for that :math:`K` and read after :math:`K` rounds (round :math:`k` draws from
``fold_in(key, k)``, so a longer run read at :math:`K` is exactly the run of horizon
:math:`K`; the experiments vmap the horizons this way), one exponent per seed.
``bandit_rate``: EXP3-LDP's per-seed K-exponents at every :math:`\epsilon` whose rate is not
capped at the smallest :math:`K` (explicit bound below :math:`K/4`), judged against
:math:`1/2 \pm 1/12`, and the per-seed exponent of the final regret in the minimax rate across
every uncapped :math:`(S, A, \epsilon)` cell, judged against :math:`1 \pm 0.3`; ``rl_rate``:
UCBVI-LDP at :math:`\epsilon = 1` (the theorem's small-:math:`\epsilon` regime) against UCBVI
(a rule on a bound curve without its constants would mean nothing); ``privacy_audit``: exact
and empirical likelihood ratios; ``large_epsilon_limit`` (known answer): as
:math:`\epsilon \to \infty` EXP3-LDP becomes EXP3.

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

from jaxpapers.core.mdp import TabularMDP
from jaxpapers.ldp_rl._bandit import (
    BanditResult,
    ContextualBandit,
    Exp3Params,
    exp3_ldp,
    exp3_params,
    exp3_policy,
    exp3_regret_bound,
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
    "Exp3Params",
    "RLResult",
    "TabularMDP",
    "backward_induction",
    "estimated_model",
    "exp3_ldp",
    "exp3_params",
    "exp3_policy",
    "exp3_regret_bound",
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
