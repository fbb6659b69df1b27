"""Verdict rules: each claim of the results table decided by a stated one-sided test.

Every rule compares rows of one experiment. Rows measured on the same seeds (the default: every
method of an experiment runs on the same seeds, data and initial weights) are judged by their
per-seed values, never by two means and two spreads taken apart:

* :class:`Better` ("improves", "outperforms", "beats", "lower", "higher"): the per-seed differences
  :math:`d_i = m_i - b_i` of method and baseline. With :math:`\\bar d` their mean, :math:`s` their
  standard deviation and :math:`t = t_{0.95,\\,n-1}` the 95% quantile of Student's t with
  :math:`n - 1` degrees of freedom, the one-sided 95% bounds are
  :math:`\\bar d \\mp t\\, s / \\sqrt{n}`. The claim holds when the bound on the claim's
  side clears 0 (the method is better with 95% confidence), does not hold when the other bound
  is past 0 on the wrong side (the method is worse with 95% confidence), and is inconclusive in
  between.
* :class:`NoWorse` ("matches", "no worse"): the same test against a margin named in the rule,
  chosen from the metric's scale before the numbers are seen: holds when the method is worse by less
  than the margin with 95% confidence.
* :class:`Ratio`: the per-seed ratios :math:`m_i / b_i` against ``at_least``, one-sample t.
* :class:`Threshold`: the per-seed values of one row against a fixed value, one-sample t.

* :class:`AllOf` and :class:`AnyOf` combine rules; each of the ``k`` parts of an ``AnyOf`` is
  tested at one-sided confidence ``1 - 0.05 / k`` (Bonferroni), so "some part holds" is not
  easier to reach by chance than one test, and dually an ``AllOf`` confirms a part's "does not
  hold" at ``1 - 0.05 / k``, so "some part does not hold" is not either.

Rows with different numbers of values (or an experiment declared ``paired=False``) fall back to
Welch's unequal-variance t test (Welch-Satterthwaite degrees of freedom; for a ratio, the delta
method on the log of the ratio of means). A row with one value, or differences with no spread at
all (exact, deterministic quantities), is decided on its value exactly: ties never support a
strict claim.

Each decision comes with its :class:`Comparison`: the test, the estimate with its two one-sided 95%
bounds (together a 90% two-sided interval), how many seeds agree with the estimate's sign, and, for
an inconclusive paired comparison, how many seeds the observed effect at the observed spread would
need to be resolved by the same test, so a reader can tell "a small effect" from "too few seeds".

Examples:
    >>> from jaxpapers.core.verdicts import Better, RowStats
    >>> rows = {
    ...     "ours": RowStats.from_values("ours", "method", [0.50, 0.61, 0.55]),
    ...     "base": RowStats.from_values("base", "baseline", [0.45, 0.57, 0.50]),
    ... }
    >>> Better("ours", "base").decide(rows, lower_is_better=False)
    'holds'
    >>> Better("ours", "base").decide(rows, lower_is_better=False, paired=False)
    'inconclusive'

References:
    Student (W. S. Gosset), The probable error of a mean, *Biometrika* 6, 1908.
    B. L. Welch, The generalization of "Student's" problem when several different population
    variances are involved, *Biometrika* 34, 1947.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

import numpy as np

from jaxpapers.core.checks import check_range

Verdict = Literal["holds", "does not hold", "inconclusive"]
HOLDS: Verdict = "holds"
FAILS: Verdict = "does not hold"
UNSURE: Verdict = "inconclusive"

#: Confidence of each one-sided bound (of each part of an :class:`AnyOf`: see there).
CONFIDENCE = 0.95
#: The confidence the tests use now: :data:`CONFIDENCE`, raised inside an :class:`AnyOf`.
_LEVEL: contextvars.ContextVar[float] = contextvars.ContextVar("confidence", default=CONFIDENCE)


@contextlib.contextmanager
def _confidence(level: float):
    token = _LEVEL.set(level)
    try:
        yield
    finally:
        _LEVEL.reset(token)


#: The largest seed count :func:`seeds_needed` searches.
MAX_SEEDS_NEEDED = 100_000


class RowStats(NamedTuple):
    """Mean and seed-to-seed standard deviation (ddof=1; 0 for one seed) of one table row."""

    method: str
    role: str
    mean: float
    std: float
    seeds: tuple[float, ...]

    @classmethod
    def from_values(cls, method: str, role: str, values: Sequence[float]) -> RowStats:
        arr = np.asarray(values, dtype=np.float64).reshape(-1)
        if arr.size == 0:
            raise ValueError(f"row {method!r} has no measured values")
        with np.errstate(invalid="ignore"):  # an inf value gives a nan spread, not a warning
            std = float(arr.std(ddof=1)) if arr.size > 1 else 0.0
        return cls(method, role, float(arr.mean()), std, tuple(float(v) for v in arr))


class Comparison(NamedTuple):
    """The evidence behind one rule's decision.

    Attributes:
      rule: the rule's sentence.
      test: the test that decided (``"paired t"``, ``"Welch t"``, ``"one-sample t"``, ``"exact"``).
      quantity: what ``estimate`` is (``"ours - base"``, ``"ours / base"``, ``"ours"``).
      estimate: the estimate of ``quantity``.
      low, high: its one-sided 95% lower and upper bounds (together a 90% interval).
      null: the value the claim is tested against.
      claim: ``">"`` when the claim is ``quantity > null``, ``"<"`` when ``quantity < null``.
      agree: seeds whose own value lies on the estimate's side of ``null`` (None if unpaired).
      n: values behind the estimate (per-seed values, or the larger row for Welch).
      verdict: the decision.
      seeds_needed: for an inconclusive per-seed test, the seeds the observed mean and spread would
        need to be decided by the same test (None when the estimate sits on ``null``, or beyond
        :data:`MAX_SEEDS_NEEDED`).
      confidence: the confidence of each one-sided bound: :data:`CONFIDENCE`, or higher for a
        part of an :class:`AnyOf` (Bonferroni).
    """

    rule: str
    test: str
    quantity: str
    estimate: float
    low: float
    high: float
    null: float
    claim: str
    agree: int | None
    n: int
    verdict: Verdict
    seeds_needed: int | None = None
    confidence: float = CONFIDENCE


class Assessment(NamedTuple):
    """A rule's verdict and the comparisons it rests on."""

    verdict: Verdict
    comparisons: tuple[Comparison, ...]


