"""Procedural scenes with exact per-pixel masks: objects on controllable backgrounds.

A scene is ``num_objects`` objects (geometric shapes, or digit glyphs from a glyph bank) drawn in
order over a procedural background, so every pixel knows which object (if any) it shows. Generation
is split in two pure steps so that layouts can be edited (moved, recoloured) before drawing:

* :func:`sample_layout` draws centres, radii, classes, colours and which objects are present;
* :func:`render` draws a layout over a background of a given *kind* and returns a :class:`Scene`
  with the image, the instance mask, the class mask, multi-label image labels and the main class.

The background kind is an (optionally traced) integer argument, so a caller decides how the
background relates to the labels: a fixed kind, a random kind, or a kind correlated with the
object's class (a Waterbirds-like shortcut). :func:`make_scenes` batches both steps (vmapped, one
compiled program per config and size); :func:`make_sequence` moves the objects of one layout with
constant velocities (reflected at the borders) to give short videos; :func:`patch_labels` turns
a class mask into per-patch labels.

Classes: with no glyph bank, class ``c`` is the shape ``SHAPES[c]``; with a glyph bank
(``[N, g, g]`` glyph images in ``[0, 1]`` and their labels), class ``c`` is the digit ``c``. In
class masks 0 is the background and object class ``c`` is stored as ``c + 1``; instance masks hold
0 for the background and ``k + 1`` for object ``k`` (later objects occlude earlier ones).

Everything is jittable and vmappable; keys are explicit and keyword-only, and so is the scene
family (``config=``, a :class:`SceneConfig`).

Examples:
    >>> import jax
    >>> from jaxpapers.core.data.scenes import SceneConfig, make_scenes, patch_labels
    >>> cfg = SceneConfig(size=32, num_objects=2)
    >>> s = make_scenes(4, config=cfg, key=jax.random.key(0), background=1)
    >>> s.image.shape, s.instances.shape, s.classes.shape, s.labels.shape
    ((4, 32, 32, 3), (4, 32, 32), (4, 32, 32), (4, 4))
    >>> patch_labels(s.classes, 8, cfg.classes).shape
    (4, 4, 4)
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxpapers.core.checks import (
    check_int,
    check_key,
    check_positive,
    check_range,
    check_shape,
    is_concrete,
)

#: Shape classes in class order (class ``c`` is ``SHAPES[c]``) when no glyph bank is given.
SHAPES: tuple[str, ...] = ("square", "disc", "triangle", "ring", "cross", "diamond")
#: Background kinds (the integer passed as ``background`` indexes this tuple).
BACKGROUNDS: tuple[str, ...] = ("plain", "stripes", "checker", "noise")


class SceneConfig(eqx.Module):
    """Sizes and ranges of a scene family.

    Attributes:
      size: image side in pixels.
      num_objects: object slots per scene.
      min_objects: at least this many slots are present (the rest each with probability 1/2).
      num_classes: shape classes ``SHAPES[:num_classes]`` (ignored when a glyph bank is given).
      min_radius, max_radius: half-extent of an object in pixels.
      channels: 1 (grey) or 3 (RGB).
      texture: amplitude of a striped texture on objects (0 = flat colour).
      noise: standard deviation of Gaussian pixel noise added last.
      glyphs: optional ``[N, g, g]`` glyph bank in ``[0, 1]`` (digits); ``glyph_labels [N]``.
    """

    size: int = eqx.field(static=True, default=32)
    num_objects: int = eqx.field(static=True, default=2)
    min_objects: int = eqx.field(static=True, default=1)
    num_classes: int = eqx.field(static=True, default=4)
    min_radius: float = eqx.field(static=True, default=4.0)
    max_radius: float = eqx.field(static=True, default=8.0)
    channels: int = eqx.field(static=True, default=3)
    texture: float = eqx.field(static=True, default=0.0)
    noise: float = eqx.field(static=True, default=0.0)
    glyphs: Float[Array, "n g g"] | None = None
    glyph_labels: Int[Array, " n"] | None = None

    def __check_init__(self) -> None:
        if not (isinstance(self.size, int) and self.size >= 4):
            raise ValueError(f"size={self.size!r}; expected an integer >= 4")
        if not 1 <= self.min_objects <= self.num_objects:
            raise ValueError(
                f"min_objects={self.min_objects}, num_objects={self.num_objects}; expected "
                "1 <= min_objects <= num_objects"
            )
        if self.glyphs is None and not 1 <= self.num_classes <= len(SHAPES):
            raise ValueError(f"num_classes={self.num_classes}; expected 1..{len(SHAPES)}")
        if not 0 < self.min_radius <= self.max_radius:
            raise ValueError(
                f"min_radius={self.min_radius}, max_radius={self.max_radius}; expected "
                "0 < min_radius <= max_radius"
            )
        if self.channels not in (1, 3):
            raise ValueError(f"channels={self.channels}; expected 1 or 3")
        check_positive("texture", self.texture, allow_zero=True)
        check_positive("noise", self.noise, allow_zero=True)
        if (self.glyphs is None) != (self.glyph_labels is None):
            raise ValueError("glyphs and glyph_labels must be given together")
        if self.glyphs is not None:
            g = np.shape(self.glyphs)
            if len(g) != 3 or g[1] != g[2]:
                raise ValueError(f"glyphs has shape {g}; expected [N, g, g]")
            check_shape("glyph_labels", self.glyph_labels, (g[0],))

    @property
    def classes(self) -> int:
        """Number of object classes (10 digits with a glyph bank, else ``num_classes``)."""
        return 10 if self.glyphs is not None else self.num_classes


class Layout(NamedTuple):
    """Where and what the objects of one scene are (leading axis: object slot ``K``).

    Attributes:
      centres: ``[K, 2]`` (row, column) in pixels.
      radii: ``[K]`` half-extents in pixels.
      classes: ``[K]`` object classes.
      colours: ``[K, channels]`` in ``[0.35, 1]``.
      present: ``[K]`` bool.
      glyph: ``[K]`` index into the glyph bank (0 without one).
      phase: ``[K]`` texture phase.
    """

    centres: Float[Array, "k 2"]
    radii: Float[Array, " k"]
    classes: Int[Array, " k"]
    colours: Float[Array, "k c"]
    present: Bool[Array, " k"]
    glyph: Int[Array, " k"]
    phase: Float[Array, " k"]


class Scene(NamedTuple):
    """A drawn scene (batched scenes carry leading axes on every field).

    Attributes:
      image: ``[H, W, C]`` float32.
      instances: ``[H, W]`` int32, 0 background, ``k + 1`` object ``k``.
      classes: ``[H, W]`` int32, 0 background, ``c + 1`` object class ``c``.
      labels: ``[num_classes]`` float32 multi-hot image labels (classes with a visible pixel).
      main_class: ``[]`` int32 class with the most visible pixels (0 if nothing is visible).
      background: ``[]`` int32 background kind.
    """

    image: Float[Array, "h w c"]
    instances: Int[Array, "h w"]
    classes: Int[Array, "h w"]
    labels: Float[Array, " n"]
    main_class: Int[Array, ""]
    background: Int[Array, ""]


def sample_layout(
    *, config: SceneConfig, key: jax.Array, classes: Int[Array, " k"] | None = None
) -> Layout:
    """Draw one scene's layout; ``classes`` (``[num_objects]``) fixes the object classes.

    Centres are uniform so that each object lies fully inside the image.
    """
    check_key("key", key)
    k = config.num_objects
    kc, kr, kk, kcol, kp, kg, kph = jax.random.split(key, 7)
    radii = jax.random.uniform(kr, (k,), minval=config.min_radius, maxval=config.max_radius)
    lo = radii[:, None]
    centres = lo + jax.random.uniform(kc, (k, 2)) * (config.size - 2 * lo)
    if config.glyphs is not None:
        glyph = jax.random.randint(kg, (k,), 0, config.glyphs.shape[0])
        if classes is not None:
            # Pick, for each slot, a random glyph of the requested digit.
            match = config.glyph_labels[None, :] == jnp.asarray(classes)[:, None]
            score = jnp.where(match, jax.random.uniform(kg, match.shape), -1.0)
            glyph = jnp.argmax(score, axis=1)
        cls = config.glyph_labels[glyph].astype(jnp.int32)
    else:
        glyph = jnp.zeros((k,), jnp.int32)
        cls = (
            jax.random.randint(kk, (k,), 0, config.num_classes)
            if classes is None
            else jnp.asarray(classes, jnp.int32)
        )
    colours = jax.random.uniform(kcol, (k, config.channels), minval=0.35, maxval=1.0)
    present = (jnp.arange(k) < config.min_objects) | jax.random.bernoulli(kp, 0.5, (k,))
    phase = jax.random.uniform(kph, (k,), maxval=2 * jnp.pi)
    return Layout(centres, radii, cls, colours, present, glyph, phase)


def _shape_mask(kind: jax.Array, dy: jax.Array, dx: jax.Array, r: jax.Array) -> jax.Array:
    ay, ax = jnp.abs(dy), jnp.abs(dx)
    d2 = dy * dy + dx * dx
    masks = jnp.stack(
        [
            (ay < r) & (ax < r),  # square
            d2 < r * r,  # disc
            (dy < r) & (dy > -r) & (ax < (dy + r) / 2),  # triangle (apex up)
            (d2 < r * r) & (d2 >= (0.5 * r) ** 2),  # ring
            ((ay < r / 3) & (ax < r)) | ((ax < r / 3) & (ay < r)),  # cross
            ay + ax < r,  # diamond
        ]
    )
    return masks[kind]


def object_mask(
    layout: Layout, index: int | Int[Array, ""], *, config: SceneConfig
) -> Bool[Array, "h w"]:
    """Pixels covered by object ``index`` of ``layout`` (ignoring occlusion and presence).

    Pixel ``(i, j)`` has centre ``(i + 0.5, j + 0.5)``; shapes test that centre, glyphs are sampled
    at it (nearest glyph cell) and cover it where the glyph exceeds 1/2.
    """
    if is_concrete(index):
        check_int("index", index)
        check_range("index", index, 0, jnp.shape(layout.radii)[0] - 1)
    y = jnp.arange(config.size, dtype=jnp.float32)[:, None] + 0.5
    x = jnp.arange(config.size, dtype=jnp.float32)[None, :] + 0.5
    cy, cx = layout.centres[index, 0], layout.centres[index, 1]
    r = layout.radii[index]
    dy, dx = y - cy, x - cx
    if config.glyphs is None:
        return _shape_mask(layout.classes[index], dy, dx, r)
    g = config.glyphs.shape[1]
    inside = (jnp.abs(dy) < r) & (jnp.abs(dx) < r)
    iy = jnp.clip(jnp.floor((dy + r) / (2 * r) * g), 0, g - 1).astype(jnp.int32)
    ix = jnp.clip(jnp.floor((dx + r) / (2 * r) * g), 0, g - 1).astype(jnp.int32)
    return inside & (config.glyphs[layout.glyph[index]][iy, ix] > 0.5)


def render_background(
    kind: int | Int[Array, ""], *, config: SceneConfig, key: jax.Array
) -> Float[Array, "h w c"]:
    """A background image of kind ``BACKGROUNDS[kind]`` with values in ``[0, 0.6]``.

    ``plain``: one colour; ``stripes``: a sinusoid of random orientation and period 4-8 px between
    two colours; ``checker``: 4-8 px checks of two colours; ``noise``: bilinear upsampled 4x4 noise.
    """
    check_key("key", key)
    n, c = config.size, config.channels
    k1, k2, k3, k4 = jax.random.split(key, 4)
    a = jax.random.uniform(k1, (c,), maxval=0.6)
    b = jax.random.uniform(k2, (c,), maxval=0.6)
    y = jnp.arange(n, dtype=jnp.float32)[:, None]
    x = jnp.arange(n, dtype=jnp.float32)[None, :]
    theta, period = jax.random.uniform(k3, (2,)) * jnp.array([jnp.pi, 1.0])
    period = 4.0 + 4.0 * period
    wave = 0.5 + 0.5 * jnp.sin(2 * jnp.pi * (y * jnp.cos(theta) + x * jnp.sin(theta)) / period)
    checks = ((jnp.floor(y / period) + jnp.floor(x / period)) % 2).astype(jnp.float32)
    coarse = jax.random.uniform(k4, (4, 4, c), maxval=0.6)
    smooth = jax.image.resize(coarse, (n, n, c), "linear")

    def mix(t: jax.Array) -> jax.Array:
        return a[None, None] * (1 - t[..., None]) + b[None, None] * t[..., None]

    options = jnp.stack(
        [jnp.broadcast_to(a, (n, n, c)), mix(wave), mix(checks), smooth]
    )  # [kinds, n, n, c]
    return options[jnp.asarray(kind, jnp.int32)]


def render(
    layout: Layout,
    *,
    config: SceneConfig,
    background: int | Int[Array, ""],
    key: jax.Array,
) -> Scene:
    """Draw ``layout`` over a background of kind ``background`` (see :data:`BACKGROUNDS`).

    Args:
      layout: from :func:`sample_layout` (one scene; vmap for batches).
      config: the scene family.
      background: background kind, an int or a traced int32 scalar.
      key: draws the background's colours/pattern and the pixel noise.

    Returns:
      :class:`Scene`. With ``noise = 0`` an object pixel equals ``colour * (1 - texture/2 +
      texture/2 * sin(...))`` and a background pixel equals :func:`render_background` with the
      same key's first half.
    """
    check_key("key", key)
    kb, kn = jax.random.split(key)
    image = render_background(background, config=config, key=kb)
    instances = jnp.zeros((config.size, config.size), jnp.int32)
    x = jnp.arange(config.size, dtype=jnp.float32)[None, :]
    y = jnp.arange(config.size, dtype=jnp.float32)[:, None]
    for k in range(config.num_objects):
        mask = object_mask(layout, k, config=config) & layout.present[k]
        stripes = jnp.sin(0.9 * (x + y) + layout.phase[k])
        shade = 1.0 - config.texture / 2 + config.texture / 2 * stripes
        image = jnp.where(mask[..., None], layout.colours[k][None, None] * shade[..., None], image)
        instances = jnp.where(mask, k + 1, instances)
    obj_class = jnp.concatenate([jnp.zeros((1,), jnp.int32), layout.classes + 1])
    classes = obj_class[instances]
    counts = jnp.sum(jax.nn.one_hot(classes, config.classes + 1, dtype=jnp.float32), axis=(0, 1))
    labels = (counts[1:] > 0).astype(jnp.float32)
    main = jnp.argmax(counts[1:]).astype(jnp.int32)
    if config.noise:
        image = image + config.noise * jax.random.normal(kn, image.shape)
    return Scene(
        image.astype(jnp.float32),
        instances,
        classes,
        labels,
        main,
        jnp.asarray(background, jnp.int32),
    )


def make_scenes(
    n: int,
    *,
    config: SceneConfig,
    key: jax.Array,
    background: int | Int[Array, " n"] | None = None,
    classes: Int[Array, "n k"] | None = None,
) -> Scene:
    """``n`` independent scenes (a batched :class:`Scene`), one compiled program per config and
    ``n`` when called eagerly (traced with the caller inside its ``jit``/``vmap``).

    Args:
      n: number of scenes.
      config: the scene family.
      key: PRNG key.
      background: one kind for all, ``[n]`` kinds, or ``None`` for uniformly random kinds.
      classes: optional ``[n, num_objects]`` object classes (e.g. to balance or correlate them).
    """
    check_key("key", key)
    if not (isinstance(n, int) and n >= 1):
        raise ValueError(f"n={n!r}; expected a positive integer")
    kl, kr, kb = jax.random.split(key, 3)
    if background is None:
        background = jax.random.randint(kb, (n,), 0, len(BACKGROUNDS))
    bg = jnp.broadcast_to(jnp.asarray(background, jnp.int32), (n,))
    if isinstance(background, int) and not 0 <= background < len(BACKGROUNDS):
        raise ValueError(f"background={background}; expected a kind in [0, {len(BACKGROUNDS)})")
    if classes is not None:
        check_shape("classes", classes, (n, config.num_objects))
    return _make_scenes(config, kl, kr, bg, classes, n)


# ``eqx.filter_jit``: the config's arrays (a glyph bank) are traced, its other fields and ``n``
# are static. Called eagerly the vmapped renderer is one program (op by op it would cost about
# twice the CPU time of compiling it); inside a caller's jit it is traced with the caller.
@eqx.filter_jit
def _make_scenes(config: SceneConfig, kl, kr, bg, classes, n: int) -> Scene:
    lkeys = jax.random.split(kl, n)
    if classes is None:
        layouts = jax.vmap(lambda k: sample_layout(config=config, key=k))(lkeys)
    else:
        layouts = jax.vmap(lambda k, c: sample_layout(config=config, key=k, classes=c))(
            lkeys, classes
        )
    return jax.vmap(lambda lay, b, k: render(lay, config=config, background=b, key=k))(
        layouts, bg, jax.random.split(kr, n)
    )


def move_layout(
    layout: Layout,
    velocity: Float[Array, "k 2"],
    t: float | Float[Array, ""],
    *,
    config: SceneConfig,
) -> Layout:
    """The layout after ``t`` frames of constant ``velocity`` (pixels/frame), reflected at the
    borders."""
    check_shape("velocity", velocity, (config.num_objects, 2))
    lo = layout.radii[:, None]
    span = jnp.maximum(config.size - 2 * lo, 1e-6)
    pos = layout.centres - lo + velocity * t
    folded = jnp.abs(jnp.mod(pos, 2 * span) - span)  # triangle wave: reflection at the borders
    return layout._replace(centres=lo + span - folded)


def make_sequence(
    frames: int,
    *,
    config: SceneConfig,
    key: jax.Array,
    background: int | Int[Array, ""] = 0,
    speed: float = 1.5,
) -> Scene:
    """A short video: one layout whose objects move with random constant velocities.

    The background pattern is the same in every frame; instance ids identify the same object in
    every frame (for tracking). Fields carry a leading ``[frames]`` axis.
    """
    check_key("key", key)
    if not (isinstance(frames, int) and frames >= 1):
        raise ValueError(f"frames={frames!r}; expected a positive integer")
    kl, kv, kr = jax.random.split(key, 3)
    layout = sample_layout(config=config, key=kl)
    angle = jax.random.uniform(kv, (config.num_objects,), maxval=2 * jnp.pi)
    velocity = speed * jnp.stack([jnp.sin(angle), jnp.cos(angle)], -1)

    def frame(t: jax.Array) -> Scene:
        moved = move_layout(layout, velocity, t, config=config)
        return render(moved, config=config, background=background, key=kr)

    return jax.vmap(frame)(jnp.arange(frames, dtype=jnp.float32))


def patch_fractions(
    class_mask: Int[Array, "*b h w"], patch: int, num_classes: int
) -> Float[Array, "*b gh gw n"]:
    """Fraction of each ``patch x patch`` cell's pixels in each class (``num_classes`` incl. 0)."""
    check_int("patch", patch, minimum=1)
    check_int("num_classes", num_classes, minimum=1)
    if jnp.ndim(class_mask) < 2:
        raise ValueError(f"class_mask has shape {jnp.shape(class_mask)}; expected [..., H, W]")
    h, w = class_mask.shape[-2:]
    if patch < 1 or h % patch or w % patch:
        raise ValueError(f"patch={patch} must divide the mask's spatial shape {(h, w)}")
    lead = class_mask.shape[:-2]
    onehot = jax.nn.one_hot(class_mask, num_classes, dtype=jnp.float32)
    cells = onehot.reshape(*lead, h // patch, patch, w // patch, patch, num_classes)
    return cells.mean(axis=(-4, -2))


def patch_labels(
    class_mask: Int[Array, "*b h w"], patch: int, num_classes: int, min_cover: float = 0.25
) -> Int[Array, "*b gh gw"]:
    """Per-patch labels: the object class id (``c + 1``) covering most of a patch's pixels, or 0
    (background) when no object class covers at least ``min_cover`` of it.

    Args:
      class_mask: class mask(s) from :class:`Scene` (0 background, ``c + 1`` objects).
      patch: patch side; must divide the mask's height and width.
      num_classes: object classes (ids ``0 .. num_classes`` occur in the mask).
      min_cover: smallest object share of a patch that labels it with the object.
    """
    check_range("min_cover", min_cover, 0.0, 1.0)
    frac = patch_fractions(class_mask, patch, num_classes + 1)
    obj = jnp.argmax(frac[..., 1:], axis=-1)
    covered = jnp.take_along_axis(frac[..., 1:], obj[..., None], -1)[..., 0] >= min_cover
    return jnp.where(covered, obj + 1, 0).astype(jnp.int32)


__all__ = [
    "BACKGROUNDS",
    "SHAPES",
    "Layout",
    "Scene",
    "SceneConfig",
    "make_scenes",
    "make_sequence",
    "move_layout",
    "object_mask",
    "patch_fractions",
    "patch_labels",
    "render",
    "render_background",
    "sample_layout",
]
