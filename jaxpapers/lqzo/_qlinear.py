"""A quantized linear layer (dequantized on the fly) and in-place conversion of a flax.nnx model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jaxpapers_kernels import has_accelerator, perturbed_quant_matmul

from jaxpapers.lqzo._perturbed_scales import PerturbedScales
from jaxpapers.lqzo._quantize import QuantizedTensor, check_quant_args, dequantize, quantize

KERNEL_MODES = ("auto", True, False, "interpret")

_quantize_jit = jax.jit(quantize, static_argnames=("bits", "group_size", "symmetric"))


class QuantScale(nnx.Param):
    """The per-group scales of a :class:`QuantizedLinear`: the only trainable state of QZO/LQZO.

    Filter them with ``nnx.split(model, QuantScale, ...)``.
    """


class QuantCodes(nnx.Variable):
    """Packed integer codes and zero points of a :class:`QuantizedLinear` (frozen)."""


class QuantizedLinear(nnx.Module):
    """``y = x @ dequant(codes, scales, zeros) + b`` with the weight dequantized on the fly.

    ``use_kernel`` picks the path: ``True`` the Pallas kernel (compiled on GPU/TPU, interpret
    mode elsewhere), ``"interpret"`` the kernel in interpret mode (tests), ``False`` the jnp
    reference, ``"auto"`` (default) the compiled kernel on GPU/TPU and the jnp reference on CPU.
    The kernel dequantizes tile by tile and, given lazy :class:`PerturbedScales` (fused ZO
    passes), regenerates the scale perturbation in-kernel: neither the float weight nor the
    perturbation is ever formed. The reference path forms the perturbed scales and this layer's
    float weight (freed after use). Both give the same values up to float rounding.
    """

    def __init__(
        self,
        qt: QuantizedTensor,
        bias: jax.Array | None = None,
        *,
        use_kernel: bool | str = "auto",
    ):
        if use_kernel not in KERNEL_MODES:
            raise ValueError(f"use_kernel={use_kernel!r}; expected one of {KERNEL_MODES}")
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

    def kernel_mode(self) -> bool | None:
        """``None`` for the jnp path, else the kernel's ``interpret`` flag."""
        if self.use_kernel == "interpret":
            return True
        if self.use_kernel is True:
            return not has_accelerator()
        if self.use_kernel == "auto" and has_accelerator():
            return False
        return None

    def __call__(self, x: jax.Array) -> jax.Array:
        s = self.scales.get_value()
        lazy = isinstance(s, PerturbedScales)
        base = s.base if lazy else s
        k_in, n = base.shape[0] * self.group_size, base.shape[1]
        if x.shape[-1] != k_in:
            raise ValueError(f"x has shape {x.shape}; expected last dimension {k_in}")
        lead = x.shape[:-1]
        x2 = x.reshape(-1, k_in)
        interpret = self.kernel_mode()
        if interpret is not None:
            codes, zeros = self.codes[...], self.zeros[...]
            kw = dict(bits=self.bits, group_size=self.group_size, interpret=interpret)
            if lazy:
                y = perturbed_quant_matmul(
                    x2, codes, base, zeros, s.seeds, s.eps, s.mult, spec=s.spec, **kw
                )
            else:
                y = perturbed_quant_matmul(x2, codes, base, zeros, **kw)
        else:
            # Make the unpacking and dequantization depend on this layer's input (x * 0 is not
            # folded for floats). Otherwise XLA hoists every layer's unpacked codes to the start
            # of the program (or out of a loop, or shares them between the two ZO passes) and
            # keeps all layers' weight-sized buffers alive at once: measured 11 MB -> 54 MB of
            # temporaries for a MiniLM INT4 ZO step.
            tie = (x2[0, 0] * 0).astype(jnp.int8)
            scales = s.materialize() if lazy else s
            qt = QuantizedTensor(
                self.codes[...] + tie, scales, self.zeros[...], self.bits, self.group_size
            )
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
    use_kernel: bool | str = "auto",
) -> nnx.Module:
    """Replace (in place) every ``nnx.Linear`` of ``model`` selected by ``where`` by a
    :class:`QuantizedLinear` holding its group-wise quantized kernel; biases stay float.

    Args:
      model: a flax.nnx model (attention projections and MLPs are ``nnx.Linear``).
      bits, group_size, symmetric: as in :func:`jaxpapers.lqzo.quantize`.
      where: ``where(path, linear) -> bool`` (default: all); path as in ``nnx.iter_modules``.
      use_kernel: ``"auto"`` (compiled Pallas on GPU/TPU, jnp on CPU), ``True``,
        ``"interpret"`` or ``False`` (see :class:`QuantizedLinear`).

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
