"""Experiments, verdict rules, the registry and the resumable runner behind ``jaxpapers reproduce``.

A paper's ``experiments.py`` declares each experiment once: the claim in words, the metric, which
rows are baselines and which are the paper's method, a verdict rule, and a ``run`` function that
returns per-seed measurements. The runner computes mean and spread over seeds and applies the rule:
no verdict is ever typed by hand.

Durability: every finished experiment is written to ``DIR/<paper>/result.json`` at once (atomic
rename), and ``Context.cached`` stores finished sub-steps of an experiment under
``DIR/<paper>/work/<experiment>/``, so a run killed at any point and restarted with ``--resume``
repeats no finished work and, seeds being explicit, ends with the same numbers.

Schema of ``result.json`` (stable; other tools read it)::

    {"paper": "P17", "title": ..., "size": "quick", "seeds": 3, "runtime_s": ...,
     "experiments": [{"id": ..., "claim": ..., "metric": ..., "lower_is_better": true,
                      "rows": [{"method": ..., "role": "baseline"|"method",
                                "mean": ..., "std": ..., "seeds": [...]}],
                      "rule": ..., "verdict": "holds"|"does not hold"|"inconclusive",
                      "runtime_s": ..., "extras": {...}, "plots": [...]}]}
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol

import numpy as np

from jaxpapers.core.papers import PAPERS, Paper, get_paper
from jaxpapers.core.progress import progress

Size = Literal["smoke", "quick", "full"]
Verdict = Literal["holds", "does not hold", "inconclusive"]
SIZES: tuple[str, ...] = ("smoke", "quick", "full")
DEFAULT_SEEDS: dict[str, int] = {"smoke": 2, "quick": 3, "full": 5}

HOLDS: Verdict = "holds"
FAILS: Verdict = "does not hold"
UNSURE: Verdict = "inconclusive"


# --------------------------------------------------------------------------------------------
# Per-row statistics and verdict rules
# --------------------------------------------------------------------------------------------


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
        std = float(arr.std(ddof=1)) if arr.size > 1 else 0.0
        return cls(method, role, float(arr.mean()), std, tuple(float(v) for v in arr))


def _spread(a: RowStats, b: RowStats) -> float:
    """Seed-to-seed spread of a difference of two rows: sqrt(std_a^2 + std_b^2)."""
    return math.hypot(a.std, b.std)


class Rule(Protocol):
    """A verdict rule: a sentence for the table and a decision computed from the rows."""

    def describe(self, lower_is_better: bool) -> str: ...

    def decide(self, rows: Mapping[str, RowStats], lower_is_better: bool) -> Verdict: ...

    def names(self) -> tuple[str, ...]: ...


@dataclasses.dataclass(frozen=True)
class Better:
    """``method`` beats ``baseline`` by more than the seed-to-seed spread.

    With ``at_least=True`` the claim is "no worse": it holds unless the method is worse by more
    than the spread. Otherwise: holds when the improvement exceeds the spread, does not hold when
    the method is worse by more than the spread, and is inconclusive in between.
    """

    method: str
    baseline: str
    at_least: bool = False

    def names(self) -> tuple[str, ...]:
        return (self.method, self.baseline)

    def describe(self, lower_is_better: bool) -> str:
        op = (
            ("<=" if self.at_least else "<")
            if lower_is_better
            else (">=" if self.at_least else ">")
        )
        return f"{self.method} {op} {self.baseline} beyond the seed spread"

    def decide(self, rows: Mapping[str, RowStats], lower_is_better: bool) -> Verdict:
        m, b = rows[self.method], rows[self.baseline]
        gain = (b.mean - m.mean) if lower_is_better else (m.mean - b.mean)
        spread = _spread(m, b)
        if not (math.isfinite(gain) and math.isfinite(spread)):
            return FAILS if not math.isfinite(m.mean) else UNSURE
        if self.at_least:
            return HOLDS if gain >= -spread else FAILS
        if gain > spread:
            return HOLDS
        if gain < -spread:
            return FAILS
        return UNSURE


@dataclasses.dataclass(frozen=True)
class Ratio:
    """``numerator / denominator >= at_least``, judged on the worst and best case within one std."""

    numerator: str
    denominator: str
    at_least: float

    def names(self) -> tuple[str, ...]:
        return (self.numerator, self.denominator)

    def describe(self, lower_is_better: bool) -> str:
        return f"{self.numerator} / {self.denominator} >= {self.at_least:g}"

    def decide(self, rows: Mapping[str, RowStats], lower_is_better: bool) -> Verdict:
        n, d = rows[self.numerator], rows[self.denominator]
        if d.mean <= 0 or not math.isfinite(n.mean / d.mean):
            return UNSURE
        worst = (n.mean - n.std) / (d.mean + d.std)
        best = (n.mean + n.std) / max(d.mean - d.std, 1e-300)
        if worst >= self.at_least:
            return HOLDS
        if best < self.at_least:
            return FAILS
        return UNSURE


@dataclasses.dataclass(frozen=True)
class Threshold:
    """A row's mean lies below (or above) ``value`` by more than its own seed spread."""

    row: str
    value: float
    below: bool = True

    def names(self) -> tuple[str, ...]:
        return (self.row,)

    def describe(self, lower_is_better: bool) -> str:
        return f"{self.row} {'<' if self.below else '>'} {self.value:g}"

    def decide(self, rows: Mapping[str, RowStats], lower_is_better: bool) -> Verdict:
        r = rows[self.row]
        margin = (self.value - r.mean) if self.below else (r.mean - self.value)
        if not math.isfinite(margin):
            return FAILS
        if margin > r.std or (margin > 0 and r.std == 0):
            return HOLDS
        if margin < -r.std or (margin <= 0 and r.std == 0):
            return FAILS
        return UNSURE


