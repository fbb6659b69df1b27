"""Tests of jaxpapers.cfshap against closed forms, float64 loops, scipy and the shap package."""

from __future__ import annotations

import itertools
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import tolerance

from jaxpapers.cfshap import (
    OBSERVATIONAL_METHODS,
    DiscreteSCM,
    LinearGaussianSCM,
    asymmetric_shapley_values,
    attributions,
    balke_pearl_bounds,
    causal_game,
    cf_shapley_bounds,
    check_desiderata,
    counterfactual_game,
    game_values,
    interventional_game,
    lime_values,
    mediation_effects,
    natural_total_effect,
    pair_desiderata,
    shapley_sampling,
    shapley_values,
    witnesses,
)
from jaxpapers.cfshap._desiderata import _Counterfactuals
from jaxpapers.core.experiment import run_paper

ALPHA, BETA = 1.5, -2.0
X_CHAIN = jnp.array([0.7, -1.3])


def _chain():
    return LinearGaussianSCM(jnp.array([[0.0, 0.0], [ALPHA, 0.0]]))


def _beta_x2(v):
    return BETA * v[1]


def test_linear_chain_closed_forms():
    scm, bg = _chain(), jnp.zeros((1, 2))
    x1, x2 = np.asarray(X_CHAIN)
    tol = tolerance(jnp.float32, scale=10.0)
    cf = shapley_values(counterfactual_game(scm, _beta_x2, X_CHAIN, background=bg))
    sym = [ALPHA * BETA * x1 / 2, BETA * (x2 - ALPHA * x1 / 2)]
    np.testing.assert_allclose(cf, sym, **tol)
    causal = shapley_values(causal_game(scm, _beta_x2, X_CHAIN, background=bg))
    np.testing.assert_allclose(causal, sym, **tol)
    asym = asymmetric_shapley_values(
        causal_game(scm, _beta_x2, X_CHAIN, background=bg), scm.parents
    )
    np.testing.assert_allclose(asym, [ALPHA * BETA * x1, BETA * (x2 - ALPHA * x1)], **tol)
    inter = shapley_values(interventional_game(scm, _beta_x2, X_CHAIN, background=bg))
    np.testing.assert_allclose(inter, [0.0, BETA * x2], **tol)


def test_natural_total_effect_of_single_cause_is_total_effect_times_deviation():
    scm = _chain()
    nte = natural_total_effect(
        scm, _beta_x2, X_CHAIN, jnp.array([True, False]), background=jnp.zeros((1, 2))
    )
    np.testing.assert_allclose(nte, ALPHA * BETA * X_CHAIN[0], rtol=1e-5)


def test_total_effect_is_direct_plus_indirect_in_linear_models():
    w = jnp.array([[0.0, 0.0, 0.0], [1.5, 0.0, 0.0], [0.5, 2.0, 0.0]])
    eff = mediation_effects(LinearGaussianSCM(w), 0, 1, 2, 0.0, 1.0)
    np.testing.assert_allclose(eff["total"], 0.5 + 1.5 * 2.0, rtol=1e-5)
    np.testing.assert_allclose(eff["natural_direct"], 0.5, rtol=1e-5)
    np.testing.assert_allclose(
        eff["natural_direct"] + eff["natural_indirect"], eff["total"], rtol=1e-5
    )


def _random_discrete(key, monotone=False):
    s = DiscreteSCM.canonical((2, 2, 2), ((), (0,), (0, 1)), monotone=monotone)
    q = jax.random.dirichlet(key, jnp.full(s.num_noise, 0.5))
    return DiscreteSCM(s.cards, s.parents, s.functions, q)


def _xor_table(v):
    return (v[0] ^ v[2]).astype(float) + 0.25 * v[1]


def test_efficiency_and_exact_shapley_against_float64_permutation_loop(key):
    scm = _random_discrete(key)
    x = jnp.array([1, 0, 1])
    game = counterfactual_game(scm, _xor_table, x)
    phi = np.asarray(shapley_values(game))
    v = np.asarray(game_values(game), np.float64)
    ref = np.zeros(3)
    for order in itertools.permutations(range(3)):
        mask = 0
        for i in order:
            ref[i] += (v[mask | (1 << i)] - v[mask]) / math.factorial(3)
            mask |= 1 << i
    np.testing.assert_allclose(phi, ref, **tolerance(jnp.float32))
    table = np.array([_xor_table(np.array(c)) for c in itertools.product((0, 1), repeat=3)])
    mean_f = float(np.asarray(scm.observational(), np.float64) @ table)
    np.testing.assert_allclose(
        phi.sum(), float(_xor_table(np.array([1, 0, 1]))) - mean_f, atol=1e-5
    )


