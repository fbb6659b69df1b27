r"""Baseline heads over per-layer representations ``[L, D]``: linear probes and attention pooling.

* :class:`LayerProbe`: logistic regression on one layer (the last-layer probe; the best single
  layer when the layer is chosen on validation data) or on the mean over layers.
* :func:`ridge_probe`: the tuned linear probe of the experiments, ridge regression on one-hot
  labels in closed form for a whole grid of L2 strengths.
* :class:`AttentionPooling`: inter-layer attention, :math:`a = \mathrm{softmax}_l(v^\top \tanh(W
  x_l))`, then a linear map of :math:`\sum_l a_l x_l` (the "attention-based aggregation" that the
  Cayley-Encoder paper calls expensive).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
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


def ridge_probe(x, y, w, *, alphas, num_classes: int):
    r"""Linear probes in closed form, one per L2 strength: ridge regression on one-hot labels
    (scikit-learn's ``RidgeClassifier``; predict the argmax), intercept not penalised.

    With the examples of weight 1 (``w`` is 0 for padding) centred, :math:`X_c`, and the one-hot
    targets centred, :math:`Y_c`, the minimiser of :math:`\|X_c W - Y_c\|^2 + \alpha \|W\|^2` is
    :math:`W = X_c^\top (X_c X_c^\top + \alpha I)^{-1} Y_c`; one eigendecomposition
    :math:`X_c X_c^\top = V \Lambda V^\top` gives it for every ``alpha`` at once,
    :math:`W_\alpha = X_c^\top V (\Lambda + \alpha)^{-1} V^\top Y_c` (``n x n``, cheap when
    ``n <= d``), and :math:`b = \bar y - \bar x W`. The padded rows are zero after masking, so
    they drop out exactly. Classes absent from the training labels get logit :math:`-\infty`.
    NumPy/SciPy in float64 on the host (XLA:CPU's batched ``eigh``/``solve`` of 128 x 128 or more
    stalled inside ``lax.map`` here). Returns ``(W [a, d, k], b [a, k])``; logits ``x @ W + b``.
    """
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    alphas = np.asarray(alphas, np.float64)
    y = np.asarray(y)
    if x.ndim != 2:
        raise ValueError(f"x has shape {x.shape}; expected [n, d]")
    if y.shape != x.shape[:1] or w.shape != x.shape[:1]:
        raise ValueError(f"y has shape {y.shape} and w {w.shape}; expected [{x.shape[0]}] each")
    used = y[w > 0]
    if num_classes < 1 or (used.size and (used.min() < 0 or used.max() >= num_classes)):
        raise ValueError(f"y has labels outside [0, num_classes={num_classes})")
    if alphas.ndim != 1 or not alphas.size or not np.all(alphas > 0):
        raise ValueError(f"alphas={alphas.tolist()}; expected a non-empty list of positive values")
    if not np.all(np.isfinite(x)):
        raise ValueError("x has non-finite values; expected finite features")
    m = w / max(float(w.sum()), 1.0)
    onehot = np.eye(num_classes)[np.asarray(y)]
    mu, ymu = m @ x, m @ onehot
    xc = (x - mu[None]) * w[:, None]
    yc = (onehot - ymu[None]) * w[:, None]
    # LAPACK's relatively robust representations (syevr): the same decomposition as
    # ``np.linalg.eigh`` (syevd) to rounding, ~10x less CPU here at n = 256
    lam, v = scipy.linalg.eigh(xc @ xc.T, driver="evr")
    vty = v.T @ yc
    dual = np.matmul(
        v, vty[None] / (np.clip(lam, 0.0, None)[None, :, None] + alphas[:, None, None])
    )
    weights = np.matmul(xc.T, dual)  # [a, d, k]
    present = (w @ onehot) > 0
    bias = np.where(present[None], ymu[None] - np.matmul(mu, weights), -np.inf)
    return weights, bias