def t_quantile(df: float, confidence: float | None = None) -> float:
    """The one-sided ``confidence`` quantile of Student's t with ``df`` degrees of freedom
    (default: the level in force, :data:`CONFIDENCE` outside an :class:`AnyOf`)."""
    check_range("df", df, 0.0, low_open=True)
    level = _LEVEL.get() if confidence is None else confidence
    check_range("confidence", level, 0.5, 1.0, high_open=True)
    return _t_ppf(float(df), float(level))


@functools.lru_cache(maxsize=512)
def _t_ppf(df: float, level: float) -> float:
    from scipy.stats import t

    return float(t.ppf(level, df))


def seeds_needed(effect: float, std: float) -> int | None:
    """Smallest n >= 2 with ``t_{c, n-1} std / sqrt(n) < |effect|`` at the confidence ``c`` in
    force (None if none <= the cap)."""
    if not (math.isfinite(effect) and math.isfinite(std)) or effect == 0 or std <= 0:
        return None
    ratio = abs(effect) / std
    lo, hi = 2, MAX_SEEDS_NEEDED
    if t_quantile(hi - 1) / math.sqrt(hi) >= ratio:
        return None
    while lo < hi:  # t_{n-1} / sqrt(n) decreases in n: bisect
        mid = (lo + hi) // 2
        if t_quantile(mid - 1) / math.sqrt(mid) < ratio:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _check_claim(claim: str) -> None:
    if claim not in (">", "<"):
        raise ValueError(f"claim={claim!r}; expected '>' or '<'")


def _decide(low: float, high: float, null: float, claim: str) -> Verdict:
    if claim == ">":
        return HOLDS if low > null else (FAILS if high < null or high == low == null else UNSURE)
    return HOLDS if high < null else (FAILS if low > null or high == low == null else UNSURE)


