"""The continual task sequence: three class-incremental tasks with disjoint classes, each with its
own appearance (domain).

* task 1 (pretraining): squares and discs on plain backgrounds;
* task 2 (new classes): triangles and rings on striped backgrounds;
* task 3 (new classes, domain shift): crosses and diamonds, textured, on smooth-noise backgrounds.

No task revisits an earlier task's classes, so a method can only keep task 1 by not forgetting it
(fine-tuning cannot relearn it later). Every video has two object slots (one or two objects
present) moving at one pixel per frame and occluding each other; instance ids persist across
frames.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxpapers.core.data.scenes import Scene, SceneConfig
from jaxpapers.steam._videos import make_videos


class Task(NamedTuple):
    """One task: its object classes, background kind and object texture."""

    name: str
    pool: tuple[int, ...]
    background: int
    texture: float


TASKS: tuple[Task, ...] = (
    Task("task 1: square, disc", (0, 1), 0, 0.0),
    Task("task 2: triangle, ring (new classes)", (2, 3), 1, 0.0),
    Task("task 3: cross, diamond (new classes, textured, noise bg)", (4, 5), 3, 0.6),
)
NUM_CLASSES = 6


def scene_config(size: int, texture: float) -> SceneConfig:
    r = size / 16
    return SceneConfig(
        size=size,
        num_objects=2,
        min_objects=1,
        num_classes=NUM_CLASSES,
        min_radius=2.5 * r,
        max_radius=4.5 * r,
        texture=texture,
    )


def task_videos(task: Task, n: int, frames: int, size: int, *, key: jax.Array) -> Scene:
    """``n`` videos of ``task`` (fields ``[n, frames, ...]``)."""
    return make_videos(
        n,
        frames,
        config=scene_config(size, task.texture),
        key=key,
        pool=jnp.asarray(task.pool),
        background=task.background,
    )


def classes_up_to(t: int) -> tuple[int, ...]:
    """The classes of tasks ``0 .. t`` (0-based): the classifier's classes right after task ``t``
    in the class-incremental protocol (the softmax runs over all of them, in training and test)."""
    if not 0 <= t < len(TASKS):
        raise ValueError(f"t={t}; expected a task index in [0, {len(TASKS)})")
    return tuple(sorted({c for task in TASKS[: t + 1] for c in task.pool}))


def label_ids(task: Task) -> jax.Array:
    """Class-map labels scored for ``task``: background 0 and ``c + 1`` for its classes."""
    return jnp.asarray((0, *(c + 1 for c in task.pool)))


def class_mask(classes: tuple[int, ...] | set[int]) -> jax.Array:
    """``[NUM_CLASSES]`` 0/1 mask of ``classes``."""
    return jnp.asarray([1.0 if c in classes else 0.0 for c in range(NUM_CLASSES)])
