"""Train one model per seed at once: parameters stacked on a leading seed axis, losses summed.

The loss handed to :func:`jaxpapers.core.train.train` is the sum over seeds of each seed's own
loss, so the gradient with respect to seed ``s``'s parameters is that seed's gradient alone, and
an element-wise optimiser (Adam, element-wise clipping) updates every seed exactly as separate
runs would: ``jax.vmap`` over seeds, one compiled step.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from jaxpapers.core.train import train
from jaxpapers.lrnn._models import SequenceModel, count_params


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


def init_models(cfg: ModelConfig, seeds: list[int]) -> SeedModels:
    """One freshly initialised model per seed (``nnx.Rngs(seed)``), parameters stacked on axis 0.

    Initialisation runs eagerly: its primitives compile once per shape, so every model after the
    first costs milliseconds (a jitted, vmapped initialisation recompiles the whole random
    initialisation program for every mixer and costs more).
    """
    models = [
        SequenceModel(
            cfg.vocab,
            cfg.n_out,
            mixer=cfg.mixer,
            d_model=cfg.d_model,
            d_state=cfg.d_state,
            n_layers=cfg.n_layers,
            rngs=nnx.Rngs(s),
        )
        for s in seeds
    ]
    graphdef, _ = nnx.split(models[0], nnx.Param)
    params = [nnx.split(m, nnx.Param)[1] for m in models]
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *params)
    return SeedModels(graphdef, stacked, count_params(models[0]))


def seed_logits(graphdef: Any) -> Callable[[Any, jax.Array], jax.Array]:
    """``(stacked params [S, ...], tokens [S, B, T]) -> logits [S, B, T, C]``."""

    def one(params, tokens):
        return nnx.merge(graphdef, params)(tokens)

    return jax.vmap(one)


def masked_xent(logits: jax.Array, labels: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean cross-entropy (nats) over the positions where ``mask`` is 1, per leading seed."""
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    axes = tuple(range(1, ce.ndim))
    return jnp.sum(ce * mask, axis=axes) / jnp.maximum(jnp.sum(mask, axis=axes), 1.0)


def fit(
    models: SeedModels,
    batch_fn: Callable[[int], dict[str, Any]],
    *,
    steps: int,
    lr: float,
    key: jax.Array,
    checkpoint_dir: Path | None,
    desc: str,
) -> Any:
    """Train every seed's model on its own batches; returns the stacked trained parameters.

    ``batch_fn(step)`` returns ``{"tokens": [S, B, T], "labels": [S, B, T], "mask": [S, B, T]}``.
    Optimiser: element-wise clipping at 1 then Adam with a linear warm-up and cosine decay; the
    same for every mixer. Checkpoints: at the end only for runs of up to 1,000 steps (an orbax
    save costs CPU-seconds, and short runs are cached whole by the experiments), else every
    ``steps // 5`` steps.
    """
    logits_fn = seed_logits(models.graphdef)

    def loss_fn(params, batch, _key):
        logits = logits_fn(params, batch["tokens"])
        return jnp.sum(masked_xent(logits, batch["labels"], batch["mask"]))

    schedule = optax.warmup_cosine_decay_schedule(0.0, lr, max(1, steps // 10), steps, lr * 0.1)
    optimizer = optax.chain(optax.clip(1.0), optax.adam(schedule))
    result = train(
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
    return result.params
