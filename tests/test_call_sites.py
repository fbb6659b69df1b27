"""Every call from ``benchmarks/`` and ``examples/`` into the library binds to its signature.

The benchmarks and examples run outside the suite (they time things, or are long), so a change of
a public signature (e.g. a parameter made keyword-only) would break them silently. This test reads
each script's syntax tree, resolves the names it imports from ``jaxpapers`` and checks every call of
them against ``inspect.signature``: no more positional arguments than positional parameters, no
unknown keyword, every required parameter given (unless the call unpacks ``*args``/``**kwargs``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py")) + sorted((ROOT / "examples").glob("*.py"))


def _imported(tree: ast.Module) -> dict[str, object]:
    """Local name -> object for ``from jaxpapers... import name`` / ``import jaxpapers.x as m``."""
    names: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jaxpapers"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                if hasattr(module, alias.name):
                    names[alias.asname or alias.name] = getattr(module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("jaxpapers"):
                    target = importlib.import_module(alias.name)
                    if alias.asname:
                        names[alias.asname] = target
                    else:
                        names.setdefault("jaxpapers", importlib.import_module("jaxpapers"))
    return names


def _resolve(func: ast.expr, names: dict[str, object]) -> object | None:
    if isinstance(func, ast.Name):
        return names.get(func.id)
    if isinstance(func, ast.Attribute):
        owner = _resolve(func.value, names)
        if owner is not None and inspect.ismodule(owner):
            return getattr(owner, func.attr, None)
    return None


def _problem(call: ast.Call, sig: inspect.Signature) -> str | None:
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return None  # *args / **kwargs: not checkable statically
    params = list(sig.parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        positional_ok = True
    else:
        n_pos = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
        positional_ok = len(call.args) <= n_pos
    if not positional_ok:
        return f"{len(call.args)} positional arguments for {sig}"
    accepts_any_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    keywords = {k.arg for k in call.keywords}
    unknown = [
        k
        for k in keywords
        if not accepts_any_kw
        and (k not in sig.parameters or sig.parameters[k].kind is inspect.Parameter.POSITIONAL_ONLY)
    ]
    if unknown:
        return f"unknown keywords {unknown} for {sig}"
    bound = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][
        : len(call.args)
    ]
    missing = [
        p.name
        for p in params
        if p.default is p.empty
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and p.name not in bound
        and p.name not in keywords
    ]
    if missing:
        return f"missing {missing} for {sig}"
    return None


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_calls_into_the_library_bind(path):
    tree = ast.parse(path.read_text())
    names = _imported(tree)
    problems = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        target = _resolve(node.func, names)
        if target is None or inspect.ismodule(target) or not callable(target):
            continue
        try:
            sig = inspect.signature(target)
        except (TypeError, ValueError):
            continue
        if inspect.isclass(target) and "self" in sig.parameters:
            continue
        problem = _problem(node, sig)
        if problem:
            problems.append(f"{path.name}:{node.lineno}: {ast.unparse(node.func)}: {problem}")
    assert not problems, "\n".join(problems)


def test_the_checker_catches_a_positional_call_to_a_keyword_only_parameter():
    def f(x, *, config):
        return x, config

    call = ast.parse("f(1, 2)").body[0].value
    assert "positional" in _problem(call, inspect.signature(f))
    call = ast.parse("f(1)").body[0].value
    assert "missing" in _problem(call, inspect.signature(f))
    call = ast.parse("f(1, config=2)").body[0].value
    assert _problem(call, inspect.signature(f)) is None
