"""Psy-CoT prompts, and GRPO vs RAPO losses on rollouts of a small decoder in the role-play world.

python examples/rapo.py

The policy here is untrained and tiny; ``jaxpapers reproduce P05`` warms a policy up and trains
it with GRPO and RAPO (``rl_step``) to compare them.

What you should see: a Psy-CoT prompt and a formatted reply, then the GRPO and RAPO losses of
one batch of 16 rollouts (4 prompts x 4 samples), and the batch's judge reward and profile
fidelity. RAPO's PMI compares the reference with the full context and with the role information
masked (``mask_role``: the profile and the Psy-CoT empathy / logic contents become NULL). The
policy is untrained, so the numbers only show the API: expected are finite losses
that differ (RAPO reweights the same advantages by each token's profile PMI) and a reward and
fidelity near 0, what an untrained policy earns.
"""

import jax
import jax.numpy as jnp
from flax import nnx

from jaxpapers.core.nn.decoder import DecoderLM
from jaxpapers.rapo import (
    COMPLETION_LEN,
    PROMPT_LEN,
    PsyCoT,
    World,
    build_prompt,
    completion_log_probs,
    completion_mask,
    draw_batch,
    format_psycot,
    group_advantages,
    grpo_loss,
    rapo_loss,
    role_pmi,
    rollout,
    score,
    split_profiles,
)

# 1. the Psy-CoT format for a text LLM
profile = {"name": "Mira", "occupation": "lighthouse keeper", "temperament": "gruff"}
print(build_prompt(profile, "Is the storm coming?"))
print(format_psycot(PsyCoT("asks about the storm", "uneasy", "the lamp, the tide", "Aye.")))

# 2. GRPO and RAPO on rollouts of a (here untrained) policy in the synthetic world
world = World()
lm = DecoderLM(
    world.vocab_size,
    d_model=32,
    num_heads=4,
    num_layers=1,
    max_len=PROMPT_LEN + COMPLETION_LEN,
    rngs=nnx.Rngs(0),
)
graphdef, state = nnx.split(lm)
train, unseen = split_profiles(world)


@jax.jit  # one compiled program (called eagerly, every op would dispatch on its own)
def losses(state, key):
    kb, kr = jax.random.split(key)
    batch = draw_batch(jnp.asarray(train), 4, key=kb)
    tokens = rollout(graphdef, state, world, batch, key=kr, group_size=4)
    expanded = jax.tree.map(lambda a: jnp.repeat(a, 4, axis=0), batch)
    scores = score(world, expanded, tokens[:, PROMPT_LEN:])
    adv = group_advantages(scores.hackable_reward.reshape(4, 4)).reshape(-1)
    mask = completion_mask(tokens[:, PROMPT_LEN:])
    logp = completion_log_probs(graphdef, state, tokens)
    # the reference (here the same untrained policy) reads the rollouts with and without the role
    pmi, _ = role_pmi(
        lambda contexts, targets: completion_log_probs(graphdef, state, targets, context=contexts),
        tokens,
    )
    grpo = grpo_loss(logp, logp, adv, mask).loss
    rapo = rapo_loss(logp, logp, adv, mask, pmi, alpha=1.0, gamma=0.5).loss
    return grpo, rapo, scores.hackable_reward.mean(), scores.fidelity.mean()


grpo, rapo, reward, fidelity = losses(state, jax.random.key(0))
print("GRPO loss", float(grpo))
print("RAPO loss", float(rapo))
print("judge reward", float(reward), "fidelity", float(fidelity))
finite = bool(jnp.isfinite(grpo) & jnp.isfinite(rapo))
print(
    "Expected: finite GRPO and RAPO losses that differ (PMI reweighting) and a reward near 0: "
    + ("as expected." if finite and float(grpo) != float(rapo) else "NOT as expected.")
)
