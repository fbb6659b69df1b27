"""Scene generator: masks match the drawn pixels, shapes match a NumPy reference, jit/vmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers.core.data.scenes import (
    BACKGROUNDS,
    SceneConfig,
    make_scenes,
    make_sequence,
    object_mask,
    patch_fractions,
    patch_labels,
    render,
    render_background,
    sample_layout,
)


def test_masks_match_drawn_pixels():
    cfg = SceneConfig(size=16, num_objects=3, min_objects=3, texture=0.0)
    key = jax.random.key(3)

    @jax.jit
    def draw(bg):
        layout = sample_layout(config=cfg, key=key)
        back = render_background(bg, config=cfg, key=jax.random.split(key)[0])
        return layout, render(layout, config=cfg, background=bg, key=key), back

    for bg in range(len(BACKGROUNDS)):
        layout, scene, back = draw(bg)
        back = np.asarray(back)
        img, inst = np.asarray(scene.image), np.asarray(scene.instances)
        np.testing.assert_array_equal(img[inst == 0], back[inst == 0])
        for k in range(3):
            np.testing.assert_allclose(
                img[inst == k + 1],
                np.broadcast_to(np.asarray(layout.colours[k]), img[inst == k + 1].shape),
            )
        # class mask is the class of the visible instance
        cls = np.concatenate([[0], np.asarray(layout.classes) + 1])[inst]
        np.testing.assert_array_equal(np.asarray(scene.classes), cls)
        counts = np.bincount(cls.ravel(), minlength=cfg.classes + 1)[1:]
        np.testing.assert_array_equal(np.asarray(scene.labels), (counts > 0).astype(np.float32))
        assert int(scene.main_class) == int(np.argmax(counts))


def test_shapes_against_numpy_reference():
    cfg = SceneConfig(size=20, num_objects=1)
    layout = sample_layout(config=cfg, key=jax.random.key(0))
    cy, cx = (float(v) for v in layout.centres[0])
    r = float(layout.radii[0])
    yy, xx = np.meshgrid(np.arange(20) + 0.5, np.arange(20) + 0.5, indexing="ij")
    ref = {
        0: (abs(yy - cy) < r) & (abs(xx - cx) < r),
        1: (yy - cy) ** 2 + (xx - cx) ** 2 < r * r,
        5: abs(yy - cy) + abs(xx - cx) < r,
    }
    masks = jax.jit(
        jax.vmap(lambda c: object_mask(layout._replace(classes=c[None]), 0, config=cfg))
    )(jnp.arange(6))
    for c, want in ref.items():
        got = masks[c]
        np.testing.assert_array_equal(np.asarray(got), want)
        assert want.sum() > 0


def test_glyph_scene_and_patch_labels():
    glyphs = jnp.zeros((2, 4, 4)).at[0, :, :2].set(1.0).at[1].set(1.0)
    cfg = SceneConfig(
        size=16,
        num_objects=1,
        glyphs=glyphs,
        glyph_labels=jnp.array([3, 7]),
        min_radius=4.0,
        max_radius=4.0,
    )
    layout = sample_layout(config=cfg, key=jax.random.key(1), classes=jnp.array([7]))
    assert int(layout.classes[0]) == 7 and int(layout.glyph[0]) == 1
    scene = jax.jit(lambda lay: render(lay, config=cfg, background=0, key=jax.random.key(2)))(
        layout
    )
    assert int(jnp.sum(scene.instances)) == 64  # the full 8x8 glyph box
    lab = patch_labels(scene.classes, 4, cfg.classes)
    frac = np.asarray(patch_fractions(scene.classes, 4, 11))
    want = np.where(frac[..., 1:].max(-1) >= 0.25, frac[..., 1:].argmax(-1) + 1, 0)
    np.testing.assert_array_equal(np.asarray(lab), want)
    assert set(np.unique(np.asarray(lab))) <= {0, 8}


def test_batches_jit_vmap_and_sequences():
    cfg = SceneConfig(size=16, num_objects=2, texture=0.4, noise=0.01)
    bg = jnp.array([0, 1, 2, 3])
    key = jax.random.key(0)
    batch = jax.jit(lambda k, b: make_scenes(4, config=cfg, key=k, background=b))(key, bg)
    np.testing.assert_array_equal(batch.background, bg)
    # scene 2 of the batch equals the single scene drawn from the same keys
    kl, kr, _ = jax.random.split(key, 3)

    def single():
        lay = sample_layout(config=cfg, key=jax.random.split(kl, 4)[2])
        return render(lay, config=cfg, background=2, key=jax.random.split(kr, 4)[2])

    one = jax.jit(single)()
    np.testing.assert_allclose(batch.image[2], one.image, atol=1e-6)
    np.testing.assert_array_equal(batch.instances[2], one.instances)
    seq = jax.jit(lambda k: make_sequence(4, config=cfg, key=k, background=1))(jax.random.key(5))
    assert seq.image.shape == (4, 16, 16, 3)
    area = (seq.instances > 0).sum(axis=(1, 2))
    assert int(area.min()) > 0
    assert not np.array_equal(np.asarray(seq.instances[0]), np.asarray(seq.instances[-1]))


def test_bad_inputs():
    with pytest.raises(ValueError, match="min_objects"):
        SceneConfig(num_objects=1, min_objects=2)
    with pytest.raises(ValueError, match="num_classes"):
        SceneConfig(num_classes=9)
    with pytest.raises(ValueError, match="glyph_labels"):
        SceneConfig(glyphs=jnp.zeros((3, 4, 4)), glyph_labels=jnp.zeros((2,), jnp.int32))
    with pytest.raises(ValueError, match="background"):
        make_scenes(2, config=SceneConfig(), key=jax.random.key(0), background=7)
    with pytest.raises(ValueError, match="patch"):
        patch_labels(jnp.zeros((10, 10), jnp.int32), 4, 3)
    with pytest.raises(ValueError, match="classes"):
        make_scenes(
            2, config=SceneConfig(), key=jax.random.key(0), classes=jnp.zeros((2, 5), jnp.int32)
        )


def test_eager_make_scenes_equals_the_traced_one_and_takes_a_glyph_bank():
    """Called eagerly make_scenes is one compiled program (``eqx.filter_jit``: a glyph bank's
    arrays traced); it draws the same scenes as inside a caller's jit."""
    glyphs = jnp.zeros((2, 4, 4)).at[0, :, :2].set(1.0).at[1].set(1.0)
    cfg = SceneConfig(size=16, num_objects=2, glyphs=glyphs, glyph_labels=jnp.array([3, 7]))
    key = jax.random.key(4)
    eager = make_scenes(3, config=cfg, key=key)
    traced = jax.jit(lambda k: make_scenes(3, config=cfg, key=k))(key)
    for a, b in zip(eager, traced, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)
    assert set(np.unique(np.asarray(eager.classes))) <= {0, 4, 8}
