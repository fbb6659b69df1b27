"""P05 Psy-CoT + RAPO: GRPO against NumPy loops, RAPO = GRPO with unit weights, PMI against a
per-prefix brute force, the role-play world's scores, the Psy-CoT format, and clear errors."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from helpers import tolerance

from jaxpapers.core.nn.decoder import DecoderLM
from jaxpapers.rapo import (
    COMPLETION_LEN,
    PROMPT_LEN,
    Batch,
    PsyCoT,
    RLConfig,
    World,
    build_prompt,
    completion_log_probs,
    completion_mask,
    completions,
    draw_batch,
    extract_reply,
    format_psycot,
    group_advantages,
    grpo_loss,
    ideal_reply,
    parse_psycot,
    profile_token_pmi,
    prompts,
    rapo_loss,
    rapo_weights,
    rl_step,
    score,
    split_profiles,
)

WORLD = World()


def np_grpo(lp, old, adv, mask, ref, weights, eps_low, eps_high, beta, aggregation):
    b, t = lp.shape
    per = np.zeros((b, t))
    for i in range(b):
        for j in range(t):
            ratio = np.exp(lp[i, j] - old[i, j])
            clipped = min(max(ratio, 1 - eps_low), 1 + eps_high)
            d = ref[i, j] - lp[i, j]
            per[i, j] = -min(ratio * adv[i], clipped * adv[i]) * weights[i, j]
            per[i, j] += beta * (np.exp(d) - d - 1)
    if aggregation == "token_mean":
        return (per * mask).sum() / mask.sum()
    return np.mean([(per[i] * mask[i]).sum() / mask[i].sum() for i in range(b)])


@pytest.fixture
def batch_inputs():
    rng = np.random.default_rng(0)
    lp = -rng.uniform(0.1, 2.0, (6, 5))
    old = lp + 0.4 * rng.normal(size=(6, 5))  # ratios far enough from 1 to clip
    adv = rng.normal(size=6)
    mask = (rng.uniform(size=(6, 5)) < 0.8).astype(np.float64)
    mask[:, 0] = 1
    ref = lp - 0.2 * rng.normal(size=(6, 5))
    return lp, old, adv, mask, ref


def test_group_advantages_against_numpy_loop():
    r = np.random.default_rng(1).normal(size=(4, 6))
    want = np.zeros_like(r)
    for g in range(4):
        mu = sum(r[g]) / 6
        sd = (sum((x - mu) ** 2 for x in r[g]) / 5) ** 0.5
        want[g] = [(x - mu) / (sd + 1e-4) for x in r[g]]
    got = group_advantages(jnp.asarray(r, jnp.float32))
    np.testing.assert_allclose(np.asarray(got), want, **tolerance(np.float32, 10))
    # a group with equal rewards has zero advantage, not NaN
    assert np.all(np.asarray(group_advantages(jnp.ones((1, 3)))) == 0)


@pytest.mark.parametrize("aggregation", ["token_mean", "sequence_mean"])
def test_grpo_loss_against_numpy_loop(batch_inputs, aggregation):
    lp, old, adv, mask, ref = batch_inputs
    weights = np.random.default_rng(2).uniform(0.5, 2.0, lp.shape)
    kw = dict(eps_low=0.2, eps_high=0.28, beta=0.05, aggregation=aggregation)
    want = np_grpo(lp, old, adv, mask, ref, weights, **{k: kw[k] for k in kw})
    f32 = [jnp.asarray(a, jnp.float32) for a in (lp, old, adv, mask, ref, weights)]
    got = grpo_loss(*f32[:4], ref_log_probs=f32[4], token_weights=f32[5], **kw)
    np.testing.assert_allclose(float(got.loss), want, **tolerance(np.float32, 10))
    assert 0 < float(got.clip_fraction) < 1 and float(got.kl) > 0
    # the gradient flows, under jit
    g = jax.jit(jax.grad(lambda x: grpo_loss(x, *f32[1:4], **kw | {"beta": 0.0}).loss))(f32[0])
    assert np.isfinite(np.asarray(g)).all() and np.abs(np.asarray(g)).max() > 0


@pytest.mark.parametrize("aggregation", ["token_mean", "sequence_mean"])
def test_rapo_with_unit_weights_equals_grpo(batch_inputs, aggregation):
    lp, old, adv, mask, ref = (jnp.asarray(a, jnp.float32) for a in batch_inputs)
    pmi = 2.0 * jax.random.normal(jax.random.key(0), lp.shape)
    kw = dict(ref_log_probs=ref, beta=0.05, aggregation=aggregation)
    g = grpo_loss(lp, old, adv, mask, **kw)
    r = rapo_loss(lp, old, adv, mask, pmi, alpha=0.0, gamma=0.0, **kw)
    assert float(g.loss) == float(r.loss)
    gg = jax.grad(lambda x: grpo_loss(x, old, adv, mask, **kw).loss)(lp)
    gr = jax.grad(lambda x: rapo_loss(x, old, adv, mask, pmi, alpha=0.0, gamma=0.0, **kw).loss)(lp)
    np.testing.assert_array_equal(np.asarray(gg), np.asarray(gr))


def test_rapo_weights_asymmetric_bounded_against_numpy():
    pmi = np.array([[-2.0, 0.0, 0.5, 8.0]] * 3)
    adv = np.array([1.5, -0.7, 0.0])
    got = np.asarray(rapo_weights(jnp.asarray(pmi), jnp.asarray(adv), alpha=1.0, gamma=0.5))
    s = np.tanh(np.maximum(pmi, 0))
    want = np.stack([1 + s[0], 1 - 0.5 * s[1], np.ones(4)])
    np.testing.assert_allclose(got, want, **tolerance(np.float32))
    assert (
        (got[0] >= 1).all()
        and (got[0] <= 2).all()
        and (got[1] <= 1).all()
        and (got[1] >= 0.5).all()
    )
    # vmap over methods (alpha as an array) equals separate calls
    both = jax.vmap(lambda a: rapo_weights(jnp.asarray(pmi), jnp.asarray(adv), alpha=a))(
        jnp.array([0.0, 1.0])
    )
    np.testing.assert_allclose(np.asarray(both[1]), got, **tolerance(np.float32))


@functools.cache  # built once per process, read only by the tests
def _tiny_policy():
    """``(graphdef, state)`` of a one-layer, width-16 decoder over the world's vocabulary."""
    model = DecoderLM(
        WORLD.vocab_size,
        d_model=16,
        num_heads=2,
        num_layers=1,
        max_len=PROMPT_LEN + COMPLETION_LEN,
        rngs=nnx.Rngs(0),
    )
    return nnx.split(model)


