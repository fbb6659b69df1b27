"""Experiments, verdict rules, the registry and the resumable runner behind ``jaxpapers reproduce``.

A paper's ``experiments.py`` declares each experiment once: the claim in words, the metric, which
rows are baselines and which are the paper's method, a verdict rule, and a ``run`` function that
returns per-seed measurements. The runner computes mean and spread over seeds and applies the rule:
no verdict is ever typed by hand.

How a rule decides (:mod:`jaxpapers.core.verdicts`): rows of one experiment share seeds, data and
initial weights, so every comparison is a one-sided 95% Student-t test on the per-seed differences
(``Better``), on the per-seed differences against a margin named in the rule (``NoWorse``, for
"matches"), on the per-seed ratios (``Ratio``) or on one row's per-seed values (``Threshold``);
Welch's unpaired test where rows are not on the same seeds. A claim holds when its one-sided bound
clears the tested value, does not hold when the other bound is past it on the wrong side, and is
inconclusive in between. An experiment may declare ``requires``: other experiments of the paper
(the pretraining learned, the baseline is tuned) without which its verdict means nothing; when one
of them does not hold, the verdict is "inconclusive" and says which precondition was not met.
Quick mode runs 5 seeds unless a paper states why it runs fewer (``SEEDS``/``SEEDS_REASON`` in its
``experiments`` module).

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
                      "rule_verdict": ..., "precondition": "not met: ..." (when one is not),
                      "comparisons": [{"test": ..., "estimate": ..., "low": ..., "high": ...,
                                       "agree": ..., "n": ..., "seeds_needed": ...}],
                      "runtime_s": ..., "extras": {...}, "plots": [...]}]}
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import math
import os
import pickle
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np

from jaxpapers.core.papers import PAPERS, Paper, get_paper
from jaxpapers.core.progress import progress
from jaxpapers.core.verdicts import (
    FAILS,
    HOLDS,
    UNSURE,
    AllOf,
    AnyOf,
    Better,
    NoWorse,
    Ratio,
    RowStats,
    Rule,
    Threshold,
    Verdict,
    describe_comparison,
    evaluate_rule,
    format_number,
)

Size = Literal["smoke", "quick", "full"]
SIZES: tuple[str, ...] = ("smoke", "quick", "full")
#: Seeds per size. A paper's ``experiments`` module may lower the quick count with a module-level
#: ``SEEDS = {"quick": 3}`` and a ``SEEDS_REASON`` sentence saying why (see :func:`paper_seeds`).
DEFAULT_SEEDS: dict[str, int] = {"smoke": 2, "quick": 5, "full": 5}


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


@dataclasses.dataclass(frozen=True, kw_only=True)
class Experiment:
    """One experiment of a paper, declared in its ``experiments`` module's ``EXPERIMENTS``.

    Attributes:
      id: short identifier, unique within the paper.
      claim: the claim in words.
      metric: what the numbers measure, with units.
      lower_is_better: direction of the metric.
      baselines: row names that are baselines.
      methods: row names that are the paper's method(s).
      rule: verdict rule over the rows.
      run: ``run(ctx, config) -> Outcome``, where ``config`` is the paper's configuration of the
        run size (``SIZES[ctx.size]``); options of one run function shared by several
        experiments are bound with :func:`functools.partial`.
      plot: optional ``plot(outcome, path)`` that writes a PNG.
      sizes: the run sizes this experiment belongs to (default all); e.g. ``("full",)`` for a
        study too costly for quick mode. ``run_paper`` skips it at other sizes unless it is
        named explicitly through ``only``.
      row_sizes: the run sizes of rows that do not run at every size, ``{row: sizes}``; e.g. a
        costly reference row left out of quick mode. A row named by ``rule`` runs at every size.
        ``run`` asks :meth:`Context.runs` whether to compute a row; the record lists the rows
        left out (``rows_not_run``).
      requires: ids of experiments of the same paper that must hold for this verdict to mean
        anything (e.g. "the pretraining learned"). When one of them does not hold, this
        experiment still runs and reports its rows, but its verdict is "inconclusive" with the
        unmet precondition named (see :func:`apply_preconditions`).
      paired: whether the rows are measured on the same seeds, data and initial weights, so that
        the rule judges per-seed differences (the default); ``False`` makes every rule use
        Welch's unpaired test.
      paper: paper id, e.g. ``"P17"``; filled in by :func:`experiments_for`.
    """

    id: str
    claim: str
    metric: str
    lower_is_better: bool
    baselines: tuple[str, ...]
    methods: tuple[str, ...]
    rule: Any
    run: Callable[[Context, Any], Outcome]
    plot: Callable[[Outcome, Path], None] | None = None
    sizes: tuple[str, ...] = SIZES
    row_sizes: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict, hash=False)
    requires: tuple[str, ...] = ()
    paired: bool = True
    paper: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.requires, str) or self.id in self.requires:
            raise ValueError(
                f"experiment {self.paper}/{self.id}: requires={self.requires!r}; expected a tuple "
                "of other experiment ids of the same paper"
            )
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


def _experiments_module(paper: Paper) -> Any:
    if not paper.implemented:
        raise ValueError(f"paper {paper.id} ({paper.import_name}) is not implemented yet")
    return importlib.import_module(f"{paper.import_name}.experiments")


def experiments_for(paper: Paper | str) -> list[Experiment]:
    """The paper's experiments, in the order of its ``experiments`` module's ``EXPERIMENTS``.

    Each paper's ``experiments`` package declares, as plain data (no registration, no side
    effects): ``SIZES``, its configuration of each run size (:func:`paper_config`), and
    ``EXPERIMENTS``, a sequence of :class:`Experiment` whose ``run(ctx, config)`` computes the rows.
    """
    paper = get_paper(paper) if isinstance(paper, str) else paper
    module = _experiments_module(paper)
    declared = getattr(module, "EXPERIMENTS", None)
    if (
        declared is None
        or isinstance(declared, Experiment)
        or not all(isinstance(e, Experiment) for e in declared)
    ):
        raise ValueError(
            f"{paper.import_name}.experiments.EXPERIMENTS must be a sequence of Experiment"
        )
    exps = [e if e.paper == paper.id else dataclasses.replace(e, paper=paper.id) for e in declared]
    seen: set[str] = set()
    for e in exps:
        if e.id in seen:
            raise ValueError(f"{paper.import_name}.experiments.EXPERIMENTS: id {e.id!r} twice")
        seen.add(e.id)
    ids = {e.id for e in exps}
    for e in exps:
        unknown = [r for r in e.requires if r not in ids]
        if unknown:
            raise ValueError(
                f"experiment {paper.id}/{e.id} requires {unknown}, which are not experiments of "
                f"{paper.id}; expected some of {sorted(ids)}"
            )
    _precondition_order(exps)
    return exps


def paper_config(paper: Paper | str, size: str) -> Any:
    """The paper's configuration of run size ``size``: ``SIZES[size]`` of its ``experiments``
    module (one frozen record per size, e.g. a keyword-only frozen dataclass)."""
    paper = get_paper(paper) if isinstance(paper, str) else paper
    if size not in SIZES:
        raise ValueError(f"size={size!r}; expected one of {SIZES}")
    table = getattr(_experiments_module(paper), "SIZES", None)
    if table is None:
        return None
    if not isinstance(table, Mapping) or set(table) != set(SIZES):
        raise ValueError(
            f"{paper.import_name}.experiments.SIZES must map each of {SIZES} to a configuration; "
            f"got keys {sorted(table) if isinstance(table, Mapping) else type(table).__name__}"
        )
    return table[size]


def paper_seeds(paper: Paper | str, size: str) -> tuple[int, str | None]:
    """The default seed count of ``paper`` at ``size`` and the paper's reason when it is lower.

    A paper's ``experiments`` module may define ``SEEDS = {"quick": n}`` (any sizes) and, when a
    count is below :data:`DEFAULT_SEEDS`, a ``SEEDS_REASON`` sentence saying why.
    """
    paper = get_paper(paper) if isinstance(paper, str) else paper
    module = importlib.import_module(f"{paper.import_name}.experiments")
    own = dict(getattr(module, "SEEDS", {}))
    reason = getattr(module, "SEEDS_REASON", None)
    bad = {k: v for k, v in own.items() if k not in SIZES or not isinstance(v, int) or v < 1}
    if bad:
        raise ValueError(
            f"{paper.import_name}.experiments.SEEDS has {bad}; expected positive ints for sizes "
            f"{SIZES}"
        )
    n = own.get(size, DEFAULT_SEEDS[size])
    if n < DEFAULT_SEEDS[size] and not reason:
        raise ValueError(
            f"{paper.import_name}.experiments.SEEDS[{size!r}] = {n} is below the default "
            f"{DEFAULT_SEEDS[size]}; state why in SEEDS_REASON"
        )
    return n, (reason if n < DEFAULT_SEEDS[size] else None)


def _precondition_order(exps: Sequence[Experiment]) -> list[Experiment]:
    """The experiments ordered so that each comes after those it requires; rejects cycles."""
    by_id = {e.id: e for e in exps}
    done: dict[str, None] = {}
    visiting: list[str] = []

    def visit(i: str) -> None:
        if i in done:
            return
        if i in visiting:
            cycle = " -> ".join([*visiting[visiting.index(i) :], i])
            raise ValueError(f"experiments' requires form a cycle: {cycle}")
        visiting.append(i)
        for r in by_id[i].requires:
            if r in by_id:
                visit(r)
        visiting.pop()
        done[i] = None

    for e in exps:
        visit(e.id)
    return [by_id[i] for i in done]


def apply_preconditions(
    records: Sequence[dict[str, Any]], experiments: Sequence[Experiment]
) -> list[dict[str, Any]]:
    """Set each record's ``verdict`` from its rule's verdict and its experiment's ``requires``.

    A record whose required experiment did not hold (or was not run) becomes "inconclusive", with
    ``precondition`` naming what was not met; requirements chain (a requirement that is itself
    inconclusive for want of its own precondition is not met either). Records keep the rule's own
    decision in ``rule_verdict``.
    """
    by_id = {r["id"]: r for r in records}
    out = {}
    for exp in _precondition_order([e for e in experiments if e.id in by_id]):
        rec = dict(by_id[exp.id])
        rec.setdefault("rule_verdict", rec["verdict"])
        rec["verdict"] = rec["rule_verdict"]
        rec.pop("precondition", None)
        unmet = []
        for req in exp.requires:
            dep = out.get(req)
            if dep is None:
                unmet.append(f"{req} (not run)")
            elif dep["verdict"] != HOLDS:
                unmet.append(f"{req} ({dep['verdict']})")
        if unmet:
            rec["verdict"] = UNSURE
            rec["precondition"] = "not met: " + ", ".join(unmet)
        out[exp.id] = rec
    return [out.get(r["id"], r) for r in records]


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


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` through a temporary file and an atomic rename: a kill never leaves half a
    file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON through a temporary file and an atomic rename: a kill never leaves half a file."""
    _write_atomic(path, json.dumps(_to_jsonable(data), indent=1).encode())


