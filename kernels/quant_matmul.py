"""Pallas kernel: ``x @ dequant(codes, scales + eps * mult * Z)``, ``Z`` made inside the kernel.

Quantized weight layout (group-wise along the input dimension ``K``, ``G = K / group_size``):

* ``codes``: ``[K * bits / 8, N]`` int8; ``p = 8 / bits`` consecutive rows ``k = i p + t`` of
  unsigned codes in ``[0, 2^bits)`` are packed into byte ``i`` at bit offset ``bits * t``.
* ``scales``, ``zeros``: ``[G, N]`` float; the weight is
  ``W[k, n] = scales[k // group_size, n] * (code[k, n] - zeros[k // group_size, n])``.

The scales are perturbed by a low-rank matrix in an *isotropic* layout: the ``G N`` scale entries,
flattened row-major, are viewed as an ``iso_shape = (m', n')`` matrix (``m' n' = G N``) and
perturbed by ``Z' = U V^T / sqrt(r)``; entry ``(g, n)`` of ``Z`` is entry ``(f // n', f % n')`` of
``Z'`` with ``f = g N + n``. ``U[a, c]`` and ``V[b, c]`` are binary-aggregated Gaussian values of
``(seed_u, a r + c)`` and ``(seed_v, b r + c)`` from the counter hash
(:mod:`jaxpapers_kernels.counter_hash`). An optional ``mult`` (``[G, N]``) rescales ``Z`` entry by
entry (relative perturbations ``s (1 + delta + eps Z)`` are ``scales = s (1 + delta)``,
``mult = s``).

Grid ``(M / block_m, N / block_n, K / block_k)``: each program dequantizes one
``[block_k, block_n]`` weight tile from its packed codes and its ``block_k / group_size`` rows of
scales, adds ``eps * mult * Z`` for those rows computed from integer ops, multiplies by the
``[block_m, block_k]`` activation tile and accumulates into the float32 ``[block_m, block_n]``
output tile (the K axis is the last, sequential grid axis). ``U``, ``V``, ``Z``, the perturbed
scales and the float weight never exist in memory.

Dequantization is linear in the scales, so the ``-eps`` twin of a two-point estimate is the same
call with ``-eps``: ``jaxpapers.lqzo`` runs both forward passes of a zeroth-order step through
this kernel when its layers are built with ``use_kernel=True`` (or ``"auto"`` on GPU/TPU).

Examples:
    >>> import jax.numpy as jnp
    >>> from jaxpapers_kernels import LowRankSpec, perturbed_quant_matmul, quantize
    >>> w = jnp.linspace(-1.0, 1.0, 64 * 32).reshape(64, 32)
    >>> q = quantize(w, bits=4, group_size=16)
    >>> x = jnp.ones((3, 64))
    >>> y = perturbed_quant_matmul(x, q.codes, q.scales, q.zeros, bits=4, group_size=16)
    >>> bool(jnp.allclose(y, x @ w, atol=0.5)), y.shape
    (True, (3, 32))
    >>> spec = LowRankSpec(rank=2, k=4, iso_shape=(8, 16))
    >>> yp = perturbed_quant_matmul(x, q.codes, q.scales, q.zeros, jnp.asarray([1, 2], jnp.uint32),
    ...                             0.01, bits=4, group_size=16, spec=spec)
    >>> bool(jnp.abs(yp - y).max() > 0)
    True
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jaxpapers_kernels._backend import default_interpret
from jaxpapers_kernels.counter_hash import bag_from_bits, counter_hash

BITS = (2, 4, 8)


class LowRankSpec(NamedTuple):
    """Static description of the in-kernel scale perturbation ``Z = reshape(U V^T) / sqrt(rank)``.

    Attributes:
      rank: ``r`` (0: no perturbation).
      k: aggregated Rademacher signs per factor entry (1: Rademacher).
      iso_shape: ``(m', n')`` view of the ``[G, N]`` scales in which ``U V^T`` is low rank.
    """

    rank: int
    k: int
    iso_shape: tuple[int, int]


NO_PERTURBATION = LowRankSpec(0, 1, (1, 1))


@dataclasses.dataclass(frozen=True)
class BlockSizes:
    """Tile sizes of :func:`perturbed_quant_matmul` (static, hashable).

    Attributes:
      block_m: rows of ``x`` per tile (clipped to ``M`` rounded up to 8).
      block_n: output columns per tile.
      block_k: reduction rows per grid step; the kernel uses the largest multiple of
        ``lcm(group_size, 8 / bits)`` that divides ``K`` and is ``<= block_k`` (``None``: all of
        ``K`` in one step). Compiled on GPU the whole ``K`` is one step (Triton programs of one
        grid run in parallel, so they cannot accumulate into a shared output tile).
    """

    block_m: int = 64
    block_n: int = 128
    block_k: int | None = 512

    def __post_init__(self) -> None:
        for name in ("block_m", "block_n", "block_k"):
            v = getattr(self, name)
            if v is None and name == "block_k":
                continue
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}={v!r}; expected a positive integer tile size")


def pack_codes(codes: jax.Array, bits: int) -> jax.Array:
    """Pack unsigned ``[K, N]`` codes in ``[0, 2^bits)`` into ``[K bits / 8, N]`` int8 (along K)."""
    if bits not in BITS:
        raise ValueError(f"bits={bits}; expected one of {BITS}")
    per = 8 // bits
    if jnp.ndim(codes) != 2 or not jnp.issubdtype(codes.dtype, jnp.integer):
        raise ValueError(
            f"codes has shape {jnp.shape(codes)} dtype {codes.dtype}; expected [K, N] integers"
        )
    k_in, n = codes.shape
    if k_in % per:
        raise ValueError(f"codes rows {k_in=} must be a multiple of {per=} codes per byte")
    if not isinstance(codes, jax.core.Tracer) and codes.size:
        lo, hi = int(np.min(np.asarray(codes))), int(np.max(np.asarray(codes)))
        if lo < 0 or hi >= 2**bits:
            raise ValueError(
                f"codes hold values in [{lo}, {hi}]; expected [0, {2**bits}) for {bits=}"
            )
    c = codes.astype(jnp.uint32).reshape(k_in // per, per, n)
    shifts = (jnp.arange(per, dtype=jnp.uint32) * jnp.uint32(bits))[None, :, None]
    packed = jnp.sum(c << shifts, axis=1, dtype=jnp.uint32)
    return jax.lax.bitcast_convert_type(packed.astype(jnp.uint8), jnp.int8)


def unpack_codes(packed: jax.Array | np.ndarray, bits: int) -> jax.Array | np.ndarray:
    """Inverse of :func:`pack_codes`: ``[K bits / 8, N]`` int8 to ``[K, N]`` int32 codes.

    A NumPy ``packed`` is unpacked with NumPy on the host (no eager per-shape compiles when a
    model's layers are repacked outside ``jit``); anything else with ``jax.numpy``.
    """
    if bits not in BITS:
        raise ValueError(f"bits={bits}; expected one of {BITS}")
    if np.ndim(packed) != 2 or packed.dtype not in (np.int8, np.uint8):
        raise ValueError(
            f"packed has shape {np.shape(packed)} dtype {packed.dtype}; expected [K b / 8, N] int8"
        )
    xp = np if isinstance(packed, np.ndarray) else jnp
    per = 8 // bits
    u = packed.astype(xp.int32) & 0xFF
    parts = [(u >> (bits * t)) & ((1 << bits) - 1) for t in range(per)]
    rows, n = packed.shape
    return xp.stack(parts, axis=1).reshape(rows * per, n)


def lowrank_scale_noise(
    seeds: jax.Array, rows: jax.Array, cols: jax.Array, n_total: int, spec: LowRankSpec
) -> jax.Array:
    """Entries ``Z[rows, cols]`` of the isotropic low-rank perturbation (integer ops only).

    Args:
      seeds: ``[2]`` uint32, ``(seed_u, seed_v)``.
      rows, cols: int32 arrays of the same shape, positions in the ``[G, N]`` scale matrix.
      n_total: ``N``, the true number of columns.
      spec: the perturbation's static description.
    """
    iso_cols = spec.iso_shape[1]
    f = rows.astype(jnp.uint32) * jnp.uint32(n_total) + cols.astype(jnp.uint32)
    a, b = f // jnp.uint32(iso_cols), f % jnp.uint32(iso_cols)
    r = jnp.uint32(spec.rank)
    z = jnp.zeros(rows.shape, jnp.float32)
    for c in range(spec.rank):
        u = bag_from_bits(counter_hash(seeds[0], a * r + jnp.uint32(c)), spec.k)
        v = bag_from_bits(counter_hash(seeds[1], b * r + jnp.uint32(c)), spec.k)
        z = z + u * v
    return z * (1.0 / spec.rank**0.5)


def lowrank_factors(seeds: jax.Array, spec: LowRankSpec) -> tuple[jax.Array, jax.Array]:
    """The factors ``U [m', r]`` and ``V [n', r]`` of :func:`lowrank_scale_noise` (jnp)."""
    m, n = spec.iso_shape

    def factor(seed, rows):
        index = jnp.arange(rows * spec.rank, dtype=jnp.uint32).reshape(rows, spec.rank)
        return bag_from_bits(counter_hash(seed, index), spec.k)

    return factor(seeds[0], m), factor(seeds[1], n)


def _dequantize(codes, scales, zeros, bits, group_size):
    q = unpack_codes(codes, bits).astype(scales.dtype)
    k_in = q.shape[0]
    n = q.shape[1]
    g = k_in // group_size
    s = jnp.broadcast_to(scales[:, None, :], (g, group_size, n)).reshape(k_in, n)
    z = jnp.broadcast_to(zeros[:, None, :], (g, group_size, n)).reshape(k_in, n)
    return s * (q - z)


def perturbed_scales_reference(
    scales: jax.Array,
    seeds: jax.Array,
    eps: jax.Array,
    spec: LowRankSpec,
    mult: jax.Array | None = None,
) -> jax.Array:
    """``scales + eps * mult * Z`` materialised from the factors (the reference path)."""
    if spec.rank == 0:
        return scales
    u, v = lowrank_factors(jnp.asarray(seeds, jnp.uint32), spec)
    z = (u @ v.T * (1.0 / math.sqrt(spec.rank))).reshape(scales.shape).astype(scales.dtype)
    if mult is not None:
        z = mult.astype(scales.dtype) * z
    return scales + jnp.asarray(eps, scales.dtype).reshape(()) * z


def perturbed_quant_matmul_reference(
    x: jax.Array,
    codes: jax.Array,
    scales: jax.Array,
    zeros: jax.Array,
    seeds: jax.Array,
    eps: jax.Array,
    *,
    bits: int,
    group_size: int,
    spec: LowRankSpec,
    mult: jax.Array | None = None,
) -> jax.Array:
    """jnp reference: materialise ``scales + eps mult Z``, dequantize, multiply. ``[M, N]``."""
    check_quant_shapes(tuple(jnp.shape(x)), codes, scales, zeros, bits=bits, group_size=group_size)
    check_spec(spec, tuple(scales.shape))
    s = perturbed_scales_reference(scales, seeds, eps, spec, mult)
    w = _dequantize(codes, s, zeros, bits, group_size)
    return jnp.dot(x, w.astype(x.dtype), preferred_element_type=jnp.float32).astype(x.dtype)


def perturbed_quant_matmul_kernel(
    x_ref,
    codes_ref,
    scales_ref,
    zeros_ref,
    *refs,
    bits: int,
    group_size: int,
    n_total: int,
    spec: LowRankSpec,
    has_mult: bool,
    block_n: int,
):
    """Accumulate ``x_tile @ dequant(codes_tile, scales_tile + eps mult Z)`` into ``o_ref``.

    ``refs`` are ``(mult_ref, seeds_ref, eps_ref, o_ref)`` (``mult_ref`` only when ``has_mult``).
    """
    o_ref = refs[-1]
    j, kk = pl.program_id(1), pl.program_id(2)

    @pl.when(kk == 0)
    def _init():
        o_ref[...] = jnp.zeros(o_ref.shape, o_ref.dtype)

    scales = scales_ref[...].astype(jnp.float32)
    if spec.rank:
        seeds_ref, eps_ref = refs[-3], refs[-2]
        gb = scales.shape[0]
        rows = kk * gb + jax.lax.broadcasted_iota(jnp.int32, (gb, block_n), 0)
        cols = j * block_n + jax.lax.broadcasted_iota(jnp.int32, (gb, block_n), 1)
        z = lowrank_scale_noise(seeds_ref[...], rows, cols, n_total, spec)
        if has_mult:
            z = refs[0][...].astype(jnp.float32) * z
        scales = scales + eps_ref[0] * z
    w = _dequantize(codes_ref[...], scales, zeros_ref[...].astype(jnp.float32), bits, group_size)
    x = x_ref[...]
    o_ref[...] += jnp.dot(x, w.astype(x.dtype), preferred_element_type=jnp.float32)


@dataclasses.dataclass(frozen=True)
class _Static:
    """The static (hashable) arguments of one kernel call."""

    bits: int
    group_size: int
    spec: LowRankSpec
    block_sizes: BlockSizes
    interpret: bool


def _block_k(k_in: int, cfg: _Static) -> int:
    bk = cfg.block_sizes.block_k
    if bk is None or (not cfg.interpret and jax.default_backend() == "gpu"):
        return k_in
    step = math.lcm(cfg.group_size, 8 // cfg.bits)
    best = k_in
    for cand in range(step, min(bk, k_in) + 1, step):
        if k_in % cand == 0:
            best = cand
    return best if best <= bk else k_in


def _pallas_forward(x, codes, scales, zeros, mult, seeds, eps, cfg: _Static):
    m, k_in = x.shape
    n = scales.shape[1]
    bn = cfg.block_sizes.block_n
    bm = min(cfg.block_sizes.block_m, pl.cdiv(m, 8) * 8)
    bk = _block_k(k_in, cfg)
    gm, gn, gk = pl.cdiv(m, bm), pl.cdiv(n, bn), k_in // bk
    pad_m, pad_n = gm * bm - m, gn * bn - n
    pad_cols = lambda a: jnp.pad(a, ((0, 0), (0, pad_n)))
    gb, cb = bk // cfg.group_size, bk * cfg.bits // 8
    operands = [jnp.pad(x, ((0, pad_m), (0, 0))), pad_cols(codes), pad_cols(scales)]
    operands.append(pad_cols(zeros))
    specs = [
        pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
        pl.BlockSpec((cb, bn), lambda i, j, k: (k, j)),
        pl.BlockSpec((gb, bn), lambda i, j, k: (k, j)),
        pl.BlockSpec((gb, bn), lambda i, j, k: (k, j)),
    ]
    has_mult = bool(cfg.spec.rank) and mult is not None
    if has_mult:
        operands.append(pad_cols(mult))
        specs.append(pl.BlockSpec((gb, bn), lambda i, j, k: (k, j)))
    if cfg.spec.rank:
        operands += [seeds, eps]
        specs += [
            pl.BlockSpec((2,), lambda i, j, k: (0,)),
            pl.BlockSpec((1,), lambda i, j, k: (0,)),
        ]
    kernel = functools.partial(
        perturbed_quant_matmul_kernel,
        bits=cfg.bits,
        group_size=cfg.group_size,
        n_total=n,
        spec=cfg.spec,
        has_mult=has_mult,
        block_n=bn,
    )
    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((gm * bm, gn * bn), jnp.float32),
        grid=(gm, gn, gk),
        in_specs=specs,
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        interpret=cfg.interpret,
        name="perturbed_quant_matmul",
    )(*operands)
    return out[:m, :n].astype(x.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(7,))
def _fused(x, codes, scales, zeros, mult, seeds, eps, cfg):
    return _pallas_forward(x, codes, scales, zeros, mult, seeds, eps, cfg)


def _fused_fwd(x, codes, scales, zeros, mult, seeds, eps, cfg):
    out = _pallas_forward(x, codes, scales, zeros, mult, seeds, eps, cfg)
    return out, (x, codes, scales, zeros, mult, seeds, eps)


def _fused_bwd(cfg, res, dy):
    # Backward in plain jnp: dx = dy W^T, dscales[g, n] = sum_{k in g} (x^T dy)[k, n] (q - zero).
    # Not differentiated: codes, zeros, mult, seeds, eps (zero cotangents).
    x, codes, scales, zeros, mult, seeds, eps = res
    s = perturbed_scales_reference(scales.astype(jnp.float32), seeds, eps[0], cfg.spec, mult)
    w = _dequantize(codes, s, zeros.astype(jnp.float32), cfg.bits, cfg.group_size)
    dyf = dy.astype(jnp.float32)
    dx = jnp.dot(dyf, w.T).astype(x.dtype)
    dw = jnp.dot(x.astype(jnp.float32).T, dyf)
    q = unpack_codes(codes, cfg.bits).astype(jnp.float32)
    g, n = scales.shape
    zf = jnp.broadcast_to(zeros[:, None, :], (g, cfg.group_size, n)).reshape(q.shape)
    ds = jnp.sum((dw * (q - zf)).reshape(g, cfg.group_size, n), axis=1).astype(scales.dtype)
    zero = lambda a: None if a is None else jnp.zeros_like(a)
    return dx, None, ds, zero(zeros), zero(mult), None, jnp.zeros_like(eps)


_fused.defvjp(_fused_fwd, _fused_bwd)


def check_quant_shapes(
    x_shape: tuple[int, ...],
    codes: jax.Array,
    scales: jax.Array,
    zeros: jax.Array,
    *,
    bits: int,
    group_size: int,
) -> None:
    """``ValueError`` naming the argument when shapes/dtypes of a quantized matmul disagree.

    The weight's input dimension ``K`` is read from ``codes`` (``K bits / 8`` packed rows), so an
    ``x`` of the wrong width is reported as a mismatch with the weight.
    """
    if bits not in BITS:
        raise ValueError(f"bits={bits}; expected one of {BITS}")
    if len(x_shape) != 2:
        raise ValueError(f"x has shape {x_shape}; expected [M, K]")
    if codes.ndim != 2 or codes.dtype != jnp.int8:
        raise ValueError(
            f"codes has shape {codes.shape} dtype {codes.dtype}; expected a 2-D int8 array "
            f"[K * {bits} / 8, N] of packed codes"
        )
    k_w = codes.shape[0] * 8 // bits
    k_in = x_shape[1]
    if k_in != k_w:
        raise ValueError(
            f"codes has shape {codes.shape}: a weight with K={k_w} input rows ({8 // bits} "
            f"{bits}-bit codes per byte), but x has shape {x_shape} (K={k_in}); the widths "
            "must match"
        )
    if not isinstance(group_size, int | np.integer) or group_size < 1 or k_in % group_size:
        raise ValueError(f"group_size={group_size} must divide the input dimension K={k_in}")
    if scales.ndim != 2 or scales.shape[0] != k_in // group_size:
        raise ValueError(
            f"scales has shape {scales.shape}; expected [K / group_size, N] = "
            f"[{k_in // group_size}, N]"
        )
    if not jnp.issubdtype(scales.dtype, jnp.floating):
        raise ValueError(f"scales has dtype {scales.dtype}; expected a float dtype")
    n = scales.shape[1]
    if zeros.shape != scales.shape:
        raise ValueError(
            f"zeros has shape {zeros.shape}; expected the scales' shape {scales.shape}"
        )
    if codes.shape[1] != n:
        raise ValueError(
            f"codes has shape {codes.shape}; expected N={n} columns to match scales {scales.shape}"
        )


def check_spec(spec: LowRankSpec, scales_shape: tuple[int, ...]) -> None:
    """``ValueError`` when a rank-``r`` :class:`LowRankSpec` does not fit ``[G, N]`` scales."""
    if spec.rank == 0:
        return
    g, n = scales_shape
    if spec.iso_shape[0] * spec.iso_shape[1] != g * n:
        raise ValueError(f"spec.iso_shape={spec.iso_shape} must hold the {g}x{n} scales")
    if spec.rank > min(spec.iso_shape):
        raise ValueError(f"rank={spec.rank} exceeds min(iso_shape)={min(spec.iso_shape)}")
    if not 1 <= spec.k <= 32:
        raise ValueError(f"spec.k={spec.k}; expected 1 <= k <= 32 aggregated signs")


@functools.partial(
    jax.jit, static_argnames=("bits", "group_size", "spec", "block_sizes", "interpret")
)
def perturbed_quant_matmul(
    x: jax.Array,
    codes: jax.Array,
    scales: jax.Array,
    zeros: jax.Array,
    seeds: jax.Array | None = None,
    eps: jax.Array | float = 0.0,
    mult: jax.Array | None = None,
    *,
    bits: int,
    group_size: int,
    spec: LowRankSpec = NO_PERTURBATION,
    block_sizes: BlockSizes = BlockSizes(),
    interpret: bool | None = None,
) -> jax.Array:
    """Fused ``x @ dequant(codes, scales + eps * mult * Z)``, ``Z`` made in-kernel from ``seeds``.

    Jitted (static: ``bits``, ``group_size``, ``spec``, ``block_sizes``, ``interpret``) with a
    custom VJP: the forward is the Pallas kernel, the backward plain jnp.

    Args:
      x: ``[M, K]`` activations.
      codes: ``[K bits / 8, N]`` int8 packed codes (see module docstring).
      scales, zeros: ``[K / group_size, N]`` per-group scales and zero points.
      seeds: ``[2]`` uint32 ``(seed_u, seed_v)`` (ignored when ``spec.rank == 0``).
      eps: perturbation size (scalar; negative for the twin pass). Not differentiated.
      mult: optional ``[K / group_size, N]`` entrywise factor of ``Z`` (default 1).
      bits: 2, 4 or 8. group_size: codes per scale along ``K``.
      spec: low-rank perturbation (:class:`LowRankSpec`); rank 0 = plain quantized matmul.
      block_sizes: :class:`BlockSizes`; ``M`` and ``N`` need not be multiples of the tiles.
      interpret: Pallas interpret mode (default: on when no GPU/TPU is present).

    Returns:
      ``[M, N]`` in ``x.dtype``. Differentiable in ``x`` and ``scales``.

    Raises:
      ValueError: naming the argument, for a wrong shape or dtype (an ``x`` whose width is not the
        weight's ``K`` included). The call is jitted, so values are not inspected: NaN or inf in
        ``x``, ``scales`` or ``eps`` propagates to the affected outputs (the NaN contract; check
        concrete inputs with ``jnp.isfinite`` first, or quantize with :func:`quantize`, which
        refuses non-finite weights).

    References:
      Pallas: https://docs.jax.dev/en/latest/pallas/index.html
    """
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise ValueError(f"x has dtype {x.dtype}; expected a float dtype")
    check_quant_shapes(tuple(x.shape), codes, scales, zeros, bits=bits, group_size=group_size)
    if jnp.ndim(eps) != 0:
        raise ValueError(f"eps has shape {jnp.shape(eps)}; expected a scalar")
    check_spec(spec, tuple(scales.shape))
    if not isinstance(block_sizes, BlockSizes):
        raise TypeError(f"block_sizes={block_sizes!r}; expected a BlockSizes")
    if mult is not None and mult.shape != scales.shape:
        raise ValueError(f"mult has shape {mult.shape}; expected the scales' shape {scales.shape}")
    if seeds is not None and not jnp.issubdtype(jnp.asarray(seeds).dtype, jnp.integer):
        raise ValueError(f"seeds has dtype {jnp.asarray(seeds).dtype}; expected uint32 seeds")
    seeds = jnp.zeros((2,), jnp.uint32) if seeds is None else jnp.asarray(seeds, jnp.uint32)
    if seeds.shape != (2,):
        raise ValueError(f"seeds has shape {seeds.shape}; expected [2] (seed_u, seed_v)")
    interpret = default_interpret() if interpret is None else bool(interpret)
    eps = jnp.reshape(jnp.asarray(eps, jnp.float32), (1,))
    cfg = _Static(int(bits), int(group_size), spec, block_sizes, interpret)
    return _fused(x, codes, scales, zeros, mult, seeds, eps, cfg)


def quantize(
    w: jax.Array, *, bits: int, group_size: int, symmetric: bool = False
) -> QuantizedWeight:
    """Group-wise quantization of a ``[K, N]`` weight along ``K`` into packed codes.

    Asymmetric (default): ``s = (max - min) / (2^b - 1)``, ``z = round(-min / s)`` per group and
    column (range widened to contain 0). Symmetric: ``s = max|w| / max(2^{b-1} - 1, 1)``,
    ``z = 2^{b-1}``. ``W ~ s (q - z)`` with ``|W - s (q - z)| <= s / 2`` inside the range.

    Args:
      w: ``[K, N]`` weight, input dimension first.
      bits: 2, 4 or 8.
      group_size: rows of ``K`` per scale; divides ``K`` and is a multiple of ``8 / bits``.
      symmetric: symmetric or asymmetric grid.

    Returns:
      :class:`QuantizedWeight` ``(codes, scales, zeros)`` in this module's layout.

    Raises:
      ValueError: naming the argument, for a wrong shape, dtype or ``group_size``, and for a
        concrete ``w`` holding NaN or inf (under ``jit`` values are not inspected: a NaN in a
        group makes that group's scale and codes NaN/garbage).
    """
    if bits not in BITS:
        raise ValueError(f"bits={bits}; expected one of {BITS}")
    if jnp.ndim(w) != 2:
        raise ValueError(f"w has shape {jnp.shape(w)}; expected a [K, N] matrix")
    if not jnp.issubdtype(jnp.asarray(w).dtype, jnp.floating):
        raise ValueError(f"w has dtype {jnp.asarray(w).dtype}; expected a float dtype")
    if not isinstance(w, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(w))):
        bad = int(np.size(w) - np.count_nonzero(np.isfinite(np.asarray(w))))
        raise ValueError(f"w of shape {jnp.shape(w)} holds {bad} non-finite value(s) (NaN or inf)")
    k_in, n = jnp.shape(w)
    if (
        not isinstance(group_size, int | np.integer)
        or group_size < 1
        or k_in % group_size
        or group_size % (8 // bits)
    ):
        raise ValueError(
            f"group_size={group_size} must divide the input dimension K={k_in} of w and be a "
            f"multiple of {8 // bits} ({bits}-bit packing)"
        )
    w = jnp.asarray(w, jnp.float32)
    groups = w.reshape(k_in // group_size, group_size, n)
    qmax = 2**bits - 1
    tiny = jnp.float32(1e-8)
    if symmetric:
        absmax = jnp.max(jnp.abs(groups), axis=1)
        scales = jnp.maximum(absmax / max(2 ** (bits - 1) - 1, 1), tiny)
        zeros = jnp.full_like(scales, 2 ** (bits - 1))
    else:
        lo = jnp.minimum(jnp.min(groups, axis=1), 0.0)
        hi = jnp.maximum(jnp.max(groups, axis=1), 0.0)
        scales = jnp.maximum((hi - lo) / qmax, tiny)
        zeros = jnp.clip(jnp.round(-lo / scales), 0, qmax)
    q = jnp.round(groups / scales[:, None, :]) + zeros[:, None, :]
    codes = jnp.clip(q, 0, qmax).astype(jnp.int32).reshape(k_in, n)
    return QuantizedWeight(pack_codes(codes, bits), scales, zeros)


class QuantizedWeight(NamedTuple):
    """Output of :func:`quantize`: ``codes [K b / 8, N]`` int8, ``scales``/``zeros [K / g, N]``."""

    codes: jax.Array
    scales: jax.Array
    zeros: jax.Array


__all__ = [
    "BITS",
    "NO_PERTURBATION",
    "BlockSizes",
    "LowRankSpec",
    "QuantizedWeight",
    "check_quant_shapes",
    "check_spec",
    "lowrank_factors",
    "pack_codes",
    "perturbed_quant_matmul",
    "perturbed_quant_matmul_kernel",
    "perturbed_quant_matmul_reference",
    "perturbed_scales_reference",
    "quantize",
    "unpack_codes",
]