def one_sample(
    values: Sequence[float], null: float, claim: str, *, rule: str, quantity: str, test: str
) -> Comparison:
    """Test ``mean(values) > null`` (``claim=">"``) or ``< null`` on per-seed values."""
    _check_claim(claim)
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if x.size == 0:
        raise ValueError("values is empty; expected at least one per-seed value")
    n = int(x.size)
    mean = float(x.mean())
    std = float(x.std(ddof=1)) if n > 1 else 0.0
    if n == 1 or std == 0.0:
        low = high = mean
        test = "exact" if n == 1 else f"exact ({test} with no spread)"
    else:
        half = t_quantile(n - 1) * std / math.sqrt(n)
        low, high = mean - half, mean + half
    verdict = _decide(low, high, null, claim)
    side = np.sign(mean - null)
    agree = int(np.sum(np.sign(x - null) == side)) if side != 0 else 0
    needed = seeds_needed(mean - null, std) if verdict == UNSURE else None
    return Comparison(
        rule, test, quantity, mean, low, high, null, claim, agree, n, verdict, needed, _LEVEL.get()
    )


def welch(
    a: Sequence[float], b: Sequence[float], null: float, claim: str, *, rule: str, quantity: str
) -> Comparison:
    """Welch's test of ``mean(a) - mean(b) > null`` (or ``<``); a one-value row adds no variance."""
    _check_claim(claim)
    xa = np.asarray(a, dtype=np.float64).reshape(-1)
    xb = np.asarray(b, dtype=np.float64).reshape(-1)
    for name, x in (("a", xa), ("b", xb)):
        if x.size == 0:
            raise ValueError(f"{name} is empty; expected at least one per-seed value")
    terms = [float(x.var(ddof=1)) / x.size if x.size > 1 else 0.0 for x in (xa, xb)]
    est = float(xa.mean() - xb.mean())
    var = sum(terms)
    if var == 0.0:
        low = high = est
        test = "exact"
    else:
        df = var**2 / sum(
            v**2 / (x.size - 1) for v, x in zip(terms, (xa, xb), strict=True) if x.size > 1
        )
        half = t_quantile(df) * math.sqrt(var)
        low, high, test = est - half, est + half, "Welch t"
    n = max(xa.size, xb.size)
    verdict = _decide(low, high, null, claim)
    return Comparison(
        rule, test, quantity, est, low, high, null, claim, None, n, verdict, None, _LEVEL.get()
    )


def _nonfinite(rule: str, quantity: str, claim: str, null: float, n: int, verdict: Verdict):
    nan = float("nan")
    return Comparison(
        rule,
        "not testable (non-finite values)",
        quantity,
        nan,
        nan,
        nan,
        null,
        claim,
        None,
        n,
        verdict,
        None,
        _LEVEL.get(),
    )


@runtime_checkable
class Rule(Protocol):
    """A verdict rule: a sentence for the table and a decision computed from the rows."""

    def names(self) -> tuple[str, ...]: ...

    def describe(self, lower_is_better: bool) -> str: ...

    def evaluate(
        self, rows: Mapping[str, RowStats], lower_is_better: bool, *, paired: bool = True
    ) -> Assessment: ...


class RuleBase:
    """Base of the rules: ``decide`` is the verdict of the subclass's ``evaluate``.

    A rule of one's own (e.g. one that also knows an estimator's noise floor) subclasses it and
    implements ``names``, ``describe`` and ``evaluate``.
    """

    def decide(
        self, rows: Mapping[str, RowStats], lower_is_better: bool, *, paired: bool = True
    ) -> Verdict:
        return self.evaluate(rows, lower_is_better, paired=paired).verdict  # type: ignore[attr-defined]


def _compare(
    m: RowStats, b: RowStats, null: float, claim: str, rule: str, paired: bool
) -> Comparison:
    quantity = f"{m.method} - {b.method}"
    if not all(math.isfinite(v) for v in m.seeds):
        return _nonfinite(rule, quantity, claim, null, len(m.seeds), FAILS)
    if not all(math.isfinite(v) for v in b.seeds):
        return _nonfinite(rule, quantity, claim, null, len(b.seeds), UNSURE)
    if paired and len(m.seeds) == len(b.seeds):
        d = np.subtract(m.seeds, b.seeds)
        return one_sample(d, null, claim, rule=rule, quantity=quantity, test="paired t")
    return welch(m.seeds, b.seeds, null, claim, rule=rule, quantity=quantity)


