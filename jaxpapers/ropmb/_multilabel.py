"""Multi-label scenes whose classes co-occur in structured groups (the data of the P12 experiments).

Each scene picks one *group* (a context, like "kitchen" or "street") uniformly and fills its
object slots with a random permutation of that group's classes, so that every slot holds a
different class. Groups may share classes: with groups ``(0, 1, 2, 3)`` and ``(2, 3, 4, 5)``,
classes 2 and 3 co-occur with everything, 0 never meets 4. With ``min_objects = 2`` and four
slots a scene shows two to four classes (fewer only when an object is hidden behind others).
Image labels are the classes with a visible pixel (:class:`~jaxpapers.core.data.scenes.Scene`);
masks are for evaluation only.

Examples:
    >>> import jax
    >>> from jaxpapers.core.data.scenes import SceneConfig
    >>> from jaxpapers.ropmb._multilabel import make_cooccurring_scenes
    >>> cfg = SceneConfig(size=32, num_objects=3, min_objects=2, num_classes=6)
    >>> s = make_cooccurring_scenes(((0, 1, 2), (3, 4, 5)), 8, config=cfg, key=jax.random.key(0))
    >>> s.labels.shape
    (8, 6)
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_int, check_key, is_concrete
from jaxpapers.core.data.scenes import BACKGROUNDS, Scene, SceneConfig, render, sample_layout


def check_groups(groups: Sequence[Sequence[int]], num_classes: int, num_objects: int) -> np.ndarray:
    """Validate co-occurrence groups and return them as an ``[G, m]`` int array.

    Every group must list ``m >= num_objects`` distinct classes in ``[0, num_classes)``.
    """
    try:
        arr = np.asarray(groups, dtype=np.int64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"groups={groups!r}; expected equal-length sequences of ints") from err
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < num_objects:
        raise ValueError(
            f"groups has shape {arr.shape}; expected [G >= 1, m >= num_objects={num_objects}]"
        )
    if arr.min() < 0 or arr.max() >= num_classes:
        raise ValueError(
            f"groups hold classes in [{arr.min()}, {arr.max()}]; expected [0, {num_classes})"
        )
    if any(len(set(g)) != len(g) for g in arr.tolist()):
        raise ValueError(f"groups={arr.tolist()}; a group lists a class twice")
    return arr


def cooccurring_classes(
    groups: Sequence[Sequence[int]], n: int, num_objects: int, *, key: jax.Array
) -> Int[Array, "n k"]:
    """Object classes ``[n, num_objects]``: per scene a random group, its classes permuted."""
    check_key("key", key)
    check_int("n", n, minimum=1)
    arr = jnp.asarray(check_groups(groups, int(np.max(groups)) + 1, num_objects), jnp.int32)
    kg, kp = jax.random.split(key)
    pick = jax.random.randint(kg, (n,), 0, arr.shape[0])
    perm = jax.vmap(lambda k: jax.random.permutation(k, arr.shape[1]))(jax.random.split(kp, n))
    return jnp.take_along_axis(arr[pick], perm, axis=1)[:, :num_objects]


def make_cooccurring_scenes(
    groups: Sequence[Sequence[int]],
    n: int,
    *,
    config: SceneConfig,
    key: jax.Array,
    background: int | Int[Array, " n"] | None = None,
    palette: Float[Array, "c m ch"] | None = None,
    jitter: float = 0.08,
) -> Scene:
    """``n`` scenes whose object classes follow :func:`cooccurring_classes` (batched Scene).

    Args:
      groups: co-occurrence groups, each listing at least ``num_objects`` distinct classes.
      n: number of scenes.
      config: the scene family (``num_objects`` slots, ``min_objects`` always present).
      key: PRNG key.
      background: background kind(s) as in :func:`~jaxpapers.core.data.scenes.make_scenes`
        (``None``: uniformly random kinds).
      palette: optional ``[classes, M, channels]`` colours: an object of class ``c`` takes one of
        its class's ``M`` colours at random (plus uniform ``jitter``), so colour carries class
        information with ``M`` modes per class; ``None`` keeps random colours (shape only).
      jitter: half-width of the uniform colour jitter around a palette colour.
    """
    check_key("key", key)
    check_groups(groups, config.classes, config.num_objects)
    if not (isinstance(n, int) and n >= 1):
        raise ValueError(f"n={n!r}; expected a positive integer")
    if palette is not None:
        shape = np.shape(palette)
        if len(shape) != 3 or shape[0] != config.classes or shape[2] != config.channels:
            raise ValueError(
                f"palette has shape {shape}; expected [{config.classes}, M, {config.channels}]"
            )
    kc, kl, kr, kb, kp = jax.random.split(key, 5)
    classes = cooccurring_classes(groups, n, config.num_objects, key=kc)
    if background is None:
        background = jax.random.randint(kb, (n,), 0, len(BACKGROUNDS))
    bg = jnp.broadcast_to(jnp.asarray(background, jnp.int32), (n,))
    pal = None if palette is None else jnp.asarray(palette, jnp.float32)
    jitter = float(jitter) if is_concrete(jitter) else jitter
    return _render_classes(config, classes, kl, kr, kp, bg, pal, n, jitter)


# One compiled program per config and size when called eagerly (the config's arrays and the
# other arrays traced, ints and floats static); traced with the caller inside its jit.
@eqx.filter_jit
def _render_classes(cfg, classes, kl, kr, kp, bg, pal, n, jitter) -> Scene:
    layouts = jax.vmap(lambda k, c: sample_layout(config=cfg, key=k, classes=c))(
        jax.random.split(kl, n), classes
    )
    if pal is not None:
        km, kj = jax.random.split(kp)
        mode = jax.random.randint(km, classes.shape, 0, pal.shape[1])
        noise = jax.random.uniform(kj, (*classes.shape, cfg.channels), minval=-1.0) * jitter
        layouts = layouts._replace(colours=jnp.clip(pal[classes, mode] + noise, 0.0, 1.0))
    return jax.vmap(lambda lay, b, k: render(lay, config=cfg, background=b, key=k))(
        layouts, bg, jax.random.split(kr, n)
    )


__all__ = ["check_groups", "cooccurring_classes", "make_cooccurring_scenes"]
