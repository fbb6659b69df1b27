"""Multi-label scenes for P12: six shape classes in three overlapping co-occurrence groups."""

from __future__ import annotations

import colorsys
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.data.scenes import SceneConfig
from jaxpapers.ropmb._multilabel import make_cooccurring_scenes

#: Groups of four classes; consecutive groups share two classes (a ring of contexts).
GROUPS: tuple[tuple[int, ...], ...] = ((0, 1, 2, 3), (2, 3, 4, 5), (4, 5, 0, 1))
#: 32x32 scenes with two to four objects of distinct classes, textured, on random backgrounds.
SCENES = SceneConfig(
    size=32,
    num_objects=4,
    min_objects=2,
    num_classes=6,
    min_radius=4.0,
    max_radius=6.5,
    texture=0.2,
    noise=0.03,
)

#: Two colour modes per class (hues 30 c and 30 c + 180 degrees): twelve distinct hues, so colour
#: and shape both identify the class and every class has two appearance modes.
PALETTE = np.array(
    [
        [colorsys.hsv_to_rgb(((30 * c + 180 * m) % 360) / 360, 0.8, 0.95) for m in (0, 1)]
        for c in range(6)
    ],
    np.float32,
)


class Split(NamedTuple):
    """``images [N, 32, 32, 3]``, multi-hot ``labels [N, 6]`` and class ``masks [N, 32, 32]``
    (0 background, ``c + 1`` class ``c``; for evaluation only)."""

    images: jax.Array
    labels: jax.Array
    masks: jax.Array


def make_split(n: int, *, key: jax.Array) -> Split:
    """``n`` scenes (backgrounds of every kind)."""
    s = make_cooccurring_scenes(GROUPS, n, config=SCENES, key=key, palette=PALETTE)
    return Split(s.image, s.labels, s.classes.astype(jnp.int32))


@functools.partial(jax.jit, static_argnums=0)
def make_splits(n: int, keys: jax.Array) -> Split:
    """One split of ``n`` scenes per key (leading axis: seeds), in one compiled call."""
    return jax.vmap(lambda k: make_split(n, key=k))(keys)