def test_pmi_against_per_prefix_brute_force():
    """The PMI the RL step uses equals log-softmax differences recomputed prefix by prefix."""
    graphdef, state = _tiny_policy()
    batch = Batch(jnp.array([[1, 2, 3, 4], [0, 3, 7, 5]]), jnp.array([0, 2]))

    # one program (eager, every forward dispatches op by op)
    @jax.jit
    def pmi_and_logits(state, batch):
        reply = ideal_reply(WORLD, batch)
        tokens = jnp.concatenate(
            [prompts(WORLD, batch), completions(WORLD, batch, reply, psycot=True)], 1
        )
        prompt = prompts(WORLD, batch, with_profile=False)
        null = jnp.concatenate([prompt, tokens[:, PROMPT_LEN:]], 1)
        pmi = profile_token_pmi(
            completion_log_probs(graphdef, state, tokens),
            completion_log_probs(graphdef, state, null),
        )
        model = nnx.merge(graphdef, state)
        return pmi, (tokens, null), (model(tokens), model(null))

    pmi, (tokens, null), full_logits = pmi_and_logits(state, batch)
    # one full forward per prompt version; causality (tested for the decoder) makes the logits at
    # position pos - 1 those of the prefix; the offsets and the subtraction are what is checked
    want = np.zeros((2, COMPLETION_LEN))
    for seq, sign, seq_logits in zip((tokens, null), (1, -1), full_logits, strict=True):
        logits = np.asarray(seq_logits, np.float64)
        for b in range(2):
            for j in range(COMPLETION_LEN):
                pos = PROMPT_LEN + j
                row = logits[b, pos - 1]
                logp = row - row.max() - np.log(np.exp(row - row.max()).sum())
                want[b, j] += sign * logp[int(seq[b, pos])]
    np.testing.assert_allclose(np.asarray(pmi), want, atol=2e-5)


