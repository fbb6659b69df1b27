"""Multiclass surrogate losses of linear scores: hinge, smooth hinge, logistic (all >= 1 on a
mistake, so each upper-bounds the zero-one loss)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_labels, check_shape

LOSSES = ("hinge", "smooth_hinge", "logistic")

#: Largest norm of d loss / d scores (hinge: e_y - e_j; smooth hinge: twice that; logistic in
#: bits: ||e_y - softmax|| / ln 2 <= sqrt(2) / ln 2), so ||grad_W|| <= bound * ||x||.
SCORE_GRADIENT_BOUND = {"hinge": 2**0.5, "smooth_hinge": 2 * 2**0.5, "logistic": 2**0.5 / 0.6931}


def check_loss(loss: str) -> None:
    if loss not in LOSSES:
        raise ValueError(f"loss={loss!r}; expected one of {LOSSES}")


def margin(scores: Float[Array, "*b C"], label: Int[Array, "*b"]) -> Float[Array, "*b"]:
    """Multiclass margin :math:`s_y - \\max_{j \\ne y} s_j`."""
    if jnp.ndim(scores) < 1:
        raise ValueError(f"scores has shape {jnp.shape(scores)}; expected [..., C]")
    check_shape("label", label, jnp.shape(scores)[:-1])
    check_labels("label", jnp.asarray(label), jnp.shape(scores)[-1])
    C = scores.shape[-1]
    own = jnp.take_along_axis(scores, label[..., None], -1)[..., 0]
    others = jnp.where(jax.nn.one_hot(label, C) > 0, -jnp.inf, scores)
    return own - others.max(-1)


def surrogate_loss(
    scores: Float[Array, "*b C"], label: Int[Array, "*b"], loss: str = "hinge"
) -> Float[Array, "*b"]:
    r"""Surrogate loss of scores ``W x`` for the true ``label``.

    With margin :math:`m = s_y - \max_{j\ne y} s_j`: hinge :math:`\max(0, 1 - m)`; smooth hinge
    :math:`(1-m)^2` on :math:`[0, 1]`, :math:`1 - 2m` below 0, 0 above 1; logistic
    :math:`-\log_2 \mathrm{softmax}(s)_y`.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxpapers.multiclass import surrogate_loss
        >>> s = jnp.array([2.0, 1.5, 0.0])
        >>> surrogate_loss(s, jnp.array(0)), surrogate_loss(s, jnp.array(1), "smooth_hinge")
        (Array(0.5, dtype=float32), Array(2., dtype=float32))
    """
    check_loss(loss)
    if loss == "logistic":
        logp = jax.nn.log_softmax(scores, -1)
        return -jnp.take_along_axis(logp, label[..., None], -1)[..., 0] / jnp.log(2.0)
    m = margin(scores, label)
    if loss == "hinge":
        return jnp.maximum(0.0, 1.0 - m)
    return jnp.where(m >= 1, 0.0, jnp.where(m >= 0, (1.0 - m) ** 2, 1.0 - 2.0 * m))


def score_gradient(
    scores: Float[Array, " C"], label: Int[Array, ""], loss: str = "hinge"
) -> Float[Array, " C"]:
    r"""d loss / d scores; the gradient in ``W`` is ``outer(score_gradient, x)``.

    For the margin losses the runner-up :math:`j^* = \arg\max_{j \ne y} s_j` is a single class
    (lowest index on ties), so the perceptron update from ``W = 0`` is ``-x`` on one class, not
    spread over tied classes as the subgradient of ``max`` that ``jax.grad`` picks would be.
    """
    if jnp.ndim(scores) != 1:
        raise ValueError(f"scores has shape {jnp.shape(scores)}; expected [C]")
    check_labels("label", jnp.asarray(label), jnp.shape(scores)[0])
    check_loss(loss)
    if loss == "logistic":
        return (jax.nn.softmax(scores, -1) - jax.nn.one_hot(label, scores.shape[-1])) / jnp.log(2.0)
    C = scores.shape[-1]
    own = jax.nn.one_hot(label, C)
    runner = jnp.where(own > 0, -jnp.inf, scores).argmax(-1)
    m = margin(scores, label)
    if loss == "hinge":
        slope = jnp.where(m < 1, -1.0, 0.0)
    else:
        slope = jnp.where(m >= 1, 0.0, jnp.where(m >= 0, -2.0 * (1.0 - m), -2.0))
    return slope[..., None] * (own - jax.nn.one_hot(runner, C))
