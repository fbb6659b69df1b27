"""Counter-based integer hash and the perturbation distributions LQZO draws from it.

Every function here uses only 32-bit unsigned integer ops (xor, shift, wrapping multiply, and, add),
so it runs the same inside a Pallas kernel on GPU, on TPU and in interpret mode on CPU, and in plain
jnp outside a kernel: a kernel and its reference regenerate bit-identical perturbations from
``(seed, position)`` without storing them.

The mixer is Wellons' ``lowbias32`` (two xor-shift-multiply rounds, a bijection of ``uint32``). A
value at flat position ``i`` under seed ``s`` is ``lowbias32(i * 0x9E3779B1 + lowbias32(s))``.

The binary-aggregated Gaussian (BAG) variable with ``k`` bits is

.. math:: z = \\frac{1}{\\sqrt{k}} \\sum_{i=1}^{k} \\sigma_i, \\qquad \\sigma_i \\in \\{\\pm 1\\}
   = \\frac{2\\,\\mathrm{popcount}(h \\,\\&\\, (2^k - 1)) - k}{\\sqrt{k}},

mean 0, variance 1, bounded by ``sqrt(k)``, fourth moment ``3 - 2/k`` (Gaussian: 3; Rademacher,
``k = 1``: 1). One 32-bit hash supplies all ``k <= 32`` signs, so the aggregation costs nothing
beyond a popcount.

A standard Gaussian value from one word (:func:`gaussian_from_bits`) uses the inverse error
function, as ``jax.random.normal`` does, on the top 24 bits: ``u = (2 (h >> 8) + 1) / 2^24 - 1``
is one of ``2^24`` equally likely odd multiples of ``2^-24`` in ``(-1, 1)`` (symmetric, never
``+-1``), and ``z = sqrt(2) erfinv(u)``, ``|z| <= 5.4``. Unlike ``jax.random`` (threefry, which
XLA:CPU lowers to a loop over whole-tensor counter arrays), it is elementwise in
``(seed, position)``, so XLA fuses it into the consumer and a dense ``z`` never has to exist.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

_GOLDEN = 0x9E3779B1
_M1 = 0x7FEB352D
_M2 = 0x846CA68B


def _u32(c: int) -> jax.Array:
    return jnp.uint32(c)


def lowbias32(x: jax.Array) -> jax.Array:
    """Wellons' lowbias32 integer mixer on ``uint32`` arrays (a bijection of 32-bit words)."""
    x = x.astype(jnp.uint32)
    x = x ^ (x >> _u32(16))
    x = x * _u32(_M1)
    x = x ^ (x >> _u32(15))
    x = x * _u32(_M2)
    return x ^ (x >> _u32(16))


def _check_integer(name: str, x: object) -> None:
    """``ValueError`` unless ``x`` has an integer dtype (a float seed would be cast silently)."""
    dtype = getattr(x, "dtype", None) or jnp.asarray(x).dtype
    if not jnp.issubdtype(dtype, jnp.integer):
        raise ValueError(f"{name} has dtype {dtype}; expected uint32 (an integer dtype)")


def counter_hash(seed: jax.Array, index: jax.Array) -> jax.Array:
    """32 random bits at flat position ``index`` of the stream named by ``seed`` (both uint32)."""
    _check_integer("seed", seed)
    _check_integer("index", index)
    base = lowbias32(jnp.asarray(seed, jnp.uint32))
    return lowbias32(jnp.asarray(index, jnp.uint32) * _u32(_GOLDEN) + base)


def popcount32(x: jax.Array) -> jax.Array:
    """Number of set bits of each ``uint32`` word (SWAR, integer ops only)."""
    x = x.astype(jnp.uint32)
    x = x - ((x >> _u32(1)) & _u32(0x55555555))
    x = (x & _u32(0x33333333)) + ((x >> _u32(2)) & _u32(0x33333333))
    x = (x + (x >> _u32(4))) & _u32(0x0F0F0F0F)
    return (x * _u32(0x01010101)) >> _u32(24)


def bag_from_bits(bits: jax.Array, k: int, dtype: jnp.dtype = jnp.float32) -> jax.Array:
    """Binary-aggregated Gaussian value ``(2 popcount(bits & (2^k - 1)) - k) / sqrt(k)``.

    Args:
      bits: ``uint32`` words from :func:`counter_hash`.
      k: number of aggregated Rademacher signs, ``1 <= k <= 32`` (``k = 1``: Rademacher).
      dtype: float dtype of the result.
    """
    _check_integer("bits", bits)
    if not isinstance(k, int) or not 1 <= k <= 32:
        raise ValueError(f"k={k!r}; expected an integer 1 <= k <= 32 aggregated signs")
    mask = 0xFFFFFFFF if k == 32 else (1 << k) - 1
    ones = popcount32(bits & _u32(mask)).astype(jnp.int32)
    return ((2 * ones - k).astype(dtype)) * jnp.asarray(1.0 / k**0.5, dtype)


def gaussian_from_bits(bits: jax.Array, dtype: jnp.dtype = jnp.float32) -> jax.Array:
    """Standard Gaussian value ``sqrt(2) erfinv((2 (bits >> 8) + 1) / 2^24 - 1)`` of each word.

    Args:
      bits: ``uint32`` words from :func:`counter_hash`.
      dtype: float dtype of the result (computed in float32).
    """
    _check_integer("bits", bits)
    top = (jnp.asarray(bits, jnp.uint32) >> _u32(8)).astype(jnp.int32)
    # 2 top - (2^24 - 1): an odd integer in [-(2^24 - 1), 2^24 - 1], exact in float32.
    u = (2 * top - (2**24 - 1)).astype(jnp.float32) * jnp.float32(2.0**-24)
    return (jnp.float32(2.0**0.5) * jax.lax.erf_inv(u)).astype(dtype)


__all__ = ["bag_from_bits", "counter_hash", "gaussian_from_bits", "lowbias32", "popcount32"]
