"""The three recurrences as pure functions of gates and inputs: LRU, H-LRU and BD-LRU.

These are the flax-free cores of the layers in ``_layers.py``: they take already projected
gates/inputs and return the hidden states.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from jaxtyping import Array, Complex, Float

from jaxpapers.core.checks import check_dtype, check_finite, check_shape
from jaxpapers.lrnn._scan import block_scan, companion_scan, diagonal_scan


def l1_normalise(gates: Float[Array, "... m"]) -> Float[Array, "... m"]:
    """Selective gate normalisation: scale each gate row into the unit L1 ball.

    .. math:: \\alpha = g / \\max(1, \\lVert g \\rVert_1)

    Rows with ``||g||_1 <= 1`` pass unchanged (so a layer may still forget); larger rows are scaled
    onto the sphere. The last axis is one row: for H-LRU the ``K`` coefficients of one channel
    and its input gate, for BD-LRU one row of a block and its input gate.
    """
    if jnp.ndim(gates) < 1:
        raise ValueError(f"gates has shape {jnp.shape(gates)}; expected at least one axis")
    check_dtype("gates", gates, "inexact")
    check_finite("gates", gates)
    norm = jnp.sum(jnp.abs(gates), axis=-1, keepdims=True)
    return gates / jnp.maximum(norm, 1.0)


def _check_lru_params(nu_log: Any, theta_log: Any) -> None:
    check_dtype("nu_log", nu_log, "floating")
    check_dtype("theta_log", theta_log, "floating")
    if jnp.ndim(nu_log) != 1:
        raise ValueError(f"nu_log has shape {jnp.shape(nu_log)}; expected [N]")
    check_shape("theta_log", theta_log, jnp.shape(nu_log))
    check_finite("nu_log", nu_log)
    check_finite("theta_log", theta_log)


def lru_lambda(nu_log: Float[Array, " N"], theta_log: Float[Array, " N"]) -> Complex[Array, " N"]:
    """Diagonal LRU eigenvalues ``lambda = exp(-exp(nu_log) + i exp(theta_log))`` (Orvieto 2023)."""
    _check_lru_params(nu_log, theta_log)
    return jnp.exp(-jnp.exp(nu_log) + 1j * jnp.exp(theta_log))


def lru_recurrence(
    nu_log: Float[Array, " N"],
    theta_log: Float[Array, " N"],
    inputs: Complex[Array, "*batch T N"],
    h0: Complex[Array, "*batch N"] | None = None,
    *,
    mode: str = "auto",
    chunk: int = 64,
) -> Complex[Array, "*batch T N"]:
    """States of the diagonal LRU ``h_t = lambda * h_{t-1} + u_t`` (input already scaled by gamma).

    Args:
      nu_log, theta_log: ``[N]`` eigenvalue parameters (see :func:`lru_lambda`).
      inputs: ``[..., T, N]`` complex inputs ``u_t = gamma * (B x_t)``.
      h0: ``[..., N]`` initial state.
      mode, chunk: scan order (see :mod:`jaxpapers.lrnn._scan`).

    Returns:
      ``[..., T, N]`` complex states.
    """
    _check_lru_params(nu_log, theta_log)
    check_dtype("inputs", inputs, "complex")
    if jnp.ndim(inputs) < 2 or jnp.shape(inputs)[-1] != jnp.shape(nu_log)[0]:
        raise ValueError(
            f"inputs has shape {jnp.shape(inputs)}; expected [..., T, N] with N = "
            f"{jnp.shape(nu_log)[0]} to match nu_log"
        )
    check_finite("inputs", inputs)
    if h0 is not None:
        check_dtype("h0", h0, "complex")
        check_finite("h0", h0)
    lam = lru_lambda(nu_log, theta_log).astype(inputs.dtype)
    return diagonal_scan(jnp.broadcast_to(lam, inputs.shape), inputs, h0, mode=mode, chunk=chunk)


def hlru_recurrence(
    gates: Float[Array, "*batch T N K1"],
    values: Float[Array, "*batch T N"],
    h0: Float[Array, "*batch N K"] | None = None,
    *,
    mode: str = "auto",
    chunk: int = 64,
) -> Float[Array, "*batch T N"]:
    """States of the order-``K`` H-LRU with L1-normalised selective gates.

    With ``(alpha_{t,1..K}, alpha_{t,0}) = l1_normalise(gates_t)`` per channel,

    .. math:: h_t = \\sum_{k=1}^K \\alpha_{t,k} h_{t-k} + \\alpha_{t,0} v_t,

    and ``sum_k |alpha_{t,k}| + |alpha_{t,0}| <= 1`` gives ``|h_t| <= max_s |v_s|`` for every
    input sequence (module docstring of :mod:`jaxpapers.lrnn`).

    Args:
      gates: ``[..., T, N, K + 1]`` raw gates: ``K`` recurrence coefficients, then the input gate.
      values: ``[..., T, N]`` values ``v_t``.
      h0: ``[..., N, K]`` initial window.
      mode, chunk: scan order.

    Returns:
      ``[..., T, N]`` states.
    """
    if jnp.ndim(gates) < 3 or jnp.shape(gates)[-1] < 2:
        raise ValueError(
            f"gates has shape {jnp.shape(gates)}; expected [..., T, N, K + 1] with order K >= 1"
        )
    if jnp.shape(gates)[:-1] != jnp.shape(values):
        raise ValueError(
            f"values has shape {jnp.shape(values)}; expected {jnp.shape(gates)[:-1]} to match "
            f"gates {jnp.shape(gates)}"
        )
    check_dtype("values", values, "floating")
    check_finite("values", values)
    if h0 is not None:
        check_finite("h0", h0)
    alpha = l1_normalise(gates)
    return companion_scan(alpha[..., :-1], alpha[..., -1] * values, h0, mode=mode, chunk=chunk)


def bdlru_recurrence(
    gates: Float[Array, "*batch T G n n1"],
    values: Float[Array, "*batch T N"],
    h0: Float[Array, "*batch N"] | None = None,
    *,
    mode: str = "auto",
    chunk: int = 64,
) -> Float[Array, "*batch T N"]:
    """States of the BD-LRU: ``G`` dense ``n x n`` blocks with row-wise L1-normalised gates.

    Row ``i`` of block ``g`` is ``(A_{t,g,i,1..n}, alpha_{t,g,i}) = l1_normalise(gates_{t,g,i})``:

    .. math:: h_{t,g} = A_{t,g} h_{t-1,g} + \\alpha_{t,g} \\odot v_{t,g},

    so ``||A_{t,g}||_inf + |alpha| <= 1`` row by row and ``||h_t||_inf <= max_s ||v_s||_inf``.

    Args:
      gates: ``[..., T, G, n, n + 1]`` raw gates: each row's ``n`` transition entries, then its
        input gate.
      values: ``[..., T, N]`` with ``N = G n``.
      h0: ``[..., N]`` initial state.
      mode, chunk: scan order.

    Returns:
      ``[..., T, N]`` states.
    """
    sg = jnp.shape(gates)
    if len(sg) < 4 or sg[-1] != sg[-2] + 1:
        raise ValueError(f"gates has shape {sg}; expected [..., T, G, n, n + 1]")
    g, n = sg[-3], sg[-2]
    if jnp.shape(values) != (*sg[:-3], g * n):
        raise ValueError(
            f"values has shape {jnp.shape(values)}; expected {(*sg[:-3], g * n)} (G * n = "
            f"{g} * {n})"
        )
    check_dtype("values", values, "floating")
    check_finite("values", values)
    if h0 is not None:
        check_finite("h0", h0)
    alpha = l1_normalise(gates)
    v = values.reshape(*sg[:-3], g, n)
    h0b = None if h0 is None else jnp.reshape(h0, (*jnp.shape(h0)[:-1], g, n))
    hs = block_scan(alpha[..., :-1], alpha[..., -1] * v, h0b, mode=mode, chunk=chunk)
    return hs.reshape(*sg[:-3], g * n)
