r"""P14: coarse correlated equilibria (CCE) in multi-player general-sum Markov games.

Setting
-------
An episodic game has ``m >= 2`` players, ``S`` states, horizon ``H``, action sets of sizes
``A_i``, transitions :math:`P_h(s' | s, a)` and rewards :math:`r_{h,i}(s, a) \in [0, 1]` of the
joint action :math:`a = (a_1, \dots, a_m)`. A correlated policy :math:`\pi` is an
:math:`\epsilon`-CCE when no player gains more than :math:`\epsilon` by deviating to its best
policy while the others keep their part of the correlated draw:

.. math:: \mathrm{gap}(\pi) = \max_i \big(V_{1,i}^{\dagger, \pi_{-i}} - V_{1,i}^{\pi}\big)(\rho)
   \le \epsilon.

The game (:class:`MarkovGame`) is a :class:`jaxpapers.core.mdp.TabularMDP` with one kernel per
step, ``P[h, s, j, s']``, the players' rewards ``R[h, s, j, i]`` and the joint action ``j``
flattened row-major, together with the players' action counts.

Exact tools (:func:`cce_gap`, :func:`best_response_values`, :func:`mixture_cce_gap`,
:func:`lp_cce`, :func:`markov_lp_cce`) compute gaps by backward induction (on the history tree
for hidden mixtures, which are non-Markov) and ground-truth CCEs by linear programming.

Derivation of the learners from the abstract
--------------------------------------------
With a simulator, the previous bound :math:`\tilde O(H^4 S \sum_i A_i / \epsilon^2)`
(Li et al. 2022) runs, at every :math:`(h, s)` in backward order, a no-regret bandit per player on
the stage game :math:`r_h + P_h V_{h+1}`; the average of the played product policies is a stage
CCE up to :math:`\max_i \mathrm{Reg}_i(T)/T`. The abstract's improvement to
:math:`H^4 S \max_i A_i / \epsilon^2` comes from a *gap decomposition* and a bandit whose regret
bound is in terms of the *empirical variance* of its losses. Our reading:

1. Gap decomposition. The CCE gap of the output telescopes over steps into the stage gaps
   :math:`\sum_h \mathbb E[\max_i \mathrm{Reg}_{h,i}(s)/T_{h,s}]` (plus the value-estimation
   error, which the same averages control): a *maximum* over players per state, so the
   stopping rule needs :math:`\max_i` of the players' regret bounds, not their sum.
2. Empirical-variance bandit (:func:`bernstein_exp3`). EXP3 with an importance-weighted
   estimator centred at the running mean loss, implicit exploration, and the learning rate
   :math:`\eta_t = \min(1, \sqrt{\log A / (A + V_t)})`,
   :math:`V_t = \sum_{s<t} (\ell_s - c_s)^2 / (p_s(a_s) + \gamma_s)`; its regret is
   :math:`O(\sqrt{V_T \log A} + A \log A)` with :math:`\mathbb E V_T \approx A \sum_t
   \mathrm{Var}_t`, and :func:`bernstein_regret_bound` is the observable certificate.
3. Horizon. The stage payoffs :math:`r + V_{h+1}(s')` lie in :math:`[0, H - h]` but their
   variances add up to :math:`O(H^2)` over an episode (law of total variance), not
   :math:`H^3`: a variance-aware certificate saves one power of :math:`H`. In the online
   setting, V-learning (Jin et al. 2021; Song et al. 2021; Mao et al. 2022) pays
   :math:`H^6 S \max_i A_i / \epsilon^2` with the bonus :math:`\sqrt{H^3 \iota A / t}`; the
   same variance-aware bonus and bandit give the abstract's :math:`H^5`.

:func:`simulator_cce` and :func:`online_cce` implement both the paper's learners
(``method="paper"``) and the baselines (``"baseline"``: EXP3-IX; online, V-learning's
:math:`H^3` bonus). Each is a pure function of ``(game, key)``: a ``lax.while_loop`` over rounds
(simulator, vmapped over states, a ``lax.scan`` over steps) or episodes (online), jitted once per
game shape (the method is a traced flag), and ``jax.vmap`` runs many seeds at once.

Stopping. Sample counts are only comparable when both learners stop by the same kind of rule
and every stopped output is an :math:`\epsilon`-CCE. With a simulator both stop each stage
when its exact CCE gap against the exact continuation values is at most :math:`\epsilon/H`
(``stop="exact"``, which bounds the output's exact gap by :math:`\epsilon`); the paper's own
certificate (``stop="certificate"``, empirical-Bernstein bounds at confidence
:math:`\delta/(2mHS)` each) is available for the paper's learner and used in the sanity
experiment. Online, both stop when their own certificate *and* the output's exact gap are at
most :math:`\epsilon`.

What is measured (``jaxpapers reproduce P14``)
----------------------------------------------
``players_scaling``: samples to an :math:`\epsilon`-CCE as ``m`` grows with
:math:`\max_i A_i = 2` (per-seed log-log slopes in :math:`\sum_i A_i`, the paper's below 0.5;
the baseline's reported); ``horizon_scaling``: per-seed log-log slopes in ``H`` against the
:math:`H^4 / H^5` rates and V-learning's online slope; ``bandit_variance``: the bandit's regret
per round vs EXP3-IX on low-variance losses (lower) and on Bernoulli losses (no worse, margin
0.01); ``sanity``: known answers (Chicken's welfare-maximising CCE 10.5 with weights
(0, .25, .25, .5), zero gap of LP CCEs, the history-tree gap of a one-component mixture, and
gaps of the certificate-stopped learner on matrix games). Every learned output's exact gap is
recorded. Constants in the certificates and bonuses are ours (the abstract gives rates only);
slopes at these small sizes include log factors.

Limitation (measured on ``players_scaling``; numbers in ``results/P14/NOTES.md``): the centred
importance-weighted estimator, with implicit exploration, shrinks a rarely played arm's estimate
towards the running mean (not towards 0, as EXP3-IX's non-negative losses do), so the bandit loses
EXP3-IX's optimism for unplayed arms and its average play can settle on a non-equilibrium, one
stage then running to the round cap. Making the IX bias optimistic again (shrinking only losses
above the centre) removes that stall but changes the paper's bandit, which then has no regret
analysis here, so it is not made.

References:
    P14, "CCE in multi-player general-sum Markov games" (NeurIPS 2026).
    Li, Chi, Wei, Chen, "Minimax-optimal multi-agent RL in Markov games with a generative
    model", NeurIPS 2022. https://arxiv.org/abs/2208.10458
    Jin, Liu, Wang, Yu, "V-learning -- a simple, efficient, decentralized algorithm for
    multiagent RL", 2021. https://arxiv.org/abs/2110.14555
    Song, Mei, Bai, "When can we learn general-sum Markov games with a large number of
    players sample-efficiently?", ICLR 2022. https://arxiv.org/abs/2110.04184
    Neu, "Explore no more", NeurIPS 2015. https://arxiv.org/abs/1506.03271
"""

