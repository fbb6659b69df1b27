"""P15: LDP mechanisms (exact enumeration), EXP3-LDP and UCBVI-LDP against references."""

from __future__ import annotations

import itertools
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers.core.experiment import run_paper
from jaxpapers.ldp_rl import (
    ContextualBandit,
    EpisodicMDP,
    backward_induction,
    exp3_ldp,
    importance_weighted_losses,
    max_privacy_loss,
    policy_value,
    random_contextual_bandit,
    random_episodic_mdp,
    randomized_response,
    randomized_response_debias,
    randomized_response_output_probabilities,
    ucbvi_ldp,
    unary_debias,
    unary_encode,
    unary_output_probabilities,
)


@pytest.mark.parametrize("d", [2, 3, 5])
@pytest.mark.parametrize("eps", [0.1, 1.0, 8.0])
def test_unary_encoding_is_exactly_eps_private_and_unbiased(d, eps):
    probs = unary_output_probabilities(d, eps)  # [d, 2^d], float64
    np.testing.assert_allclose(probs.sum(1), 1.0, rtol=1e-12)
    assert max_privacy_loss(probs) == pytest.approx(eps, rel=1e-9)  # bound attained, never passed
    outputs = np.array(list(itertools.product((0, 1), repeat=d)), np.float32)
    mean = probs @ np.asarray(unary_debias(jnp.asarray(outputs), eps), np.float64)
    np.testing.assert_allclose(mean, np.eye(d), atol=2e-5 / min(eps, 1.0))


def test_randomized_response_exact_and_unbiased():
    for eps in (0.3, 2.0):
        probs = randomized_response_output_probabilities(eps)
        assert max_privacy_loss(probs) == pytest.approx(eps, rel=1e-12)
        est = probs @ np.asarray(randomized_response_debias(jnp.array([0.0, 1.0]), eps))
        np.testing.assert_allclose(est, [0.0, 1.0], atol=1e-5)
    y = randomized_response(jnp.zeros(20_000, jnp.int32), 1.0, key=jax.random.key(0))
    # flip rate 1 / (1 + e) = 0.269; 20k draws: standard error 0.0031, 5 s.e. margin
    assert abs(float(y.mean()) - 1 / (1 + math.e)) < 0.016


def test_sampled_unary_bits_follow_the_keep_probability():
    eps = 1.0
    bits = unary_encode(jnp.zeros(20_000, jnp.int32), 4, eps, key=jax.random.key(3))
    keep = math.exp(eps / 2) / (1 + math.exp(eps / 2))
    rates = np.asarray(bits.mean(0))
    np.testing.assert_allclose(rates, [keep, 1 - keep, 1 - keep, 1 - keep], atol=0.02)


def test_importance_weighted_estimates_are_unbiased_by_enumeration(rng):
    S, A = 2, 3
    rho = np.array([0.3, 0.7])
    mu = rng.uniform(size=(S, A))  # reward means; the encoded loss is 1 - reward
    pi = rng.dirichlet(np.ones(A), size=S)
    expected = np.zeros((S, A))
    for s, a, loss in itertools.product(range(S), range(A), (0, 1)):
        p = rho[s] * pi[s, a] * (1 - mu[s, a] if loss else mu[s, a])
        index = s * A + a if loss else S * A
        msg = jax.nn.one_hot(index, S * A + 1)
        expected += p * np.asarray(importance_weighted_losses(msg, jnp.asarray(pi, jnp.float32)))
    np.testing.assert_allclose(expected, rho[:, None] * (1 - mu), rtol=1e-5)


def test_exp3_ldp_reduces_to_exp3_as_eps_grows_and_vmap_matches_loop():
    bandit = random_contextual_bandit(jax.random.key(0), 2, 3)
    keys = jax.random.split(jax.random.key(1), 3)
    private = jax.vmap(lambda k: exp3_ldp(bandit, 150, 60.0, key=k).regret)(keys)
    plain = jax.vmap(lambda k: exp3_ldp(bandit, 150, None, key=k).regret)(keys)
    # at eps = 60 the keep probability rounds to 1 in float32: the same run exactly
    np.testing.assert_array_equal(private, plain)
    looped = jnp.stack([exp3_ldp(bandit, 150, 60.0, key=k).regret for k in keys])
    np.testing.assert_allclose(private, looped, rtol=1e-5, atol=1e-4)
    assert bool(jnp.all(jnp.diff(plain, axis=1) >= -1e-6))  # pseudo-regret never decreases


