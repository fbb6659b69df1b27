"""Segmentation metrics: confusion matrix, per-class IoU / mIoU, and boundary F1.

* :func:`confusion_matrix` counts ``(true, predicted)`` label pairs over every pixel of a batch;
  :func:`iou_from_confusion` and :func:`mean_iou` turn it into per-class IoU
  ``TP / (TP + FP + FN)`` and its mean over the classes that occur (in the truth or the
  prediction). Accumulating one confusion matrix over a data set is the PASCAL VOC convention.
* :func:`boundary_f1` is the boundary F-measure of Perazzi et al. (DAVIS) / Csurka et al.: a pixel
  is a boundary pixel when a 4-neighbour has another label; predicted boundary pixels within
  ``tolerance`` pixels (Chebyshev distance) of a true boundary pixel are correct (precision), and
  true boundary pixels within ``tolerance`` of a predicted one are found (recall).

Everything is jittable; shapes are ``[..., H, W]`` integer label maps.

Examples:
    >>> import jax.numpy as jnp
    >>> from jaxpapers.core.segmentation_metrics import boundary_f1, mean_iou
    >>> t = jnp.zeros((1, 8, 8), jnp.int32).at[:, 2:6, 2:6].set(1)
    >>> float(mean_iou(t, t, 2)), float(boundary_f1(t, t))
    (1.0, 1.0)

References:
    Everingham et al., "The PASCAL Visual Object Classes Challenge", IJCV 2010.
    Perazzi et al., "A Benchmark Dataset and Evaluation Methodology for Video Object
    Segmentation" (boundary F), CVPR 2016, https://arxiv.org/abs/1704.00675.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from jaxpapers.core.checks import check_labels


def _check_pair(pred: jax.Array, target: jax.Array) -> None:
    if pred.shape != target.shape or pred.ndim < 2:
        raise ValueError(
            f"pred has shape {pred.shape} and target {target.shape}; expected equal shapes "
            "[..., H, W]"
        )


def confusion_matrix(
    pred: Int[Array, "*b h w"], target: Int[Array, "*b h w"], num_classes: int
) -> Float[Array, "n n"]:
    """``M[t, p]`` = number of pixels with true label ``t`` and predicted label ``p``."""
    _check_pair(pred, target)
    if num_classes < 1:
        raise ValueError(f"num_classes={num_classes}; expected >= 1")
    check_labels("pred", pred, num_classes)
    check_labels("target", target, num_classes)
    idx = target.reshape(-1) * num_classes + pred.reshape(-1)
    counts = jnp.zeros((num_classes * num_classes,), jnp.float32).at[idx].add(1.0)
    return counts.reshape(num_classes, num_classes)


def iou_from_confusion(confusion: Float[Array, "n n"]) -> tuple[jax.Array, jax.Array]:
    """Per-class IoU ``[n]`` and a ``[n]`` mask of the classes that occur (truth or prediction)."""
    if jnp.ndim(confusion) != 2 or jnp.shape(confusion)[0] != jnp.shape(confusion)[1]:
        raise ValueError(
            f"confusion has shape {jnp.shape(confusion)}; expected a square [n, n] matrix"
        )
    tp = jnp.diagonal(confusion)
    union = confusion.sum(0) + confusion.sum(1) - tp
    present = union > 0
    return jnp.where(present, tp / jnp.where(present, union, 1.0), 0.0), present


def mean_iou(
    pred: Int[Array, "*b h w"], target: Int[Array, "*b h w"], num_classes: int
) -> Float[Array, ""]:
    """Mean IoU over the classes that occur, from one confusion matrix over all pixels."""
    iou, present = iou_from_confusion(confusion_matrix(pred, target, num_classes))
    return jnp.sum(iou) / jnp.maximum(jnp.sum(present), 1)


def label_boundary(labels: Int[Array, "*b h w"]) -> Bool[Array, "*b h w"]:
    """Pixels with a 4-neighbour of another label (the image border is not a boundary)."""
    if jnp.ndim(labels) < 2:
        raise ValueError(f"labels has shape {jnp.shape(labels)}; expected [..., H, W]")
    pad = [(0, 0)] * (labels.ndim - 2) + [(1, 1), (1, 1)]
    p = jnp.pad(labels, pad, mode="edge")
    c = p[..., 1:-1, 1:-1]
    return (
        (p[..., :-2, 1:-1] != c)
        | (p[..., 2:, 1:-1] != c)
        | (p[..., 1:-1, :-2] != c)
        | (p[..., 1:-1, 2:] != c)
    )


def _dilate(mask: jax.Array, radius: int) -> jax.Array:
    """Binary dilation by a ``(2 radius + 1)^2`` square."""
    if radius == 0:
        return mask
    x = mask.reshape(-1, *mask.shape[-2:]).astype(jnp.float32)
    size = 2 * radius + 1
    pad = [(0, 0), (radius, radius), (radius, radius)]
    out = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, size, size), (1, 1, 1), pad)
    return (out > 0.5).reshape(mask.shape)


def boundary_f1(
    pred: Int[Array, "*b h w"], target: Int[Array, "*b h w"], tolerance: int = 1
) -> Float[Array, ""]:
    """Boundary F1 over all pixels of the batch (counts pooled before the ratio).

    Args:
      pred, target: label maps of equal shape ``[..., H, W]``.
      tolerance: a boundary pixel matches when a boundary pixel of the other map lies within this
        Chebyshev distance (0 = exact pixel).

    Returns:
      ``2 P R / (P + R)``; 1 when neither map has a boundary, 0 when only one has.
    """
    _check_pair(pred, target)
    if not (isinstance(tolerance, int) and tolerance >= 0):
        raise ValueError(f"tolerance={tolerance!r}; expected a non-negative integer")
    bp, bt = label_boundary(pred), label_boundary(target)
    n_p, n_t = jnp.sum(bp), jnp.sum(bt)
    hit_p = jnp.sum(bp & _dilate(bt, tolerance))
    hit_t = jnp.sum(bt & _dilate(bp, tolerance))
    precision = hit_p / jnp.maximum(n_p, 1)
    recall = hit_t / jnp.maximum(n_t, 1)
    f1 = 2 * precision * recall / jnp.maximum(precision + recall, 1e-12)
    return jnp.where((n_p == 0) & (n_t == 0), 1.0, jnp.where((n_p == 0) | (n_t == 0), 0.0, f1))


__all__ = [
    "boundary_f1",
    "confusion_matrix",
    "iou_from_confusion",
    "label_boundary",
    "mean_iou",
]
