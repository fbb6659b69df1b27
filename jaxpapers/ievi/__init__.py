r"""P17: Implicit-Euler value iteration (IE-VI), its adaptive variant A-IE-VI, and IE-Dyna.

Derivation
----------
Value iteration :math:`V_{k+1} = T V_k` is the unit-step explicit Euler scheme of the Bellman
residual flow :math:`\dot V = T(V) - V`. Its error obeys :math:`e_{k+1} = \gamma P e_k` for policy
evaluation, so the slow (constant) mode decays as :math:`\gamma^k`: the flow is stiff, and
explicit steps are capped at :math:`h \le 1`, whence VI's :math:`O(1/(1-\gamma))` dependence.

The implicit Euler step of step size :math:`h`,

.. math:: (1 + h) V_{k+1} - h\, T(V_{k+1}) = V_k,

satisfies, since :math:`T` is a :math:`\gamma`-contraction in the sup norm,
:math:`(1 + h)\|e_{k+1}\| \le \|e_k\| + h\gamma \|e_{k+1}\|`, i.e.
:math:`\|e_{k+1}\| \le \|e_k\| / (1 + h(1-\gamma))` for *every* :math:`h > 0` (unconditional
stability). For policy evaluation the factor is attained along the constant vector (eigenvalue 1
of :math:`P_\pi`), which the tests check.

The step needs :math:`T`, i.e. the true model, inside an equation. Iterative defect correction
solves it with an approximate model :math:`\hat P` (operator :math:`\hat T`): round :math:`j`
queries :math:`T(V^{j})` once and solves, in the model only,

.. math:: (1 + h) V^{j+1} - h \hat T(V^{j+1}) = V_k + h\,\big(T(V^{j}) - \hat T(V^{j})\big).

The right-hand correction makes the fixed point of the rounds the exact implicit step, hence
(at the outer level) :math:`V^*` of the *true* model, for any :math:`\hat P`: substituting
:math:`V^{j+1} = V^j = V` gives :math:`(1 + h) V - h T(V) = V_k`. The planning equation is
itself a Bellman equation on :math:`\hat P` with discount :math:`\gamma h/(1+h)` and rewards
:math:`(V_k + h c + h R_a)/(1+h)`, :math:`c = T(V^j) - \hat T(V^j)`, solved exactly by policy
iteration in the model (:func:`implicit_step`). For policy evaluation, with
:math:`\Delta = P_\pi - \hat P_\pi` (rows sum to zero, so :math:`\Delta 1 = 0`) the one-round
error map is
:math:`e \mapsto ((1+h) I - h\gamma \hat P_\pi)^{-1} (I + h\gamma\Delta) e`, of norm
at most :math:`(1 + h\gamma\|\Delta\|) / (1 + h(1-\gamma))`: when the model error is small
against the horizon (:math:`\|\Delta\| \ll 1-\gamma`) a large :math:`h` makes every query
contract the error by about :math:`\gamma\|\Delta\|/(1-\gamma)`, independently of the horizon —
the polylogarithmic regime. The inner rounds alone contract at
:math:`h\gamma\|\Delta\| / (1 + h(1-\gamma))`, below 1 for small enough :math:`h` whatever the
model, which is the "any model" guarantee (``rounds > 1`` runs several rounds per step).

A-IE-VI (:func:`a_ie_vi`) needs no model-error scale: it proposes one-round steps and keeps one
only when the measured Bellman residual contracts at least as fast as VI's guaranteed
:math:`\gamma`; otherwise it shrinks ``h`` and takes plain VI steps for a doubling back-off, so a
useless model costs a logarithmic number of extra queries.

IE-Dyna (:func:`ie_dyna`) is the sample-based tabular variant: the learned count model's backup
replaces the true query and a fixed, biased simulator carries the implicit planning; see
``_dyna.py`` for the exact protocol and its Dyna-Q baseline.

Models
------
An MDP is :class:`jaxpapers.core.mdp.TabularMDP` (re-exported here): ``P[S, A, S']``,
``R[S, A]`` and a discount ``gamma < 1`` (``horizon=None``); building one checks that the rows
of ``P`` are distributions and ``gamma`` in ``[0, 1)``. Approximate models ``model_P`` are
``[S, A, S']`` arrays too.

Reference: "Implicit-Euler Value Iteration" (NeurIPS 2026), paper P17 of this library.
"""

from jaxpapers.core.mdp import TabularMDP
from jaxpapers.ievi._dyna import DynaResult, dyna_q, ie_dyna, samples_to_error
from jaxpapers.ievi._mdp import (
    PolicyIterationResult,
    bellman,
    evaluate_policy,
    greedy_policy,
    optimal_values,
    policy_iteration,
    q_values,
)
from jaxpapers.ievi._planners import (
    CONVERGED,
    MAX_QUERIES,
    NON_FINITE,
    PlannerResult,
    a_ie_vi,
    ie_vi,
    implicit_step,
    plan_in_model,
    value_iteration,
)
from jaxpapers.ievi._problems import (
    estimated_model,
    forest_management,
    gridworld,
    perturbed_model,
    random_mdp,
    row_l1_error,
    sample_counts,
)

__all__ = [
    "CONVERGED",
    "MAX_QUERIES",
    "NON_FINITE",
    "DynaResult",
    "PlannerResult",
    "PolicyIterationResult",
    "TabularMDP",
    "a_ie_vi",
    "bellman",
    "dyna_q",
    "estimated_model",
    "evaluate_policy",
    "forest_management",
    "greedy_policy",
    "gridworld",
    "ie_dyna",
    "ie_vi",
    "implicit_step",
    "optimal_values",
    "perturbed_model",
    "plan_in_model",
    "policy_iteration",
    "q_values",
    "random_mdp",
    "row_l1_error",
    "sample_counts",
    "samples_to_error",
    "value_iteration",
]