@dataclasses.dataclass(frozen=True)
class Better(RuleBase):
    """``method`` improves on ``baseline``: a one-sided 95% t test on the per-seed differences.

    For claims whose verb is "improves", "outperforms", "beats", "lower" or "higher". A non-finite
    value in the method's row does not hold (a diverged run), in the baseline's is inconclusive.
    """

    method: str
    baseline: str

    def names(self) -> tuple[str, ...]:
        return (self.method, self.baseline)

    def describe(self, lower_is_better: bool) -> str:
        op = "<" if lower_is_better else ">"
        return f"{self.method} {op} {self.baseline} (one-sided 95% t test on per-seed differences)"

    def evaluate(
        self, rows: Mapping[str, RowStats], lower_is_better: bool, *, paired: bool = True
    ) -> Assessment:
        claim = "<" if lower_is_better else ">"
        c = _compare(
            rows[self.method],
            rows[self.baseline],
            0.0,
            claim,
            self.describe(lower_is_better),
            paired,
        )
        return Assessment(c.verdict, (c,))


@dataclasses.dataclass(frozen=True)
class NoWorse(RuleBase):
    """``method`` is worse than ``baseline`` by less than ``margin`` (non-inferiority).

    For claims whose verb is "matches" or "is no worse"; never for "improves". ``margin`` is in the
    metric's units, positive, and named before the numbers are seen (justify it where the
    experiment is declared). Holds when the one-sided 95% bound of the difference stays inside the
    margin, does not hold when the other bound is past it.
    """

    method: str
    baseline: str
    margin: float

    def __post_init__(self) -> None:
        if not (isinstance(self.margin, int | float) and math.isfinite(self.margin)) or (
            self.margin <= 0
        ):
            raise ValueError(
                f"NoWorse({self.method!r}, {self.baseline!r}): margin={self.margin!r}; expected a "
                "finite margin > 0 in the metric's units"
            )

    def names(self) -> tuple[str, ...]:
        return (self.method, self.baseline)

    def describe(self, lower_is_better: bool) -> str:
        op = "<" if lower_is_better else ">"
        sign = "+" if lower_is_better else "-"
        return (
            f"{self.method} {op} {self.baseline} {sign} {self.margin:g} (non-inferiority margin; "
            "one-sided 95% t test on per-seed differences)"
        )

    def evaluate(
        self, rows: Mapping[str, RowStats], lower_is_better: bool, *, paired: bool = True
    ) -> Assessment:
        claim = "<" if lower_is_better else ">"
        null = self.margin if lower_is_better else -self.margin
        c = _compare(
            rows[self.method],
            rows[self.baseline],
            null,
            claim,
            self.describe(lower_is_better),
            paired,
        )
        return Assessment(c.verdict, (c,))


@dataclasses.dataclass(frozen=True)
class Ratio(RuleBase):
    """``numerator / denominator >= at_least``: a one-sided 95% t test on the per-seed ratios.

    Unpaired rows (or a non-positive per-seed denominator) fall back to the ratio of means with a
    delta-method bound on its log (Welch-Satterthwaite degrees of freedom).
    """

    numerator: str
    denominator: str
    at_least: float

    def names(self) -> tuple[str, ...]:
        return (self.numerator, self.denominator)

    def describe(self, lower_is_better: bool) -> str:
        return (
            f"{self.numerator} / {self.denominator} > {self.at_least:g} (one-sided 95% t test on "
            "per-seed ratios)"
        )

    def evaluate(
        self, rows: Mapping[str, RowStats], lower_is_better: bool, *, paired: bool = True
    ) -> Assessment:
        n, d = rows[self.numerator], rows[self.denominator]
        rule, quantity = self.describe(lower_is_better), f"{n.method} / {d.method}"
        values = (*n.seeds, *d.seeds)
        if not all(math.isfinite(v) for v in values) or d.mean <= 0:
            c = _nonfinite(rule, quantity, ">", self.at_least, len(n.seeds), UNSURE)
            return Assessment(UNSURE, (c,))
        if paired and len(n.seeds) == len(d.seeds) and min(d.seeds) > 0:
            r = np.divide(n.seeds, d.seeds)
            c = one_sample(r, self.at_least, ">", rule=rule, quantity=quantity, test="paired t")
            return Assessment(c.verdict, (c,))
        if n.mean <= 0:
            c = one_sample(
                [n.mean / d.mean], self.at_least, ">", rule=rule, quantity=quantity, test="exact"
            )
            return Assessment(c.verdict, (c,))
        terms = [
            (r.std**2 / (len(r.seeds) * r.mean**2), len(r.seeds))
            for r in (n, d)
            if len(r.seeds) > 1
        ]
        est = n.mean / d.mean
        var = sum(v for v, _ in terms)
        if var == 0.0:
            low = high = est
            test = "exact"
        else:
            df = var**2 / sum(v**2 / (k - 1) for v, k in terms)
            half = t_quantile(df) * math.sqrt(var)
            low, high, test = est * math.exp(-half), est * math.exp(half), "Welch t (log ratio)"
        c = Comparison(
            rule, test, quantity, est, low, high, self.at_least, ">", None,
            max(len(n.seeds), len(d.seeds)), _decide(low, high, self.at_least, ">"), None,
            _LEVEL.get(),
        )  # fmt: skip
        return Assessment(c.verdict, (c,))


