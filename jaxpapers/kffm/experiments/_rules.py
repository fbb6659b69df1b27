"""A verdict rule that knows the estimator's own noise: differences inside the data-vs-data floor
are inconclusive.

The unbiased MMD^2 between two samples of the *same* distribution scatters around zero; its
size at the scoring sample size is the smallest difference between two models that the table can
resolve, whatever the seed spread says (the seeds share one held-out set, so their spread misses
the held-out set's own noise). :class:`FloorBetter` measures that floor from a row of the table
(the MMD between two held-out halves, one value per seed) and declares a difference inside it
inconclusive; outside it the paired test of :class:`jaxpapers.core.verdicts.Better`
decides. Paper-neutral: any metric with a measured "noise floor" row can use it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from jaxpapers.core.verdicts import UNSURE, Assessment, Better, RowStats, RuleBase


def floor_level(row: RowStats) -> float:
    """The floor: root mean square of the floor row's per-seed values (they scatter around 0)."""
    return math.sqrt(sum(v * v for v in row.seeds) / len(row.seeds))


@dataclasses.dataclass(frozen=True)
class FloorBetter(RuleBase):
    """``method`` beats ``baseline`` by more than the seed spread *and* by more than the floor.

    Attributes:
      method, baseline: the compared rows.
      floor: the row holding the noise floor per seed (e.g. the MMD between two held-out halves);
        its root mean square is the smallest difference the rule resolves.
    """

    method: str
    baseline: str
    floor: str

    def names(self) -> tuple[str, ...]:
        return (self.method, self.baseline, self.floor)

    def describe(self, lower_is_better: bool) -> str:
        op = "<" if lower_is_better else ">"
        return (
            f"{self.method} {op} {self.baseline} beyond the seed spread and beyond the "
            f"{self.floor} floor"
        )

    def evaluate(
        self, rows: Mapping[str, RowStats], lower_is_better: bool, *, paired: bool = True
    ) -> Assessment:
        m, b = rows[self.method], rows[self.baseline]
        level = floor_level(rows[self.floor])
        better = Better(self.method, self.baseline).evaluate(rows, lower_is_better, paired=paired)
        if math.isfinite(m.mean) and math.isfinite(b.mean) and abs(m.mean - b.mean) <= level:
            inside = better.comparisons[0]._replace(
                test=f"{better.comparisons[0].test}; inside the {self.floor} floor {level:.3g}",
                verdict=UNSURE,
                seeds_needed=None,
            )
            return Assessment(UNSURE, (inside,))
        return better
