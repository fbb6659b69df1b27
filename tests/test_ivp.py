"""P18 IVP: Bayes updates and information gain against float64 NumPy enumeration, the probing
episode against a NumPy replay, metrics against SciPy, the chat-interface path against the
numeric path, and clear errors on bad input."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from jaxpapers import ivp
from jaxpapers.core.chat import FunctionChatModel

PC = ivp.PersonaConfig()
CFG = ivp.ProberConfig(turns=5)


@pytest.fixture(scope="module")
def world():
    bank = ivp.make_question_bank(config=ivp.BankConfig(scenarios=4), key=jax.random.key(0))
    library = ivp.profile_library(16, key=jax.random.key(1), config=PC)
    personas = ivp.sample_personas(4, 0.6, key=jax.random.key(2), config=PC)
    return bank, library, personas


def _random_case(rng, q=3, h=5, k=2, a=3):
    lik = rng.dirichlet(np.ones(a), size=(q, h, k))
    post = rng.dirichlet(np.ones(h * k)).reshape(h, k)
    return lik, post


def _entropy(p):
    p = p[p > 0]
    return -np.sum(p * np.log(p))


def test_information_gain_matches_enumeration(rng, x64):
    lik, post = _random_case(rng)
    got = np.asarray(ivp.information_gain(jnp.log(jnp.asarray(post)), jnp.asarray(lik)))
    # Expected reduction of the entropy of the profile marginal, enumerating every answer.
    want = []
    for q in range(lik.shape[0]):
        prior_h = post.sum(1)
        gain = _entropy(prior_h)
        for a in range(lik.shape[-1]):
            joint = post * lik[q, :, :, a]
            pa = joint.sum()
            gain -= pa * _entropy(joint.sum(1) / pa)
        want.append(gain)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert np.all(got > 0)


def test_information_gain_is_zero_for_uninformative_question(x64):
    lik = np.tile(np.array([0.2, 0.5, 0.3]), (1, 4, 2, 1))
    post = np.full((4, 2), 1 / 8)
    got = ivp.information_gain(jnp.log(jnp.asarray(post)), jnp.asarray(lik))
    np.testing.assert_allclose(np.asarray(got), [0.0], atol=1e-12)


def test_posterior_update_matches_numpy_bayes(rng, x64):
    lik, post = _random_case(rng, q=4, h=6, k=3, a=4)
    answers = [(0, 1), (2, 3), (1, 0), (2, 3)]
    log_post = jnp.log(jnp.asarray(post))
    want = post.copy()
    for q, a in answers:
        log_post = ivp.update_posterior(log_post, jnp.asarray(lik[q]), jnp.asarray(a))
        want = want * lik[q, :, :, a]
        want /= want.sum()
    np.testing.assert_allclose(np.exp(np.asarray(log_post)), want, rtol=1e-10, atol=1e-14)


def test_answer_likelihood_matches_loop(rng, x64):
    honest = rng.dirichlet(np.ones(3), size=(2, 4))
    desirable = rng.dirichlet(np.ones(3), size=2)
    expl = np.array([0.8, 0.1])
    grid = np.array([0.0, 0.5, 0.9])
    got = np.asarray(
        ivp.answer_likelihood(*map(jnp.asarray, (honest, desirable, expl, grid)), 0.4, 0.5)
    )
    for q, h, k in itertools.product(range(2), range(4), range(3)):
        p = grid[k] * min(1.0, expl[q] + 0.5 * 0.4)
        want = (1 - p) * honest[q, h] + p * desirable[q]
        np.testing.assert_allclose(got[q, h, k], want, rtol=1e-12)


def test_likert_utilities_peak_at_the_profile_value(world):
    bank, *_ = world
    profile = jnp.linspace(0.0, 1.0, 10)
    probs = ivp.answer_probs(
        bank.features[0, :10], bank.bias[0, :10], bank.valid[0, :10], profile, 200.0
    )
    # Item v asks about value v, whose weight is v / 9; the likely answer is the nearest level.
    np.testing.assert_array_equal(np.argmax(probs, -1), np.round(np.linspace(0, 4, 10)))


def _replay(bank, library, personas, ep, n, c):
    """Float64 NumPy replay of the prober's posterior from the episode's questions/answers."""
    lib = np.asarray(library, np.float64)
    grid = np.asarray(CFG.grid)
    feats, bias, valid = (np.asarray(x[c], np.float64) for x in bank[:3])
    expl = np.asarray(bank.explicitness[c], np.float64)

    def probs(r, q):
        u = np.where(valid[q], PC.beta * (feats[q] @ r + bias[q]), -np.inf)
        e = np.exp(u - u.max())
        return e / e.sum()

    des = ivp.desirable_profile().astype(np.float64)
    post = np.full((lib.shape[0], grid.size), 1.0 / (lib.shape[0] * grid.size))
    qs = np.asarray(ep.questions[n, c])
    for t, (q, a) in enumerate(zip(qs, np.asarray(ep.answers[n, c]), strict=True)):
        s = expl[qs[:t]].mean() if t else 0.0
        p = grid * min(1.0, expl[q] + PC.suspicion * s)
        for h in range(lib.shape[0]):
            post[h] *= (1 - p) * probs(lib[h], q)[a] + p * probs(des, q)[a]
        post /= post.sum()
    return post


@pytest.mark.parametrize("policy", ["questionnaire", "random", "strategic"])
def test_probe_posterior_matches_numpy_replay(world, policy, key):
    bank, library, personas = world
    ep = ivp.probe(policy, bank, library, personas, key=key, persona_config=PC, config=CFG)
    assert ep.profile.shape == (4, 4, 10) and ep.log_post.shape == (4, 4, 16, 4)
    for n, c in [(0, 0), (1, 3)]:
        want = _replay(bank, library, personas, ep, n, c)
        # float32 log-space products of five likelihoods: a few ulps per factor.
        np.testing.assert_allclose(np.exp(np.asarray(ep.log_post[n, c])), want, atol=2e-5)
    qs = np.asarray(ep.questions)
    if policy == "questionnaire":
        np.testing.assert_array_equal(qs, np.broadcast_to(np.arange(5), qs.shape))
    if policy == "random":
        assert np.all(qs >= 10) and all(len(set(r)) == 4 for r in qs[..., :4].reshape(-1, 4))
    rep = np.asarray(ivp.repeated_mask(ep.questions))
    pen = np.minimum(
        1.0, np.asarray(bank.explicitness)[np.arange(4)[None, :, None], qs] + 0.5 * rep
    )
    np.testing.assert_allclose(np.asarray(ep.penalty), pen, rtol=1e-6)


def test_strategic_first_question_maximises_gain_minus_cost(world, key):
    bank, library, personas = world
    ep = ivp.probe("strategic", bank, library, personas, key=key, persona_config=PC, config=CFG)

    @jax.jit
    def first_scores(bank, library):
        honest, desirable = ivp.answer_tables(bank, library, PC.beta)
        lik = jax.vmap(ivp.answer_likelihood, in_axes=(0, 0, 0, None, None, None))(
            honest, desirable, bank.explicitness, jnp.asarray(CFG.grid), 0.0, PC.suspicion
        )
        prior = jnp.full((16, 4), -jnp.log(64.0))
        gain = jax.vmap(ivp.information_gain, in_axes=(None, 0))(prior, lik)
        return gain - CFG.intrusion_cost * bank.explicitness

    want = np.argmax(np.asarray(first_scores(bank, library)), -1)
    np.testing.assert_array_equal(np.asarray(ep.questions[:, :, 0]), np.broadcast_to(want, (4, 4)))


def test_deterministic_questionnaire_recovers_likert_profiles(world, key):
    bank, library, _ = world
    lib = jnp.asarray(np.unique(np.round(np.asarray(library) * 4) / 4, axis=0))
    personas = ivp.Personas(lib[jnp.array([[0, 1, 2, 3]])], jnp.zeros(1))
    ep = ivp.probe(
        "questionnaire",
        bank,
        lib,
        personas,
        key=key,
        persona_config=ivp.PersonaConfig(beta=200.0),
        config=ivp.ProberConfig(turns=10, grid=(0.0,)),
        deterministic=True,
    )
    np.testing.assert_allclose(np.asarray(ep.profile), np.asarray(personas.profiles), atol=1e-5)
    np.testing.assert_array_equal(np.asarray(ep.answers[0]), np.asarray(lib[:4] * 4).round())


def test_spearman_and_top_k_against_scipy(rng):
    a, b = rng.normal(size=(6, 10)), rng.normal(size=(6, 10))
    b[:, :4] = np.round(b[:, :4])  # ties, ranked by their average as in SciPy
    got = np.asarray(jax.jit(ivp.spearman)(jnp.asarray(a), jnp.asarray(b)))
    want = [scipy.stats.spearmanr(x, y).statistic for x, y in zip(a, b, strict=True)]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    truth = jnp.arange(10.0)
    est = truth.at[9].set(-1.0)  # the top value is lost: 2 of the top 3 remain
    np.testing.assert_allclose(float(ivp.top_k_accuracy(est, truth)), 2 / 3, rtol=1e-6)
    assert float(ivp.spearman(jnp.ones(10), truth)) == 0.0
    acc = ivp.social_acceptability(jnp.array([0.8, 0.1]), jnp.array([0.0, 1.0]))
    np.testing.assert_allclose(float(acc), 1 - (0.8 + 0.6) / 2, rtol=1e-6)


def test_personas_are_context_dependent_profiles(key):
    p = ivp.sample_personas(64, 0.3, key=key, config=PC)
    prof = np.asarray(p.profiles)
    assert prof.shape == (64, 4, 10)
    np.testing.assert_allclose(prof.min(-1), 0.0)
    np.testing.assert_allclose(prof.max(-1), 1.0)
    # The work context pulls towards achievement, the family context towards benevolence.
    a, b = ivp.value_index(["achievement", "benevolence"])
    assert prof[:, 0, a].mean() > prof[:, 1, a].mean() + 0.1
    assert prof[:, 1, b].mean() > prof[:, 0, b].mean() + 0.1
    flat = ivp.sample_personas(
        64, 0.3, key=key, config=ivp.PersonaConfig(context_strength=0.0, noise=0.0)
    )
    np.testing.assert_allclose(np.asarray(flat.profiles).std(1), 0.0, atol=1e-6)


def test_chat_prober_matches_numeric_questionnaire(world, key):
    bank, library, personas = world
    cfg = ivp.ProberConfig(turns=4)
    ep = ivp.probe(
        "questionnaire",
        bank,
        library,
        personas,
        key=key,
        persona_config=PC,
        config=cfg,
        deterministic=True,
    )

    def scripted(messages):  # asks questions 1, 2, 3, ... like the questionnaire
        return f"Question {messages[-1]['content'].count('Q') + 1}, please."

    prober = ivp.ChatModelProber(
        FunctionChatModel(scripted), bank, library, persona_config=PC, config=cfg
    )
    persona = ivp.persona_chat_model(personas, 1, bank, persona_config=PC)
    talk = prober.interview(persona, "negotiation", key=key, persona_temperature=0.0)
    assert talk.parse_failures == 0
    np.testing.assert_array_equal(talk.questions, np.asarray(ep.questions[1, 2]))
    np.testing.assert_array_equal(talk.answers, np.asarray(ep.answers[1, 2]))
    np.testing.assert_allclose(np.asarray(talk.log_post), np.asarray(ep.log_post[1, 2]), atol=1e-5)
    msgs = talk.transcript.messages()
    assert len(msgs) == 8 and msgs[1]["content"].startswith("I would say")
    # logprob over all answers of a question is a distribution.
    q = msgs[:1]
    total = sum(np.exp(persona.logprob(q, f"I would say {i}.")) for i in range(1, 6))
    np.testing.assert_allclose(total, 1.0, rtol=1e-5)


def test_text_round_trip(world):
    bank, *_ = world
    for c, q in [(0, 3), (2, 12)]:
        n = int(np.asarray(bank.valid[c, q]).sum())
        for a in range(n):
            assert ivp.parse_answer(bank, c, q, ivp.answer_text(bank, c, q, a)) == a
    assert "negotiation" in ivp.question_text(bank, 2, 12)
    with pytest.raises(ValueError, match="names no answer"):
        ivp.parse_answer(bank, 0, 12, "no idea")


def test_bad_input(world, key):
    bank, library, personas = world
    with pytest.raises(ValueError, match="unknown value names"):
        ivp.value_index(["power", "wealth"])
    with pytest.raises(ValueError, match="empty"):
        ivp.value_index([])
    with pytest.raises(ValueError, match="unknown value names"):
        ivp.profile_from_dict({"greed": 1.0})
    with pytest.raises(ValueError, match="empty persona set"):
        ivp.sample_personas(0, 0.5, key=key, config=PC)
    empty = ivp.Personas(jnp.zeros((0, 4, 10)), jnp.zeros(0))
    with pytest.raises(ValueError, match="non-empty persona set"):
        ivp.probe("strategic", bank, library, empty, key=key, persona_config=PC, config=CFG)
    with pytest.raises(ValueError, match="policy="):
        ivp.probe("oracle", bank, library, personas, key=key, persona_config=PC, config=CFG)
    with pytest.raises(ValueError, match="needs student"):
        ivp.probe("distilled", bank, library, personas, key=key, persona_config=PC, config=CFG)
    with pytest.raises(ValueError, match="concealment"):
        ivp.sample_personas(2, 1.5, key=key, config=PC)
    with pytest.raises(ValueError, match="context="):
        ivp.context_index("school")
    with pytest.raises(ValueError, match="turns="):
        ivp.ProberConfig(turns=0)
    with pytest.raises(ValueError, match="beta="):
        ivp.PersonaConfig(beta=0.0)
    with pytest.raises(ValueError, match="library has shape"):
        ivp.probe("random", bank, library[:, :3], personas, key=key, persona_config=PC, config=CFG)


def test_http_interview_equals_in_process(world, key):
    """Prober and persona behind ``jaxpapers serve``, reached with the OpenAI client: the same
    transcript as in process for the same key."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from jaxpapers.core.chat import OpenAIChat, serve

    bank, library, personas = world
    cfg = ivp.ProberConfig(turns=3)

    def scripted(messages):
        return str(messages[-1]["content"].count("Q") + 11)  # scenarios 11, 12, 13

    prober_model = FunctionChatModel(scripted, name="prober")
    persona = ivp.persona_chat_model(personas, 2, bank, persona_config=PC)
    local = ivp.ChatModelProber(prober_model, bank, library, persona_config=PC, config=cfg)
    want = local.interview(persona, "work", key=key)
    with serve({"prober": prober_model, "persona": persona}) as server:
        clients = [OpenAIChat(server.url, model=m, timeout=30) for m in ("prober", "persona")]
        remote = ivp.ChatModelProber(clients[0], bank, library, persona_config=PC, config=cfg)
        got = remote.interview(clients[1], "work", key=key)
        for client in clients:  # close the connections before the server stops
            client.client.close()
    assert got.transcript.messages() == want.transcript.messages()
    np.testing.assert_array_equal(got.questions, [10, 11, 12])
    np.testing.assert_allclose(np.asarray(got.log_post), np.asarray(want.log_post), rtol=1e-6)
