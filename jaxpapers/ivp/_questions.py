r"""The question bank: PVQ-style explicit items and value-laden scenario choices, per context.

Every question has up to ``A`` answers, and answer :math:`a`'s utility for a profile :math:`r` is
linear in the profile, :math:`u_a = X_a \cdot r + b_a`:

* explicit item about value :math:`v` (Likert answers :math:`a = 0..L-1`): the utility
  :math:`-\lambda (a / (L - 1) - r_v)^2` expands to :math:`X_{a,v} = 2 \lambda a / (L - 1)`,
  :math:`b_a = -\lambda a^2 / (L - 1)^2` (the :math:`r_v^2` term is common to all answers);
* scenario: options that each embody one or two values, :math:`X_a` their indicator divided by
  their number, :math:`b_a = 0`; unused answer slots are masked.

Explicitness :math:`e_q \in [0, 1]` measures how openly a question asks about values: explicit
items have ``explicit_explicitness``, scenarios a draw from ``scenario_explicitness``. It drives
both concealment (the persona's urge to answer desirably) and intrusiveness (the social cost).
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxpapers.core.checks import check_int, check_key, check_ndim, check_range, check_shape
from jaxpapers.ivp._values import CONTEXTS, PHRASES, VALUES


class BankConfig(eqx.Module):
    """Size and shape of the question bank.

    Attributes:
      scenarios: scenario questions per context.
      likert: Likert points of explicit items (= answer slots ``A``; scenarios use 2 or 3).
      sharpness: :math:`\\lambda` of the Likert utility.
      explicit_explicitness: explicitness of the PVQ-style items.
      scenario_explicitness: range of the scenarios' explicitness.
    """

    scenarios: int = 24
    likert: int = 5
    sharpness: float = 16.0
    explicit_explicitness: float = 0.8
    scenario_explicitness: tuple[float, float] = (0.05, 0.35)

    def __check_init__(self) -> None:
        if not (isinstance(self.scenarios, int) and self.scenarios >= 1):
            raise ValueError(f"scenarios={self.scenarios!r}; expected an int >= 1")
        if not (isinstance(self.likert, int) and self.likert >= 3):
            raise ValueError(f"likert={self.likert!r}; expected an int >= 3")
        lo, hi = self.scenario_explicitness
        if not 0 <= lo <= hi <= 1 or not 0 <= self.explicit_explicitness <= 1:
            raise ValueError(
                f"explicitness {self.explicit_explicitness}, {self.scenario_explicitness}; "
                "expected values in [0, 1] (lo <= hi)"
            )


class QuestionBank(NamedTuple):
    """Questions of every context: ``Q = V`` explicit items followed by the scenarios.

    Attributes:
      features: ``[C, Q, A, V]`` utility coefficients :math:`X`.
      bias: ``[C, Q, A]`` utility offsets :math:`b`.
      valid: ``[C, Q, A]`` which answer slots exist.
      explicitness: ``[C, Q]``.
      options: ``[C, Q, A, 2]`` values embodied by each scenario option (-1: none); for explicit
        items, ``options[..., 0, 0]`` is the value asked about.
    """

    features: Float[Array, "contexts q answers values"]
    bias: Float[Array, "contexts q answers"]
    valid: Bool[Array, "contexts q answers"]
    explicitness: Float[Array, "contexts q"]
    options: Int[Array, "contexts q answers 2"]

    @property
    def num_explicit(self) -> int:
        return len(VALUES)


def make_question_bank(*, config: BankConfig, key: jax.Array) -> QuestionBank:
    """Draw a question bank (host-side NumPy; the bank is data, not traced)."""
    check_key("key", key)
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())
    v, a, c, s = len(VALUES), config.likert, len(CONTEXTS), config.scenarios
    q = v + s
    feats = np.zeros((c, q, a, v), np.float32)
    bias = np.zeros((c, q, a), np.float32)
    valid = np.zeros((c, q, a), bool)
    expl = np.zeros((c, q), np.float32)
    opts = -np.ones((c, q, a, 2), np.int32)
    levels = np.arange(a) / (a - 1)
    for ci in range(c):
        for vi in range(v):
            feats[ci, vi, :, vi] = 2 * config.sharpness * levels
            bias[ci, vi] = -config.sharpness * levels**2
            valid[ci, vi] = True
            expl[ci, vi] = config.explicit_explicitness
            opts[ci, vi, 0, 0] = vi
        lo, hi = config.scenario_explicitness
        for si in range(s):
            qi = v + si
            n_opt = int(rng.integers(2, min(3, a) + 1))
            sizes = rng.integers(1, 3, size=n_opt)
            chosen = rng.permutation(v)[: sizes.sum()]
            start = 0
            for oi, k in enumerate(sizes):
                vals = chosen[start : start + k]
                start += k
                feats[ci, qi, oi, vals] = 1.0 / k
                opts[ci, qi, oi, :k] = vals
                valid[ci, qi, oi] = True
            expl[ci, qi] = rng.uniform(lo, hi)
    return QuestionBank(
        jnp.asarray(feats),
        jnp.asarray(bias),
        jnp.asarray(valid),
        jnp.asarray(expl),
        jnp.asarray(opts),
    )


def answer_probs(
    features: Float[Array, "*q answers values"],
    bias: Float[Array, "*q answers"],
    valid: Bool[Array, "*q answers"],
    profile: Float[Array, " values"],
    beta: float | jax.Array,
) -> Float[Array, "*q answers"]:
    """Honest answer distribution :math:`\\mathrm{softmax}_a(\\beta (X_a \\cdot r + b_a))`."""
    check_ndim("features", features, range(2, 8))
    check_shape("bias", bias, features.shape[:-1])
    check_shape("valid", valid, features.shape[:-1])
    check_shape("profile", profile, (features.shape[-1],))
    check_range("beta", beta)
    u = jnp.einsum("...av,v->...a", features, profile) + bias
    return jax.nn.softmax(jnp.where(valid, beta * u, -jnp.inf), axis=-1)


def _context_phrase(context: int) -> str:
    return {
        "work": "At work",
        "family": "With your family",
        "negotiation": "In a negotiation",
        "counselling": "In a counselling session",
    }[CONTEXTS[context]]


def _check_item(bank: QuestionBank, context: int, question: int) -> None:
    """``ValueError`` unless ``context`` and ``question`` index an item of ``bank``."""
    c, q = np.shape(bank.valid)[:2]
    if check_int("context", context, minimum=0) >= c:
        raise ValueError(f"context={context}; expected 0..{c - 1}")
    if check_int("question", question, minimum=0) >= q:
        raise ValueError(f"question={question}; expected 0..{q - 1}")


def question_text(bank: QuestionBank, context: int, question: int) -> str:
    """The question as a persona hears it."""
    _check_item(bank, context, question)
    opts = np.asarray(bank.options)[context, question]
    where = _context_phrase(context)
    if question < bank.num_explicit:
        value = VALUES[int(opts[0, 0])]
        n = int(np.asarray(bank.valid)[context, question].sum())
        return (
            f"{where}, how important is it to you to {PHRASES[value]}? "
            f"Answer with a number from 1 (not at all) to {n} (very)."
        )
    parts = []
    for i, o in enumerate(opts):
        vals = [VALUES[int(x)] for x in o if x >= 0]
        if vals:
            parts.append(f"({'ABCDEFG'[i]}) " + " and ".join(PHRASES[x] for x in vals))
    return f"{where}, would you rather " + ", or ".join(parts) + "?"


def answer_text(bank: QuestionBank, context: int, question: int, answer: int) -> str:
    """A persona's reply that :func:`parse_answer` maps back to ``answer``."""
    _check_item(bank, context, question)
    n = int(np.asarray(bank.valid)[context, question].sum())
    if check_int("answer", answer, minimum=0) >= n:
        raise ValueError(f"answer={answer}; question {question} has {n} answers (0..{n - 1})")
    if question < bank.num_explicit:
        return f"I would say {answer + 1}."
    return f"I would choose ({'ABCDEFG'[answer]})."


def parse_answer(bank: QuestionBank, context: int, question: int, reply: str) -> int:
    """Answer index from a reply: the first valid Likert digit or option letter in it.

    Raises:
      ValueError: the reply names no valid answer of this question.
    """
    _check_item(bank, context, question)
    n = int(np.asarray(bank.valid)[context, question].sum())
    if question < bank.num_explicit:
        for ch in reply:
            if ch.isdigit() and 1 <= int(ch) <= n:
                return int(ch) - 1
    else:
        letters = "ABCDEFG"[:n]
        for i, ch in enumerate(reply):
            if (
                ch in letters
                and (i == 0 or not reply[i - 1].isalpha())
                and (i + 1 == len(reply) or not reply[i + 1].isalpha())
            ):
                return letters.index(ch)
    raise ValueError(f"reply={reply!r} names no answer of question {question} ({n} answers)")