@dataclasses.dataclass(frozen=True)
class AllOf:
    """Holds when every part holds; does not hold when any part does not hold."""

    parts: tuple[Any, ...]

    def names(self) -> tuple[str, ...]:
        return tuple(n for p in self.parts for n in p.names())

    def describe(self, lower_is_better: bool) -> str:
        return "; ".join(p.describe(lower_is_better) for p in self.parts)

    def decide(self, rows: Mapping[str, RowStats], lower_is_better: bool) -> Verdict:
        verdicts = [p.decide(rows, lower_is_better) for p in self.parts]
        if all(v == HOLDS for v in verdicts):
            return HOLDS
        if any(v == FAILS for v in verdicts):
            return FAILS
        return UNSURE


@dataclasses.dataclass(frozen=True)
class AnyOf:
    """Holds when some part holds; does not hold when every part does not hold.

    For "the best of several candidates beats the baselines" claims: each candidate is judged on
    its own rows (no per-seed minimum over candidates, which would be biased low).
    """

    parts: tuple[Any, ...]

    def names(self) -> tuple[str, ...]:
        return tuple(n for p in self.parts for n in p.names())

    def describe(self, lower_is_better: bool) -> str:
        return " OR ".join(f"({p.describe(lower_is_better)})" for p in self.parts)

    def decide(self, rows: Mapping[str, RowStats], lower_is_better: bool) -> Verdict:
        verdicts = [p.decide(rows, lower_is_better) for p in self.parts]
        if any(v == HOLDS for v in verdicts):
            return HOLDS
        if all(v == FAILS for v in verdicts):
            return FAILS
        return UNSURE


# --------------------------------------------------------------------------------------------
# Experiments and their registry
# --------------------------------------------------------------------------------------------


class Outcome(NamedTuple):
    """What an experiment's ``run`` returns.

    Attributes:
      values: per-seed measurements of each row, ``{row name: [value per seed]}``.
      extras: JSON-serialisable extra data (curves, settings) stored in ``result.json``.
    """

    values: Mapping[str, Sequence[float]]
    extras: Mapping[str, Any] = {}


