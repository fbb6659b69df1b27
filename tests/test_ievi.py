"""P17 IE-VI: fixed points against float64 NumPy, the contraction factor, any-model convergence,
A-IE-VI's fallback, IE-Dyna, jit/vmap/grad, and bad inputs."""

from __future__ import annotations

import chex
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_trees_close

from jaxpapers import ievi
from jaxpapers.core.pytrees import stack_trees
from jaxpapers.ievi import (
    TabularMDP,
    a_ie_vi,
    evaluate_policy,
    ie_vi,
    implicit_step,
    optimal_values,
    perturbed_model,
    value_iteration,
)


def _np_mdp(rng, S=12, A=3, gamma=0.9):
    """``P[S, A, S']`` (rows drawn action-major), ``R[S, A]`` and the discount."""
    P = rng.dirichlet(np.ones(S), size=(A, S)).transpose(1, 0, 2)
    P /= P.sum(-1, keepdims=True)
    R = rng.uniform(size=(S, A))
    return P, R, gamma


def _np_value_iteration(P, R, gamma, sweeps=4000):
    V = np.zeros(P.shape[0])
    for _ in range(sweeps):
        V = np.max(R + gamma * np.einsum("sat,t->sa", P, V), axis=1)
    return V


def _mdp(P, R, gamma):
    return TabularMDP(jnp.asarray(P), jnp.asarray(R), gamma=gamma)


def test_policy_evaluation_matches_numpy_linear_solve(x64, rng):
    P, R, gamma = _np_mdp(rng)
    pi = rng.dirichlet(np.ones(3), size=12)
    P_pi = np.einsum("sa,sat->st", pi, P)
    expected = np.linalg.solve(np.eye(12) - gamma * P_pi, (pi * R).sum(1))
    mdp = _mdp(P, R, gamma)
    np.testing.assert_allclose(evaluate_policy(mdp, jnp.asarray(pi)), expected, rtol=1e-12)
    model = perturbed_model(mdp.P, 0.5, key=jax.random.key(1))
    for res in (
        value_iteration(mdp, policy=jnp.asarray(pi), tol=1e-10),
        ie_vi(mdp, model, h=5.0, policy=jnp.asarray(pi), tol=1e-10),
        a_ie_vi(mdp, model, policy=jnp.asarray(pi), tol=1e-10),
    ):
        assert bool(res.converged)
        np.testing.assert_allclose(res.V, expected, atol=1e-9)


def test_control_fixed_points_match_numpy_value_iteration(x64, rng):
    P, R, gamma = _np_mdp(rng, gamma=0.95)
    expected = _np_value_iteration(P, R, gamma)
    mdp = _mdp(P, R, gamma)
    np.testing.assert_allclose(optimal_values(mdp), expected, atol=1e-10)
    np.testing.assert_allclose(value_iteration(mdp, tol=1e-10).V, expected, atol=1e-9)
    wrong = perturbed_model(mdp.P, 1.5, key=jax.random.key(2))
    for res in (ie_vi(mdp, wrong, h=20.0, tol=1e-10), a_ie_vi(mdp, wrong, tol=1e-10)):
        assert bool(res.converged)
        np.testing.assert_allclose(res.V, expected, atol=1e-9)


@pytest.mark.parametrize("h", [0.5, 3.0, 40.0])
def test_exact_implicit_step_contracts_at_the_predicted_rate(x64, rng, h):
    P, R, gamma = _np_mdp(rng, S=10, A=2, gamma=0.97)
    mdp = _mdp(P, R, gamma)
    pi = jax.nn.one_hot(jnp.asarray(rng.integers(0, 2, size=10)), 2, dtype=jnp.float64)
    v_pi = np.asarray(evaluate_policy(mdp, pi))
    rate = 1.0 / (1.0 + h * (1.0 - gamma))

    def error_ratios(V0, steps=6):
        V, errors = jnp.asarray(V0), []
        for _ in range(steps):
            TV = ievi.bellman(mdp, V, pi)
            V, _ = implicit_step(mdp, mdp.P, V, V, TV, h, pi)  # model = P: exact implicit step
            errors.append(np.max(np.abs(np.asarray(V) - v_pi)))
        return np.array(errors[1:]) / np.array(errors[:-1])

    # Along the constant vector (eigenvalue 1 of P_pi) the factor is attained exactly ...
    np.testing.assert_allclose(error_ratios(v_pi + 5.0), rate, rtol=1e-9)
    # ... and from any start it is a sup-norm bound at every step.
    assert np.all(error_ratios(v_pi + 5.0 * rng.normal(size=10)) <= rate * (1 + 1e-9))