def _host_tree(value: Any) -> Any:
    """``value`` with every JAX array copied to a NumPy array (other leaves kept as they are)."""
    import jax

    return jax.tree.map(lambda x: np.asarray(x) if isinstance(x, jax.Array) else x, value)


def config_digest(*parts: Any) -> str:
    """A short stable hash of ``repr`` of ``parts`` (configs are frozen dataclasses or
    NamedTuples, whose ``repr`` names every field and value)."""
    text = "\x1f".join(repr(p) for p in parts)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclasses.dataclass(kw_only=True)
class Context:
    """Passed to every experiment's ``run(ctx, config)``.

    Attributes:
      size: ``"smoke"`` (tests), ``"quick"`` (``make reproduce``) or ``"full"`` (GPU/TPU).
      seeds: number of seeds; experiments use seeds ``0 .. seeds - 1``.
      workdir: private folder for this experiment's checkpoints.
      config: the paper's configuration of this size (``SIZES[size]`` of its ``experiments``
        module), also passed to ``run`` as its second argument.
      skip_rows: declared rows that do not run at this size (:attr:`Experiment.row_sizes`).
    """

    size: Size
    seeds: int
    workdir: Path
    config: Any = None
    skip_rows: frozenset[str] = frozenset()

    def runs(self, row: str) -> bool:
        """Whether the experiment computes ``row`` at this size."""
        return row not in self.skip_rows

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seeds))

    @property
    def cache_dir(self) -> Path:
        """Where :meth:`cached` keeps values: one folder for all experiments of the paper."""
        return self.workdir.parent / "_cache"

    def cached(self, name: str, compute: Callable[[], Any]) -> Any:
        """Return ``compute()``, computed once per run of the paper and kept on disk.

        The value is stored under a key made of ``name``, the run size, the full
        :attr:`config` and the seed count, so experiments of one paper that ask for the same
        computation share it, a resumed run (``--resume``) loads it instead of computing it
        again, and a change to any field of the configuration computes it afresh. ``name`` must
        say everything else the computation depends on (e.g. ``f"train_{problem}"``).

        Any pytree is stored (pickled on the host; JAX arrays come back as NumPy arrays, both on
        the first call and when loaded, so callers see one type).
        """
        if not name or "/" in name:
            raise ValueError(f"name={name!r}; expected a non-empty name without '/'")
        digest = config_digest(name, self.size, self.seeds, self.config)
        path = self.cache_dir / f"{name[:80]}-{digest}.pkl"
        if path.exists():
            with path.open("rb") as f:
                return pickle.load(f)
        value = _host_tree(compute())
        if _is_primary():
            _write_atomic(path, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
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
    assessment = evaluate_rule(exp.rule, stats, exp.lower_is_better, paired=exp.paired)
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
        "verdict": assessment.verdict,
        "rule_verdict": assessment.verdict,
        "comparisons": [c._asdict() for c in assessment.comparisons],
        **({"requires": list(exp.requires)} if exp.requires else {}),
        **({"rows_not_run": {n: list(exp.row_sizes[n]) for n in skipped}} if skipped else {}),
        "extras": dict(outcome.extras),
    }


