"""Implicit neural graphons: a multi-scale sinusoidal residual network, symmetrised.

``W(x, y) = sigmoid((f(x, y) + f(y, x)) / 2 + shift)``. The network ``f`` embeds ``(x, y)`` with
sine features at several frequencies ``omega_k`` (SIREN-style, Sitzmann et al. 2020: a low
frequency sees the global layout, high ones place sharp boundaries), passes them through residual
sine blocks, and scales the output logit by ``sharpness`` so that the sigmoid saturates: the
parametrisation is biased toward step-like graphons with values near 0 and 1.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float


class NeuralGraphon(eqx.Module):
    """A symmetric graphon ``W: [0, 1]^2 -> (0, 1)`` represented by a network.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> g = NeuralGraphon.init(key=jax.random.key(0))
      >>> w = g(jnp.array([0.1, 0.7]), jnp.array([0.7, 0.1]))
      >>> bool(jnp.allclose(w[0], w[1]) and (0 < w).all() and (w < 1).all())
      True
    """

    embed: Float[Array, "scales 2 per_scale"]
    embed_bias: Float[Array, "scales per_scale"]
    blocks: Float[Array, "depth width width"]
    block_bias: Float[Array, "depth width"]
    head: Float[Array, " width"]
    head_bias: Float[Array, ""]
    shift: Float[Array, ""]
    frequencies: tuple[float, ...] = eqx.field(static=True)
    sharpness: float = eqx.field(static=True)

    def __check_init__(self) -> None:
        if len(self.frequencies) != self.embed.shape[0]:
            raise ValueError(
                f"{len(self.frequencies)} frequencies for {self.embed.shape[0]} embedding scales"
            )
        if not self.sharpness > 0:
            raise ValueError(f"sharpness={self.sharpness}; expected > 0")

    @classmethod
    def init(
        cls,
        *,
        key: Array,
        width: int = 48,
        depth: int = 2,
        frequencies: tuple[float, ...] = (1.0, 3.0, 9.0),
        sharpness: float = 4.0,
    ) -> NeuralGraphon:
        """SIREN initialisation: block weights ``U(-c, c)``, ``c = sqrt(6 / fan_in)``."""
        if width % len(frequencies):
            raise ValueError(f"width={width} must be a multiple of {len(frequencies)} scales")
        per = width // len(frequencies)
        k1, k2, k3, k4, k5 = jax.random.split(key, 5)
        s = len(frequencies)
        c = math.sqrt(6.0 / width)
        return cls(
            embed=jax.random.uniform(k1, (s, 2, per), minval=-1.0, maxval=1.0),
            embed_bias=jax.random.uniform(k2, (s, per), minval=-math.pi, maxval=math.pi),
            blocks=jax.random.uniform(k3, (depth, width, width), minval=-c, maxval=c),
            block_bias=jax.random.uniform(k4, (depth, width), minval=-0.1, maxval=0.1),
            head=jax.random.uniform(k5, (width,), minval=-c, maxval=c),
            head_bias=jnp.zeros(()),
            shift=jnp.zeros(()),
            frequencies=tuple(float(f) for f in frequencies),
            sharpness=float(sharpness),
        )

    def raw(self, x: Float[Array, " *b"], y: Float[Array, " *b"]) -> Float[Array, " *b"]:
        """The unsymmetrised logit ``f(x, y)`` (without ``shift``)."""
        z = jnp.stack([x, y], axis=-1)
        omega = jnp.asarray(self.frequencies)
        lead = (1,) * jnp.ndim(x)
        pre = jnp.einsum("...i,sij->...sj", z, self.embed) + self.embed_bias.reshape(
            lead + self.embed_bias.shape
        )
        h = jnp.sin(omega.reshape((*lead, -1, 1)) * pre).reshape(*jnp.shape(x), -1)
        for k in range(self.blocks.shape[0]):
            h = h + jnp.sin(h @ self.blocks[k] + self.block_bias[k].reshape((*lead, -1)))
        return self.sharpness * (h @ self.head + self.head_bias)

    def logits(self, x, y):
        """Symmetric logit ``(f(x, y) + f(y, x)) / 2 + shift``."""
        return 0.5 * (self.raw(x, y) + self.raw(y, x)) + self.shift

    def __call__(self, x, y):
        return jax.nn.sigmoid(self.logits(x, y))

    def logit_matrix(self, points: Float[Array, " m"]) -> Float[Array, "m m"]:
        """``logits(x_i, x_j)`` on all pairs of ``points``: ``f`` evaluated once on the grid of
        pairs and symmetrised by transposition (``f(x_j, x_i)`` is entry ``(j, i)`` of the same
        matrix), half the network evaluations of ``logits`` on a meshgrid."""
        xs, ys = jnp.meshgrid(points, points, indexing="ij")
        f = self.raw(xs, ys)
        return 0.5 * (f + f.T) + self.shift

    def matrix(self, points: Float[Array, " m"]) -> Float[Array, "m m"]:
        """``W(x_i, x_j)`` on all pairs of ``points``."""
        return jax.nn.sigmoid(self.logit_matrix(points))
