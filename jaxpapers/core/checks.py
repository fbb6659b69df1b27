"""Argument checks shared by every public entry point: clear ``ValueError``s before tracing.

Every error names the argument, what it got and what was expected. Where each check runs:

* **Shapes, dtypes, key types and integer-ness** are static, known even for a tracer, so they are
  checked at the boundary of every public call, inside ``jax.jit`` too.
* **Values** (finiteness, ranges, label bounds) are checked at the boundary of a public call when
  the argument is concrete (:func:`is_concrete`: a NumPy array, a Python number or an
  already-computed JAX array) and skipped on tracers: a check never forces a device-to-host copy
  inside a compiled program and never raises a tracer error.
* **Inside ``jax.jit``** a value cannot stop the program. A function whose result can go
  non-finite reports it in a result field (``finite``, ``converged``, a status code) or states its
  NaN contract in the docstring (for example "NaN in ``x`` gives NaN in the output"). Wrap a call
  in :func:`checked` to have ``jax.experimental.checkify`` report the first NaN/inf, division by
  zero or out-of-bounds index with the primitive that made it.

The helpers: :func:`check_finite`, :func:`check_positive`, :func:`check_range` (scalars or arrays
in an interval), :func:`check_int` (an integer count, not a float or bool), :func:`check_shape`,
:func:`check_ndim`, :func:`check_dtype` (``"floating"``, ``"integer"``, ...),
:func:`check_same_dtype`, :func:`check_key` (a JAX PRNG key, not a Python int) and
:func:`check_labels`.

Examples:
    >>> import jax.numpy as jnp
    >>> from jaxpapers.core.checks import check_finite, check_key, is_concrete
    >>> is_concrete(jnp.ones(3))
    True
    >>> check_finite("x", jnp.array([1.0, jnp.nan]))
    Traceback (most recent call last):
    ...
    ValueError: x of shape (2,) holds 1 non-finite value(s) (NaN or inf)
    >>> check_key("key", 0)
    Traceback (most recent call last):
    ...
    ValueError: key must be a JAX PRNG key (jax.random.key(seed)); got int 0
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.experimental import checkify


def is_concrete(x: Any) -> bool:
    """True when ``x`` is not a JAX tracer, so its value can be read on the host.

    Wrappers that convert to an array (``__jax_array__``, e.g. a ``flax.nnx.Param`` created
    inside ``jax.jit``) count as what they wrap.
    """
    if isinstance(x, jax.core.Tracer):
        return False
    as_array = getattr(x, "__jax_array__", None)
    if as_array is not None:
        try:
            return not isinstance(as_array(), jax.core.Tracer)
        except Exception:
            return True
    return True


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


def check_range(
    name: str,
    value: Any,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> None:
    """Raise ``ValueError`` unless every entry of a concrete ``value`` is finite and in range.

    The interval is ``[low, high]``; ``low_open``/``high_open`` exclude an end and ``None``
    leaves it unbounded. Tracers pass unchecked.
    """
    if not is_concrete(value):
        return
    arr = np.asarray(value)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)
    ):
        raise ValueError(f"{name}={value!r}; expected a real number")
    if np.iscomplexobj(arr):
        raise ValueError(f"{name} has complex dtype {arr.dtype}; expected a real number")
    arr = arr.astype(np.float64)
    ok = np.isfinite(arr)
    if low is not None:
        ok &= arr > low if low_open else arr >= low
    if high is not None:
        ok &= arr < high if high_open else arr <= high
    if not ok.all():
        lo = "(-inf" if low is None else ("(" if low_open else "[") + f"{low:g}"
        hi = "inf)" if high is None else f"{high:g}" + (")" if high_open else "]")
        got = float(arr.reshape(-1)[~ok.reshape(-1)][0])
        if arr.ndim == 0:
            raise ValueError(f"{name}={got!r}; expected a finite value in {lo}, {hi}")
        raise ValueError(
            f"{name} of shape {arr.shape} holds {got!r}; expected finite values in {lo}, {hi}"
        )


def check_int(name: str, value: Any, *, minimum: int | None = None) -> int | Any:
    """Raise ``ValueError`` unless ``value`` is an integer (not a bool or float) ``>= minimum``.

    Accepts Python and NumPy integers and integer-dtype 0-d arrays; returns the value as ``int``
    (a traced integer passes through unchanged, its value unchecked).
    """
    if isinstance(value, bool | np.bool_):
        raise ValueError(f"{name}={value!r}; expected an integer, not a bool")
    if not is_concrete(value):
        if np.issubdtype(value.dtype, np.integer) and value.ndim == 0:
            return value
        raise ValueError(
            f"{name} is a traced {value.dtype}{list(value.shape)}; expected an integer"
        )
    if isinstance(value, np.ndarray | jax.Array) and (
        value.ndim != 0 or not np.issubdtype(value.dtype, np.integer)
    ):
        raise ValueError(
            f"{name} is an array of dtype {value.dtype} and shape {value.shape}; "
            "expected an integer scalar"
        )
    try:
        v = operator.index(value)
    except TypeError:
        raise ValueError(
            f"{name}={value!r} ({type(value).__name__}); expected an integer"
        ) from None
    if minimum is not None and v < minimum:
        raise ValueError(f"{name}={v}; expected an integer >= {minimum}")
    return v


def check_ndim(name: str, x: Any, ndim: int | Sequence[int]) -> None:
    """Raise ``ValueError`` unless ``x`` has ``ndim`` axes (or one of several ``ndim``)."""
    allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    shape = tuple(np.shape(x))
    if len(shape) not in allowed:
        want = " or ".join(str(a) for a in allowed)
        raise ValueError(f"{name} has shape {shape} ({len(shape)} axes); expected {want} axes")


_KINDS = {
    "floating": np.floating,
    "integer": np.integer,
    "complex": np.complexfloating,
    "inexact": np.inexact,
    "bool": np.bool_,
}


def check_dtype(name: str, x: Any, kind: str | Sequence[str]) -> None:
    """Raise ``ValueError`` unless ``x``'s dtype is of ``kind`` (``"floating"``, ``"integer"``,
    ``"complex"``, ``"inexact"``, ``"bool"``; several kinds allowed). Runs on tracers too."""
    kinds = (kind,) if isinstance(kind, str) else tuple(kind)
    dtype = x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype
    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key) or not any(
        np.issubdtype(dtype, _KINDS[k]) for k in kinds
    ):
        raise ValueError(f"{name} has dtype {dtype}; expected {' or '.join(kinds)}")


def check_same_dtype(**arrays: Any) -> None:
    """Raise ``ValueError`` unless all given arrays (by keyword: name=array) share one dtype."""
    dtypes = {
        n: (a.dtype if hasattr(a, "dtype") else np.asarray(a).dtype) for n, a in arrays.items()
    }
    if len(set(dtypes.values())) > 1:
        got = ", ".join(f"{n} is {d}" for n, d in dtypes.items())
        raise ValueError(f"dtypes must match: {got}")


def check_key(name: str, key: Any) -> None:
    """Raise ``ValueError`` unless ``key`` is one JAX PRNG key.

    Accepts a typed key (``jax.random.key(seed)``, any shape-``()`` key array) or a legacy raw
    ``uint32`` key (``jax.random.PRNGKey(seed)``, shape ``(2,)``), concrete or traced. A Python
    or NumPy integer seed, a float array or a batch of keys is refused.
    """
    dtype = getattr(key, "dtype", None)
    shape = tuple(getattr(key, "shape", ()))
    if dtype is not None and isinstance(key, jax.Array | np.ndarray):
        if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
            if shape == ():
                return
            raise ValueError(f"{name} is a batch of keys of shape {shape}; expected one key")
        if dtype == np.uint32 and shape == (2,):
            return
        raise ValueError(
            f"{name} has dtype {dtype} and shape {shape}; expected a JAX PRNG key "
            "(jax.random.key(seed))"
        )
    raise ValueError(
        f"{name} must be a JAX PRNG key (jax.random.key(seed)); got {type(key).__name__} {key!r}"
    )


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
