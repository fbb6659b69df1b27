"""Lazily perturbed scales: ``base + eps * mult * Z`` carried as seeds, never formed.

In a fused zeroth-order step (:func:`jaxpapers.lqzo.zo_estimate` with ``fused=True``) the value
function receives, in place of each scale leaf, a :class:`PerturbedScales`: the leaf, the step's
per-leaf seeds, the signed ``eps`` and the static low-rank spec. Affine arithmetic with arrays
stays lazy (``1 + p``, ``p * s0``: the relative reparametrisation ``s0 (1 + delta)`` becomes
``base = s0 (1 + delta)``, ``mult = s0``), and a :class:`~jaxpapers.lqzo.QuantizedLinear` hands
the whole description to the Pallas kernel, which regenerates ``Z`` from the counter hash tile by
tile. Any other use (``jnp`` functions, ``p - a``) materialises it through ``__jax_array__``
(the reference path).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxpapers_kernels.quant_matmul import LowRankSpec, perturbed_scales_reference


class PerturbedScales(eqx.Module):
    """``base + eps * mult * Z`` with ``Z`` the low-rank counter-hash perturbation of ``seeds``.

    Attributes:
      base: ``[G, N]`` scales before the perturbation.
      mult: ``[G, N]`` entrywise factor of ``Z`` or ``None`` (1).
      seeds: ``[2]`` uint32 ``(seed_u, seed_v)`` of this leaf.
      eps: ``[]`` signed perturbation size.
      spec: static :class:`jaxpapers_kernels.LowRankSpec` (rank, BAG signs, matrix view).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxpapers_kernels import LowRankSpec
        >>> p = PerturbedScales(jnp.ones((2, 8)), None, jnp.asarray([1, 2], jnp.uint32),
        ...                     jnp.float32(0.1), LowRankSpec(1, 1, (4, 4)))
        >>> q = (1.0 + p) * jnp.full((2, 8), 3.0)
        >>> bool(jnp.allclose(q.materialize(), 3.0 * (1.0 + p.materialize())))
        True
    """

    base: jax.Array
    mult: jax.Array | None
    seeds: jax.Array
    eps: jax.Array
    spec: LowRankSpec = eqx.field(static=True)

    def __check_init__(self) -> None:
        if jnp.ndim(self.base) != 2:
            raise ValueError(f"base has shape {jnp.shape(self.base)}; expected [G, N] scales")
        if self.mult is not None and jnp.shape(self.mult) != jnp.shape(self.base):
            raise ValueError(f"mult has shape {jnp.shape(self.mult)}; expected {self.base.shape}")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.base.shape)

    @property
    def dtype(self) -> jnp.dtype:
        return self.base.dtype

    def materialize(self) -> jax.Array:
        """The dense ``[G, N]`` perturbed scales (built from the ``U``, ``V`` factors)."""
        return perturbed_scales_reference(self.base, self.seeds, self.eps, self.spec, self.mult)

    def __jax_array__(self) -> jax.Array:
        return self.materialize()

    def __add__(self, other) -> PerturbedScales:
        if isinstance(other, PerturbedScales):
            return NotImplemented
        return eqx.tree_at(lambda p: p.base, self, self.base + other)

    __radd__ = __add__

    def __mul__(self, other) -> PerturbedScales:
        if isinstance(other, PerturbedScales):
            return NotImplemented
        other = jnp.asarray(other, self.base.dtype)
        mult = jnp.broadcast_to(other, self.base.shape) if self.mult is None else self.mult * other
        return PerturbedScales(self.base * other, mult, self.seeds, self.eps, self.spec)

    __rmul__ = __mul__


def materialize(tree):
    """Replace every :class:`PerturbedScales` leaf of ``tree`` by its dense value."""
    is_p = lambda x: isinstance(x, PerturbedScales)
    return jax.tree.map(lambda x: x.materialize() if is_p(x) else x, tree, is_leaf=is_p)


__all__ = ["PerturbedScales", "materialize"]
