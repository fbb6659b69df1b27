"""DASH: distribution-aware spatial-temporal scaling and shifting of pretrained features.

Video level (static, per task): ``y = gamma * x + beta`` per channel (SSF), initialised from
feature statistics so that a task's features ``x`` (mean ``mu_t``, std ``sigma_t``) are mapped onto
the pretrained reference distribution (``mu_0``, ``sigma_0``): ``gamma = sigma_0 / sigma_t``,
``beta = mu_0 - gamma mu_t``. Because the map is affine per channel, it folds into a preceding
linear layer ``x = W h + b``: ``y = (W diag(gamma)) h + (gamma b + beta)``, so inference costs
nothing extra.

Frame level (dynamic): one map per task is right for the task's average frame only; a frame whose
own feature distribution sits elsewhere (another background patch, more object pixels) needs
another scale and shift. Write the ideal map as a function ``(gamma, beta)(g)`` of the frame's
pooled feature ``g`` (its first moment, the routing summary) and expand it to first order about
the task's key ``k`` (the task's mean summary): ``gamma(g) = gamma + (g - k) G``,
``beta(g) = beta + (g - k) H`` with learned ``G, H [D, D]`` (:class:`DashSlope`), zero at
initialisation, so a fresh map is the static one and a frame at its task's mean gets the static
map exactly. The dynamic part is a per-frame FiLM and does not fold into the neck.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_finite, check_int, check_positive


class ScaleShift(NamedTuple):
    """Per-channel scale ``gamma [D]`` and shift ``beta [D]`` (leading axes allowed)."""

    gamma: Float[Array, "*e d"]
    beta: Float[Array, "*e d"]


class DashSlope(NamedTuple):
    """Frame-level DASH: slopes ``G = d gamma / d g`` and ``H = d beta / d g``, ``[D, D]`` each
    (leading axes allowed), of the scale and shift in the frame summary ``g``."""

    gamma: Float[Array, "*e d d"]
    beta: Float[Array, "*e d d"]


def identity_scale_shift(dim: int) -> ScaleShift:
    """``gamma = 1``, ``beta = 0``: the map that leaves features unchanged."""
    check_int("dim", dim, minimum=1)
    return ScaleShift(jnp.ones((dim,), jnp.float32), jnp.zeros((dim,), jnp.float32))


def feature_moments(x: Float[Array, "*n d"]) -> tuple[Float[Array, " d"], Float[Array, " d"]]:
    """Per-channel mean and standard deviation over every leading axis of ``x``."""
    if x.ndim < 2:
        raise ValueError(f"x has shape {x.shape}; expected [..., N, D] features")
    check_finite("x", x)
    flat = x.reshape(-1, x.shape[-1])
    return flat.mean(0), flat.std(0)


def dash_init(
    x: Float[Array, "*n d"],
    reference_mean: Float[Array, " d"],
    reference_std: Float[Array, " d"],
    *,
    eps: float = 1e-5,
) -> ScaleShift:
    """DASH initialisation: the per-channel affine map taking the moments of ``x`` to the reference.

    Args:
      x: a task's features ``[..., D]``.
      reference_mean, reference_std: ``[D]`` moments of the pretrained (first-task) features.
      eps: added to the task's std (dead channels keep ``gamma`` finite).

    Returns:
      :class:`ScaleShift` with ``gamma = ref_std / (std + eps)``, ``beta = ref_mean - gamma mean``.
    """
    check_positive("eps", eps)
    mean, std = feature_moments(x)
    d = x.shape[-1]
    for name, v in (("reference_mean", reference_mean), ("reference_std", reference_std)):
        if jnp.shape(v) != (d,):
            raise ValueError(f"{name} has shape {jnp.shape(v)}; expected ({d},)")
        check_finite(name, v)
    gamma = reference_std / (std + eps)
    return ScaleShift(gamma, reference_mean - gamma * mean)


def scale_shift(x: Float[Array, "*b d"], ss: ScaleShift) -> Float[Array, "*b d"]:
    """``gamma * x + beta`` over the last axis."""
    if jnp.ndim(x) < 1 or jnp.shape(x)[-1:] != jnp.shape(ss.gamma)[-1:]:
        raise ValueError(
            f"x has shape {jnp.shape(x)}; expected [..., {jnp.shape(ss.gamma)[-1]}] to match gamma"
        )
    lead = (1,) * (x.ndim - 1)
    return x * ss.gamma.reshape(*lead, -1) + ss.beta.reshape(*lead, -1)


def fold_scale_shift(
    kernel: Float[Array, "k d"], bias: Float[Array, " d"], ss: ScaleShift
) -> tuple[Float[Array, "k d"], Float[Array, " d"]]:
    """Fold ``y = gamma * (h @ kernel + bias) + beta`` into one linear layer ``h @ K' + b'``.

    Returns:
      ``(kernel * gamma, bias * gamma + beta)``.
    """
    if kernel.ndim != 2 or bias.shape != kernel.shape[1:]:
        raise ValueError(
            f"kernel has shape {kernel.shape}, bias {bias.shape}; expected [K, D] and [D]"
        )
    if ss.gamma.shape != bias.shape or ss.beta.shape != bias.shape:
        raise ValueError(
            f"gamma has shape {ss.gamma.shape}, beta {ss.beta.shape}; expected {bias.shape}"
        )
    return kernel * ss.gamma[None, :], bias * ss.gamma + ss.beta


def dynamic_scale_shift(
    x: Float[Array, "*b n d"],
    summary: Float[Array, "*b d"],
    anchor: Float[Array, " d"],
    ss: ScaleShift,
    slope: DashSlope,
) -> Float[Array, "*b n d"]:
    """Frame-level DASH: ``gamma(g) * x + beta(g)`` with ``gamma(g) = gamma + (g - k) G`` and
    ``beta(g) = beta + (g - k) H`` (see the module docstring).

    Args:
      x: ``[..., N, D]`` tokens of each frame (rows share the frame's map).
      summary: ``[..., D]`` each frame's summary ``g``.
      anchor: ``[D]`` the expansion point: the task's routing key ``k`` (its mean summary). (Not
        named ``key``: in this package ``key`` is a PRNG key, keyword-only.)
      ss: the task's static :class:`ScaleShift` (``[D]`` fields).
      slope: the task's :class:`DashSlope` (``[D, D]`` fields).
    """
    d = ss.gamma.shape[-1]
    if jnp.ndim(x) < 2 or jnp.shape(x)[-1] != d:
        raise ValueError(f"x has shape {jnp.shape(x)}; expected [..., N, {d}]")
    want = (*jnp.shape(x)[:-2], d)
    if jnp.shape(summary) != want:
        raise ValueError(f"summary has shape {jnp.shape(summary)}; expected {want}")
    if (
        jnp.shape(anchor) != (d,)
        or jnp.shape(slope.gamma) != (d, d)
        or jnp.shape(slope.beta) != (d, d)
    ):
        raise ValueError(
            f"anchor has shape {jnp.shape(anchor)}, slope {jnp.shape(slope.gamma)}; expected "
            f"({d},) and ({d}, {d})"
        )
    lead = (1,) * (jnp.ndim(summary) - 1)
    dev = summary - anchor.reshape(*lead, d)
    gamma = ss.gamma.reshape(*lead, d) + dev @ slope.gamma
    beta = ss.beta.reshape(*lead, d) + dev @ slope.beta
    return x * gamma[..., None, :] + beta[..., None, :]
