r"""Texture scenes: objects whose class is a texture, not a colour or a mean brightness.

Why this bed (the derivation of the pretraining bed). A frozen-feature probe measures what a
*linear* read-out can decode from the features. In scenes whose objects differ by colour or by
mean brightness the label of a patch is already a linear function of its pixels, and an untrained
ViT's first layer is a random linear map of the pixels, so the untrained network's patch tokens
already expose it and self-distillation has nothing to add (what was measured on the shape scenes
of :mod:`jaxpapers.core.data.scenes`: ``results/P01/NOTES.md``). Here the class of an object is a
periodic texture added to the background,

.. math:: I(p) = b(p) + a\, u\, \tau_c(p; \phi), \qquad p \in \text{object},

with a random amplitude :math:`a`, a colour direction :math:`u` (random, or grey: ``colour``) and
random phases :math:`\phi`, over a background :math:`b` (a level plus optional smooth noise).
Averaged over the phases every texture
has mean 0, so the expected patch, and hence the expectation of any linear function of it, is the
same for every class and for the background: neither the object's presence nor its class is
linearly decodable from the pixels, whatever the colour. They lie in second-order statistics (the
energy at the texture's spatial frequencies), which a random linear patch embedding followed by
a few random blocks exposes only weakly, and which an augmentation-invariant objective has to
learn: the two views share the texture classes while phase (shifts), colour (gain and channel
jitter) and brightness change between them. The defaults, P01's bed, are grey scenes on a plain
background at 0.5: whatever else two views of a scene share (a background level, a colour) carries
no label and is what the distillation matches first (measured: ``results/P01/NOTES.md``).

The four classes (:data:`TEXTURES`) are horizontal stripes, vertical stripes, a diagonal checker
(two diagonal gratings) and a grid (a horizontal plus a vertical grating). Each is invariant
under a horizontal flip, the one geometric augmentation the views use, so the augmentation never
turns one class into another. Patch labels are the majority class of the 8x8 patch (0 =
background), the image label the class with most visible pixels, as in the shape scenes.

Examples:
    >>> import jax
    >>> from jaxpapers.codi import texture_scenes
    >>> s = texture_scenes(4, key=jax.random.key(0))
    >>> s.images.shape, s.patch_labels.shape, s.main_class.shape
    ((4, 32, 32, 3), (4, 16), (4,))
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_key, check_range
from jaxpapers.core.data.scenes import patch_labels

#: Texture classes in class order.
TEXTURES = ("horizontal stripes", "vertical stripes", "diagonal checker", "grid")


class TextureScenes(NamedTuple):
    """A batch of texture scenes.

    Attributes:
      images: ``[n, size, size, 3]`` float32.
      classes: ``[n, size, size]`` int32 pixel classes, 0 background, ``c + 1`` texture ``c``.
      patch_labels: ``[n, patches]`` majority class of each ``patch x patch`` patch.
      main_class: ``[n]`` texture class with the most visible pixels.
    """

    images: Float[Array, "n h w c"]
    classes: Int[Array, "n h w"]
    patch_labels: Int[Array, "n p"]
    main_class: Int[Array, " n"]


def texture(kind: Int[Array, ""], y, x, period, phase) -> jax.Array:
    """Texture ``TEXTURES[kind]`` in ``[-1, 1]`` at pixel coordinates ``y, x`` (period in pixels,
    ``phase [2]``)."""
    y, x = jnp.broadcast_arrays(y, x)
    w = 2 * jnp.pi / period
    d = w / jnp.sqrt(2.0)
    options = jnp.stack(
        [
            jnp.cos(w * y + phase[0]),
            jnp.cos(w * x + phase[0]),
            0.5 * (jnp.cos(d * (x + y) + phase[0]) + jnp.cos(d * (x - y) + phase[1])),
            0.5 * (jnp.cos(w * x + phase[0]) + jnp.cos(w * y + phase[1])),
        ]
    )
    return options[kind]


def _one(
    key: jax.Array,
    size: int,
    num_objects: int,
    min_radius: float,
    max_radius: float,
    amplitude: tuple[float, float],
    noise: float,
    colour: bool,
    smooth: float,
    level: tuple[float, float],
):
    kb, _, ko, kn = jax.random.split(key, 4)
    # Smooth background: a per-channel level plus bilinear upsampled 4x4 noise.
    k1, k2 = jax.random.split(kb)
    level = jax.random.uniform(k1, (3 if colour else 1,), minval=level[0], maxval=level[1])
    coarse = jax.random.uniform(k2, (4, 4, 3 if colour else 1), minval=-smooth, maxval=smooth)
    image = level[None, None, :] + jax.image.resize(coarse, (size, size, level.shape[0]), "linear")
    y = jnp.arange(size, dtype=jnp.float32)[:, None] + 0.5
    x = jnp.arange(size, dtype=jnp.float32)[None, :] + 0.5
    classes = jnp.zeros((size, size), jnp.int32)
    for k, kk in enumerate(jax.random.split(ko, num_objects)):
        kr, kc, ks, kt, ka, ku, kp, kq, kz = jax.random.split(kk, 9)
        r = jax.random.uniform(kr, minval=min_radius, maxval=max_radius)
        cy, cx = r + jax.random.uniform(kc, (2,)) * (size - 2 * r)
        dy, dx = y - cy, x - cx
        square = jnp.maximum(jnp.abs(dy), jnp.abs(dx)) < r
        disc = dy * dy + dx * dx < r * r
        mask = jnp.where(jax.random.bernoulli(ks), square, disc)
        mask = mask & ((k == 0) | jax.random.bernoulli(kz))
        kind = jax.random.randint(kt, (), 0, len(TEXTURES))
        a = jax.random.uniform(ka, minval=amplitude[0], maxval=amplitude[1])
        u = jax.random.uniform(ku, (3,), minval=0.3, maxval=1.0) if colour else jnp.ones(1)
        u = u / jnp.linalg.norm(u) * jnp.sqrt(u.shape[0])  # norm of (1, 1, 1)
        period = jax.random.uniform(kq, minval=3.5, maxval=5.0)
        phase = jax.random.uniform(kp, (2,), maxval=2 * jnp.pi)
        tex = texture(kind, y, x, period, phase)
        image = jnp.where(mask[..., None], image + a * u[None, None, :] * tex[..., None], image)
        classes = jnp.where(mask, kind + 1, classes)
    image = jnp.broadcast_to(image, (size, size, 3))
    image = image + noise * jax.random.normal(kn, image.shape)
    counts = jnp.sum(jax.nn.one_hot(classes, len(TEXTURES) + 1), axis=(0, 1))
    return image.astype(jnp.float32), classes, jnp.argmax(counts[1:]).astype(jnp.int32)


@functools.partial(
    jax.jit,
    static_argnums=(0,),
    static_argnames=(
        "size",
        "patch",
        "num_objects",
        "min_radius",
        "max_radius",
        "amplitude",
        "noise",
        "colour",
        "smooth",
        "level",
    ),
)
def _scenes(
    n,
    key,
    *,
    size,
    patch,
    num_objects,
    min_radius,
    max_radius,
    amplitude,
    noise,
    colour,
    smooth,
    level,
):
    one = functools.partial(
        _one,
        size=size,
        num_objects=num_objects,
        min_radius=min_radius,
        max_radius=max_radius,
        amplitude=amplitude,
        noise=noise,
        colour=colour,
        smooth=smooth,
        level=level,
    )
    images, classes, main = jax.vmap(one)(jax.random.split(key, n))
    labels = patch_labels(classes, patch, len(TEXTURES)).reshape(n, -1)
    return TextureScenes(images, classes, labels, main)


def texture_scenes(
    n: int,
    *,
    key: jax.Array,
    size: int = 32,
    patch: int = 8,
    num_objects: int = 2,
    min_radius: float = 6.0,
    max_radius: float = 12.0,
    amplitude: tuple[float, float] = (0.433, 0.866),
    noise: float = 0.03,
    colour: bool = False,
    smooth: float = 0.0,
    level: tuple[float, float] = (0.5, 0.5),
) -> TextureScenes:
    """``n`` texture scenes (jitted, one program per sizes).

    Up to ``num_objects`` squares or discs (the first always present, the others each with
    probability 1/2) of half-extent ``min_radius`` to ``max_radius``, each carrying a texture of
    :data:`TEXTURES` with amplitude uniform in ``amplitude``, period uniform in 3.5-5 px and
    uniform random phases, added to the background; Gaussian pixel noise ``noise`` last. The
    background is a level uniform in ``level`` plus bilinear upsampled 4x4 noise uniform in
    ``[-smooth, smooth]``. With ``colour`` the level is drawn per channel and the texture is
    multiplied by a random colour direction of norm ``sqrt(3)``; without it every channel is the
    same (grey). The defaults are P01's bed: grey, a plain background at 0.5 and amplitudes
    0.433-0.866 (0.25 sqrt(3) to 0.5 sqrt(3)), on which the untrained ViT's features leave room
    for pretraining to add (``results/P01/NOTES.md``).
    """
    check_key("key", key)
    if not (isinstance(n, int) and n >= 1):
        raise ValueError(f"n={n!r}; expected a positive integer")
    if not (isinstance(size, int) and isinstance(patch, int) and patch >= 1 and size % patch == 0):
        raise ValueError(f"size={size!r}, patch={patch!r}; expected patch to divide size")
    if not (isinstance(num_objects, int) and num_objects >= 1):
        raise ValueError(f"num_objects={num_objects!r}; expected a positive integer")
    if not 0 < min_radius <= max_radius < size / 2:
        raise ValueError(
            f"min_radius={min_radius}, max_radius={max_radius}; expected "
            f"0 < min_radius <= max_radius < size / 2"
        )
    check_range("noise", noise, 0.0, 1.0)
    lo, hi = amplitude
    if not 0 <= lo <= hi:
        raise ValueError(f"amplitude={amplitude!r}; expected 0 <= low <= high")
    return _scenes(
        n,
        key,
        size=size,
        patch=patch,
        num_objects=num_objects,
        min_radius=float(min_radius),
        max_radius=float(max_radius),
        amplitude=(float(lo), float(hi)),
        noise=float(noise),
        colour=bool(colour),
        smooth=float(smooth),
        level=(float(level[0]), float(level[1])),
    )


__all__ = ["TEXTURES", "TextureScenes", "texture_scenes"]
