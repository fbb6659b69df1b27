"""The one tabular MDP type (``jaxpapers.core.mdp``): validation, the papers' uses of it, and known
answers of value iteration and backward induction on a two-state MDP."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers.core.mdp import TabularMDP, check_mdp, check_transitions
from jaxpapers.core.pytrees import stack_trees

GAMMA = 0.9


def _two_state():
    """State 0: action 0 stays (reward 1), action 1 moves to state 1 (reward 0); state 1 is
    absorbing with reward 2. ``P[s, a, s']``."""
    P = np.zeros((2, 2, 2))
    P[0, 0, 0] = 1.0
    P[0, 1, 1] = 1.0
    P[1, :, 1] = 1.0
    R = np.array([[1.0, 0.0], [2.0, 2.0]])
    return P, R


def test_fields_defaults_and_properties():
    P, R = _two_state()
    mdp = TabularMDP(P, R, gamma=GAMMA)
    assert (mdp.num_states, mdp.num_actions, mdp.num_players, mdp.horizon) == (2, 2, None, None)
    assert mdp.time_homogeneous and mdp.gamma.shape == () and mdp.gamma.dtype == mdp.P.dtype
    np.testing.assert_array_equal(mdp.initial, [1.0, 0.0])  # episodes start in state 0
    episodic = TabularMDP(P, R / 2, horizon=3)
    assert float(episodic.gamma) == 1.0 and episodic.horizon == 3
    # one kernel per step and one reward per player (a Markov game's joint actions)
    game = TabularMDP(np.stack([P, P]), np.zeros((2, 2, 2, 3)), horizon=2, initial=[0.5, 0.5])
    assert (game.num_players, game.time_homogeneous, game.num_actions) == (3, False, 2)
    check_mdp(game, players=True, time_homogeneous=False, discounted=False)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda P, R: TabularMDP(P[:, :, :1], R, gamma=0.5), r"P has shape \(2, 2, 1\); expected"),
        (lambda P, R: TabularMDP(P * 1.5, R, gamma=0.5), "rows of P must sum to 1"),
        (lambda P, R: TabularMDP(P - 0.5, R, gamma=0.5), "P must hold finite non-negative"),
        (
            lambda P, R: TabularMDP(P, R.T[:1], gamma=0.5),
            r"R has shape \(1, 2\); expected \[2, 2\]",
        ),
        (lambda P, R: TabularMDP(P, R * np.nan, gamma=0.5), r"R of shape \(2, 2\) holds 4 non-fin"),
        (lambda P, R: TabularMDP(P, R, gamma=1.0), r"gamma=1.0; expected .* \[0, 1\) \(horizon=N"),
        (lambda P, R: TabularMDP(P, R, gamma=1.5, horizon=2), r"gamma=1.5; expected .* \[0, 1\]"),
        (lambda P, R: TabularMDP(P, R, gamma=[0.5, 0.5]), r"gamma has shape \(2,\); expected a sc"),
        (lambda P, R: TabularMDP(P, R, horizon=0), r"horizon=0; expected an integer >= 1"),
        (lambda P, R: TabularMDP(P, R, horizon=2.5), r"horizon=2.5 \(float\); expected an int"),
        (lambda P, R: TabularMDP(P[None], R[None], horizon=2), r"horizon=2; expected 1, the steps"),
        (lambda P, R: TabularMDP(P[None], R[None], gamma=0.5), r"horizon=None; expected 1"),
        (lambda P, R: TabularMDP(P, R, gamma=0.5, initial=[1.0]), r"initial has shape \(1,\)"),
        (lambda P, R: TabularMDP(P, R, gamma=0.5, initial=[0.5, 0.6]), r"initial of shape .* sums"),
    ],
)
def test_bad_models_are_refused_naming_the_argument(build, message):
    P, R = _two_state()
    with pytest.raises(ValueError, match=message):
        build(P, R)


