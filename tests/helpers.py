"""Helpers shared by tests: per-dtype tolerances, tree stacking."""

from __future__ import annotations

import chex
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.pytrees import stack_trees, unstack_tree

__all__ = [
    "assert_trees_close",
    "stack_trees",
    "tolerance",
    "unstack_tree",
]

#: (rtol, atol) for comparing a computation in ``dtype`` against a float64 reference of unit
#: scale: a few hundred ulps for float32 reductions in another order, tighter for float64.
_TOLERANCES = {
    np.dtype(np.float16): (1e-2, 1e-2),
    np.dtype(jnp.bfloat16): (2e-2, 2e-2),
    np.dtype(np.float32): (2e-5, 2e-6),
    np.dtype(np.float64): (1e-10, 1e-12),
}


def tolerance(dtype, scale: float = 1.0) -> dict[str, float]:
    """Keyword arguments ``rtol``/``atol`` for ``np.testing.assert_allclose`` at ``dtype``."""
    rtol, atol = _TOLERANCES[np.dtype(dtype)]
    return {"rtol": rtol, "atol": atol * scale}


def assert_trees_close(actual, expected, dtype=np.float32, scale: float = 1.0) -> None:
    """``chex.assert_trees_all_close`` at the tolerance of :func:`tolerance` for ``dtype``."""
    chex.assert_trees_all_close(actual, expected, **tolerance(dtype, scale))
