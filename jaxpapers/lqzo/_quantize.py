"""Group-wise weight quantization to INT8 / INT4 / INT2 with codes packed into int8.

A ``[K, N]`` weight (flax ``Dense``/``nnx.Linear`` layout: input dimension first) is split along
``K`` into ``G = K / g`` groups of ``g`` rows; each group and output column has a scale ``s`` and a
zero point ``z`` and

.. math:: \\hat W_{kn} = s_{\\lfloor k/g \\rfloor n} \\, (q_{kn} - z_{\\lfloor k/g \\rfloor n}),
   \\qquad q_{kn} \\in \\{0, \\dots, 2^b - 1\\}.

Asymmetric (default): ``s = (max - min) / (2^b - 1)``, ``z = round(-min / s)``.
Symmetric: ``s = max|w| / (2^{b-1} - 1)`` (``max|w|`` for INT2) and ``z = 2^{b-1}`` fixed.
Codes are packed ``8 / b`` per byte along ``K`` (:func:`jaxpapers_kernels.quant_matmul.pack_codes`).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxpapers_kernels.quant_matmul import BITS, check_quant_shapes, unpack_codes
from jaxpapers_kernels.quant_matmul import quantize as quantize_packed
from jaxtyping import Array, Float, Int8


class QuantizedTensor(eqx.Module):
    """A group-wise quantized ``[K, N]`` weight.

    Attributes:
      codes: ``[K b / 8, N]`` int8, packed unsigned codes.
      scales: ``[K / g, N]`` float32 per-group scales (what QZO and LQZO fine-tune).
      zeros: ``[K / g, N]`` float32 per-group zero points.
      bits: ``b`` in {2, 4, 8} (static).
      group_size: ``g`` (static).
    """

    codes: Int8[Array, "kp n"]
    scales: Float[Array, "groups n"]
    zeros: Float[Array, "groups n"]
    bits: int = eqx.field(static=True)
    group_size: int = eqx.field(static=True)

    def __check_init__(self) -> None:
        if self.bits not in BITS:
            raise ValueError(f"bits={self.bits}; expected one of {BITS}")
        if self.group_size < 1:
            raise ValueError(f"group_size={self.group_size}; expected a positive group size")

    @property
    def shape(self) -> tuple[int, int]:
        """``(K, N)`` of the dequantized weight."""
        return (self.scales.shape[0] * self.group_size, self.scales.shape[1])


def check_quant_args(shape: tuple[int, ...], bits: int, group_size: int) -> None:
    """``ValueError`` naming the argument for a bad bit width, group size or weight shape."""
    if bits not in BITS:
        raise ValueError(f"bits={bits}; expected one of {BITS}")
    if len(shape) != 2:
        raise ValueError(f"w has shape {shape}; expected a [K, N] matrix")
    if group_size < 1 or shape[0] % group_size:
        raise ValueError(
            f"group_size={group_size} must divide the input dimension K={shape[0]} of w {shape}"
        )
    per = 8 // bits
    if group_size % per:
        raise ValueError(
            f"group_size={group_size} must be a multiple of {per} ({bits}-bit packing)"
        )


def quantize(
    w: Float[Array, "k n"], *, bits: int, group_size: int, symmetric: bool = False
) -> QuantizedTensor:
    """Quantize a ``[K, N]`` weight group-wise along ``K``.

    Args:
      w: weight, input dimension first.
      bits: 2, 4 or 8.
      group_size: rows of ``K`` per scale; must divide ``K``.
      symmetric: symmetric (fixed zero point ``2^{b-1}``) or asymmetric (min/max) grid.

    Returns:
      A :class:`QuantizedTensor`; :func:`dequantize` gives ``W_hat`` with
      ``|W - W_hat| <= s / 2`` inside each group's range.
    """
    check_quant_args(tuple(jnp.shape(w)), bits, group_size)
    codes, scales, zeros = quantize_packed(w, bits=bits, group_size=group_size, symmetric=symmetric)
    return QuantizedTensor(codes, scales, zeros, bits, group_size)


def dequantize(qt: QuantizedTensor, scales: Float[Array, "groups n"] | None = None) -> jax.Array:
    """``[K, N]`` float32 weight ``s[k // g] (q - z[k // g])`` (optionally with other scales)."""
    scales = qt.scales if scales is None else scales
    k_in, n = qt.shape
    check_quant_shapes(
        (1, k_in), qt.codes, scales, qt.zeros, bits=qt.bits, group_size=qt.group_size
    )
    g = qt.group_size
    q = unpack_codes(qt.codes, qt.bits).astype(jnp.float32).reshape(k_in // g, g, n)
    return (scales[:, None, :] * (q - qt.zeros[:, None, :])).reshape(k_in, n)


__all__ = ["QuantizedTensor", "check_quant_args", "dequantize", "quantize"]