@dataclasses.dataclass(frozen=True)
class Threshold(RuleBase):
    """A row's mean lies below (or above) ``value``: a one-sided 95% t test on its per-seed values.

    A non-finite value does not hold.
    """

    row: str
    value: float
    below: bool = True

    def names(self) -> tuple[str, ...]:
        return (self.row,)

    def describe(self, lower_is_better: bool) -> str:
        return f"{self.row} {'<' if self.below else '>'} {self.value:g} (one-sided 95% t test)"

    def evaluate(
        self, rows: Mapping[str, RowStats], lower_is_better: bool, *, paired: bool = True
    ) -> Assessment:
        r = rows[self.row]
        rule, claim = self.describe(lower_is_better), "<" if self.below else ">"
        if not all(math.isfinite(v) for v in r.seeds):
            c = _nonfinite(rule, r.method, claim, self.value, len(r.seeds), FAILS)
            return Assessment(FAILS, (c,))
        c = one_sample(
            r.seeds, self.value, claim, rule=rule, quantity=r.method, test="one-sample t"
        )
        return Assessment(c.verdict, (c,))


def evaluate_rule(
    rule: Any, rows: Mapping[str, RowStats], lower_is_better: bool, *, paired: bool = True
) -> Assessment:
    """:meth:`Rule.evaluate` of ``rule``; a rule with only ``decide`` gives no comparisons."""
    if hasattr(rule, "evaluate"):
        return rule.evaluate(rows, lower_is_better, paired=paired)
    return Assessment(rule.decide(rows, lower_is_better), ())


@dataclasses.dataclass(frozen=True)
class AllOf(RuleBase):
    """Holds when every part holds; does not hold when some part does not hold.

    Each part's "holds" is tested at the level in force (:data:`CONFIDENCE`, or an enclosing
    ``AnyOf``'s): "every part holds" is an intersection of claims and needs no correction. "Some
    part does not hold" is a union over ``k`` parts, so a part that does not hold at that level is
    tested again at one-sided ``1 - (1 - c) / k`` (Bonferroni, the dual of :class:`AnyOf`), and
    the rule does not hold only when one still does not; otherwise it is inconclusive. Then a
    true claim is called "does not hold" with probability at most ``1 - c``, where testing each
    part at ``c`` would allow up to ``k (1 - c)``. The comparisons report each such part at the
    level it was finally judged at.
    """

    parts: tuple[Any, ...]

    def names(self) -> tuple[str, ...]:
        return tuple(n for p in self.parts for n in p.names())

    def fail_level(self) -> float:
        """The one-sided confidence at which a part's "does not hold" is confirmed, now."""
        return 1.0 - (1.0 - _LEVEL.get()) / max(len(self.parts), 1)

    def describe(self, lower_is_better: bool) -> str:
        parts = "; ".join(p.describe(lower_is_better) for p in self.parts)
        if len(self.parts) < 2:
            return parts
        level = f"{100 * self.fail_level():g}%"
        return (
            f"all of {len(self.parts)}; a part does not hold only at one-sided {level} "
            f"(Bonferroni): {parts}"
        )

    def evaluate(
        self, rows: Mapping[str, RowStats], lower_is_better: bool, *, paired: bool = True
    ) -> Assessment:
        assessed = [evaluate_rule(p, rows, lower_is_better, paired=paired) for p in self.parts]
        if len(self.parts) > 1 and any(a.verdict == FAILS for a in assessed):
            with _confidence(self.fail_level()):
                assessed = [
                    evaluate_rule(p, rows, lower_is_better, paired=paired)
                    if a.verdict == FAILS
                    else a
                    for p, a in zip(self.parts, assessed, strict=True)
                ]
        return _verdict_of(assessed, every=True)


