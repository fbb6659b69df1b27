"""A plain MLP and an MLP epsilon-denoiser with a sinusoidal time embedding (flax.nnx)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_labels


def sinusoidal_embedding(t: Float[Array, " b"], dim: int, scale: float = 1000.0) -> Array:
    r"""Transformer-style embedding :math:`[\sin(s t \omega_k), \cos(s t \omega_k)]`,
    :math:`\omega_k = 10^{-4k/(d/2)}`; returns ``[b, dim]`` (``dim`` even)."""
    if dim % 2:
        raise ValueError(f"dim={dim}; expected an even embedding width")
    half = dim // 2
    freqs = jnp.exp(-math.log(10_000.0) * jnp.arange(half, dtype=t.dtype) / half)
    args = scale * t[:, None] * freqs[None, :]
    return jnp.concatenate([jnp.sin(args), jnp.cos(args)], axis=-1)


class MLP(nnx.Module):
    """``Linear -> act -> ... -> Linear`` on ``[batch, in]`` inputs."""

    def __init__(self, sizes: Sequence[int], *, rngs: nnx.Rngs, act=jax.nn.silu):
        if len(sizes) < 2:
            raise ValueError(f"sizes={sizes}; expected at least input and output widths")
        self.layers = nnx.List([nnx.Linear(a, b, rngs=rngs) for a, b in itertools.pairwise(sizes)])
        self.act = act

    def __call__(self, x: Float[Array, "b i"]) -> Float[Array, "b o"]:
        for layer in self.layers[:-1]:
            x = self.act(layer(x))
        return self.layers[-1](x)


class MLPDenoiser(nnx.Module):
    """Epsilon-prediction MLP for vectors: ``eps(x [b, d], t [b]) -> [b, d]``.

    The time embedding is concatenated to the input. Optional conditioning (off by default, so the
    unconditional model is unchanged):

    * ``num_classes=K``: a learned label embedding of ``K + 1`` rows, row ``K`` being the null
      label (classifier-free guidance trains it by label dropout); ``labels=None`` means null.
    * ``scalar_cond=True``: an extra scalar per sample (a guidance strength, a branch flag, ...),
      sinusoidally embedded and concatenated; ``scalar=None`` means 1.

    Examples:
        >>> import jax.numpy as jnp
        >>> from flax import nnx
        >>> m = MLPDenoiser(2, hidden=8, depth=1, emb=4, num_classes=3, rngs=nnx.Rngs(0))
        >>> m(jnp.zeros((5, 2)), jnp.full((5,), 0.5), jnp.arange(5) % 4).shape
        (5, 2)
    """

    def __init__(
        self,
        dim: int,
        *,
        hidden: int = 256,
        depth: int = 3,
        emb: int = 32,
        num_classes: int | None = None,
        scalar_cond: bool = False,
        rngs: nnx.Rngs,
    ):
        if num_classes is not None and num_classes < 1:
            raise ValueError(f"num_classes={num_classes}; expected None or an integer >= 1")
        self.emb = emb
        self.dim = dim
        self.num_classes = num_classes
        self.scalar_cond = scalar_cond
        width = dim + emb * (1 + (num_classes is not None) + bool(scalar_cond))
        self.label_emb = (
            nnx.Embed(num_classes + 1, emb, rngs=rngs) if num_classes is not None else None
        )
        self.net = MLP([width, *([hidden] * depth), dim], rngs=rngs)

    def __call__(
        self,
        x: Float[Array, "b d"],
        t: Float[Array, " b"],
        labels: Int[Array, " b"] | None = None,
        scalar: Float[Array, " b"] | None = None,
    ) -> Float[Array, "b d"]:
        if x.ndim != 2 or x.shape[1] != self.dim or t.shape != x.shape[:1]:
            raise ValueError(f"x must be [b, {self.dim}] and t [b]; got {x.shape} and {t.shape}")
        parts = [x, sinusoidal_embedding(t, self.emb)]
        if self.label_emb is not None:
            parts.append(self.label_emb(_labels_or_null(labels, x.shape[0], self.num_classes)))
        elif labels is not None:
            raise ValueError("labels given to a model built without num_classes")
        if self.scalar_cond:
            parts.append(sinusoidal_embedding(_scalar_or_one(scalar, x), self.emb, scale=100.0))
        elif scalar is not None:
            raise ValueError("scalar given to a model built without scalar_cond=True")
        return self.net(jnp.concatenate(parts, axis=-1))


def _labels_or_null(labels: Array | None, batch: int, num_classes: int) -> Array:
    """``labels`` checked to be integer ``[batch]`` in ``[0, num_classes]`` (``num_classes`` is
    the null label), or all-null when ``None``."""
    if labels is None:
        return jnp.full((batch,), num_classes, jnp.int32)
    labels = jnp.asarray(labels)
    if labels.shape != (batch,) or not jnp.issubdtype(labels.dtype, jnp.integer):
        raise ValueError(
            f"labels must be integer [b={batch}]; got shape {labels.shape}, dtype {labels.dtype}"
        )
    check_labels("labels", labels, num_classes + 1)
    return labels


def _scalar_or_one(scalar: Array | None, x: Array) -> Array:
    if scalar is None:
        return jnp.ones(x.shape[:1], x.dtype)
    scalar = jnp.asarray(scalar, x.dtype)
    if scalar.shape != x.shape[:1]:
        raise ValueError(f"scalar must be [b={x.shape[0]}]; got shape {scalar.shape}")
    return scalar
