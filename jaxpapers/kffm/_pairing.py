r"""Pairing prior and data functions inside a training batch: independent, Euclidean OT, kernel OT.

Given a batch of prior draws :math:`x_0^{(i)}` and data :math:`x_1^{(j)}`, ``i, j = 1..B``, a
pairing returns pairs :math:`(x_0^{(i)}, x_1^{(\sigma_i)})` for the flow-matching regression:

* :class:`IndependentPairing` (FFM): :math:`\sigma_i = i`, the product coupling.
* :class:`EuclideanOTPairing` (OT-CFM style): entropic OT on the flattened grids with squared
  Euclidean cost, a finite-dimensional surrogate that ignores function-space geometry.
* :class:`KernelOTPairing` (kFFM): entropic OT under the kernel-induced Hilbert cost
  :math:`c(f, g) = k(f,f) + k(g,g) - 2k(f,g)` (ott ``PointCloud`` on kernel features).

For OT pairings, :math:`\sigma_i` is drawn from the row :math:`P_{i\cdot} / a_i` of the Sinkhorn
coupling :math:`P` (one categorical draw per prior sample), so every prior draw is used once and
the pairs follow :math:`P` exactly; as :math:`\varepsilon \to 0` and :math:`P` tends to a
permutation, the pairs tend to the optimal assignment. The pairs carry no gradient.

Data-parallel training: :func:`make_pairing_fn` with ``scope="global"`` pairs the whole (sharded)
batch at once (XLA gathers the shards, one solve, the pairs are scattered back along the batch
axis); with ``scope="local"`` each device pairs its own shard (``jax.shard_map``), cheaper but a
coarser coupling.

The pairing classes are pytrees (ott style): a kernel's bandwidth is a leaf; epsilon and the
Sinkhorn stopping rule are static fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxpapers.kffm._hilbert_ot import check_epsilon, check_functions, hilbert_geometry
from jaxpapers.kffm._kernels import FunctionKernel


class Pairing(NamedTuple):
    """Pairs of prior and data functions.

    Attributes:
      x0: ``[B, grid]`` prior samples (the input order); ``[B, grid1, grid2]`` on 2-D grids.
      x1: ``[B, grid]`` data samples paired with ``x0`` row by row (same grid as ``x0``).
      coupling: ``[B, B]`` coupling the pairs were drawn from (``[B, B / devices]`` blocks stacked
        along rows under ``scope="local"``).
      n_iters: Sinkhorn iterations (0 for independent pairing; one per device when local).
    """

    x0: jax.Array
    x1: jax.Array
    coupling: jax.Array
    n_iters: jax.Array


def _draw_from_coupling(key, coupling, x0, x1) -> tuple[jax.Array, jax.Array]:
    idx = jax.random.categorical(key, jnp.log(jnp.maximum(coupling, 1e-30)), axis=1)
    return x0, x1[idx]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class IndependentPairing:
    """FFM's pairing: prior and data drawn independently, kept in input order."""

    def __call__(
        self, x0: Float[Array, "b grid"], x1: Float[Array, "b grid"], *, key: jax.Array
    ) -> Pairing:
        """Pair ``x0[i]`` with ``x1[i]``; ``key`` is unused (kept for a uniform signature)."""
        check_functions(x0, x1, ("x0", "x1"))
        b = x0.shape[0]
        coupling = jnp.full((b, x1.shape[0]), 1.0 / (b * x1.shape[0]), dtype=x0.dtype)
        return Pairing(x0, x1, coupling, jnp.zeros((), jnp.int32))


