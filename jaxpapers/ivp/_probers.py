"""Probers and the probing episode: a ``lax.scan`` over turns, vmapped over personas x contexts.

Every prober talks to the persona one context at a time (one conversation per context, ``turns``
questions each) and keeps the exact posterior of :mod:`jaxpapers.ivp._inference`, so probers differ
only in *which* questions they ask:

* ``questionnaire``: the ten PVQ-style explicit items of the context in fixed order (cycling);
* ``random``: scenario questions of the context in a random order;
* ``strategic``: the question of largest information gain about the profile, less
  ``intrusion_cost`` per unit of intrusiveness (explicitness, plus ``repeat_penalty`` if asked
  before);
* ``distilled``: the question a decoder LM trained on the strategic prober's transcripts ranks
  first (:mod:`jaxpapers.ivp._distill`).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_key, check_ndim, check_range, check_shape
from jaxpapers.ivp._inference import (
    answer_likelihood,
    information_gain,
    profile_posterior_mean,
    update_posterior,
)
from jaxpapers.ivp._personas import PersonaConfig, Personas
from jaxpapers.ivp._questions import QuestionBank, answer_probs
from jaxpapers.ivp._values import CONTEXTS, VALUES, desirable_profile

POLICIES: tuple[str, ...] = ("questionnaire", "random", "strategic", "distilled")


class ProberConfig(eqx.Module):
    """Conversation length, the prober's concealment grid and the social costs.

    Attributes:
      turns: questions per context.
      grid: concealment levels the prober's posterior ranges over (uniform prior).
      intrusion_cost: nats of information gain the strategic prober gives up per unit of
        intrusiveness.
      repeat_penalty: extra intrusiveness of a question asked before in the same context.
    """

    turns: int = 12
    grid: tuple[float, ...] = (0.0, 0.3, 0.6, 0.9)
    intrusion_cost: float = 0.8
    repeat_penalty: float = 0.5

    def __check_init__(self) -> None:
        if not (isinstance(self.turns, int) and self.turns >= 1):
            raise ValueError(f"turns={self.turns!r}; expected an int >= 1")
        if not self.grid or any(not 0 <= g <= 1 for g in self.grid):
            raise ValueError(f"grid={self.grid!r}; expected concealment levels in [0, 1]")
        for name in ("intrusion_cost", "repeat_penalty"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name}={getattr(self, name)!r}; expected a value >= 0")


class Episode(NamedTuple):
    """One probing conversation per persona and context (leading axes ``[N, C]``).

    Attributes:
      questions, answers: ``[..., T]`` question and answer indices.
      penalty: ``[..., T]`` intrusiveness of each question (repeats included).
      log_post: ``[..., H, K]`` final log posterior over (profile, concealment level).
      profile: ``[..., V]`` recovered profile (posterior mean).
    """

    questions: Int[Array, "*b turns"]
    answers: Int[Array, "*b turns"]
    penalty: Float[Array, "*b turns"]
    log_post: Float[Array, "*b h k"]
    profile: Float[Array, "*b values"]


class Student(NamedTuple):
    """A distilled prober: ``nnx.split`` of a :class:`~jaxpapers.core.nn.decoder.DecoderLM`."""

    graphdef: nnx.GraphDef
    state: nnx.State


@partial(jax.jit, static_argnames=("beta",))
def answer_tables(
    bank: QuestionBank, library: Float[Array, "h values"], beta: float
) -> tuple[Float[Array, "c q h a"], Float[Array, "c q a"]]:
    """Honest answer distributions of every library profile and the desirable ones."""
    check_shape("library", library, (None, np.shape(bank.features)[-1]))
    check_range("beta", beta)
    honest = jax.vmap(
        lambda r: answer_probs(bank.features, bank.bias, bank.valid, r, beta), out_axes=2
    )(library)
    desirable = answer_probs(
        bank.features, bank.bias, bank.valid, jnp.asarray(desirable_profile()), beta
    )
    return honest, desirable


def _episode(
    policy_id,
    key,
    truth,
    conceal,
    context,
    honest,
    desirable,
    feats,
    bias,
    valid,
    expl,
    library,
    student_state,
    *,
    student_graphdef,
    turns,
    grid,
    gamma,
    beta,
    lam,
    rho,
    deterministic,
):
    q_count, num_answers = desirable.shape
    num_explicit = len(VALUES)
    h, k = library.shape[0], len(grid)
    grid = jnp.asarray(grid, jnp.float32)
    true_honest = answer_probs(feats, bias, valid, truth, beta)
    k_perm, k_ans = jax.random.split(key)
    order = num_explicit + jax.random.permutation(k_perm, q_count - num_explicit)
    buf = jnp.zeros(1 + 2 * turns, jnp.int32).at[0].set(q_count + num_answers + context)
    model = None if student_graphdef is None else nnx.merge(student_graphdef, student_state)

    def step(carry, t):
        log_post, asked, expl_sum, buf = carry
        suspicion = expl_sum / jnp.maximum(t, 1)
        lik = answer_likelihood(honest, desirable, expl, grid, suspicion, gamma)
        cost = jnp.minimum(1.0, expl + rho * (asked > 0))
        if model is not None:
            q = jnp.argmax(model(buf[None])[0, 2 * t, :q_count])
        else:  # one compiled program for the three rule-based probers
            q = jax.lax.switch(
                policy_id,
                [
                    lambda: jnp.asarray(t % num_explicit, jnp.int32),
                    lambda: order[t % order.shape[0]].astype(jnp.int32),
                    lambda: jnp.argmax(information_gain(log_post, lik) - lam * cost).astype(
                        jnp.int32
                    ),
                ],
            )
        p_true = conceal * jnp.minimum(1.0, expl[q] + gamma * suspicion)
        probs = (1.0 - p_true) * true_honest[q] + p_true * desirable[q]
        if deterministic:
            a = jnp.argmax(probs)
        else:
            a = jax.random.categorical(
                jax.random.fold_in(k_ans, t), jnp.log(jnp.maximum(probs, 1e-30))
            )
        log_post = update_posterior(log_post, lik[q], a)
        buf = buf.at[2 * t + 1].set(q).at[2 * t + 2].set(q_count + a)
        carry = (log_post, asked.at[q].add(1), expl_sum + expl[q], buf)
        return carry, (q, a, cost[q])

    init = (
        jnp.full((h, k), -jnp.log(h * k), jnp.float32),
        jnp.zeros(q_count, jnp.int32),
        jnp.zeros((), jnp.float32),
        buf,
    )
    (log_post, *_), (qs, ans, pen) = jax.lax.scan(step, init, jnp.arange(turns))
    return Episode(
        qs.astype(jnp.int32),
        ans.astype(jnp.int32),
        pen,
        log_post,
        profile_posterior_mean(log_post, library),
    )


@partial(
    jax.jit,
    static_argnames=(
        "student_graphdef",
        "turns",
        "grid",
        "gamma",
        "beta",
        "lam",
        "rho",
        "deterministic",
    ),
)
def _probe(policy_id, key, profiles, conceal, bank, library, student_state, **static):
    honest, desirable = answer_tables(bank, library, static["beta"])
    n, c = profiles.shape[:2]
    keys = jax.random.split(key, (n, c))
    ctx = jnp.arange(c)

    def per_context(k, truth, cf, ci, ho, de, fe, bi, va, ex):
        return _episode(
            policy_id, k, truth, cf, ci, ho, de, fe, bi, va, ex, library, student_state, **static
        )

    over_ctx = jax.vmap(per_context, in_axes=(0, 0, None, 0, 0, 0, 0, 0, 0, 0))
    over_n = jax.vmap(over_ctx, in_axes=(0, 0, 0) + (None,) * 7)
    return over_n(
        keys,
        profiles,
        conceal,
        ctx,
        honest,
        desirable,
        bank.features,
        bank.bias,
        bank.valid,
        bank.explicitness,
    )


def probe(
    policy: str,
    bank: QuestionBank,
    library: Float[Array, "h values"],
    personas: Personas,
    *,
    key: jax.Array,
    persona_config: PersonaConfig,
    config: ProberConfig,
    student: Student | None = None,
    deterministic: bool = False,
) -> Episode:
    """Probe every persona in every context, all conversations in one compiled program.

    The three rule-based probers share one program (the policy is a traced index); the
    distilled prober has its own (its decoder is part of it).

    Args:
      policy: one of :data:`POLICIES`.
      bank: the :class:`QuestionBank`.
      library: ``[H, V]`` hypothesis profiles of the prober's posterior.
      personas: the :class:`Personas` (``N >= 1``).
      key: PRNG key (question order of ``random`` and the personas' answer noise).
      persona_config: how personas answer (``beta``, ``suspicion``); the prober knows it.
      config: :class:`ProberConfig`.
      student: the distilled prober (needed for ``policy="distilled"``).
      deterministic: personas give their most likely answer instead of sampling it.

    Returns:
      :class:`Episode` with leading axes ``[N, C]``.
    """
    check_key("key", key)
    if policy not in POLICIES:
        raise ValueError(f"policy={policy!r}; expected one of {POLICIES}")
    if policy == "distilled" and student is None:
        raise ValueError("policy='distilled' needs student=Student(graphdef, state)")
    n = personas.profiles.shape[0] if personas.profiles.ndim == 3 else -1
    if n < 1:
        raise ValueError(
            f"personas.profiles has shape {personas.profiles.shape}; expected a non-empty "
            f"persona set [N >= 1, {len(CONTEXTS)}, {len(VALUES)}]"
        )
    check_shape("personas.profiles", personas.profiles, (None, len(CONTEXTS), len(VALUES)))
    check_shape("personas.concealment", personas.concealment, (n,))
    check_shape("library", library, (None, len(VALUES)))
    return _probe(
        jnp.asarray(POLICIES.index(policy) if policy != "distilled" else 0, jnp.int32),
        key,
        jnp.asarray(personas.profiles, jnp.float32),
        jnp.asarray(personas.concealment, jnp.float32),
        bank,
        jnp.asarray(library, jnp.float32),
        student.state if policy == "distilled" else None,
        student_graphdef=student.graphdef if policy == "distilled" else None,
        turns=config.turns,
        grid=tuple(float(g) for g in config.grid),
        gamma=float(persona_config.suspicion),
        beta=float(persona_config.beta),
        lam=float(config.intrusion_cost),
        rho=float(config.repeat_penalty),
        deterministic=bool(deterministic),
    )


def pooled_profile(
    log_post: Float[Array, "*b contexts h k"], library: Float[Array, "h values"]
) -> Float[Array, "*b values"]:
    """Context-blind profile: one posterior from every context's answers, as if the persona had
    one profile (and one concealment level) everywhere."""
    check_ndim("log_post", log_post, range(3, 8))
    check_shape("library", library, (log_post.shape[-2], None))
    joint = log_post.sum(-3)
    joint = joint - jax.scipy.special.logsumexp(joint, axis=(-2, -1), keepdims=True)
    return jnp.einsum("...hk,hv->...v", jnp.exp(joint), library)


def repeated_mask(questions: Int[Array, "*b turns"]) -> Float[Array, "*b turns"]:
    """1 where a question was already asked earlier in the same conversation."""
    if jnp.ndim(questions) < 1:
        raise ValueError(f"questions has shape {jnp.shape(questions)}; expected [..., turns]")
    t = questions.shape[-1]
    same = questions[..., :, None] == questions[..., None, :]
    earlier = jnp.asarray(np.tril(np.ones((t, t), bool), -1))
    return (same & jnp.broadcast_to(earlier, same.shape)).any(-1).astype(jnp.float32)
