"""P05 Psy-CoT + RAPO: GRPO against NumPy loops, RAPO = GRPO with unit weights, PMI against a
per-prefix brute force and against closed forms on a tabular policy, the role-play world's scores,
the Psy-CoT format, the tuning protocol, and clear errors."""

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
    mask_role,
    parse_psycot,
    prompts,
    rapo_loss,
    rapo_weights,
    rl_loss,
    rl_optimizer,
    rl_step,
    role_pmi,
    rollout,
    score,
    split_profiles,
)
from jaxpapers.rapo._world import (
    EMPATHY,
    EOS,
    LOGIC,
    NULL,
    PERCEIVE,
    RESPONSE,
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
    """The PMI the RL step uses (:func:`role_pmi` over :func:`completion_log_probs`) equals
    log-softmax differences recomputed prefix by prefix, the reference reading the rollouts with
    the profile and the role-reasoning contents masked."""
    graphdef, state = _tiny_policy()
    batch = Batch(jnp.array([[1, 2, 3, 4], [0, 3, 7, 5]]), jnp.array([0, 2]))

    def lp(contexts, targets):
        return completion_log_probs(graphdef, state, targets, context=contexts)

    # one program (eager, every forward dispatches op by op)
    @jax.jit
    def pmi_and_logits(state, batch):
        reply = ideal_reply(WORLD, batch)
        tokens = jnp.concatenate(
            [prompts(WORLD, batch), completions(WORLD, batch, reply, psycot=True)], 1
        )
        masked = mask_role(tokens)
        pmi, full = role_pmi(lp, tokens)
        model = nnx.merge(graphdef, state)
        return pmi, full, (tokens, masked), (model(tokens), model(masked))

    pmi, full, (tokens, masked), full_logits = pmi_and_logits(state, batch)
    # one full forward per context; causality (tested for the decoder) makes the logits at
    # position pos - 1 those of the prefix; the offsets, the masking and the subtraction are
    # what is checked (the target is always the true token, also where the context is masked)
    want = np.zeros((2, 2, COMPLETION_LEN))
    for k, seq_logits in enumerate(full_logits):
        logits = np.asarray(seq_logits, np.float64)
        for b in range(2):
            for j in range(COMPLETION_LEN):
                pos = PROMPT_LEN + j
                row = logits[b, pos - 1]
                logp = row - row.max() - np.log(np.exp(row - row.max()).sum())
                want[k, b, j] = logp[int(tokens[b, pos])]
    np.testing.assert_allclose(np.asarray(full), want[0], atol=2e-5)
    np.testing.assert_allclose(np.asarray(pmi), want[0] - want[1], atol=2e-5)
    # the masked context hides the profile and the empathy / logic contents, nothing else
    m = np.asarray(masked)
    assert (m[:, 1:5] == NULL).all() and (m[:, PROMPT_LEN + 3] == NULL).all()
    assert (m[:, PROMPT_LEN + 5 : PROMPT_LEN + 8] == NULL).all()
    keep = np.ones(PROMPT_LEN + COMPLETION_LEN, bool)
    keep[[1, 2, 3, 4, PROMPT_LEN + 3, PROMPT_LEN + 5, PROMPT_LEN + 6, PROMPT_LEN + 7]] = False
    np.testing.assert_array_equal(m[:, keep], np.asarray(tokens)[:, keep])


def test_mask_role_layouts():
    """Plain completions keep everything but the profile; a reasoning step without a reply is
    masked to the end; ``reasoning=False`` is the profile-only mask; markers always stay."""
    batch = Batch(jnp.array([[1, 2, 3, 4]]), jnp.array([1]))
    reply = ideal_reply(WORLD, batch)
    plain = jnp.concatenate(
        [prompts(WORLD, batch), completions(WORLD, batch, reply, psycot=False)], 1
    )
    np.testing.assert_array_equal(
        np.asarray(mask_role(plain)), np.asarray(plain.at[:, 1:5].set(NULL))
    )
    psy = jnp.concatenate([prompts(WORLD, batch), completions(WORLD, batch, reply, psycot=True)], 1)
    np.testing.assert_array_equal(
        np.asarray(mask_role(psy, reasoning=False)), np.asarray(psy.at[:, 1:5].set(NULL))
    )
    # a sampled completion that never replies: everything after LOGIC is masked but markers
    t = [int(x) for x in np.asarray(psy)[0, PROMPT_LEN:]]
    broken = [PERCEIVE, t[1], LOGIC, t[5], t[6], EMPATHY, t[3], t[7], t[5], t[6], t[7], EOS, EOS]
    row = jnp.concatenate([prompts(WORLD, batch), jnp.array([broken], jnp.int32)], 1)
    got = np.asarray(mask_role(row))[0, PROMPT_LEN:].tolist()
    assert got == [PERCEIVE, t[1], LOGIC] + [NULL] * 2 + [EMPATHY] + [NULL] * 5 + [EOS, EOS]


def _bayes_warmup_policy(world: World, rho: float):
    """A tabular policy: the exact next-token distribution of Psy-CoT warm-up data (reply token =
    the planned one w.p. ``1 - rho``, a uniform generic one otherwise) given any context, profile
    or role reasoning masked or not. Returns ``log_probs(contexts, targets)`` for
    :func:`role_pmi`."""
    sizes = np.asarray(world.attribute_sizes)
    offsets = np.asarray(world.attribute_offsets)
    kinds_of = np.asarray([[0, 3, 2], [1, 2, 0], [3, 0, 2], [2, 1, 3]])
    generic = world.generic_offset + np.arange(world.num_generic)

    def dist(ctx):  # {token: probability} of the next completion token after ``ctx``
        j, comp = len(ctx) - PROMPT_LEN, ctx[PROMPT_LEN:]
        q = ctx[6] - world.question_offset
        profile = None if ctx[1] == NULL else ctx[1:5]
        fixed = {0: PERCEIVE, 1: ctx[6], 2: EMPATHY, 4: LOGIC, 8: RESPONSE, 12: EOS}
        if j in fixed:
            return {fixed[j]: 1.0}
        if j == 3 or 5 <= j <= 7:  # temperament, or a plan token of kind k
            k = 1 if j == 3 else kinds_of[q][j - 5]
            if profile is not None:
                return {profile[k]: 1.0}
            return {offsets[k] + v: 1.0 / sizes[k] for v in range(sizes[k])}
        k = kinds_of[q][j - 9]  # a reply token
        out = {g: rho / len(generic) for g in generic}
        if profile is not None:
            out[profile[k]] = 1 - rho
        elif comp[5 + j - 9] != NULL:  # the plan shows it
            out[comp[5 + j - 9]] = 1 - rho
        else:
            out.update({offsets[k] + v: (1 - rho) / sizes[k] for v in range(sizes[k])})
        return out

    def log_probs(contexts, targets):
        c, t = np.asarray(contexts), np.asarray(targets)
        out = np.zeros((c.shape[0], COMPLETION_LEN))
        for b in range(c.shape[0]):
            for j in range(COMPLETION_LEN):
                p = dist(c[b, : PROMPT_LEN + j]).get(int(t[b, PROMPT_LEN + j]), 0.0)
                out[b, j] = np.log(p)
        return jnp.asarray(out)

    return log_probs


def test_role_pmi_known_answers_on_a_tabular_policy():
    """Closed forms under the exact warm-up distribution: a reply token naming an attribute of
    kind k gets PMI log n_k, a generic token 0, the temperament log 4, a plan token log n_k. With
    the profile-only reference (the code before issue 35, ``reasoning=False``) the same reply
    tokens get 0: the plan explains them, and RAPO's weight on the judged reply would be ~1.

    The tabular policy has independent attributes (with the profile masked, each kind is uniform
    whatever else the completion shows), and the test profiles break the stereotype. The
    pipeline instead warms up on the stereotyped split (``stereotyped_split``: temperament =
    occupation // 2), where the role-masked reference can infer the temperament from an
    occupation token, and the occupation (to one of 2 values) from a temperament token, already
    in the reply: e.g. for question type 1 (reply: temperament, kind 2, occupation) the exact
    stereotyped distribution gives the occupation token PMI log 2, not log 8. These closed forms
    are therefore those of independent attributes, not of the trained reference's PMI (whose
    per-class means are in the ``hacking`` extras)."""
    rho = 0.3
    log_probs = _bayes_warmup_policy(WORLD, rho)
    batch = Batch(jnp.array([[1, 2, 3, 4], [7, 0, 5, 2], [3, 3, 0, 6]]), jnp.array([0, 1, 3]))
    ideal = ideal_reply(WORLD, batch)
    g0 = WORLD.generic_offset
    reply = ideal.at[1, 1].set(g0 + 2).at[2, 0].set(g0)  # two generic tokens among role ones
    tokens = jnp.concatenate(
        [prompts(WORLD, batch), completions(WORLD, batch, reply, psycot=True)], 1
    )
    pmi, full = role_pmi(log_probs, tokens)
    old = role_pmi(log_probs, tokens, reasoning=False)[0]
    pmi, full, old = (np.asarray(a) for a in (pmi, full, old))
    assert np.isfinite(full).all()
    sizes = np.asarray(WORLD.attribute_sizes)
    kinds = np.asarray([[0, 3, 2], [1, 2, 0], [3, 0, 2], [2, 1, 3]])[np.asarray(batch.questions)]
    log_n = np.log(sizes[kinds])  # [3, 3]: log n_k of each reply / plan slot
    is_generic = np.asarray(reply) >= g0
    want_reply = np.where(is_generic, 0.0, log_n)
    np.testing.assert_allclose(pmi[:, 9:12], want_reply, atol=1e-6)
    np.testing.assert_allclose(pmi[:, 5:8], log_n, atol=1e-6)
    np.testing.assert_allclose(pmi[:, 3], np.log(4.0), atol=1e-6)
    np.testing.assert_allclose(pmi[:, [0, 1, 2, 4, 8, 12]], 0.0, atol=1e-6)
    # the profile-only reference: the reasoning tokens keep their PMI, the reply loses it
    np.testing.assert_allclose(old[:, 3:8], pmi[:, 3:8], atol=1e-6)
    np.testing.assert_allclose(old[:, 9:12], 0.0, atol=1e-6)
    # RAPO's weights on the reply under positive advantage: ~1 + tanh(log n_k) vs exactly 1
    w = np.asarray(rapo_weights(jnp.asarray(pmi), jnp.ones(3)))[:, 9:12]
    w_old = np.asarray(rapo_weights(jnp.asarray(old), jnp.ones(3)))[:, 9:12]
    np.testing.assert_allclose(w[~is_generic], 1 + np.tanh(log_n[~is_generic]), rtol=1e-6)
    np.testing.assert_allclose(w[is_generic], 1.0)
    np.testing.assert_allclose(w_old, 1.0)


def test_rl_loss_weights_by_the_role_masked_reference():
    """``rl_loss`` is RAPO's surrogate on its rollouts with the PMI of :func:`role_pmi` (the
    reference reads neither profile nor role reasoning), recomputed here step by step; with the
    profile-only PMI (the code before issue 35) the loss differs."""
    graphdef, state = _tiny_policy()
    # an untrained policy that says the step markers, role and generic tokens often, so that the
    # judge's rewards differ within a group and the rollouts hold reasoning steps to mask
    bias = np.full(WORLD.vocab_size, -4.0, np.float32)
    bias[[EMPATHY, LOGIC]] = 3.0
    bias[RESPONSE] = 4.0
    bias[WORLD.question_offset + 4 :] = 2.0  # attribute and generic tokens
    state = jax.tree.map(lambda x: x, state)
    state["head"]["bias"] = nnx.Param(jnp.asarray(bias))
    ref = jax.tree.map(lambda x: x + 0.05 * jnp.ones_like(x), state)
    config = RLConfig(group_size=8, beta=0.1)
    batch = Batch(jnp.array([[1, 2, 3, 4], [0, 3, 7, 5], [5, 1, 0, 2], [2, 2, 6, 7]]),
                  jnp.array([0, 2, 1, 3]))  # fmt: skip
    key = jax.random.key(3)

    def ref_lp(contexts, targets):
        return completion_log_probs(graphdef, ref, targets, context=contexts)

    @jax.jit
    def both(state):
        got = rl_loss(graphdef, state, ref, WORLD, batch, key=key, config=config, alpha=1.0,
                      gamma=0.5)[0]  # fmt: skip
        tokens = rollout(graphdef, state, WORLD, batch, key=key, group_size=8)
        expanded = Batch(jnp.repeat(batch.profiles, 8, 0), jnp.repeat(batch.questions, 8))
        reward = score(WORLD, expanded, tokens[:, PROMPT_LEN:]).hackable_reward
        adv = group_advantages(reward.reshape(-1, 8)).reshape(-1)
        mask = completion_mask(tokens[:, PROMPT_LEN:])
        lp = completion_log_probs(graphdef, state, tokens)
        out = []
        for reasoning in (True, False):
            pmi, full = role_pmi(ref_lp, tokens, reasoning=reasoning)
            kw = dict(ref_log_probs=full, beta=0.1, eps_high=config.eps_high)
            out.append(rapo_loss(lp, lp, adv, mask, pmi, alpha=1.0, gamma=0.5, **kw).loss)
        return got, out[0], out[1], adv

    got, want, profile_only, adv = both(state)
    assert float(jnp.max(jnp.abs(adv))) > 0  # the rollouts carry signal
    np.testing.assert_allclose(float(got), float(want), rtol=1e-5, atol=1e-6)
    assert abs(float(want) - float(profile_only)) > 1e-4


def test_warmup_trains_the_role_masked_reference():
    """``sft_loss``'s dropout reads the role-masked context: with dropout 1 the loss is the
    cross-entropy of the true completion given ``mask_role`` of it."""
    from jaxpapers.rapo import sft_loss, warmup_replies

    graphdef, state = _tiny_policy()
    batch = Batch(jnp.array([[1, 2, 3, 4], [0, 3, 7, 5]]), jnp.array([0, 2]))
    key = jax.random.key(4)
    got = sft_loss(graphdef, state, WORLD, batch, key=key, psycot=True, profile_dropout=1.0)
    reply = warmup_replies(WORLD, batch, key=jax.random.split(key)[0], generic_rate=0.3)
    target = completions(WORLD, batch, reply, psycot=True)
    tokens = jnp.concatenate([prompts(WORLD, batch), target], 1)
    lp = completion_log_probs(graphdef, state, tokens, context=mask_role(tokens))
    mask = completion_mask(target)
    np.testing.assert_allclose(float(got), float(-jnp.sum(lp * mask) / jnp.sum(mask)), rtol=1e-5)


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
    g = WORLD.generic_pay
    want = np.array([3, 3 * g, 1 + g, 3]) / (3 * g)
    np.testing.assert_allclose(np.asarray(s.hackable_reward), want, atol=1e-6)
    np.testing.assert_allclose(np.asarray(s.generic_fraction), [0, 1, 2 / 3, 0], atol=1e-6)
    np.testing.assert_allclose(np.asarray(s.role_fraction), [1, 0, 1 / 3, 1], atol=1e-6)
    plain = completions(WORLD, batch, jnp.asarray(replies), psycot=False)
    np.testing.assert_allclose(np.asarray(score(WORLD, batch, plain).fidelity), [1, 0, 0, 0])
    np.testing.assert_array_equal(np.asarray(completion_mask(plain))[0], [1] * 5 + [0] * 8)
    # no RESPONSE token: nothing is scored
    assert float(score(WORLD, batch, jnp.zeros((4, 13), jnp.int32)).hackable_reward.max()) == 0


def test_hackable_judge_overrates_generic_phrases():
    """The hackable judge pays a distinct generic phrase ``generic_pay > 1`` times a mention of
    the character: it scores three generic phrases (reward 1, fidelity 0) above the ideal reply
    (reward 1 / generic_pay, fidelity 1) that the exact judge prefers, and every swap of an
    ideal token for a new generic phrase raises its reward by (g - 1) / 3g while the fidelity
    falls by 1/3. With ``generic_pay = 1`` (the judge before this change) the two tie."""
    batch = Batch(jnp.array([[1, 2, 3, 4]] * 4), jnp.array([2] * 4))
    ideal = np.asarray(ideal_reply(WORLD, batch))[0]
    g0 = WORLD.generic_offset
    replies = np.array([ideal, [g0, ideal[1], ideal[2]], [g0, g0 + 1, ideal[2]],
                        [g0, g0 + 1, g0 + 2]])  # fmt: skip
    comp = completions(WORLD, batch, jnp.asarray(replies), psycot=True)
    g = WORLD.generic_pay
    assert g > 1
    s = score(WORLD, batch, comp)
    reward, fid = np.asarray(s.hackable_reward), np.asarray(s.fidelity)
    np.testing.assert_allclose(fid, [1, 2 / 3, 1 / 3, 0], atol=1e-6)
    np.testing.assert_allclose(np.diff(reward), (g - 1) / (3 * g), atol=1e-6)
    assert reward[-1] == pytest.approx(1.0) and reward[0] == pytest.approx(1 / g)
    # the hackable judge ranks the replies in the reverse order of the exact judge
    assert (np.diff(reward) > 0).all() and (np.diff(fid) < 0).all()
    tie = np.asarray(score(World(generic_pay=1.0), batch, comp).hackable_reward)
    np.testing.assert_allclose(tie, 1.0, atol=1e-6)
    with pytest.raises(ValueError, match="generic_pay=0.5"):
        score(World(generic_pay=0.5), batch, comp)


def test_grpo_on_the_hackable_judge_says_more_generic_phrases():
    """On a tiny bed (an untrained width-16 decoder that says role and generic tokens alike),
    GRPO on the hackable judge raises both its reward and the generic-phrase rate of its
    rollouts (to most of the reply); on the exact judge, from the same policy with the same keys,
    it stays far below that."""
    from jaxpapers.core.fit import fit
    from jaxpapers.rapo import stereotyped_split

    graphdef, state = _tiny_policy()
    bias = np.full(WORLD.vocab_size, -4.0, np.float32)
    bias[RESPONSE] = 4.0
    bias[WORLD.question_offset + 4 :] = 2.0  # attribute and generic tokens
    state = jax.tree.map(lambda x: x, state)
    state["head"]["bias"] = nnx.Param(jnp.asarray(bias))
    config = RLConfig(group_size=8)
    train = jnp.asarray(stereotyped_split(WORLD)[0])

    def batch_fn(_t, k):
        k_batch, k_step = jax.random.split(k)
        return draw_batch(train, 8, key=k_batch), k_step

    @jax.jit
    @jax.vmap
    def run(hackable):
        def loss_fn(s, batch, _k):
            return rl_loss(graphdef, s, state, WORLD, batch[0], key=batch[1], config=config,
                           alpha=0.0, gamma=0.0, hackable=hackable, use_pmi=False)  # fmt: skip

        opt = rl_optimizer(config=config, learning_rate=1e-2)
        return fit(loss_fn, state, opt, steps=40, key=jax.random.key(0), batch_fn=batch_fn,
                   has_aux=True).aux  # fmt: skip

    m = run(jnp.array([True, False]))
    gen = np.asarray(m.generic_fraction)
    first, last = gen[:, :5].mean(axis=1), gen[:, -5:].mean(axis=1)
    reward = np.asarray(m.reward)
    assert last[0] > first[0] + 0.2, (first, last)  # hackable judge: generic phrases up
    assert reward[0, -5:].mean() > reward[0, :5].mean() + 0.1
    assert last[1] < last[0] - 0.5, (first, last)  # exact judge: no drift to generic phrases


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
    with pytest.raises(ValueError, match="max_grad_norm=0"):
        RLConfig(max_grad_norm=0.0)
    with pytest.raises(ValueError, match="learning_rate=-1.0"):
        rl_optimizer(config=RLConfig(), learning_rate=-1.0)
    with pytest.raises(ValueError, match="context has shape"):
        completion_log_probs(*_tiny_policy(), jnp.zeros((2, 21), jnp.int32),
                             context=jnp.zeros((2, 20), jnp.int32))  # fmt: skip
    with pytest.raises(ValueError, match="tokens has shape"):
        mask_role(jnp.zeros((2, 5), jnp.int32))
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
    from jaxpapers.rapo.experiments import IN_DISTRIBUTION, OOD_CEILING, REWARD

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

    def shift(ood, seen):
        rows = {
            "plain warm-up": RowStats.from_values("p", "row", ood),
            IN_DISTRIBUTION: RowStats.from_values("s", "row", seen),
        }
        return rule.decide(rows, False)

    top = [1.0, 1.0, 0.9948, 1.0, 1.0]
    assert shift(top, top) == "does not hold"  # at the ceiling (the old bed)
    low = [OOD_CEILING - 0.2 + 0.01 * i for i in range(5)]
    assert shift(low, [v + 0.1 + 0.01 * (i % 2) for i, v in enumerate(low)]) == "holds"
    # low everywhere is no shift: unseen in-distribution characters are as hard
    assert shift(low, [v - 0.005 * (i % 2) for i, v in enumerate(low)]) != "holds"


def test_tuning_selects_on_validation_never_on_test_rows():
    """Each (method, judge) keeps the grid point with the best mean validation reward of the judge
    it trains on (the hackable judge's reward for its cells, fidelity for the exact judge's), the
    same rule for GRPO and RAPO; ``criterion="fidelity"`` selects the hackable-judge cells by
    validation fidelity instead; the test rows (``final_unseen``) play no part in the choice."""
    from jaxpapers.rapo import Scores
    from jaxpapers.rapo.experiments._pipeline import Pipeline, cell_indices, chosen

    grid = [(1e-3, 0.0), (1e-3, 0.04), (3e-3, 0.0)]
    cells, reward, fid, test = [], [], [], []
    for h in (True, False):
        for m in ("GRPO", "RAPO"):
            for k, (lr, b) in enumerate(grid):
                for seed in range(3):
                    cells.append((h, m, lr, b, seed))
                    # validation reward prefers the second point (the third for RAPO), validation
                    # fidelity the third (the second for RAPO), test the first
                    best = 2 if m == "RAPO" else 1
                    reward.append(0.9 if k == best else 0.5 + 0.01 * seed)
                    fid.append(0.9 if k == 3 - best else 0.5 + 0.01 * seed)
                    test.append(1.0 if k == 0 else 0.1)
    z = np.zeros(len(cells))
    scores = Scores(np.asarray(test), np.asarray(test), z, z)
    val = Scores(np.asarray(fid), np.asarray(reward), z, z)
    out = Pipeline(tuple(cells), z, scores, scores, scores, None, val, scores, scores, z, z)
    assert chosen(out, hackable=True, method="GRPO") == (1e-3, 0.04)  # by the reward
    assert chosen(out, hackable=True, method="RAPO") == (3e-3, 0.0)
    assert chosen(out, hackable=False, method="RAPO") == (1e-3, 0.04)  # by the fidelity
    assert chosen(out, hackable=True, method="GRPO", criterion="fidelity") == (3e-3, 0.0)
    idx = cell_indices(out, hackable=True, method="GRPO")
    assert [cells[i] for i in idx] == [(True, "GRPO", 1e-3, 0.04, s) for s in range(3)]


def test_kl_coefficient_is_fixed_a_priori_and_only_the_step_size_is_tuned():
    """Both methods share one grid whose KL coefficient is ``KL_BETA`` = 0.04 at every point,
    fixed a priori like RAPO's alpha / gamma; only the Adam step size is tuned (3e-4, 1e-3). The
    old grid ((1e-3, 0), (1e-3, 0.04)) let selection by the proxy reward strip GRPO of its only
    regulariser (it kept beta = 0) while RAPO's regulariser was off the grid."""
    from jaxpapers.rapo.experiments import SIZES
    from jaxpapers.rapo.experiments._pipeline import KL_BETA, RAPO

    assert KL_BETA == 0.04
    assert RAPO == {"alpha": 1.0, "gamma": 0.5}
    for size, config in SIZES.items():
        assert {b for _, b in config.grid} == {KL_BETA}, size
        assert sorted(lr for lr, _ in config.grid) == [3e-4, 1e-3], size


class _FakeContext:
    """The part of :class:`~jaxpapers.core.experiment.Context` the P05 experiments read, with the
    pipeline run already in hand."""

    def __init__(self, out, seeds):
        self.out, self.seed_list = out, list(range(seeds))

    def cached(self, _name, _compute):
        return self.out


def _scores(**fields):
    from jaxpapers.rapo import Scores

    n = len(next(iter(fields.values())))
    z = np.zeros(n)
    return Scores(**{f: np.asarray(fields.get(f, z), np.float64) for f in Scores._fields})


def test_ood_shift_reference_is_held_out_in_distribution_not_training_characters():
    """``ood_shift_exists`` compares the plain warm-up on stereotype-breaking characters with
    the same warm-up on held-out stereotyped characters (``warmup_test``: the training
    distribution, never trained on), not with its memorised training characters (extras)."""
    from jaxpapers.rapo.experiments import EXPERIMENTS, IN_DISTRIBUTION, _run
    from jaxpapers.rapo.experiments._pipeline import Pipeline

    n = 3  # per warm-up: Psy-CoT seeds then plain seeds
    ood = _scores(fidelity=[0.5, 0.5, 0.5, 0.40, 0.41, 0.42])
    held = _scores(fidelity=[0.8, 0.8, 0.8, 0.70, 0.71, 0.72])
    seen = _scores(fidelity=[0.9, 0.9, 0.9, 0.97, 0.98, 0.99])
    z = np.zeros(2 * n)
    out = Pipeline((), z, ood, held, seen, None, None, None, None, z, z)
    got = _run.ood_shift(_FakeContext(out, n), None)
    assert got.values == {"plain warm-up": [0.40, 0.41, 0.42], IN_DISTRIBUTION: [0.70, 0.71, 0.72]}
    assert got.extras["training_profiles_fidelity"] == [0.97, 0.98, 0.99]
    exp = next(e for e in EXPERIMENTS if e.id == "ood_shift_exists")
    assert exp.methods == (IN_DISTRIBUTION,) and exp.baselines == ("plain warm-up",)
    extras = _run.ood_profiles(_FakeContext(out, n), None).extras
    assert extras["held_out_stereotyped_profiles_fidelity"]["plain"] == [0.70, 0.71, 0.72]


def test_hacking_extras_pair_the_methods_at_each_grid_point_and_trace_the_frontier(tmp_path):
    """At every grid point of the hackable judge, RAPO - GRPO per seed (both at the same point),
    with the verdict engine's 90% paired-t interval; the gold-vs-proxy frontier is the mean over
    seeds and windows of steps of the proxy reward and fidelity per method and point."""
    from scipy import stats

    from jaxpapers.rapo import StepMetrics
    from jaxpapers.rapo.experiments import _run
    from jaxpapers.rapo.experiments._pipeline import Pipeline

    grid, seeds, steps = [(3e-4, 0.04), (1e-3, 0.04)], 4, 12
    rng = np.random.default_rng(0)
    cells = [(h, m, lr, b, s) for h in (True, False) for m in ("GRPO", "RAPO")
             for lr, b in grid for s in range(seeds)]  # fmt: skip
    fid = rng.uniform(size=len(cells))
    gen = rng.uniform(size=len(cells))
    curves = StepMetrics(*(rng.uniform(size=(len(cells), steps)) for _ in StepMetrics._fields))
    z = np.zeros(len(cells))
    test = _scores(fidelity=fid, generic_fraction=gen)
    out = Pipeline(tuple(cells), z, None, None, None, curves, test, test, test, z, z)
    at = _run._at_each_point(out)
    front = _run._frontier(out)
    for lr, b in grid:
        point = at[f"lr={lr:g}, beta={b:g}"]
        for f, values in (("fidelity", fid), ("generic_fraction", gen)):

            def pick(m, values=values, lr=lr, b=b):
                return np.array([values[cells.index((True, m, lr, b, s))] for s in range(seeds)])

            d = pick("RAPO") - pick("GRPO")
            got = point[f"RAPO - GRPO {f} (paired)"]
            np.testing.assert_allclose(got["per_seed"], d)
            half = stats.t.ppf(0.95, seeds - 1) * d.std(ddof=1) / np.sqrt(seeds)
            np.testing.assert_allclose(got["interval_90"], [d.mean() - half, d.mean() + half])
            assert point["GRPO"][f] == pytest.approx(pick("GRPO").mean())
        for m in ("GRPO", "RAPO"):
            rows = [cells.index((True, m, lr, b, s)) for s in range(seeds)]
            f = front[m][f"lr={lr:g}, beta={b:g}"]
            for name, field in (("proxy_reward", "reward"), ("fidelity", "fidelity")):
                seed_mean = getattr(curves, field)[rows].mean(0)
                want = [seed_mean[k : k + _run.FRONTIER_EVERY].mean() for k in front["steps"]]
                np.testing.assert_allclose(f[name], want)
    assert front["steps"] == list(range(0, steps, _run.FRONTIER_EVERY))
    # the experiment carries both, and its plot draws the frontier panel
    out = out._replace(pmi=np.zeros((seeds, 4)))
    outcome = _run.hacking(_FakeContext(out, seeds), None)
    assert outcome.extras["test_at_each_grid_point"] == at
    assert outcome.extras["gold_vs_proxy_along_training"] == front
    _run.plot_hacking(outcome, tmp_path / "hacking.png")
    assert (tmp_path / "hacking.png").stat().st_size > 0


def test_stereotyped_split():
    """Training and held-out characters follow the stereotype and do not overlap; the
    out-of-distribution ones are every other profile (each breaks it)."""
    from jaxpapers.rapo import all_profiles, stereotyped_split

    train, held, ood = stereotyped_split(WORLD)
    for p in (train, held):
        assert (p[:, 1] == p[:, 0] * 4 // 8).all()
    assert (ood[:, 1] != ood[:, 0] * 4 // 8).all()
    rows = {tuple(r) for r in np.concatenate([train, held, ood])}
    assert len(rows) == len(all_profiles(WORLD)) == len(train) + len(held) + len(ood)
    assert len(train) == 3 * len(held)
    # every attribute value still occurs in training (only the combinations are new)
    for k, n in enumerate(WORLD.attribute_sizes):
        assert set(train[:, k]) == set(range(n))
