"""jaxpapers_kernels: Pallas kernels of jaxpapers. Imports only jax.

Each kernel module holds a ``*_kernel`` on refs, a jitted wrapper with static block sizes and an
``interpret`` switch (interpret mode by default when no GPU/TPU is present), and a plain-jnp
``*_reference``.

* :func:`perturbed_quant_matmul`: ``x @ dequant(codes, scales + eps * mult * Z)`` with a
  low-rank counter-hash perturbation ``Z`` generated inside the kernel (zeroth-order fine-tuning
  of quantized models); :func:`quantize`, :func:`pack_codes` / :func:`unpack_codes` build its
  packed-weight layout.
* :func:`counter_noise`: a dense matrix of Rademacher / binary-aggregated Gaussian values of
  ``(seed, position)``; :func:`counter_hash` is the integer hash behind both, and
  :func:`gaussian_from_bits` turns its words into standard Gaussian values (dense MeZO ``z``).

Examples:
    >>> import jax.numpy as jnp
    >>> from jaxpapers_kernels import counter_noise
    >>> z = counter_noise(jnp.uint32(7), (4, 6), k=4)
    >>> z.shape, bool(jnp.all(jnp.abs(z) <= 2.0))
    ((4, 6), True)
"""

from jaxpapers_kernels._backend import default_interpret, has_accelerator
from jaxpapers_kernels.counter_hash import bag_from_bits, counter_hash, gaussian_from_bits
from jaxpapers_kernels.counter_noise import counter_noise, counter_noise_reference
from jaxpapers_kernels.quant_matmul import (
    NO_PERTURBATION,
    BlockSizes,
    LowRankSpec,
    QuantizedWeight,
    pack_codes,
    perturbed_quant_matmul,
    perturbed_quant_matmul_reference,
    quantize,
    unpack_codes,
)

__all__ = [
    "NO_PERTURBATION",
    "BlockSizes",
    "LowRankSpec",
    "QuantizedWeight",
    "bag_from_bits",
    "counter_hash",
    "counter_noise",
    "counter_noise_reference",
    "default_interpret",
    "gaussian_from_bits",
    "has_accelerator",
    "pack_codes",
    "perturbed_quant_matmul",
    "perturbed_quant_matmul_reference",
    "quantize",
    "unpack_codes",
]