@dataclasses.dataclass(frozen=True)
class Experiment:
    """One registered experiment of a paper.

    Attributes:
      paper: paper id, e.g. ``"P17"``.
      id: short identifier, unique within the paper.
      claim: the claim in words.
      metric: what the numbers measure, with units.
      lower_is_better: direction of the metric.
      baselines: row names that are baselines.
      methods: row names that are the paper's method(s).
      rule: verdict rule over the rows.
      run: ``run(ctx) -> Outcome``.
      plot: optional ``plot(outcome, path)`` that writes a PNG.
      sizes: the run sizes this experiment belongs to (default all); e.g. ``("full",)`` for a
        study too costly for quick mode. ``run_paper`` skips it at other sizes unless it is
        named explicitly through ``only``.
      row_sizes: the run sizes of rows that do not run at every size, ``{row: sizes}``; e.g. a
        costly reference row left out of quick mode. A row named by ``rule`` runs at every size.
        ``run`` asks :meth:`Context.runs` whether to compute a row; the record lists the rows
        left out (``rows_not_run``).
    """

    paper: str
    id: str
    claim: str
    metric: str
    lower_is_better: bool
    baselines: tuple[str, ...]
    methods: tuple[str, ...]
    rule: Any
    run: Callable[[Context], Outcome]
    plot: Callable[[Outcome, Path], None] | None = None
    sizes: tuple[str, ...] = SIZES
    row_sizes: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        bad = [s for s in self.sizes if s not in SIZES]
        if bad or not self.sizes:
            raise ValueError(
                f"experiment {self.paper}/{self.id}: sizes={self.sizes!r}; expected a non-empty "
                f"subset of {SIZES}"
            )
        rows = set(self.baselines) | set(self.methods)
        for row, sizes in self.row_sizes.items():
            if row not in rows:
                raise ValueError(
                    f"experiment {self.paper}/{self.id}: row_sizes names row {row!r}, which is "
                    f"neither a baseline {self.baselines} nor a method {self.methods}"
                )
            if isinstance(sizes, str) or not set(sizes) & set(self.sizes) or set(sizes) - {*SIZES}:
                raise ValueError(
                    f"experiment {self.paper}/{self.id}: row_sizes[{row!r}]={sizes!r}; expected "
                    f"a tuple of sizes from {SIZES} with at least one of the experiment's "
                    f"sizes {self.sizes}"
                )
            if row in self.rule.names():
                raise ValueError(
                    f"experiment {self.paper}/{self.id}: row {row!r} is named by the rule, so it "
                    "must run at every size; it cannot be in row_sizes"
                )
        missing = [n for n in self.rule.names() if n not in rows]
        if missing:
            raise ValueError(
                f"experiment {self.paper}/{self.id}: rule names rows {missing} that are neither "
                f"baselines {self.baselines} nor methods {self.methods}"
            )
        if set(self.baselines) & set(self.methods):
            raise ValueError(
                f"experiment {self.paper}/{self.id}: a row is both baseline and method"
            )

    def rows_not_run(self, size: str) -> tuple[str, ...]:
        """The declared rows that do not run at ``size`` (see ``row_sizes``)."""
        return tuple(r for r, sizes in self.row_sizes.items() if size not in sizes)


def sized(run: Callable[[Context, Any], Outcome], sizes: Callable[[Context], Any]):
    """An experiment body ``ctx -> run(ctx, sizes(ctx))`` for runs that take a size record.

    ``sizes`` picks the record of the run's size (usually ``ctx.pick(smoke=..., quick=...,
    full=...)`` over a table of keyword-field NamedTuples).
    """

    @functools.wraps(run)
    def wrapped(ctx: Context) -> Outcome:
        return run(ctx, sizes(ctx))

    return wrapped


_REGISTRY: dict[str, dict[str, Experiment]] = {}


def register(experiment: Experiment) -> Experiment:
    """Add an experiment to the registry (idempotent for the same id)."""
    get_paper(experiment.paper)
    _REGISTRY.setdefault(experiment.paper, {})[experiment.id] = experiment
    return experiment


def experiments_for(paper: Paper | str) -> list[Experiment]:
    """Import the paper's ``experiments`` module and return its experiments in order."""
    paper = get_paper(paper) if isinstance(paper, str) else paper
    if not paper.implemented:
        raise ValueError(f"paper {paper.id} ({paper.import_name}) is not implemented yet")
    importlib.import_module(f"{paper.import_name}.experiments")
    return list(_REGISTRY.get(paper.id, {}).values())


