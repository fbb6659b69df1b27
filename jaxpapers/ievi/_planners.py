"""Value iteration, Implicit-Euler value iteration (IE-VI) and its adaptive variant (A-IE-VI).

Each planner counts *true-model queries*: applications of the true Bellman operator, each of which
touches every transition of the true model ``P`` (one sweep). Work done in the approximate model
``P_hat`` is counted separately as ``model_solves`` (policy-iteration evaluations in ``P_hat``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxpapers.core.checks import check_finite, check_int, check_positive, check_range
from jaxpapers.core.mdp import TabularMDP, check_transitions
from jaxpapers.ievi._mdp import (
    bellman,
    check_mdp,
    check_policy,
    check_values,
    evaluate_policy,
    greedy_policy,
    policy_iteration,
    q_values,
)

#: ``PlannerResult.status`` codes and their meaning.
CONVERGED, MAX_QUERIES, NON_FINITE = 0, 1, 2
REASONS = ("converged", "stopped at max_queries", "stopped: non-finite values (NaN or inf)")


class PlannerResult(NamedTuple):
    """Output of every planner.

    Attributes:
      V: ``[S]`` final values.
      queries: true-model queries (Bellman sweeps in ``P``) spent.
      model_solves: policy evaluations (linear solves) done in the approximate model.
      residual: sup-norm Bellman residual ``||T V_last - V_last||`` of the last queried iterate.
      converged: whether the stopping rule was met within ``max_queries``.
      h: final step size (constant for IE-VI; adapted by A-IE-VI; ``inf`` for VI).
      rejected: candidate steps A-IE-VI rejected (0 for the others).
      status: why the loop stopped: ``CONVERGED`` (0), ``MAX_QUERIES`` (1) or ``NON_FINITE`` (2,
        a NaN or inf appeared: the loop stops at once instead of running to ``max_queries``).
    """

    V: Float[Array, " S"]
    queries: Int[Array, ""]
    model_solves: Int[Array, ""]
    residual: Float[Array, ""]
    converged: Bool[Array, ""]
    h: Float[Array, ""]
    rejected: Int[Array, ""]
    status: Int[Array, ""]

    @property
    def reason(self) -> str:
        """``status`` in words (needs a concrete result, i.e. outside ``jax.jit``)."""
        return REASONS[int(self.status)]


def _status(converged, residual):
    return jnp.where(
        converged,
        CONVERGED,
        jnp.where(jnp.isfinite(residual), MAX_QUERIES, NON_FINITE),
    ).astype(jnp.int32)


def _check_common(mdp: TabularMDP, V0, policy, tol, max_queries, v_star) -> None:
    """Eager checks: every value check is skipped for traced arguments (shapes still checked)."""
    check_mdp(mdp)
    if V0 is not None:
        check_values(mdp, V0, "V0")
        check_finite("V0", V0)
    if v_star is not None:
        check_values(mdp, v_star, "v_star")
        check_finite("v_star", v_star)
    if policy is not None:
        check_policy(mdp, policy)
    check_positive("tol", tol)
    check_int("max_queries", max_queries, minimum=1)


def _check_model(mdp: TabularMDP, model_P) -> None:
    check_transitions(model_P, "model_P")
    if np.shape(model_P) != np.shape(mdp.P):
        raise ValueError(
            f"model_P must have the shape of mdp.P {np.shape(mdp.P)}; got {np.shape(model_P)}"
        )


def _initial_values(mdp: TabularMDP, V0):
    return jnp.zeros(mdp.num_states, mdp.R.dtype) if V0 is None else jnp.asarray(V0, mdp.R.dtype)


def _stop_error(V, v_star, tol):
    """True while the oracle error ``||V - v_star||`` exceeds ``tol`` (always, without oracle)."""
    if v_star is None:
        return jnp.bool_(True)
    return jnp.max(jnp.abs(V - v_star)) > tol


def _not_measured(dtype):
    """Residual before the first query: finite (a non-finite residual stops the loop) and huge."""
    return jnp.asarray(jnp.finfo(dtype).max, dtype)


def _running(done, queries, max_queries, residual, V, v_star, tol):
    """Loop condition shared by the planners: stop when done, out of budget or non-finite."""
    return ~done & (queries < max_queries) & jnp.isfinite(residual) & _stop_error(V, v_star, tol)


def implicit_step(
    mdp: TabularMDP,
    model_P: Float[Array, "S A S"],
    anchor: Float[Array, " S"],
    V: Float[Array, " S"],
    TV: Float[Array, " S"],
    h: Float[Array, ""] | float,
    policy: Float[Array, "S A"] | None = None,
    *,
    max_policy_iterations: int = 50,
) -> tuple[Float[Array, " S"], Int[Array, ""]]:
    r"""One defect-correction round of the implicit-Euler step, planned in the model only.

    Solves for :math:`W`

    .. math:: (1 + h)\,W - h\,\hat T(W) = V_k + h\,\big(T(V) - \hat T(V)\big),

    where :math:`V_k` is ``anchor`` (the start of the implicit step), :math:`V` the current
    iterate and ``TV`` its true backup :math:`T(V)` (already queried). With
    :math:`\alpha = 1/(1+h)`, :math:`\beta = h/(1+h)` this is the Bellman equation of an MDP on
    :math:`\hat P` with discount :math:`\beta\gamma` and rewards
    :math:`\alpha V_k + \beta (c + R_a)`, :math:`c = T(V) - \hat T(V)`, solved exactly by policy
    iteration (control) or one linear solve (policy evaluation).

    Returns:
      ``(W, model_solves)``.
    """
    check_mdp(mdp, values=False)
    _check_model(mdp, model_P)
    for name, v in (("anchor", anchor), ("V", V), ("TV", TV)):
        check_values(mdp, v, name)
        check_finite(name, v)
    check_positive("h", h)
    check_int("max_policy_iterations", max_policy_iterations, minimum=1)
    model = TabularMDP(model_P, mdp.R, gamma=mdp.gamma)
    h = jnp.asarray(h, dtype=V.dtype)
    alpha, beta = 1.0 / (1.0 + h), h / (1.0 + h)
    correction = TV - bellman(model, V, policy)
    reward = (alpha * anchor + beta * correction)[:, None] + beta * mdp.R
    inner = TabularMDP(model_P, reward, gamma=beta * mdp.gamma)
    if policy is not None:
        return evaluate_policy(inner, policy), jnp.int32(1)
    start = greedy_policy(q_values(inner, V))
    result = policy_iteration(inner, start, max_iterations=max_policy_iterations)
    return result.V, result.iterations


def value_iteration(
    mdp: TabularMDP,
    *,
    V0: Float[Array, " S"] | None = None,
    policy: Float[Array, "S A"] | None = None,
    tol: float | Float[Array, ""] = 1e-6,
    max_queries: int | Int[Array, ""] = 100_000,
    v_star: Float[Array, " S"] | None = None,
) -> PlannerResult:
    r"""Value iteration :math:`V_{k+1} = T V_k`: the unit-step explicit Euler scheme of
    :math:`\dot V = T(V) - V`. One true-model query per iteration.

    Stops when ``||V - v_star|| <= tol`` if ``v_star`` is given, and in any case once the
    certified bound :math:`\gamma \|TV - V\| / (1 - \gamma) \le` ``tol`` holds. Compiled
    inside (``tol`` and ``max_queries`` may be traced): eager calls with new values of them do not
    recompile.

    Args:
      mdp: the MDP.
      V0: ``[S]`` initial values (default zeros).
      policy: ``[S, A]`` policy to evaluate; ``None`` for control.
      tol: sup-norm error target, ``> 0``.
      max_queries: budget of Bellman sweeps.
      v_star: ``[S]`` oracle values for an exact stopping rule (experiments).

    Returns:
      :class:`PlannerResult`; ``status`` says why it stopped.

    Raises:
      ValueError: a wrong shape, a non-stochastic ``P``, a non-finite input, ``tol <= 0`` or
        ``max_queries < 1`` (values are checked when concrete; under ``jit`` a non-finite input
        ends the loop at once with ``status == NON_FINITE``).

    Examples:
        >>> import jax
        >>> from jaxpapers import ievi
        >>> mdp = ievi.gridworld(4, 0.9, slip=0.1)
        >>> res = ievi.value_iteration(mdp, tol=1e-4)
        >>> bool(res.converged), res.reason, 100 < int(res.queries) < 120
        (True, 'converged', True)
    """
    _check_common(mdp, V0, policy, tol, max_queries, v_star)
    return _value_iteration(mdp, _initial_values(mdp, V0), policy, tol, max_queries, v_star)


@jax.jit
def _value_iteration(mdp, V0, policy, tol, max_queries, v_star) -> PlannerResult:
    def cond(s):
        V, q, r, done = s
        return _running(done, q, max_queries, r, V, v_star, tol)

    def body(s):
        V, q, _, _ = s
        TV = bellman(mdp, V, policy)
        r = jnp.max(jnp.abs(TV - V))
        done = mdp.gamma * r <= tol * (1.0 - mdp.gamma)
        return TV, q + 1, r, done

    init = (V0, jnp.int32(0), _not_measured(V0.dtype), jnp.bool_(False))
    V, q, r, done = jax.lax.while_loop(cond, body, init)
    converged = done | ~_stop_error(V, v_star, tol)
    inf = jnp.asarray(jnp.inf, V.dtype)
    return PlannerResult(V, q, jnp.int32(0), r, converged, inf, jnp.int32(0), _status(converged, r))


class _IEState(NamedTuple):
    anchor: jax.Array
    V: jax.Array
    round: jax.Array
    queries: jax.Array
    solves: jax.Array
    residual: jax.Array
    done: jax.Array


def ie_vi(
    mdp: TabularMDP,
    model_P: Float[Array, "S A S"],
    *,
    h: float | Float[Array, ""],
    V0: Float[Array, " S"] | None = None,
    policy: Float[Array, "S A"] | None = None,
    rounds: int | Int[Array, ""] = 1,
    tol: float | Float[Array, ""] = 1e-6,
    max_queries: int | Int[Array, ""] = 100_000,
    v_star: Float[Array, " S"] | None = None,
) -> PlannerResult:
    r"""Implicit-Euler value iteration with iterative defect correction in an approximate model.

    Each implicit step :math:`(1 + h) V_{k+1} - h T(V_{k+1}) = V_k` is solved approximately by
    ``rounds`` defect-correction rounds; each round queries the true model once (:math:`T(V)`)
    and plans in ``model_P`` (:func:`implicit_step`). With ``rounds=1`` the outer and inner
    iterations merge into one query per step.

    Choosing ``h``: with an exact model one query contracts the error by
    :math:`1 / (1 + h(1 - \gamma))`; a model with row-wise L1 error :math:`\delta` adds
    :math:`h\gamma\delta / (1 + h(1-\gamma))`, so one round contracts by about

    .. math:: \rho(h) = \frac{1 + h\gamma\delta}{1 + h(1 - \gamma)},

    which is below 1 for every ``h`` when :math:`\gamma\delta < 1 - \gamma` and tends to
    :math:`\gamma\delta / (1-\gamma)` as ``h`` grows. Take ``h = c / (1 - gamma)`` with
    ``c`` of 10-100 when the model is that accurate (``h = 1`` at ``gamma >= 0.99`` is barely
    better than VI: thousands of queries). When :math:`\delta` is unknown or larger, use
    :func:`a_ie_vi`, which tunes ``h`` from measured residuals.

    Args:
      mdp: the true MDP (its ``P`` is what a query touches).
      model_P: ``[S, A, S]`` approximate transition model :math:`\hat P`.
      h: step size, ``> 0``.
      V0: ``[S]`` initial values (default zeros).
      policy: ``[S, A]`` policy to evaluate; ``None`` for control.
      rounds: defect-correction rounds per implicit step (``>= 1``).
      tol, max_queries, v_star: stopping rule as in :func:`value_iteration` (certified bound
        :math:`\|TV - V\| / (1 - \gamma) \le` ``tol``). Every knob may be traced.

    Returns:
      :class:`PlannerResult`.

    Examples:
        >>> import jax
        >>> from jaxpapers import ievi
        >>> mdp = ievi.gridworld(4, 0.9, slip=0.1)
        >>> model = ievi.perturbed_model(mdp.P, 0.001, key=jax.random.key(0))
        >>> res = ievi.ie_vi(mdp, model, h=100 / (1 - 0.9), tol=1e-3)
        >>> bool(res.converged), int(res.queries) < 10
        (True, True)
    """
    _check_common(mdp, V0, policy, tol, max_queries, v_star)
    _check_model(mdp, model_P)
    check_positive("h", h)
    check_int("rounds", rounds, minimum=1)
    V0 = _initial_values(mdp, V0)
    return _ie_vi(mdp, model_P, h, V0, policy, rounds, tol, max_queries, v_star)


@jax.jit
def _ie_vi(mdp, model_P, h, V0, policy, rounds, tol, max_queries, v_star) -> PlannerResult:
    h = jnp.asarray(h, V0.dtype)

    def cond(s: _IEState):
        return _running(s.done, s.queries, max_queries, s.residual, s.V, v_star, tol)

    def body(s: _IEState):
        TV = bellman(mdp, s.V, policy)
        r = jnp.max(jnp.abs(TV - s.V))
        done = r <= tol * (1.0 - mdp.gamma)
        W, n = implicit_step(mdp, model_P, s.anchor, s.V, TV, h, policy)
        W = jnp.where(done, s.V, W)
        next_round = (s.round + 1) % rounds
        anchor = jnp.where(next_round == 0, W, s.anchor)
        return _IEState(anchor, W, next_round, s.queries + 1, s.solves + n, r, done)

    big = _not_measured(V0.dtype)
    init = _IEState(V0, V0, jnp.int32(0), jnp.int32(0), jnp.int32(0), big, jnp.bool_(False))
    s = jax.lax.while_loop(cond, body, init)
    converged = s.done | ~_stop_error(s.V, v_star, tol)
    status = _status(converged, s.residual)
    return PlannerResult(s.V, s.queries, s.solves, s.residual, converged, h, jnp.int32(0), status)


class _AState(NamedTuple):
    V: jax.Array
    TV: jax.Array
    residual: jax.Array
    h: jax.Array
    vi_left: jax.Array
    backoff: jax.Array
    queries: jax.Array
    solves: jax.Array
    rejected: jax.Array
    done: jax.Array


def a_ie_vi(
    mdp: TabularMDP,
    model_P: Float[Array, "S A S"],
    *,
    V0: Float[Array, " S"] | None = None,
    policy: Float[Array, "S A"] | None = None,
    h0: float | Float[Array, ""] | None = None,
    grow: float | Float[Array, ""] = 2.0,
    shrink: float | Float[Array, ""] = 4.0,
    h_max: float | Float[Array, ""] = 1e12,
    tol: float | Float[Array, ""] = 1e-6,
    max_queries: int | Int[Array, ""] = 100_000,
    v_star: Float[Array, " S"] | None = None,
) -> PlannerResult:
    r"""Adaptive IE-VI: the step size is tuned from measured residuals, with no model-error scale.

    Each iteration proposes the one-round implicit step :math:`W` from the current iterate
    :math:`V` (planning in ``model_P``) and queries :math:`T(W)`. The candidate is accepted when
    its residual contracts at least as fast as value iteration's guarantee,
    :math:`\|T W - W\| \le \gamma \|T V - V\|`, and ``h`` then grows by ``grow``. Otherwise
    ``h`` shrinks by ``shrink`` and the method takes plain VI steps (:math:`V \leftarrow T V`, whose
    residual contracts by :math:`\gamma` for any MDP) for a back-off period that doubles after
    each consecutive rejection. Hence a useless model costs at most a logarithmic number of
    wasted queries on top of VI, while a useful one drives ``h`` up and the rate towards
    :math:`1/(1 + h(1-\gamma))`.

    Args:
      h0: initial step (default :math:`1/(1-\gamma)`: the horizon, known from ``gamma`` alone).
      grow, shrink: step multipliers after an accepted / rejected candidate (``grow >= 1``,
        ``shrink > 1``).
      h_max: cap on ``h``.
      Other arguments as in :func:`ie_vi`; every knob may be traced.

    Examples:
        >>> import jax
        >>> from jaxpapers import ievi
        >>> mdp = ievi.gridworld(4, 0.9, slip=0.1)
        >>> model = ievi.perturbed_model(mdp.P, 0.05, key=jax.random.key(0))
        >>> res = ievi.a_ie_vi(mdp, model, tol=1e-3)
        >>> bool(res.converged), res.reason
        (True, 'converged')
    """
    _check_common(mdp, V0, policy, tol, max_queries, v_star)
    _check_model(mdp, model_P)
    if h0 is not None:
        check_positive("h0", h0)
    check_range("grow", grow, 1.0)
    check_range("shrink", shrink, 1.0, low_open=True)
    check_range("h_max", h_max, 0.0, low_open=True)
    V0 = _initial_values(mdp, V0)
    h_init = 1.0 / (1.0 - mdp.gamma) if h0 is None else h0
    return _a_ie_vi(mdp, model_P, V0, policy, h_init, grow, shrink, h_max, tol, max_queries, v_star)


@jax.jit
def _a_ie_vi(
    mdp, model_P, V0, policy, h_init, grow, shrink, h_max, tol, max_queries, v_star
) -> PlannerResult:
    def certified(r):
        return r <= tol * (1.0 - mdp.gamma)

    def cond(s: _AState):
        return _running(s.done, s.queries, max_queries, s.residual, s.V, v_star, tol)

    def body(s: _AState):
        use_vi = s.vi_left > 0
        W, n = jax.lax.cond(
            use_vi,
            lambda: (s.TV, jnp.int32(0)),
            lambda: implicit_step(mdp, model_P, s.V, s.V, s.TV, s.h, policy),
        )
        TW = bellman(mdp, W, policy)
        rW = jnp.max(jnp.abs(TW - W))
        # A non-finite candidate is accepted so that the loop sees it and stops (NON_FINITE).
        accept = use_vi | (rW <= mdp.gamma * s.residual) | ~jnp.isfinite(rW)
        grown = jnp.minimum(s.h * grow, h_max)
        h = jnp.where(use_vi, s.h, jnp.where(accept, grown, s.h / shrink))
        backoff = jnp.where(use_vi, s.backoff, jnp.where(accept, 1, 2 * s.backoff))
        vi_left = jnp.where(use_vi, s.vi_left - 1, jnp.where(accept, 0, s.backoff))
        V = jnp.where(accept, W, s.V)
        TV = jnp.where(accept, TW, s.TV)
        r = jnp.where(accept, rW, s.residual)
        return _AState(
            V,
            TV,
            r,
            h,
            vi_left,
            backoff,
            s.queries + 1,
            s.solves + n,
            s.rejected + (~accept).astype(jnp.int32),
            certified(r),
        )

    TV0 = bellman(mdp, V0, policy)
    r0 = jnp.max(jnp.abs(TV0 - V0))
    init = _AState(
        V0,
        TV0,
        r0,
        jnp.asarray(h_init, V0.dtype),
        jnp.int32(0),
        jnp.int32(1),
        jnp.int32(1),
        jnp.int32(0),
        jnp.int32(0),
        certified(r0),
    )
    s = jax.lax.while_loop(cond, body, init)
    converged = s.done | ~_stop_error(s.V, v_star, tol)
    status = _status(converged, s.residual)
    return PlannerResult(s.V, s.queries, s.solves, s.residual, converged, s.h, s.rejected, status)


def plan_in_model(
    mdp: TabularMDP, model_P: Float[Array, "S A S"], policy: Float[Array, "S A"] | None = None
) -> Float[Array, " S"]:
    """Model-based planning baseline: the exact fixed point of the *approximate* model."""
    check_mdp(mdp)
    _check_model(mdp, model_P)
    model = TabularMDP(model_P, mdp.R, gamma=mdp.gamma)
    if policy is not None:
        return evaluate_policy(model, policy)
    return policy_iteration(model).V
