"""TASTE: task-adaptive mixtures of low-rank expert adapters with soft routing.

Each expert ``e`` is a bottleneck adapter ``x -> B_e A_e P_e x`` (``A_e [r, D]``, ``B_e [D, r]``,
``P_e`` the SCOA projector of :mod:`jaxpapers.steam._scoa`, the identity without SCOA). A router
turns a summary ``g`` of the input (pooled features of a frame for the spatial experts, of a whole
video for the temporal experts) into weights ``w = softmax_e(cos(g - c, k_e - c) / tau)`` over the
experts' keys ``k_e`` (the mean summary of the task each expert was made for; ``c`` the mean of
the keys that exist yet): L2P's cosine query-key match, made soft. Every expert contributes in
proportion to how well the input matches its task, instead of one prompt being retrieved by an
argmax (L2P). The centring is needed at this size: pooled features of different tasks share a
large common component (the neck's bias and the mean ReLU response), so uncentred they are nearly
parallel and a cosine barely separates them; about the keys' mean, two keys point in opposite
directions and more keys spread around it. The adapter adds ``sum_e w_e B_e A_e P_e x`` to its
input.
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
    """Soft routing weights ``softmax_e(cos(g - c, k_e - c) / temperature)``; they sum to one.

    ``c`` is the mean of the active keys (cosine about the keys' centre: see the module
    docstring). With one active key there is nothing to choose: it gets weight 1. The logits lie
    in ``[-1, 1] / temperature``, so at ``temperature = 0.05`` an input whose cosine to its own
    key exceeds that to another key by 1 gives the other ``exp(-20) ~ 2e-9`` of the weight (below
    float32 resolution next to 1: the weights are one-hot to round-off).

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
    on = jnp.ones((e,), keys.dtype) if active is None else active.astype(keys.dtype)
    centre = (on @ keys) / jnp.maximum(jnp.sum(on), 1.0)
    k = keys - centre[None]
    g = summary - centre.reshape((1,) * (summary.ndim - 1) + centre.shape)
    k_unit = k / (jnp.linalg.norm(k, axis=-1, keepdims=True) + 1e-12)
    g_unit = g / (jnp.linalg.norm(g, axis=-1, keepdims=True) + 1e-12)
    cos = g_unit @ k_unit.T
    # With fewer than two active keys there is nothing to choose between: uniform logits.
    logits = jnp.where(jnp.sum(on) > 1, cos / temperature, 0.0)
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