# --------------------------------------------------------------------------------------------
# Run context: sizes, seeds, cached sub-steps
# --------------------------------------------------------------------------------------------


def _to_jsonable(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): _to_jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_to_jsonable(v) for v in x]
    if hasattr(x, "tolist"):
        return _to_jsonable(np.asarray(x).tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else (1e308 if x > 0 else -1e308)
    return x


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON through a temporary file and an atomic rename: a kill never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(_to_jsonable(data), f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclasses.dataclass
class Context:
    """Passed to every experiment's ``run``.

    Attributes:
      size: ``"smoke"`` (tests), ``"quick"`` (``make reproduce``) or ``"full"`` (GPU/TPU).
      seeds: number of seeds; experiments use seeds ``0 .. seeds - 1``.
      workdir: private folder for this experiment's cached steps and checkpoints.
      skip_rows: declared rows that do not run at this size (:attr:`Experiment.row_sizes`).
    """

    size: Size
    seeds: int
    workdir: Path
    skip_rows: frozenset[str] = frozenset()

    def runs(self, row: str) -> bool:
        """Whether the experiment computes ``row`` at this size."""
        return row not in self.skip_rows

    @property
    def quick_compile(self) -> dict[str, Any] | None:
        """XLA options for this size's programs: :data:`~jaxpapers.core.pytrees.QUICK_COMPILE`
        (LLVM level 1, bit-identical results where measured) at the quick size, whose budget
        compiling dominates; XLA's defaults otherwise."""
        from jaxpapers.core.pytrees import QUICK_COMPILE

        return QUICK_COMPILE if self.size == "quick" else None

    def pick(self, *, smoke: Any, quick: Any, full: Any) -> Any:
        """Return the value for the current size."""
        return {"smoke": smoke, "quick": quick, "full": full}[self.size]

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seeds))

    def cached(self, name: str, compute: Callable[[], Any], *, shared: bool = False) -> Any:
        """Return ``compute()``, stored as JSON under ``name``; a resumed run loads it instead.

        With ``shared=True`` the value is stored once for all experiments of the paper (in
        ``DIR/<paper>/work/_shared``), so experiments that need the same baseline numbers compute
        them once; ``name`` must then identify the computation fully.
        """
        folder = self.workdir.parent / "_shared" if shared else self.workdir
        path = folder / f"{name}.json"
        if path.exists():
            with path.open() as f:
                return json.load(f)
        value = _to_jsonable(compute())
        if _is_primary():
            write_json_atomic(path, value)
        return value

    def checkpoint_dir(self, name: str) -> Path:
        """A folder for orbax checkpoints of one training run inside this experiment."""
        path = (self.workdir / "ckpt" / name).absolute()
        path.mkdir(parents=True, exist_ok=True)
        return path


# --------------------------------------------------------------------------------------------
# Runner
# --------------------------------------------------------------------------------------------


def summarise(exp: Experiment, outcome: Outcome, size: str | None = None) -> dict[str, Any]:
    """Turn an outcome into the JSON record of one experiment, verdict computed by the rule.

    With ``size``, the rows that ``exp.row_sizes`` leaves out at that size are not expected
    (and must not be returned); without it every declared row is.
    """
    skipped = exp.rows_not_run(size) if size is not None else ()
    declared = [(n, "baseline") for n in exp.baselines] + [(n, "method") for n in exp.methods]
    declared = [(n, role) for n, role in declared if n not in skipped]
    missing = [n for n, _ in declared if n not in outcome.values]
    if missing:
        raise ValueError(f"experiment {exp.paper}/{exp.id} returned no values for rows {missing}")
    extra = [n for n in skipped if n in outcome.values]
    if extra:
        raise ValueError(
            f"experiment {exp.paper}/{exp.id} returned rows {extra}, which row_sizes leaves out "
            f"at size {size!r}"
        )
    stats = {n: RowStats.from_values(n, role, outcome.values[n]) for n, role in declared}
    verdict = exp.rule.decide(stats, exp.lower_is_better)
    return {
        "id": exp.id,
        "claim": exp.claim,
        "metric": exp.metric,
        "lower_is_better": exp.lower_is_better,
        "rows": [
            {"method": s.method, "role": s.role, "mean": s.mean, "std": s.std, "seeds": s.seeds}
            for s in stats.values()
        ],
        "rule": exp.rule.describe(exp.lower_is_better),
        "verdict": verdict,
        **({"rows_not_run": {n: list(exp.row_sizes[n]) for n in skipped}} if skipped else {}),
        "extras": dict(outcome.extras),
    }


