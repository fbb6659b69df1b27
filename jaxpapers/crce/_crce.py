"""Context-Regularized Cross-Entropy: cross-entropy plus a penalty on the attribution on context.

``L = CE(y, label) + beta * mean_b (sum_ij M_ij r_ij)^2`` where ``M`` is the attribution map of the
true class (ContrastiveCAM by default; Grad-CAM for the baseline regulariser) and ``r`` in
``[0, 1]`` marks context cells: either known (the background fraction of each cell, from object
masks) or estimated from the map itself (cells below the map's mean magnitude, held fixed).
For ContrastiveCAM, ``sum_ij M_ij r_ij`` is the part of the logit margin that the map assigns to
context (the map sums to the margin minus the bias margin), so the penalty is in logit units.
``penalty="share"`` is the earlier form ``sum |M| r / sum |M|`` (scale-free: only a vanishing map
escapes it, and training collapsed to a constant predictor; see :mod:`jaxpapers.crce`);
``penalty="absolute"`` is ``|sum M r|`` (degree one in the map: it collapses when ``beta`` times
the context fraction of the margin exceeds 1/2). Both are kept for comparison.
The attribution is a gradient of the head, so training differentiates through it (one extra
backward through the head; the head of a GAP CNN is linear, so the second-order term is cheap).
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_finite, check_labels, check_range, check_shape, is_concrete
from jaxpapers.crce._cams import Head, contrastive_cam, grad_cam

ATTRIBUTIONS = ("contrastive", "gradcam")
CONTEXTS = ("mask", "estimated")
PENALTIES = ("squared", "absolute", "share")


class CRCE(eqx.Module):
    """Settings of the context regulariser.

    Attributes:
      beta: weight of the context penalty (0 = plain cross-entropy).
      attribution: ``"contrastive"`` (CR-CE) or ``"gradcam"`` (Grad-CAM-regularised CE).
      context: ``"mask"`` (known context cells) or ``"estimated"`` (from the map itself).
      penalty: ``"squared"`` ``(sum M r)^2`` (default), ``"absolute"`` ``|sum M r|`` or
        ``"share"`` ``sum |M| r / sum |M|`` (the earlier, collapsing form).
    """

    beta: float | jax.Array = 1.0
    attribution: str = eqx.field(static=True, default="contrastive")
    context: str = eqx.field(static=True, default="mask")
    penalty: str = eqx.field(static=True, default="squared")

    def __check_init__(self) -> None:
        if self.penalty not in PENALTIES:
            raise ValueError(f"penalty={self.penalty!r}; expected one of {PENALTIES}")
        if self.attribution not in ATTRIBUTIONS:
            raise ValueError(f"attribution={self.attribution!r}; expected one of {ATTRIBUTIONS}")
        if self.context not in CONTEXTS:
            raise ValueError(f"context={self.context!r}; expected one of {CONTEXTS}")
        if is_concrete(self.beta) and float(self.beta) < 0:
            raise ValueError(f"beta={self.beta!r}; expected >= 0")


class CRCELoss(NamedTuple):
    """``loss = ce + beta * penalty`` (means over the batch) and the attribution maps."""

    loss: Float[Array, ""]
    ce: Float[Array, ""]
    penalty: Float[Array, ""]
    maps: Float[Array, "b h w"]


def _check_maps(saliency: jax.Array, context: jax.Array) -> None:
    if jnp.ndim(saliency) != 3:
        raise ValueError(f"saliency has shape {jnp.shape(saliency)}; expected [B, h, w]")
    check_shape("context", context, jnp.shape(saliency))
    check_finite("saliency", saliency)
    check_range("context", context, 0.0, 1.0)


def context_share(
    saliency: Float[Array, "b h w"], context: Float[Array, "b h w"]
) -> Float[Array, " b"]:
    """``sum |M| r / sum |M|``: the share of attribution magnitude on context cells."""
    _check_maps(saliency, context)
    mag = jnp.abs(saliency)
    return jnp.sum(mag * context, (1, 2)) / (jnp.sum(mag, (1, 2)) + 1e-8)


def context_evidence(
    saliency: Float[Array, "b h w"], context: Float[Array, "b h w"]
) -> Float[Array, " b"]:
    """``sum_ij M_ij r_ij``: the signed attribution on context cells (for ContrastiveCAM, the part
    of the logit margin that the map assigns to context)."""
    _check_maps(saliency, context)
    return jnp.sum(saliency * context, (1, 2))


def estimated_context(saliency: Float[Array, "b h w"]) -> Float[Array, "b h w"]:
    """Cells whose magnitude is below the image's mean magnitude (a fixed, non-learned mask)."""
    if jnp.ndim(saliency) != 3:
        raise ValueError(f"saliency has shape {jnp.shape(saliency)}; expected [B, h, w]")
    check_finite("saliency", saliency)
    mag = jax.lax.stop_gradient(jnp.abs(saliency))
    return (mag < jnp.mean(mag, axis=(1, 2), keepdims=True)).astype(saliency.dtype)