def _solve_and_draw(geom, x0, x1, key, max_iterations, threshold) -> Pairing:
    from ott.solvers import linear

    # ott 0.6 broadcasts ranks implicitly (marginal errors): allow it inside the solve only.
    with jax.numpy_rank_promotion("allow"):
        out = linear.solve(geom, max_iterations=max_iterations, threshold=threshold)
    coupling = jax.lax.stop_gradient(out.matrix)
    x0p, x1p = _draw_from_coupling(key, coupling, x0, x1)
    return Pairing(x0p, x1p, coupling, jnp.asarray(out.n_iters, jnp.int32))


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class EuclideanOTPairing:
    r"""Minibatch entropic OT with the squared Euclidean cost on the flattened grids (OT-CFM).

    Attributes:
      epsilon: regularisation, a fraction of the cost's std when ``relative_epsilon``.
      relative_epsilon: scale-free epsilon (default).
      max_iterations, threshold: Sinkhorn stopping rule.
    """

    epsilon: float = dataclasses.field(default=0.05, metadata=dict(static=True))
    relative_epsilon: bool = dataclasses.field(default=True, metadata=dict(static=True))
    max_iterations: int = dataclasses.field(default=2000, metadata=dict(static=True))
    threshold: float = dataclasses.field(default=1e-3, metadata=dict(static=True))

    def __post_init__(self):
        check_epsilon(self.epsilon)

    def __call__(
        self, x0: Float[Array, "b grid"], x1: Float[Array, "b grid"], *, key: jax.Array
    ) -> Pairing:
        """Pair by drawing from the Euclidean Sinkhorn coupling."""
        from ott.geometry import pointcloud

        check_functions(x0, x1, ("x0", "x1"))
        # A 2-D field is one point of R^(grid1 * grid2): Euclidean OT on the flattened grid.
        geom = pointcloud.PointCloud(
            jax.lax.stop_gradient(x0.reshape(x0.shape[0], -1)),
            jax.lax.stop_gradient(x1.reshape(x1.shape[0], -1)),
            epsilon=self.epsilon,
            relative_epsilon="std" if self.relative_epsilon else None,
        )
        return _solve_and_draw(geom, x0, x1, key, self.max_iterations, self.threshold)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class KernelOTPairing:
    r"""kFFM's pairing: entropic OT under the kernel-induced Hilbert cost.

    Attributes:
      kernel: a :class:`FunctionKernel` (RBF, Sobolev, signature, linear).
      epsilon, relative_epsilon, max_iterations, threshold: as in :class:`EuclideanOTPairing`.
    """

    kernel: FunctionKernel
    epsilon: float = dataclasses.field(default=0.05, metadata=dict(static=True))
    relative_epsilon: bool = dataclasses.field(default=True, metadata=dict(static=True))
    max_iterations: int = dataclasses.field(default=2000, metadata=dict(static=True))
    threshold: float = dataclasses.field(default=1e-3, metadata=dict(static=True))

    def __post_init__(self):
        check_epsilon(self.epsilon)
        if not isinstance(self.kernel, FunctionKernel) and _is_plain(self.kernel):
            raise ValueError(f"kernel={self.kernel!r}; expected a FunctionKernel")

    def __call__(
        self, x0: Float[Array, "b grid"], x1: Float[Array, "b grid"], *, key: jax.Array
    ) -> Pairing:
        """Pair by drawing from the Hilbert-cost Sinkhorn coupling."""
        check_functions(x0, x1, ("x0", "x1"))
        geom = hilbert_geometry(
            jax.lax.stop_gradient(x0),
            jax.lax.stop_gradient(x1),
            self.kernel,
            epsilon=self.epsilon,
            relative_epsilon=self.relative_epsilon,
        )
        return _solve_and_draw(geom, x0, x1, key, self.max_iterations, self.threshold)


def _is_plain(x) -> bool:
    # During pytree unflattening jax may pass placeholders; only reject user-given values.
    return isinstance(x, str | int | float | bool | None)


PairingFn = Callable[..., Pairing]


def make_pairing_fn(
    pairing: IndependentPairing | EuclideanOTPairing | KernelOTPairing,
    *,
    scope: Literal["global", "local"] = "global",
    mesh: jax.sharding.Mesh | None = None,
) -> PairingFn:
    """A pairing function ``(x0, x1, *, key) -> Pairing`` for data-parallel training.

    Args:
      pairing: the pairing rule.
      scope: ``"global"``: one solve over the whole batch (under a sharded ``jit`` XLA gathers the
        shards and scatters the pairs back); ``"local"``: each device of ``mesh`` pairs its own
        shard of the batch axis ``"data"`` (``jax.shard_map``), one solve per device.
      mesh: the data-parallel mesh (required for ``"local"``).
    """
    if scope == "global":
        return pairing
    if scope != "local":
        raise ValueError(f"scope={scope!r}; expected 'global' or 'local'")
    if mesh is None or "data" not in mesh.axis_names:
        raise ValueError(f"scope='local' needs a mesh with a 'data' axis; got mesh={mesh!r}")
    from jax.sharding import PartitionSpec as P

    def local(x0, x1, key):
        key = jax.random.fold_in(key, jax.lax.axis_index("data"))
        out = pairing(x0, x1, key=key)
        return out._replace(n_iters=out.n_iters.reshape(1))

    sharded = jax.shard_map(
        local,
        mesh=mesh,
        in_specs=(P("data"), P("data"), P()),
        out_specs=Pairing(P("data"), P("data"), P("data"), P("data")),
        check_vma=False,
    )

    def pair(x0, x1, *, key):
        check_functions(x0, x1, ("x0", "x1"))
        return sharded(x0, x1, key)

    return pair


__all__ = [
    "EuclideanOTPairing",
    "IndependentPairing",
    "KernelOTPairing",
    "Pairing",
    "make_pairing_fn",
]