def test_sampling_agrees_with_exact_within_error_bars(key):
    n = 6
    w = jnp.tril(jax.random.normal(key, (n, n)), k=-1) * 0.5
    scm = LinearGaussianSCM(w)
    bg = scm.sample(32, key=jax.random.key(1))
    game = counterfactual_game(
        scm, lambda v: jnp.tanh(v[0] * v[-1]) + jnp.sin(v).sum(), bg[0], background=bg
    )
    exact = shapley_values(game)
    est = shapley_sampling(game, key=jax.random.key(2), num_permutations=400)
    z = np.abs(np.asarray(est.values - exact)) / np.asarray(est.stderr)
    assert z.max() < 4.5, z
    np.testing.assert_allclose(est.values.sum(), exact.sum(), atol=1e-4)


def test_jit_vmap_and_grad_over_units():
    scm, bg = _chain(), jnp.zeros((1, 2))

    def phi(x):
        return shapley_values(counterfactual_game(scm, _beta_x2, x, background=bg))

    xs = jnp.array([[0.7, -1.3], [1.0, 2.0], [-0.5, 0.1]])
    batched = jax.jit(jax.vmap(phi))(xs)
    np.testing.assert_allclose(batched, jnp.stack([phi(x) for x in xs]), **tolerance(jnp.float32))
    grad = jax.grad(lambda x: phi(x)[0])(X_CHAIN)
    np.testing.assert_allclose(grad, [ALPHA * BETA / 2, 0.0], **tolerance(jnp.float32))


def test_bounds_point_when_identified_and_contain_truth(key):
    xor = DiscreteSCM.markovian(
        (2, 2),
        ((), (0,)),
        (jnp.array([[0], [1]]), jnp.array([[0, 1], [1, 0]])),
        (jnp.array([0.3, 0.7]), jnp.array([0.8, 0.2])),
    )
    x = jnp.array([1, 1])
    point = np.asarray(shapley_values(counterfactual_game(xor, lambda v: v[1].astype(float), x)))
    b = cf_shapley_bounds(xor, lambda v: v[1].astype(float), x, xor.observational())
    assert b.success
    np.testing.assert_allclose(b.lower, point, atol=1e-6)
    np.testing.assert_allclose(b.upper, point, atol=1e-6)
    with jax.enable_x64(True):
        truth = _random_discrete(key, monotone=True)
        truth = DiscreteSCM(
            truth.cards, truth.parents, truth.functions, truth.noise.astype(jnp.float64)
        )
        x = jnp.array([1, 1, 0])
        phi = np.asarray(shapley_values(counterfactual_game(truth, _xor_table, x)))
        full = DiscreteSCM.canonical(truth.cards, truth.parents)
        b = cf_shapley_bounds(full, _xor_table, x, truth.observational())
    assert b.success
    assert np.all(b.lower - 1e-7 <= phi) and np.all(phi <= b.upper + 1e-7)


def test_bounds_are_attained_by_the_returned_scms(key):
    """Tightness: the law the LP returns for each bound reproduces the observed law, and the
    counterfactual Shapley value of that SCM, recomputed through the full game (its own P(x)
    and reference law), equals the bound."""
    with jax.enable_x64(True):
        truth = _random_discrete(key, monotone=True)
        truth = DiscreteSCM(
            truth.cards, truth.parents, truth.functions, truth.noise.astype(jnp.float64)
        )
        x = jnp.array([1, 1, 0])
        full = DiscreteSCM.canonical(truth.cards, truth.parents)
        obs = np.asarray(truth.observational(), np.float64)
        b = cf_shapley_bounds(full, _xor_table, x, obs)
        assert b.success and b.minimizers.shape == (3, full.num_noise)
        for i in range(3):
            for bound, q in ((b.lower[i], b.minimizers[i]), (b.upper[i], b.maximizers[i])):
                scm = DiscreteSCM(full.cards, full.parents, full.functions, np.clip(q, 0, None))
                np.testing.assert_allclose(scm.observational(), obs, atol=1e-9)
                phi = shapley_values(counterfactual_game(scm, _xor_table, x))
                assert abs(float(phi[i]) - bound) < 1e-8


def test_balke_pearl_vitamin_a():
    p = np.zeros((2, 2, 2))
    p[0, 0] = [0.0064, 0.9936]
    p[1, 0] = [0.0028, 0.1972]
    p[1, 1] = [0.001, 0.799]
    lo, hi = balke_pearl_bounds(p)
    np.testing.assert_allclose([lo, hi], [-0.1946, 0.0054], atol=1e-10)


