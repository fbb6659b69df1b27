"""Local randomisers: unary encoding, randomised response, and an exact privacy audit."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_key, check_labels, check_positive, is_concrete


def _check_epsilon(epsilon) -> None:
    check_positive("epsilon", epsilon)


def unary_keep_probability(epsilon: float | Float[Array, ""]) -> Float[Array, ""]:
    r"""Probability that unary encoding keeps a bit, :math:`e^{\epsilon/2} / (1 + e^{\epsilon/2})`.

    Examples:
        >>> import numpy as np
        >>> from jaxpapers.ldp_rl import unary_keep_probability
        >>> float(np.round(unary_keep_probability(2 * np.log(3.0)), 6))
        0.75
    """
    _check_epsilon(epsilon)
    return jax.nn.sigmoid(0.5 * jnp.asarray(epsilon, jnp.float32))


def unary_encode(
    index: Int[Array, "*batch"], num_categories: int, epsilon: float, *, key: jax.Array
) -> Float[Array, "*batch num_categories"]:
    r"""Release the one-hot vector of ``index`` with every bit flipped independently w.p. ``1 - p``.

    Two inputs' one-hot vectors differ in two bits, so the likelihood ratio of any output is at
    most :math:`(p / (1 - p))^2 = e^{\epsilon}`: the release is :math:`\epsilon`-LDP.

    Args:
        index: integer categories in ``[0, num_categories)``, any batch shape.
        num_categories: length ``d`` of the one-hot vector.
        epsilon: privacy level (> 0).
        key: PRNG key.

    Returns:
        Bits in ``{0., 1.}``, shape ``index.shape + (d,)``.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxpapers.ldp_rl import unary_encode
        >>> unary_encode(jnp.array(1), 3, 50.0, key=jax.random.key(0))
        Array([0., 1., 0.], dtype=float32)
    """
    check_key("key", key)
    _check_epsilon(epsilon)
    index = jnp.asarray(index)
    if is_concrete(index) and index.size and (index.min() < 0 or index.max() >= num_categories):
        raise ValueError(
            f"index holds values in [{int(index.min())}, {int(index.max())}]; "
            f"expected [0, {num_categories})"
        )
    uniforms = jax.random.uniform(key, (*index.shape, num_categories))
    return unary_encode_from_uniforms(index, num_categories, epsilon, uniforms)


def unary_encode_from_uniforms(
    index: Int[Array, "*batch"],
    num_categories: int,
    epsilon: float,
    uniforms: Float[Array, "*batch num_categories"],
) -> Float[Array, "*batch num_categories"]:
    """:func:`unary_encode` driven by given ``U[0, 1)`` draws: bit ``j`` flips when
    ``uniforms[j] < 1 - p`` (lets a simulation draw all of a round's randomness at once)."""
    p = unary_keep_probability(epsilon)
    onehot = jax.nn.one_hot(index, num_categories)
    return jnp.where(uniforms < 1.0 - p, 1.0 - onehot, onehot)


def unary_debias(bits: Float[Array, "*batch d"], epsilon: float) -> Float[Array, "*batch d"]:
    r"""Unbiased estimate of the one-hot vector: :math:`(b - (1 - p)) / (2p - 1)`.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxpapers.ldp_rl import unary_debias
        >>> unary_debias(jnp.array([1.0, 0.0]), 2 * jnp.log(3.0)).round(4)  # p = 3/4
        Array([ 1.5, -0.5], dtype=float32)
    """
    p = unary_keep_probability(epsilon)
    return (jnp.asarray(bits) - (1.0 - p)) / (2.0 * p - 1.0)


def unary_noise_variance(epsilon: float) -> Float[Array, ""]:
    r"""Variance of one debiased bit when its true value is 0: :math:`p(1-p)/(2p-1)^2`."""
    p = unary_keep_probability(epsilon)
    return p * (1.0 - p) / (2.0 * p - 1.0) ** 2


def randomized_response(
    bit: Int[Array, "*batch"], epsilon: float, *, key: jax.Array
) -> Int[Array, "*batch"]:
    r"""Warner's randomised response: keep a bit w.p. :math:`e^\epsilon / (1 + e^\epsilon)`.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxpapers.ldp_rl import randomized_response
        >>> randomized_response(jnp.array([0, 1]), 40.0, key=jax.random.key(0))
        Array([0, 1], dtype=int32)
    """
    _check_epsilon(epsilon)
    check_key("key", key)
    bit = jnp.asarray(bit)
    check_labels("bit", bit.astype(jnp.int32) if bit.dtype == jnp.bool_ else bit, 2)
    bit = bit.astype(jnp.int32)
    keep = jax.random.bernoulli(key, jax.nn.sigmoid(jnp.asarray(epsilon, jnp.float32)), bit.shape)
    return jnp.where(keep, bit, 1 - bit)


def randomized_response_debias(released: Float[Array, "*batch"], epsilon: float) -> Array:
    r"""Unbiased estimate of the input bit, :math:`(y - (1 - q)) / (2q - 1)`.

    Here :math:`q = e^\epsilon / (1 + e^\epsilon)` is the keep probability.
    """
    check_positive("epsilon", epsilon)
    q = jax.nn.sigmoid(jnp.asarray(epsilon, jnp.float32))
    return (jnp.asarray(released, jnp.float32) - (1.0 - q)) / (2.0 * q - 1.0)


def unary_output_probabilities(num_categories: int, epsilon: float) -> np.ndarray:
    """Exact ``P[output | input]`` of unary encoding, float64, shape ``[d, 2**d]`` (d <= 12).

    Outputs are enumerated in ``itertools.product((0, 1), repeat=d)`` order.
    """
    check_positive("epsilon", epsilon)
    if not 1 <= num_categories <= 12:
        raise ValueError(
            f"num_categories={num_categories}; expected 1..12 to enumerate 2**d outputs"
        )
    p = float(np.exp(epsilon / 2) / (1 + np.exp(epsilon / 2)))
    outputs = np.array(list(itertools.product((0, 1), repeat=num_categories)), np.float64)
    onehots = np.eye(num_categories)
    agree = outputs[None, :, :] == onehots[:, None, :]  # [d, 2^d, d]
    return np.prod(np.where(agree, p, 1 - p), axis=-1)


def randomized_response_output_probabilities(epsilon: float) -> np.ndarray:
    """Exact ``P[output | input]`` of randomised response, float64, shape ``[2, 2]``."""
    check_positive("epsilon", epsilon)
    q = float(np.exp(epsilon) / (1 + np.exp(epsilon)))
    return np.array([[q, 1 - q], [1 - q, q]])


def max_privacy_loss(probabilities: np.ndarray) -> float:
    r"""Exact privacy loss :math:`\max_{x, x', y} \log P[y|x] / P[y|x']` of a finite mechanism.

    Args:
        probabilities: ``[inputs, outputs]`` table of ``P[output | input]`` (rows sum to 1).

    Returns:
        The largest log likelihood ratio (``inf`` when some output is impossible for one input
        and possible for another).

    Examples:
        >>> import numpy as np
        >>> from jaxpapers.ldp_rl import max_privacy_loss, unary_output_probabilities
        >>> round(max_privacy_loss(unary_output_probabilities(4, 1.0)), 9)
        1.0
    """
    probs = np.asarray(probabilities, np.float64)
    if probs.ndim != 2 or np.any(probs < 0) or not np.allclose(probs.sum(1), 1.0, atol=1e-9):
        raise ValueError(
            f"probabilities of shape {probs.shape}; expected a [inputs, outputs] table of "
            "non-negative rows summing to 1"
        )
    with np.errstate(divide="ignore"):
        logp = np.log(probs)
    return float(np.max(logp.max(axis=0) - logp.min(axis=0)))
