"""Example streams: separable and noisy linear multiclass data, sklearn digits."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_key, check_labels, check_shape
from jaxpapers.multiclass import _losses


class Stream(NamedTuple):
    """A labelled stream: ``x`` of shape ``[T, d]``, integer ``y`` of shape ``[T]`` in
    ``[0, num_classes)``."""

    x: Float[Array, "T d"]
    y: Int[Array, " T"]


def check_stream(stream: Stream, num_classes: int) -> None:
    """Raise ``ValueError`` on mismatched shapes, non-finite features or labels out of range."""
    check_shape("stream.x", stream.x, (None, None))
    check_shape("stream.y", stream.y, (stream.x.shape[0],))
    check_labels("stream.y", stream.y, num_classes)


def linear_stream(
    num_rounds: int,
    dim: int,
    num_classes: int,
    *,
    key: jax.Array,
    margin: float = 0.0,
    noise: float = 0.0,
) -> tuple[Stream, Float[Array, "C d"]]:
    r"""Points on the unit sphere labelled by :math:`\arg\max_c U_c x` for a random ``U``
    (:math:`\|U\|_F = 1`); with ``margin > 0`` only draws whose margin under ``U`` reaches it
    are kept (rejection among ``8 T`` draws; :func:`stream_margin` reports the margin obtained),
    and a ``noise`` share of labels is redrawn uniformly.

    Returns:
        ``(stream, U)``.

    Examples:
        >>> import jax
        >>> from jaxpapers.multiclass import linear_stream
        >>> s, U = linear_stream(10, 3, 4, key=jax.random.key(0))
        >>> s.x.shape, s.y.shape, U.shape
        ((10, 3), (10,), (4, 3))
    """
    check_key("key", key)
    ku, kx, kn, kl = jax.random.split(key, 4)
    U = jax.random.normal(ku, (num_classes, dim))
    U = U / jnp.linalg.norm(U)
    draws = num_rounds * (8 if margin > 0 else 1)
    x = jax.random.normal(kx, (draws, dim))
    x = x / jnp.linalg.norm(x, axis=-1, keepdims=True)
    scores = x @ U.T
    y = scores.argmax(-1)
    if margin > 0:
        # rejection sampling: keep the first num_rounds draws whose margin reaches `margin`
        # (a stable sort of the rejected flag keeps the draw order within the accepted ones)
        rejected = (_losses.margin(scores, y) < margin).astype(jnp.int32)
        keep = jnp.argsort(rejected, stable=True)[:num_rounds]
        x, y = x[keep], y[keep]
    if noise > 0:
        flip = jax.random.bernoulli(kn, noise, (num_rounds,))
        y = jnp.where(flip, jax.random.randint(kl, (num_rounds,), 0, num_classes), y)
    return Stream(x, y.astype(jnp.int32)), U


def stream_margin(stream: Stream, U: Float[Array, "C d"]) -> tuple[float, float]:
    """``(gamma, R)``: the smallest multiclass margin of ``U / ||U||_F`` on the stream and the
    largest feature norm (Novikoff's quantities)."""
    if jnp.ndim(U) != 2 or jnp.shape(U)[1] != jnp.shape(stream.x)[-1]:
        raise ValueError(f"U has shape {jnp.shape(U)}; expected [C, {jnp.shape(stream.x)[-1]}]")
    U = U / jnp.linalg.norm(U)
    gamma = float(_losses.margin(stream.x @ U.T, stream.y).min())
    return gamma, float(jnp.linalg.norm(stream.x, axis=-1).max())


def digits_stream(*, key: jax.Array) -> Stream:
    """sklearn's 1,797 8x8 digits in a random order, pixels in [0, 1] scaled to unit mean norm,
    plus a constant bias feature (65 features, 10 classes).

    Examples:
        >>> import jax
        >>> from jaxpapers.multiclass import digits_stream
        >>> digits_stream(key=jax.random.key(0)).x.shape
        (1797, 65)
    """
    check_key("key", key)
    from jaxpapers.core.data.digits import load_digits

    data = load_digits()
    x = np.asarray(data.images, np.float32).reshape(len(data.labels), -1)
    x = x / np.linalg.norm(x, axis=-1).mean()
    x = np.concatenate([x, np.ones((len(x), 1), np.float32)], axis=-1)
    perm = jax.random.permutation(key, len(x))
    return Stream(jnp.asarray(x)[perm], jnp.asarray(data.labels, jnp.int32)[perm])