def test_check_mdp_rechecks_instances_and_kinds():
    P, R = _two_state()
    mdp = TabularMDP(P, R, gamma=GAMMA)
    check_mdp(mdp, discounted=True, time_homogeneous=True, players=False)
    bad = eqx.tree_at(lambda m: m.gamma, mdp, jnp.asarray(1.5))  # skips the constructor
    with pytest.raises(ValueError, match=r"model.gamma=1.5; expected"):
        check_mdp(bad, "model")
    check_mdp(bad, "model", values=False)  # shapes only
    with pytest.raises(ValueError, match=r"mdp.horizon=None; expected the steps"):
        check_mdp(mdp, discounted=False)
    with pytest.raises(ValueError, match=r"mdp.horizon=4; expected None"):
        check_mdp(TabularMDP(P, R / 2, horizon=4), discounted=True)
    with pytest.raises(ValueError, match=r"mdp.P has shape \(2, 2, 2\); expected \[H, S, A, S\]"):
        check_mdp(mdp, time_homogeneous=False)
    with pytest.raises(ValueError, match=r"mdp.R has shape \(2, 2\); expected \[..., S, A, m\]"):
        check_mdp(mdp, players=True)
    with pytest.raises(ValueError, match="mdp must be a TabularMDP; got tuple"):
        check_mdp((P, R, GAMMA))
    with pytest.raises(ValueError, match=r"model_P has shape \(2, 2, 2\); expected \[H, S, A, S\]"):
        check_transitions(jnp.asarray(P), "model_P", steps=True)


def test_traced_values_pass_shapes_still_checked():
    P, R = _two_state()

    @jax.jit
    def build(P, R, gamma):
        return TabularMDP(P, R, gamma=gamma).gamma * 2

    # under jit the values are not read (an invalid discount is not a tracer error) ...
    assert float(build(jnp.asarray(P), jnp.asarray(R), 1.5)) == 3.0
    # ... but the shapes are
    with pytest.raises(ValueError, match=r"R has shape \(2, 3\)"):
        build(jnp.asarray(P), jnp.zeros((2, 3)), 0.5)


def test_stacks_and_vmaps():
    P, R = _two_state()
    mdps = stack_trees([TabularMDP(P, R, gamma=g) for g in (0.5, 0.9)])
    assert mdps.P.shape == (2, 2, 2, 2) and mdps.gamma.shape == (2,)
    doubled = jax.vmap(lambda m: m.gamma * m.R.sum())(mdps)
    np.testing.assert_allclose(doubled, [0.5 * 5, 0.9 * 5], rtol=1e-6)


def test_value_iteration_known_answer(x64):
    """``V*(1) = 2 / (1 - gamma)``, ``V*(0) = max(1 / (1 - gamma), gamma V*(1))``: 20 and 18."""
    from jaxpapers import ievi

    P, R = _two_state()
    mdp = TabularMDP(P, R, gamma=GAMMA)
    want = np.array([max(1 / (1 - GAMMA), GAMMA * 2 / (1 - GAMMA)), 2 / (1 - GAMMA)])
    np.testing.assert_allclose(want, [18.0, 20.0], rtol=1e-12)
    np.testing.assert_allclose(ievi.optimal_values(mdp), want, rtol=1e-12)
    vi = ievi.value_iteration(mdp, tol=1e-10)
    assert bool(vi.converged)
    np.testing.assert_allclose(vi.V, want, atol=1e-9)
    # staying in state 0 forever is worth 1 / (1 - gamma) there
    stay = jnp.asarray([[1.0, 0.0], [1.0, 0.0]])
    np.testing.assert_allclose(ievi.evaluate_policy(mdp, stay), [10.0, 20.0], rtol=1e-12)


def test_backward_induction_known_answer():
    """Episodic (H = 3, rewards halved into [0, 1]): ``V_h(1) = H - h``, and from state 0 moving
    at once is best, ``V_h(0) = H - h - 1``: (2, 3) at h = 0."""
    from jaxpapers import ldp_rl

    P, R = _two_state()
    mdp = TabularMDP(P, R / 2, horizon=3)
    _, V = ldp_rl.backward_induction(mdp.P, mdp.R, mdp.horizon)
    np.testing.assert_allclose(V, [[2.0, 3.0], [1.0, 2.0], [0.5, 1.0], [0.0, 0.0]], rtol=1e-6)
    move = jnp.ones((3, 2), jnp.int32)
    assert float(ldp_rl.policy_value(mdp, move)) == pytest.approx(2.0)


def test_markov_game_holds_one():
    from jaxpapers.markov_games import MarkovGame, chicken

    g = chicken()
    assert isinstance(g.mdp, TabularMDP) and g.P is g.mdp.P and g.mdp.num_players == 2
    with pytest.raises(ValueError, match="rows of P must sum to 1"):
        MarkovGame(g.P * 2, g.R, g.initial, g.num_actions)
