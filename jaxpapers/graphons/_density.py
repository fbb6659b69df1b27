r"""Homomorphism densities ``t(H, W) = E prod_{(a, b) in E(H)} W(x_a, x_b)``, ``x ~ U[0, 1]^k``.

Three ways:

* exact for step graphons (block sizes ``a``, block values ``B``):
  ``t(H, W) = sum_{phi: V(H) -> blocks} prod_v a_{phi(v)} prod_{ab} B_{phi(a) phi(b)}``
  (one ``einsum``);
* plain Monte Carlo: ``N`` independent ``k``-tuples, ``N |E(H)|`` graphon evaluations;
* symmetry-aware Monte Carlo: ``m`` points, the symmetric matrix ``A_ij = W(x_i, x_j)`` (one
  evaluation per unordered pair, ``m (m - 1) / 2`` in all), and the U-statistic over every
  injective copy of ``H`` among the points: each evaluated pair is reused by ``O(m^{k-2})``
  copies, and relabellings by automorphisms of ``H`` are counted once through the symmetric
  matrix algebra (``tr`` formulas for cliques and ``C_4``). It is unbiased; for other patterns the
  V-statistic (all tuples) is used, with ``O(1 / m)`` bias.
* with a step-graphon control variate (``control_grid = g``): the U-statistic's variance is
  dominated by its first-order Hoeffding term ``(k^2 / m) Var_x E[h | x]``, which for sharp,
  step-like graphons is large and which reusing pairs cannot remove. The step graphon ``W_g``
  with values ``W`` at the centres of a ``g x g`` grid has an exact density ``t(H, W_g)`` (the
  ``einsum`` above) and, evaluated on the *same* sampled points, a U-statistic ``U_g`` that moves
  with ``U`` wherever ``W_g`` is close to ``W``. The estimator ``U - (U_g - t(H, W_g))`` is
  unbiased (``E U_g = t(H, W_g)``) for any ``g``; it is exact for a step graphon whose blocks
  are unions of grid cells; it costs ``g (g + 1) / 2`` more graphon evaluations. On random
  neural graphons (``m = 48``) ``g = 16`` cuts the variance 40-90x.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_finite, is_concrete
from jaxpapers.graphons._graphs import PatternGraph

GraphonFn = Callable[[Array, Array], Array]


def _subscripts(H: PatternGraph) -> str:
    letters = string.ascii_letters[: H.num_nodes]
    return ",".join(letters[a] + letters[b] for a, b in H.edges)


def step_density(
    H: PatternGraph, sizes: Float[Array, " k"], values: Float[Array, "k k"]
) -> Float[Array, ""]:
    """Exact ``t(H, W)`` of the step graphon with block sizes ``sizes`` and values ``values``.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxpapers.graphons._graphs import triangle
      >>> a = 0.3   # clique graphon 1[x, y < a]: t(K3) = a^3
      >>> t = step_density(triangle(), jnp.array([a, 1 - a]), jnp.array([[1.0, 0], [0, 0]]))
      >>> round(float(t), 6)
      0.027
    """
    sizes = jnp.asarray(sizes)
    values = jnp.asarray(values)
    k = sizes.shape[0]
    if sizes.ndim != 1 or values.shape != (k, k):
        raise ValueError(f"sizes {sizes.shape} and values {values.shape}; expected (k,), (k, k)")
    if is_concrete(sizes) and is_concrete(values):
        s, v = np.asarray(sizes), np.asarray(values)
        if np.any(s < 0) or abs(s.sum() - 1) > 1e-5:
            raise ValueError(f"sizes={s.tolist()}; expected non-negative block sizes summing to 1")
        if np.any(v < 0) or np.any(v > 1) or not np.allclose(v, v.T):
            raise ValueError("values must be a symmetric matrix with entries in [0, 1]")
    letters = string.ascii_letters[: H.num_nodes]
    spec = _subscripts(H) + "," + ",".join(letters) + "->"
    return jnp.einsum(spec, *([values] * H.num_edges), *([sizes] * H.num_nodes))


def plain_mc_density(
    H: PatternGraph, graphon: GraphonFn, *, key: Array, num_tuples: int
) -> Float[Array, ""]:
    """Average of ``prod W(x_a, x_b)`` over ``num_tuples`` independent uniform ``k``-tuples."""
    x = jax.random.uniform(key, (num_tuples, H.num_nodes))
    a = jnp.array([e[0] for e in H.edges])
    b = jnp.array([e[1] for e in H.edges])
    return jnp.prod(graphon(x[:, a], x[:, b]), axis=-1).mean()


def matrix_density(H: PatternGraph, A: Float[Array, "m m"]) -> Float[Array, ""]:
    """Injective homomorphism density of the weighted graph ``A`` (its diagonal is ignored).

    Cliques and ``C_4`` use closed trace formulas (unbiased U-statistics); any other pattern
    uses the V-statistic over all ``m^k`` tuples, diagonal included.
    """
    m = A.shape[0]
    if A.ndim != 2 or A.shape != (m, m):
        raise ValueError(f"A has shape {A.shape}; expected a square matrix")
    k = H.num_nodes
    if m < k:
        raise ValueError(f"{m} points cannot hold an injective copy of {H.name} ({k} nodes)")
    zero = A * (1.0 - jnp.eye(m, dtype=A.dtype))
    falling = math.prod(range(m - k + 1, m + 1))
    if H.num_edges == k * (k - 1) // 2:
        spec = _subscripts(H) + "->"
        return jnp.einsum(spec, *([zero] * H.num_edges)) / falling
    if k == 4 and H.num_edges == 4 and all(d == 2 for d in _degrees(H)):
        a2 = zero @ zero
        sq = (zero**2).sum(1)
        total = jnp.trace(a2 @ a2) - 2.0 * (sq**2).sum() + (zero**4).sum()
        return total / falling
    return all_tuples_density(H, A)


def _degrees(H: PatternGraph) -> list[int]:
    deg = [0] * H.num_nodes
    for a, b in H.edges:
        deg[a] += 1
        deg[b] += 1
    return deg


def symmetric_mc_density(
    H: PatternGraph,
    graphon: GraphonFn,
    *,
    key: Array,
    num_points: int,
    control_grid: int = 0,
) -> Float[Array, ""]:
    """Symmetry-aware Monte Carlo: U-statistic over all injective copies among ``num_points``
    uniform points (``num_points (num_points - 1) / 2`` graphon evaluations).

    Args:
      H: pattern graph.
      graphon: ``W(x, y)``, symmetric, values in ``[0, 1]``, broadcasting over its arguments.
      key: PRNG key of the sampled points.
      num_points: ``m >= |V(H)|``.
      control_grid: ``g > 0`` subtracts the step-graphon control variate
        ``U_g - t(H, W_g)`` on a ``g x g`` grid (module docstring; unbiased, ``g (g + 1) / 2``
        more evaluations); ``0`` (default) is the plain U-statistic.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxpapers.graphons import triangle
      >>> W = lambda x, y: ((x < 0.5) == (y < 0.5)).astype(jnp.float32)  # two cliques: 1/4
      >>> t = symmetric_mc_density(triangle(), W, key=jax.random.key(0), num_points=20,
      ...                          control_grid=8)
      >>> round(float(t), 5)
      0.25
    """
    if not isinstance(control_grid, int) or control_grid < 0:
        raise ValueError(f"control_grid={control_grid!r}; expected an int >= 0 (0: no control)")
    x = jax.random.uniform(key, (num_points,))
    i, j = np.triu_indices(num_points, 1)
    upper = jnp.zeros((num_points, num_points)).at[i, j].set(graphon(x[i], x[j]))
    estimate = matrix_density(H, upper + upper.T)
    if control_grid == 0:
        return estimate
    g = control_grid
    centres = (jnp.arange(g) + 0.5) / g
    a, b = np.triu_indices(g)
    half = jnp.zeros((g, g)).at[a, b].set(graphon(centres[a], centres[b]))
    values = half + jnp.triu(half, 1).T
    cell = jnp.minimum((x * g).astype(jnp.int32), g - 1)
    on_sample = matrix_density(H, values[cell[:, None], cell[None, :]])
    exact = step_density(H, jnp.full((g,), 1.0 / g), values)
    return estimate - (on_sample - exact)


def grid_density(H: PatternGraph, graphon: GraphonFn, num_points: int) -> Float[Array, ""]:
    """Midpoint-rule quadrature of ``t(H, W)`` on a ``num_points``-point grid (all tuples)."""
    x = (jnp.arange(num_points) + 0.5) / num_points
    xs, ys = jnp.meshgrid(x, x, indexing="ij")
    return all_tuples_density(H, graphon(xs, ys))


def all_tuples_density(H: PatternGraph, A: Float[Array, "m m"]) -> Float[Array, ""]:
    """V-statistic ``m^{-k} sum_{all tuples} prod A`` (the density of the step graphon of ``A``)."""
    spec = _subscripts(H) + "->"
    return jnp.einsum(spec, *([A] * H.num_edges)) / A.shape[0] ** H.num_nodes


def check_density_target(name: str, value) -> None:
    """``ValueError`` unless a concrete density target lies in ``[0, 1]``."""
    check_finite(name, jnp.asarray(value))
    if is_concrete(value) and not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name}={float(value)!r}; densities lie in [0, 1]")
