r"""LoRA fine-tuning of MiniLM on a valence task: the parameter-efficient baseline of ``vs_lora``.

The frozen all-MiniLM-L6-v2 gets rank-``r`` adapters (:mod:`jaxpapers.core.nn.lora`) on the
attention query and value projections of its top ``adapted`` layers; a linear head reads the
mean-pooled last layer, standardised by the frozen model's statistics on the cell's training
texts (mean per dimension, mean standard deviation: the scaling the layer heads' features get).
Adapters and head are trained together by full-batch AdamW with the Cayley heads' learning rate,
weight decay and step count, on exactly the cells' training examples (same texts, same seeded
subsets), and evaluated on the same test texts.

The layers below the lowest adapter are frozen and see no gradient, so their output token states
are computed once (:func:`lower_states`) and the training program starts there; with all six
layers adapted that is just the embeddings. This is the only sharing possible: an adapter changes
every state above it.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxpapers.core.nn.bert import Bert, mean_pool
from jaxpapers.core.nn.lora import add_lora, lora_param_count
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
def _train_cells(graphdef, frozen, params, h, mask, y, h_test, mask_test, y_test, hp, start, steps):
    """Train every cell (leading axis of ``params``, ``h``, ``mask``, ``y``); test accuracy each."""
    opt = optax.adamw(hp["learning_rate"], weight_decay=hp["weight_decay"])

    def one(args):
        p0, h, m, y = args
        # B = 0 at the start: the adapted model is the frozen one, whose pooled output sets the
        # head's input standardisation (no labels involved)
        z0 = mean_pool(nnx.merge(graphdef, p0["lora"], frozen)(None, m, hidden=h, start=start), m)
        norm = jax.lax.stop_gradient((jnp.mean(z0, 0), jnp.mean(jnp.std(z0, 0))))

        def loss_fn(p):
            logits = _logits(graphdef, frozen, p, h, m, start, norm)
            return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, y))

        def step(carry, _):
            p, state, ok = carry
            loss, g = jax.value_and_grad(loss_fn)(p)
            updates, new_state = opt.update(g, state, p)
            ok = ok & jnp.isfinite(loss)
            new = (optax.apply_updates(p, updates), new_state)
            p, state = jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, (p, state))
            return (p, state, ok), loss

        (p, _, ok), losses = jax.lax.scan(
            step, (p0, opt.init(p0), jnp.array(True)), None, length=steps
        )
        logits = _logits(graphdef, frozen, p, h_test, mask_test, start, norm)
        return jnp.mean(jnp.argmax(logits, -1) == y_test), losses, ok, p

    return jax.lax.map(one, (params, h, mask, y))


def lora_model(model: Bert, *, rank: int, adapted: int, key: jax.Array) -> Bert:
    """A copy of ``model`` with rank-``rank`` adapters on query and value of its top layers."""
    if not 1 <= adapted <= len(model.layers):
        raise ValueError(f"adapted={adapted}; expected 1 .. {len(model.layers)} layers")
    model = nnx.clone(model)
    add_lora(list(model.layers)[-adapted:], TARGETS, rank=rank, key=key)
    return model


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
    learning_rate: float,
    weight_decay: float,
    compiler_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Adapters + head trained per cell (``keys [C]``, ``h [C, n, T, D]`` states entering the
    lowest adapted layer, ``mask [C, n, T]``, ``y [C, n]``); test accuracy per cell.

    Returns a dict: ``test [C]``, ``final_loss [C]``, ``finite [C]``, ``trainable`` (adapter plus
    head scalars), ``adapter``, ``seconds_per_step`` (wall time of the compiled program over
    ``C * steps``, test evaluation included) and ``compile_s``; plus ``params`` (the trained
    adapter and head of every cell, for tests). ``compiler_options``: XLA options of the
    training program.
    """
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
    hp = {"learning_rate": learning_rate, "weight_decay": weight_decay}
    args = (graphdef, frozen, params, h, mask, y, h_test, mask_test, y_test, hp)
    t0, c0 = time.perf_counter(), time.process_time()
    compiled = _train_cells.lower(*args, start=start, steps=steps).compile(compiler_options)
    t1, c1 = time.perf_counter(), time.process_time()
    test, losses, finite, trained = jax.block_until_ready(compiled(*args[1:]))
    t2, c2 = time.perf_counter(), time.process_time()
    adapter = lora_param_count(adapted_model)
    return {
        "test": np.asarray(test).tolist(),
        "final_loss": np.asarray(losses)[:, -1].tolist(),
        "finite": np.asarray(finite).tolist(),
        "adapter": adapter,
        "trainable": adapter + d * num_classes + num_classes,
        "seconds_per_step": (t2 - t1) / (len(keys) * steps),
        "cpu_seconds_per_step": (c2 - c1) / (len(keys) * steps),
        "compile_s": t1 - t0,
        "compile_cpu_s": c1 - c0,
        "params": trained,
        "graphdef": graphdef,
        "frozen": frozen,
        "start": start,
    }
