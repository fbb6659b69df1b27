"""Small pytree and compilation helpers shared by experiments, benchmarks and tests.

Examples:
    >>> import jax.numpy as jnp
    >>> from jaxpapers.core.pytrees import stack_trees
    >>> stack_trees([{"w": jnp.zeros(2)}, {"w": jnp.ones(2)}])["w"].shape
    (2, 2)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

#: XLA options that cut compile time several-fold for smoke runs and tests, where compiles
#: dominate (pass as ``jax.jit(f).lower(...).compile(FAST_COMPILE)`` or
#: ``jax.jit(f, compiler_options=FAST_COMPILE)``). Never use them for timed runs.
FAST_COMPILE: dict[str, Any] = {
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
}

#: XLA options for short timed runs (quick mode on a CPU) where compiling is a large share: LLVM
#: at optimisation level 1 instead of 2. Measured on P02's ZO programs and Adam steps (ViT,
#: MiniLM top layer) and P13's training steps: 10-16% fewer compile CPU-s, runs no slower, and
#: every loss and parameter bit-identical to the default (no fast-math either way).
QUICK_COMPILE: dict[str, Any] = {"xla_backend_optimization_level": 1}


def stack_trees(trees: Sequence[Any], *, host: bool = False) -> Any:
    """Stack a sequence of pytrees of the same structure along a new leading axis.

    With ``host=True`` the leaves are stacked with NumPy on the host: an eager ``jnp.stack``
    compiles one small program per leaf shape, which adds up for the parameters of a model
    stacked once per run (and :func:`jaxpapers.core.train.train` copies host arrays without a
    compile).
    """
    if not trees:
        raise ValueError("stack_trees needs at least one pytree; got an empty sequence")
    if host:
        return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *trees)
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def unstack_tree(tree: Any) -> list[Any]:
    """Inverse of :func:`stack_trees`: split a pytree along its leading axis."""
    leaves = jax.tree.leaves(tree)
    if not leaves:
        return []
    n = leaves[0].shape[0]
    return [jax.tree.map(lambda x, i=i: x[i], tree) for i in range(n)]
