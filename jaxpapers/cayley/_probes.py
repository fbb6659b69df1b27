r"""Baseline heads over per-layer representations ``[L, D]``: linear probes and attention pooling.

* :class:`LayerProbe`: logistic regression on one layer (the last-layer probe; the best single
  layer when the layer is chosen on validation data) or on the mean over layers.
* :class:`AttentionPooling`: inter-layer attention, :math:`a = \mathrm{softmax}_l(v^\top \tanh(W
  x_l))`, then a linear map of :math:`\sum_l a_l x_l` (the "attention-based aggregation" that the
  Cayley-Encoder paper calls expensive).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Float

from jaxpapers.cayley._encoder import _Linear
from jaxpapers.core.checks import check_shape


class LayerProbe(nnx.Module):
    """Linear probe on layer ``layer`` (``None``: the mean over layers) of ``x [L, D]``.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> LayerProbe(7, 16, 2, layer=-1, key=jax.random.key(0))(jnp.ones((7, 16))).shape
        (2,)
    """

    def __init__(
        self,
        num_layers: int,
        in_features: int,
        num_classes: int,
        *,
        layer: int | None,
        key: jax.Array,
    ):
        if layer is not None and not -num_layers <= layer < num_layers:
            raise ValueError(f"layer={layer}; expected one of {num_layers} layers or None")
        self.linear = _Linear(in_features, num_classes, key=key)
        self.num_layers = num_layers
        self.layer = layer

    def __call__(self, x: Float[Array, "layers features"]) -> Float[Array, " classes"]:
        check_shape("x", x, (self.num_layers, self.linear.in_features))
        return self.linear(jnp.mean(x, axis=0) if self.layer is None else x[self.layer])


class AttentionPooling(nnx.Module):
    """Attention-weighted aggregation of the layers, then a linear classifier.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> AttentionPooling(7, 16, 2, key=jax.random.key(0))(jnp.ones((7, 16))).shape
        (2,)
    """

    def __init__(
        self, num_layers: int, in_features: int, num_classes: int, *, key: jax.Array, hidden=32
    ):
        k1, k2, k3 = jax.random.split(key, 3)
        self.score = _Linear(in_features, hidden, key=k1)
        self.query = nnx.Param(jax.random.normal(k2, (hidden,)) / jnp.sqrt(hidden))
        self.linear = _Linear(in_features, num_classes, key=k3)
        self.num_layers = num_layers

    def weights(self, x: Float[Array, "layers features"]) -> Float[Array, " layers"]:
        """Attention weights over layers (sum to 1)."""
        check_shape("x", x, (self.num_layers, self.linear.in_features))
        return jax.nn.softmax(jnp.tanh(jax.vmap(self.score)(x)) @ self.query[...])

    def __call__(self, x: Float[Array, "layers features"]) -> Float[Array, " classes"]:
        return self.linear(self.weights(x) @ x)
