"""Waterbirds-like scene sets built with :mod:`jaxpapers.core.data.scenes`.

Every set of the paper is drawn by one jitted renderer of a fixed chunk of ``CHUNK`` scenes with
given object classes and background kinds, so the whole paper compiles the scene generator once
(and the object-free background renderer of the background-randomisation baseline once).
Labels and context bits are drawn with NumPy from explicit seeds.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.data.scenes import SceneConfig, make_scenes, render_background

#: Background kinds standing for "land" (stripes) and "water" (smooth noise).
CONTEXT_KINDS = (1, 3)
#: The two bird classes: square and ring (square vs disc is barely learned in 200 steps).
BIRD_SHAPES = (0, 3)
#: The three classes of the faithfulness set: square, ring and cross (a fourth class, the
#: triangle, was learned to 26-90% accuracy in 300 steps; these three to 55-91%).
FAITH_SHAPES = (0, 3, 4)
#: One textured shape per noisy 32x32 image.
SCENES = SceneConfig(
    size=32,
    num_objects=1,
    num_classes=4,
    min_radius=5.0,
    max_radius=8.0,
    texture=0.3,
    noise=0.05,
)
#: Scenes drawn per compiled call (every set is a whole number of chunks, the last one padded).
CHUNK = 256


class Labelled(NamedTuple):
    """``images [N, 32, 32, 3]``, ``labels [N]``, ``groups [N]`` (2 label + context bit: the
    background is ``CONTEXT_KINDS[groups % 2]``) and ``objects [N, 32, 32]`` (bool object mask)."""

    images: jax.Array
    labels: jax.Array
    groups: jax.Array
    objects: jax.Array


@jax.jit
def _render(key: jax.Array, classes: jax.Array, kinds: jax.Array) -> tuple[jax.Array, jax.Array]:
    s = make_scenes(CHUNK, config=SCENES, key=key, background=kinds, classes=classes[:, None])
    return s.image, s.instances > 0


def draw(classes: np.ndarray, kinds: np.ndarray, *, seed: int) -> tuple[jax.Array, jax.Array]:
    """Images and object masks of scenes with the given object ``classes`` and background
    ``kinds`` (``[N]`` each), drawn chunk by chunk with keys derived from ``seed``."""
    n = len(classes)
    pad = -n % CHUNK
    cls = np.concatenate([np.asarray(classes), np.zeros(pad, np.int64)]).astype(np.int32)
    kin = np.concatenate([np.asarray(kinds), np.zeros(pad, np.int64)]).astype(np.int32)
    keys = jax.random.split(jax.random.key(seed), len(cls) // CHUNK)
    parts = [
        _render(keys[i], cls[i * CHUNK : (i + 1) * CHUNK], kin[i * CHUNK : (i + 1) * CHUNK])
        for i in range(len(cls) // CHUNK)
    ]
    images = jnp.concatenate([p[0] for p in parts])[:n]
    objects = jnp.concatenate([p[1] for p in parts])[:n]
    return images, objects


def birds(n: int, agree: float | None, *, seed: int) -> Labelled:
    """``n`` Waterbirds-like images: class 0 (square) or 1 (ring) on stripes or smooth noise.

    ``agree`` is the probability that the context bit equals the label (0.95 = training shortcut,
    0.5 = no information, 0 = reversed); ``None`` gives exactly balanced groups (each class x
    context a quarter, for ``n`` divisible by 4).
    """
    rng = np.random.default_rng(seed)
    if agree is None:
        i = np.arange(n)
        labels, bit = i % 2, (i // 2) % 2
    else:
        labels = rng.integers(0, 2, n)
        bit = np.where(rng.random(n) < agree, labels, 1 - labels)
    images, objects = draw(
        np.asarray(BIRD_SHAPES)[labels], np.asarray(CONTEXT_KINDS)[bit], seed=seed
    )
    return Labelled(images, jnp.asarray(labels, jnp.int32), jnp.asarray(2 * labels + bit), objects)


def shapes(n: int, *, seed: int) -> Labelled:
    """``n`` images of the three :data:`FAITH_SHAPES` classes (uniform labels) on stripes or smooth
    noise drawn independently of the label (the background carries no information)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, len(FAITH_SHAPES), n)
    bit = rng.integers(0, 2, n)
    images, objects = draw(
        np.asarray(FAITH_SHAPES)[labels], np.asarray(CONTEXT_KINDS)[bit], seed=seed
    )
    return Labelled(images, jnp.asarray(labels, jnp.int32), jnp.asarray(2 * labels + bit), objects)


@jax.jit
def _render_backgrounds(key: jax.Array, kinds: jax.Array) -> jax.Array:
    def one(k: jax.Array, kind: jax.Array) -> jax.Array:
        kb, kn = jax.random.split(k)
        image = render_background(kind, config=SCENES, key=kb)
        return image + SCENES.noise * jax.random.normal(kn, image.shape)

    return jax.vmap(one)(jax.random.split(key, CHUNK), kinds)


def backgrounds(data: Labelled, *, seed: int) -> jax.Array:
    """Object-free backgrounds ``[N, 32, 32, 3]``, one per image of ``data``, each a fresh draw
    of that image's background kind with the scenes' pixel noise: a uniformly random entry is a
    background from the training distribution of backgrounds, independent of any label (the
    "mixed-rand" backgrounds of Xiao et al. 2020)."""
    kinds = np.asarray(CONTEXT_KINDS)[np.asarray(data.groups) % 2]
    n = len(kinds)
    pad = -n % CHUNK
    kin = np.concatenate([kinds, np.zeros(pad, np.int64)]).astype(np.int32)
    keys = jax.random.split(jax.random.key(seed), len(kin) // CHUNK)
    parts = [
        _render_backgrounds(keys[i], kin[i * CHUNK : (i + 1) * CHUNK])
        for i in range(len(kin) // CHUNK)
    ]
    return jnp.concatenate(parts)[:n]
