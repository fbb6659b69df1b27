r"""LoRA fine-tuning of MiniLM on a valence task: the parameter-efficient baseline of ``vs_lora``.

The frozen all-MiniLM-L6-v2 gets rank-``r`` adapters (:mod:`jaxpapers.cayley._lora`) on the
attention query and value projections of its top ``adapted`` layers; a linear head reads the
mean-pooled last layer, standardised by the frozen model's statistics on the cell's training
texts (mean per dimension, mean standard deviation: the scaling the layer heads' features get).
Adapters and head are trained together by full-batch AdamW with the Cayley heads' weight decay
and step count and a learning rate per cell (the experiments tune it, and the number of adapted
layers, on validation texts), on exactly the cells' training examples (same texts, same seeded
subsets), and evaluated on the same validation and test texts as the heads.

The layers below the lowest adapter are frozen and see no gradient, so their output token states
are computed once (:func:`lower_states`) and the training program starts there; with all six
layers adapted that is just the embeddings. This is the only sharing possible: an adapter changes
every state above it.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxpapers.cayley._lora import add_lora, lora_param_count
from jaxpapers.core.fit import fit
from jaxpapers.core.nn.bert import Bert, mean_pool
from jaxpapers.core.pytrees import stack_trees

TARGETS = ("query", "value")


@partial(jax.jit, static_argnames=("graphdef", "stop"))
def _lower(graphdef, state, ids, mask, stop):
    return nnx.merge(graphdef, state)(ids, mask, stop=stop)


def lower_states(model: Bert, ids: np.ndarray, mask: np.ndarray, stop: int) -> np.ndarray:
    """Token states ``[N, T, D]`` entering layer ``stop`` of the frozen model (embeddings at 0)."""
    graphdef, state = nnx.split(model)
    return np.asarray(_lower(graphdef, state, jnp.asarray(ids), jnp.asarray(mask), stop))


def _logits(graphdef, frozen, params, h, mask, start, norm):
    model = nnx.merge(graphdef, params["lora"], frozen)
    pooled = mean_pool(model(None, mask, hidden=h, start=start), mask)
    z = (pooled - norm[0][None]) / norm[1]
    return z @ params["head"]["w"] + params["head"]["b"][None]


@partial(jax.jit, static_argnames=("graphdef", "start", "steps"))
def _train_cells(graphdef, frozen, params, lrs, h, mask, y, evals, weight_decay, start, steps):
    """Train every cell (leading axis of ``params``, ``lrs``, ``h``, ``mask``, ``y``); the
    accuracy of each on every evaluation set of ``evals`` (``(h, mask, y)`` triples)."""

    def one(args):
        p0, lr, h, m, y = args
        optimizer = optax.adamw(lr, weight_decay=weight_decay)
        # B = 0 at the start: the adapted model is the frozen one, whose pooled output sets the
        # head's input standardisation (no labels involved)
        z0 = mean_pool(nnx.merge(graphdef, p0["lora"], frozen)(None, m, hidden=h, start=start), m)
        norm = jax.lax.stop_gradient((jnp.mean(z0, 0), jnp.mean(jnp.std(z0, 0))))

        def loss_fn(p, batch, key):
            del batch, key  # full batch, no randomness
            logits = _logits(graphdef, frozen, p, h, m, start, norm)
            return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, y))

        res = fit(loss_fn, p0, optimizer, steps=steps, key=jax.random.key(0))
        accs = [
            jnp.mean(
                jnp.argmax(_logits(graphdef, frozen, res.params, *e[:2], start, norm), -1) == e[2]
            )
            for e in evals
        ]
        return accs, res.losses, res.finite, res.params

    return jax.lax.map(one, (params, lrs, h, mask, y))


def lora_model(model: Bert, *, rank: int, adapted: int, key: jax.Array) -> Bert:
    """A copy of ``model`` with rank-``rank`` adapters on query and value of its top layers."""
    if not 1 <= adapted <= len(model.layers):
        raise ValueError(f"adapted={adapted}; expected 1 .. {len(model.layers)} layers")
    model = nnx.clone(model)
    add_lora(list(model.layers)[-adapted:], TARGETS, rank=rank, key=key)
    return model


class LoRARun(NamedTuple):
    """LoRA trained on every cell (leading axis ``[C]``).

    Attributes:
      params: the trained adapters and head of every cell (``{"lora": ..., "head": ...}``).
      losses: ``[C, steps]`` training loss of every step.
      finite: ``[C]`` whether every step was finite.
      test: ``[C]`` test accuracy (float64).
      val: ``[C]`` validation accuracy (float64; ``None`` without validation texts).
      adapter: adapter scalars of one cell; trainable: adapter plus head scalars.
      seconds_per_step, cpu_seconds_per_step: wall and CPU seconds of the training program per
        step of one cell (the test evaluation and the program's compile, or its load from the
        compilation cache, included).
      graphdef, frozen, start: the adapted model's graph, its frozen weights and the first layer
        the training program runs (for tests).
    """

    params: Any
    losses: np.ndarray
    finite: np.ndarray
    test: np.ndarray
    adapter: int
    trainable: int
    seconds_per_step: float
    cpu_seconds_per_step: float
    graphdef: Any
    frozen: Any
    start: int
    val: np.ndarray | None = None


def train_lora(
    model: Bert,
    keys: jax.Array,
    h: np.ndarray,
    mask: np.ndarray,
    y: np.ndarray,
    h_test: np.ndarray,
    mask_test: np.ndarray,
    y_test: np.ndarray,
    *,
    rank: int,
    adapted: int,
    num_classes: int,
    steps: int,
    learning_rate: float | np.ndarray,
    weight_decay: float,
    validation: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> LoRARun:
    """Adapters + head trained per cell (``keys [C]``, ``h [C, n, T, D]`` states entering the
    lowest adapted layer, ``mask [C, n, T]``, ``y [C, n]``) by full-batch AdamW
    (:func:`jaxpapers.core.fit.fit`); test accuracy per cell (:class:`LoRARun`), and validation
    accuracy on ``validation = (h_val, mask_val, y_val)``.

    ``learning_rate``: one for every cell, or ``[C]``, one per cell (traced: one program for a
    grid of learning rates)."""
    start = len(model.layers) - adapted
    d = model.cfg.hidden
    inits = []
    for key in keys:
        k_lora, k_head = jax.random.split(key)
        adapted_model = lora_model(model, rank=rank, adapted=adapted, key=k_lora)
        graphdef, lora, frozen = nnx.split(adapted_model, nnx.LoRAParam, ...)
        head = {
            "w": jax.random.normal(k_head, (d, num_classes)) / d**0.5,
            "b": jnp.zeros((num_classes,)),
        }
        inits.append({"lora": lora, "head": head})
    params = stack_trees(inits, host=True)
    lrs = np.broadcast_to(np.asarray(learning_rate, np.float32), (len(keys),))
    evals = [(h_test, mask_test, y_test)] + ([] if validation is None else [tuple(validation)])
    t0, c0 = time.perf_counter(), time.process_time()
    accs, losses, finite, trained = jax.block_until_ready(
        _train_cells(
            graphdef,
            frozen,
            params,
            lrs,
            h,
            mask,
            y,
            evals,
            weight_decay,
            start=start,
            steps=steps,
        )
    )
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    test = accs[0]
    adapter = lora_param_count(adapted_model)
    return LoRARun(
        params=trained,
        losses=np.asarray(losses),
        finite=np.asarray(finite),
        test=np.asarray(test, np.float64),
        adapter=adapter,
        trainable=adapter + d * num_classes + num_classes,
        seconds_per_step=wall / (len(keys) * steps),
        cpu_seconds_per_step=cpu / (len(keys) * steps),
        graphdef=graphdef,
        frozen=frozen,
        start=start,
        val=None if validation is None else np.asarray(accs[1], np.float64),
    )
