"""Supervised warm-up loss, the on-policy GRPO / RAPO loss and one update of a decoder-LM policy
in the role-play world.

Everything is a pure function of the split model state (``nnx.split``), so seeds, methods and
reward kinds are ``jax.vmap``-ed: GRPO is RAPO with ``alpha = gamma = 0`` (exactly, see
:func:`~jaxpapers.rapo.rapo_loss`), which lets both methods share one compiled program. Training
runs are :func:`jaxpapers.core.fit.fit` of :func:`sft_loss` and :func:`rl_loss`.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_dtype, check_key, check_ndim
from jaxpapers.core.fit import all_finite, keep_where
from jaxpapers.core.nn.decoder import sample, token_log_probs
from jaxpapers.rapo._grpo import group_advantages
from jaxpapers.rapo._rapo import profile_token_pmi, rapo_loss
from jaxpapers.rapo._world import (
    COMPLETION_LEN,
    NULL,
    PROMPT_LEN,
    Batch,
    World,
    completion_mask,
    completions,
    prompts,
    score,
    warmup_replies,
)


class RLConfig(eqx.Module):
    """Settings of the policy-gradient stage.

    Attributes:
      group_size: completions per prompt (``>= 2``: the group mean is the baseline).
      learning_rate: Adam step size.
      temperature: sampling temperature of the rollouts.
      eps_low, eps_high: ratio clip range.
      beta: k3 KL coefficient to the reference (warm-up) policy.
      pmi_temperature: PMI scale of RAPO's weights.
    """

    group_size: int = eqx.field(static=True, default=8)
    learning_rate: float = eqx.field(static=True, default=3e-3)
    temperature: float = eqx.field(static=True, default=1.0)
    eps_low: float = eqx.field(static=True, default=0.2)
    eps_high: float = eqx.field(static=True, default=0.28)
    beta: float = eqx.field(static=True, default=0.0)
    pmi_temperature: float = eqx.field(static=True, default=1.0)

    def __check_init__(self):
        if self.group_size < 2:
            raise ValueError(
                f"group_size={self.group_size}; GRPO needs at least 2 completions per prompt"
            )
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate={self.learning_rate}; expected > 0")


class StepMetrics(NamedTuple):
    """Means over the step's rollouts."""

    reward: Float[Array, ""]
    fidelity: Float[Array, ""]
    role_fraction: Float[Array, ""]
    generic_fraction: Float[Array, ""]
    loss: Float[Array, ""]


def completion_log_probs(
    graphdef: nnx.GraphDef, state: nnx.State, tokens: Int[Array, "batch total"]
) -> Float[Array, "batch completion"]:
    """Log-probabilities of the completion tokens (positions ``PROMPT_LEN ..``) of ``tokens``."""
    check_ndim("tokens", tokens, 2)
    check_dtype("tokens", tokens, "integer")
    if tokens.shape[1] <= PROMPT_LEN:
        raise ValueError(
            f"tokens has shape {tokens.shape}; expected [batch, total] with total > {PROMPT_LEN} "
            "(a prompt and at least one completion token)"
        )
    model = nnx.merge(graphdef, state)
    logp = token_log_probs(model(tokens[:, :-1]), tokens[:, 1:])
    return logp[:, PROMPT_LEN - 1 :]


def sft_loss(
    graphdef: nnx.GraphDef,
    state: nnx.State,
    world: World,
    batch: Batch,
    *,
    key: jax.Array,
    psycot: bool | Array,
    generic_rate: float = 0.3,
    profile_dropout: float = 0.2,
) -> Float[Array, ""]:
    """Next-token cross-entropy on warm-up completions (plain or Psy-CoT format).

    A fraction ``profile_dropout`` of prompts has the profile replaced by ``NULL`` tokens, so the
    warm-up model also learns ``p(token | context)``, the reference RAPO's PMI needs.
    """
    check_key("key", key)
    k_reply, k_drop = jax.random.split(key)
    reply = warmup_replies(world, batch, key=k_reply, generic_rate=generic_rate)
    target = jnp.where(
        psycot,
        completions(world, batch, reply, psycot=True),
        completions(world, batch, reply, psycot=False),
    )
    drop = jax.random.bernoulli(k_drop, profile_dropout, (target.shape[0], 1))
    prompt = jnp.where(
        drop, prompts(world, batch, with_profile=False), prompts(world, batch, with_profile=True)
    )
    tokens = jnp.concatenate([prompt, target], axis=1)
    mask = completion_mask(target)
    logp = completion_log_probs(graphdef, state, tokens)
    return -jnp.sum(logp * mask) / jnp.sum(mask)


def rollout(
    graphdef: nnx.GraphDef,
    state: nnx.State,
    world: World,
    batch: Batch,
    *,
    key: jax.Array,
    group_size: int,
    temperature: float = 1.0,
) -> Int[Array, "rollouts total"]:
    """``group_size`` sampled completions per prompt (KV cache), ``[B * group_size, 8 + 13]``."""
    check_key("key", key)
    prompt = jnp.repeat(prompts(world, batch), group_size, axis=0)
    return sample(
        graphdef,
        state,
        prompt,
        key=key,
        max_new_tokens=COMPLETION_LEN,
        temperature=temperature,
    )


