"""Self-distillation pieces of DINO/iBOT and the CODI target: targets, loss, centring, schedules.

Teacher targets are ``t = softmax((z_t - c) / tau_t)`` with a running centre ``c``; the student is
trained with the cross-entropy ``H(t, s) = -sum_k t_k log softmax(z_s / tau_s)_k``, whose gradient
w.r.t. the student logits is ``(softmax(z_s / tau_s) - t) / tau_s``. CODI replaces every teacher
patch target by ``(1 - lambda) t_patch + lambda t_cls`` (the teacher's [CLS] distribution of the
same view); ``lambda = 0`` leaves the patch target untouched bit for bit. The EMA teacher uses
:func:`jaxpapers.core.pytrees.ema_update`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_ndim, check_range, is_concrete


def teacher_targets(
    logits: Float[Array, "*b k"], center: Float[Array, " k"], temperature: float | jax.Array
) -> Float[Array, "*b k"]:
    """``softmax((logits - center) / temperature)`` (no gradient flows to the teacher)."""
    if center.shape != logits.shape[-1:]:
        raise ValueError(f"center has shape {center.shape}; expected {logits.shape[-1:]}")
    z = (logits - center.reshape((1,) * (logits.ndim - 1) + center.shape)) / temperature
    return jax.lax.stop_gradient(jax.nn.softmax(z, axis=-1))


def check_lambda(lam: float | jax.Array) -> None:
    """``ValueError`` unless a concrete ``lam`` lies in ``[0, 1]``."""
    if is_concrete(lam):
        arr = np.asarray(lam)  # not jnp: under a trace jnp would stage a tracer
        if arr.ndim or not 0.0 <= float(arr) <= 1.0:
            raise ValueError(f"lam={lam!r}; expected a scalar in [0, 1]")


def codi_targets(
    patch_targets: Float[Array, "b n k"],
    cls_targets: Float[Array, "b k"],
    lam: float | Float[Array, ""],
) -> Float[Array, "b n k"]:
    """CODI patch targets ``(1 - lam) t_patch + lam t_cls`` (``t_cls`` broadcast over patches).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxpapers.codi import codi_targets
        >>> tp = jnp.array([[[1.0, 0.0], [0.0, 1.0]]])
        >>> out = codi_targets(tp, jnp.array([[0.5, 0.5]]), 0.2)[0]
        >>> [[round(float(v), 4) for v in row] for row in out]
        [[0.9, 0.1], [0.1, 0.9]]
    """
    check_lambda(lam)
    if patch_targets.ndim != 3 or cls_targets.shape != (
        patch_targets.shape[0],
        patch_targets.shape[2],
    ):
        raise ValueError(
            f"patch_targets {patch_targets.shape} and cls_targets {cls_targets.shape}; expected "
            "[B, N, K] and [B, K]"
        )
    return (1.0 - lam) * patch_targets + lam * cls_targets[:, None, :]


def distillation_loss(
    student_logits: Float[Array, "*b k"],
    targets: Float[Array, "*b k"],
    temperature: float | jax.Array,
    weights: Float[Array, "*b"] | None = None,
) -> Float[Array, ""]:
    """Weighted mean over tokens of ``H(t, softmax(z_s / temperature))``.

    Args:
      student_logits: student logits.
      targets: teacher distributions of the same shape.
      temperature: student temperature ``tau_s``.
      weights: optional per-token weights (e.g. the mask of masked patches); mean if ``None``.
    """
    if student_logits.shape != targets.shape:
        raise ValueError(
            f"student_logits {student_logits.shape} and targets {targets.shape} must match"
        )
    h = -jnp.sum(targets * jax.nn.log_softmax(student_logits / temperature, axis=-1), axis=-1)
    if weights is None:
        return jnp.mean(h)
    if weights.shape != h.shape:
        raise ValueError(f"weights has shape {weights.shape}; expected {h.shape}")
    return jnp.sum(h * weights) / jnp.maximum(jnp.sum(weights), 1.0)


def update_center(
    center: Float[Array, " k"], teacher_logits: Float[Array, "*b k"], momentum: float = 0.9
) -> Float[Array, " k"]:
    """``momentum * center + (1 - momentum) * mean(teacher_logits)`` over all leading axes."""
    check_ndim("center", center, 1)
    if np.ndim(teacher_logits) < 1 or np.shape(teacher_logits)[-1] != center.shape[0]:
        raise ValueError(
            f"teacher_logits has shape {np.shape(teacher_logits)}; expected [..., "
            f"{center.shape[0]}] (the width of center)"
        )
    check_range("momentum", momentum, 0.0, 1.0)
    mean = jnp.mean(teacher_logits.reshape(-1, teacher_logits.shape[-1]), axis=0)
    return momentum * center + (1.0 - momentum) * jax.lax.stop_gradient(mean)


def teacher_temperature(
    step: jax.Array, warmup_steps: int, start: float = 0.04, end: float = 0.07
) -> jax.Array:
    """Linear warm-up of the teacher temperature from ``start`` to ``end``, then constant."""
    check_range("start", start, 0.0, low_open=True)
    check_range("end", end, 0.0, low_open=True)
    frac = jnp.clip(step / max(warmup_steps, 1), 0.0, 1.0)
    return start + (end - start) * frac


def teacher_momentum(step: jax.Array, total_steps: int, base: float = 0.996) -> jax.Array:
    """Cosine schedule of the EMA momentum from ``base`` to 1 over ``total_steps``."""
    check_range("base", base, 0.0, 1.0)
    frac = jnp.clip(step / max(total_steps, 1), 0.0, 1.0)
    return 1.0 - (1.0 - base) * (jnp.cos(jnp.pi * frac) + 1.0) / 2.0


__all__ = [
    "codi_targets",
    "distillation_loss",
    "teacher_momentum",
    "teacher_targets",
    "teacher_temperature",
    "update_center",
]
