"""A small residual CNN in flax.nnx whose head is global average pooling and one linear layer.

``stem conv 3x3 -> [stage_i: (stride-2 conv 3x3 for i > 0) -> residual block]* -> ReLU`` gives the
last feature map ``A [B, h, w, K]``; the logits are ``y = W^T mean_{ij} A_ij + b``. Because the
head is linear after pooling, the class activation map ``CAM_c = sum_k W_kc A_k`` decomposes each
logit exactly: ``y_c = mean_ij CAM_c[i, j] + b_c``. :meth:`ConvNet.forward` returns both the
logits and the feature map, and :meth:`ConvNet.classify` maps a feature map to logits, so that
attribution methods can differentiate the head alone.

No normalisation layers (so the network is a pure function of its parameters and one image;
batch statistics would couple the images of a batch).

Examples:
    >>> import jax, jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxpapers.core.nn.cnn import CNNConfig, ConvNet
    >>> net = ConvNet(CNNConfig(channels=3, widths=(8, 16), classes=2), rngs=nnx.Rngs(0))
    >>> out = net.forward(jnp.zeros((4, 32, 32, 3)))
    >>> out.logits.shape, out.features.shape
    ((4, 2), (4, 16, 16, 16))
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Float


class CNNConfig(NamedTuple):
    """Sizes of a :class:`ConvNet`.

    Attributes:
      channels: input channels.
      widths: feature channels of each stage; every stage after the first halves the resolution.
      classes: number of logits.
      stem_stride: stride of the stem convolution (2 halves the input resolution once more).
    """

    channels: int = 3
    widths: tuple[int, ...] = (16, 32)
    classes: int = 2
    stem_stride: int = 1


class ResidualBlock(nnx.Module):
    """``x + conv(relu(conv(relu(x))))`` (pre-activation, same width)."""

    def __init__(self, width: int, *, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(width, width, (3, 3), rngs=rngs)
        self.conv2 = nnx.Conv(
            width, width, (3, 3), kernel_init=nnx.initializers.zeros_init(), rngs=rngs
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        return x + self.conv2(jax.nn.relu(self.conv1(jax.nn.relu(x))))


class CNNOutput(NamedTuple):
    """``logits [B, classes]`` and the last feature map ``features [B, h, w, K]``."""

    logits: Float[Array, "b c"]
    features: Float[Array, "b h w k"]


class ConvNet(nnx.Module):
    """Residual CNN with a GAP-linear head: images ``[B, H, W, C]`` -> logits ``[B, classes]``."""

    def __init__(self, cfg: CNNConfig | None = None, *, rngs: nnx.Rngs):
        cfg = CNNConfig() if cfg is None else cfg
        if not cfg.widths or min(cfg.widths) < 1:
            raise ValueError(f"widths={cfg.widths}; expected a non-empty tuple of positive ints")
        if cfg.classes < 1 or cfg.channels < 1 or cfg.stem_stride not in (1, 2):
            raise ValueError(
                f"classes={cfg.classes}, channels={cfg.channels}, stem_stride={cfg.stem_stride}; "
                "expected positive sizes and a stem stride of 1 or 2"
            )
        self.cfg = cfg
        w0 = cfg.widths[0]
        self.stem = nnx.Conv(cfg.channels, w0, (3, 3), strides=cfg.stem_stride, rngs=rngs)
        self.down = nnx.List(
            [
                nnx.Conv(a, b, (3, 3), strides=2, rngs=rngs)
                for a, b in zip(cfg.widths[:-1], cfg.widths[1:], strict=True)
            ]
        )
        self.blocks = nnx.List([ResidualBlock(w, rngs=rngs) for w in cfg.widths])
        self.head = nnx.Linear(cfg.widths[-1], cfg.classes, rngs=rngs)

    def features(self, x: Float[Array, "b h w c"]) -> Float[Array, "b h2 w2 k"]:
        """The last (non-negative) feature map ``A``."""
        if x.ndim != 4 or x.shape[-1] != self.cfg.channels:
            raise ValueError(f"x has shape {x.shape}; expected [B, H, W, {self.cfg.channels}]")
        h = self.blocks[0](self.stem(x))
        for down, block in zip(self.down, self.blocks[1:], strict=True):
            h = block(down(jax.nn.relu(h)))
        return jax.nn.relu(h)

    def classify(self, features: Float[Array, "b h w k"]) -> Float[Array, "b c"]:
        """The head: global average pooling, then the linear layer."""
        return self.head(jnp.mean(features, axis=(1, 2)))

    def forward(self, x: Float[Array, "b h w c"]) -> CNNOutput:
        """Logits and the last feature map in one pass."""
        a = self.features(x)
        return CNNOutput(self.classify(a), a)

    def __call__(self, x: Float[Array, "b h w c"]) -> Float[Array, "b c"]:
        return self.classify(self.features(x))


__all__ = ["CNNConfig", "CNNOutput", "ConvNet", "ResidualBlock"]