def test_ie_vi_needs_far_fewer_queries_than_vi_with_a_small_error_model(x64):
    gamma = 0.999
    mdp = ievi.gridworld(6, gamma, slip=0.2)
    v_star = optimal_values(mdp)
    # A model with row error <= 0.1 (1 - gamma): the true rows mixed with NumPy Dirichlet rows.
    rows = np.random.default_rng(0).dirichlet(np.ones(mdp.num_states), mdp.P.shape[:-1])
    model = (1 - 0.05 * (1 - gamma)) * mdp.P + 0.05 * (1 - gamma) * jnp.asarray(rows)
    vi = value_iteration(mdp, v_star=v_star, max_queries=100_000)
    ie = ie_vi(mdp, model, h=100 / (1 - gamma), v_star=v_star)
    # VI's count is the closed form log(tol / |V*|) / log(gamma) up to a few sweeps.
    predicted = np.log(1e-6 / float(jnp.max(jnp.abs(v_star)))) / np.log(gamma)
    assert abs(int(vi.queries) - predicted) < 0.02 * predicted
    assert bool(ie.converged) and int(ie.queries) * 20 <= int(vi.queries)
    assert float(jnp.max(jnp.abs(ie.V - v_star))) <= 1e-6


def test_a_ie_vi_falls_back_to_vi_with_a_useless_model(x64):
    gamma = 0.95
    mdp = ievi.gridworld(5, gamma, slip=0.1)
    v_star = optimal_values(mdp)
    # A model in which every action teleports to the start: no information about P at all.
    teleport = jnp.zeros_like(mdp.P).at[:, :, 0].set(1.0)
    vi = value_iteration(mdp, v_star=v_star)
    ad = a_ie_vi(mdp, teleport, v_star=v_star)
    assert bool(ad.converged)
    assert float(jnp.max(jnp.abs(ad.V - v_star))) <= 1e-6
    # Rejected proposals cost extra queries, but only logarithmically many.
    assert int(ad.queries) <= int(vi.queries) + 2 * int(np.log2(int(vi.queries)) + 1) ** 2
    planned = ievi.plan_in_model(mdp, teleport)
    assert float(jnp.max(jnp.abs(planned - v_star))) > 1.0  # the model alone is biased


def test_vmap_and_jit_agree_with_a_loop(x64, rng):
    # Four random MDPs and models (row error <= 0.2) drawn by NumPy: the test is about ie_vi under
    # vmap and jit, and NumPy's draws spare compiling the Dirichlet sampler at batched shapes.
    mdps = stack_trees([_mdp(*_np_mdp(rng, S=15, A=3)) for _ in range(4)])
    noise = rng.dirichlet(np.ones(15), size=(4, 15, 3))
    models = jnp.asarray(0.9 * np.asarray(mdps.P) + 0.1 * noise)
    batched = jax.jit(jax.vmap(lambda m, p: ie_vi(m, p, h=10.0, tol=1e-9)))(mdps, models)
    for i in range(4):
        one = ie_vi(jax.tree.map(lambda x: x[i], mdps), models[i], h=10.0, tol=1e-9)
        np.testing.assert_allclose(batched.V[i], one.V, atol=1e-12)
        assert int(batched.queries[i]) == int(one.queries)


def test_value_gradient_wrt_rewards_is_the_resolvent(x64, rng):
    P, R, gamma = _np_mdp(rng, S=8, A=2)
    mdp = _mdp(P, R, gamma)
    pi_star = ievi.policy_iteration(mdp).policy
    jac = jax.jacfwd(lambda r: optimal_values(TabularMDP(mdp.P, r, gamma=mdp.gamma)))(mdp.R)
    P_pi = np.einsum("sa,sat->st", np.asarray(pi_star), P)
    resolvent = np.linalg.inv(np.eye(8) - gamma * P_pi)
    expected = resolvent[:, :, None] * np.asarray(pi_star)[None, :, :]
    np.testing.assert_allclose(jac, expected, atol=1e-10)
    grad = jax.grad(
        lambda r: evaluate_policy(TabularMDP(mdp.P, r, gamma=mdp.gamma), pi_star).sum()
    )(mdp.R)
    np.testing.assert_allclose(grad, expected.sum(0), atol=1e-10)


