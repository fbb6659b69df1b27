"""CAMs of the labelled classes, seed masks, masked average pooling and label-set checks.

Index convention for every ``[..., C + 1]`` axis in this package: 0 is the background, ``c + 1``
is object class ``c`` (as in the class masks of :mod:`jaxpapers.core.data.scenes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_finite, check_int, check_positive, is_concrete

_EPS = 1e-6


class RefineConfig(eqx.Module):
    """Thresholds and mixing weights shared by every method.

    Attributes:
      fg_threshold: a pixel seeds class ``c`` when ``c`` has the largest normalised CAM among the
        labelled classes and that CAM is at least this.
      bg_threshold: a pixel seeds the background when every labelled class's CAM is below this.
      cam_background: constant background score of the plain-CAM pseudo-mask.
      alpha: weight of the global (memory-bank) prototype in the refined prototype
        ``r = normalise((1 - alpha) l / |l| + alpha g / |g|)``.
      temperature: softmax temperature of the attention from a local prototype to its class's
        global prototypes, and of the pixel-to-prototype logits in the PRDC training loss.
    """

    fg_threshold: float = eqx.field(static=True, default=0.5)
    bg_threshold: float = eqx.field(static=True, default=0.2)
    cam_background: float = eqx.field(static=True, default=0.4)
    alpha: float = eqx.field(static=True, default=0.5)
    temperature: float = eqx.field(static=True, default=0.1)

    def __check_init__(self) -> None:
        for name in ("fg_threshold", "bg_threshold", "cam_background", "alpha"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name}={v!r}; expected a value in [0, 1]")
        if self.bg_threshold > self.fg_threshold:
            raise ValueError(
                f"bg_threshold={self.bg_threshold} > fg_threshold={self.fg_threshold}; expected "
                "bg_threshold <= fg_threshold"
            )
        check_positive("temperature", self.temperature)


class Prototypes(NamedTuple):
    """Masked-average-pooled prototypes ``[B, C + 1, D]`` and their pooled mass ``[B, C + 1]``
    (number of seed pixels; 0 where a class has no seed)."""

    prototypes: Float[Array, "b n d"]
    mass: Float[Array, "b n"]


def labels_from_sets(label_sets: Sequence[Sequence[int]], num_classes: int) -> jax.Array:
    """Multi-hot image labels ``[B, num_classes]`` from per-image class lists.

    Raises:
      ValueError: naming ``label_sets`` when a set holds a class outside ``[0, num_classes)``.
    """
    if not (isinstance(num_classes, int) and num_classes >= 1):
        raise ValueError(f"num_classes={num_classes!r}; expected a positive integer")
    out = np.zeros((len(label_sets), num_classes), np.float32)
    for i, s in enumerate(label_sets):
        for c in s:
            if not (isinstance(c, int | np.integer) and 0 <= c < num_classes):
                raise ValueError(
                    f"label_sets[{i}]={list(s)!r} holds the unknown class {c!r}; expected "
                    f"classes in [0, {num_classes})"
                )
            out[i, c] = 1.0
    return jnp.asarray(out)


def check_labels_multi_hot(labels: jax.Array, batch: int, num_classes: int) -> None:
    """``labels`` must be ``[batch, num_classes]`` with 0/1 entries (checked when concrete)."""
    if labels.shape != (batch, num_classes):
        raise ValueError(
            f"labels has shape {labels.shape}; expected [{batch}, {num_classes}] multi-hot "
            "(a label set naming a class the classifier does not have is an unknown class)"
        )
    if is_concrete(labels):
        arr = np.asarray(labels)
        if not np.isin(arr, (0, 1)).all():
            raise ValueError("labels holds values other than 0 and 1; expected multi-hot labels")


def class_activation_maps(
    features: Float[Array, "b h w d"], weights: Float[Array, "d c"], labels: Float[Array, "b c"]
) -> Float[Array, "b h w c"]:
    """Normalised CAMs of the labelled classes: ``relu(A W_c) / max_ij relu(A W_c)``; 0 for the
    classes an image is not labelled with.

    Args:
      features: last feature map ``A`` of a GAP-linear classifier.
      weights: the head's kernel ``W`` (``logits = mean_ij A_ij W + b``).
      labels: multi-hot image labels.
    """
    if features.ndim != 4:
        raise ValueError(f"features has shape {features.shape}; expected [B, h, w, D]")
    if weights.ndim != 2 or weights.shape[0] != features.shape[-1]:
        raise ValueError(
            f"weights has shape {weights.shape}; expected [{features.shape[-1]}, classes]"
        )
    check_labels_multi_hot(labels, features.shape[0], weights.shape[1])
    check_finite("features", features)
    check_finite("weights", weights)
    cam = jax.nn.relu(jnp.einsum("bhwd,dc->bhwc", features, weights))
    peak = jnp.max(cam, axis=(1, 2), keepdims=True)
    return cam / jnp.maximum(peak, _EPS) * labels[:, None, None, :]


def seed_masks(
    cams: Float[Array, "b h w c"], labels: Float[Array, "b c"], *, config: RefineConfig
) -> Float[Array, "b h w n"]:
    """0/1 seeds ``[B, h, w, C + 1]`` (index 0 background): confident CAM peaks and clear
    background; uncertain pixels seed nothing."""
    if jnp.ndim(cams) != 4:
        raise ValueError(f"cams has shape {jnp.shape(cams)}; expected [B, h, w, C]")
    check_finite("cams", cams)
    check_labels_multi_hot(labels, cams.shape[0], cams.shape[-1])
    masked = jnp.where(labels[:, None, None, :] > 0, cams, -1.0)
    top = jnp.max(masked, axis=-1)
    arg = jnp.argmax(masked, axis=-1)
    fg = jax.nn.one_hot(arg, cams.shape[-1]) * (top >= config.fg_threshold)[..., None]
    bg = (top < config.bg_threshold).astype(cams.dtype)
    return jnp.concatenate([bg[..., None], fg], axis=-1)


def masked_average_pool(
    features: Float[Array, "b h w d"], weights: Float[Array, "b h w n"]
) -> Prototypes:
    """``p_n = sum_ij w_ijn A_ij / sum_ij w_ijn`` per image (0 where the mass is 0)."""
    if jnp.ndim(features) != 4:
        raise ValueError(f"features has shape {jnp.shape(features)}; expected [B, h, w, D]")
    if jnp.ndim(weights) != 4 or weights.shape[:3] != features.shape[:3]:
        raise ValueError(
            f"weights has shape {weights.shape}; expected {features.shape[:3]} + [classes]"
        )
    mass = jnp.sum(weights, axis=(1, 2))
    total = jnp.einsum("bhwn,bhwd->bnd", weights, features)
    return Prototypes(total / jnp.maximum(mass, _EPS)[..., None], mass)


def normalise(x: jax.Array, axis: int = -1) -> jax.Array:
    """``x / |x|`` along ``axis`` (0 stays 0)."""
    check_int("axis", axis)
    if not -jnp.ndim(x) <= axis < jnp.ndim(x):
        raise ValueError(f"axis={axis}; expected an axis of x, which has shape {jnp.shape(x)}")
    return x / jnp.maximum(jnp.linalg.norm(x, axis=axis, keepdims=True), _EPS)


__all__ = [
    "Prototypes",
    "RefineConfig",
    "check_labels_multi_hot",
    "class_activation_maps",
    "labels_from_sets",
    "masked_average_pool",
    "normalise",
    "seed_masks",
]
