"""Pallas kernel: ``x @ dequant(codes, scales + eps Z)``, the perturbation ``Z`` made in-kernel.

Quantized weight layout (group-wise along the input dimension ``K``, ``G = K / group_size``):

* ``codes``: ``[K * bits / 8, N]`` int8; ``p = 8 / bits`` consecutive rows ``k = i p + t`` of
  unsigned codes in ``[0, 2^bits)`` are packed into byte ``i`` at bit offset ``bits * t``.
* ``scales``, ``zeros``: ``[G, N]`` float; the weight is
  ``W[k, n] = scales[k // group_size, n] * (code[k, n] - zeros[k // group_size, n])``.

LQZO perturbs the scales with a low-rank matrix in an *isotropic* layout: the ``G N`` scale entries,
flattened row-major, are viewed as an ``iso_shape = (m', n')`` matrix (``m' n' = G N``, near
square) and perturbed by ``Z' = U V^T / sqrt(r)``; entry ``(g, n)`` of ``Z`` is entry
``(f // n', f % n')`` of ``Z'`` with ``f = g N + n``. ``U[a, c]`` and ``V[b, c]`` are
binary-aggregated Gaussian values of ``(seed_u, a r + c)`` and ``(seed_v, b r + c)`` from the
counter hash, so the kernel computes every needed factor entry from integer ops and never reads or
writes ``U``, ``V``, ``Z``, the perturbed scales or the dequantized weight in memory: per output
tile it holds one ``[K, block_n]`` weight tile.

Dequantization is linear in the scales, so the ``-eps`` twin of a two-point estimate is the same
call with ``-eps``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jaxpapers_kernels import default_interpret
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


def pack_codes(codes: jax.Array, bits: int) -> jax.Array:
    """Pack unsigned ``[K, N]`` codes in ``[0, 2^bits)`` into ``[K bits / 8, N]`` int8 (along K)."""
    if bits not in BITS:
        raise ValueError(f"bits={bits}; expected one of {BITS}")
    per = 8 // bits
    k_in, n = codes.shape
    if k_in % per:
        raise ValueError(f"codes rows {k_in=} must be a multiple of {per=} codes per byte")
    c = codes.astype(jnp.uint32).reshape(k_in // per, per, n)
    shifts = (jnp.arange(per, dtype=jnp.uint32) * jnp.uint32(bits))[None, :, None]
    packed = jnp.sum(c << shifts, axis=1, dtype=jnp.uint32)
    return jax.lax.bitcast_convert_type(packed.astype(jnp.uint8), jnp.int8)


def unpack_codes(packed: jax.Array, bits: int) -> jax.Array:
    """Inverse of :func:`pack_codes`: ``[K bits / 8, N]`` int8 to ``[K, N]`` int32 codes."""
    per = 8 // bits
    u = packed.astype(jnp.int32) & 0xFF
    parts = [(u >> (bits * t)) & ((1 << bits) - 1) for t in range(per)]
    rows, n = packed.shape
    return jnp.stack(parts, axis=1).reshape(rows * per, n)


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


def _dequantize(codes, scales, zeros, bits, group_size):
    q = unpack_codes(codes, bits).astype(scales.dtype)
    k_in = q.shape[0]
    n = q.shape[1]
    g = k_in // group_size
    s = jnp.broadcast_to(scales[:, None, :], (g, group_size, n)).reshape(k_in, n)
    z = jnp.broadcast_to(zeros[:, None, :], (g, group_size, n)).reshape(k_in, n)
    return s * (q - z)


def perturbed_scales_reference(
    scales: jax.Array, seeds: jax.Array, eps: jax.Array, spec: LowRankSpec
) -> jax.Array:
    """``scales + eps * Z`` (materialised; the reference path)."""
    if spec.rank == 0:
        return scales
    g, n = scales.shape
    rows = jax.lax.broadcasted_iota(jnp.int32, (g, n), 0)
    cols = jax.lax.broadcasted_iota(jnp.int32, (g, n), 1)
    z = lowrank_scale_noise(seeds, rows, cols, n, spec)
    return scales + jnp.asarray(eps, scales.dtype).reshape(()) * z.astype(scales.dtype)


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
) -> jax.Array:
    """Plain-jnp reference: materialise ``scales + eps Z``, dequantize, multiply. ``[M, N]``."""
    s = perturbed_scales_reference(scales, seeds, eps, spec)
    w = _dequantize(codes, s, zeros, bits, group_size)
    return jnp.dot(x, w.astype(x.dtype), preferred_element_type=jnp.float32).astype(x.dtype)


def perturbed_quant_matmul_kernel(
    x_ref,
    codes_ref,
    scales_ref,
    zeros_ref,
    seeds_ref,
    eps_ref,
    o_ref,
    *,
    bits: int,
    group_size: int,
    n_total: int,
    spec: LowRankSpec,
    block_n: int,
):
    """One ``[block_m, block_n]`` output tile: dequantize a ``[K, block_n]`` weight tile in
    registers (scales perturbed in place from the hash) and multiply."""
    j = pl.program_id(1)
    scales = scales_ref[...].astype(jnp.float32)
    if spec.rank:
        g = scales.shape[0]
        rows = jax.lax.broadcasted_iota(jnp.int32, (g, block_n), 0)
        cols = j * block_n + jax.lax.broadcasted_iota(jnp.int32, (g, block_n), 1)
        z = lowrank_scale_noise(seeds_ref[...], rows, cols, n_total, spec)
        scales = scales + eps_ref[0] * z
    w = _dequantize(codes_ref[...], scales, zeros_ref[...].astype(jnp.float32), bits, group_size)
    x = x_ref[...]
    o_ref[...] = jnp.dot(x, w.astype(x.dtype), preferred_element_type=jnp.float32).astype(
        o_ref.dtype
    )


def _pallas_forward(x, codes, scales, zeros, seeds, eps, cfg):
    bits, group_size, spec, block_m, block_n, interpret = cfg
    m, k_in = x.shape
    n = scales.shape[1]
    bm = min(block_m, pl.cdiv(m, 8) * 8)
    gm, gn = pl.cdiv(m, bm), pl.cdiv(n, block_n)
    pad_m, pad_n = gm * bm - m, gn * block_n - n
    xp = jnp.pad(x, ((0, pad_m), (0, 0)))
    cp = jnp.pad(codes, ((0, 0), (0, pad_n)))
    sp = jnp.pad(scales, ((0, 0), (0, pad_n)))
    zp = jnp.pad(zeros, ((0, 0), (0, pad_n)))
    g = scales.shape[0]
    kernel = functools.partial(
        perturbed_quant_matmul_kernel,
        bits=bits,
        group_size=group_size,
        n_total=n,
        spec=spec,
        block_n=block_n,
    )
    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((gm * bm, gn * block_n), x.dtype),
        grid=(gm, gn),
        in_specs=[
            pl.BlockSpec((bm, k_in), lambda i, j: (i, 0)),
            pl.BlockSpec((codes.shape[0], block_n), lambda i, j: (0, j)),
            pl.BlockSpec((g, block_n), lambda i, j: (0, j)),
            pl.BlockSpec((g, block_n), lambda i, j: (0, j)),
            pl.BlockSpec((2,), lambda i, j: (0,)),
            pl.BlockSpec((1,), lambda i, j: (0,)),
        ],
        out_specs=pl.BlockSpec((bm, block_n), lambda i, j: (i, j)),
        interpret=interpret,
        name="perturbed_quant_matmul",
    )(xp, cp, sp, zp, seeds, eps)
    return out[:m, :n]


@functools.partial(jax.custom_vjp, nondiff_argnums=(6,))
def _qmm(x, codes, scales, zeros, seeds, eps, cfg):
    return _pallas_forward(x, codes, scales, zeros, seeds, eps, cfg)


def _qmm_fwd(x, codes, scales, zeros, seeds, eps, cfg):
    return _pallas_forward(x, codes, scales, zeros, seeds, eps, cfg), (
        x,
        codes,
        scales,
        zeros,
        seeds,
        eps,
    )


def _qmm_bwd(cfg, res, dy):
    # Backward in plain jnp: dx = dy W^T, dscales[g, n] = sum_{k in g} (x^T dy)[k, n] (q - zero).
    x, codes, scales, zeros, seeds, eps = res
    bits, group_size, spec = cfg[0], cfg[1], cfg[2]
    s = perturbed_scales_reference(scales.astype(jnp.float32), seeds, eps[0], spec)
    w = _dequantize(codes, s, zeros.astype(jnp.float32), bits, group_size)
    dyf = dy.astype(jnp.float32)
    dx = jnp.dot(dyf, w.T).astype(x.dtype)
    dw = jnp.dot(x.astype(jnp.float32).T, dyf)
    q = unpack_codes(codes, bits).astype(jnp.float32)
    g, n = scales.shape
    zf = jnp.broadcast_to(zeros[:, None, :], (g, group_size, n)).reshape(q.shape)
    ds = jnp.sum((dw * (q - zf)).reshape(g, group_size, n), axis=1).astype(scales.dtype)
    return dx, None, ds, None, None, None


_qmm.defvjp(_qmm_fwd, _qmm_bwd)


def check_quant_shapes(
    x_shape: tuple[int, ...],
    codes: jax.Array,
    scales: jax.Array,
    zeros: jax.Array,
    *,
    bits: int,
    group_size: int,
) -> None:
    """``ValueError`` naming the argument when shapes/dtypes of a quantized matmul disagree."""
    if bits not in BITS:
        raise ValueError(f"bits={bits}; expected one of {BITS}")
    if len(x_shape) != 2:
        raise ValueError(f"x has shape {x_shape}; expected [M, K]")
    k_in = x_shape[1]
    if group_size < 1 or k_in % group_size:
        raise ValueError(f"group_size={group_size} must divide the input dimension K={k_in}")
    if scales.ndim != 2 or scales.shape[0] != k_in // group_size:
        raise ValueError(
            f"scales has shape {scales.shape}; expected [K / group_size, N] = "
            f"[{k_in // group_size}, N]"
        )
    n = scales.shape[1]
    if zeros.shape != scales.shape:
        raise ValueError(
            f"zeros has shape {zeros.shape}; expected the scales' shape {scales.shape}"
        )
    want = (k_in * bits // 8, n)
    if codes.shape != want or codes.dtype != jnp.int8:
        raise ValueError(
            f"codes has shape {codes.shape} dtype {codes.dtype}; expected int8 {want} "
            f"(K={k_in} {bits}-bit codes packed {8 // bits} per byte, N={n})"
        )


def perturbed_quant_matmul(
    x: jax.Array,
    codes: jax.Array,
    scales: jax.Array,
    zeros: jax.Array,
    seeds: jax.Array | None = None,
    eps: jax.Array | float = 0.0,
    *,
    bits: int,
    group_size: int,
    spec: LowRankSpec = NO_PERTURBATION,
    block_m: int = 64,
    block_n: int = 128,
    interpret: bool | None = None,
) -> jax.Array:
    """Fused ``x @ dequant(codes, scales + eps * Z)``; ``Z`` generated in-kernel from ``seeds``.

    Args:
      x: ``[M, K]`` activations.
      codes: ``[K bits / 8, N]`` int8 packed codes (see module docstring).
      scales, zeros: ``[K / group_size, N]`` per-group scales and zero points.
      seeds: ``[2]`` uint32 ``(seed_u, seed_v)`` (ignored when ``spec.rank == 0``).
      eps: perturbation size (scalar; negative for the twin pass). Not differentiated.
      bits: 2, 4 or 8. group_size: codes per scale along ``K``.
      spec: low-rank perturbation (:class:`LowRankSpec`); rank 0 = plain quantized matmul.
      block_m, block_n: output tile sizes (static); ``M`` and ``N`` need not be multiples.
      interpret: Pallas interpret mode (default: on when no GPU/TPU is present).

    Returns:
      ``[M, N]`` in ``x.dtype``. Differentiable in ``x`` and ``scales`` (custom VJP).
    """
    check_quant_shapes(tuple(x.shape), codes, scales, zeros, bits=bits, group_size=group_size)
    if spec.rank:
        g, n = scales.shape
        if spec.iso_shape[0] * spec.iso_shape[1] != g * n:
            raise ValueError(f"spec.iso_shape={spec.iso_shape} must hold the {g}x{n} scales")
        if spec.rank > min(spec.iso_shape):
            raise ValueError(f"rank={spec.rank} exceeds min(iso_shape)={min(spec.iso_shape)}")
    if block_m < 1 or block_n < 1:
        raise ValueError(f"block_m={block_m}, block_n={block_n}; expected positive tile sizes")
    seeds = jnp.zeros((2,), jnp.uint32) if seeds is None else jnp.asarray(seeds, jnp.uint32)
    if seeds.shape != (2,):
        raise ValueError(f"seeds has shape {seeds.shape}; expected [2] (seed_u, seed_v)")
    interpret = default_interpret() if interpret is None else bool(interpret)
    eps = jnp.reshape(jnp.asarray(eps, jnp.float32), (1,))
    cfg = (int(bits), int(group_size), spec, int(block_m), int(block_n), interpret)
    return _qmm_jit(x, codes, scales, zeros, seeds, eps, cfg)


@functools.partial(jax.jit, static_argnums=(6,))
def _qmm_jit(x, codes, scales, zeros, seeds, eps, cfg):
    return _qmm(x, codes, scales, zeros, seeds, eps, cfg)


__all__ = [
    "BITS",
    "NO_PERTURBATION",
    "LowRankSpec",
    "check_quant_shapes",
    "pack_codes",
    "perturbed_quant_matmul",
    "perturbed_quant_matmul_kernel",
    "perturbed_quant_matmul_reference",
    "perturbed_scales_reference",
    "unpack_codes",
]
