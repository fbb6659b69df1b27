"""A small Vision Transformer in flax.nnx (Dosovitskiy et al. 2021) for 8x8 to 32x32 images.

Patches of ``p x p`` pixels are flattened and embedded by an ``nnx.Linear``; a learned class token
and position embeddings are added; pre-LN blocks ``h += W_o MHA(LN h)``,
``h += W_2 gelu(W_1 LN h)``;
the class token's final LayerNorm feeds a linear head. Every projection is an ``nnx.Linear`` so
that weight quantization can walk them.

For self-supervised and dense use, :meth:`ViT.tokens` returns every final token (the [CLS] token
and the patch tokens, after the final LayerNorm) together with the last block's attention
probabilities ``[B, heads, 1 + N, 1 + N]`` (row 0, columns ``1:`` is the [CLS]-to-patch read-out);
with ``ViTConfig(mask_token=True)`` a learned mask token replaces the embeddings of masked patches
(masked image modelling, as in BEiT/iBOT). :func:`patchify` is the patch layout used throughout:
patch ``n = row * (image_size // patch) + column``.

Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxpapers.core.nn.vit import ViT, ViTConfig
    >>> vit = ViT(ViTConfig(image_size=8, patch=4, dim=16, heads=2, mask_token=True),
    ...           rngs=nnx.Rngs(0))
    >>> t = vit.tokens(jnp.zeros((3, 8, 8, 1)), mask=jnp.zeros((3, 4), bool))
    >>> t.cls.shape, t.patches.shape, t.attention.shape
    ((3, 16), (3, 4, 16), (3, 2, 5, 5))
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx


class ViTConfig(NamedTuple):
    """Sizes of a :class:`ViT`."""

    image_size: int = 8
    channels: int = 1
    patch: int = 2
    dim: int = 64
    depth: int = 2
    heads: int = 4
    mlp: int = 128
    classes: int = 10
    mask_token: bool = False


DIGITS_VIT = ViTConfig()


class ViTBlock(nnx.Module):
    """Pre-LN transformer block."""

    def __init__(self, cfg: ViTConfig, *, rngs: nnx.Rngs):
        d = cfg.dim
        self.heads = cfg.heads
        self.ln1 = nnx.LayerNorm(d, rngs=rngs)
        self.qkv = nnx.Linear(d, 3 * d, rngs=rngs)
        self.proj = nnx.Linear(d, d, rngs=rngs)
        self.ln2 = nnx.LayerNorm(d, rngs=rngs)
        self.fc1 = nnx.Linear(d, cfg.mlp, rngs=rngs)
        self.fc2 = nnx.Linear(cfg.mlp, d, rngs=rngs)

    def attend(self, h: jax.Array, attn: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
        """The block's output tokens and its attention probabilities ``[B, heads, T, T]``.

        With ``attn`` given, the block mixes the values with those probabilities instead of its
        own: passing ``jax.lax.stop_gradient(attn)`` differentiates only the value path (the
        attention read-out).
        """
        b, t, d = h.shape
        dh = d // self.heads
        q, k, v = jnp.split(self.qkv(self.ln1(h)).reshape(b, t, 3, self.heads, dh), 3, axis=2)
        q, k, v = q[:, :, 0], k[:, :, 0], v[:, :, 0]
        if attn is None:
            logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(dh * 1.0)
            attn = jax.nn.softmax(logits, axis=-1)
        h = h + self.proj(jnp.einsum("bhqk,bkhd->bqhd", attn, v).reshape(b, t, d))
        return h + self.fc2(jax.nn.gelu(self.fc1(self.ln2(h)))), attn

    def __call__(self, h: jax.Array) -> jax.Array:
        return self.attend(h)[0]


class ViTTokens(NamedTuple):
    """Final tokens of a :class:`ViT` (after the final LayerNorm) and the last attention map.

    Attributes:
      cls: ``[B, dim]`` class token.
      patches: ``[B, N, dim]`` patch tokens, ``N = (image_size // patch) ** 2``.
      attention: ``[B, heads, 1 + N, 1 + N]`` last block's attention probabilities.
    """

    cls: jax.Array
    patches: jax.Array
    attention: jax.Array


def patchify(x: jax.Array, patch: int) -> jax.Array:
    """``[B, H, W, C]`` -> ``[B, (H/p)(W/p), p*p*C]`` in row-major patch order."""
    if jnp.ndim(x) != 4:
        raise ValueError(f"x has shape {jnp.shape(x)}; expected [B, H, W, C]")
    if not isinstance(patch, int) or patch < 1:
        raise ValueError(f"patch={patch!r}; expected a positive integer")
    b, hgt, wid, ch = x.shape
    if hgt % patch or wid % patch:
        raise ValueError(f"patch={patch} must divide the image size {(hgt, wid)}")
    g, k = hgt // patch, wid // patch
    p = x.reshape(b, g, patch, k, patch, ch).transpose(0, 1, 3, 2, 4, 5)
    return p.reshape(b, g * k, patch * patch * ch)


class ViT(nnx.Module):
    """Vision Transformer classifier: images ``[B, H, W, C]`` -> logits ``[B, classes]``."""

    def __init__(self, cfg: ViTConfig = DIGITS_VIT, *, rngs: nnx.Rngs):
        if cfg.image_size % cfg.patch:
            raise ValueError(f"patch={cfg.patch} must divide image_size={cfg.image_size}")
        if cfg.dim % cfg.heads:
            raise ValueError(f"heads={cfg.heads} must divide dim={cfg.dim}")
        self.cfg = cfg
        n = (cfg.image_size // cfg.patch) ** 2
        self.embed = nnx.Linear(cfg.patch * cfg.patch * cfg.channels, cfg.dim, rngs=rngs)
        self.cls = nnx.Param(jnp.zeros((1, 1, cfg.dim)))
        if cfg.mask_token:
            self.mask = nnx.Param(jnp.zeros((1, 1, cfg.dim)))
        self.pos = nnx.Param(0.02 * jax.random.normal(rngs.params(), (1, n + 1, cfg.dim)))
        self.blocks = nnx.List([ViTBlock(cfg, rngs=rngs) for _ in range(cfg.depth)])
        self.ln = nnx.LayerNorm(cfg.dim, rngs=rngs)
        self.head = nnx.Linear(cfg.dim, cfg.classes, rngs=rngs)

    def embed_tokens(self, x: jax.Array, mask: jax.Array | None = None) -> jax.Array:
        """Input tokens ``[B, 1 + N, dim]`` (class token first, position embeddings added).

        Args:
          x: ``[B, image_size, image_size, channels]`` images.
          mask: optional ``[B, N]`` bool; masked patches get the learned mask token
            (needs ``mask_token=True``).
        """
        c = self.cfg
        if x.ndim != 4 or x.shape[1:] != (c.image_size, c.image_size, c.channels):
            raise ValueError(
                f"x has shape {x.shape}; expected [B, {c.image_size}, {c.image_size}, {c.channels}]"
            )
        b = x.shape[0]
        h = self.embed(patchify(x, c.patch))
        if mask is not None:
            if not c.mask_token:
                raise ValueError("mask given but the ViT has no mask token (mask_token=False)")
            if mask.shape != h.shape[:2]:
                raise ValueError(f"mask has shape {mask.shape}; expected {h.shape[:2]}")
            h = jnp.where(mask[..., None], self.mask[...], h)
        h = jnp.concatenate([jnp.broadcast_to(self.cls[...], (b, 1, c.dim)), h], axis=1)
        return h + self.pos[...]

    def tokens(self, x: jax.Array, mask: jax.Array | None = None) -> ViTTokens:
        """All final tokens and the last block's attention (see :class:`ViTTokens`)."""
        h = self.embed_tokens(x, mask)
        for block in self.blocks[:-1]:
            h = block(h)
        h, attn = self.blocks[-1].attend(h)
        out = self.ln(h)
        return ViTTokens(out[:, 0], out[:, 1:], attn)

    def features(self, x: jax.Array) -> jax.Array:
        """``[B, H, W, C]`` images -> ``[B, dim]`` final class-token features."""
        h = self.embed_tokens(x)
        for block in self.blocks:
            h = block(h)
        return self.ln(h[:, 0])

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.head(self.features(x))


__all__ = ["ViT", "ViTBlock", "ViTConfig", "ViTTokens", "patchify"]