def rejudge(result: Mapping[str, Any]) -> dict[str, Any]:
    """A stored ``result.json`` record judged again, from its per-seed rows, by the rules
    registered now: rule text, comparisons and verdicts (preconditions included) are recomputed;
    rows, extras, runtimes and plots are kept. No experiment runs, so a change to the verdict
    rules reaches committed results without re-running them; an entry whose experiment is no
    longer registered is kept as it is.

    ``scripts/rejudge.py`` applies it to every ``result.json`` of a results folder.

    Examples:
        >>> from jaxpapers.core.experiment import rejudge
        >>> rejudge({"paper": "P17", "size": "quick", "seeds": 5, "experiments": []})
        {'paper': 'P17', 'size': 'quick', 'seeds': 5, 'experiments': []}
    """
    if not isinstance(result, Mapping) or {"paper", "size", "experiments"} - set(result):
        keys = sorted(result) if isinstance(result, Mapping) else type(result).__name__
        raise ValueError(
            f"result has {keys}; expected a result.json record with 'paper', 'size' and "
            "'experiments'"
        )
    size = result["size"]
    registered = experiments_for(result["paper"])
    by_id = {e.id: e for e in registered}
    records = []
    for rec in result["experiments"]:
        exp = by_id.get(rec["id"])
        if exp is None:
            records.append(dict(rec))
            continue
        values = {row["method"]: row["seeds"] for row in rec["rows"]}
        # A record from an older version of the experiment may lack rows declared since (e.g.
        # a reference row added later): it is judged on the rows it has when the rule does not
        # read the missing ones.
        missing = {n for n in (*exp.baselines, *exp.methods) if n not in values}
        missing -= set(exp.rows_not_run(size))
        if missing & set(exp.rule.names()):
            raise ValueError(
                f"result: {result['paper']}/{rec['id']} has no stored rows {sorted(missing)}, "
                "which the registered rule reads; run the experiment again"
            )
        if missing:
            exp = dataclasses.replace(
                exp,
                baselines=tuple(n for n in exp.baselines if n not in missing),
                methods=tuple(n for n in exp.methods if n not in missing),
                row_sizes={k: v for k, v in exp.row_sizes.items() if k not in missing},
            )
        entry = summarise(exp, Outcome(values, rec.get("extras", {})), size)
        records.append({**entry, **{k: rec[k] for k in ("runtime_s", "plots") if k in rec}})
    return {**result, "experiments": apply_preconditions(records, registered)}


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
    registered = experiments_for(paper)
    config = paper_config(paper, size)
    default_seeds, seeds_reason = paper_seeds(paper, size)
    if seeds is None:
        seeds = default_seeds
    else:
        seeds, seeds_reason = int(seeds), None
    if seeds < 1:
        raise ValueError(f"seeds={seeds}; expected a positive number of seeds")
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
        **({"seeds_reason": seeds_reason} if seeds_reason else {}),
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
                config=config,
                skip_rows=frozenset(exp.rows_not_run(size)),
            )
            ctx.workdir.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            outcome = exp.run(ctx, config)
            entry = summarise(exp, outcome, size)
            entry["runtime_s"] = time.perf_counter() - t0
            entry["plots"] = _plot(exp, outcome, pdir) if primary else []
            record["experiments"].append(entry)
            log(f"{paper.id}/{exp.id}: {entry['rule_verdict']} ({entry['runtime_s']:.1f} s)")
        # Experiments finished earlier but not part of this run stay in the file, in the
        # registry's order (entries of experiments no longer registered go last).
        ran = {x["id"] for x in record["experiments"]}
        kept = record["experiments"] + [e for i, e in earlier.items() if i not in ran]
        kept.sort(key=lambda e: order.get(e["id"], len(order)))
        kept = apply_preconditions(kept, registered)
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