def rl_loss(
    graphdef: nnx.GraphDef,
    state: nnx.State,
    ref_state: nnx.State,
    world: World,
    batch: Batch,
    *,
    key: jax.Array,
    config: RLConfig,
    alpha: float | Array,
    gamma: float | Array,
    hackable: bool | Array = True,
    use_pmi: bool = True,
) -> tuple[Float[Array, ""], StepMetrics]:
    """The on-policy GRPO (``alpha = gamma = 0``) or RAPO loss of ``state`` on fresh rollouts.

    ``config.group_size`` completions per prompt of ``batch`` are sampled from ``state`` itself
    (under ``stop_gradient``: the rollouts are data, not a path for the gradient) and scored by
    the hackable judge (or, with ``hackable=False``, by the exact fidelity); advantages are
    normalised within each prompt's group; PMI comes from the frozen reference with and without
    the profile in the prompt. Its gradient in ``state`` is the policy gradient, so a training
    run is :func:`jaxpapers.core.fit.fit` of this loss (the rollouts of every step are drawn
    inside the step, from the parameters of that step).

    ``use_pmi=False`` skips the reference forward without the profile: RAPO's weights are then
    all 1, whatever ``alpha`` and ``gamma``, i.e. plain GRPO; with ``config.beta > 0`` it still
    runs the one reference forward that GRPO's k3 KL term needs (TRL/verl GRPO), with
    ``beta = 0`` none. RAPO (``use_pmi=True``) therefore costs one reference forward over GRPO
    with a KL term: the rollouts without the profile, batched with the KL forward.

    Returns:
      ``(loss, metrics)``: the surrogate loss and the :class:`StepMetrics` of the rollouts.
    """
    check_key("key", key)
    g = config.group_size
    tokens = rollout(
        graphdef,
        jax.lax.stop_gradient(state),
        world,
        batch,
        key=key,
        group_size=g,
        temperature=config.temperature,
    )
    expanded = Batch(jnp.repeat(batch.profiles, g, axis=0), jnp.repeat(batch.questions, g))
    completion = tokens[:, PROMPT_LEN:]
    scores = score(world, expanded, completion)
    reward = jnp.where(hackable, scores.hackable_reward, scores.fidelity)
    adv = group_advantages(reward.reshape(-1, g)).reshape(-1)
    mask = completion_mask(completion)
    if use_pmi:
        # one reference forward over the rollouts with and without the profile, batched together
        null_tokens = tokens.at[:, 1:5].set(NULL)
        both = completion_log_probs(
            graphdef, ref_state, jnp.concatenate([tokens, null_tokens], axis=0)
        )
        ref_lp, ref_null = jnp.split(both, 2, axis=0)
        pmi = profile_token_pmi(ref_lp, ref_null)
    elif config.beta:
        # GRPO with the k3 KL term (TRL/verl): one reference forward over the rollouts
        ref_lp = completion_log_probs(graphdef, ref_state, tokens)
        pmi = jnp.zeros(mask.shape, mask.dtype)
    else:
        ref_lp, pmi = None, jnp.zeros(mask.shape, mask.dtype)
    lp = completion_log_probs(graphdef, state, tokens)
    loss = rapo_loss(
        lp,
        jax.lax.stop_gradient(lp),
        adv,
        mask,
        pmi,
        alpha=alpha,
        gamma=gamma,
        temperature=config.pmi_temperature,
        ref_log_probs=ref_lp,
        eps_low=config.eps_low,
        eps_high=config.eps_high,
        beta=config.beta,
    ).loss
    metrics = StepMetrics(
        jnp.mean(reward),
        jnp.mean(scores.fidelity),
        jnp.mean(scores.role_fraction),
        jnp.mean(scores.generic_fraction),
        loss,
    )
    return loss, metrics


def rl_step(
    graphdef: nnx.GraphDef,
    state: nnx.State,
    opt_state: optax.OptState,
    ref_state: nnx.State,
    world: World,
    batch: Batch,
    *,
    key: jax.Array,
    config: RLConfig,
    alpha: float | Array,
    gamma: float | Array,
    hackable: bool | Array = True,
    use_pmi: bool = True,
) -> tuple[nnx.State, optax.OptState, StepMetrics]:
    """One on-policy GRPO (``alpha = gamma = 0``) or RAPO update: Adam on :func:`rl_loss`.

    For a caller that keeps its own optimiser state between steps (a training run of many
    steps is :func:`jaxpapers.core.fit.fit` of :func:`rl_loss`). A step with a non-finite loss,
    gradient or update is not applied: the policy and optimiser states come back unchanged
    (:func:`jaxpapers.core.fit.keep_where`), and ``metrics.loss`` shows the non-finite loss.

    Returns:
      The new policy state, optimiser state and :class:`StepMetrics` of the rollouts.
    """
    grad_fn = jax.value_and_grad(rl_loss, argnums=1, has_aux=True)
    (loss, metrics), grads = grad_fn(
        graphdef,
        state,
        ref_state,
        world,
        batch,
        key=key,
        config=config,
        alpha=alpha,
        gamma=gamma,
        hackable=hackable,
        use_pmi=use_pmi,
    )
    updates, new_opt = optax.adam(config.learning_rate).update(grads, opt_state, state)
    ok = jnp.isfinite(loss) & all_finite(grads) & all_finite(updates)
    new_state, opt_state = keep_where(
        ok, (optax.apply_updates(state, updates), new_opt), (state, opt_state)
    )
    return new_state, opt_state, metrics
