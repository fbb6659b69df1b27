"""The measurements behind each P03 experiment, and their plots."""

from __future__ import annotations

import dataclasses
import os
from functools import partial
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.cayley import LayerGNN, LayerProbe, fit_head, layer_graph
from jaxpapers.cayley.experiments._data import MAX_TOKENS, TASKS, load_splits, task_texts
from jaxpapers.cayley.experiments._lora import lower_states, train_lora
from jaxpapers.cayley.experiments._train import (
    GRAPH_HEADS,
    NUM_CLASSES,
    Grid,
    cell_order,
    normal_cdf,
    probe_rows,
    run_grid,
    synthetic_layers,
)
from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.core.metrics import accuracy
from jaxpapers.core.nn.bert import load_minilm, load_tokenizer, tokenize

LAYERS = 7  # all-MiniLM-L6-v2: the embeddings and six transformer layers
GNN = "Cayley-Encoder"
LORA_RANK = 8
LORA = f"LoRA r{LORA_RANK}"
#: ``probe_accuracy``'s attention-aggregation baseline (no verdict reads it; trained where
#: ``Config.attention`` is set)
ATTENTION = "attention aggregation"
#: AdamW settings of every head and of LoRA (adapters and head)
LEARNING_RATE, WEIGHT_DECAY = 5e-3, 1e-2


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """Everything that depends on the run size.

    Attributes:
      pool, val, test: examples per task in the training pool, validation and test splits.
      shots: training-set sizes of the heads (nested subsets of the pool).
      steps: full-batch AdamW steps of every head.
      hidden: node width of the layer GNNs and attention pooling.
      synthetic_train, synthetic_test: examples of ``bayes_limit``'s synthetic task.
      attention: whether the attention-aggregation baseline is trained (``probe_accuracy``'s
        row, which no verdict reads; left out of quick runs).
      lora_tasks, lora_shots, lora_steps, lora_adapted: ``vs_lora``'s LoRA: the tasks,
        training-set sizes, steps and adapted (top) MiniLM layers.
    """

    pool: int
    val: int
    test: int
    shots: tuple[int, ...]
    steps: int
    hidden: int
    synthetic_train: int
    synthetic_test: int
    attention: bool
    lora_tasks: tuple[str, ...]
    lora_shots: tuple[int, ...]
    lora_steps: int
    lora_adapted: int


def _grid(ctx: Context, config: Config) -> Grid:
    """Every head on every cell (one run cache step shared by the experiments)."""
    heads = tuple(h for h in GRAPH_HEADS if h != ATTENTION or config.attention)

    def compute():
        splits = load_splits(ctx, train=config.pool, val=config.val, test=config.test)
        grid = run_grid(
            splits,
            shots=config.shots,
            seeds=ctx.seed_list,
            steps=config.steps,
            learning_rate=LEARNING_RATE,
            weight_decay=WEIGHT_DECAY,
            hidden=config.hidden,
            heads=heads,
        )
        return grid._replace(lm_params=splits.lm_params)

    return ctx.cached("grid", compute)


def _rows_at(grid: Grid, shots: int, seeds: list[int]) -> dict[str, np.ndarray]:
    """Test accuracy per seed (mean over tasks) of every head trained at one size."""
    seed_of = np.array([r for _, r in grid.cells])
    heads = {
        name: np.asarray(by_size[shots].test, np.float64)
        for name, by_size in grid.heads.items()
        if shots in by_size
    }
    probes = probe_rows(grid.probes[shots], LAYERS)
    heads.update({k: v for k, v in probes.items() if k != "best layer index"})
    return {k: np.array([v[seed_of == r].mean() for r in seeds]) for k, v in heads.items()}


def probe_accuracy(ctx: Context, config: Config) -> Outcome:
    grid = _grid(ctx, config)
    top = max(config.shots)
    rows = _rows_at(grid, top, ctx.seed_list)
    finite = all(np.all(by_size[top].finite) for by_size in grid.heads.values())
    finite = finite and bool(np.all(grid.probes[top].finite))
    best = probe_rows(grid.probes[top], LAYERS)
    return Outcome(
        {k: v.tolist() for k, v in rows.items()},
        {
            "tasks": list(TASKS),
            "shots": top,
            "all_training_finite": bool(finite),
            "best_layer_index_per_cell": best["best layer index"].tolist(),
            "cells": [list(c) for c in grid.cells],
            "metric_detail": "test accuracy averaged over the tasks, one value per seed",
        },
    )


