"""Personas and probers on the chat-model interface (:mod:`jaxpapers.core.chat`).

* :func:`persona_chat_model` turns a persona into a :class:`~jaxpapers.core.chat.ChatModel`: it
  reads the prober's last message, recognises the bank question, and replies in words
  (``"I would choose (B)."``) with the same answer distribution as the numeric core; its
  ``logprob`` scores a reply. ``temperature=0`` gives the persona's most likely answer.
* :class:`ChatModelProber` lets *any* chat model probe: it shows the model the numbered questions
  of the context and the conversation so far, reads a question number from its reply, sends the
  question's text to the persona, parses the reply and updates the same exact posterior as
  :func:`jaxpapers.ivp.probe`. A local JAX model, a Python agent or a real LLM server (through
  :class:`~jaxpapers.core.chat.OpenAIChat`) plug in unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.chat import ChatModel, FunctionChatModel, Message, Transcript
from jaxpapers.ivp._inference import answer_likelihood, profile_posterior_mean, update_posterior
from jaxpapers.ivp._personas import PersonaConfig, Personas
from jaxpapers.ivp._probers import ProberConfig, answer_tables
from jaxpapers.ivp._questions import (
    QuestionBank,
    answer_text,
    parse_answer,
    question_text,
)
from jaxpapers.ivp._values import CONTEXTS, context_index, desirable_profile


def _question_lookup(bank: QuestionBank) -> dict[str, tuple[int, int]]:
    c, q = bank.explicitness.shape
    return {question_text(bank, ci, qi): (ci, qi) for ci in range(c) for qi in range(q)}


def _persona_answer_probs(
    bank: QuestionBank,
    profiles: np.ndarray,
    concealment: float,
    persona_config: PersonaConfig,
    messages: Sequence[Message],
    lookup: dict[str, tuple[int, int]],
) -> tuple[int, int, np.ndarray] | None:
    asked = [lookup.get(m["content"].strip()) for m in messages if m["role"] == "user"]
    if not asked or asked[-1] is None:
        return None
    ci, qi = asked[-1]
    earlier = [q for c, q in (a for a in asked[:-1] if a is not None) if c == ci]
    expl = np.asarray(bank.explicitness[ci])
    suspicion = float(np.mean(expl[earlier])) if earlier else 0.0
    feats, bias, valid = (np.asarray(x[ci, qi], np.float64) for x in bank[:3])

    def probs(r):  # the softmax of answer_probs, on the host: no device round trips per turn
        u = np.where(valid > 0, persona_config.beta * (feats @ r + bias), -np.inf)
        e = np.exp(u - u.max())
        return e / e.sum()

    honest, desirable = probs(profiles[ci]), probs(desirable_profile())
    p = concealment * min(1.0, float(expl[qi]) + persona_config.suspicion * suspicion)
    return ci, qi, (1 - p) * honest + p * desirable


def persona_chat_model(
    personas: Personas, index: int, bank: QuestionBank, *, persona_config: PersonaConfig
) -> FunctionChatModel:
    """Persona ``index`` of ``personas`` as a chat model that answers bank questions in words.

    A message that is not a bank question gets a non-committal reply (and ``logprob`` of any
    continuation 0 for it, as the persona says nothing about its values).
    """
    n = int(np.shape(personas.profiles)[0])
    if not (isinstance(index, int) and 0 <= index < n):
        raise ValueError(f"index={index!r}; expected a persona index in [0, {n})")
    profiles = np.asarray(personas.profiles[index])
    conceal = float(personas.concealment[index])
    lookup = _question_lookup(bank)

    def reply(messages, *, key, temperature):
        found = _persona_answer_probs(bank, profiles, conceal, persona_config, messages, lookup)
        if found is None:
            return "I'd rather hear what you have in mind."
        ci, qi, probs = found
        if temperature == 0:
            a = int(np.argmax(probs))
        else:
            logits = np.log(np.maximum(probs, 1e-30)) / temperature
            a = int(jax.random.categorical(key, jnp.asarray(logits)))
        return answer_text(bank, ci, qi, a)

    def logprob(messages, continuation):
        found = _persona_answer_probs(bank, profiles, conceal, persona_config, messages, lookup)
        if found is None:
            return 0.0
        ci, qi, probs = found
        try:
            a = parse_answer(bank, ci, qi, continuation)
        except ValueError:
            return float("-inf")
        return float(np.log(probs[a]))

    return FunctionChatModel(reply, logprob, name=f"persona-{index}")


class ChatInterview(NamedTuple):
    """One conversation of a :class:`ChatModelProber` with a persona in one context.

    ``questions``/``answers``/``penalty`` are ``[T]`` arrays as in :class:`~jaxpapers.ivp.Episode`;
    ``parse_failures`` counts prober replies without a valid question number (the first question
    not yet asked was sent instead).
    """

    questions: np.ndarray
    answers: np.ndarray
    penalty: np.ndarray
    log_post: jax.Array
    profile: jax.Array
    transcript: Transcript
    parse_failures: int


@partial(jax.jit, static_argnames=("gamma",))
def _update(log_post, honest_q, desirable_q, expl_q, grid, suspicion, answer, *, gamma):
    lik = answer_likelihood(honest_q, desirable_q, expl_q, grid, suspicion, gamma)
    return update_posterior(log_post, lik, answer)


class ChatModelProber:
    """Any :class:`~jaxpapers.core.chat.ChatModel` as a prober.

    Args:
      model: the chat model that picks questions.
      bank, library: the question bank and the hypothesis library of the posterior.
      persona_config: what the prober assumes about how personas answer.
      config: turns per context, concealment grid, repeat penalty.
      temperature: sampling temperature of ``model``.
    """

    def __init__(
        self,
        model: ChatModel,
        bank: QuestionBank,
        library: jax.Array,
        *,
        persona_config: PersonaConfig,
        config: ProberConfig,
        temperature: float = 0.0,
    ):
        if not isinstance(model, ChatModel):
            raise ValueError(f"model={model!r}; expected a ChatModel (chat and logprob methods)")
        self.model, self.bank, self.library = model, bank, jnp.asarray(library, jnp.float32)
        self.persona_config, self.config, self.temperature = persona_config, config, temperature
        self.honest, self.desirable = answer_tables(bank, self.library, persona_config.beta)

    def prompt(self, context: int, history: Sequence[tuple[int, str]]) -> list[Message]:
        """Messages shown to the prober model: numbered questions, then the conversation."""
        q = self.bank.explicitness.shape[1]
        lines = [f"{i + 1}. {question_text(self.bank, context, i)}" for i in range(q)]
        system = (
            "You are interviewing a person to learn which values guide them "
            f"({CONTEXTS[context]} context) without making them feel probed. Candidate "
            "questions:\n" + "\n".join(lines)
        )
        said = "\n".join(
            f"Q{i + 1}: {question_text(self.bank, context, qi)}\nA: {a}"
            for i, (qi, a) in enumerate(history)
        )
        user = (said + "\n" if said else "") + "Reply with the number of the next question."
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def interview(
        self,
        persona: ChatModel,
        context: str | int,
        *,
        key: jax.Array,
        persona_temperature: float = 1.0,
    ) -> ChatInterview:
        """Probe ``persona`` for ``config.turns`` questions in ``context`` (``persona_temperature``
        0 asks a persona from :func:`persona_chat_model` for its most likely answers)."""
        ci = context_index(context) if isinstance(context, str) else int(context)
        if not 0 <= ci < len(CONTEXTS):
            raise ValueError(f"context={context!r}; expected a name or index of {CONTEXTS}")
        q_count = self.bank.explicitness.shape[1]
        expl = np.asarray(self.bank.explicitness[ci])
        grid = jnp.asarray(self.config.grid, jnp.float32)
        h, k = self.library.shape[0], grid.shape[0]
        log_post = jnp.full((h, k), -np.log(h * k), jnp.float32)
        transcript = Transcript(meta={"context": CONTEXTS[ci]})
        history: list[tuple[int, str]] = []
        qs, ans, pen, failures, asked = [], [], [], 0, np.zeros(q_count, int)
        for t in range(self.config.turns):
            k_prober, k_persona = jax.random.split(jax.random.fold_in(key, t))
            choice = self.model.chat(
                self.prompt(ci, history), key=k_prober, temperature=self.temperature
            )
            match = re.search(r"\d+", choice)
            qi = int(match.group()) - 1 if match else -1
            if not 0 <= qi < q_count:
                failures += 1
                qi = int(np.argmin(asked))
            text = question_text(self.bank, ci, qi)
            transcript.append("user", text, question=qi)
            reply = persona.chat(
                transcript.messages(), key=k_persona, temperature=persona_temperature
            )
            a = parse_answer(self.bank, ci, qi, reply)
            transcript.append("assistant", reply, answer=a)
            suspicion = float(np.mean(expl[qs])) if qs else 0.0
            log_post = _update(
                log_post,
                self.honest[ci, qi],
                self.desirable[ci, qi],
                self.bank.explicitness[ci, qi],
                grid,
                jnp.float32(suspicion),
                jnp.int32(a),
                gamma=float(self.persona_config.suspicion),
            )
            pen.append(min(1.0, expl[qi] + self.config.repeat_penalty * (asked[qi] > 0)))
            asked[qi] += 1
            qs.append(qi)
            ans.append(a)
            history.append((qi, reply))
        return ChatInterview(
            np.array(qs),
            np.array(ans),
            np.array(pen),
            log_post,
            profile_posterior_mean(log_post, self.library),
            transcript,
            failures,
        )
