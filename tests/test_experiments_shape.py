"""Every paper's experiments follow one declared shape, and no paper owns compile machinery.

The shape (see :mod:`jaxpapers.core.experiment`): ``experiments/__init__.py`` declares ``SIZES``
(one frozen configuration per run size) and ``EXPERIMENTS`` (a sequence of :class:`Experiment`
whose ``run(ctx, config)`` computes the rows), and holds no run bodies. How programs compile is the
runner's business (:mod:`jaxpapers.core.compilation`): no paper package sets compile options,
starts threads, takes locks or keeps compiled programs of its own.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
from pathlib import Path

import pytest

from jaxpapers.core.experiment import SIZES, Experiment, experiments_for
from jaxpapers.core.papers import PAPERS

ROOT = Path(__file__).resolve().parents[1]
IMPLEMENTED = [p for p in PAPERS if p.implemented]


def _package_dir(paper) -> Path:
    return ROOT / Path(*paper.import_name.split("."))


@pytest.mark.parametrize("paper", IMPLEMENTED, ids=lambda p: p.id)
def test_experiments_are_declared_as_data(paper):
    module = importlib.import_module(f"{paper.import_name}.experiments")
    assert set(getattr(module, "SIZES", {})) == set(SIZES), f"{paper.id}: SIZES must name {SIZES}"
    for size, config in module.SIZES.items():
        frozen = dataclasses.is_dataclass(config) and config.__dataclass_params__.frozen
        assert frozen or isinstance(config, tuple), (
            f"{paper.id}: SIZES[{size!r}] is a {type(config).__name__}; expected a frozen "
            "dataclass or NamedTuple (its repr keys the cache)"
        )
    declared = module.EXPERIMENTS
    assert isinstance(declared, tuple | list) and declared
    assert all(isinstance(e, Experiment) and not e.paper for e in declared)
    assert [e.id for e in experiments_for(paper)] == [e.id for e in declared]
    for e in declared:
        params = list(inspect.signature(e.run).parameters.values())
        free = [p for p in params if p.default is p.empty and p.kind is not p.KEYWORD_ONLY]
        assert len(free) == 2, f"{paper.id}/{e.id}: run must take (ctx, config); got {params}"


@pytest.mark.parametrize("paper", IMPLEMENTED, ids=lambda p: p.id)
def test_experiments_init_holds_no_run_bodies(paper):
    """``__init__.py`` declares; functions that take a run context (run bodies) live elsewhere.
    Small helpers that build declarations (families of experiments) may stay."""
    tree = ast.parse((_package_dir(paper) / "experiments" / "__init__.py").read_text())
    names = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
             if isinstance(t, ast.Name)}  # fmt: skip
    assert {"SIZES", "EXPERIMENTS"} <= names
    bodies = [
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef)
        and any(a.arg in ("ctx", "context") for a in n.args.args + n.args.kwonlyargs)
    ]
    assert not bodies, f"{paper.id}: run bodies {bodies} belong in a module of their own"
    calls = {getattr(n.func, "id", None) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert "register" not in calls, f"{paper.id}: experiments are declared, not registered"


#: What only the runner may do; each pattern is a way papers used to do it.
FORBIDDEN = {
    "compile options": r"compiler_options|xla_[a-z_]+|FAST_COMPILE|QUICK_COMPILE|quick_compile",
    "ahead-of-time compiled programs kept": r"\.lower\([^)]*\)\s*\.compile\(",
    "locks": r"\bLock\(\)|RLock\(",
    "private run storage": r"_shared\b|shared=True|\.npy\b",
    "size picking outside SIZES": r"ctx\.pick\(|\bsized\(",
}

#: Modules whose import means the paper manages threads or processes itself.
THREAD_MODULES = {"threading", "concurrent.futures", "multiprocessing", "_thread"}


def _machinery(path: Path) -> list[str]:
    """Thread imports, and memoised functions that build or hold compiled programs."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            found += [f"{node.lineno}: imports {m}" for m in mods if m in THREAD_MODULES]
        if isinstance(node, ast.FunctionDef):
            memo = [ast.unparse(d) for d in node.decorator_list]
            if any("cache" in d for d in memo):
                body = ast.unparse(node)
                if any(w in body for w in ("jit", ".compile(", ".lower(")):
                    found.append(f"{node.lineno}: {node.name} memoises a compiled program")
    return found


@pytest.mark.parametrize("paper", IMPLEMENTED, ids=lambda p: p.id)
def test_paper_packages_own_no_compile_machinery(paper):
    found = []
    for path in sorted(_package_dir(paper).rglob("*.py")):
        text = path.read_text()
        rel = path.relative_to(ROOT)
        for what, pattern in FORBIDDEN.items():
            for m in re.finditer(pattern, text):
                line = text[: m.start()].count("\n") + 1
                found.append(f"{rel}:{line}: {what} ({m.group(0)!r})")
        found += [f"{rel}:{item}" for item in _machinery(path)]
    assert not found, "\n".join(found)


#: The freeze flag of a hand-written training loop: ``ok = ok & jnp.isfinite(loss)``.
HAND_FREEZE = re.compile(r"\b(ok|finite)\s*=\s*(ok|finite)\s*&[^\n]*isfinite")


#: ... and the freeze itself written out: ``jnp.where(ok, new, old)``.
HAND_WHERE = re.compile(r"jnp\.where\(\s*(ok|finite)\s*,")


@pytest.mark.parametrize("paper", IMPLEMENTED, ids=lambda p: p.id)
def test_no_hand_written_freeze_on_nan_loops(paper):
    """Training loops that freeze on a non-finite loss use :func:`jaxpapers.core.fit.fit` (or its
    ``all_finite``/``keep_where`` for the few loops that are not plain gradient steps)."""
    found = []
    for path in sorted(_package_dir(paper).rglob("*.py")):
        text = path.read_text()
        if HAND_FREEZE.search(text) and HAND_WHERE.search(text):
            line = text[: HAND_WHERE.search(text).start()].count("\n") + 1
            found.append(f"{path.relative_to(ROOT)}:{line}")
    assert not found, "hand-written freeze on a non-finite loss at " + ", ".join(found)
