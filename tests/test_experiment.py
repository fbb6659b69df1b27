"""Verdict rules, the runner's bookkeeping and resume semantics, on hand-made experiments."""

from __future__ import annotations

import dataclasses
import json
from typing import NamedTuple

import numpy as np
import pytest

from jaxpapers.core import experiment as ex
from jaxpapers.core.experiment import (
    AllOf,
    Better,
    Context,
    Experiment,
    Outcome,
    RowStats,
    Threshold,
)


def _rows(**values):
    return {k: RowStats.from_values(k, "method", v) for k, v in values.items()}


def test_rowstats_mean_and_sample_std():
    s = RowStats.from_values("m", "method", [1.0, 2.0, 4.0])
    assert s.mean == pytest.approx(7 / 3)
    assert s.std == pytest.approx(np.std([1.0, 2.0, 4.0], ddof=1))
    assert RowStats.from_values("m", "method", [3.0]).std == 0.0
    with pytest.raises(ValueError, match="no measured values"):
        RowStats.from_values("m", "method", [])


@pytest.mark.parametrize(
    "m, b, lower, expected",
    [
        ([1.0, 1.1, 0.9], [2.0, 2.1, 1.9], True, "holds"),
        ([2.0, 2.1, 1.9], [1.0, 1.1, 0.9], True, "does not hold"),
        ([1.0, 1.5, 0.5], [1.2, 1.4, 0.7], True, "inconclusive"),
        ([2.0, 2.1, 1.9], [1.0, 1.1, 0.9], False, "holds"),
    ],
)
def test_better_rule(m, b, lower, expected):
    assert Better("m", "b").decide(_rows(m=m, b=b), lower) == expected


def test_allof_combines_parts():
    rows = _rows(a=[1.0, 1.0], b=[2.0, 2.0])
    good, bad = Threshold("a", 1.5), Threshold("b", 1.5)
    assert AllOf((good, good)).decide(rows, True) == "holds"
    assert AllOf((good, bad)).decide(rows, True) == "does not hold"
    assert "a < 1.5" in AllOf((good, bad)).describe(True)


def test_experiment_rejects_rule_on_undeclared_rows():
    with pytest.raises(ValueError, match="neither baselines"):
        Experiment(
            id="x", claim="c", metric="m", lower_is_better=True, baselines=("b",),
            methods=("m",), rule=Better("z", "b"), run=lambda ctx, config: None,
        )  # fmt: skip


def _fake_experiments(calls: list[str]):
    def run_a(ctx: Context, config) -> Outcome:
        calls.append("a")
        vals = [ctx.cached(f"seed{s}", lambda s=s: 1.0 + 0.1 * s) for s in ctx.seed_list]
        return Outcome({"base": [3.0 + v for v in vals], "meth": vals}, {"note": "a"})

    def run_b(ctx: Context, config) -> Outcome:
        calls.append("b")
        if ctx.size == "quick" and "fail" in calls:
            raise RuntimeError("interrupted")
        return Outcome({"base": [1.0] * ctx.seeds, "meth": [2.0] * ctx.seeds})

    common = dict(
        claim="c",
        metric="m",
        lower_is_better=True,
        baselines=("base",),
        methods=("meth",),
        rule=Better("meth", "base"),
    )
    return [Experiment(id="a", run=run_a, **common), Experiment(id="b", run=run_b, **common)]