def few_shot(ctx: Context, config: Config) -> Outcome:
    grid = _grid(ctx, config)
    values, curves = {}, {}
    for s in config.shots:
        rows = _rows_at(grid, s, ctx.seed_list)
        for name in (
            "Cayley-Encoder",
            "fully connected GNN",
            "best single layer",
            "last-layer probe",
        ):
            values[f"{name} @{s}"] = rows[name].tolist()
            curves.setdefault(name, []).append(float(rows[name].mean()))
    return Outcome(values, {"shots": list(config.shots), "curves": curves})


def param_budget(ctx: Context, config: Config) -> Outcome:
    grid = _grid(ctx, config)
    lm = grid.lm_params
    fractions = {k: v / lm for k, v in grid.params.items()}
    return Outcome(
        {k: [v] * len(ctx.seed_list) for k, v in fractions.items()},
        {"lm_params": lm, "head_params": dict(grid.params)},
    )


def layer_contributions(ctx: Context, config: Config) -> Outcome:
    """Occlusion attribution of each layer for the trained Cayley-Encoder at the largest size."""
    grid = _grid(ctx, config)
    attr = np.asarray(grid.heads[GNN][max(config.shots)].attr, np.float64)
    tasks = np.array([k for k, _ in grid.cells])
    seeds = np.array([r for _, r in grid.cells])
    # a layer "contributes" when hiding it costs at least a quarter of the largest layer's drop
    # and at least one test example (the drop is an accuracy difference)
    top = attr.max(axis=1, keepdims=True)
    counts = ((attr >= 0.25 * top) & (attr >= 1.0 / config.test)).sum(axis=1)
    per_seed = [float(counts[seeds == r].mean()) for r in ctx.seed_list]
    per_task = {name: attr[tasks == k].mean(axis=0).tolist() for k, name in enumerate(TASKS)}
    return Outcome({"layers contributing": per_seed}, {"mean_attribution": per_task})


class LoRACell(NamedTuple):
    """LoRA on one (task, training-set size) over the seeds: ``[seeds]`` test accuracy (float64),
    final training loss and finiteness; seconds per training step of one cell (wall, CPU)."""

    test: np.ndarray
    final_loss: np.ndarray
    finite: np.ndarray
    seconds_per_step: float
    cpu_seconds_per_step: float


class LoRARuns(NamedTuple):
    """``vs_lora``'s LoRA: ``cells["<task> @<n>"]``, and the trainable and adapter scalars."""

    cells: dict[str, LoRACell]
    trainable: int
    adapter: int


def _lora_runs(ctx: Context, config: Config) -> LoRARuns:
    """LoRA adapters + head per (task, seed, size) cell, on the cells' training texts."""
    tokenizer, model = load_tokenizer(), load_minilm()
    start = len(model.layers) - config.lora_adapted
    cells: dict[str, LoRACell] = {}
    for name in config.lora_tasks:
        k = list(TASKS).index(name)
        texts, labels = task_texts(
            name, tokenizer, train=config.pool, val=config.val, test=config.test
        )
        ids, mask = tokenize(tokenizer, texts, MAX_TOKENS)
        pool, test = slice(0, config.pool), slice(config.pool + config.val, None)
        keep = np.concatenate([np.arange(config.pool), np.arange(len(texts))[test]])
        # frozen states entering the lowest adapted layer, for the pool and the test texts
        states = lower_states(model, ids[keep], mask[keep], start)
        h = {"pool": states[: config.pool], "test": states[config.pool :]}
        for n in config.lora_shots:
            idx = np.stack([cell_order(k, r, config.pool)[:n] for r in ctx.seed_list])
            run = train_lora(
                model,
                [jax.random.fold_in(jax.random.key(10_000 + r), k) for r in ctx.seed_list],
                h["pool"][idx],
                mask[pool][idx],
                labels[pool][idx],
                h["test"],
                mask[test],
                labels[test],
                rank=LORA_RANK,
                adapted=config.lora_adapted,
                num_classes=NUM_CLASSES,
                steps=config.lora_steps,
                learning_rate=LEARNING_RATE,
                weight_decay=WEIGHT_DECAY,
            )
            cells[f"{name} @{n}"] = LoRACell(
                run.test,
                run.losses[:, -1].astype(np.float64),
                run.finite,
                run.seconds_per_step,
                run.cpu_seconds_per_step,
            )
    return LoRARuns(cells, run.trainable, run.adapter)


