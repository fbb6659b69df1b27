"""Schwartz's ten basic values, the four conversation contexts, and value-name lookups."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Schwartz's ten basic values in circumplex order (adjacent values are compatible, opposite
#: ones conflict; Schwartz 1992, 2012).
VALUES: tuple[str, ...] = (
    "self_direction",
    "stimulation",
    "hedonism",
    "achievement",
    "power",
    "security",
    "conformity",
    "tradition",
    "benevolence",
    "universalism",
)

#: The contexts in which a persona's value weights differ.
CONTEXTS: tuple[str, ...] = ("work", "family", "negotiation", "counselling")

#: Angle of each value on the circumplex (radians, evenly spaced in :data:`VALUES` order).
ANGLES = np.linspace(0.0, 2.0 * np.pi, len(VALUES), endpoint=False)

#: The value each context pulls a persona towards (work: achievement; family: benevolence;
#: negotiation: power; counselling: universalism).
CONTEXT_PULL: tuple[str, ...] = ("achievement", "benevolence", "power", "universalism")

#: The socially desirable profile a concealing persona imitates, in [0, 1]: caring and
#: conforming values high, self-enhancement low (social-desirability studies of the PVQ).
DESIRABLE: dict[str, float] = {
    "self_direction": 0.55,
    "stimulation": 0.3,
    "hedonism": 0.1,
    "achievement": 0.35,
    "power": 0.0,
    "security": 0.75,
    "conformity": 0.85,
    "tradition": 0.6,
    "benevolence": 1.0,
    "universalism": 0.9,
}

#: Short phrases that embody each value in a scenario option or a questionnaire item.
PHRASES: dict[str, str] = {
    "self_direction": "decide things your own way",
    "stimulation": "try something new and exciting",
    "hedonism": "enjoy yourself and have a good time",
    "achievement": "show that you are the most capable",
    "power": "take charge and have the final say",
    "security": "keep things safe and predictable",
    "conformity": "follow the rules others expect",
    "tradition": "keep to the customs you were raised with",
    "benevolence": "look after the people close to you",
    "universalism": "be fair to everyone, even strangers",
}


def value_index(names: str | Sequence[str]) -> np.ndarray:
    """Indices of value names in :data:`VALUES`.

    Raises:
      ValueError: a name is not one of Schwartz's ten values, or ``names`` is empty.

    Examples:
        >>> value_index(["power", "benevolence"]).tolist()
        [4, 8]
    """
    if isinstance(names, str):
        names = [names]
    names = list(names)
    if not names:
        raise ValueError("names is empty; expected at least one of " + ", ".join(VALUES))
    unknown = [n for n in names if n not in VALUES]
    if unknown:
        raise ValueError(f"unknown value names {unknown}; expected names from {VALUES}")
    return np.array([VALUES.index(n) for n in names], np.int32)


def context_index(name: str) -> int:
    """Index of a context name in :data:`CONTEXTS` (``ValueError`` if unknown)."""
    if name not in CONTEXTS:
        raise ValueError(f"context={name!r}; expected one of {CONTEXTS}")
    return CONTEXTS.index(name)


def desirable_profile() -> np.ndarray:
    """The socially desirable profile ``[V]`` in :data:`VALUES` order."""
    return np.array([DESIRABLE[v] for v in VALUES], np.float32)


def profile_from_dict(weights: dict[str, float]) -> np.ndarray:
    """A ``[V]`` profile from ``{value name: weight}``, min-max scaled to [0, 1].

    Raises:
      ValueError: unknown value names, missing values, or all weights equal.
    """
    value_index(list(weights))
    missing = [v for v in VALUES if v not in weights]
    if missing:
        raise ValueError(f"weights lacks values {missing}; expected all ten of {VALUES}")
    w = np.array([float(weights[v]) for v in VALUES])
    span = w.max() - w.min()
    if not np.isfinite(span) or span <= 0:
        raise ValueError(f"weights={weights}; expected finite weights that are not all equal")
    return ((w - w.min()) / span).astype(np.float32)
