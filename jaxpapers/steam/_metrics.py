"""Tracking and continual-learning metrics: identity switches and average forgetting.

Per-task mIoU is computed with :mod:`jaxpapers.core.segmentation_metrics` (one confusion matrix per
task's test videos, IoU averaged over the task's labels; see ``experiments/_protocol.py``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_int


class SwitchCounts(NamedTuple):
    """Identity switches and the number of consecutive-frame pairs where both ids were defined."""

    switches: Float[Array, ""]
    pairs: Float[Array, ""]


def identity_switches(
    tracks: Int[Array, "t h w"],
    instances: Int[Array, "t h w"],
    slots: int,
    queries: int,
    *,
    min_pixels: int = 3,
) -> SwitchCounts:
    """Count identity switches of one video (tracks ``-1 .. queries - 1``, ids ``0 .. slots``).

    A ground-truth instance's predicted id in a frame is the track id covering most of its pixels;
    it is defined when the instance has at least ``min_pixels`` pixels and most of them carry a
    track (not background). A switch is a change of the defined id between consecutive frames.
    """
    if tracks.shape != instances.shape or tracks.ndim != 3:
        raise ValueError(
            f"tracks has shape {tracks.shape}; expected instances' [T, H, W] shape "
            f"{instances.shape}"
        )
    check_int("slots", slots, minimum=1)
    check_int("queries", queries, minimum=1)
    check_int("min_pixels", min_pixels, minimum=1)
    t = tracks.shape[0]
    gt = jax.nn.one_hot(instances.reshape(t, -1), slots + 1)[..., 1:]  # [T, P, K]
    pred = jax.nn.one_hot(tracks.reshape(t, -1) + 1, queries + 1)
    counts = jnp.einsum("tpk,tpi->tki", gt, pred)  # [T, K, 1 + tracks]
    major = jnp.argmax(counts, -1)
    defined = (gt.sum(1) >= min_pixels) & (major > 0)
    both = defined[1:] & defined[:-1]
    switched = both & (major[1:] != major[:-1])
    return SwitchCounts(jnp.sum(switched).astype(jnp.float32), jnp.sum(both).astype(jnp.float32))


def forgetting(acc: np.ndarray) -> float:
    """Average forgetting of a ``[stages, tasks]`` accuracy matrix (``acc[i, j]``: task ``j`` after
    learning task ``i``): the mean over ``j < last`` of ``max_{i < last} acc[i, j] - acc[last, j]``
    where ``i`` runs over stages at or after ``j``."""
    acc = np.asarray(acc, np.float64)
    last = acc.shape[0] - 1
    if acc.ndim != 2 or acc.shape[0] != acc.shape[1] or last < 1:
        raise ValueError(
            f"acc has shape {acc.shape}; expected a square [tasks, tasks] matrix, >= 2"
        )
    used = np.tril(np.ones(acc.shape, bool))  # acc[i, j] for i >= j: task j already learned
    if not np.all(np.isfinite(acc[used])):
        raise ValueError(f"acc of shape {acc.shape} holds NaN or inf at or below its diagonal")
    return float(np.mean([acc[j:last, j].max() - acc[last, j] for j in range(last)]))
