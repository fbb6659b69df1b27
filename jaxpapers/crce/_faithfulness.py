"""Faithfulness of saliency maps: deletion / insertion curves and their AUC, pointing game.

Deletion (Petsiuk et al. 2018, RISE): remove the cells of the map from the most to the least
salient, replacing their pixels with a baseline image, and follow the model's probability of the
explained class; a faithful map makes it fall fast (low AUC). Insertion starts from the baseline and
adds the most salient cells first (high AUC is faithful). Cells are the map's own grid (e.g. the
8x8 feature map), each covering a block of pixels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from jaxpapers.core.checks import check_finite, check_shape


class FaithfulnessCurves(NamedTuple):
    """``deletion``/``insertion``: ``[B, steps + 1]`` target probabilities; ``*_auc``: ``[B]``."""

    deletion: Float[Array, "b s"]
    insertion: Float[Array, "b s"]
    deletion_auc: Float[Array, " b"]
    insertion_auc: Float[Array, " b"]


def _upsample(cells: jax.Array, shape: tuple[int, int]) -> jax.Array:
    h, w = cells.shape[-2:]
    if shape[0] % h or shape[1] % w:
        raise ValueError(f"saliency grid {(h, w)} must divide the image size {shape}")
    return jnp.repeat(jnp.repeat(cells, shape[0] // h, axis=-2), shape[1] // w, axis=-1)


def _auc(curve: jax.Array) -> jax.Array:
    steps = curve.shape[-1] - 1
    return (jnp.sum(curve, -1) - 0.5 * (curve[..., 0] + curve[..., -1])) / steps


def deletion_insertion(
    model: Callable[[jax.Array], jax.Array],
    images: Float[Array, "b H W c"],
    saliency: Float[Array, "b h w"],
    target: Int[Array, " b"],
    *,
    steps: int = 16,
    baseline: Float[Array, "b H W c"] | None = None,
) -> FaithfulnessCurves:
    """Deletion and insertion curves of ``softmax(model(x))[target]`` and their AUCs.

    Args:
      model: images ``[N, H, W, c]`` -> logits ``[N, C]``.
      images: the explained images.
      saliency: ``[B, h, w]`` maps whose grid divides ``H, W``; higher = more important.
      target: ``[B]`` explained classes.
      steps: number of removal steps (``h w / steps`` cells each, rounded).
      baseline: replacement pixels; default each image's per-channel mean (a flat image).

    Returns:
      :class:`FaithfulnessCurves`; AUC is the trapezoid mean over the removed fraction ``[0, 1]``.
    """
    if jnp.ndim(images) != 4:
        raise ValueError(f"images has shape {jnp.shape(images)}; expected [B, H, W, c]")
    b, hgt, wid, _ = images.shape
    check_finite("images", images)
    check_finite("saliency", saliency)
    if saliency.ndim != 3 or saliency.shape[0] != b:
        raise ValueError(f"saliency has shape {saliency.shape}; expected [{b}, h, w]")
    check_shape("target", target, (b,))
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"steps={steps!r}; expected a positive integer")
    if baseline is None:
        baseline = jnp.broadcast_to(jnp.mean(images, axis=(1, 2), keepdims=True), images.shape)
    check_shape("baseline", baseline, images.shape)
    n = saliency.shape[1] * saliency.shape[2]
    flat = saliency.reshape(b, n)
    rank = jnp.argsort(jnp.argsort(-flat, axis=1), axis=1)  # 0 = most salient
    counts = jnp.round(jnp.linspace(0.0, n, steps + 1)).astype(jnp.int32)
    removed = rank[None, :, :] < counts[:, None, None]  # [S+1, B, n]
    pix = _upsample(removed.reshape(steps + 1, b, *saliency.shape[1:]), (hgt, wid))[..., None]

    def prob(x: jax.Array) -> jax.Array:
        logits = model(x.reshape(-1, *images.shape[1:])).reshape(steps + 1, b, -1)
        p = jax.nn.softmax(logits, axis=-1)
        return jnp.take_along_axis(
            p, jnp.broadcast_to(target[None, :, None], (steps + 1, b, 1)), -1
        )

    deletion = prob(jnp.where(pix, baseline[None], images[None]))[..., 0].T
    insertion = prob(jnp.where(pix, images[None], baseline[None]))[..., 0].T
    return FaithfulnessCurves(deletion, insertion, _auc(deletion), _auc(insertion))


def cell_fractions(mask: Bool[Array, "b H W"], grid: tuple[int, int]) -> Float[Array, "b h w"]:
    """Fraction of each cell of a ``grid`` over the image that ``mask`` covers."""
    if jnp.ndim(mask) != 3:
        raise ValueError(f"mask has shape {jnp.shape(mask)}; expected [B, H, W]")
    b, hgt, wid = mask.shape
    if len(grid) != 2 or not all(isinstance(g, int) and g >= 1 for g in grid):
        raise ValueError(f"grid={grid!r}; expected two positive integers (h, w)")
    h, w = grid
    if hgt % h or wid % w:
        raise ValueError(f"grid {grid} must divide the mask's size {(hgt, wid)}")
    cells = mask.astype(jnp.float32).reshape(b, h, hgt // h, w, wid // w)
    return cells.mean(axis=(2, 4))


def pointing_game(
    saliency: Float[Array, "b h w"], object_mask: Bool[Array, "b H W"]
) -> Float[Array, " b"]:
    """1 where the most salient cell overlaps the object (any pixel of the cell), else 0."""
    if object_mask.ndim != 3 or object_mask.shape[0] != saliency.shape[0]:
        raise ValueError(
            f"object_mask has shape {object_mask.shape}; expected [{saliency.shape[0]}, H, W]"
        )
    check_finite("saliency", saliency)
    frac = cell_fractions(object_mask, saliency.shape[1:])
    best = jnp.argmax(saliency.reshape(saliency.shape[0], -1), axis=1)
    return (
        jnp.take_along_axis(frac.reshape(frac.shape[0], -1), best[:, None], 1)[:, 0] > 0
    ).astype(jnp.float32)


def mask_agreement(
    saliency: Float[Array, "b h w"], object_mask: Bool[Array, "b H W"]
) -> Float[Array, " b"]:
    """Share of the positive saliency that falls on the object: ``sum relu(M) f / sum relu(M)``
    with ``f`` the object fraction of each cell (energy-based pointing game)."""
    if object_mask.ndim != 3 or object_mask.shape[0] != saliency.shape[0]:
        raise ValueError(
            f"object_mask has shape {object_mask.shape}; expected [{saliency.shape[0]}, H, W]"
        )
    check_finite("saliency", saliency)
    frac = cell_fractions(object_mask, saliency.shape[1:])
    pos = jax.nn.relu(saliency)
    return jnp.sum(pos * frac, (1, 2)) / (jnp.sum(pos, (1, 2)) + 1e-12)


__all__ = [
    "FaithfulnessCurves",
    "cell_fractions",
    "deletion_insertion",
    "mask_agreement",
    "pointing_game",
]
