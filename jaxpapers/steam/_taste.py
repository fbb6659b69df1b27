"""TASTE: task-adaptive mixtures of low-rank expert adapters with soft routing.

Each expert ``e`` is a bottleneck adapter ``x -> B_e A_e P_e x`` (``A_e [r, D]``, ``B_e [D, r]``,
``P_e`` the SCOA projector of :mod:`jaxpapers.steam._scoa`, the identity without SCOA). A router
turns a summary ``g`` of the input (pooled features of a frame for the spatial experts, of a whole
video for the temporal experts) into weights ``w = softmax(-||g - k_e||^2 / (tau s))`` over the
experts' keys ``k_e`` (the mean summary of the task each expert was made for; ``s`` the mean
squared distance between keys): every expert contributes in
proportion to how well the input matches its task, instead of one prompt being retrieved by an
argmax (L2P). The adapter adds ``sum_e w_e B_e A_e P_e x`` to its input.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_finite, check_key, check_positive, check_shape


class Experts(NamedTuple):
    """``E`` low-rank experts: ``down [E, D, r]`` (``A_e^T``), ``up [E, r, D]`` (``B_e^T``)."""

    down: Float[Array, "e d r"]
    up: Float[Array, "e r d"]


def init_experts(num_experts: int, dim: int, rank: int, *, key: jax.Array) -> Experts:
    """``num_experts`` experts with random ``down`` (scale ``1 / sqrt(dim)``) and zero ``up``, so
    a fresh expert adds nothing (LoRA-style)."""
    for name, v in (("num_experts", num_experts), ("dim", dim), ("rank", rank)):
        if not (isinstance(v, int) and v >= 1):
            raise ValueError(f"{name}={v!r}; expected an integer >= 1")
    check_key("key", key)
    down = jax.random.normal(key, (num_experts, dim, rank)) / jnp.sqrt(dim)
    return Experts(down, jnp.zeros((num_experts, rank, dim)))


def route(
    summary: Float[Array, "*b d"],
    keys: Float[Array, "e d"],
    *,
    temperature: float,
    active: Float[Array, " e"] | None = None,
) -> Float[Array, "*b e"]:
    """Soft routing weights ``softmax_e(-||g - k_e||^2 / (temperature * s))``; they sum to one.

    ``s`` is the mean squared distance between distinct active keys, which makes the temperature
    scale-free: at ``temperature = 0.1`` an input at one key and an average distance from the
    others gives the others ``exp(-10)`` of the weight. (Pooled ReLU features of different tasks
    are nearly parallel, so a cosine router would barely separate them.)

    Args:
      summary: ``[..., D]`` pooled features.
      keys: ``[E, D]`` expert keys (``E >= 1``).
      temperature: softmax temperature (> 0).
      active: optional ``[E]`` 0/1 mask of experts that exist yet (at least one must be 1).
    """
    if keys.ndim != 2 or keys.shape[0] < 1:
        raise ValueError(f"keys has shape {keys.shape}; expected [E, D] with E >= 1 experts")
    if summary.shape[-1] != keys.shape[-1]:
        raise ValueError(f"summary has shape {summary.shape}; expected [..., {keys.shape[-1]}]")
    check_positive("temperature", temperature)
    check_finite("summary", summary)
    check_finite("keys", keys)
    if active is not None:
        check_shape("active", active, (keys.shape[0],))
    e = keys.shape[0]
    on = jnp.ones((e,)) if active is None else active.astype(keys.dtype)
    pair = jnp.sum((keys[:, None, :] - keys[None, :, :]) ** 2, -1)
    both = on[:, None] * on[None, :] * (1 - jnp.eye(e))
    scale = jnp.sum(pair * both) / jnp.maximum(jnp.sum(both), 1.0)
    d2 = jnp.sum(
        (summary[..., None, :] - keys.reshape((1,) * (summary.ndim - 1) + keys.shape)) ** 2, -1
    )
    # With fewer than two distinct active keys there is nothing to choose between: uniform logits.
    logits = jnp.where(scale > 0, -d2 / (temperature * jnp.maximum(scale, 1e-12)), 0.0)
    logits = jnp.where(jnp.broadcast_to(on > 0, logits.shape), logits, -jnp.inf)
    return jax.nn.softmax(logits, axis=-1)


def mixture_adapter(
    x: Float[Array, "*b n d"],
    weights: Float[Array, "*b e"],
    experts: Experts,
    projectors: Float[Array, "e d d"] | None = None,
) -> Float[Array, "*b n d"]:
    """The mixture's residual ``sum_e w_e (x P_e) A_e^T B_e^T`` (rows of ``x`` are tokens).

    Args:
      x: ``[..., N, D]`` tokens (pixels or queries) sharing one routing vector per leading index.
      weights: ``[..., E]`` routing weights.
      experts: :class:`Experts` with ``E`` experts.
      projectors: optional ``[E, D, D]`` SCOA projectors applied to each expert's input.

    Returns:
      The adapter's residual ``[..., N, D]`` (add it to ``x``).
    """
    e = experts.down.shape[0]
    if weights.shape[-1] != e:
        raise ValueError(f"weights has shape {weights.shape}; expected [..., {e}] (one per expert)")
    d = experts.down.shape[1]
    if jnp.ndim(x) < 2 or jnp.shape(x)[-1] != d:
        raise ValueError(f"x has shape {jnp.shape(x)}; expected [..., N, {d}]")
    if projectors is not None:
        check_shape("projectors", projectors, (e, d, d))
    xs = jnp.broadcast_to(x[..., None, :, :], (*x.shape[:-2], e, *x.shape[-2:]))
    if projectors is not None:
        xs = jnp.einsum("...end,edf->...enf", xs, projectors)
    h = jnp.einsum("...end,edr->...enr", xs, experts.down)
    out = jnp.einsum("...enr,erd->...end", h, experts.up)
    return jnp.einsum("...e,...end->...nd", weights, out)