DESIDERATA_NAMES = ("efficiency", "noncause_null", "counterfactual_credit", "counterfactual_null")


def test_desiderata_witnesses():
    checked = {}
    for w in witnesses(key=jax.random.key(0)):
        for m in ("cf_shapley", "causal_shapley", "interventional_shap", "observational_shap"):
            phi = attributions(m, w.scm, w.model, w.x, key=jax.random.key(0))
            for d, ok in check_desiderata(phi, w.scm, w.model, w.x).items():
                checked[m, d] = checked.get((m, d), True) and ok
    assert all(checked["cf_shapley", d] for d in DESIDERATA_NAMES)
    assert not checked["interventional_shap", "counterfactual_credit"]
    assert not checked["observational_shap", "noncause_null"]
    assert not checked["causal_shapley", "counterfactual_null"]


def test_desiderata_checks_share_no_code_with_the_games(monkeypatch):
    """The checks never evaluate a coalition game: with every game and ``game_values`` made to
    raise they give the same verdicts. Before 2026-12-04 desiderata 3 and 4 were read off the
    natural-total-effect game that counterfactual Shapley values average (4/4 by Shapley's
    axioms), and this test raised."""
    ws = witnesses(key=jax.random.key(1))
    phis = {
        (w.name, m): np.asarray(attributions(m, w.scm, w.model, w.x, key=jax.random.key(0)))
        for w in ws
        for m in ("cf_shapley", "interventional_shap")
    }
    before = {k: check_desiderata(phi, *_witness(ws, k[0])) for k, phi in phis.items()}

    def boom(*args, **kwargs):
        raise AssertionError("a desiderata check evaluated an attribution game")

    import jaxpapers.cfshap._desiderata as desiderata_module
    import jaxpapers.cfshap._games as games_module
    import jaxpapers.cfshap._shapley as shapley_module

    for cls in ("CounterfactualGame", "CausalGame", "InterventionalGame", "ObservationalGame"):
        monkeypatch.setattr(getattr(games_module, cls), "__call__", boom)
    for module in (games_module, desiderata_module):
        for name in ("counterfactual_game", "causal_game", "interventional_game"):
            monkeypatch.setattr(module, name, boom, raising=False)
    monkeypatch.setattr(shapley_module, "game_values", boom)
    monkeypatch.setattr(desiderata_module, "game_values", boom, raising=False)
    after = {k: check_desiderata(phi, *_witness(ws, k[0])) for k, phi in phis.items()}
    assert after == before


def _witness(ws, name):
    w = next(w for w in ws if w.name == name)
    return w.scm, w.model, w.x


def test_wrong_attributions_fail_the_desiderata():
    """Efficient but wrong credit vectors fail the desideratum they break."""
    ws = {w.name: w for w in witnesses(key=jax.random.key(2))}
    # indirect: X_1 = X_0 xor U, f = X_1, unit (1, 1): X_0 changes the prediction, so all credit
    # on X_1 breaks counterfactual credit (efficiency kept)
    w = ws["indirect"]
    phi = np.asarray(attributions("cf_shapley", w.scm, w.model, w.x, key=jax.random.key(0)))
    moved = np.array([0.0, phi.sum()])
    ok = check_desiderata(moved, w.scm, w.model, w.x)
    assert ok["efficiency"] and not ok["counterfactual_credit"]
    # unit_null: X_1 = X_0 and U with U = 0 for this unit: any credit on X_0 breaks the null
    w = ws["unit_null"]
    phi = np.asarray(attributions("cf_shapley", w.scm, w.model, w.x, key=jax.random.key(0)))
    moved = np.array([0.5 * phi.sum(), 0.5 * phi.sum()])
    ok = check_desiderata(moved, w.scm, w.model, w.x)
    assert ok["efficiency"] and not ok["counterfactual_null"]
    # noncause: f = X_0 with a child X_1; credit on the child breaks non-cause null
    w = ws["noncause"]
    phi = np.asarray(attributions("cf_shapley", w.scm, w.model, w.x, key=jax.random.key(0)))
    ok = check_desiderata(phi[::-1], w.scm, w.model, w.x)
    assert not ok["noncause_null"]
    # and an inefficient one fails efficiency
    assert not check_desiderata(phi + 0.1, w.scm, w.model, w.x)["efficiency"]
    with pytest.raises(ValueError, match="phi has shape"):
        check_desiderata(np.zeros(3), w.scm, w.model, w.x)


