"""Recovery and social-acceptability metrics."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_range, check_shape


def _ranks(x: jax.Array, atol: float) -> jax.Array:
    """Average ranks (0-based) along the last axis; values within ``atol`` count as tied."""
    diff = x[..., None, :] - x[..., :, None]  # [..., i, j] = x_j - x_i
    below = (diff < -atol).sum(-1)
    tied = (jnp.abs(diff) <= atol).sum(-1)
    return below + (tied - 1) / 2.0


def spearman(
    estimate: Float[Array, "*batch values"],
    truth: Float[Array, "*batch values"],
    *,
    atol: float = 1e-6,
) -> Float[Array, "*batch"]:
    """Spearman rank correlation along the last axis (leading axes broadcast).

    Tied values (within ``atol``, so that float32 round-off does not break ties) get their
    average rank, as in ``scipy.stats.spearmanr``.

    A constant estimate (no information) has no ranking; it scores 0.
    """
    try:
        shape = jnp.broadcast_shapes(jnp.shape(estimate), jnp.shape(truth))
    except ValueError:
        shape = None
    if shape is None or jnp.shape(estimate)[-1:] != jnp.shape(truth)[-1:]:
        raise ValueError(
            f"estimate has shape {jnp.shape(estimate)}; expected a shape that broadcasts with "
            f"truth's {jnp.shape(truth)} and the same last axis"
        )
    a, b = _ranks(estimate, atol), _ranks(truth, atol)
    a, b = a - a.mean(-1, keepdims=True), b - b.mean(-1, keepdims=True)
    rho = (a * b).sum(-1) / jnp.sqrt((a * a).sum(-1) * (b * b).sum(-1))
    flat = jnp.ptp(estimate, axis=-1) <= 1e-6
    return jnp.where(flat, 0.0, rho)


def top_k_accuracy(
    estimate: Float[Array, "*batch values"], truth: Float[Array, "*batch values"], k: int = 3
) -> Float[Array, "*batch"]:
    """Share of the true top-``k`` values that are in the estimate's top ``k``."""
    check_shape("estimate", estimate, truth.shape)
    if not (isinstance(k, int) and 1 <= k <= truth.shape[-1]):
        raise ValueError(f"k={k!r}; expected an int in [1, {truth.shape[-1]}]")
    top_e = jnp.argsort(-estimate, axis=-1)[..., :k]
    top_t = jnp.argsort(-truth, axis=-1)[..., :k]
    hits = (top_e[..., :, None] == top_t[..., None, :]).any(-1)
    return hits.mean(-1)


def social_acceptability(
    intrusiveness: Float[Array, "*batch turns"],
    repeated: Float[Array, "*batch turns"],
    repeat_penalty: float = 0.5,
) -> Float[Array, "*batch"]:
    """:math:`1 - \\mathrm{mean}_t \\min(1, e_{q_t} + \\rho [q_t\\ \\mathrm{asked\\ before}])`.

    1 is a conversation of harmless questions, 0 one of blunt or repeated value probes.
    """
    check_shape("repeated", repeated, jnp.shape(intrusiveness))
    check_range("repeat_penalty", repeat_penalty, 0.0)
    pen = jnp.minimum(1.0, intrusiveness + repeat_penalty * repeated)
    return 1.0 - pen.mean(-1)
