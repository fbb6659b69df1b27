"""Pallas kernel: a dense matrix of Rademacher / binary-aggregated Gaussian (BAG) perturbations.

Entry ``(i, j)`` of an ``m x n`` matrix under ``seed`` is ``bag(counter_hash(seed, i * n + j), k)``
(see :mod:`jaxpapers_kernels.counter_hash`): a pure function of ``(seed, position)``, so the two
perturbed forward passes and the update of a zeroth-order step regenerate the same ``z`` and never
store it. Integer ops only: no Pallas TPU PRNG primitive, so it runs in interpret mode on CPU.

LQZO's jnp path draws its low-rank factors ``U`` (``m x r``) and ``V`` (``n x r``) with
:func:`counter_noise_reference` (the same values as this kernel); its fused path never forms them:
:func:`jaxpapers_kernels.perturbed_quant_matmul` regenerates the entries it needs inside each tile.
This kernel is for callers that want a dense matrix of such perturbations on an accelerator.

Examples:
    >>> import jax.numpy as jnp
    >>> z = counter_noise(jnp.uint32(1), (3, 5), k=1, interpret=True)
    >>> ref = counter_noise_reference(jnp.uint32(1), (3, 5))
    >>> bool(jnp.all(jnp.abs(z) == 1.0)), bool(jnp.all(z == ref))
    (True, True)
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jaxpapers_kernels._backend import default_interpret
from jaxpapers_kernels.counter_hash import bag_from_bits, counter_hash


def _check(seed: jax.Array, shape: tuple[int, int], k: int) -> None:
    if len(shape) != 2 or min(shape) < 1:
        raise ValueError(f"shape={shape}; expected two positive dimensions (m, n)")
    if not isinstance(k, int) or not 1 <= k <= 32:
        raise ValueError(f"k={k!r}; expected an integer 1 <= k <= 32 aggregated Rademacher signs")
    if jnp.shape(seed) != ():
        raise ValueError(f"seed has shape {jnp.shape(seed)}; expected a scalar uint32 seed")
    if not jnp.issubdtype(jnp.asarray(seed).dtype, jnp.integer):
        raise ValueError(f"seed has dtype {jnp.asarray(seed).dtype}; expected a uint32 seed")


def counter_noise_reference(
    seed: jax.Array, shape: tuple[int, int], *, k: int = 1, dtype: jnp.dtype = jnp.float32
) -> jax.Array:
    """jnp reference of :func:`counter_noise`: ``[m, n]`` BAG values at ``(seed, i n + j)``."""
    _check(seed, shape, k)
    m, n = shape
    index = (
        jnp.arange(m, dtype=jnp.uint32)[:, None] * jnp.uint32(n)
        + jnp.arange(n, dtype=jnp.uint32)[None, :]
    )
    return bag_from_bits(counter_hash(jnp.asarray(seed, jnp.uint32), index), k, dtype)


def counter_noise_kernel(seed_ref, out_ref, *, n: int, k: int, block_m: int, block_n: int):
    """Fill one ``[block_m, block_n]`` tile with BAG values of its global positions."""
    i, j = pl.program_id(0), pl.program_id(1)
    rows = (i * block_m + jax.lax.broadcasted_iota(jnp.int32, (block_m, block_n), 0)).astype(
        jnp.uint32
    )
    cols = (j * block_n + jax.lax.broadcasted_iota(jnp.int32, (block_m, block_n), 1)).astype(
        jnp.uint32
    )
    bits = counter_hash(seed_ref[0], rows * jnp.uint32(n) + cols)
    out_ref[...] = bag_from_bits(bits, k, out_ref.dtype)


@functools.partial(
    jax.jit, static_argnames=("shape", "k", "dtype", "block_m", "block_n", "interpret")
)
def _counter_noise(seed, *, shape, k, dtype, block_m, block_n, interpret):
    m, n = shape
    grid = (pl.cdiv(m, block_m), pl.cdiv(n, block_n))
    out = pl.pallas_call(
        functools.partial(counter_noise_kernel, n=n, k=k, block_m=block_m, block_n=block_n),
        out_shape=jax.ShapeDtypeStruct((grid[0] * block_m, grid[1] * block_n), dtype),
        grid=grid,
        in_specs=[pl.BlockSpec((1,), lambda i, j: (0,))],
        out_specs=pl.BlockSpec((block_m, block_n), lambda i, j: (i, j)),
        interpret=interpret,
        name="counter_noise",
    )(jnp.reshape(seed, (1,)).astype(jnp.uint32))
    return out[:m, :n]


def counter_noise(
    seed: jax.Array,
    shape: tuple[int, int],
    *,
    k: int = 1,
    dtype: jnp.dtype = jnp.float32,
    block_m: int = 32,
    block_n: int = 128,
    interpret: bool | None = None,
) -> jax.Array:
    """A ``[m, n]`` matrix of BAG perturbations generated inside a Pallas kernel.

    Ragged edges are handled by computing whole tiles over a padded grid and slicing: positions
    use the true ``n``, so the result equals :func:`counter_noise_reference` for any ``m, n``.

    Args:
      seed: scalar ``uint32`` stream seed.
      shape: ``(m, n)``.
      k: aggregated Rademacher signs per entry (1: Rademacher; larger: closer to Gaussian).
      dtype: float dtype of the result.
      block_m, block_n: tile sizes (static).
      interpret: Pallas interpret mode (default: on when no GPU/TPU is present).

    Returns:
      ``[m, n]`` array; each entry has mean 0, variance 1, ``|z| <= sqrt(k)``.
    """
    _check(seed, tuple(shape), k)
    if block_m < 1 or block_n < 1:
        raise ValueError(f"block_m={block_m}, block_n={block_n}; expected positive tile sizes")
    interpret = default_interpret() if interpret is None else interpret
    return _counter_noise(
        jnp.asarray(seed, jnp.uint32),
        shape=tuple(int(s) for s in shape),
        k=int(k),
        dtype=jnp.dtype(dtype),
        block_m=int(block_m),
        block_n=int(block_n),
        interpret=bool(interpret),
    )


__all__ = ["counter_noise", "counter_noise_kernel", "counter_noise_reference"]
