r"""P10 counterfactual Shapley values: natural total effects, their Shapley aggregation, and
tight bounds when the SCM is not identified.

Derivation (from the abstract and its predecessors; the paper's text was not available).
An SCM ``X_i = g_i(X_pa(i), U_i)`` with a law over the noises ``U``; a model ``f``; a unit with
observed ``x``. A counterfactual is computed by abduction (the posterior of ``U`` given
``X = x``), action (``do(X_S = .)``) and prediction (solve the SCM). The *natural total effect*
of a set ``S`` of variables on the unit's prediction is

.. math::

    \mathrm{NTE}_S(x) = f(x) - \mathbb{E}\big[f\big(X^{do(X_S = X'_S)}(U)\big) \mid X = x\big],

where ``X'`` is an independent copy of ``X`` (the *natural* values ``X_S`` would have taken in
another world, as in natural direct / indirect effects) and every descendant of ``S`` responds
(the *total* effect), while the unit keeps its own noise (the *counterfactual*). Counterfactual
Shapley values are the Shapley values of the game ``v(S) = NTE_S(x)``:
``phi_i = sum_{S not containing i} |S|!(n-|S|-1)!/n! (v(S + i) - v(S))``. Since ``v(empty) = 0``
and ``v(all) = f(x) - E f(X)`` they are efficient. In a linear SCM with a linear ``f`` the NTE of
a single cause is its total effect times its deviation from the mean, and, as for Pearl's
``TE = NDE + NIE``, the credit of a mediated chain splits between cause and mediator (tests:
``X_1 -> X_2 = alpha X_1 + e``, ``f = beta X_2`` gives ``phi = (alpha beta x_1 / 2,
beta (x_2 - alpha x_1 / 2))``; the asymmetric values ``(alpha beta x_1, beta (x_2 - alpha x_1))``;
interventional SHAP ``(0, beta x_2)``).

The four desiderata (``_desiderata.py``): efficiency; non-causes get nothing; a variable whose
change alone would change this unit's prediction gets credit (indirect causes included); a
variable that cannot change this unit's prediction, in any world consistent with ``x`` and under
any intervention on the others, gets nothing. Each is computed from the SCM, the model and the
unit by a float64 NumPy counterfactual solver that shares no code with the games (a test makes
every game raise while the checks run), so no method passes one by construction; before
2026-12-04 desiderata 3 and 4 were read off the natural-total-effect game itself, which made
counterfactual Shapley's 4/4 follow from Shapley's dummy axiom. Witness SCMs show that SHAP
(interventional and observational), causal and asymmetric Shapley values and LIME each break at
least one, and counterfactual Shapley values none (``witness_desiderata``). The impossibility
argument: two SCMs with the same observational law and opposite arrows (``equivalent_pair``)
require different credits, so every method reading only the observational law breaks a
desideratum on one of them (``impossibility_pair``, :func:`pair_desiderata`).

Bounds: with only the graph and observed laws, the canonical SCM (each noise picks a response
function) has an unknown joint law ``q`` of response functions; observed laws are linear in ``q``
and, with the abduction normaliser ``P(x)`` and the reference law fixed at their observed values,
so is every counterfactual Shapley value. Minimising and maximising it over ``{q >= 0 : A q = b}``
(``scipy.optimize.linprog``, HiGHS) gives tight bounds; adding interventional laws or
monotonicity shrinks them, and an identified SCM gives a point. The Balke-Pearl instrumental
bounds (``[-0.1946, 0.0054]`` on the vitamin A data) are the reference.

Measured numbers and their history: ``results/P10/NOTES.md``.

Example::

    scm = LinearGaussianSCM(jnp.array([[0.0, 0.0], [2.0, 0.0]]))
    game = counterfactual_game(scm, f, x, background=scm.sample(256, key=key))
    phi = shapley_values(game)                      # exact, 2^n coalitions
    est = shapley_sampling(game, key=key, num_permutations=64)  # est.values, est.stderr

References:
  - Counterfactual Shapley values (NeurIPS 2026).
  - Pearl, "Direct and indirect effects", UAI 2001. https://arxiv.org/abs/1301.2300
  - Balke and Pearl, "Bounds on treatment effects from studies with imperfect compliance",
    JASA 1997.
  - Heskes et al., "Causal Shapley values", NeurIPS 2020. https://arxiv.org/abs/2011.01625
  - Frye et al., "Asymmetric Shapley values", NeurIPS 2020. https://arxiv.org/abs/1910.06358
  - Janzing et al., "Feature relevance quantification in explainable AI: a causal problem",
    AISTATS 2020. https://arxiv.org/abs/1910.13413
  - Lundberg and Lee, "A unified approach to interpreting model predictions", NeurIPS 2017.
  - Ribeiro et al., "Why should I trust you?", KDD 2016. https://arxiv.org/abs/1602.04938
"""

from jaxpapers.cfshap._bounds import Bounds, balke_pearl_bounds, cf_shapley_bounds
from jaxpapers.cfshap._desiderata import (
    DESIDERATA,
    METHODS,
    OBSERVATIONAL_METHODS,
    PairResult,
    Witness,
    attributions,
    check_desiderata,
    desiderata_table,
    equivalent_pair,
    pair_desiderata,
    witnesses,
)
from jaxpapers.cfshap._games import (
    CausalGame,
    CounterfactualGame,
    InterventionalGame,
    ObservationalGame,
    TableModel,
    causal_game,
    counterfactual_game,
    interventional_game,
    mediation_effects,
    natural_total_effect,
    observational_game,
    tabulate,
)
from jaxpapers.cfshap._lime import lime_values
from jaxpapers.cfshap._scm import (
    DiscreteSCM,
    LinearGaussianSCM,
    Worlds,
    monotone_mask,
    response_functions,
    topological_order,
)
from jaxpapers.cfshap._shapley import (
    ShapleyEstimate,
    asymmetric_shapley_values,
    causal_orders,
    coalition_masks,
    game_values,
    shapley_sampling,
    shapley_values,
)

__all__ = [
    "DESIDERATA",
    "METHODS",
    "OBSERVATIONAL_METHODS",
    "Bounds",
    "CausalGame",
    "CounterfactualGame",
    "DiscreteSCM",
    "InterventionalGame",
    "LinearGaussianSCM",
    "ObservationalGame",
    "PairResult",
    "ShapleyEstimate",
    "TableModel",
    "Witness",
    "Worlds",
    "asymmetric_shapley_values",
    "attributions",
    "balke_pearl_bounds",
    "causal_game",
    "causal_orders",
    "cf_shapley_bounds",
    "check_desiderata",
    "coalition_masks",
    "counterfactual_game",
    "desiderata_table",
    "equivalent_pair",
    "game_values",
    "interventional_game",
    "lime_values",
    "mediation_effects",
    "monotone_mask",
    "natural_total_effect",
    "observational_game",
    "pair_desiderata",
    "response_functions",
    "shapley_sampling",
    "shapley_values",
    "tabulate",
    "topological_order",
    "witnesses",
]
