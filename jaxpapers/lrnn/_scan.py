"""Linear recurrences ``h_t = A_t h_{t-1} + b_t`` in three evaluation orders.

Every scan here evaluates the same recurrence; only the order of the arithmetic differs:

* ``"sequential"``: ``lax.scan`` over time, ``O(T)`` steps of ``O(1)`` work each.
* ``"associative"``: ``lax.associative_scan`` with the operator on pairs ``(A, b)``

  .. math:: (A_i, b_i) \\bullet (A_j, b_j) = (A_j A_i,\\; A_j b_i + b_j), \\qquad i < j,

  which is associative (it composes the affine maps ``h -> A_i h + b_i`` then ``h -> A_j h + b_j``)
  but not commutative when the ``A_t`` vary with time, so the earlier element must stay on the
  right of every matrix product. ``O(log T)`` depth, ``O(T)`` work (times the block-product cost).
* ``"chunked"``: the sequence is cut into chunks of ``chunk`` steps; a ``lax.scan`` walks over
  the chunks carrying the state, and inside each chunk the associative scan runs in parallel. The
  chunk body is rematerialised (``jax.checkpoint``), so the backward pass keeps ``O(T / chunk)``
  carries plus one chunk's ``O(chunk)`` scan activations instead of the full scan's
  ``O(T log T)`` tree.
* ``"auto"``: ``"sequential"`` on CPU, ``"associative"`` on GPU/TPU (measured on CPU in
  ``benchmarks/lrnn.py``: the sequential scan is the fastest there).

Time is the axis just before the state axes: ``[..., T, N]`` for diagonal recurrences and
``[..., T, G, n]`` (with ``[..., T, G, n, n]`` transitions) for block-diagonal ones; any leading
axes are batch axes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Inexact

from jaxpapers.core.checks import check_dtype, check_finite
from jaxpapers.lrnn._checks import check_mode

# Block products written as sums of broadcast products up to this block size: for the small
# blocks of BD-LRU and H-LRU this beats a generic batched matmul on CPU (measured with 2x2 blocks:
# 1.06-1.28x the sequential scan by hand vs 1.4x with a generic operator).
_UNROLL_MAX = 8


def resolve_mode(mode: str) -> str:
    """The concrete scan order for ``mode`` on the current default backend."""
    if mode != "auto":
        return mode
    return "sequential" if jax.default_backend() == "cpu" else "associative"


def _matmul(x: Array, y: Array) -> Array:
    """``x @ y`` over the last two axes for small square blocks."""
    n = x.shape[-1]
    if n > _UNROLL_MAX:
        return jnp.einsum("...ij,...jk->...ik", x, y)
    out = x[..., :, 0:1] * y[..., 0:1, :]
    for k in range(1, n):
        out = out + x[..., :, k : k + 1] * y[..., k : k + 1, :]
    return out


def _matvec(x: Array, v: Array) -> Array:
    """``x @ v`` for blocks ``x [..., n, n]`` and vectors ``v [..., n]``."""
    n = x.shape[-1]
    if n > _UNROLL_MAX:
        return jnp.einsum("...ij,...j->...i", x, v)
    out = x[..., :, 0] * v[..., 0:1]
    for k in range(1, n):
        out = out + x[..., :, k] * v[..., k : k + 1]
    return out


def _matvec_by_columns(cols: Array, v: Array) -> Array:
    """``A @ v`` given ``cols = A^T`` (``cols[..., k, :]`` is column ``k`` of ``A``)."""
    n = cols.shape[-1]
    if n > _UNROLL_MAX:
        return jnp.einsum("...ji,...j->...i", cols, v)
    out = cols[..., 0, :] * v[..., 0:1]
    for k in range(1, n):
        out = out + cols[..., k, :] * v[..., k : k + 1]
    return out


def _diag_combine(earlier: tuple[Array, Array], later: tuple[Array, Array]):
    a1, b1 = earlier
    a2, b2 = later
    return a2 * a1, a2 * b1 + b2


def _block_combine(earlier: tuple[Array, Array], later: tuple[Array, Array]):
    a1, b1 = earlier
    a2, b2 = later
    return _matmul(a2, a1), _matvec(a2, b1) + b2


def _sequential(apply: Callable[[Array, Array], Array], a: Array, b: Array, h0: Array) -> Array:
    def step(h, ab):
        a_t, b_t = ab
        h = apply(a_t, h) + b_t
        return h, h

    _, hs = lax.scan(step, h0, (a, b))
    return hs


def _associative(combine, apply, a: Array, b: Array, h0: Array) -> Array:
    # Fold the initial state into the first input: b_0 <- A_0 h0 + b_0.
    b = b.at[0].set(apply(a[0], h0) + b[0])
    _, hs = lax.associative_scan(combine, (a, b), axis=0)
    return hs


def _chunked(combine, apply, identity: Array, a: Array, b: Array, h0: Array, chunk: int) -> Array:
    t = a.shape[0]
    n_chunks = -(-t // chunk)
    pad = n_chunks * chunk - t
    if pad:
        a = jnp.concatenate([a, jnp.broadcast_to(identity, (pad, *a.shape[1:]))], axis=0)
        b = jnp.concatenate([b, jnp.zeros((pad, *b.shape[1:]), b.dtype)], axis=0)
    a = a.reshape(n_chunks, chunk, *a.shape[1:])
    b = b.reshape(n_chunks, chunk, *b.shape[1:])

    @jax.checkpoint
    def body(h, ab):
        hs = _associative(combine, apply, ab[0], ab[1], h)
        return hs[-1], hs

    _, hs = lax.scan(body, h0, (a, b))
    return hs.reshape(n_chunks * chunk, *hs.shape[2:])[:t]


@functools.partial(jax.jit, static_argnames=("kind", "mode", "chunk"))
def _run(kind: str, a: Array, b: Array, h0: Array, mode: str, chunk: int) -> Array:
    """Time-major recurrence of kind ``"diag"`` or ``"block"``; a [T, ...], b [T, ...].

    Compiled once per shape and mode, so eager callers of the public scans do not re-trace (an
    eager ``lax.associative_scan`` dispatches every level's ops one by one: seconds per call).
    """
    if kind == "diag":
        combine, apply = _diag_combine, lambda x, h: x * h
        identity = jnp.ones(a.shape[1:], a.dtype)
    else:
        combine, apply = _block_combine, _matvec
        identity = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape[1:])
    mode = resolve_mode(mode)
    if mode == "sequential":
        if kind == "block":
            # Columns of A_t contiguous: h_t = sum_k A_t[:, k] h_{t-1}[k] + b_t.
            cols = jnp.swapaxes(a, -1, -2)
            return _sequential(_matvec_by_columns, cols, b, h0)
        return _sequential(apply, a, b, h0)
    if mode == "associative":
        return _associative(combine, apply, a, b, h0)
    return _chunked(combine, apply, identity, a, b, h0, chunk)


def _check_values(a: Any, b: Any, h0: Any) -> None:
    """Dtypes (static) and, for concrete arrays, finiteness of a scan's operands."""
    check_dtype("a", a, "inexact")
    check_dtype("b", b, "inexact")
    check_finite("a", a)
    check_finite("b", b)
    if h0 is not None:
        check_dtype("h0", h0, "inexact")
        check_finite("h0", h0)


def _time_major(x: Array, n_state_axes: int) -> Array:
    return jnp.moveaxis(x, -(n_state_axes + 1), 0)


def _batch_major(x: Array, n_state_axes: int) -> Array:
    return jnp.moveaxis(x, 0, -(n_state_axes + 1))


def _initial_state(h0: Any, shape: tuple[int, ...], dtype: Any, name: str) -> Array:
    if h0 is None:
        return jnp.zeros(shape, dtype)
    if jnp.shape(h0) != shape:
        raise ValueError(f"{name} has shape {jnp.shape(h0)}; expected {shape}")
    return jnp.asarray(h0, dtype)


def diagonal_scan(
    a: Inexact[Array, "*batch T N"],
    b: Inexact[Array, "*batch T N"],
    h0: Inexact[Array, "*batch N"] | None = None,
    *,
    mode: str = "auto",
    chunk: int = 64,
) -> Inexact[Array, "*batch T N"]:
    """All states of the diagonal recurrence ``h_t = a_t * h_{t-1} + b_t`` (real or complex).

    Args:
      a: ``[..., T, N]`` per-step diagonal transitions (broadcast of a constant is fine).
      b: ``[..., T, N]`` inputs, same shape as ``a``.
      h0: ``[..., N]`` initial state (zeros if omitted).
      mode: ``"auto"``, ``"sequential"``, ``"associative"`` or ``"chunked"`` (module docstring).
      chunk: chunk length of the chunked scan.

    Returns:
      ``[..., T, N]`` states ``h_1 .. h_T``.
    """
    check_mode(mode, chunk)
    if jnp.ndim(a) < 2 or jnp.shape(a) != jnp.shape(b):
        raise ValueError(
            f"a has shape {jnp.shape(a)} and b has shape {jnp.shape(b)}; expected equal shapes "
            "[..., T, N]"
        )
    _check_values(a, b, h0)
    dtype = jnp.result_type(a, b)
    a, b = jnp.asarray(a, dtype), jnp.asarray(b, dtype)
    h0 = _initial_state(h0, a.shape[:-2] + a.shape[-1:], dtype, "h0")
    hs = _run("diag", _time_major(a, 1), _time_major(b, 1), h0, mode, chunk)
    return _batch_major(hs, 1)


def block_scan(
    a: Inexact[Array, "*batch T G n n"],
    b: Inexact[Array, "*batch T G n"],
    h0: Inexact[Array, "*batch G n"] | None = None,
    *,
    mode: str = "auto",
    chunk: int = 64,
) -> Inexact[Array, "*batch T G n"]:
    """All states of the block-diagonal recurrence ``h_t = A_t h_{t-1} + b_t``.

    ``A_t`` holds ``G`` dense ``n x n`` blocks; block ``g`` maps ``h[g]`` to itself only.

    Args:
      a: ``[..., T, G, n, n]`` per-step transition blocks.
      b: ``[..., T, G, n]`` inputs.
      h0: ``[..., G, n]`` initial state (zeros if omitted).
      mode: ``"auto"``, ``"sequential"``, ``"associative"`` or ``"chunked"``.
      chunk: chunk length of the chunked scan.

    Returns:
      ``[..., T, G, n]`` states ``h_1 .. h_T``.
    """
    check_mode(mode, chunk)
    sa, sb = jnp.shape(a), jnp.shape(b)
    if len(sa) < 4 or sa[-1] != sa[-2] or sa[:-1] != sb:
        raise ValueError(
            f"a has shape {sa} and b has shape {sb}; expected a [..., T, G, n, n] and "
            "b [..., T, G, n]"
        )
    _check_values(a, b, h0)
    dtype = jnp.result_type(a, b)
    a, b = jnp.asarray(a, dtype), jnp.asarray(b, dtype)
    h0 = _initial_state(h0, sb[:-3] + sb[-2:], dtype, "h0")
    hs = _run("block", _time_major(a, 3), _time_major(b, 2), h0, mode, chunk)
    return _batch_major(hs, 2)


def companion_matrices(a: Inexact[Array, "*batch K"]) -> Inexact[Array, "*batch K K"]:
    """Companion blocks of ``h_t = sum_k a_k h_{t-k}``: first row ``a``, then a shift.

    The state ``s_t = (h_t, h_{t-1}, ..., h_{t-K+1})`` obeys ``s_t = M_t s_{t-1} + e_1 b_t`` with

    .. math:: M_t = \\begin{pmatrix} a_1 & a_2 & \\cdots & a_K \\\\ 1 & 0 & \\cdots & 0 \\\\
              & \\ddots & & \\vdots \\\\ 0 & \\cdots & 1 & 0 \\end{pmatrix}.
    """
    if jnp.ndim(a) < 1 or jnp.shape(a)[-1] < 1:
        raise ValueError(f"a has shape {jnp.shape(a)}; expected [..., K] with K >= 1")
    check_dtype("a", a, "inexact")
    k = a.shape[-1]
    shift = jnp.eye(k - 1, k, dtype=a.dtype)
    shift = jnp.broadcast_to(shift, (*a.shape[:-1], k - 1, k))
    return jnp.concatenate([a[..., None, :], shift], axis=-2)


def companion_scan(
    a: Inexact[Array, "*batch T N K"],
    b: Inexact[Array, "*batch T N"],
    h0: Inexact[Array, "*batch N K"] | None = None,
    *,
    mode: str = "auto",
    chunk: int = 64,
) -> Inexact[Array, "*batch T N"]:
    """All outputs of the order-``K`` recurrence ``h_t = sum_{k=1..K} a_{t,k} h_{t-k} + b_t``.

    Each of the ``N`` channels has its own coefficients. The sequential mode carries the window of
    the last ``K`` states (``O(K)`` work a step); the parallel modes scan the ``K x K`` companion
    blocks of :func:`companion_matrices` with :func:`block_scan`.

    Args:
      a: ``[..., T, N, K]`` coefficients ``a_{t,1..K}`` of each channel.
      b: ``[..., T, N]`` inputs.
      h0: ``[..., N, K]`` initial window ``(h_0, h_{-1}, ..., h_{1-K})`` (zeros if omitted).
      mode: ``"auto"``, ``"sequential"``, ``"associative"`` or ``"chunked"``.
      chunk: chunk length of the chunked scan.

    Returns:
      ``[..., T, N]`` states ``h_1 .. h_T``.
    """
    check_mode(mode, chunk)
    sa, sb = jnp.shape(a), jnp.shape(b)
    if len(sa) < 3 or sa[:-1] != sb or sa[-1] < 1:
        raise ValueError(
            f"a has shape {sa} and b has shape {sb}; expected a [..., T, N, K] with K >= 1 and "
            "b [..., T, N]"
        )
    _check_values(a, b, h0)
    dtype = jnp.result_type(a, b)
    a, b = jnp.asarray(a, dtype), jnp.asarray(b, dtype)
    h0 = _initial_state(h0, sb[:-2] + sa[-2:], dtype, "h0")
    if resolve_mode(mode) != "sequential":
        k = sa[-1]
        blocks = companion_matrices(a)
        inputs = jnp.concatenate([b[..., None], jnp.zeros((*sb, k - 1), dtype)], axis=-1)
        return block_scan(blocks, inputs, h0, mode=mode, chunk=chunk)[..., 0]

    return _companion_sequential(a, b, h0)


@jax.jit
def _companion_sequential(a: Array, b: Array, h0: Array) -> Array:
    sa = jnp.shape(a)
    # Carry the window as K separate arrays (no concatenation per step) and read the K
    # coefficients from a [T, K, ..., N] layout so each slice is contiguous.
    a_tm = jnp.moveaxis(_time_major(a, 2), -1, 1)
    window0 = tuple(h0[..., k] for k in range(sa[-1]))

    def step(window, ab):
        a_t, b_t = ab
        h = b_t
        for k, w in enumerate(window):
            h = h + a_t[k] * w
        return (h, *window[:-1]), h

    _, hs = lax.scan(step, window0, (a_tm, _time_major(b, 1)))
    return _batch_major(hs, 1)
