"""A small U-Net epsilon-denoiser for 8x8 to 32x32 images (flax.nnx, channels last).

Two resolution levels by default: ``conv_in -> [ResBlock, down] x L -> ResBlock ->
[up, concat skip, ResBlock] x L -> conv_out``, residual blocks with GroupNorm, SiLU and an additive
projection of the sinusoidal time embedding (Ho et al. 2020, scaled down). Height and width must be
divisible by ``2 ** len(channels[1:])``.

Optional class conditioning (``num_classes=K``): a learned label embedding with a null row ``K``
(for classifier-free guidance) is added to the time embedding; optional ``scalar_cond=True`` adds
an embedded per-sample scalar the same way. Both are off by default and leave the unconditional
model unchanged.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Float, Int

from jaxpapers.core.nn.mlp import _labels_or_null, _scalar_or_one, sinusoidal_embedding


def _groups(c: int) -> int:
    return 8 if c % 8 == 0 else 1


class ResBlock(nnx.Module):
    """``x + conv(silu(norm(conv(silu(norm(x))) + emb)))`` with a 1x1 skip when widths differ."""

    def __init__(self, c_in: int, c_out: int, emb: int, *, rngs: nnx.Rngs):
        self.norm1 = nnx.GroupNorm(c_in, num_groups=_groups(c_in), rngs=rngs)
        self.conv1 = nnx.Conv(c_in, c_out, (3, 3), rngs=rngs)
        self.temb = nnx.Linear(emb, c_out, rngs=rngs)
        self.norm2 = nnx.GroupNorm(c_out, num_groups=_groups(c_out), rngs=rngs)
        self.conv2 = nnx.Conv(c_out, c_out, (3, 3), rngs=rngs)
        self.skip = nnx.Conv(c_in, c_out, (1, 1), rngs=rngs) if c_in != c_out else None

    def __call__(self, x: Array, emb: Array) -> Array:
        h = self.conv1(jax.nn.silu(self.norm1(x)))
        h = h + self.temb(emb)[:, None, None, :]
        h = self.conv2(jax.nn.silu(self.norm2(h)))
        return h + (x if self.skip is None else self.skip(x))


class UNet(nnx.Module):
    """Epsilon-prediction U-Net: ``eps(x [b, h, w, c], t [b]) -> [b, h, w, c]``.

    Args:
      in_channels: image channels.
      channels: widths per level, e.g. ``(32, 64)``; each extra level halves the resolution.
      emb: time-embedding width.
      num_classes: if given, a label embedding of ``num_classes + 1`` rows (the last is null).
      scalar_cond: if True, an extra embedded scalar per sample (``scalar=None`` means 1).
      rngs: flax RNG streams.
    """

    def __init__(
        self,
        in_channels: int = 1,
        channels: Sequence[int] = (32, 64),
        emb: int = 64,
        *,
        num_classes: int | None = None,
        scalar_cond: bool = False,
        rngs: nnx.Rngs,
    ):
        if num_classes is not None and num_classes < 1:
            raise ValueError(f"num_classes={num_classes}; expected None or an integer >= 1")
        channels = tuple(int(c) for c in channels)
        if not channels:
            raise ValueError("channels must name at least one width")
        self.in_channels = in_channels
        self.levels = len(channels) - 1
        self.emb = emb
        self.time_mlp = nnx.Linear(emb, emb, rngs=rngs)
        self.num_classes = num_classes
        self.label_emb = (
            nnx.Embed(num_classes + 1, emb, rngs=rngs) if num_classes is not None else None
        )
        self.scalar_mlp = nnx.Linear(emb, emb, rngs=rngs) if scalar_cond else None
        self.conv_in = nnx.Conv(in_channels, channels[0], (3, 3), rngs=rngs)
        self.down = nnx.List(
            [ResBlock(a, b, emb, rngs=rngs) for a, b in itertools.pairwise(channels)]
        )
        self.mid = ResBlock(channels[-1], channels[-1], emb, rngs=rngs)
        self.up = nnx.List(
            [
                ResBlock(b + a, a, emb, rngs=rngs)
                for a, b in zip(reversed(channels[:-1]), reversed(channels[1:]), strict=True)
            ]
        )
        self.norm_out = nnx.GroupNorm(channels[0], num_groups=_groups(channels[0]), rngs=rngs)
        self.conv_out = nnx.Conv(channels[0], in_channels, (3, 3), rngs=rngs)

    def __call__(
        self,
        x: Float[Array, "b h w c"],
        t: Float[Array, " b"],
        labels: Int[Array, " b"] | None = None,
        scalar: Float[Array, " b"] | None = None,
    ) -> Float[Array, "b h w c"]:
        div = 2**self.levels
        if x.ndim != 4 or x.shape[-1] != self.in_channels or t.shape != x.shape[:1]:
            raise ValueError(
                f"x must be [b, h, w, {self.in_channels}] and t [b]; got {x.shape} and {t.shape}"
            )
        if x.shape[1] % div or x.shape[2] % div:
            raise ValueError(f"image size {x.shape[1:3]} must be divisible by {div}")
        if self.label_emb is not None:
            labels = _labels_or_null(labels, x.shape[0], self.num_classes)
        elif labels is not None:
            raise ValueError("labels given to a U-Net built without num_classes")
        if self.scalar_mlp is not None:
            scalar = _scalar_or_one(scalar, x)
        elif scalar is not None:
            raise ValueError("scalar given to a U-Net built without scalar_cond=True")
        emb = self.time_mlp(sinusoidal_embedding(t, self.emb))
        if self.label_emb is not None:
            emb = emb + self.label_emb(labels)
        if self.scalar_mlp is not None:
            emb = emb + self.scalar_mlp(sinusoidal_embedding(scalar, self.emb, scale=100.0))
        emb = jax.nn.silu(emb)
        h = self.conv_in(x)
        skips = []
        for block in self.down:
            skips.append(h)
            h = block(_pool(h), emb)
        h = self.mid(h, emb)
        for block in self.up:
            skip = skips.pop()
            h = block(jnp.concatenate([_upsample(h), skip], axis=-1), emb)
        return self.conv_out(jax.nn.silu(self.norm_out(h)))


def _pool(x: Array) -> Array:
    b, h, w, c = x.shape
    return x.reshape(b, h // 2, 2, w // 2, 2, c).mean(axis=(2, 4))


def _upsample(x: Array) -> Array:
    return jnp.repeat(jnp.repeat(x, 2, axis=1), 2, axis=2)