def _fmt_row(r: Mapping[str, Any]) -> str:
    return f"{r['method']}: {format_number(r['mean'])} ± {format_number(r['std'])}"


def _verdict_cell(e: Mapping[str, Any]) -> str:
    cell = f"**{e['verdict']}**"
    if e.get("precondition"):
        cell += f" (precondition {e['precondition']}; the rule alone: {e['rule_verdict']})"
    return cell


def render_markdown(out: Path) -> str:
    """Build ``RESULTS.md`` from every ``out/<paper>/result.json``."""
    lines = [
        "# Results",
        "",
        "Generated by `jaxpapers reproduce` from `*/result.json`; every verdict is computed",
        "from the measured numbers by the rule shown (rows: mean ± seed-to-seed std).",
        "Rows of one experiment share seeds, data and initial weights, so each comparison is a",
        "one-sided 95% Student-t test on the per-seed differences (or ratios, or values), n - 1",
        "degrees of freedom; Welch's test where rows are not paired. A claim holds when its bound",
        "clears the tested value, does not hold when the other bound is past it the other way, and",
        "is inconclusive in between; the evidence column gives the estimate, its one-sided bounds,",
        "how many seeds agree with its sign, and for an inconclusive comparison how many seeds the",
        "observed effect at the observed spread would need. A rule of k parts tests each part at",
        'one-sided 1 - 0.05/k (Bonferroni) where one part decides: "some part holds" (any of)',
        'and "some part does not hold" (all of). A verdict whose precondition (another',
        "experiment of the paper) does not hold is inconclusive and says so.",
        "",
        "| paper | experiment | claim | metric | baseline | method | rule | evidence | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
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
            evidence = "<br>".join(describe_comparison(c) for c in e.get("comparisons", []))
            lines.append(
                f"| {paper.id} | {e['id']} | {e['claim']} | {e['metric']} ({arrow}) | {base} | "
                f"{meth} | {e['rule']} | {evidence} | {_verdict_cell(e)} |"
            )
            for plot in e.get("plots", []):
                sections.append(f"![{paper.id} {e['id']}]({paper.id}/{plot})")
        reason = f" ({rec['seeds_reason']})" if rec.get("seeds_reason") else ""
        runs.append(
            f"- {paper.id} ({paper.title}): size {rec['size']}, {rec['seeds']} seeds{reason}, "
            f"{rec['runtime_s']:.0f} s{_left_out(paper.id, rec, Path(out))}"
        )
    return "\n".join([*lines, "", "## Runs", "", *runs, "", "## Plots", "", *sections, ""])


def _left_out(paper: str, rec: Mapping[str, Any], out: Path) -> str:
    """``; not run at size ...: ...`` for the registered experiments that ``rec``'s size leaves
    out (``Experiment.sizes``), naming a committed run of each under ``out/full`` if one exists."""
    have = {e["id"] for e in rec["experiments"]}
    other = _load_json(out / "full" / paper / "result.json") or {"experiments": []}
    elsewhere = {e["id"] for e in other["experiments"]}
    notes = []
    for exp in experiments_for(paper):
        if exp.id in have or rec["size"] in exp.sizes:
            continue
        where = f"; a run of it: `full/{paper}/`" if exp.id in elsewhere else ""
        notes.append(f"{exp.id} (runs at {', '.join(exp.sizes)}{where})")
    return f"; not run at size {rec['size']}: " + ", ".join(notes) if notes else ""


def render_text(records: Iterable[Mapping[str, Any]]) -> str:
    """A plain-text table of verdicts for the terminal."""
    out = []
    for rec in records:
        for e in rec["experiments"]:
            rows = ", ".join(_fmt_row(r) for r in e["rows"])
            out.append(f"{rec['paper']:<4} {e['id']:<24} {e['verdict']:<14} {rows}")
    return "\n".join(out)


__all__ = [
    "DEFAULT_SEEDS",
    "FAILS",
    "HOLDS",
    "SIZES",
    "UNSURE",
    "AllOf",
    "AnyOf",
    "Better",
    "Context",
    "Experiment",
    "NoWorse",
    "Outcome",
    "Ratio",
    "RowStats",
    "Rule",
    "Threshold",
    "Verdict",
    "apply_preconditions",
    "config_digest",
    "experiments_for",
    "paper_config",
    "paper_seeds",
    "progress",
    "rejudge",
    "render_markdown",
    "render_text",
    "run_paper",
    "summarise",
    "write_json_atomic",
]
