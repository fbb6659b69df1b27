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

Dense: ``z ~ N(0, I)`` of the parameter's shape from ``jax.random.key(seed)``, regenerated
for each of the two forward passes and the update and never stored between steps.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
from jaxpapers_kernels.counter_hash import counter_hash
from jaxpapers_kernels.counter_noise import counter_noise_reference

from jaxpapers.lqzo._isotropy import matrix_view_shape

Noise = Literal["gaussian", "rademacher", "bag"]
NOISES: tuple[str, ...] = ("gaussian", "rademacher", "bag")
PyTree = Any


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ZOConfig:
    """Configuration of a two-point zeroth-order estimator (a pytree: arrays vs static fields).

    Attributes:
      eps: perturbation size ``epsilon > 0`` (array field).
      clip: directional-derivative clip ``C`` (``inf``: none) (array field).
      rank: ``r`` of ``U V^T``; 0 = dense full-size perturbation (static).
      nu: ``V`` is redrawn every ``nu`` steps (static).
      noise: ``"gaussian"``, ``"rademacher"`` or ``"bag"`` entries (static).
      bag_k: Rademacher signs aggregated per BAG entry (static).
      isotropic: near-square view of each leaf before the factorisation (static).
    """

    eps: jax.Array
    clip: jax.Array
    rank: int = dataclasses.field(default=0, metadata={"static": True})
    nu: int = dataclasses.field(default=1, metadata={"static": True})
    noise: str = dataclasses.field(default="gaussian", metadata={"static": True})
    bag_k: int = dataclasses.field(default=4, metadata={"static": True})
    isotropic: bool = dataclasses.field(default=False, metadata={"static": True})


def make_config(
    *,
    eps: float = 1e-3,
    clip: float = math.inf,
    rank: int = 0,
    nu: int = 1,
    noise: Noise = "gaussian",
    bag_k: int = 4,
    isotropic: bool = False,
) -> ZOConfig:
    """Validated :class:`ZOConfig` (``ValueError`` naming the argument on bad values)."""
    if not (isinstance(eps, jax.core.Tracer) or float(eps) > 0):
        raise ValueError(f"eps={eps}; expected eps > 0")
    if not (isinstance(clip, jax.core.Tracer) or float(clip) > 0):
        raise ValueError(f"clip={clip}; expected clip > 0 (math.inf for no clipping)")
    if rank < 0:
        raise ValueError(f"rank={rank}; expected rank >= 0 (0: dense perturbation)")
    if nu < 1:
        raise ValueError(f"nu={nu}; expected nu >= 1 steps between redraws of V")
    if noise not in NOISES:
        raise ValueError(f"noise={noise!r}; expected one of {NOISES}")
    if not 1 <= bag_k <= 32:
        raise ValueError(f"bag_k={bag_k}; expected 1 <= bag_k <= 32")
    return ZOConfig(
        jnp.asarray(eps, jnp.float32),
        jnp.asarray(clip, jnp.float32),
        rank,
        nu,
        noise,
        bag_k,
        isotropic,
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


def leaf_seeds(seeds: jax.Array, index: int) -> jax.Array:
    """Per-leaf ``[2]`` uint32 seeds ``(seed_u, seed_v)`` from a step's ``seeds``."""
    return counter_hash(seeds, jnp.uint32(index))


def low_rank_direction(
    seeds: jax.Array, shape: tuple[int, ...], config: ZOConfig
) -> LowRankDirection:
    """Factors ``U [m, r]``, ``V [n, r]`` of one leaf from its ``[2]`` seeds."""
    m, n = matrix_view_shape(shape, config.isotropic)
    return LowRankDirection(
        _entries(seeds[0], (m, config.rank), config), _entries(seeds[1], (n, config.rank), config)
    )


def direction_tree(params: PyTree, seeds: jax.Array, config: ZOConfig) -> PyTree | None:
    """Low-rank factors of every leaf (``None`` for a dense config, whose ``z`` is not kept)."""
    if config.rank == 0:
        return None
    leaves, treedef = jax.tree.flatten(params)
    return treedef.unflatten(
        [
            low_rank_direction(leaf_seeds(seeds, i), tuple(jnp.shape(x)), config)
            for i, x in enumerate(leaves)
        ]
    )


def perturbation_tree(params: PyTree, seeds: jax.Array, config: ZOConfig) -> PyTree:
    """The perturbation ``Z`` (same structure and shapes as ``params``) for step ``seeds``.

    Dense: one draw of ``sum(sizes)`` entries from ``seeds[0]``, split over the leaves (one
    generator call keeps compile time flat in the number of leaves). Low-rank: per leaf,
    ``U V^T / sqrt(r)`` from the leaf's own seeds (:func:`leaf_seeds`).
    """
    leaves, treedef = jax.tree.flatten(params)
    shapes = [tuple(jnp.shape(x)) for x in leaves]
    if config.rank == 0:
        sizes = [math.prod(s) for s in shapes]
        flat = _entries(seeds[0], (sum(sizes), 1), config)[:, 0]
        offsets = [0]
        for size in sizes:
            offsets.append(offsets[-1] + size)
        out = [
            flat[a:b].reshape(s).astype(jnp.result_type(x))
            for a, b, s, x in zip(offsets[:-1], offsets[1:], shapes, leaves, strict=True)
        ]
        return treedef.unflatten(out)
    out = []
    for i, (x, shape) in enumerate(zip(leaves, shapes, strict=True)):
        d = low_rank_direction(leaf_seeds(seeds, i), shape, config)
        z = (d.u @ d.v.T * (1.0 / math.sqrt(config.rank))).reshape(shape)
        out.append(z.astype(jnp.result_type(x)))
    return treedef.unflatten(out)


__all__ = [
    "NOISES",
    "LowRankDirection",
    "ZOConfig",
    "check_rank",
    "direction_tree",
    "leaf_seeds",
    "low_rank_direction",
    "make_config",
    "perturbation_tree",
]