def cr_ce_loss(
    head: Head,
    features: Float[Array, "b h w k"],
    labels: Int[Array, " b"],
    context: Float[Array, "b h w"] | None = None,
    *,
    config: CRCE,
) -> CRCELoss:
    """CR-CE (or its Grad-CAM variant) for a network split into features and ``head``.

    Args:
      head: maps features ``[B, h, w, K]`` to logits ``[B, C]``.
      features: the last feature map of the images.
      labels: ``[B]`` true classes.
      context: ``[B, h, w]`` context fraction of each cell (:func:`cell_fractions` of the
        background mask); required when ``config.context == "mask"``.
      config: :class:`CRCE`.

    Returns:
      :class:`CRCELoss` (differentiable w.r.t. the features and the head's parameters).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxpapers.crce import CRCE, cr_ce_loss
        >>> w = jax.random.normal(jax.random.key(0), (3, 2))
        >>> head = lambda a: jnp.mean(a, axis=(1, 2)) @ w
        >>> a = jax.random.uniform(jax.random.key(1), (4, 2, 2, 3))
        >>> ctx = jnp.zeros((4, 2, 2)).at[:, 0].set(1.0)
        >>> out = cr_ce_loss(head, a, jnp.array([0, 1, 0, 1]), ctx, config=CRCE(beta=0.5))
        >>> bool(jnp.isclose(out.loss, out.ce + 0.5 * out.penalty))
        True
    """
    if not isinstance(config, CRCE):
        raise ValueError(f"config must be a CRCE; got {type(config).__name__}")
    if features.ndim != 4:
        raise ValueError(f"features has shape {features.shape}; expected [B, h, w, K]")
    check_finite("features", features)
    b, h, w, _ = features.shape
    check_shape("labels", labels, (b,))
    logits = head(features)
    check_labels("labels", labels, logits.shape[1])
    if config.context == "mask":
        if context is None:
            raise ValueError("context is required with config.context='mask'")
        check_shape("context", context, (b, h, w))
        check_range("context", context, 0.0, 1.0)
    attribute = contrastive_cam if config.attribution == "contrastive" else grad_cam
    kwargs = {} if config.attribution == "contrastive" else {"relu": False}
    maps = attribute(head, features, labels, **kwargs)
    region = estimated_context(maps) if config.context == "estimated" else context
    if config.penalty == "share":
        penalty = jnp.mean(context_share(maps, region))
    elif config.penalty == "absolute":
        penalty = jnp.mean(jnp.abs(context_evidence(maps, region)))
    else:
        penalty = jnp.mean(jnp.square(context_evidence(maps, region)))
    ce = jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))
    return CRCELoss(ce + config.beta * penalty, ce, penalty, maps)


__all__ = [
    "CRCE",
    "CRCELoss",
    "context_evidence",
    "context_share",
    "cr_ce_loss",
    "estimated_context",
]