def test_counterfactual_effect_and_null_against_closed_forms():
    """The independent counterfactual solver on the indirect witness (X_1 = X_0 xor U, f = X_1,
    unit (1, 1), so U = 0): setting X_0 to a natural value a moves f by |a - 1|, so the effect
    of X_0 is P(X_0 = 0), that of X_1 is P(X_1 = 0); neither is null."""
    w = next(w for w in witnesses(key=jax.random.key(3)) if w.name == "indirect")
    cf = _Counterfactuals(w.scm, w.model, w.x)
    law = np.asarray(w.scm.observational(), np.float64).reshape(2, 2)
    assert cf.effect(0) == pytest.approx(law[0].sum(), abs=1e-6)
    assert cf.effect(1) == pytest.approx(law[:, 0].sum(), abs=1e-6)
    assert not cf.null(0) and not cf.null(1)
    assert cf.mean_f == pytest.approx(law[:, 1].sum(), abs=1e-6)
    u = next(w for w in witnesses(key=jax.random.key(3)) if w.name == "unit_null")
    cf = _Counterfactuals(u.scm, u.model, u.x)
    assert cf.null(0) and not cf.null(1) and cf.effect(0) == 0.0


def test_impossibility_pair():
    """Same observational law (to float32 rounding), the exact observational methods give both
    SCMs the same credits and break a desideratum; counterfactual Shapley values satisfy all
    four on both."""
    res = pair_desiderata(key=jax.random.key(4), lime_samples=4000)
    assert res.law_gap < 1e-6
    for m in ("interventional_shap", "observational_shap"):
        fwd, bwd = res.credits[m]
        np.testing.assert_allclose(fwd, bwd, atol=1e-6)
    assert res.satisfied["cf_shapley"] == 8
    assert all(res.satisfied[m] < 8 for m in OBSERVATIONAL_METHODS)
    fwd, bwd = res.credits["cf_shapley"]
    assert abs(fwd[0]) > 0.03 and abs(bwd[0]) < 1e-6  # a cause, then a non-cause


def test_p10_smoke(tmp_path):
    run_paper("P10", tmp_path, size="smoke", seeds=2, log=lambda _: None)
    saved = json.loads((tmp_path / "P10" / "result.json").read_text())
    by_id = {e["id"]: e for e in saved["experiments"]}
    assert set(by_id) == {
        "sanity",
        "witness_desiderata",
        "random_desiderata",
        "impossibility_pair",
        "bounds_contain_truth",
        "sampling_error",
    }
    for exp in saved["experiments"]:
        assert all(math.isfinite(r["mean"]) for r in exp["rows"]), exp["id"]
    assert by_id["impossibility_pair"]["verdict"] == "holds"
    assert by_id["random_desiderata"]["verdict"] == "holds"


def test_lime_recovers_linear_model_and_misses_interaction():
    f = lambda v: 2.0 * v[0] - v[1] + 0.5 * v[2]
    phi = lime_values(f, jnp.ones(3), jnp.zeros((1, 3)), key=jax.random.key(0), num_samples=300)
    np.testing.assert_allclose(phi, [2.0, -1.0, 0.5], atol=1e-2)


