"""Isotropy-Enhanced Estimation: view a layer's scale groups as a near-square matrix.

A layer's scales form a ``[G, N]`` matrix with ``G = K / g`` small (e.g. ``6 x 384`` for a
``384 -> 384`` projection at ``g = 64``): a rank-``r`` factor ``U`` then has only ``G`` rows, the
perturbations ``U V^T`` span at most ``G`` column patterns, and ``r <= G`` caps the rank. Viewing
the same ``G N`` entries (row-major) as an ``m' x n'`` matrix with ``m' n' = G N`` and
``m' / n'`` as close to 1 as the divisors allow (``48 x 48`` here) makes the factorisation as
isotropic as possible: both factors have ~``sqrt(G N)`` rows, rank ``r`` covers ``r`` directions in
each, and the perturbation's energy spreads over every scale entry instead of being tied to ``G``
row patterns. The reshape is free (a view); the kernel maps entry ``(g, n)`` to
``((g N + n) // n', (g N + n) % n')`` with integer ops.
"""

from __future__ import annotations

import math


def near_square_shape(size: int) -> tuple[int, int]:
    """``(m, n)``, ``m n = size``, ``m <= n``, ``m`` the largest divisor ``<= sqrt(size)``."""
    if size < 1:
        raise ValueError(f"size={size}; expected a positive number of entries")
    m = math.isqrt(size)
    while size % m:
        m -= 1
    return (m, size // m)


def matrix_view_shape(shape: tuple[int, ...], isotropic: bool) -> tuple[int, int]:
    """The 2-D view of a parameter in which LQZO's ``U V^T`` is low rank.

    Args:
      shape: the parameter's shape (``[G, N]`` for scales).
      isotropic: near-square view (:func:`near_square_shape`) or the natural
        ``[shape[0], prod(shape[1:])]`` view (``[size, 1]`` for vectors).
    """
    if not all(isinstance(s, int) and s >= 1 for s in shape):
        raise ValueError(f"shape={tuple(shape)}; expected positive integer dimensions")
    size = math.prod(shape)
    if isotropic:
        return near_square_shape(size)
    if len(shape) < 2:
        return (size, 1)
    return (shape[0], size // shape[0])


__all__ = ["matrix_view_shape", "near_square_shape"]
