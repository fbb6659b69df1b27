"""Perturbation directions regenerated from seeds: dense (MeZO, QZO) and low-rank (LQZO).

Low-rank (LQZO): each parameter leaf (a ``[G, N]`` scale matrix) is viewed as ``m x n``
(:func:`~jaxpapers.lqzo.matrix_view_shape`) and perturbed by

.. math:: Z = \\frac{1}{\\sqrt r} U V^\\top, \\quad U \\in \\mathbb R^{m\\times r},\\;
   V \\in \\mathbb R^{n\\times r},

whose entries are i.i.d. with mean 0 and variance 1, so ``E[Z_{ij} Z_{kl}] = delta_{ik}
delta_{jl}`` and the two-point estimate ``<grad, Z> Z`` is unbiased to first order, as for a
dense Gaussian. Entries of ``U`` and ``V`` are binary-aggregated Gaussian (BAG) values
``(2 popcount(h & (2^k - 1)) - k) / sqrt(k)`` of a counter hash ``h`` of ``(seed, position)``;
``U`` gets a fresh seed every step, ``V`` every ``nu`` steps (lazy sampling, LOZO).
Only ``(m + n) r`` numbers are ever drawn; no weight-sized perturbation exists.

Dense (MeZO's Algorithm 1): tensor by tensor, ``z_i ~ N(0, I)`` of leaf ``i``'s shape, entry
``j`` a Gaussian value of the counter hash of ``(seed_i, j)`` with leaf ``i``'s own seed
(:func:`jaxpapers_kernels.counter_hash.gaussian_from_bits`; Rademacher/BAG entries of the same
words for those noises) for each of the two forward passes and the update, never one vector
for the whole model. Being elementwise in the position, the generation fuses into its consumers
(XLA may still keep one leaf's ``z`` that it reuses: on float MiniLM it keeps the embedding
table's, 44.7 MiB); ``jax.random.normal`` (threefry) lowers on XLA:CPU to a loop over
whole-tensor counter arrays, which for that table alone held 134 MiB of temporaries (two
``uint32`` counter arrays and ``z``).

Fused (``fused=True``, low-rank counter-hash noise only): the forward passes receive
:class:`~jaxpapers.lqzo.PerturbedScales` leaves instead of ``theta + eps Z``, so a
:class:`~jaxpapers.lqzo.QuantizedLinear` on the kernel path regenerates ``Z`` inside the Pallas
kernel (:func:`leaf_spec` is the kernel's description of leaf ``i``).
"""

from __future__ import annotations

import math
from typing import Any, Literal, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxpapers_kernels.counter_hash import bag_from_bits, counter_hash, gaussian_from_bits
from jaxpapers_kernels.counter_noise import counter_noise_reference
from jaxpapers_kernels.quant_matmul import LowRankSpec

from jaxpapers.core.checks import check_dtype, check_shape, is_concrete
from jaxpapers.lqzo._isotropy import matrix_view_shape

Noise = Literal["gaussian", "rademacher", "bag"]
NOISES: tuple[str, ...] = ("gaussian", "rademacher", "bag")
PyTree = Any


class ZOConfig(eqx.Module):
    """Configuration of a two-point zeroth-order estimator (a pytree: arrays vs static fields).

    Attributes:
      eps: perturbation size ``epsilon > 0`` (array field).
      clip: directional-derivative clip ``C`` (``inf``: none) (array field).
      rank: ``r`` of ``U V^T``; 0 = dense full-size perturbation (static).
      nu: ``V`` is redrawn every ``nu`` steps (static).
      noise: ``"gaussian"``, ``"rademacher"`` or ``"bag"`` entries (static).
      bag_k: Rademacher signs aggregated per BAG entry (static).
      isotropic: near-square view of each leaf before the factorisation (static).
      fused: the forward passes get lazy :class:`~jaxpapers.lqzo.PerturbedScales` leaves
        (kernel path of quantized layers) instead of dense ``theta +- eps Z`` (static).
      share_direction: generate each leaf's ``Z`` once per step, behind
        ``jax.lax.optimization_barrier``, and use it in both passes and the update (static).
        The same values as regenerating it (default); one generation instead of three, and XLA
        compiles one generator per leaf instead of fusing a copy into every consumer, at the
        cost of holding every leaf's ``Z`` at once (MeZO's Algorithm 1 holds one at a time).
    """

    eps: jax.Array
    clip: jax.Array
    rank: int = eqx.field(default=0, static=True)
    nu: int = eqx.field(default=1, static=True)
    noise: str = eqx.field(default="gaussian", static=True)
    bag_k: int = eqx.field(default=4, static=True)
    isotropic: bool = eqx.field(default=False, static=True)
    fused: bool = eqx.field(default=False, static=True)
    share_direction: bool = eqx.field(default=False, static=True)

    def __check_init__(self) -> None:
        rank, noise = self.rank, self.noise
        if rank < 0:
            raise ValueError(f"rank={rank}; expected rank >= 0 (0: dense perturbation)")
        if self.nu < 1:
            raise ValueError(f"nu={self.nu}; expected nu >= 1 steps between redraws of V")
        if noise not in NOISES:
            raise ValueError(f"noise={noise!r}; expected one of {NOISES}")
        if not 1 <= self.bag_k <= 32:
            raise ValueError(f"bag_k={self.bag_k}; expected 1 <= bag_k <= 32")
        if self.fused and (rank == 0 or noise == "gaussian"):
            raise ValueError(
                f"fused=True with rank={rank}, noise={noise!r}; the fused path needs a low-rank "
                "counter-hash direction (rank >= 1, noise 'rademacher' or 'bag')"
            )
        if self.fused and self.share_direction:
            raise ValueError(
                "fused=True with share_direction=True; the fused passes regenerate Z from the "
                "seeds, there is no dense direction to share"
            )