def _is_primary() -> bool:
    """Whether this process writes results: process 0 of a ``jax.distributed`` run (all others
    compute the same numbers and write nothing), or the only process."""
    from jaxpapers.core.distributed import is_primary

    return is_primary()


def _load_json(path: Path) -> dict[str, Any] | None:
    try:
        with path.open() as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def run_paper(
    paper: Paper | str,
    out: Path,
    *,
    size: Size = "quick",
    seeds: int | None = None,
    resume: bool = False,
    only: Iterable[str] | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run one paper's experiments and write ``out/<paper id>/result.json`` after each one.

    Args:
      paper: paper id or :class:`Paper`.
      out: results folder.
      size: problem size.
      seeds: number of seeds (default per size).
      resume: keep finished experiments of an earlier run with the same size and seeds, and
        their cached sub-steps and checkpoints; otherwise start clean.
      only: optional experiment ids to run.
      log: where progress lines go.

    Returns:
      The ``result.json`` record.
    """
    paper = get_paper(paper) if isinstance(paper, str) else paper
    if size not in SIZES:
        raise ValueError(f"size={size!r}; expected one of {SIZES}")
    seeds = DEFAULT_SEEDS[size] if seeds is None else int(seeds)
    if seeds < 1:
        raise ValueError(f"seeds={seeds}; expected a positive number of seeds")
    registered = experiments_for(paper)
    order = {e.id: k for k, e in enumerate(registered)}
    if only is not None:
        wanted = set(only)
        unknown = wanted - set(order)
        if unknown:
            raise ValueError(
                f"unknown experiment ids {sorted(unknown)} for {paper.id}; "
                f"expected some of {list(order)}"
            )
        exps = [e for e in registered if e.id in wanted]
    else:
        exps = [e for e in registered if size in e.sizes]
        for e in registered:
            if size not in e.sizes:
                log(f"{paper.id}/{e.id}: not part of size {size} (sizes {e.sizes}), skipped")

    pdir = Path(out) / paper.id
    result_path = pdir / "result.json"
    # A resumed run keeps every finished experiment; a run of selected experiments (``only``)
    # re-runs those and keeps the others of an earlier run of the same size and seeds.
    previous = _load_json(result_path) if (resume or only is not None) else None
    if previous and (previous.get("size"), previous.get("seeds")) != (size, seeds):
        log(
            f"{paper.id}: earlier results were for size={previous.get('size')} "
            f"seeds={previous.get('seeds')}; starting clean"
        )
        previous = None
    primary = _is_primary()
    if not resume and primary:
        if only is None:
            if (pdir / "work").exists():
                shutil.rmtree(pdir / "work")
        else:
            for e in exps:
                if (pdir / "work" / e.id).exists():
                    shutil.rmtree(pdir / "work" / e.id)
    earlier = {e["id"]: e for e in (previous or {}).get("experiments", [])}
    done = earlier if resume else {}

    record: dict[str, Any] = {
        "paper": paper.id,
        "title": paper.title,
        "size": size,
        "seeds": seeds,
        "runtime_s": 0.0,
        "experiments": [],
    }
    for exp in exps:
        if exp.id in done:
            log(f"{paper.id}/{exp.id}: finished earlier, kept")
            record["experiments"].append(done[exp.id])
        else:
            log(f"{paper.id}/{exp.id}: running ({size}, {seeds} seeds)")
            ctx = Context(
                size=size,
                seeds=seeds,
                workdir=pdir / "work" / exp.id,
                skip_rows=frozenset(exp.rows_not_run(size)),
            )
            ctx.workdir.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            outcome = exp.run(ctx)
            entry = summarise(exp, outcome, size)
            entry["runtime_s"] = time.perf_counter() - t0
            entry["plots"] = _plot(exp, outcome, pdir) if primary else []
            record["experiments"].append(entry)
            log(f"{paper.id}/{exp.id}: {entry['verdict']} ({entry['runtime_s']:.1f} s)")
        # Experiments finished earlier but not part of this run stay in the file, in the
        # registry's order (entries of experiments no longer registered go last).
        ran = {x["id"] for x in record["experiments"]}
        kept = record["experiments"] + [e for i, e in earlier.items() if i not in ran]
        kept.sort(key=lambda e: order.get(e["id"], len(order)))
        record["runtime_s"] = sum(e.get("runtime_s", 0.0) for e in kept)
        if primary:
            write_json_atomic(result_path, {**record, "experiments": kept})
    return {**record, "experiments": kept} if exps else record


def _plot(exp: Experiment, outcome: Outcome, pdir: Path) -> list[str]:
    if exp.plot is None:
        return []
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError:
        return []
    path = pdir / f"{exp.id}.png"
    exp.plot(outcome, path)
    import matplotlib.pyplot as plt

    plt.close("all")
    return [path.name]


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------


def _fmt(x: float) -> str:
    if x is None or not math.isfinite(x):
        return "nan"
    ax = abs(x)
    if ax != 0 and (ax >= 1e5 or ax < 1e-3):
        return f"{x:.3g}"
    return f"{x:.4g}"


def _fmt_row(r: Mapping[str, Any]) -> str:
    return f"{r['method']}: {_fmt(r['mean'])} ± {_fmt(r['std'])}"


def render_markdown(out: Path) -> str:
    """Build ``RESULTS.md`` from every ``out/<paper>/result.json``."""
    lines = [
        "# Results",
        "",
        "Generated by `jaxpapers reproduce` from `*/result.json`; every verdict is computed",
        "from the measured numbers by the rule shown (mean ± seed-to-seed std over the seeds).",
        "",
        "| paper | experiment | claim | metric | baseline | method | rule | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    sections: list[str] = []
    runs: list[str] = []
    for paper in PAPERS:
        rec = _load_json(Path(out) / paper.id / "result.json")
        if not rec:
            continue
        for e in rec["experiments"]:
            base = "<br>".join(_fmt_row(r) for r in e["rows"] if r["role"] == "baseline")
            meth = "<br>".join(_fmt_row(r) for r in e["rows"] if r["role"] == "method")
            if e.get("rows_not_run"):
                base += "<br>" + "<br>".join(
                    f"{n}: not run at size {rec['size']} (runs at {', '.join(s)})"
                    for n, s in e["rows_not_run"].items()
                )
            arrow = "lower is better" if e["lower_is_better"] else "higher is better"
            lines.append(
                f"| {paper.id} | {e['id']} | {e['claim']} | {e['metric']} ({arrow}) | {base} | "
                f"{meth} | {e['rule']} | **{e['verdict']}** |"
            )
            for plot in e.get("plots", []):
                sections.append(f"![{paper.id} {e['id']}]({paper.id}/{plot})")
        runs.append(
            f"- {paper.id} ({paper.title}): size {rec['size']}, {rec['seeds']} seeds, "
            f"{rec['runtime_s']:.0f} s"
        )
    return "\n".join([*lines, "", "## Runs", "", *runs, "", "## Plots", "", *sections, ""])


def render_text(records: Iterable[Mapping[str, Any]]) -> str:
    """A plain-text table of verdicts for the terminal."""
    out = []
    for rec in records:
        for e in rec["experiments"]:
            rows = ", ".join(_fmt_row(r) for r in e["rows"])
            out.append(f"{rec['paper']:<4} {e['id']:<24} {e['verdict']:<14} {rows}")
    return "\n".join(out)


__all__ = [
    "SIZES",
    "AllOf",
    "AnyOf",
    "Better",
    "Context",
    "Experiment",
    "Outcome",
    "Ratio",
    "RowStats",
    "Rule",
    "Threshold",
    "experiments_for",
    "progress",
    "register",
    "render_markdown",
    "render_text",
    "run_paper",
    "sized",
    "summarise",
    "write_json_atomic",
]
