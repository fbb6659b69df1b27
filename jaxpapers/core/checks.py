"""Argument checks shared by every public entry point: clear ``ValueError``s before tracing.

A public function checks what it can while its arguments are concrete (outside ``jax.jit``) and
skips value checks on tracers (shape and dtype checks still run, shapes being static). Each error
names the argument, what it got and what was expected. Where values are only known inside a
compiled program (a measurement computed under ``jax.jit``, a NaN born mid-loop), wrap the call in
:func:`checked`: ``jax.experimental.checkify`` then reports the first NaN/inf, division by zero
or out-of-bounds index with the primitive that made it.

Examples:
    >>> import jax.numpy as jnp
    >>> from jaxpapers.core.checks import check_finite, is_concrete
    >>> is_concrete(jnp.ones(3))
    True
    >>> check_finite("x", jnp.array([1.0, jnp.nan]))
    Traceback (most recent call last):
    ...
    ValueError: x of shape (2,) holds 1 non-finite value(s) (NaN or inf)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.experimental import checkify


def is_concrete(x: Any) -> bool:
    """True when ``x`` is not a JAX tracer, so its value can be read on the host."""
    return not isinstance(x, jax.core.Tracer)


def check_finite(name: str, x: Any) -> None:
    """Raise ``ValueError`` if a concrete ``x`` holds NaN or inf; tracers pass unchecked."""
    if not is_concrete(x):
        return
    arr = np.asarray(x)
    if not np.issubdtype(arr.dtype, np.inexact):
        return
    finite = np.isfinite(arr)
    if not finite.all():
        bad = int(arr.size - np.count_nonzero(finite))
        raise ValueError(
            f"{name} of shape {arr.shape} holds {bad} non-finite value(s) (NaN or inf)"
        )


def check_positive(name: str, value: Any, *, allow_zero: bool = False) -> None:
    """Raise ``ValueError`` unless a concrete scalar ``value`` is > 0 (>= 0 with ``allow_zero``)."""
    if not is_concrete(value):
        return
    v = float(np.asarray(value))
    ok = v >= 0 if allow_zero else v > 0
    if not (ok and np.isfinite(v)):
        want = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name}={v!r}; expected a finite value {want}")


def check_shape(name: str, x: Any, expected: Sequence[int | None]) -> None:
    """Raise ``ValueError`` unless ``x.shape`` matches ``expected`` (``None`` matches any size)."""
    shape = tuple(np.shape(x))
    if len(shape) != len(expected) or any(
        e is not None and s != e for s, e in zip(shape, expected, strict=False)
    ):
        want = tuple("*" if e is None else e for e in expected)
        raise ValueError(f"{name} has shape {shape}; expected {want}")


def check_labels(name: str, labels: Any, num_classes: int) -> None:
    """Raise ``ValueError`` unless ``labels`` are integers in ``[0, num_classes)``."""
    arr = labels if not is_concrete(labels) else np.asarray(labels)
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} has dtype {arr.dtype}; expected integer class labels")
    if is_concrete(labels) and arr.size and (arr.min() < 0 or arr.max() >= num_classes):
        raise ValueError(
            f"{name} holds values in [{arr.min()}, {arr.max()}]; expected [0, {num_classes})"
        )


def checked(fn: Any, *, errors: Any = None) -> Any:
    """``fn`` functionalised by ``checkify``: it returns ``(error, out)`` instead of ``out``.

    The default ``errors`` are ``checkify.float_checks | checkify.index_checks`` (NaN and inf
    creation, division by zero, out-of-bounds gathers), which need no change to ``fn``. Works
    around jitted code: ``checked(jax.jit(f))`` and ``jax.jit(checked(f))`` both do. Call
    ``error.throw()`` to raise, or read ``error.get()`` (``None`` when nothing went wrong).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxpapers.core.checks import checked
        >>> err, out = checked(jax.jit(lambda x: jnp.log(x) * 2.0))(jnp.array([1.0, -1.0]))
        >>> err.get() is not None
        True
        >>> err, out = checked(jax.jit(lambda x: jnp.log(x) * 2.0))(jnp.array([1.0, 2.0]))
        >>> print(err.get())
        None
    """
    if errors is None:
        errors = checkify.float_checks | checkify.index_checks
    return checkify.checkify(fn, errors=errors)