def _lora(ctx: Context, config: Config) -> LoRARuns:
    return ctx.cached("lora", partial(_lora_runs, ctx, config))


def _cell_index(grid: Grid) -> dict[tuple[int, int], int]:
    return {tuple(int(v) for v in c): i for i, c in enumerate(grid.cells)}


def lora_baseline(ctx: Context, config: Config) -> Outcome:
    """LoRA against the last-layer linear probe of the frozen MiniLM, on the LoRA cells.

    LoRA's head reads the same standardised mean-pooled last layer as the last-layer probe, and
    its adapters start at zero (``B = 0``), so LoRA starts as that probe and a trained LoRA can
    only add to it: a LoRA not better than the probe (paired one-sided t test at every size) is
    an untrained or undertrained baseline, and ``vs_lora`` then says nothing about LoRA
    fine-tuning (it requires this experiment). Rows: test accuracy per
    seed, mean over the LoRA tasks, at each LoRA training-set size.
    """
    grid = _grid(ctx, config)
    lora = _lora(ctx, config)
    index = _cell_index(grid)
    values: dict[str, list[float]] = {}
    for n in config.lora_shots:
        last = probe_rows(grid.probes[n], LAYERS)["last-layer probe"]
        per_task = [
            [float(last[index[(list(TASKS).index(name), r)]]) for r in ctx.seed_list]
            for name in config.lora_tasks
        ]
        low = [lora.cells[f"{name} @{n}"].test for name in config.lora_tasks]
        values[f"{LORA} @{n}"] = np.mean(low, axis=0).tolist()
        values[f"last-layer probe @{n}"] = np.mean(per_task, axis=0).tolist()
    return Outcome(
        values,
        {
            "tasks": list(config.lora_tasks),
            "lora_steps": config.lora_steps,
            "probe_steps": config.steps,
            "final_train_loss": {c: v.final_loss.tolist() for c, v in lora.cells.items()},
        },
    )


def vs_lora(ctx: Context, config: Config) -> Outcome:
    """Cayley-Encoder (frozen MiniLM) against LoRA rank 8 fine-tuning of MiniLM, same cells.

    For each task of ``config.lora_tasks`` and size of ``config.lora_shots``, LoRA (adapters on
    query and value of the top ``config.lora_adapted`` layers, plus a linear head) trains on the
    training texts of the Cayley-Encoder's (task, seed) cells and is tested on the same test texts
    (:mod:`._lora`). Rows: test accuracy per seed, mean over the LoRA tasks, of both. The rule
    is the abstract's verb ("outperforms LoRA fine-tuning"): the Cayley-Encoder better than LoRA
    at every size (paired one-sided t test), judged only when ``lora_baseline`` holds (a LoRA
    below the frozen last-layer probe it starts from is undertrained). Extras: trainable
    fractions of MiniLM's parameters, seconds per training step of one cell (wall and CPU, this
    run's machine load; each program's compile, or its load from the compilation cache,
    included; the Cayley program runs every cell at the largest size with zero-weight padding,
    LoRA at its own size).
    """
    grid = _grid(ctx, config)
    lora = _lora(ctx, config)
    index = _cell_index(grid)
    values: dict[str, list[float]] = {}
    timing: dict[str, dict] = {}
    for n in config.lora_shots:
        gnn, low = [], []
        res = grid.heads[GNN][n]
        for name in config.lora_tasks:
            k = list(TASKS).index(name)
            gnn.append([float(res.test[index[(k, r)]]) for r in ctx.seed_list])
            cell = lora.cells[f"{name} @{n}"]
            low.append(cell.test)
            timing[f"LoRA @{n} {name}"] = {
                "seconds_per_step": cell.seconds_per_step,
                "cpu_seconds_per_step": cell.cpu_seconds_per_step,
            }
        timing[f"{GNN} @{n}"] = {
            "seconds_per_step": res.seconds_per_step,
            "cpu_seconds_per_step": res.cpu_seconds_per_step,
        }
        values[f"{GNN} @{n}"] = np.mean(gnn, axis=0).tolist()
        values[f"{LORA} @{n}"] = np.mean(low, axis=0).tolist()
    lm = grid.lm_params
    return Outcome(
        values,
        {
            "tasks": list(config.lora_tasks),
            "shots": list(config.lora_shots),
            "lora": {
                "rank": LORA_RANK,
                "targets": "attention query and value",
                "adapted_layers": f"top {config.lora_adapted} of 6",
                "steps": config.lora_steps,
                "learning_rate": LEARNING_RATE,
            },
            "trainable_fraction": {
                GNN: grid.params[GNN] / lm,
                LORA: lora.trainable / lm,
                f"{LORA} (adapters only)": lora.adapter / lm,
            },
            "timing": timing,
            # every size's rows, --full's 256 examples included (the table keeps 16 and 64)
            "mean_accuracy": {k: float(np.mean(v)) for k, v in values.items()},
            "final_train_loss": {c: v.final_loss.tolist() for c, v in lora.cells.items()},
            "all_training_finite": all(bool(np.all(v.finite)) for v in lora.cells.values()),
            "load_average_1min": os.getloadavg()[0],
            "metric_detail": "test accuracy averaged over the tasks, one value per seed; the "
            "LoRA cells train on the Cayley cells' very training texts and share their test set",
        },
    )


