"""The best fixed linear predictor in hindsight (offline, optax L-BFGS) and surrogate regret."""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_int
from jaxpapers.multiclass._losses import check_loss, surrogate_loss
from jaxpapers.multiclass._streams import Stream, check_stream


class Comparator(NamedTuple):
    """``weights [C, d]`` minimising ``total_loss + l2 / 2 ||U||^2``; ``total_loss`` is the
    summed surrogate loss of ``weights`` on the stream."""

    weights: Float[Array, "C d"]
    total_loss: Float[Array, ""]


@partial(jax.jit, static_argnames=("num_classes", "loss", "steps"))
def _fit(stream, l2, num_classes, loss, steps):
    def objective(U):
        return surrogate_loss(stream.x @ U.T, stream.y, loss).sum() + 0.5 * l2 * jnp.sum(U * U)

    opt = optax.lbfgs()
    U0 = jnp.zeros((num_classes, stream.x.shape[1]))
    value_and_grad = optax.value_and_grad_from_state(objective)

    def body(_, carry):
        U, state = carry
        value, grad = value_and_grad(U, state=state)
        updates, state = opt.update(grad, state, U, value=value, grad=grad, value_fn=objective)
        return optax.apply_updates(U, updates), state

    U, _ = jax.lax.fori_loop(0, steps, body, (U0, opt.init(U0)))
    return Comparator(U, surrogate_loss(stream.x @ U.T, stream.y, loss).sum())


def best_linear_predictor(
    stream: Stream, num_classes: int, *, loss: str = "hinge", l2: float = 1.0, steps: int = 200
) -> Comparator:
    r"""The offline comparator, minimising the summed surrogate loss plus a ridge term.

    .. math:: U^\star = \arg\min_U \sum_t \ell(U x_t, y_t) + \tfrac{\lambda}{2}\|U\|_F^2

    Surrogate-regret bounds trade :math:`\sum_t \ell_t(U)` against :math:`\|U\|^2`; the ridge
    term picks that trade-off (``l2 = 1``) and makes the minimiser unique.

    Examples:
        >>> import jax
        >>> from jaxpapers.multiclass import best_linear_predictor, linear_stream
        >>> stream, _ = linear_stream(100, 4, 3, margin=0.2, key=jax.random.key(0))
        >>> best_linear_predictor(stream, 3, steps=50).weights.shape
        (3, 4)
    """
    check_int("num_classes", num_classes, minimum=2)
    check_loss(loss)
    check_stream(stream, num_classes)
    return _fit(stream, jnp.asarray(l2, jnp.float32), int(num_classes), loss, int(steps))


def surrogate_regret(mistakes: Float[Array, "*b T"], comparator_loss: Float[Array, "*b"]):
    r"""Surrogate regret :math:`\sum_t E[\mathbb{1}\{\hat y_t \ne y_t\}] - \sum_t \ell_t(U)`."""
    batch = jnp.shape(mistakes)[:-1]
    if jnp.ndim(mistakes) < 1:
        raise ValueError(f"mistakes has shape {jnp.shape(mistakes)}; expected [..., T]")
    try:
        fits = np.broadcast_shapes(jnp.shape(comparator_loss), batch) == batch
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"comparator_loss has shape {jnp.shape(comparator_loss)}; expected a shape that "
            f"broadcasts to mistakes' batch shape {batch}"
        )
    return jnp.sum(mistakes, -1) - comparator_loss
