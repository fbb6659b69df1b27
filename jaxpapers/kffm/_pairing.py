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

The pairing classes are ``eqx.Module`` pytrees: a kernel's bandwidth is a leaf; epsilon, the
Sinkhorn stopping rule and the draw are static fields, validated once at construction. Each
pairing returns the Sinkhorn ``converged`` flag, its iteration count and the drawn indices.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_key, check_range
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
      converged: whether Sinkhorn met its threshold (True for independent pairing; one per device
        when local).
      indices: ``[B]`` the drawn data indices, ``x1 == data[indices]`` (within the device's shard
        when local).
    """

    x0: jax.Array
    x1: jax.Array
    coupling: jax.Array
    n_iters: jax.Array
    converged: jax.Array
    indices: jax.Array


def draw_indices(coupling: jax.Array, *, key: jax.Array, replace: bool = True) -> jax.Array:
    """Data index for each prior draw, drawn from a coupling (what the OT pairings do after the
    solve; public so that one plan can be drawn from in both ways).

    Args:
      coupling: ``[B, B']`` non-negative coupling (rows: prior draws, columns: data functions).
      key: PRNG key.
      replace: ``True``: one categorical draw per row of the coupling (data functions may repeat);
        ``False``: a random assignment that follows the coupling, each column used once (needs
        ``B <= B'``): the Gumbel-perturbed log coupling rounded to a permutation by a greedy
        row-by-row argmax over unused columns.

    Returns:
      ``[B]`` int data indices.
    """
    check_key("key", key)
    if coupling.ndim != 2:
        raise ValueError(f"coupling must be a [B, B'] matrix; got shape {coupling.shape}")
    check_range("coupling", coupling, 0.0)
    if not replace and coupling.shape[0] > coupling.shape[1]:
        raise ValueError(
            f"replace=False needs at most as many rows as columns; got coupling shape "
            f"{coupling.shape}"
        )
    logits = jnp.log(jnp.maximum(coupling, 1e-30))
    if replace:
        return jax.random.categorical(key, logits, axis=1)
    perturbed = logits + jax.random.gumbel(key, logits.shape, logits.dtype)

    def pick(used, row):
        j = jnp.argmax(jnp.where(used, -jnp.inf, row))
        return used.at[j].set(True), j

    used0 = jnp.zeros(coupling.shape[1], bool)
    return jax.lax.scan(pick, used0, perturbed)[1]


class IndependentPairing(eqx.Module):
    """FFM's pairing: prior and data drawn independently, kept in input order."""

    def __call__(
        self, x0: Float[Array, "b ..."], x1: Float[Array, "b ..."], *, key: jax.Array
    ) -> Pairing:
        """Pair ``x0[i]`` with ``x1[i]``; ``key`` is unused (kept for a uniform signature)."""
        check_functions(x0, x1, ("x0", "x1"))
        b = x0.shape[0]
        coupling = jnp.full((b, x1.shape[0]), 1.0 / (b * x1.shape[0]), dtype=x0.dtype)
        idx = jnp.arange(b)
        return Pairing(x0, x1, coupling, jnp.zeros((), jnp.int32), jnp.bool_(True), idx)


class _SinkhornPairing(eqx.Module):
    r"""Shared Sinkhorn settings and the solve-and-draw step of the OT pairings.

    Attributes:
      epsilon: regularisation, a fraction of the cost's std when ``relative_epsilon``.
      relative_epsilon: scale-free epsilon (default).
      max_iterations, threshold: Sinkhorn stopping rule.
      lse_mode: log-domain iterations (ott's default). ``False`` runs the cheaper kernel-domain
        iterations on the cost with its row and column minima subtracted (the same plan: the
        shifts only move the dual potentials), so every row and column of
        :math:`\exp(-C/\varepsilon)` holds a 1. About half the time of a log-domain solve at the
        default epsilon, but at small epsilon (``1e-3`` relative) the other entries underflow and
        the plan is wrong (measured: rows spread over three columns where the assignment is a
        permutation), so it is not the default.
      anderson: memory of ott's Anderson acceleration of the Sinkhorn iterates (0: off). Memory 3
        (default) cut the iterations of a 128 x 128 solve from ~100 to ~20-30 at the same
        threshold and transport cost (``benchmarks/kffm.py``, P06 rows of
        ``benchmarks/README.md``).
      replace: draw pairs with replacement (one categorical draw per row of the coupling; some
        data functions repeat) or without (a random permutation that follows the coupling).
    """

    epsilon: float = eqx.field(default=0.05, static=True)
    relative_epsilon: bool = eqx.field(default=True, static=True)
    max_iterations: int = eqx.field(default=2000, static=True)
    threshold: float = eqx.field(default=1e-3, static=True)
    lse_mode: bool = eqx.field(default=True, static=True)
    anderson: int = eqx.field(default=3, static=True)
    replace: bool = eqx.field(default=True, static=True)

    def __check_init__(self):
        check_epsilon(self.epsilon)
        if not (isinstance(self.max_iterations, int) and self.max_iterations >= 1):
            raise ValueError(f"max_iterations={self.max_iterations!r}; expected an integer >= 1")
        if not self.threshold > 0:
            raise ValueError(f"threshold={self.threshold!r}; expected a positive number")
        if not (isinstance(self.anderson, int) and self.anderson >= 0):
            raise ValueError(f"anderson={self.anderson!r}; expected an integer memory >= 0")

    def _solve_and_draw(self, geom, x0, x1, key) -> Pairing:
        from ott.geometry import geometry
        from ott.solvers import linear
        from ott.solvers.linear import acceleration

        if not self.lse_mode:
            cost = geom.cost_matrix
            cost = cost - jnp.min(cost, axis=1, keepdims=True)
            cost = cost - jnp.min(cost, axis=0, keepdims=True)
            geom = geometry.Geometry(cost_matrix=cost, epsilon=geom.epsilon)
        # ott 0.6 broadcasts ranks implicitly (marginal errors): allow it inside the solve only.
        with jax.numpy_rank_promotion("allow"):
            out = linear.solve(
                geom,
                lse_mode=self.lse_mode,
                max_iterations=self.max_iterations,
                threshold=self.threshold,
                anderson=(
                    acceleration.AndersonAcceleration(memory=self.anderson)
                    if self.anderson
                    else None
                ),
            )
        coupling = jax.lax.stop_gradient(out.matrix)
        idx = draw_indices(coupling, key=key, replace=self.replace)
        n_iters = jnp.asarray(out.n_iters, jnp.int32)
        return Pairing(x0, x1[idx], coupling, n_iters, jnp.asarray(out.converged), idx)


class EuclideanOTPairing(_SinkhornPairing):
    r"""Minibatch entropic OT with the squared Euclidean cost on the flattened grids (OT-CFM).

    Attributes: Sinkhorn settings as in :class:`KernelOTPairing`.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxpapers import kffm
        >>> x0 = jax.random.normal(jax.random.key(0), (8, 16))
        >>> x1 = x0[::-1] + 0.01  # the optimal pairing reverses the order
        >>> out = kffm.EuclideanOTPairing(epsilon=0.01)(x0, x1, key=jax.random.key(1))
        >>> bool(out.converged), out.indices.tolist()
        (True, [7, 6, 5, 4, 3, 2, 1, 0])
    """

    def __call__(
        self, x0: Float[Array, "b ..."], x1: Float[Array, "b ..."], *, key: jax.Array
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
        return self._solve_and_draw(geom, x0, x1, key)


class KernelOTPairing(_SinkhornPairing):
    r"""kFFM's pairing: entropic OT under the kernel-induced Hilbert cost.

    Attributes:
      kernel: a :class:`FunctionKernel` (RBF, Sobolev, signature, linear).
      epsilon, relative_epsilon, max_iterations, threshold, lse_mode, anderson, replace: Sinkhorn
        settings and the draw (see :class:`EuclideanOTPairing`'s base class).
    """

    kernel: FunctionKernel

    def __init__(
        self,
        kernel: FunctionKernel,
        *,
        epsilon: float = 0.05,
        relative_epsilon: bool = True,
        max_iterations: int = 2000,
        threshold: float = 1e-3,
        lse_mode: bool = True,
        anderson: int = 3,
        replace: bool = True,
    ):
        if not isinstance(kernel, FunctionKernel):
            raise ValueError(f"kernel={kernel!r}; expected a FunctionKernel")
        self.kernel = kernel
        self.epsilon, self.relative_epsilon = epsilon, relative_epsilon
        self.max_iterations, self.threshold = max_iterations, threshold
        self.lse_mode, self.anderson, self.replace = lse_mode, anderson, replace

    def __call__(
        self, x0: Float[Array, "b ..."], x1: Float[Array, "b ..."], *, key: jax.Array
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
        return self._solve_and_draw(geom, x0, x1, key)


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
        return out._replace(n_iters=out.n_iters.reshape(1), converged=out.converged.reshape(1))

    sharded = jax.shard_map(
        local,
        mesh=mesh,
        in_specs=(P("data"), P("data"), P()),
        out_specs=Pairing(*(P("data"),) * len(Pairing._fields)),
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
    "draw_indices",
    "make_pairing_fn",
]
