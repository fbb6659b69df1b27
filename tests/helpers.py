"""Helpers shared by tests: per-dtype tolerances, fast compiles, tree stacking."""

from __future__ import annotations

import chex
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.pytrees import FAST_COMPILE, stack_trees, unstack_tree

__all__ = [
    "BIT_EXACT_COMPILE",
    "FAST_COMPILE",
    "assert_trees_close",
    "stack_trees",
    "tolerance",
    "unstack_tree",
]

#: Compiler options for tests that compare two programs bit for bit: the suite runs with XLA's
#: fusion emitters off (conftest), under which XLA may evaluate the same expression in a different
#: order in two programs that differ by an exactly-zero term; this turns them back on for one jit.
BIT_EXACT_COMPILE = {**FAST_COMPILE, "xla_cpu_use_fusion_emitters": True}

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
