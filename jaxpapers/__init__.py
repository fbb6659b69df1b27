"""jaxpapers: JAX implementations of nineteen NeurIPS 2026 papers.

Paper subpackages are imported lazily, so ``import jaxpapers`` stays cheap::

    import jaxpapers
    jaxpapers.ievi.ie_vi(...)          # imports jaxpapers.ievi on first use
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

from jaxpapers.core.papers import PAPERS

_SUBPACKAGES = frozenset({"core", *(p.module for p in PAPERS)})

__all__ = ["PAPERS", "__version__"]


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"jaxpapers.{name}")
    raise AttributeError(f"module 'jaxpapers' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*__all__, *_SUBPACKAGES])
