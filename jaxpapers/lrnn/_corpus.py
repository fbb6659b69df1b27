"""A character corpus shipped with Python: docstrings of pure-Python standard-library modules.

Nothing is downloaded: the text is read from the interpreter's own ``Lib/`` sources with ``ast``
(module, class and function docstrings, in source order). The exact text follows the Python
version; the module list below is fixed.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from typing import NamedTuple

import numpy as np

MODULES: tuple[str, ...] = (
    "argparse", "textwrap", "difflib", "inspect", "functools", "collections", "pathlib",
    "json.decoder", "json.encoder", "string", "fractions", "decimal", "statistics", "calendar",
    "configparser", "csv", "dataclasses", "enum", "heapq", "bisect", "shutil", "tempfile",
    "typing", "zipfile", "tarfile", "logging", "subprocess", "threading", "unittest.case",
    "email.message", "http.client", "urllib.parse", "random", "datetime", "ipaddress",
)  # fmt: skip

VOCAB = 128
"""Size of the corpus alphabet: ASCII codes ``0..127`` (any other character becomes ``?``)."""


class Corpus(NamedTuple):
    """Encoded text: ``train`` and ``valid`` ``uint8`` codes in ``[0, 128)``."""

    train: np.ndarray
    valid: np.ndarray


@functools.cache
def _module_docstrings(name: str) -> tuple[str, ...]:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return ()
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    nodes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    docs = (ast.get_docstring(n) for n in ast.walk(tree) if isinstance(n, nodes))
    return tuple(d for d in docs if d)


def stdlib_docstrings(modules: tuple[str, ...] = MODULES, max_chars: int | None = None) -> str:
    """Concatenated docstrings of ``modules`` (blank line between docstrings).

    Modules are parsed in order (and cached per process) until ``max_chars`` characters exist.
    """
    parts: list[str] = []
    size = 0
    for name in modules:
        for doc in _module_docstrings(name):
            parts.append(doc)
            size += len(doc) + 2
        if max_chars is not None and size >= max_chars:
            break
    text = "\n\n".join(parts)
    return text if max_chars is None else text[:max_chars]


def load_corpus(valid_fraction: float = 0.1, max_chars: int | None = None) -> Corpus:
    """Encode the docstrings of :data:`MODULES` as ASCII codes; the last ``valid_fraction`` is
    validation.

    Args:
      valid_fraction: share of the text held out, taken from its end.
      max_chars: keep only the first ``max_chars`` characters (before splitting).

    Returns:
      A :class:`Corpus`.
    """
    if not 0.0 < valid_fraction < 1.0:
        raise ValueError(f"valid_fraction={valid_fraction}; expected a number in (0, 1)")
    text = stdlib_docstrings(max_chars=max_chars)
    codes = np.frombuffer(text.encode("ascii", errors="replace"), dtype=np.uint8).copy()
    if codes.size < 1000:
        raise ValueError(f"the docstring corpus has only {codes.size} characters; expected >= 1000")
    cut = int(codes.size * (1.0 - valid_fraction))
    return Corpus(codes[:cut], codes[cut:])