FEATURES = 16
DIRECTION = np.ones(FEATURES, np.float32) / FEATURES**0.5


@partial(jax.jit, static_argnames=("train", "test", "steps", "signal"))
def _synthetic(seeds, *, train: int, test: int, steps: int, signal: float):
    def one(seed):
        key = jax.random.key(seed)
        k_data, k_test, k_head = jax.random.split(key, 3)
        u = jnp.asarray(DIRECTION)
        x, y, _ = synthetic_layers(k_data, train, layers=LAYERS, direction=u, signal=signal)
        xt, yt, _ = synthetic_layers(k_test, test, layers=LAYERS, direction=u, signal=signal)
        gnn = LayerGNN(layer_graph(LAYERS), FEATURES, 2, key=k_head, hidden=16)
        probe = LayerProbe(LAYERS, FEATURES, 2, layer=-1, key=k_head)
        hp = {"steps": steps, "learning_rate": 1e-2, "weight_decay": 1e-2}
        return (
            accuracy(jax.vmap(fit_head(gnn, x, y, **hp).head)(xt), yt),
            accuracy(jax.vmap(fit_head(probe, x, y, **hp).head)(xt), yt),
        )

    # lax.map, not vmap, over seeds: on XLA:CPU the vmapped program compiled ~4x slower
    return jax.lax.map(one, seeds)


SIGNAL = 0.5
#: closed-form Bayes accuracies: Phi(s) from one layer, Phi(s sqrt(L)) from all of them
BAYES_ONE = normal_cdf(SIGNAL)
BAYES_ALL = normal_cdf(SIGNAL * LAYERS**0.5)


def bayes_limit(ctx: Context, config: Config) -> Outcome:
    """Synthetic layers with closed-form Bayes accuracies (see ``synthetic_layers``)."""
    seeds = np.array([1000 + s for s in ctx.seed_list], np.int32)
    gnn, probe = _synthetic(
        seeds,
        train=config.synthetic_train,
        test=config.synthetic_test,
        steps=config.steps,
        signal=SIGNAL,
    )
    return Outcome(
        {
            "Cayley-Encoder": np.asarray(gnn).tolist(),
            "last-layer probe": np.asarray(probe).tolist(),
        },
        {"bayes_one_layer": BAYES_ONE, "bayes_all_layers": BAYES_ALL},
    )


def plot_few_shot(outcome: Outcome, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    for name, curve in outcome.extras["curves"].items():
        ax.plot(outcome.extras["shots"], curve, marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("labelled training examples")
    ax.set_ylabel("test accuracy (mean over tasks)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def plot_contributions(outcome: Outcome, path: Path) -> None:
    import matplotlib.pyplot as plt

    per_task = outcome.extras["mean_attribution"]
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    width = 0.8 / len(per_task)
    for i, (name, attr) in enumerate(per_task.items()):
        ax.bar(np.arange(len(attr)) + i * width, attr, width, label=name)
    ax.set_xlabel("layer (0 = embeddings)")
    ax.set_ylabel("accuracy drop when occluded")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
