"""Online-to-batch conversion: the averaged iterate as a batch classifier."""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxpapers.multiclass._streams import Stream


def classification_error(weights: Float[Array, "C d"], data: Stream) -> Float[Array, ""]:
    """Share of ``data`` misclassified by ``argmax weights @ x``.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxpapers.multiclass import Stream, classification_error
        >>> data = Stream(jnp.eye(2), jnp.array([0, 0]))
        >>> classification_error(jnp.eye(2), data)
        Array(0.5, dtype=float32)
    """
    if jnp.ndim(weights) != 2 or jnp.shape(weights)[1] != jnp.shape(data.x)[-1]:
        d = jnp.shape(data.x)[-1]
        raise ValueError(f"weights has shape {jnp.shape(weights)}; expected [C, {d}]")
    return jnp.mean((data.x @ weights.T).argmax(-1) != data.y).astype(jnp.float32)
