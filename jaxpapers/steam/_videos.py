"""Short synthetic videos of moving, occluding objects with instance ids and classes (P08's data).

Built on :mod:`jaxpapers.core.data.scenes`: one layout per video whose objects move with constant
velocities (reflected at the borders) and occlude each other in slot order; instance ids are the
slot index + 1 in every frame, so they identify an object across the whole video (for tracking and
identity-switch counts). Unlike :func:`~jaxpapers.core.data.scenes.make_sequence`, the object
classes are drawn from a given pool of allowed classes, which is how a class-incremental task
sequence restricts each task to its own classes; the background kind and the scene config
(texture, noise) set the appearance, which is how a domain shift is expressed.

Examples:
    >>> import jax, jax.numpy as jnp
    >>> from jaxpapers.core.data.scenes import SceneConfig
    >>> from jaxpapers.steam import make_videos
    >>> scenes = SceneConfig(size=16, num_objects=2, min_radius=2.5, max_radius=4.0)
    >>> v = make_videos(3, 4, config=scenes, key=jax.random.key(0), pool=jnp.array([2, 3]))
    >>> v.image.shape, v.instances.shape
    ((3, 4, 16, 16, 3), (3, 4, 16, 16))
    >>> bool(jnp.all((v.classes == 0) | (v.classes == 3) | (v.classes == 4)))
    True
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Int

from jaxpapers.core.checks import check_key, is_concrete
from jaxpapers.core.data.scenes import (
    BACKGROUNDS,
    Scene,
    SceneConfig,
    move_layout,
    render,
    sample_layout,
)


def make_videos(
    n: int,
    frames: int,
    *,
    config: SceneConfig,
    key: jax.Array,
    pool: Int[Array, " p"],
    background: int = 0,
    speed: float = 1.0,
) -> Scene:
    """``n`` videos of ``frames`` frames (a :class:`Scene` with leading ``[n, frames]`` axes).

    Args:
      n: number of videos.
      frames: frames per video.
      config: the scene family (size, object slots, radii, texture, noise).
      key: PRNG key.
      pool: ``[p]`` allowed object classes; each object's class is uniform over the pool.
      background: background kind (index into :data:`~jaxpapers.core.data.scenes.BACKGROUNDS`).
      speed: object speed in pixels per frame (directions uniform).
    """
    check_key("key", key)
    for name, v in (("n", n), ("frames", frames)):
        if not (isinstance(v, int) and v >= 1):
            raise ValueError(f"{name}={v!r}; expected a positive integer")
    pool = jnp.asarray(pool)
    if pool.ndim != 1 or pool.shape[0] < 1:
        raise ValueError(f"pool has shape {pool.shape}; expected a non-empty [p] class list")
    if config.glyphs is None and is_concrete(pool):
        p = np.asarray(pool)
        if p.min() < 0 or p.max() >= config.classes:
            raise ValueError(f"pool={p.tolist()}; expected classes in [0, {config.classes})")
    if not 0 <= background < len(BACKGROUNDS):
        raise ValueError(f"background={background}; expected a kind in [0, {len(BACKGROUNDS)})")

    speed = float(speed) if is_concrete(speed) else speed
    return _make_videos(config, key, pool, n, frames, background, speed)


# One compiled program per config and sizes when called eagerly (the config's arrays, the key and
# the pool are traced; ints and floats static); traced with the caller inside its jit.
@eqx.filter_jit
def _make_videos(config, key, pool, n, frames, background, speed) -> Scene:
    def one(k: jax.Array) -> Scene:
        kc, kl, kv, kr = jax.random.split(k, 4)
        cls = pool[jax.random.randint(kc, (config.num_objects,), 0, pool.shape[0])]
        layout = sample_layout(config=config, key=kl, classes=cls)
        angle = jax.random.uniform(kv, (config.num_objects,), maxval=2 * jnp.pi)
        velocity = speed * jnp.stack([jnp.sin(angle), jnp.cos(angle)], -1)
        return jax.vmap(
            lambda t: render(
                move_layout(layout, velocity, t, config=config),
                config=config,
                background=background,
                key=kr,
            )
        )(jnp.arange(frames, dtype=jnp.float32))

    return jax.vmap(one)(jax.random.split(key, n))
