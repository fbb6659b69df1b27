"""Train one model per seed at once: parameters stacked on a leading seed axis, losses summed.

Public (``jaxpapers.lrnn``): :class:`ModelConfig`, :class:`SeedModels`, :func:`init_models`,
:func:`seed_logits`, :func:`masked_xent`, :func:`masked_accuracy`, :func:`fit`. A user trains
the models of this package on a task of their own with them::

    config = ModelConfig(vocab=6, n_out=4, mixer="bdlru8", d_model=32, d_state=32, n_layers=1)
    models = init_models([0, 1, 2], config=config)  # three models, parameters stacked
    result = fit(models, batch_fn, steps=300, lr=3e-3, key=jax.random.key(0), desc="my task")
    logits = seed_logits(models.graphdef)(result.params, tokens)  # tokens [3, B, T]
    acc = masked_accuracy(logits, labels, mask)  # [3]

The loss handed to :func:`jaxpapers.core.train.train` (the host loop around
:func:`jaxpapers.core.fit.fit`'s step, with orbax checkpoints) is the sum over seeds of each
seed's own loss, so the gradient with respect to seed ``s``'s parameters is that seed's gradient
alone, and an element-wise optimiser (Adam, element-wise clipping) updates every seed exactly as
separate runs would: ``jax.vmap`` over seeds, one compiled step. A non-finite loss of any seed
freezes the step for all of them (``finite`` False in the result).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxpapers.core.checks import check_finite, check_labels
from jaxpapers.core.pytrees import count_params, stack_trees
from jaxpapers.core.train import TrainResult, train
from jaxpapers.lrnn._models import SequenceModel


class ModelConfig(NamedTuple):
    """Static sizes of a :class:`SequenceModel` (hashable; no arrays)."""

    vocab: int
    n_out: int
    mixer: str
    d_model: int
    d_state: int
    n_layers: int


class SeedModels(NamedTuple):
    """``graphdef`` and parameters stacked over seeds (leading axis ``S``)."""

    graphdef: Any
    params: Any
    n_params: int


def init_models(seeds: Sequence[int], *, config: ModelConfig) -> SeedModels:
    """One freshly initialised model per seed (``nnx.Rngs(seed)``), parameters stacked on axis 0.

    Initialisation runs eagerly: its primitives compile once per shape, so every model after the
    first costs milliseconds (a jitted, vmapped initialisation recompiles the whole random
    initialisation program for every mixer and costs more).
    """
    models = [
        SequenceModel(
            config.vocab,
            config.n_out,
            mixer=config.mixer,
            d_model=config.d_model,
            d_state=config.d_state,
            n_layers=config.n_layers,
            rngs=nnx.Rngs(s),
        )
        for s in seeds
    ]
    graphdef, _ = nnx.split(models[0], nnx.Param)
    params = [nnx.split(m, nnx.Param)[1] for m in models]
    # On the host: eagerly, jnp.stack (and train()'s copy of device arrays) would compile one
    # program per leaf shape.
    stacked = stack_trees(params, host=True)
    return SeedModels(graphdef, stacked, count_params(models[0]))


def seed_logits(graphdef: Any) -> Callable[[Any, jax.Array], jax.Array]:
    """``(stacked params [S, ...], tokens [S, B, T]) -> logits [S, B, T, C]``."""

    def one(params, tokens):
        return nnx.merge(graphdef, params)(tokens)

    return jax.vmap(one)


def _check_labels(logits: Any, labels: Any, mask: Any) -> None:
    shape = jnp.shape(logits)[:-1]
    if len(shape) < 1 or jnp.shape(labels) != shape or jnp.shape(mask) != shape:
        raise ValueError(
            f"logits has shape {jnp.shape(logits)}, labels {jnp.shape(labels)} and mask "
            f"{jnp.shape(mask)}; expected logits [S, ..., C] with labels and mask [S, ...]"
        )
    check_labels("labels", labels, jnp.shape(logits)[-1])
    check_finite("logits", logits)
    check_finite("mask", mask)


def masked_xent(logits: jax.Array, labels: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean cross-entropy (nats) over the positions where ``mask`` is 1, per leading seed.

    Args:
      logits: ``[S, ..., C]``.
      labels: ``[S, ...]`` integer classes.
      mask: ``[S, ...]`` weights (1 where a label counts).

    Returns:
      ``[S]`` mean cross-entropy of each seed (0 where its mask is empty).
    """
    _check_labels(logits, labels, mask)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    axes = tuple(range(1, ce.ndim))
    return jnp.sum(ce * mask, axis=axes) / jnp.maximum(jnp.sum(mask, axis=axes), 1.0)


def masked_accuracy(logits: Any, labels: Any, mask: Any) -> np.ndarray:
    """Share of the positions where ``mask`` is 1 whose arg-max class is the label, per seed.

    Args:
      logits: ``[S, ..., C]``.
      labels: ``[S, ...]`` integer classes.
      mask: ``[S, ...]`` 0/1 weights.

    Returns:
      ``[S]`` NumPy accuracies (NaN where a seed's mask is empty).
    """
    _check_labels(logits, labels, mask)
    hit = np.asarray(jnp.argmax(logits, axis=-1)) == np.asarray(labels)
    mask = np.asarray(mask)
    axes = tuple(range(1, mask.ndim))
    total = mask.sum(axis=axes)
    return np.where(total > 0, (hit * mask).sum(axis=axes) / np.maximum(total, 1), np.nan)


def fit(
    models: SeedModels,
    batch_fn: Callable[[int], dict[str, Any]],
    *,
    steps: int,
    lr: float,
    key: jax.Array,
    checkpoint_dir: Path | None = None,
    desc: str | None = None,
) -> TrainResult:
    """Train every seed's model on its own batches.

    ``batch_fn(step)`` returns ``{"tokens": [S, B, T], "labels": [S, B, T], "mask": [S, B, T]}``.
    Optimiser: element-wise clipping at 1 then Adam with a linear warm-up and cosine decay; the
    same for every mixer. Checkpoints (with ``checkpoint_dir``): at the end only for runs of up to
    1,000 steps, else every ``steps // 5`` steps.

    Returns:
      :class:`jaxpapers.core.train.TrainResult`: the stacked trained parameters, the optimiser
      state, the summed loss of every step, whether every step was applied, and the step the run
      resumed from.
    """
    logits_fn = seed_logits(models.graphdef)

    def loss_fn(params, batch, _key):
        logits = logits_fn(params, batch["tokens"])
        return jnp.sum(masked_xent(logits, batch["labels"], batch["mask"]))

    schedule = optax.warmup_cosine_decay_schedule(0.0, lr, max(1, steps // 10), steps, lr * 0.1)
    optimizer = optax.chain(optax.clip(1.0), optax.adam(schedule))
    return train(
        loss_fn,
        models.params,
        optimizer,
        batch_fn,
        steps=steps,
        key=key,
        checkpoint_dir=checkpoint_dir,
        checkpoint_every=steps if steps <= 1000 else max(1, steps // 5),
        desc=desc,
    )
