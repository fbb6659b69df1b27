"""Small pytree helpers shared by papers, benchmarks and tests (how programs compile is the
runner's business: :mod:`jaxpapers.core.compilation`).

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


def count_params(tree: Any) -> int:
    """Number of trainable scalars: the floating-point array entries of ``tree``.

    ``tree`` is any pytree (an ``nnx.State``, a dict of arrays) or an ``nnx.Module``, of which
    only the ``nnx.Param`` variables count (buffers, RNG counters and integer leaves do not).
    """
    from flax import nnx

    if isinstance(tree, nnx.Module):
        tree = nnx.state(tree, nnx.Param)
    return int(
        sum(
            np.size(x)
            for x in jax.tree.leaves(tree)
            if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.inexact)
        )
    )


def ema_update(average: Any, new: Any, momentum: float | jax.Array) -> Any:
    """Exponential moving average leaf by leaf: ``momentum * average + (1 - momentum) * new``.

    Args:
      average: the running average (a pytree).
      new: the new values, a pytree of the same structure and shapes.
      momentum: in ``[0, 1]``; 1 keeps ``average``, 0 returns ``new``.

    Raises:
      ValueError: if ``momentum`` is outside ``[0, 1]`` or the trees differ in structure or shapes.
    """
    from jaxpapers.core.checks import check_range

    check_range("momentum", momentum, 0.0, 1.0)
    if jax.tree.structure(average) != jax.tree.structure(new):
        raise ValueError(
            f"new has tree structure {jax.tree.structure(new)}; expected that of average "
            f"{jax.tree.structure(average)}"
        )
    for a, b in zip(jax.tree.leaves(average), jax.tree.leaves(new), strict=True):
        if jnp.shape(a) != jnp.shape(b):
            raise ValueError(f"new has a leaf of shape {jnp.shape(b)}; expected {jnp.shape(a)}")
    return jax.tree.map(lambda a, b: momentum * a + (1.0 - momentum) * b, average, new)


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