def test_interventional_shap_matches_shap_exact_explainer():
    shap = pytest.importorskip("shap", reason="the shap package is not installed")
    rng = np.random.default_rng(0)
    bg = rng.normal(size=(20, 4))
    x = rng.normal(size=4)

    def f_np(a):
        return np.tanh(a[:, 0] * a[:, 1]) + a[:, 2] ** 2 - a[:, 3]

    def f_jnp(v):
        return jnp.tanh(v[0] * v[1]) + v[2] ** 2 - v[3]

    with jax.enable_x64(True):
        scm = LinearGaussianSCM(jnp.zeros((4, 4)))
        ours = shapley_values(
            interventional_game(scm, f_jnp, jnp.asarray(x), background=jnp.asarray(bg))
        )
    explainer = shap.explainers.Exact(f_np, shap.maskers.Independent(bg, max_samples=20))
    theirs = explainer(x[None]).values[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: LinearGaussianSCM(jnp.array([[0.0, 1.0], [1.0, 0.0]])), "cyclic"),
        (lambda: LinearGaussianSCM(jnp.array([[1.0, 0.0], [0.0, 0.0]])), "self-loop"),
        (lambda: DiscreteSCM.canonical((2, 2), ((1,), (0,))), "cyclic"),
        (lambda: DiscreteSCM.canonical((2, 2), ((0,), ())), "self-loop"),
        (lambda: DiscreteSCM.canonical((2, 2), ((), (5,))), "names node 5"),
        (lambda: DiscreteSCM.canonical((2, 2), ((), (0,)), jnp.full(8, 0.2)), "probability"),
    ],
)
def test_bad_models(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_inputs():
    scm = _chain()
    with pytest.raises(ValueError, match="x has shape"):
        counterfactual_game(scm, _beta_x2, jnp.ones(3), background=jnp.zeros((1, 2)))
    with pytest.raises(ValueError, match="background"):
        counterfactual_game(scm, _beta_x2, X_CHAIN)
    d = DiscreteSCM.canonical((2, 2), ((), (0,)))
    with pytest.raises(ValueError, match="outside"):
        counterfactual_game(d, _beta_x2, jnp.array([0, 2]))
    with pytest.raises(ValueError, match="outside \\[0, 1\\]"):
        cf_shapley_bounds(d, _beta_x2, jnp.array([0, 1]), jnp.array([1.5, -0.5, 0.0, 0.0]))
    with pytest.raises(ValueError, match="num_permutations"):
        shapley_sampling(
            counterfactual_game(d, _beta_x2, jnp.array([0, 1])),
            key=jax.random.key(0),
            num_permutations=1,
        )


def _bounds_family_unit(j: int):
    """Unit ``j`` of the referee's draw (2026-12-04): every response function of the
    ``bounds`` graph, Dirichlet(0.3) noise, a uniform random table model, a sampled unit."""
    from jaxpapers.cfshap import DiscreteSCM, TableModel

    structure = DiscreteSCM.canonical((2, 2, 2), ((), (0,), (0, 1)))
    kq, kf, kx = jax.random.split(jax.random.key(100 + j), 3)
    q = jax.random.dirichlet(kq, jnp.full(structure.num_noise, 0.3))
    scm = DiscreteSCM(structure.cards, structure.parents, structure.functions, q)
    model = TableModel(jax.random.uniform(kf, (8,)), (4, 2, 1))
    return scm, model, scm.sample(1, key=kx)[0]


def test_cf_shapley_keeps_every_desideratum_on_random_units():
    """Counterfactual Shapley values pass all four desiderata on random units of the bounds
    family. Under the old desideratum 3 (any variable with effect > tol needs |phi| > tol)
    units 1 and 4 to 8 failed: a variable whose counterfactual changes take both signs cancels
    (unit 8: effect 0.122, phi -0.023); the check now asks for credit only from sign-consistent
    variables, the property Shapley aggregation provably keeps."""
    cancelled = 0
    for j in range(10):
        scm, model, x = _bounds_family_unit(j)
        phi = np.asarray(shapley_values(counterfactual_game(scm, model, x)))
        assert all(check_desiderata(phi, scm, model, x).values()), j
        cf = _Counterfactuals(scm, model, x)
        cancelled += any(cf.effect(i) > 0.03 and abs(phi[i]) <= 0.03 for i in range(3))
    assert cancelled == 6  # the draw does hold cancellations: the test is not vacuous


def test_counterfactual_direction_and_sign_of_credit():
    """On the indirect witness (X_1 = X_0 xor U, f = X_1, unit (1, 1), so U = 0) setting X_0 to
    any value can only lower the prediction (direction +1); X_1 takes both signs (under
    do(X_0 = 0) its own value is 0 and setting it to 1 raises f). Credit of the wrong sign, or
    below the 1/n share of the effect, fails desideratum 3."""
    w = next(w for w in witnesses(key=jax.random.key(3)) if w.name == "indirect")
    cf = _Counterfactuals(w.scm, w.model, w.x)
    assert cf.direction(0) == 1 and cf.direction(1) is None
    phi = np.asarray(shapley_values(counterfactual_game(w.scm, w.model, w.x)))
    assert check_desiderata(phi, w.scm, w.model, w.x)["counterfactual_credit"]
    flipped = phi * np.array([-1.0, 1.0])
    assert not check_desiderata(flipped, w.scm, w.model, w.x)["counterfactual_credit"]
    small = np.array([cf.effect(0) / 2 - 0.05, phi.sum() - cf.effect(0) / 2 + 0.05])
    assert not check_desiderata(small, w.scm, w.model, w.x)["counterfactual_credit"]
    # a variable with both signs: unit 8 of the random draw, whose X_0 credit cancels
    scm, model, x = _bounds_family_unit(8)
    cf = _Counterfactuals(scm, model, x)
    assert cf.effect(0) > 0.1 and cf.direction(0) is None
