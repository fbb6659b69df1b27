"""Sampling from given uniforms, so a simulation draws each round's randomness in one call."""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float, Int


def inverse_cdf(probs: Float[Array, " n"], u: Float[Array, ""]) -> Int[Array, ""]:
    """Index drawn from ``probs`` by inverting its CDF at the ``U[0, 1)`` draw ``u``.

    A compare-and-count (not ``searchsorted``): ``n`` is tiny and it vectorises under ``vmap``.
    """
    below = (jnp.cumsum(probs) <= u).astype(jnp.int32)
    return jnp.minimum(jnp.sum(below), probs.shape[0] - 1)