def test_ie_dyna_reaches_the_true_values_and_beats_dyna_q(x64):
    gamma = 0.95
    mdp = ievi.gridworld(4, gamma, slip=0.2)
    v_star = optimal_values(mdp)
    sim = perturbed_model(mdp.P, 0.3, key=jax.random.key(1))
    k = jax.random.key(9)
    ie = ievi.ie_dyna(mdp, sim, v_star, key=k, rounds=400, h=100 / (1 - gamma))
    dq = ievi.dyna_q(mdp, v_star, key=k, rounds=400)
    scale = float(jnp.max(jnp.abs(v_star)))
    assert float(ie.errors[-1]) < 0.03 * scale
    target = 0.1 * scale
    assert float(ievi.samples_to_error(ie, target)) < float(ievi.samples_to_error(dq, target))
    assert int(ie.samples[-1]) == 400 * 16 * 4


def test_samples_to_error_reads_the_last_crossing():
    res = ievi.DynaResult(jnp.zeros(2), jnp.array([5.0, 0.5, 2.0, 0.4, 0.3]), jnp.arange(1, 6) * 10)
    assert float(ievi.samples_to_error(res, 1.0)) == 40.0
    assert float(ievi.samples_to_error(res, 0.1)) == np.inf
    assert float(ievi.samples_to_error(res, 10.0)) == 10.0


def test_perturbed_model_has_the_requested_row_error(x64, rng):
    P, _, _ = _np_mdp(rng)  # the shape of the other tests' models: one compiled sampler
    P_hat = perturbed_model(jnp.asarray(P), 0.3, key=jax.random.key(0))
    np.testing.assert_allclose(np.abs(P_hat - P).sum(-1), 0.3, rtol=1e-9)
    np.testing.assert_allclose(P_hat.sum(-1), 1.0, atol=1e-12)
    assert float(ievi.row_l1_error(jnp.asarray(P), P_hat)) == pytest.approx(0.3)


def test_test_problems_are_valid_mdps(x64):
    for mdp in (
        ievi.gridworld(4, 0.9),
        ievi.forest_management(6, 0.9),
        ievi.random_mdp(7, 2, 0.9, key=jax.random.key(0)),
    ):
        TabularMDP(mdp.P, mdp.R, gamma=float(mdp.gamma))
        np.testing.assert_allclose(
            optimal_values(mdp),
            _np_value_iteration(np.asarray(mdp.P), np.asarray(mdp.R), 0.9),
            atol=1e-9,
        )
    counts = ievi.sample_counts(ievi.gridworld(3, 0.9).P, 50, key=jax.random.key(0))
    np.testing.assert_allclose(counts.sum(-1), 50.0)


def test_bad_inputs_raise_clear_errors(rng):
    P, R, gamma = _np_mdp(rng, S=5, A=2)
    with pytest.raises(ValueError, match="rows of P must sum to 1"):
        TabularMDP(P * 1.1, R, gamma=gamma)
    with pytest.raises(ValueError, match=r"gamma=1.0; expected a finite value in \[0, 1\)"):
        TabularMDP(P, R, gamma=1.0)
    with pytest.raises(ValueError, match=r"gamma=-0.1; expected a finite value in \[0, 1\)"):
        TabularMDP(P, R, gamma=-0.1)
    with pytest.raises(ValueError, match=r"R has shape \(2, 5\); expected \[5, 2\]"):
        TabularMDP(P, R.T, gamma=gamma)
    with pytest.raises(ValueError, match=r"P has shape \(5, 2, 4\); expected \[S, A, S\]"):
        TabularMDP(P[:, :, :4], R, gamma=gamma)
    mdp = _mdp(P, R, gamma)
    with pytest.raises(ValueError, match=r"h=0.0; expected a finite value > 0"):
        ie_vi(mdp, mdp.P, h=0.0)
    with pytest.raises(ValueError, match=r"h=-1.0; expected a finite value > 0"):
        ie_vi(mdp, mdp.P, h=-1.0)
    with pytest.raises(ValueError, match="model_P must have the shape of mdp.P"):
        ie_vi(mdp, mdp.P[:, :1], h=1.0)
    with pytest.raises(ValueError, match="rows of model_P must sum to 1"):
        a_ie_vi(mdp, mdp.P * 0.5)
    with pytest.raises(ValueError, match=r"V0 must have shape \[S\] = \[5\]"):
        value_iteration(mdp, V0=jnp.zeros(4))
    with pytest.raises(ValueError, match=r"policy must have shape \[S, A\]"):
        value_iteration(mdp, policy=jnp.ones((5, 3)) / 3)
    with pytest.raises(ValueError, match=r"tol=0.0; expected a finite value > 0"):
        value_iteration(mdp, tol=0.0)
    with pytest.raises(ValueError, match=r"l1_error=3.0; expected a finite value in \[0, 2\]"):
        perturbed_model(mdp.P, 3.0, key=jax.random.key(0))


