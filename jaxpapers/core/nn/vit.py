"""A small Vision Transformer in flax.nnx (Dosovitskiy et al. 2021) for 8x8 to 32x32 images.

Patches of ``p x p`` pixels are flattened and embedded by an ``nnx.Linear``; a learned class token
and position embeddings are added; pre-LN blocks ``h += W_o MHA(LN h)``,
``h += W_2 gelu(W_1 LN h)``;
the class token's final LayerNorm feeds a linear head. Every projection is an ``nnx.Linear`` so
that weight quantization can walk them.
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

    def __call__(self, h: jax.Array) -> jax.Array:
        b, t, d = h.shape
        dh = d // self.heads
        q, k, v = jnp.split(self.qkv(self.ln1(h)).reshape(b, t, 3, self.heads, dh), 3, axis=2)
        q, k, v = q[:, :, 0], k[:, :, 0], v[:, :, 0]
        attn = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(dh * 1.0), axis=-1)
        h = h + self.proj(jnp.einsum("bhqk,bkhd->bqhd", attn, v).reshape(b, t, d))
        return h + self.fc2(jax.nn.gelu(self.fc1(self.ln2(h))))


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
        self.pos = nnx.Param(0.02 * jax.random.normal(rngs.params(), (1, n + 1, cfg.dim)))
        self.blocks = nnx.List([ViTBlock(cfg, rngs=rngs) for _ in range(cfg.depth)])
        self.ln = nnx.LayerNorm(cfg.dim, rngs=rngs)
        self.head = nnx.Linear(cfg.dim, cfg.classes, rngs=rngs)

    def features(self, x: jax.Array) -> jax.Array:
        """``[B, H, W, C]`` images -> ``[B, dim]`` final class-token features."""
        c = self.cfg
        if x.ndim != 4 or x.shape[1:] != (c.image_size, c.image_size, c.channels):
            raise ValueError(
                f"x has shape {x.shape}; expected [B, {c.image_size}, {c.image_size}, {c.channels}]"
            )
        b, p, g = x.shape[0], c.patch, c.image_size // c.patch
        patches = x.reshape(b, g, p, g, p, c.channels).transpose(0, 1, 3, 2, 4, 5)
        h = self.embed(patches.reshape(b, g * g, p * p * c.channels))
        h = jnp.concatenate([jnp.broadcast_to(self.cls[...], (b, 1, c.dim)), h], axis=1)
        h = h + self.pos[...]
        for block in self.blocks:
            h = block(h)
        return self.ln(h[:, 0])

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.head(self.features(x))


__all__ = ["ViT", "ViTBlock", "ViTConfig"]
