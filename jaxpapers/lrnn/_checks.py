"""Argument checks shared by the scans and the layers: clear ``ValueError`` before any tracing."""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxpapers.core.checks import is_concrete

MODES: tuple[str, ...] = ("auto", "sequential", "associative", "chunked")


def check_mode(mode: str, chunk: int) -> None:
    """Raise if ``mode`` is unknown or ``chunk`` is not a positive integer."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}; expected one of {MODES}")
    if not isinstance(chunk, int | np.integer) or chunk < 1:
        raise ValueError(f"chunk={chunk!r}; expected a positive integer")


def check_finite(name: str, x: Any) -> None:
    """Debug check: raise if a concrete ``x`` holds NaN or inf (needs concrete, untraced values)."""
    if not is_concrete(x):
        raise ValueError(
            f"debug=True checks {name} for non-finite values and needs concrete arrays; "
            "call the layer outside jax.jit/vmap/grad or set debug=False"
        )
    arr = np.asarray(x)
    if not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(f"{name} of shape {arr.shape} holds {bad} non-finite values (NaN or inf)")