def test_non_finite_inputs_stop_at_once(rng):
    """Eagerly a non-finite input is a ValueError; under jit the loop ends after one query with
    status NON_FINITE instead of running to max_queries."""
    P, R, gamma = _np_mdp(rng, S=6, A=2)
    mdp = _mdp(P, R, gamma)
    bad_R = eqx.tree_at(lambda m: m.R, mdp, mdp.R.at[2, 1].set(jnp.nan))  # skips the checks
    with pytest.raises(ValueError, match=r"mdp.R of shape \(6, 2\) holds 1 non-finite"):
        value_iteration(bad_R)
    with pytest.raises(ValueError, match="V0 of shape"):
        ie_vi(mdp, mdp.P, h=1.0, V0=jnp.full(6, jnp.inf))
    with pytest.raises(ValueError, match="model_P must hold finite"):
        a_ie_vi(mdp, mdp.P.at[0, 0, 0].set(jnp.nan))
    # float32 values ~ 8: a certified 1e-3 is reachable, 1e-6 is not.
    jitted = {
        "vi": jax.jit(lambda m: value_iteration(m, tol=1e-3, max_queries=10_000)),
        "ie": jax.jit(lambda m: ie_vi(m, mdp.P, h=10.0, tol=1e-3, max_queries=10_000)),
        "aie": jax.jit(lambda m: a_ie_vi(m, mdp.P, tol=1e-3, max_queries=10_000)),
    }
    for name, run in jitted.items():
        res = run(bad_R)
        assert int(res.status) == ievi.NON_FINITE, name
        assert not bool(res.converged) and int(res.queries) <= 2, (name, int(res.queries))
        assert res.reason.startswith("stopped: non-finite")
        ok = run(mdp)
        assert int(ok.status) == ievi.CONVERGED and bool(ok.converged), name


def test_knobs_may_be_traced_and_eager_calls_compile_once(rng):
    P, R, gamma = _np_mdp(rng, S=6, A=2)
    mdp = _mdp(P, R, gamma)
    run = jax.jit(
        lambda tol, n, h, rounds: ie_vi(mdp, mdp.P, h=h, rounds=rounds, tol=tol, max_queries=n)
    )
    traced = run(1e-4, 500, 3.0, 2)
    eager = ie_vi(mdp, mdp.P, h=3.0, rounds=2, tol=1e-4, max_queries=500)
    assert int(traced.queries) == int(eager.queries)
    np.testing.assert_allclose(traced.V, eager.V, rtol=1e-6)
    budget = value_iteration(mdp, tol=1e-9, max_queries=3)
    assert int(budget.queries) == 3 and int(budget.status) == ievi.MAX_QUERIES
    # New knob values reuse the compiled loop: no retrace for eager callers.
    from jaxpapers.ievi import _planners

    before = _planners._value_iteration._cache_size()
    for tol in (1e-3, 1e-4, 1e-5):
        value_iteration(mdp, tol=tol, max_queries=1000)
    assert _planners._value_iteration._cache_size() - before <= 1


class TestPlannersWithAndWithoutJit(chex.TestCase):
    """The same planner results eagerly and under ``jax.jit`` (chex variants)."""

    @chex.variants(with_jit=True, without_jit=True)
    def test_value_iteration_and_ie_vi(self):
        rng = np.random.default_rng(1)
        P, R, gamma = _np_mdp(rng, S=6, A=2)
        mdp = _mdp(P, R, gamma)
        vi = self.variant(lambda m: value_iteration(m, tol=1e-3))(mdp)
        ie = self.variant(lambda m: ie_vi(m, m.P, h=5.0, tol=1e-3))(mdp)
        expected = _np_value_iteration(P, R, gamma)
        assert_trees_close(vi.V, expected, scale=1e3 * float(np.abs(expected).max()))
        assert_trees_close(ie.V, expected, scale=1e3 * float(np.abs(expected).max()))


