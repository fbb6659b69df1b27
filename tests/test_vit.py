"""ViT extensions: tokens and last attention, mask token, read-out split; backward compatible."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import tolerance

from jaxpapers.core.nn.vit import ViT, ViTConfig, patchify


def test_tokens_agree_with_features_and_mask_token():
    cfg = ViTConfig(image_size=8, channels=1, patch=4, dim=16, heads=2, mlp=32, mask_token=True)
    gdef, state = nnx.split(ViT(cfg, rngs=nnx.Rngs(0)))
    x = jax.random.normal(jax.random.key(0), (3, 8, 8, 1))
    mask = jnp.array([[True, False, False, True]] * 3)

    def run(state, x):
        m = nnx.merge(gdef, state)
        t = m.tokens(x)
        tm = m.tokens(x, mask)
        # a masked image's tokens equal the tokens of an image whose masked patches embed to the
        # mask token: recompute by hand from the embeddings
        h = m.embed_tokens(x, mask)
        emb = m.embed(patchify(x, 4))
        return t, tm, m.features(x), h, emb, m.mask[...], m.pos[...], m.cls[...]

    t, tm, feats, h, emb, tok, pos, cls = jax.jit(run)(state, x)
    np.testing.assert_allclose(t.cls, feats, **tolerance(np.float32))
    np.testing.assert_allclose(t.attention.sum(-1), 1.0, **tolerance(np.float32))
    assert t.patches.shape == (3, 4, 16) and t.attention.shape == (3, 2, 5, 5)
    want = np.where(np.asarray(mask)[..., None], np.asarray(tok), np.asarray(emb))
    want = np.concatenate([np.broadcast_to(cls, (3, 1, 16)), want], 1) + pos
    np.testing.assert_allclose(h, want, **tolerance(np.float32))
    assert not np.allclose(tm.patches, t.patches)


def test_default_config_has_no_mask_token_and_bad_inputs():
    vit = ViT(ViTConfig(image_size=8, patch=4, dim=16, heads=2), rngs=nnx.Rngs(0))
    assert not hasattr(vit, "mask")
    with pytest.raises(ValueError, match="mask token"):
        vit.tokens(jnp.zeros((1, 8, 8, 1)), jnp.zeros((1, 4), bool))
    with pytest.raises(ValueError, match="patch=3 must divide"):
        ViT(ViTConfig(image_size=8, patch=3), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="x has shape"):
        vit.tokens(jnp.zeros((1, 16, 16, 1)))