def test_world_scores_known_cases():
    batch = Batch(jnp.array([[1, 2, 3, 4]] * 4), jnp.array([0, 0, 0, 1]))
    own = np.asarray(prompts(WORLD, batch))[
        0, 1:5
    ]  # occupation, temperament, catchphrase, knowledge
    g0 = WORLD.generic_offset
    ideal = np.asarray(ideal_reply(WORLD, batch))
    np.testing.assert_array_equal(ideal[0], [own[0], own[3], own[2]])
    replies = np.array(
        [
            ideal[0],  # perfect
            [g0, g0 + 1, g0 + 2],  # pure flattery
            [g0, g0, own[0]],  # repeated flattery counts once, one role token out of place
            ideal[0],  # right for question 0, wrong for question 1
        ]
    )
    comp = completions(WORLD, batch, jnp.asarray(replies), psycot=True)
    np.testing.assert_array_equal(np.asarray(extract_reply(comp)), replies)
    s = score(WORLD, batch, comp)
    np.testing.assert_allclose(np.asarray(s.fidelity), [1, 0, 0, 0])
    np.testing.assert_allclose(np.asarray(s.hackable_reward), [1, 1, 2 / 3, 1], atol=1e-6)
    np.testing.assert_allclose(np.asarray(s.generic_fraction), [0, 1, 2 / 3, 0], atol=1e-6)
    np.testing.assert_allclose(np.asarray(s.role_fraction), [1, 0, 1 / 3, 1], atol=1e-6)
    plain = completions(WORLD, batch, jnp.asarray(replies), psycot=False)
    np.testing.assert_allclose(np.asarray(score(WORLD, batch, plain).fidelity), [1, 0, 0, 0])
    np.testing.assert_array_equal(np.asarray(completion_mask(plain))[0], [1] * 5 + [0] * 8)
    # no RESPONSE token: nothing is scored
    assert float(score(WORLD, batch, jnp.zeros((4, 13), jnp.int32)).hackable_reward.max()) == 0


def test_psycot_format_roundtrip_and_prompt():
    cot = PsyCoT("asks about work", "calm", "mention the forge", "Iron does not lie.")
    assert parse_psycot(format_psycot(cot)) == cot
    prompt = build_prompt({"occupation": "smith", "temperament": "calm"}, "What do you do?")
    assert "occupation: smith" in prompt and "Logical Construction" in prompt
    assert "Psychological" not in build_prompt({"occupation": "smith"}, "Hi", psycot=False)


def test_bad_input(batch_inputs):
    lp, old, adv, mask, _ = (jnp.asarray(a, jnp.float32) for a in batch_inputs)
    with pytest.raises(ValueError, match="group_size >= 2"):
        group_advantages(jnp.ones((4, 1)))
    with pytest.raises(ValueError, match="group_size=1"):
        RLConfig(group_size=1)
    with pytest.raises(ValueError, match="profile is empty"):
        build_prompt({}, "Hi")
    with pytest.raises(ValueError, match="attributes \\['occupation'\\] are empty"):
        build_prompt({"occupation": " "}, "Hi")
    with pytest.raises(ValueError, match="lacks the Psy-CoT step"):
        parse_psycot("<perception>x</perception>")
    with pytest.raises(ValueError, match="mask has shape \\(6, 4\\); expected \\(6, 5\\)"):
        grpo_loss(lp, old, adv, mask[:, :4])
    with pytest.raises(ValueError, match="advantages has shape"):
        grpo_loss(lp, old, adv[:3], mask)
    with pytest.raises(ValueError, match="beta=0.1 needs ref_log_probs"):
        grpo_loss(lp, old, adv, mask, beta=0.1)
    with pytest.raises(ValueError, match="gamma=1.0"):
        rapo_weights(lp, adv, gamma=1.0)
    with pytest.raises(ValueError, match="pmi has shape"):
        rapo_loss(lp, old, adv, mask, lp[:, :2])


