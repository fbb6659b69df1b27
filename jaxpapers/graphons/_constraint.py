r"""The embedded density-constraint solver: a scalar logit shift found by Newton's method.

Given symmetric logits ``L_ij = g(x_i, x_j)`` on sample points and a density estimator
``t(H, .)``, find ``s`` with ``t(H, sigmoid(L + s)) = target``. The map ``s -> t`` is increasing
(every ``W_ij`` increases with ``s``), so the root is unique; Newton's method inside the bisection
bracket ``|s| <= max|L| + 30`` converges in a few steps. The solve is wrapped in
``jax.lax.custom_root``: gradients
flow by the implicit function theorem,

.. math:: \frac{ds}{d\theta} = -\Big(\frac{\partial F}{\partial s}\Big)^{-1}
          \frac{\partial F}{\partial \theta}, \qquad F(s, \theta) = t(H, \sigma(L_\theta + s)) - p,

never through the iterations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxpapers.graphons._density import check_density_target, matrix_density
from jaxpapers.graphons._graphs import PatternGraph

NEWTON_STEPS = 60
TOL = 1e-7
#: largest last Newton correction taken without checking its residual (see ``_newton``)
STEP_TOL = 100 * TOL
BRACKET = 30.0


class ShiftSolution(NamedTuple):
    """The shift and the residual it leaves.

    Attributes:
      shift: scalar logit shift ``s``.
      residual: ``t(H, sigmoid(L + s)) - target`` (``|residual|`` small when converged).
    """

    shift: Float[Array, ""]
    residual: Float[Array, ""]


def _newton(f: Callable[[Array], Array], s0: Array, width: Array) -> Array:
    """Safeguarded Newton on an increasing scalar function: keep a bracket, bisect when a Newton
    step leaves it; stop when the residual is below ``TOL`` (or after ``NEWTON_STEPS``).

    Once the residual at ``s`` meets ``TOL``, the answer is ``s`` itself (the point whose residual
    was checked), refined by one last Newton correction ``c = val / slope`` only when that
    correction is tiny: ``|c| <= max(STEP_TOL, 8 eps |s|)`` (``eps`` the dtype's machine
    epsilon). A correction of that size moves the residual by ``~ t''(s) c^2 / 2 <= 2e-9`` for the
    densities used here (``|t''| <= e(H)^2 <= 36``), far below ``TOL``, so the refined point is as
    good as checked and gives float64 its quadratic finish (residual ``~1e-14``); a larger one
    (a flat slope) could land anywhere in the bracket and is never taken unchecked. Never bisect
    once converged: in float32 ``s`` has just become a bracket end and bisecting there would jump
    to the middle of the bracket, far from the root.
    """

    def cond(carry):
        i, _, _, _, val = carry
        return (i < NEWTON_STEPS) & (jnp.abs(val) > TOL)

    def step(carry):
        i, s, lo, hi, _ = carry
        val, slope = jax.value_and_grad(f)(s)
        lo = jnp.where(val < 0, s, lo)
        hi = jnp.where(val > 0, s, hi)
        correction = val / jnp.maximum(slope, 1e-30)
        newton = s - correction
        inside = (newton > lo) & (newton < hi)
        following = jnp.where(inside, newton, 0.5 * (lo + hi))
        # converged (the loop stops on this residual): keep the checked ``s`` unless the last
        # correction is tiny; never bisect away from ``s``
        converged = jnp.abs(val) <= TOL
        tiny = jnp.abs(correction) <= jnp.maximum(STEP_TOL, 8 * eps * jnp.abs(s))
        final = jnp.where(inside & tiny, newton, s)
        return i + 1, jnp.where(converged, final, following), lo, hi, val

    eps = jnp.finfo(s0.dtype).eps
    big = jnp.asarray(jnp.inf, s0.dtype)
    init = (0, s0, s0 - width, s0 + width, big)
    return jax.lax.while_loop(cond, step, init)[1]


def _tangent_solve(g: Callable[[Array], Array], y: Array) -> Array:
    """``y / F'(s)``; zero where ``F`` is flat (every ``W_ij`` saturated: no direction helps)."""
    slope = g(jnp.ones_like(y))
    safe = jnp.where(slope > 0, slope, 1.0)
    return jnp.where(slope > 0, y / safe, 0.0)


def solve_shift(
    H: PatternGraph,
    logits: Float[Array, "m m"],
    target: float | Float[Array, ""],
    *,
    density: Callable[[PatternGraph, Array], Array] = matrix_density,
) -> ShiftSolution:
    """Shift ``s`` with ``density(H, sigmoid(logits + s)) = target``, differentiable implicitly.

    Args:
      H: pattern graph of the constraint.
      logits: ``(m, m)`` symmetric logits on sample points.
      target: the density to reach, in ``(0, 1)``.
      density: estimator of ``t(H, A)`` from the matrix ``A`` (default: U-statistic).

    Returns:
      :class:`ShiftSolution`.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxpapers.graphons._graphs import edge
      >>> sol = solve_shift(edge(), jnp.zeros((8, 8)), 0.25)
      >>> round(float(jax.nn.sigmoid(sol.shift)), 4), abs(float(sol.residual)) < 1e-6
      (0.25, True)
    """
    check_density_target("target", target)
    if logits.ndim != 2 or logits.shape[0] != logits.shape[1]:
        raise ValueError(f"logits has shape {logits.shape}; expected (m, m)")

    def F(s, L):
        return density(H, jax.nn.sigmoid(L + s)) - target

    # the bracket must cover every logit: beyond it all W_ij are saturated at 0 or 1
    width = jax.lax.stop_gradient(jnp.abs(logits).max()) + BRACKET
    s = jax.lax.custom_root(
        lambda s: F(s, logits),
        jnp.zeros((), logits.dtype),
        lambda f, s0: _newton(f, s0, width),
        _tangent_solve,
    )
    return ShiftSolution(s, F(s, logits))