from jaxpapers.markov_games._bandits import (
    Bandit,
    BanditRun,
    BanditState,
    bernstein_exp3,
    bernstein_regret_bound,
    exp3_ix,
    run_bandit,
)
from jaxpapers.markov_games._exact import (
    GapResult,
    best_response_values,
    cce_gap,
    mixture_cce_gap,
    policy_values,
    product_policy,
    stage_gap,
)
from jaxpapers.markov_games._game import (
    CHICKEN_PAYOFFS,
    SHAPLEY_PAYOFFS,
    MarkovGame,
    chicken,
    congestion_game,
    congestion_payoffs,
    joint_actions,
    matrix_game,
    random_game,
    shapley_game,
)
from jaxpapers.markov_games._lp import LPResult, lp_cce, markov_lp_cce
from jaxpapers.markov_games._online import online_cce
from jaxpapers.markov_games._simulator import CCEResult, simulator_cce

__all__ = [
    "CHICKEN_PAYOFFS",
    "SHAPLEY_PAYOFFS",
    "Bandit",
    "BanditRun",
    "BanditState",
    "CCEResult",
    "GapResult",
    "LPResult",
    "MarkovGame",
    "bernstein_exp3",
    "bernstein_regret_bound",
    "best_response_values",
    "cce_gap",
    "chicken",
    "congestion_game",
    "congestion_payoffs",
    "exp3_ix",
    "joint_actions",
    "lp_cce",
    "markov_lp_cce",
    "matrix_game",
    "mixture_cce_gap",
    "online_cce",
    "policy_values",
    "product_policy",
    "random_game",
    "run_bandit",
    "shapley_game",
    "simulator_cce",
    "stage_gap",
]