def make_config(
    *,
    eps: float = 1e-3,
    clip: float = math.inf,
    rank: int = 0,
    nu: int = 1,
    noise: Noise = "gaussian",
    bag_k: int = 4,
    isotropic: bool = False,
    fused: bool = False,
    share_direction: bool = False,
) -> ZOConfig:
    """Validated :class:`ZOConfig` (``ValueError`` naming the argument on bad values)."""
    if is_concrete(eps) and not float(eps) > 0:
        raise ValueError(f"eps={eps}; expected eps > 0")
    if is_concrete(clip) and not float(clip) > 0:
        raise ValueError(f"clip={clip}; expected clip > 0 (math.inf for no clipping)")
    return ZOConfig(
        jnp.asarray(eps, jnp.float32),
        jnp.asarray(clip, jnp.float32),
        rank,
        nu,
        noise,
        bag_k,
        isotropic,
        fused,
        share_direction,
    )


class LowRankDirection(NamedTuple):
    """The implicit direction of one leaf: ``Z = reshape(U V^T / sqrt(r), leaf shape)``.

    Attributes:
      u: ``[m, r]``. v: ``[n, r]`` (``m x n``: the leaf's matrix view).
    """

    u: jax.Array
    v: jax.Array


def check_rank(params: PyTree, config: ZOConfig) -> None:
    """``ValueError`` when ``rank`` exceeds ``min(m, n)`` of some leaf's matrix view."""
    if config.rank == 0:
        return
    for path, leaf in jax.tree_util.tree_leaves_with_path(params):
        if config.fused and jnp.ndim(leaf) != 2:
            raise ValueError(
                f"parameter {jax.tree_util.keystr(path)} has shape {jnp.shape(leaf)}; fused=True "
                "perturbs [G, N] scale matrices only"
            )
        m, n = matrix_view_shape(tuple(jnp.shape(leaf)), config.isotropic)
        if config.rank > min(m, n):
            raise ValueError(
                f"rank={config.rank} exceeds min(m, n)={min(m, n)} of the {m}x{n} view of "
                f"parameter {jax.tree_util.keystr(path)} with shape {jnp.shape(leaf)}"
            )


def _entries(seed: jax.Array, shape: tuple[int, int], config: ZOConfig) -> jax.Array:
    if config.noise == "gaussian":
        return jax.random.normal(jax.random.key(seed), shape, jnp.float32)
    k = 1 if config.noise == "rademacher" else config.bag_k
    return counter_noise_reference(seed, shape, k=k)


def check_seeds(seeds: jax.Array) -> None:
    """Raise ``ValueError`` unless ``seeds`` is a ``[2]`` integer array (a step's seeds)."""
    check_shape("seeds", seeds, (2,))
    check_dtype("seeds", seeds, "integer")


def leaf_seeds(seeds: jax.Array, index: int) -> jax.Array:
    """Per-leaf ``[2]`` uint32 seeds ``(seed_u, seed_v)`` from a step's ``seeds``."""
    return counter_hash(seeds, jnp.uint32(index))


def low_rank_direction(
    seeds: jax.Array, shape: tuple[int, ...], *, config: ZOConfig
) -> LowRankDirection:
    """Factors ``U [m, r]``, ``V [n, r]`` of one leaf from its ``[2]`` seeds."""
    check_seeds(seeds)
    m, n = matrix_view_shape(shape, config.isotropic)
    return LowRankDirection(
        _entries(seeds[0], (m, config.rank), config), _entries(seeds[1], (n, config.rank), config)
    )


def direction_tree(params: PyTree, seeds: jax.Array, *, config: ZOConfig) -> PyTree | None:
    """Low-rank factors of every leaf (``None`` for a dense config, whose ``z`` is not kept)."""
    check_seeds(seeds)
    if config.rank == 0:
        return None
    leaves, treedef = jax.tree.flatten(params)
    return treedef.unflatten(
        [
            low_rank_direction(leaf_seeds(seeds, i), tuple(jnp.shape(x)), config=config)
            for i, x in enumerate(leaves)
        ]
    )


