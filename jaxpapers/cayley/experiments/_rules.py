"""A verdict rule for "several of these hold": at least ``k`` of its parts, each its own test.

``layer_contributions`` asks whether *multiple* layers contribute: one test per layer (its share
of the head's gain, a one-sided 95% t test over seeds) and the claim holds when at least two of
them hold. :class:`AtLeast` holds when ``k`` parts hold, does not hold when so many parts do not
hold that ``k`` can no longer be reached, and is inconclusive otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from jaxpapers.core.verdicts import (
    FAILS,
    HOLDS,
    UNSURE,
    Assessment,
    RowStats,
    RuleBase,
    evaluate_rule,
)


@dataclasses.dataclass(frozen=True)
class AtLeast(RuleBase):
    """At least ``k`` of ``parts`` hold (each part a rule of its own).

    Examples:
        >>> from jaxpapers.core.verdicts import RowStats, Threshold
        >>> rows = {n: RowStats.from_values(n, "method", v) for n, v in
        ...         {"a": [1.0, 1.1, 0.9], "b": [1.0, 1.2, 0.8], "c": [0.0, 0.1, -0.1]}.items()}
        >>> rule = AtLeast(2, tuple(Threshold(n, 0.5, below=False) for n in "abc"))
        >>> rule.decide(rows, lower_is_better=False)
        'holds'
        >>> AtLeast(3, rule.parts).decide(rows, lower_is_better=False)
        'does not hold'
    """

    k: int
    parts: tuple[Any, ...]

    def __post_init__(self) -> None:
        if not (isinstance(self.k, int) and 1 <= self.k <= len(self.parts)):
            raise ValueError(f"k={self.k!r}; expected 1 <= k <= {len(self.parts)} parts")

    def names(self) -> tuple[str, ...]:
        return tuple(n for p in self.parts for n in p.names())

    def describe(self, lower_is_better: bool) -> str:
        inner = "; ".join(p.describe(lower_is_better) for p in self.parts)
        return f"at least {self.k} of: {inner}"

    def evaluate(
        self, rows: Mapping[str, RowStats], lower_is_better: bool, *, paired: bool = True
    ) -> Assessment:
        assessed = [evaluate_rule(p, rows, lower_is_better, paired=paired) for p in self.parts]
        held = sum(a.verdict == HOLDS for a in assessed)
        failed = sum(a.verdict == FAILS for a in assessed)
        if held >= self.k:
            verdict = HOLDS
        elif len(self.parts) - failed < self.k:
            verdict = FAILS
        else:
            verdict = UNSURE
        return Assessment(verdict, tuple(c for a in assessed for c in a.comparisons))