@dataclasses.dataclass(frozen=True)
class AnyOf(RuleBase):
    """Holds when some part holds; does not hold when every part does not hold.

    For "the best of several candidates beats the baselines" claims: each candidate is judged on
    its own rows (no per-seed minimum over candidates, which would be biased low). With ``k``
    parts each part is tested at one-sided confidence ``1 - (1 - c) / k`` (Bonferroni; ``c`` is
    :data:`CONFIDENCE`, or the level of an enclosing ``AnyOf``), so "some part holds" is wrong
    with probability at most ``1 - c`` when no part's claim is true. Two one-sided parts on one
    quantity (``> x`` or ``< x``) are then a two-sided test at ``c``.
    """

    parts: tuple[Any, ...]

    def names(self) -> tuple[str, ...]:
        return tuple(n for p in self.parts for n in p.names())

    def level(self) -> float:
        """The one-sided confidence of each part, in the level in force now."""
        return 1.0 - (1.0 - _LEVEL.get()) / max(len(self.parts), 1)

    def describe(self, lower_is_better: bool) -> str:
        parts = " OR ".join(f"({p.describe(lower_is_better)})" for p in self.parts)
        if len(self.parts) < 2:
            return parts
        level = f"{100 * self.level():g}%"
        return f"any of {len(self.parts)}, each at one-sided {level} (Bonferroni): {parts}"

    def evaluate(
        self, rows: Mapping[str, RowStats], lower_is_better: bool, *, paired: bool = True
    ) -> Assessment:
        with _confidence(self.level()):
            assessed = [evaluate_rule(p, rows, lower_is_better, paired=paired) for p in self.parts]
            return _verdict_of(assessed, every=False)


def _verdict_of(assessed: Sequence[Assessment], *, every: bool) -> Assessment:
    """The combined verdict of judged parts: ``every`` all hold / any fails, else any holds / all
    fail; the comparisons of every part, in order."""
    verdicts = [a.verdict for a in assessed]
    strong, weak = (HOLDS, FAILS) if every else (FAILS, HOLDS)
    if all(v == strong for v in verdicts):
        verdict = strong
    elif any(v == weak for v in verdicts):
        verdict = weak
    else:
        verdict = UNSURE
    return Assessment(verdict, tuple(c for a in assessed for c in a.comparisons))


def format_number(x: float | None) -> str:
    """A number for the results table: 4 significant digits, 3 for very large or small."""
    if x is None or not math.isfinite(x):
        return "nan"
    ax = abs(x)
    if ax != 0 and (ax >= 1e5 or ax < 1e-3):
        return f"{x:.3g}"
    return f"{x:.4g}"


def describe_comparison(c: Mapping[str, Any] | Comparison) -> str:
    """One line of evidence for the results table."""
    c = c._asdict() if isinstance(c, Comparison) else c
    est = f"{c['quantity']} = {format_number(c['estimate'])}"
    if c["test"].startswith("exact") or c["test"].startswith("not testable"):
        text = f"{est} ({c['test']}; claim {c['claim']} {format_number(c['null'])})"
    else:
        level = 100 * c.get("confidence", CONFIDENCE)
        text = (
            f"{est}, one-sided {level:g}% bounds "
            f"[{format_number(c['low'])}, {format_number(c['high'])}] "
            f"({c['test']}, n={c['n']}; claim {c['claim']} {format_number(c['null'])})"
        )
    if c.get("agree") is not None and not c["test"].startswith("not testable"):
        text += f"; {c['agree']}/{c['n']} seeds on the estimate's side"
    if c["verdict"] == UNSURE and not c["test"].startswith("not testable"):
        needed = c.get("seeds_needed")
        text += (
            f"; this effect at this spread would need {needed} seeds"
            if needed is not None
            else "; no seed count resolves an effect this small at this spread"
        )
    return text


__all__ = [
    "CONFIDENCE",
    "FAILS",
    "HOLDS",
    "UNSURE",
    "AllOf",
    "AnyOf",
    "Assessment",
    "Better",
    "Comparison",
    "NoWorse",
    "Ratio",
    "RowStats",
    "Rule",
    "RuleBase",
    "Threshold",
    "Verdict",
    "describe_comparison",
    "evaluate_rule",
    "format_number",
    "one_sample",
    "seeds_needed",
    "t_quantile",
    "welch",
]
