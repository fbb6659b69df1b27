"""Implicit neural graphons: a multi-scale sinusoidal residual network, symmetrised.

``W(x, y) = sigmoid((f(x, y) + f(y, x)) / 2 + shift)``. The network ``f`` embeds ``(x, y)`` with
sine features at several frequencies ``omega_k`` (SIREN-style, Sitzmann et al. 2020: a low
frequency sees the global layout, high ones place sharp boundaries), passes them through residual
sine blocks, and scales the output logit by ``sharpness`` so that the sigmoid saturates: the
parametrisation is biased toward step-like graphons with values near 0 and 1.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_int, check_key


class NeuralGraphon(nnx.Module):
    """A symmetric graphon ``W: [0, 1]^2 -> (0, 1)`` represented by a network (a flax.nnx module).

    Args:
      key: PRNG key of the initial weights.
      width: hidden width, a multiple of ``len(frequencies)`` (each scale gets
        ``width / len(frequencies)`` sine features).
      depth: number of residual sine blocks.
      frequencies: the embedding's frequencies ``omega_k``.
      sharpness: factor of the output logit (> 0).

    Initialisation (SIREN): embedding weights ``U(-1, 1)`` and phases ``U(-pi, pi)``, block
    weights and head ``U(-c, c)`` with ``c = sqrt(6 / width)``, block biases ``U(-0.1, 0.1)``,
    head bias and ``shift`` zero; the five arrays are drawn from ``jax.random.split(key, 5)`` in
    that order. Every array is an ``nnx.Param`` (all are trained); ``frequencies`` and
    ``sharpness`` are static.

    The module is a pytree (flax >= 0.12), so it passes through ``jax.jit`` and ``jax.vmap``
    (a stack of graphons is one module with a leading axis on every parameter);
    ``graphdef, params = nnx.split(g, nnx.Param)`` and ``nnx.merge(graphdef, params)`` give the
    state/module split that :func:`~jaxpapers.graphons.optimise_graphon` trains.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> g = NeuralGraphon(key=jax.random.key(0))
      >>> w = g(jnp.array([0.1, 0.7]), jnp.array([0.7, 0.1]))
      >>> bool(jnp.allclose(w[0], w[1]) and (0 < w).all() and (w < 1).all())
      True
    """

    def __init__(
        self,
        *,
        key: Array,
        width: int = 48,
        depth: int = 2,
        frequencies: tuple[float, ...] = (1.0, 3.0, 9.0),
        sharpness: float = 4.0,
    ):
        check_key("key", key)
        check_int("width", width, minimum=1)
        check_int("depth", depth, minimum=0)
        if not frequencies:
            raise ValueError("frequencies is empty; expected at least one frequency")
        if width % len(frequencies):
            raise ValueError(f"width={width} must be a multiple of {len(frequencies)} scales")
        if not sharpness > 0:
            raise ValueError(f"sharpness={sharpness}; expected > 0")
        s, per = len(frequencies), width // len(frequencies)
        k1, k2, k3, k4, k5 = jax.random.split(key, 5)
        c = math.sqrt(6.0 / width)
        self.embed = nnx.Param(jax.random.uniform(k1, (s, 2, per), minval=-1.0, maxval=1.0))
        self.embed_bias = nnx.Param(
            jax.random.uniform(k2, (s, per), minval=-math.pi, maxval=math.pi)
        )
        self.blocks = nnx.Param(jax.random.uniform(k3, (depth, width, width), minval=-c, maxval=c))
        self.block_bias = nnx.Param(jax.random.uniform(k4, (depth, width), minval=-0.1, maxval=0.1))
        self.head = nnx.Param(jax.random.uniform(k5, (width,), minval=-c, maxval=c))
        self.head_bias = nnx.Param(jnp.zeros(()))
        self.shift = nnx.Param(jnp.zeros(()))
        self.frequencies = tuple(float(f) for f in frequencies)
        self.sharpness = float(sharpness)

    def raw(self, x: Float[Array, " *b"], y: Float[Array, " *b"]) -> Float[Array, " *b"]:
        """The unsymmetrised logit ``f(x, y)`` (without ``shift``)."""
        embed, embed_bias = self.embed[...], self.embed_bias[...]
        blocks, block_bias = self.blocks[...], self.block_bias[...]
        z = jnp.stack([x, y], axis=-1)
        omega = jnp.asarray(self.frequencies)
        lead = (1,) * jnp.ndim(x)
        pre = jnp.einsum("...i,sij->...sj", z, embed) + embed_bias.reshape(lead + embed_bias.shape)
        h = jnp.sin(omega.reshape((*lead, -1, 1)) * pre).reshape(*jnp.shape(x), -1)
        for k in range(blocks.shape[0]):
            h = h + jnp.sin(h @ blocks[k] + block_bias[k].reshape((*lead, -1)))
        return self.sharpness * (h @ self.head[...] + self.head_bias[...])

    def logits(self, x, y):
        """Symmetric logit ``(f(x, y) + f(y, x)) / 2 + shift``."""
        return 0.5 * (self.raw(x, y) + self.raw(y, x)) + self.shift[...]

    def __call__(self, x, y):
        return jax.nn.sigmoid(self.logits(x, y))

    def logit_matrix(self, points: Float[Array, " m"]) -> Float[Array, "m m"]:
        """``logits(x_i, x_j)`` on all pairs of ``points``: ``f`` evaluated once on the grid of
        pairs and symmetrised by transposition (``f(x_j, x_i)`` is entry ``(j, i)`` of the same
        matrix), half the network evaluations of ``logits`` on a meshgrid."""
        xs, ys = jnp.meshgrid(points, points, indexing="ij")
        f = self.raw(xs, ys)
        return 0.5 * (f + f.T) + self.shift[...]

    def matrix(self, points: Float[Array, " m"]) -> Float[Array, "m m"]:
        """``W(x_i, x_j)`` on all pairs of ``points``."""
        return jax.nn.sigmoid(self.logit_matrix(points))