def leaf_spec(shape: tuple[int, ...], config: ZOConfig) -> LowRankSpec:
    """The kernel's :class:`~jaxpapers_kernels.LowRankSpec` of a leaf (low-rank hash noise)."""
    k = 1 if config.noise == "rademacher" else config.bag_k
    return LowRankSpec(config.rank, k, matrix_view_shape(shape, config.isotropic))


def _flat_index(shape: tuple[int, ...]) -> jax.Array:
    """``uint32`` row-major flat position of every entry of ``shape`` (broadcast iotas: fusible)."""
    index = jnp.zeros(shape, jnp.uint32)
    stride = 1
    for axis in range(len(shape) - 1, -1, -1):
        index = index + jax.lax.broadcasted_iota(jnp.uint32, shape, axis) * jnp.uint32(stride)
        stride *= shape[axis]
    return index


def dense_leaf(seeds: jax.Array, index: int, like: jax.Array, config: ZOConfig) -> jax.Array:
    """Dense ``z`` of leaf ``index`` (shape and dtype of ``like``), drawn from that leaf's seed.

    Entry at flat position ``j``: ``gaussian_from_bits(counter_hash(seed_i, j))`` (Gaussian) or
    the BAG value of the same word (Rademacher/BAG), ``seed_i = leaf_seeds(seeds, index)[0]``.
    One tensor at a time, as in MeZO's Algorithm 1, and elementwise in the position, so XLA can
    fuse the generation into each consumer (perturbed weight, embedding gather, update) instead
    of storing ``z`` and threefry's counter arrays.
    """
    shape = tuple(jnp.shape(like))
    if math.prod(shape) >= 2**32:
        raise ValueError(f"parameter shape {shape} has >= 2**32 entries; positions are uint32")
    bits = counter_hash(leaf_seeds(seeds, index)[0], _flat_index(shape))
    if config.noise == "gaussian":
        z = gaussian_from_bits(bits)
    else:
        z = bag_from_bits(bits, 1 if config.noise == "rademacher" else config.bag_k)
    return z.astype(jnp.result_type(like))


def low_rank_leaf(seeds: jax.Array, index: int, like: jax.Array, config: ZOConfig) -> jax.Array:
    """Dense ``reshape(U V^T / sqrt(r))`` of leaf ``index`` (shape and dtype of ``like``)."""
    shape = tuple(jnp.shape(like))
    d = low_rank_direction(leaf_seeds(seeds, index), shape, config=config)
    z = (d.u @ d.v.T * (1.0 / math.sqrt(config.rank))).reshape(shape)
    return z.astype(jnp.result_type(like))


def perturbation_leaf(seeds: jax.Array, index: int, like: jax.Array, config: ZOConfig) -> jax.Array:
    """``Z`` of leaf ``index``: dense (rank 0) or low-rank, regenerated from the step seeds."""
    if config.rank == 0:
        return dense_leaf(seeds, index, like, config)
    return low_rank_leaf(seeds, index, like, config)


def shared_directions(params: PyTree, seeds: jax.Array, *, config: ZOConfig) -> PyTree:
    """Every leaf's ``Z`` (:func:`perturbation_leaf`), formed once behind an optimization barrier.

    For ``config.share_direction``: the barrier keeps XLA from fusing (duplicating) the
    generator into each consumer, so the two passes and the update read one stored ``Z`` per leaf.
    """
    check_seeds(seeds)
    leaves, treedef = jax.tree.flatten(params)
    zs = [perturbation_leaf(seeds, i, x, config) for i, x in enumerate(leaves)]
    return treedef.unflatten(list(jax.lax.optimization_barrier(zs)))


def perturbation_tree(params: PyTree, seeds: jax.Array, *, config: ZOConfig) -> PyTree:
    """The perturbation ``Z`` (same structure and shapes as ``params``) for step ``seeds``.

    Leaf by leaf (:func:`perturbation_leaf`): each leaf's ``z`` comes from its own seed, so a
    caller that maps over leaves never holds more than one tensor's ``z`` at a time.
    """
    check_seeds(seeds)
    leaves, treedef = jax.tree.flatten(params)
    return treedef.unflatten([perturbation_leaf(seeds, i, x, config) for i, x in enumerate(leaves)])


__all__ = [
    "NOISES",
    "LowRankDirection",
    "ZOConfig",
    "check_rank",
    "dense_leaf",
    "direction_tree",
    "leaf_seeds",
    "leaf_spec",
    "low_rank_direction",
    "low_rank_leaf",
    "make_config",
    "perturbation_leaf",
    "perturbation_tree",
    "shared_directions",
]