def _numpy_backward(P, R, H):
    V = np.zeros(P.shape[0])
    for _ in range(H):
        V = (R + P @ V).max(-1)
    return V


def test_backward_induction_and_policy_value_match_numpy(x64, rng):
    # A random MDP drawn by NumPy (the float64 Dirichlet sampler would cost a compile).
    P0 = rng.dirichlet(np.ones(4), size=(4, 3))
    mdp = EpisodicMDP(
        jnp.asarray(P0 / P0.sum(-1, keepdims=True)), jnp.asarray(rng.uniform(size=(4, 3))), 5
    )
    P, R = np.asarray(mdp.P), np.asarray(mdp.R)
    Q, V = backward_induction(mdp.P, mdp.R, 5)
    np.testing.assert_allclose(V[0], _numpy_backward(P, R, 5), rtol=1e-12)
    np.testing.assert_allclose(policy_value(mdp, Q.argmax(-1)), V[0, 0], rtol=1e-12)


def test_ucbvi_learns_and_large_eps_matches_non_private():
    mdp = random_episodic_mdp(jax.random.key(0), 2, 2, 2)
    key = jax.random.key(5)
    plain = ucbvi_ldp(mdp, 300, None, key=key)
    private = ucbvi_ldp(mdp, 300, 200.0, key=key)  # eps / H = 100: exact bits
    np.testing.assert_allclose(private.regret, plain.regret, rtol=1e-6, atol=1e-5)
    gaps = np.diff(np.asarray(plain.regret), prepend=0.0)
    assert gaps[-100:].mean() < gaps[:20].mean()  # later episodes are closer to optimal
    assert float(np.asarray(plain.counts).sum()) == pytest.approx(300 * 2)


def test_bad_inputs():
    bandit = random_contextual_bandit(jax.random.key(0), 2, 2)
    mdp = EpisodicMDP(jnp.full((2, 2, 2), 0.5), jnp.full((2, 2), 0.5), 2)  # no sampler to compile
    for eps in (0.0, -1.0):
        with pytest.raises(ValueError, match="epsilon"):
            exp3_ldp(bandit, 10, eps, key=jax.random.key(0))
        with pytest.raises(ValueError, match="epsilon"):
            ucbvi_ldp(mdp, 10, eps, key=jax.random.key(0))
        with pytest.raises(ValueError, match="epsilon"):
            unary_encode(jnp.array(0), 3, eps, key=jax.random.key(0))
    with pytest.raises(ValueError, match="not stochastic"):
        EpisodicMDP(jnp.full((2, 2, 2), 0.6), jnp.zeros((2, 2)), 2)
    with pytest.raises(ValueError, match="not stochastic"):
        EpisodicMDP(jnp.array([[[1.5, -0.5]], [[0.5, 0.5]]]), jnp.zeros((2, 1)), 2)
    with pytest.raises(ValueError, match="index"):
        unary_encode(jnp.array([3]), 3, 1.0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="means"):
        ContextualBandit(jnp.array([1.0]), jnp.array([[1.5]]))


def test_p15_smoke(tmp_path):
    run_paper("P15", tmp_path, size="smoke", seeds=2, log=lambda _: None)
    saved = json.loads((tmp_path / "P15" / "result.json").read_text())
    ids = {e["id"] for e in saved["experiments"]}
    assert ids == {"large_epsilon_limit", "bandit_rate", "rl_rate", "privacy_audit"}
    for exp in saved["experiments"]:
        assert all(math.isfinite(r["mean"]) for r in exp["rows"]), exp["id"]
    audit = next(e for e in saved["experiments"] if e["id"] == "privacy_audit")
    assert audit["verdict"] == "holds"
    assert (tmp_path / "P15" / "bandit_rate.png").exists()
