"""One calling convention over every exported function, and no import cycle in the package.

The convention (README, "Calling convention"): PRNG keys are keyword-only and named ``key``;
configurations are keyword-only and named ``config``; no public function takes a NumPy generator
or compile options; result NamedTuples use the same field names for the same things (``params``,
``opt_state``, ``losses``, ``finite``); ``__all__`` holds the user's API only.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import jaxpapers
from jaxpapers.core.papers import PAPERS

ROOT = Path(jaxpapers.__file__).resolve().parent

PUBLIC_MODULES = [p.import_name for p in PAPERS if p.implemented] + [
    f"jaxpapers.core.{m.name}"
    for m in pkgutil.iter_modules([str(ROOT / "core")])
    if not m.name.startswith("_")
]

#: Helpers that used to be exported although no user calls them.
INTERNALS = {
    "child_key",
    "zeros_like_tree",
    "step_seeds",
    "resolve_mode",
    "parse_mixer",
    "stdlib_docstrings",
    "pad_horizon",
}

#: Result field names that say the same thing as the convention's name under another one.
SYNONYMS = {
    "loss_history": "losses",
    "loss_curve": "losses",
    "train_losses": "losses",
    "is_finite": "finite",
    "all_finite": "finite",
    "ok": "finite",
    "optimizer_state": "opt_state",
    "optim_state": "opt_state",
    "trained_params": "params",
}


#: Functions whose key is the data they work on, not a source of randomness.
KEY_IS_DATA = {"jaxpapers.core.chat.key_to_seed"}


def _exported(module_name: str):
    module = importlib.import_module(module_name)
    for name in getattr(module, "__all__", []):
        yield name, getattr(module, name)


def _callables():
    for module_name in PUBLIC_MODULES:
        for name, obj in _exported(module_name):
            if inspect.isfunction(obj) or inspect.isbuiltin(obj):
                yield f"{module_name}.{name}", obj
            elif inspect.isclass(obj) and "__init__" in vars(obj) and not _is_namedtuple(obj):
                yield f"{module_name}.{name}.__init__", obj.__init__
            fn = getattr(obj, "__wrapped__", None)
            if fn is not None and inspect.isfunction(fn) and not inspect.isfunction(obj):
                yield f"{module_name}.{name}", fn


def _is_namedtuple(obj) -> bool:
    return inspect.isclass(obj) and issubclass(obj, tuple) and hasattr(obj, "_fields")


def _signature(fn):
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def test_keys_and_configs_are_keyword_only():
    bad = []
    for name, fn in _callables():
        sig = _signature(fn)
        if sig is None:
            continue
        for p in sig.parameters.values():
            if name in KEY_IS_DATA:
                continue
            if p.name in ("key", "config") and p.kind is not p.KEYWORD_ONLY:
                bad.append(f"{name}: {p.name} is {p.kind.description}; expected keyword-only")
            if p.name in ("cfg", "rng", "np_rng", "compiler_options"):
                bad.append(f"{name}: parameter {p.name!r} (see the calling convention)")
    assert not bad, "\n".join(bad)


def test_all_holds_the_users_api_only():
    bad = []
    for module_name in PUBLIC_MODULES:
        for name, _ in _exported(module_name):
            if name.startswith("_") or name in INTERNALS:
                bad.append(f"{module_name}.__all__ exports {name}")
    assert not bad, "\n".join(bad)


def test_result_fields_use_the_conventional_names():
    bad = []
    for module_name in PUBLIC_MODULES:
        for name, obj in _exported(module_name):
            if _is_namedtuple(obj):
                for field in obj._fields:
                    if field in SYNONYMS:
                        bad.append(f"{module_name}.{name}.{field}: call it {SYNONYMS[field]}")
    assert not bad, "\n".join(bad)


def _module_imports(path: Path, name: str) -> set[str]:
    """The jaxpapers modules ``path`` imports, at import time or inside functions (a deferred
    import that closes a cycle is still a cycle in the design); ``TYPE_CHECKING`` blocks aside."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    nodes = [tree]
    while nodes:
        node = nodes.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            nodes.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("jaxpapers"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            if base.startswith("jaxpapers"):
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names)
        nodes.extend(ast.iter_child_nodes(node))
    return found


def test_no_import_cycle():
    modules = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        modules[".".join(parts)] = path
    graph = {
        name: {m for m in _module_imports(path, name) if m in modules and m != name}
        for name, path in modules.items()
    }
    # A package's __init__ importing its own submodules is not a cycle unless a submodule imports
    # the package back at import time, which the graph shows; find strongly connected components.
    index, low, stack, on_stack, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    # package <-> its own submodule through the package __init__ re-exporting is the normal
    # layout; a cycle among two sibling modules (or a submodule importing its package's
    # __init__ while that imports it) is what this test forbids.
    real = [c for c in cycles if not _only_package_reexports(c, graph)]
    assert not real, f"import cycles: {real}"


def _only_package_reexports(component, graph) -> bool:
    """Whether a cycle exists only because a submodule imports names from its own package's
    ``__init__`` (``from jaxpapers.x import y`` inside ``jaxpapers.x._z``)."""
    reduced = {
        v: {w for w in graph[v] if w in component and not v.startswith(w + ".")} for v in component
    }
    # with submodule -> ancestor-package edges removed, is there still a cycle?
    seen, done = set(), set()

    def has_cycle(v):
        seen.add(v)
        for w in reduced[v]:
            if w not in done and (w in seen or has_cycle(w)):
                return True
        done.add(v)
        return False

    return not any(has_cycle(v) for v in component if v not in done)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_public_modules_import(module_name):
    importlib.import_module(module_name)