def test_planning_error_of_the_query_models_matches_numpy(x64):
    """``model_error_matters``' row: sup-norm distance between the fixed point of the perturbed
    model and V*, against float64 NumPy value iteration on both models (gamma 0.9: 4,000 sweeps
    leave 0.9^4000 of the initial error, far below the 1e-9 tolerance)."""
    from jaxpapers.core.pytrees import stack_trees
    from jaxpapers.ievi.experiments._queries import (
        PROBLEMS,
        _model_keys,
        _plan_errors_batch,
    )

    seeds = [0, 1]
    mdps = [PROBLEMS["random"](s, 12, 0.9) for s in seeds]
    got = np.asarray(_plan_errors_batch(stack_trees(mdps), _model_keys(seeds), jnp.asarray(0.3)))
    for i, (mdp, key) in enumerate(zip(mdps, _model_keys(seeds), strict=True)):
        P, R = np.asarray(mdp.P, np.float64), np.asarray(mdp.R, np.float64)
        P_hat = np.asarray(ievi.perturbed_model(mdp.P, 0.3, key=key), np.float64)
        want = np.max(np.abs(_np_value_iteration(P_hat, R, 0.9) - _np_value_iteration(P, R, 0.9)))
        assert want > 1e-3  # a model error the check can see
        np.testing.assert_allclose(got[i], want, rtol=1e-9, atol=1e-9)


def test_query_claims_need_a_model_error_that_matters():
    """Each query-count experiment requires its own ``model_error_matters`` experiment: with a
    model whose plan is within 1e-4 of V* (the random bed at L1 0.1 (1 - gamma)) the counts'
    verdict is inconclusive. The 5% experiments test the abstract's "within a logarithmic factor
    of VI": IE-VI needing twice VI's queries holds (2 < ln 1000 = 6.9), ten times does not."""
    from jaxpapers.core.experiment import (
        Outcome,
        apply_preconditions,
        experiments_for,
        summarise,
    )
    from jaxpapers.ievi.experiments._queries import PLAN_ROWS

    exps = {e.id: e for e in experiments_for("P17")}

    def judge(values):
        chosen = [exps[k] for k in values]
        records = [summarise(e, Outcome(values[e.id])) for e in chosen]
        return {r["id"]: r for r in apply_preconditions(records, chosen)}

    vi = [20579.0, 20606.0, 20622.0, 20580.0, 20613.0]
    counts = {"VI": vi, "IE-VI": [5.0] * 5, "A-IE-VI": [9.0] * 5}
    for problem in ("random", "gridworld"):
        for level, scale in (("small_error", "horizon"), ("5pct_error", "fixed")):
            q, pre = f"queries_{problem}_{level}", f"model_error_matters_{problem}_{level}"
            assert exps[q].requires == (pre,)
            row = PLAN_ROWS[scale]
            tiny = judge({pre: {row: [1.5e-4, 8.7e-5, 1.5e-5, 1.4e-4, 1.9e-4]}, q: counts})
            assert tiny[pre]["verdict"] == "does not hold"
            assert tiny[q]["rule_verdict"] == "holds" and tiny[q]["verdict"] == "inconclusive"
            big = judge({pre: {row: [0.52, 0.52, 0.56, 0.53, 0.53]}, q: counts})
            assert big[pre]["verdict"] == "holds" and big[q]["verdict"] == "holds"
    slower = {"VI": vi, "IE-VI": [2 * v for v in vi], "A-IE-VI": [2.5 * v for v in vi]}
    much = {"VI": vi, "IE-VI": [10 * v for v in vi], "A-IE-VI": [10 * v for v in vi]}
    assert "logarithmic factor" in exps["queries_gridworld_5pct_error"].claim
    pre = {"model_error_matters_gridworld_5pct_error": {PLAN_ROWS["fixed"]: [230.0] * 5}}
    ok = judge({**pre, "queries_gridworld_5pct_error": slower})
    bad = judge({**pre, "queries_gridworld_5pct_error": much})
    assert ok["queries_gridworld_5pct_error"]["verdict"] == "holds"
    assert bad["queries_gridworld_5pct_error"]["verdict"] == "does not hold"
