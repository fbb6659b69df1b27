"""Psy-CoT: the three-step role reasoning format, as text, and the prompt builder.

Before replying, the character reasons in three tagged steps:

1. Interaction Perception (``<perception>``): what the other party said and wants.
2. Psychological Empathy (``<empathy>``): how the character, given its temperament, feels.
3. Logical Construction (``<logic>``): what the character will say, drawn from its profile.

then ``<response>``. :func:`build_prompt` writes a profile and a message into a prompt that asks for
that format; :func:`format_psycot` / :func:`parse_psycot` turn a :class:`PsyCoT` into text and back
(supervised warm-up targets, and checking a model's output).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

STEPS = ("perception", "empathy", "logic", "response")
TITLES = {
    "perception": "Interaction Perception",
    "empathy": "Psychological Empathy",
    "logic": "Logical Construction",
}


class PsyCoT(NamedTuple):
    """One Psy-CoT completion: three reasoning steps and the reply."""

    perception: str
    empathy: str
    logic: str
    response: str


def _check_profile(profile: Mapping[str, str]) -> None:
    if not profile:
        raise ValueError("profile is empty; expected attributes such as occupation, temperament")
    empty = [k for k, v in profile.items() if not str(v).strip()]
    if empty:
        raise ValueError(f"profile attributes {empty} are empty; every attribute needs a value")


def build_prompt(profile: Mapping[str, str], message: str, *, psycot: bool = True) -> str:
    """A role-play prompt: the character profile, the user's message, and the answer format.

    Examples:
        >>> print(build_prompt({"name": "Ada", "occupation": "baker"}, "Hi!"))
        You are playing a character.
        name: Ada
        occupation: baker
        User: Hi!
        Think in three steps (Interaction Perception, Psychological Empathy, Logical Construction) inside <perception>, <empathy> and <logic>, then answer inside <response>.
    """  # noqa: E501
    _check_profile(profile)
    if not message.strip():
        raise ValueError("message is empty; expected the user's turn")
    lines = ["You are playing a character."]
    lines += [f"{k}: {v}" for k, v in profile.items()]
    lines.append(f"User: {message}")
    if psycot:
        lines.append(
            "Think in three steps (" + ", ".join(TITLES.values()) + ") inside <perception>, "
            "<empathy> and <logic>, then answer inside <response>."
        )
    else:
        lines.append("Answer inside <response>.")
    return "\n".join(lines)


def format_psycot(cot: PsyCoT) -> str:
    """``<perception>..</perception><empathy>..</empathy><logic>..</logic><response>..</response>``.

    Examples:
        >>> format_psycot(PsyCoT("greets me", "cheerful", "mention bread", "Fresh loaves!"))
        '<perception>greets me</perception><empathy>cheerful</empathy><logic>mention bread</logic><response>Fresh loaves!</response>'
    """  # noqa: E501
    return "".join(f"<{s}>{getattr(cot, s)}</{s}>" for s in STEPS)


def parse_psycot(text: str) -> PsyCoT:
    """Inverse of :func:`format_psycot`; ``ValueError`` naming the missing steps."""
    found = {s: re.search(rf"<{s}>(.*?)</{s}>", text, flags=re.S) for s in STEPS}
    missing = [s for s, m in found.items() if m is None]
    if missing:
        raise ValueError(f"text lacks the Psy-CoT step(s) {missing}")
    return PsyCoT(*(found[s].group(1).strip() for s in STEPS))
