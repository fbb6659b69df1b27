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

from jaxpapers.core.checks import check_dtype, check_key, check_ndim, check_shape, is_concrete
from jaxpapers.core.fit import all_finite, keep_where
from jaxpapers.core.nn.decoder import sample, token_log_probs
from jaxpapers.rapo._grpo import group_advantages
from jaxpapers.rapo._rapo import rapo_loss, role_pmi
from jaxpapers.rapo._world import (
    COMPLETION_LEN,
    PROMPT_LEN,
    Batch,
    World,
    completion_mask,
    completions,
    mask_role,
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
      max_grad_norm: global-norm clip of the gradient before Adam (TRL's and verl's default
        1.0); ``None`` for no clipping.
    """

    group_size: int = eqx.field(static=True, default=8)
    learning_rate: float = eqx.field(static=True, default=3e-3)
    temperature: float = eqx.field(static=True, default=1.0)
    eps_low: float = eqx.field(static=True, default=0.2)
    eps_high: float = eqx.field(static=True, default=0.28)
    beta: float = eqx.field(static=True, default=0.0)
    pmi_temperature: float = eqx.field(static=True, default=1.0)
    max_grad_norm: float | None = eqx.field(static=True, default=1.0)

    def __check_init__(self):
        if self.group_size < 2:
            raise ValueError(
                f"group_size={self.group_size}; GRPO needs at least 2 completions per prompt"
            )
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate={self.learning_rate}; expected > 0")
        if self.max_grad_norm is not None and not self.max_grad_norm > 0:
            raise ValueError(f"max_grad_norm={self.max_grad_norm}; expected > 0 or None")


def rl_optimizer(
    *, config: RLConfig, learning_rate: float | Array | None = None
) -> optax.GradientTransformation:
    """Adam at ``learning_rate`` (default ``config.learning_rate``; may be traced, e.g. vmapped
    over a grid) after the global-norm clip ``config.max_grad_norm``."""
    lr = config.learning_rate if learning_rate is None else learning_rate
    if is_concrete(lr) and not float(lr) > 0:
        raise ValueError(f"learning_rate={lr!r}; expected > 0")
    if config.max_grad_norm is None:
        return optax.adam(lr)
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), optax.adam(lr))


class StepMetrics(NamedTuple):
    """Means over the step's rollouts."""

    reward: Float[Array, ""]
    fidelity: Float[Array, ""]
    role_fraction: Float[Array, ""]
    generic_fraction: Float[Array, ""]
    loss: Float[Array, ""]


def completion_log_probs(
    graphdef: nnx.GraphDef,
    state: nnx.State,
    tokens: Int[Array, "batch total"],
    *,
    context: Int[Array, "batch total"] | None = None,
) -> Float[Array, "batch completion"]:
    """Log-probabilities of the completion tokens (positions ``PROMPT_LEN ..``) of ``tokens``.

    With ``context``, the model reads ``context`` instead of ``tokens`` (token ``t`` is scored
    given ``context[:t]``), e.g. the role-masked rollouts of RAPO's reference
    (:func:`~jaxpapers.rapo.mask_role`).
    """
    check_ndim("tokens", tokens, 2)
    check_dtype("tokens", tokens, "integer")
    if tokens.shape[1] <= PROMPT_LEN:
        raise ValueError(
            f"tokens has shape {tokens.shape}; expected [batch, total] with total > {PROMPT_LEN} "
            "(a prompt and at least one completion token)"
        )
    if context is None:
        context = tokens
    check_shape("context", context, tokens.shape)
    check_dtype("context", context, "integer")
    model = nnx.merge(graphdef, state)
    logp = token_log_probs(model(context[:, :-1]), tokens[:, 1:])
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

    A fraction ``profile_dropout`` of the examples is read with the role information masked
    (:func:`~jaxpapers.rapo.mask_role`: the profile and the contents of the role-reasoning
    steps become ``NULL`` in the input; the targets stay the true tokens), so the warm-up model
    also learns ``p(token | context without the role)``, the reference RAPO's PMI needs.
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
    tokens = jnp.concatenate([prompts(world, batch), target], axis=1)
    context = jnp.where(drop, mask_role(tokens), tokens)
    mask = completion_mask(target)
    logp = completion_log_probs(graphdef, state, tokens, context=context)
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
    beta: float | Array | None = None,
) -> tuple[Float[Array, ""], StepMetrics]:
    """The on-policy GRPO (``alpha = gamma = 0``) or RAPO loss of ``state`` on fresh rollouts.

    ``config.group_size`` completions per prompt of ``batch`` are sampled from ``state`` itself
    (under ``stop_gradient``: the rollouts are data, not a path for the gradient) and scored by
    the hackable judge (or, with ``hackable=False``, by the exact fidelity); advantages are
    normalised within each prompt's group; PMI comes from the frozen reference with and without
    the role information (:func:`~jaxpapers.rapo.role_pmi`: neither the profile nor the contents
    of the role-reasoning steps). Its gradient in ``state`` is the policy gradient, so a training
    run is :func:`jaxpapers.core.fit.fit` of this loss (the rollouts of every step are drawn
    inside the step, from the parameters of that step).

    ``use_pmi=False`` skips the reference forward without the role: RAPO's weights are then
    all 1, whatever ``alpha`` and ``gamma``, i.e. plain GRPO; with a KL term it still runs the
    one reference forward that GRPO's k3 KL term needs (TRL/verl GRPO), without one none. RAPO
    (``use_pmi=True``) therefore costs one reference forward over GRPO with a KL term: the
    role-masked rollouts, batched with the KL forward.

    ``beta`` overrides ``config.beta`` (it may be traced, e.g. vmapped over a grid; a traced
    ``beta`` always runs the reference forward).

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
    beta = config.beta if beta is None else beta
    with_kl = not (is_concrete(beta) and float(beta) == 0.0)
    if use_pmi:
        # one reference forward over the rollouts with and without the role, batched together
        def ref_log_probs(contexts, targets):
            return completion_log_probs(graphdef, ref_state, targets, context=contexts)

        pmi, ref_lp = role_pmi(ref_log_probs, tokens)
    elif with_kl:
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
        beta=beta,
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
    """One on-policy GRPO (``alpha = gamma = 0``) or RAPO update: Adam on :func:`rl_loss`, after
    the gradient's global-norm clip ``config.max_grad_norm``.

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
    if config.max_grad_norm is not None:
        grads = optax.clip_by_global_norm(config.max_grad_norm).update(grads, None)[0]
    # ``opt_state`` is Adam's (the clip holds no state), as ``optax.adam(lr).init`` makes it
    updates, new_opt = optax.adam(config.learning_rate).update(grads, opt_state, state)
    ok = jnp.isfinite(loss) & all_finite(grads) & all_finite(updates)
    new_state, opt_state = keep_where(
        ok, (optax.apply_updates(state, updates), new_opt), (state, opt_state)
    )
    return new_state, opt_state, metrics
