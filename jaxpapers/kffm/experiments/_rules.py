"""A verdict rule that knows the estimator's own resolution: a "holds" whose effect is smaller than
the data-vs-data floor is inconclusive.

The unbiased MMD^2 between two samples of the *same* distribution scatters around zero; its size
at the scoring sample size is the smallest difference between two models that the table can
resolve as an *effect*, whatever the seed spread says (the seeds share one held-out set, so their
spread misses the held-out set's own noise). :class:`FloorBetter` measures that floor from a row
of the table (the MMD between two held-out halves, one value per seed), rescales it to the scoring
sample size and uses it for one thing only: a paired result that would read "holds" with a mean
gain inside the floor reads "inconclusive". A significant paired result the *wrong* way (the
method worse with 95% confidence) reads "does not hold" whatever the floor: the models of a seed
share their held-out set and prior draws, so the held-out set's own noise cancels in the paired
differences, and a consistent wrong-way difference is evidence against the claim even when it is
small. Paper-neutral: any metric with a measured "noise floor" row can use it.

Rescaling the floor (the ``scale`` argument, :func:`null_scale`): under the null hypothesis (both
samples from one distribution) the unbiased MMD^2 of samples of sizes ``m`` and ``n`` is a
degenerate U-statistic; Gretton et al. (2012, Theorem 12) give, with :math:`\\rho = m / (m + n)`,

.. math::

   (m + n)\\,\\mathrm{MMD}^2_u \\to \\sum_l \\lambda_l \\left[(\\rho^{-1/2} a_l
   - (1 - \\rho)^{-1/2} b_l)^2 - \\frac{1}{\\rho (1 - \\rho)}\\right]

in distribution, with :math:`a_l, b_l` independent standard normals and :math:`\\lambda_l` the
eigenvalues of the centred kernel. The bracket has standard deviation
:math:`\\sqrt{2}\\,(1/\\rho + 1/(1-\\rho)) = \\sqrt{2}\\,(m+n)^2/(mn)`, so the null spread of
:math:`\\mathrm{MMD}^2_u` is proportional to :math:`(m + n) / (m n) = 1/m + 1/n`: it falls like
``1 / n``, not ``1 / sqrt(n)``. A floor measured between two halves of ``h`` functions each and
applied to models scored on ``m`` samples against ``n`` held-out functions is therefore multiplied
by :math:`(1/m + 1/n) / (2/h)`; for halves of a held-out set of 256 (``h = 128``) and scoring at
256 vs 256 that is 1/2.

References:
    A. Gretton, K. M. Borgwardt, M. J. Rasch, B. Schoelkopf, A. Smola, A kernel two-sample test,
    *JMLR* 13, 2012.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from jaxpapers.core.verdicts import HOLDS, UNSURE, Assessment, Better, RowStats, RuleBase


def floor_level(row: RowStats) -> float:
    """The floor as measured: root mean square of the floor row's per-seed values (they scatter
    around 0)."""
    return math.sqrt(sum(v * v for v in row.seeds) / len(row.seeds))


def null_scale(floor_sizes: tuple[int, int], scored_sizes: tuple[int, int]) -> float:
    """Factor that carries a null MMD^2 spread measured at sample sizes ``floor_sizes`` to
    ``scored_sizes``: :math:`(1/m + 1/n) / (1/m_0 + 1/n_0)` (module docstring).

    Raises:
      ValueError: when a size is not a positive integer.
    """
    for name, sizes in (("floor_sizes", floor_sizes), ("scored_sizes", scored_sizes)):
        if len(sizes) != 2 or any(int(s) != s or s < 1 for s in sizes):
            raise ValueError(f"{name} must be two positive integers, got {sizes!r}")
    return (1 / scored_sizes[0] + 1 / scored_sizes[1]) / (1 / floor_sizes[0] + 1 / floor_sizes[1])


@dataclasses.dataclass(frozen=True)
class FloorBetter(RuleBase):
    """``method`` beats ``baseline`` by the paired test of :class:`~jaxpapers.core.verdicts.Better`
    and by more than the floor; the floor never overrides "does not hold" or "inconclusive".

    Attributes:
      method, baseline: the compared rows.
      floor: the row holding the noise floor per seed (e.g. the MMD between two held-out halves).
      scale: factor from the floor's sample sizes to the scoring sample sizes
        (:func:`null_scale`); the resolution is ``scale`` times the floor row's root mean square.
    """

    method: str
    baseline: str
    floor: str
    scale: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"scale must be a positive finite number, got {self.scale!r}")

    def names(self) -> tuple[str, ...]:
        return (self.method, self.baseline, self.floor)

    def describe(self, lower_is_better: bool) -> str:
        op = "<" if lower_is_better else ">"
        scaled = "" if self.scale == 1.0 else f" x {self.scale:.3g}"
        return (
            f"{self.method} {op} {self.baseline} (paired t), by more than the "
            f"{self.floor} floor{scaled}"
        )

    def evaluate(
        self, rows: Mapping[str, RowStats], lower_is_better: bool, *, paired: bool = True
    ) -> Assessment:
        m, b = rows[self.method], rows[self.baseline]
        level = self.scale * floor_level(rows[self.floor])
        better = Better(self.method, self.baseline).evaluate(rows, lower_is_better, paired=paired)
        if better.verdict == HOLDS and abs(m.mean - b.mean) <= level:
            inside = better.comparisons[0]._replace(
                test=f"{better.comparisons[0].test}; gain inside the {self.floor} floor "
                f"{level:.3g}",
                verdict=UNSURE,
                seeds_needed=None,
            )
            return Assessment(UNSURE, (inside,))
        return better
