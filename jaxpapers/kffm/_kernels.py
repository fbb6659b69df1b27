r"""Kernels on functions sampled on a grid, written as a feature map followed by a base kernel.

Every kernel here is :math:`k(f, g) = \kappa(\phi(f), \phi(g))` with an explicit finite feature map
:math:`\phi` and a base kernel :math:`\kappa` that is either linear, :math:`\langle a, b\rangle`,
or RBF, :math:`\exp(-\|a - b\|^2 / 2\ell^2)` (bounded, as the HSD theory asks). The induced Hilbert
(RKHS) cost is then

.. math:: c(f, g) = k(f, f) + k(g, g) - 2 k(f, g)
          = \begin{cases} \|\phi(f) - \phi(g)\|^2 & \text{linear} \\
            2 - 2 \exp(-\|\phi(f) - \phi(g)\|^2 / 2\ell^2) & \text{RBF,} \end{cases}

so the cost of a batch needs the features once per function, not once per pair.

Feature maps (functions ``f`` are ``[grid]`` values on ``[0, 1]``, or ``[grid1, grid2]`` values
of a field on ``[0, 1]^2``; norms use the quadrature :math:`\|f\|_{L^2}^2 \approx
\frac1N\sum_i f_i^2` over all ``N`` grid points, so they do not grow with the grid):

* :class:`LinearKernel`, :class:`RBFKernel`: :math:`\phi(f) = f / \sqrt N` (the :math:`L^2` norm),
  on 1-D and 2-D grids alike (a field is flattened).
* :class:`SobolevKernel`: :math:`\phi(f) = (f, \sqrt\lambda\, \nabla f) / \sqrt N` with
  finite-difference partial derivatives (:func:`grid_gradient`), i.e. an RBF kernel on the
  :math:`H^1` distance :math:`\|f - g\|_{L^2}^2 + \lambda \|\nabla f - \nabla g\|_{L^2}^2`
  (derivative-aware); in 1-D :math:`\nabla f = f'`, in 2-D
  :math:`\|\nabla h\|^2 = \|\partial_1 h\|^2 + \|\partial_2 h\|^2`.
* :class:`SignatureKernel`: :math:`\phi(f)` = the signature of the time-augmented path
  :math:`t \mapsto (t, s f(t))` truncated at level ``depth`` (levels 1..depth, computed with
  Chen's identity over the linear pieces), the path/signature kernel for time series.

``bandwidth=None`` selects a scale-free heuristic: :math:`\ell` = root-mean-square distance between
the features of the functions being compared (:func:`rms_bandwidth`, without gradient).
"""

from __future__ import annotations

import abc
import math
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

Base = Literal["linear", "rbf"]


def _is_concrete_number(x) -> bool:
    return isinstance(x, int | float | np.integer | np.floating) and not isinstance(x, bool)


def _check_bandwidth(bandwidth) -> None:
    if bandwidth is None or not _is_concrete_number(bandwidth):
        return
    if not (bandwidth > 0 and math.isfinite(bandwidth)):
        raise ValueError(f"bandwidth={bandwidth!r}; expected a positive finite number or None")


def sq_distances(a: Float[Array, "n d"], b: Float[Array, "m d"]) -> Float[Array, "n m"]:
    """Pairwise squared Euclidean distances, clamped at zero."""
    d = jnp.sum(a * a, -1)[:, None] + jnp.sum(b * b, -1)[None, :] - 2.0 * a @ b.T
    return jnp.maximum(d, 0.0)


def rms_bandwidth(a: Float[Array, "n d"], b: Float[Array, "m d"]) -> Float[Array, ""]:
    r"""Bandwidth heuristic: root-mean-square distance between distinct pooled features.

    :math:`\ell = (\frac{1}{N(N-1)}\sum_{i \ne j}\|z_i - z_j\|^2)^{1/2}` over the pooled
    ``[a; b]``, without gradient. The median heuristic would need a sort of ``N^2`` distances,
    which costs more than the whole Sinkhorn solve on CPU (XLA's sort of 65k floats: ~60 ms);
    this is ``O(N d)``.
    """
    z = jax.lax.stop_gradient(jnp.concatenate([a, b], axis=0))
    n = z.shape[0]
    # sum_{i,j} |z_i - z_j|^2 = 2 n sum_i |z_i|^2 - 2 |sum_i z_i|^2 (the diagonal adds nothing).
    total = 2.0 * n * jnp.sum(z * z) - 2.0 * jnp.sum(jnp.sum(z, axis=0) ** 2)
    return jnp.sqrt(jnp.maximum(total / (n * (n - 1)), 1e-24))