def test_runner_writes_each_experiment_and_resume_skips_finished(tmp_path, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(ex, "experiments_for", lambda paper: _fake_experiments(calls))
    calls.append("fail")
    with pytest.raises(RuntimeError, match="interrupted"):
        ex.run_paper("P17", tmp_path, size="quick", seeds=3, log=lambda m: None)
    rec = json.loads((tmp_path / "P17" / "result.json").read_text())
    assert [e["id"] for e in rec["experiments"]] == ["a"]
    assert rec["experiments"][0]["verdict"] == "holds"
    assert rec["experiments"][0]["rows"][1]["seeds"] == pytest.approx([1.0, 1.1, 1.2])

    calls.clear()
    rec = ex.run_paper("P17", tmp_path, size="quick", seeds=3, resume=True, log=lambda m: None)
    assert calls == ["b"]  # "a" was finished and is kept
    assert [e["verdict"] for e in rec["experiments"]] == ["holds", "does not hold"]

    calls.clear()
    ex.run_paper("P17", tmp_path, size="quick", seeds=2, resume=True, log=lambda m: None)
    assert calls == ["a", "b"]  # other seeds: nothing to keep


def test_running_selected_experiments_keeps_the_others(tmp_path, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(ex, "experiments_for", lambda paper: _fake_experiments(calls))
    ex.run_paper("P17", tmp_path, size="smoke", seeds=2, log=lambda m: None)
    calls.clear()
    rec = ex.run_paper("P17", tmp_path, size="smoke", seeds=2, only=["b"], log=lambda m: None)
    assert calls == ["b"]
    on_disk = json.loads((tmp_path / "P17" / "result.json").read_text())
    # "a" from the earlier run stays, in registry order, and the return value says so too.
    assert [e["id"] for e in on_disk["experiments"]] == ["a", "b"]
    assert [e["id"] for e in rec["experiments"]] == ["a", "b"]
    calls.clear()
    ex.run_paper("P17", tmp_path, size="smoke", seeds=3, only=["b"], log=lambda m: None)
    on_disk = json.loads((tmp_path / "P17" / "result.json").read_text())
    assert [e["id"] for e in on_disk["experiments"]] == ["b"]  # other seeds: nothing kept


def test_experiments_marked_for_some_sizes_are_skipped_at_others(tmp_path, monkeypatch):
    calls: list[str] = []

    def fake(paper):
        a, b = _fake_experiments(calls)
        return [a, dataclasses.replace(b, sizes=("full",))]

    monkeypatch.setattr(ex, "experiments_for", fake)
    logs: list[str] = []
    rec = ex.run_paper("P17", tmp_path, size="smoke", seeds=2, log=logs.append)
    assert calls == ["a"] and [e["id"] for e in rec["experiments"]] == ["a"]
    assert any("not part of size smoke" in m for m in logs)
    calls.clear()
    ex.run_paper("P17", tmp_path, size="smoke", seeds=2, only=["b"], log=lambda m: None)
    assert calls == ["b"]  # named explicitly: runs at any size
    with pytest.raises(ValueError, match="sizes=\\('huge',\\)"):
        dataclasses.replace(fake("P17")[0], sizes=("huge",))


def _with_reference_row(calls: list[str]) -> Experiment:
    """A rule on ``meth`` vs ``base`` plus a costly ``ref`` row that runs at smoke and full."""

    def run(ctx: Context, config) -> Outcome:
        calls.append(ctx.size)
        values = {"base": [2.0] * ctx.seeds, "meth": [1.0] * ctx.seeds}
        if ctx.runs("ref"):
            values["ref"] = [0.5] * ctx.seeds
        return Outcome(values)

    return Experiment(
        id="r", claim="c", metric="m", lower_is_better=True, baselines=("base", "ref"),
        methods=("meth",), rule=Better("meth", "base"), run=run,
        row_sizes={"ref": ("smoke", "full")},
    )  # fmt: skip


def test_rows_marked_for_some_sizes_are_left_out_at_others(tmp_path, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(ex, "experiments_for", lambda paper: [_with_reference_row(calls)])
    smoke = ex.run_paper("P17", tmp_path / "s", size="smoke", seeds=2, log=lambda m: None)
    quick = ex.run_paper("P17", tmp_path / "q", size="quick", seeds=2, log=lambda m: None)
    assert calls == ["smoke", "quick"]
    (es,), (eq,) = smoke["experiments"], quick["experiments"]
    assert [r["method"] for r in es["rows"]] == ["base", "ref", "meth"] and "rows_not_run" not in es
    assert [r["method"] for r in eq["rows"]] == ["base", "meth"]
    assert eq["rows_not_run"] == {"ref": ["smoke", "full"]}
    assert es["verdict"] == eq["verdict"] == "holds"
    md = ex.render_markdown(tmp_path / "q")
    assert "ref: not run at size quick (runs at smoke, full)" in md
    exp = _with_reference_row([])
    # Without a size every declared row is expected; a row left out must not be returned.
    with pytest.raises(ValueError, match="no values for rows \\['ref'\\]"):
        ex.summarise(exp, Outcome({"base": [1.0], "meth": [1.0]}))
    with pytest.raises(ValueError, match="row_sizes leaves out"):
        ex.summarise(exp, Outcome({"base": [1.0], "meth": [1.0], "ref": [1.0]}), "quick")


@pytest.mark.parametrize(
    "row_sizes, match",
    [
        ({"zzz": ("full",)}, "names row 'zzz'"),
        ({"ref": ("huge",)}, "expected a tuple of sizes"),
        ({"ref": "full"}, "expected a tuple of sizes"),
        ({"base": ("full",)}, "named by the rule"),
    ],
)
def test_row_sizes_are_checked(row_sizes, match):
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(_with_reference_row([]), row_sizes=row_sizes)


class _Point(NamedTuple):
    x: np.ndarray
    label: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Config:
    width: int
    depth: int


def test_cached_keeps_pytrees_and_keys_on_name_config_and_seeds(tmp_path):
    import jax.numpy as jnp

    def ctx(seeds=1, depth=2, exp="w"):
        c = Context(
            size="quick", seeds=seeds, workdir=tmp_path / exp, config=_Config(width=3, depth=depth)
        )
        c.workdir.mkdir(parents=True, exist_ok=True)
        return c

    value = {"p": {1: _Point(jnp.arange(3.0), 7)}, "t": (1.5, [2, 3])}
    first = ctx().cached("x", lambda: value)
    # JAX arrays come back as NumPy arrays on the first call too; keys, tuples, NamedTuples stay
    assert isinstance(first["p"][1], _Point) and isinstance(first["p"][1].x, np.ndarray)
    assert first["t"] == (1.5, [2, 3]) and first["p"][1].label == 7
    again = ctx(exp="other").cached("x", lambda: pytest.fail("recomputed a cached step"))
    np.testing.assert_array_equal(
        again["p"][1].x, [0.0, 1.0, 2.0]
    )  # shared by the paper's experiments
    calls = []
    ctx(depth=3).cached("x", lambda: calls.append("depth") or 1)  # any config field changes the key
    ctx(seeds=2).cached("x", lambda: calls.append("seeds") or 1)
    ctx().cached("y", lambda: calls.append("name") or 1)
    assert calls == ["depth", "seeds", "name"]
    with pytest.raises(ValueError, match="name="):
        ctx().cached("a/b", lambda: 1)


def test_runner_passes_the_size_config_to_run(tmp_path, monkeypatch):
    seen = []

    def run(ctx, config):
        seen.append((config, ctx.config))
        return Outcome({"base": [2.0] * ctx.seeds, "meth": [1.0] * ctx.seeds})

    exp = Experiment(
        id="a", claim="c", metric="m", lower_is_better=True, baselines=("base",),
        methods=("meth",), rule=Better("meth", "base"), run=run,
    )  # fmt: skip
    monkeypatch.setattr(ex, "experiments_for", lambda paper: [exp])
    ex.run_paper("P17", tmp_path, size="smoke", seeds=2, log=lambda m: None)
    expected = ex.paper_config("P17", "smoke")
    assert seen == [(expected, expected)] and expected is not None


def test_paper_config_checks_the_size_table(monkeypatch):
    import types

    module = types.ModuleType("fake")
    monkeypatch.setattr(ex, "_experiments_module", lambda paper: module)
    assert ex.paper_config("P17", "quick") is None
    module.SIZES = {"smoke": 1, "quick": 2}
    with pytest.raises(ValueError, match="SIZES must map each of"):
        ex.paper_config("P17", "quick")
    module.SIZES = {"smoke": 1, "quick": 2, "full": 3}
    assert ex.paper_config("P17", "quick") == 2
    with pytest.raises(ValueError, match="size='huge'"):
        ex.paper_config("P17", "huge")


def test_render_markdown_lists_rows_and_verdicts(tmp_path, monkeypatch):
    monkeypatch.setattr(ex, "experiments_for", lambda paper: _fake_experiments([]))
    ex.run_paper("P17", tmp_path, size="smoke", seeds=2, log=lambda m: None)
    md = ex.render_markdown(tmp_path)
    assert "| P17 | a |" in md and "**holds**" in md and "**does not hold**" in md
    assert "base: 4.05 ± 0.07071" in md


def test_progress_is_a_plain_pass_through_off_a_terminal(capsys):
    from jaxpapers.core.progress import progress

    assert list(progress(range(5), total=5, desc="x")) == [0, 1, 2, 3, 4]
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""
