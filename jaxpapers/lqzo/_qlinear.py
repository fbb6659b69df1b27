"""A quantized linear layer (dequantized on the fly) and in-place conversion of a flax.nnx model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jaxpapers_kernels.quant_matmul import perturbed_quant_matmul

from jaxpapers.lqzo._quantize import QuantizedTensor, check_quant_args, dequantize, quantize

_quantize_jit = jax.jit(quantize, static_argnames=("bits", "group_size", "symmetric"))


class QuantScale(nnx.Param):
    """The per-group scales of a :class:`QuantizedLinear`: the only trainable state of QZO/LQZO.

    Filter them with ``nnx.split(model, QuantScale, ...)``.
    """


class QuantCodes(nnx.Variable):
    """Packed integer codes and zero points of a :class:`QuantizedLinear` (frozen)."""


class QuantizedLinear(nnx.Module):
    """``y = x @ dequant(codes, scales, zeros) + b`` with the weight dequantized on the fly.

    The weight exists only inside the forward (per layer, freed after use); with
    ``use_kernel=True`` the Pallas kernel dequantizes tile by tile and never forms it.
    """

    def __init__(
        self, qt: QuantizedTensor, bias: jax.Array | None = None, *, use_kernel: bool = False
    ):
        self.codes = QuantCodes(qt.codes)
        self.zeros = QuantCodes(qt.zeros)
        self.scales = QuantScale(qt.scales)
        self.bias = nnx.Param(bias) if bias is not None else None
        self.bits = qt.bits
        self.group_size = qt.group_size
        self.use_kernel = use_kernel

    @property
    def tensor(self) -> QuantizedTensor:
        return QuantizedTensor(
            self.codes[...], self.scales[...], self.zeros[...], self.bits, self.group_size
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        k_in, n = self.tensor.shape
        if x.shape[-1] != k_in:
            raise ValueError(f"x has shape {x.shape}; expected last dimension {k_in}")
        lead = x.shape[:-1]
        x2 = x.reshape(-1, k_in)
        if self.use_kernel:
            y = perturbed_quant_matmul(
                x2,
                self.codes[...],
                self.scales[...],
                self.zeros[...],
                bits=self.bits,
                group_size=self.group_size,
            )
        else:
            # Make the unpacking and dequantization depend on this layer's input (x * 0 is not
            # folded for floats). Otherwise XLA hoists every layer's unpacked codes to the start
            # of the program (or out of a loop, or shares them between the two ZO passes) and
            # keeps all layers' weight-sized buffers alive at once: measured 11 MB -> 54 MB of
            # temporaries for a MiniLM INT4 ZO step.
            tie = (x2[0, 0] * 0).astype(jnp.int8)
            qt = self.tensor
            qt = QuantizedTensor(qt.codes + tie, qt.scales, qt.zeros, qt.bits, qt.group_size)
            y = x2 @ dequantize(qt).astype(x.dtype)
        if self.bias is not None:
            y = y + self.bias[...][None, :]
        return y.reshape(*lead, n)


def quantize_linears(
    model: nnx.Module,
    *,
    bits: int,
    group_size: int,
    symmetric: bool = False,
    where: Callable[[tuple[Any, ...], nnx.Linear], bool] | None = None,
    use_kernel: bool = False,
) -> nnx.Module:
    """Replace (in place) every ``nnx.Linear`` of ``model`` selected by ``where`` by a
    :class:`QuantizedLinear` holding its group-wise quantized kernel; biases stay float.

    Args:
      model: a flax.nnx model (attention projections and MLPs are ``nnx.Linear``).
      bits, group_size, symmetric: as in :func:`jaxpapers.lqzo.quantize`.
      where: ``where(path, linear) -> bool`` (default: all); path as in ``nnx.iter_modules``.
      use_kernel: forward through the Pallas kernel instead of jnp dequantization.

    Returns:
      ``model`` (mutated).
    """
    targets = [
        (path, m)
        for path, m in nnx.iter_modules(model)
        if isinstance(m, nnx.Linear) and (where is None or where(path, m))
    ]
    for _, lin in targets:
        check_quant_args(tuple(lin.kernel.shape), bits, group_size)
    for path, lin in targets:
        parent: Any = model
        for p in path[:-1]:
            parent = parent[p] if isinstance(p, int) else getattr(parent, p)
        bias = lin.bias[...] if lin.bias is not None else None
        new = QuantizedLinear(
            _quantize_jit(lin.kernel[...], bits=bits, group_size=group_size, symmetric=symmetric),
            None if bias is None else jnp.asarray(bias),
            use_kernel=use_kernel,
        )
        if isinstance(path[-1], int):
            parent[path[-1]] = new
        else:
            setattr(parent, path[-1], new)
    return model


__all__ = ["QuantCodes", "QuantScale", "QuantizedLinear", "quantize_linears"]