class FunctionKernel(eqx.Module):
    """Base class: a feature map ``features`` and a base kernel ``base`` with ``bandwidth``.

    Kernels are ``eqx.Module`` pytrees: the bandwidth is a leaf (it may be traced or learned),
    structure is static; arguments are validated once, at construction (``__check_init__``).
    """

    base: eqx.AbstractVar[Base]
    bandwidth: eqx.AbstractVar[float | jax.Array | None]

    @abc.abstractmethod
    def features(self, f: Float[Array, "n ..."]) -> Float[Array, "n d"]:
        """Feature vectors ``[n, d]`` of ``n`` functions on the grid (``[n, grid]`` or, where the
        kernel allows it, ``[n, grid1, grid2]``)."""

    def resolve_bandwidth(self, fa: jax.Array, fb: jax.Array) -> jax.Array | None:
        """The bandwidth used for features ``fa``, ``fb`` (RMS-distance heuristic if ``None``)."""
        if self.base == "linear":
            return None
        if self.bandwidth is None:
            return rms_bandwidth(fa, fb)
        return jnp.asarray(self.bandwidth, dtype=fa.dtype)

    def gram(self, f: Float[Array, "n grid"], g: Float[Array, "m grid"]) -> Float[Array, "n m"]:
        """Kernel matrix ``k(f_i, g_j)``, ``[n, m]``."""
        fa, fb = self.features(f), self.features(g)
        if self.base == "linear":
            return fa @ fb.T
        ell = self.resolve_bandwidth(fa, fb)
        return jnp.exp(-sq_distances(fa, fb) / (2.0 * ell**2))

    def cost_matrix(
        self, f: Float[Array, "n grid"], g: Float[Array, "m grid"]
    ) -> Float[Array, "n m"]:
        r"""Hilbert cost ``c(f_i, g_j) = k(f_i, f_i) + k(g_j, g_j) - 2 k(f_i, g_j)``, ``[n, m]``."""
        fa, fb = self.features(f), self.features(g)
        d2 = sq_distances(fa, fb)
        if self.base == "linear":
            return d2
        ell = self.resolve_bandwidth(fa, fb)
        return 2.0 - 2.0 * jnp.exp(-d2 / (2.0 * ell**2))


def _l2_features(f: jax.Array) -> jax.Array:
    flat = f.reshape(f.shape[0], -1)
    return flat / math.sqrt(flat.shape[1])


def _check_functions(f: jax.Array, *, two_d: bool = True) -> None:
    if f.ndim == 2 or (two_d and f.ndim == 3):
        return
    allowed = "[n, grid] or [n, grid1, grid2]" if two_d else "[n, grid] (1-D paths)"
    raise ValueError(f"functions must be {allowed}; got shape {f.shape}")


class LinearKernel(FunctionKernel):
    r"""The :math:`L^2` inner product :math:`k(f, g) = \langle f, g\rangle_{L^2}`: its Hilbert cost
    is the squared :math:`L^2` distance (Euclidean OT on the grid, up to the factor ``1/N``)."""

    base: Base = eqx.field(default="linear", static=True)
    bandwidth: None = eqx.field(default=None, static=True)

    def features(self, f):
        _check_functions(f)
        return _l2_features(f)


class RBFKernel(FunctionKernel):
    r"""RBF kernel on the :math:`L^2` distance, :math:`\exp(-\|f - g\|_{L^2}^2 / 2\ell^2)`."""

    bandwidth: float | jax.Array | None = None
    base: Base = eqx.field(default="rbf", static=True)

    def __check_init__(self):
        _check_bandwidth(self.bandwidth)

    def features(self, f):
        _check_functions(f)
        return _l2_features(f)


def grid_derivative(f: Float[Array, "n grid"]) -> Float[Array, "n grid"]:
    """Derivative on the uniform grid of ``[0, 1]``: central differences, one-sided at the ends."""
    n = f.shape[-1]
    return jnp.gradient(f, 1.0 / (n - 1), axis=-1)


def grid_gradient(
    f: Float[Array, " n *grid"], *, periodic: bool = False
) -> Float[Array, " n dim *grid"]:
    r"""Partial derivatives of functions on the uniform grid of :math:`[0, 1]^{\text{dim}}`.

    ``periodic=False`` (the closed grid ``linspace(0, 1, n_a)``): second-order central differences
    inside, first-order one-sided at the ends (``jnp.gradient``), spacing :math:`1/(n_a - 1)`, as
    :func:`grid_derivative` in 1-D. ``periodic=True`` (the periodic grid :math:`j/n_a`, e.g.
    :func:`jaxpapers.kffm.periodic_grid`): second-order central differences
    everywhere, wrapping around, spacing :math:`1/n_a`.

    Args:
      f: ``[n, grid]`` or ``[n, grid1, grid2]`` function values.
      periodic: whether the grid is periodic (see above).

    Returns:
      ``[n, dim, *grid]``: :math:`\partial_a f` for each grid axis :math:`a`.
    """
    _check_functions(f)
    axes = tuple(range(1, f.ndim))
    if periodic:
        parts = [
            (jnp.roll(f, -1, axis=a) - jnp.roll(f, 1, axis=a)) * (f.shape[a] / 2.0) for a in axes
        ]
    else:
        parts = [jnp.gradient(f, 1.0 / (f.shape[a] - 1), axis=a) for a in axes]
    return jnp.stack(parts, axis=1)


