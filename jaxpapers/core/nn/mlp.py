"""A plain MLP and an MLP epsilon-denoiser with a sinusoidal time embedding (flax.nnx)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Float


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

    The time embedding is concatenated to the input.
    """

    def __init__(
        self, dim: int, *, hidden: int = 256, depth: int = 3, emb: int = 32, rngs: nnx.Rngs
    ):
        self.emb = emb
        self.dim = dim
        self.net = MLP([dim + emb, *([hidden] * depth), dim], rngs=rngs)

    def __call__(self, x: Float[Array, "b d"], t: Float[Array, " b"]) -> Float[Array, "b d"]:
        if x.ndim != 2 or x.shape[1] != self.dim or t.shape != x.shape[:1]:
            raise ValueError(f"x must be [b, {self.dim}] and t [b]; got {x.shape} and {t.shape}")
        return self.net(jnp.concatenate([x, sinusoidal_embedding(t, self.emb)], axis=-1))
