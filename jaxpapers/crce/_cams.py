"""Class activation maps for networks whose logits are a function ``head`` of a feature map.

All three maps have the Grad-CAM form ``M[i, j] = sum_k alpha_k A[i, j, k]`` with
``alpha_k = mean_ij dS/dA[i, j, k]`` for a score ``S`` of the logits ``y = head(A)``:

* CAM (Zhou et al. 2016): for a GAP-linear head, ``alpha_k = W_kc`` (the head's weights).
* Grad-CAM (Selvaraju et al. 2017): ``S = y_c``; for a GAP-linear head
  ``dy_c/dA_ijk = W_kc / (h w)``, so Grad-CAM (before its ReLU) is exactly CAM / (h w).
* ContrastiveCAM: ``S = y_c - sum_{c' != c} sg(q_c') y_c'`` with ``q`` the softmax over the other
  classes (held fixed), so that evidence shared by every class cancels; this is the gradient of
  ``log p_c`` divided by ``1 - p_c`` (``d log p_c = dy_c - sum_c' p_c' dy_c'``).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_dtype, check_finite, check_labels, check_shape

Head = Callable[[jax.Array], jax.Array]


def _check(features: jax.Array, target: jax.Array, num_classes: int) -> None:
    if features.ndim != 4:
        raise ValueError(f"features has shape {features.shape}; expected [B, h, w, K]")
    check_dtype("features", features, "floating")
    check_finite("features", features)
    check_shape("target", target, (features.shape[0],))
    check_labels("target", target, num_classes)


def _num_classes(head: Head, features: jax.Array) -> int:
    if jnp.ndim(features) != 4:
        raise ValueError(f"features has shape {jnp.shape(features)}; expected [B, h, w, K]")
    out = jax.eval_shape(head, features)
    if out.ndim != 2 or out.shape[0] != features.shape[0]:
        raise ValueError(
            f"head maps features {features.shape} to {out.shape}; expected [B, classes]"
        )
    return int(out.shape[1])


def _weighted_map(features: jax.Array, grads: jax.Array) -> jax.Array:
    alpha = jnp.mean(grads, axis=(1, 2))  # [B, K]
    return jnp.einsum("bhwk,bk->bhw", features, alpha)


def class_activation_map(
    features: Float[Array, "b h w k"], weights: Float[Array, "k c"], target: Int[Array, " b"]
) -> Float[Array, "b h w"]:
    """CAM of class ``target`` for a GAP-linear head with kernel ``weights`` (no ReLU).

    ``mean_ij CAM[b, i, j] + bias[target_b]`` is the logit ``y[b, target_b]`` exactly.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxpapers.crce import class_activation_map
        >>> a = jnp.ones((1, 2, 2, 3))
        >>> class_activation_map(a, jnp.eye(3), jnp.array([1]))[0]
        Array([[1., 1.],
               [1., 1.]], dtype=float32)
    """
    if weights.ndim != 2 or weights.shape[0] != features.shape[-1]:
        raise ValueError(
            f"weights has shape {weights.shape}; expected [{features.shape[-1]}, classes]"
        )
    _check(features, target, weights.shape[1])
    check_finite("weights", weights)
    return jnp.einsum("bhwk,kb->bhw", features, weights[:, target])


def _score_grads(head: Head, features: jax.Array, score: Callable) -> jax.Array:
    return jax.grad(lambda a: jnp.sum(score(head(a))))(features)


def grad_cam(
    head: Head,
    features: Float[Array, "b h w k"],
    target: Int[Array, " b"],
    *,
    relu: bool = True,
) -> Float[Array, "b h w"]:
    """Grad-CAM of class ``target``: ``sum_k mean_ij(dy_c/dA_ijk) A_ijk``, then ReLU.

    Args:
      head: maps features ``[B, h, w, K]`` to logits ``[B, C]``, sample by sample.
      features: the last feature map.
      target: ``[B]`` classes to explain.
      relu: apply the ReLU of the original method.

    Returns:
      ``[B, h, w]`` maps (differentiable w.r.t. ``features`` and the head's parameters).
    """
    _check(features, target, _num_classes(head, features))
    grads = _score_grads(head, features, lambda y: jnp.take_along_axis(y, target[:, None], axis=1))
    m = _weighted_map(features, grads)
    return jax.nn.relu(m) if relu else m


def contrastive_score(logits: Float[Array, "b c"], target: Int[Array, " b"]) -> Float[Array, " b"]:
    """``y_c - sum_{c' != c} q_c' y_c'`` with ``q = softmax`` over the other classes held fixed.

    Its gradient is ``d log p_c / (1 - p_c)``; its value is the logit margin of class ``c`` over
    the softmax-weighted mean of the others.
    """
    if jnp.ndim(logits) != 2:
        raise ValueError(f"logits has shape {jnp.shape(logits)}; expected [B, classes]")
    check_shape("target", target, (logits.shape[0],))
    check_labels("target", target, logits.shape[1])
    check_finite("logits", logits)
    c = logits.shape[1]
    onehot = jax.nn.one_hot(target, c, dtype=logits.dtype)
    q = jax.nn.softmax(jnp.where(onehot > 0, -jnp.inf, logits), axis=1)
    q = jax.lax.stop_gradient(q)
    return jnp.sum((onehot - q) * logits, axis=1)


def contrastive_cam(
    head: Head,
    features: Float[Array, "b h w k"],
    target: Int[Array, " b"],
    *,
    relu: bool = False,
) -> Float[Array, "b h w"]:
    """ContrastiveCAM of class ``target``: Grad-CAM of :func:`contrastive_score`.

    For a GAP-linear head the map is ``sum_k (W_kc - sum_{c'} q_c' W_kc') A_ijk / (h w)`` and sums
    over cells to the logit margin minus the bias margin; for two classes the maps of the two
    classes are negatives of each other. Signed by default (negative cells speak for the other
    classes).

    Args:
      head: maps features ``[B, h, w, K]`` to logits ``[B, C]``, sample by sample.
      features: the last feature map.
      target: ``[B]`` classes to explain.
      relu: keep only positive evidence.

    Returns:
      ``[B, h, w]`` maps (differentiable w.r.t. ``features`` and the head's parameters).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxpapers.crce import contrastive_cam
        >>> w = jnp.array([[1.0, 0.0], [0.0, 1.0]])
        >>> head = lambda a: jnp.mean(a, axis=(1, 2)) @ w
        >>> a = jnp.arange(8.0).reshape(1, 2, 2, 2)
        >>> m0 = contrastive_cam(head, a, jnp.array([0]))
        >>> m1 = contrastive_cam(head, a, jnp.array([1]))
        >>> bool(jnp.allclose(m0, -m1))
        True
    """
    _check(features, target, _num_classes(head, features))
    grads = _score_grads(head, features, lambda y: contrastive_score(y, target))
    m = _weighted_map(features, grads)
    return jax.nn.relu(m) if relu else m


__all__ = [
    "class_activation_map",
    "contrastive_cam",
    "contrastive_score",
    "grad_cam",
]