class SobolevKernel(FunctionKernel):
    r"""RBF kernel on the :math:`H^1` distance,
    :math:`\exp(-(\|f - g\|_{L^2}^2 + \lambda\|\nabla f - \nabla g\|_{L^2}^2) / 2\ell^2)`.

    Functions are ``[n, grid]`` (:math:`\nabla f = f'`) or fields ``[n, grid1, grid2]`` on the
    unit square (:math:`\nabla f = (\partial_1 f, \partial_2 f)`); derivatives by
    :func:`grid_gradient`. With the feature map
    :math:`\phi(f) = (f, \sqrt\lambda\,\partial_1 f, \dots) / \sqrt N` the squared feature
    distance is exactly the quadrature of the :math:`H^1` distance above.

    Attributes:
      bandwidth: :math:`\ell` (``None``: RMS-distance heuristic).
      derivative_weight: :math:`\lambda \ge 0` (static).
      periodic: derivatives on a periodic grid (wrap-around differences; static), for data on
        the torus such as the 2-D heat and Navier-Stokes fields.
    """

    bandwidth: float | jax.Array | None = None
    derivative_weight: float = eqx.field(default=0.01, static=True)
    base: Base = eqx.field(default="rbf", static=True)
    periodic: bool = eqx.field(default=False, static=True)

    def __check_init__(self):
        _check_bandwidth(self.bandwidth)
        if not (_is_concrete_number(self.derivative_weight) and self.derivative_weight >= 0):
            raise ValueError(
                f"derivative_weight={self.derivative_weight!r}; expected a non-negative number"
            )

    def features(self, f):
        _check_functions(f)
        n = f.shape[0]
        grad = grid_gradient(f, periodic=self.periodic).reshape(n, -1)
        grad = grad * math.sqrt(self.derivative_weight)
        return jnp.concatenate([f.reshape(n, -1), grad], axis=-1) / math.sqrt(
            math.prod(f.shape[1:])
        )


def _tensor_product(a: jax.Array, b: jax.Array) -> jax.Array:
    return (a[:, None] * b[None, :]).reshape(-1)


def path_signature(path: Float[Array, "length dim"], depth: int) -> Float[Array, " features"]:
    r"""Truncated signature (levels ``1..depth``, concatenated) of a piecewise-linear path.

    Chen's identity: :math:`S(X)_{0,T} = \bigotimes_k \exp(\Delta_k)` with the truncated tensor
    exponential :math:`\exp(\Delta)_n = \Delta^{\otimes n} / n!` of each increment.

    Args:
      path: ``[length, dim]`` points of the path.
      depth: truncation level (static, >= 1).

    Returns:
      ``[dim + dim^2 + ... + dim^depth]`` signature terms.
    """
    if path.ndim != 2 or path.shape[0] < 2:
        raise ValueError(f"path must be [length >= 2, dim]; got shape {path.shape}")
    if depth < 1:
        raise ValueError(f"depth={depth}; expected a positive truncation level")
    dim = path.shape[1]
    increments = jnp.diff(path, axis=0)

    def seg_exp(delta):
        levels, term = [], jnp.ones((1,), dtype=delta.dtype)
        for n in range(1, depth + 1):
            term = _tensor_product(term, delta) / n
            levels.append(term)
        return levels

    def chen(levels, delta):
        e = seg_exp(delta)
        new = []
        for n in range(1, depth + 1):
            acc = levels[n - 1] + e[n - 1]
            for i in range(1, n):
                acc = acc + _tensor_product(levels[i - 1], e[n - i - 1])
            new.append(acc)
        return new, None

    init = [jnp.zeros((dim**n,), dtype=path.dtype) for n in range(1, depth + 1)]
    levels, _ = jax.lax.scan(chen, init, increments)
    return jnp.concatenate(levels)


class SignatureKernel(FunctionKernel):
    r"""RBF kernel on truncated signatures of the time-augmented path :math:`(t, s f(t))`.

    Attributes:
      bandwidth: :math:`\ell` (``None``: RMS-distance heuristic).
      depth: signature truncation level (static).
      scale: :math:`s`, the value scale inside the path (static).
    """

    bandwidth: float | jax.Array | None = None
    depth: int = eqx.field(default=3, static=True)
    scale: float = eqx.field(default=1.0, static=True)
    base: Base = eqx.field(default="rbf", static=True)

    def __check_init__(self):
        _check_bandwidth(self.bandwidth)
        if not (isinstance(self.depth, int) and self.depth >= 1):
            raise ValueError(f"depth={self.depth!r}; expected a positive integer")
        if not (_is_concrete_number(self.scale) and self.scale > 0):
            raise ValueError(f"scale={self.scale!r}; expected a positive number")

    def features(self, f):
        _check_functions(f, two_d=False)
        n = f.shape[-1]
        t = jnp.broadcast_to(jnp.linspace(0.0, 1.0, n, dtype=f.dtype), f.shape)
        paths = jnp.stack([t, self.scale * f], axis=-1)
        return jax.vmap(lambda p: path_signature(p, self.depth))(paths)


__all__ = [
    "FunctionKernel",
    "LinearKernel",
    "RBFKernel",
    "SignatureKernel",
    "SobolevKernel",
    "grid_derivative",
    "grid_gradient",
    "path_signature",
    "rms_bandwidth",
    "sq_distances",
]