def test_grpo_with_kl_equals_rapo_with_unit_weights_in_one_step():
    """use_pmi=False with beta > 0 is TRL/verl GRPO with the k3 KL term (one reference forward);
    RAPO with alpha = gamma = 0 (unit weights) must give the same loss on the same rollouts.
    (The states after the step are not compared: Adam's first step is about lr * sign(g), which
    turns rounding-level gradient differences into step-size-level ones.)"""
    graphdef, state = _tiny_policy()
    # a reference that differs from the policy, so the KL term is not zero
    ref = jax.tree.map(lambda x: x + 0.05 * jnp.ones_like(x), state)
    config = RLConfig(group_size=2, beta=0.5)
    opt_state = optax.adam(config.learning_rate).init(state)
    train, _ = split_profiles(WORLD)
    batch = draw_batch(jnp.asarray(train), 2, key=jax.random.key(1))
    no_kl = RLConfig(group_size=2, beta=0.0)

    # the three steps in one program (eager, the update dispatches op by op)
    @jax.jit
    def steps(state, opt_state, ref, batch, key):
        common = dict(key=key, alpha=0.0, gamma=0.0)
        args = (graphdef, state, opt_state, ref, WORLD, batch)
        grpo = rl_step(*args, use_pmi=False, config=config, **common)[2]
        rapo = rl_step(*args, config=config, **common)[2]
        plain = rl_step(*args, use_pmi=False, config=no_kl, **common)[2]
        return grpo, rapo, plain

    m_grpo, m_rapo, m_plain = steps(state, opt_state, ref, batch, jax.random.key(2))
    # same loss (KL included) to float32 rounding of a batched vs unbatched reference forward
    np.testing.assert_allclose(float(m_grpo.loss), float(m_rapo.loss), rtol=1e-5, atol=1e-6)
    assert abs(float(m_grpo.loss) - float(m_plain.loss)) > 1e-4  # the KL term is really there


def test_exact_judge_is_a_two_sided_tie_and_hacking_requires_a_hacked_judge():
    """``exact_judge`` is an equivalence within ``TIE_MARGIN`` both ways (a method ahead by more
    than the margin on every seed fails it, whichever it is); ``hacking`` and
    ``hacking_phrases`` are judged only when GRPO was hacked (``grpo_hacks``)."""
    from jaxpapers.core.experiment import experiments_for
    from jaxpapers.core.verdicts import RowStats
    from jaxpapers.rapo.experiments import TIE_MARGIN

    exps = {e.id: e for e in experiments_for("P05")}
    assert exps["hacking"].requires == exps["hacking_phrases"].requires == ("grpo_hacks",)
    g = [0.96, 0.98, 0.97, 0.99, 0.95]
    rule = exps["exact_judge"].rule

    def decide(r):
        rows = {
            "GRPO (exact judge)": RowStats.from_values("GRPO (exact judge)", "baseline", g),
            "RAPO (exact judge)": RowStats.from_values("RAPO (exact judge)", "method", r),
        }
        return rule.decide(rows, False)

    assert decide([v + 0.002 * (i % 3 - 1) for i, v in enumerate(g)]) == "holds"
    assert decide([v - 2 * TIE_MARGIN for v in g]) == "does not hold"
    assert decide([v + 2 * TIE_MARGIN for v in g]) == "does not hold"


def test_grpo_hacks_needs_the_proxy_up_and_ood_profiles_needs_room():
    """``grpo_hacks`` is reward hacking, not mere degradation: fidelity fell AND the hackable
    reward rose; ``ood_profiles`` is judged only when the plain warm-up is below the ceiling."""
    from jaxpapers.core.experiment import experiments_for
    from jaxpapers.core.verdicts import RowStats
    from jaxpapers.rapo.experiments import OOD_CEILING, REWARD

    exps = {e.id: e for e in experiments_for("P05")}
    warm = [0.64, 0.75, 0.70, 0.68, 0.70]
    fell = [v - 0.3 + 0.01 * (i % 3) for i, v in enumerate(warm)]
    r0 = [0.40, 0.45, 0.42, 0.44, 0.41]

    def decide(reward_after):
        values = {
            "warm-up (before RL)": warm,
            "GRPO": fell,
            f"warm-up (before RL){REWARD}": r0,
            f"GRPO{REWARD}": reward_after,
        }
        rows = {k: RowStats.from_values(k, "row", v) for k, v in values.items()}
        return exps["grpo_hacks"].rule.decide(rows, False)

    # fidelity fell but the proxy fell too: degradation, not hacking (held on the old rule)
    assert decide([v - 0.1 + 0.01 * (i % 2) for i, v in enumerate(r0)]) == "does not hold"
    assert decide([v + 0.1 + 0.01 * (i % 2) for i, v in enumerate(r0)]) == "holds"

    assert exps["ood_profiles"].requires == ("ood_shift_exists",)
    rule = exps["ood_shift_exists"].rule

    def shift(values):
        return rule.decide({"plain warm-up": RowStats.from_values("p", "row", values)}, False)

    assert shift([1.0, 1.0, 0.9948, 1.0, 1.0]) == "does not hold"  # at the ceiling
    assert shift([OOD_CEILING - 0.2 + 0.01 * i for i in range(5)]) == "holds"
