"""Vmapped runs behind the P16 experiments: seeds x learners in one compiled call."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.pytrees import stack_trees
from jaxpapers.multiclass import (
    Stream,
    best_linear_predictor,
    classification_error,
    digits_stream,
    linear_stream,
    run_online,
)


def linear_streams(seeds, T: int, d: int, C: int, *, margin: float = 0.0, noise: float = 0.0):
    """Stacked streams ``Stream(x [n, T, d], y [n, T])`` and their ``U [n, C, d]``, one a seed."""
    keys = jnp.stack([jax.random.key(s) for s in seeds])
    return jax.vmap(lambda k: linear_stream(T, d, C, key=k, margin=margin, noise=noise))(keys)


@partial(jax.jit, static_argnames=("num_classes", "loss", "delay"))
def run_grid(learners, streams: Stream, num_classes: int, loss: str = "hinge", delay: int = 0):
    """Every learner on every stream: results with leading axes ``[seeds, learners]``; seed i
    explores with ``key(i)`` and the feature bound is the stream's own maximum norm."""

    def per_seed(stream, key):
        radius = jnp.linalg.norm(stream.x, axis=-1).max()
        return jax.vmap(
            lambda lr: run_online(
                lr, stream, num_classes, key=key, loss=loss, delay=delay, radius=radius
            )
        )(learners)

    keys = jax.vmap(jax.random.key)(jnp.arange(streams.y.shape[0]))
    return jax.vmap(per_seed)(streams, keys)


@partial(jax.jit, static_argnames=("num_classes", "loss"))
def comparator_losses(streams: Stream, num_classes: int, loss: str = "hinge"):
    """Summed surrogate loss of the offline best linear predictor on each stream ``[seeds]``."""
    return jax.vmap(lambda s: best_linear_predictor(s, num_classes, loss=loss).total_loss)(streams)


@partial(jax.jit, static_argnames=("num_classes", "loss"))
def comparators(streams: Stream, num_classes: int, l2, loss: str = "hinge"):
    """The offline comparators (weights ``[seeds, C, d]`` and summed losses ``[seeds]``) at
    ridge ``l2``."""
    return jax.vmap(lambda s: best_linear_predictor(s, num_classes, loss=loss, l2=l2))(streams)


def stack(learners) -> object:
    return stack_trees(list(learners))


def digits_split(seeds, train: int):
    """Per seed: a random order of the digits, the first ``train`` as the stream, the rest as
    the test set. Returns stacked ``(train_streams, test_streams)``."""
    streams = [digits_stream(key=jax.random.key(s)) for s in seeds]
    tr = Stream(
        jnp.stack([s.x[:train] for s in streams]), jnp.stack([s.y[:train] for s in streams])
    )
    te = Stream(
        jnp.stack([s.x[train:] for s in streams]), jnp.stack([s.y[train:] for s in streams])
    )
    return tr, te


def held_out_errors(weights, tests: Stream) -> np.ndarray:
    """``[seeds, learners]`` error of each learner's weights on its seed's test set."""
    f = jax.vmap(jax.vmap(classification_error, in_axes=(0, None)), in_axes=(0, 0))
    return np.asarray(f(weights, tests))
