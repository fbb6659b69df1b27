"""The measurements behind each registered P03 experiment, and their plots."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.cayley import LayerGNN, LayerProbe, accuracy, fit_head, layer_graph
from jaxpapers.cayley.experiments._data import MAX_TOKENS, TASKS, load_splits, task_texts
from jaxpapers.cayley.experiments._lora import lower_states, train_lora
from jaxpapers.cayley.experiments._train import (
    GRAPH_HEADS,
    NUM_CLASSES,
    cell_order,
    normal_cdf,
    probe_rows,
    run_grid,
    synthetic_layers,
)
from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.core.nn.bert import load_minilm, load_tokenizer, tokenize

LAYERS = 7  # all-MiniLM-L6-v2: the embeddings and six transformer layers
GNN = "Cayley-Encoder"
LORA_RANK = 8
LORA = f"LoRA r{LORA_RANK}"
#: ``probe_accuracy``'s attention-aggregation baseline (no verdict reads it) runs at these sizes
#: only: at the quick size its program (a compile and 18 cells) was ~8 s of the budget
ATTENTION = "attention aggregation"
ATTENTION_SIZES = ("smoke", "full")
#: AdamW settings of every head and of LoRA (adapters and head)
LEARNING_RATE, WEIGHT_DECAY = 5e-3, 1e-2


class Sizes(NamedTuple):
    """Sizes of one run (picked per ``smoke`` / ``quick`` / ``full``)."""

    pool: int
    val: int
    test: int
    shots: tuple[int, ...]
    steps: int
    hidden: int
    synthetic_train: int
    synthetic_test: int
    #: ``vs_lora``: the tasks, training-set sizes, steps and adapted (top) MiniLM layers of LoRA
    lora_tasks: tuple[str, ...]
    lora_shots: tuple[int, ...]
    lora_steps: int
    lora_adapted: int


def _grid(ctx: Context, sizes: Sizes) -> dict:
    heads = tuple(h for h in GRAPH_HEADS if h != ATTENTION or ctx.size in ATTENTION_SIZES)

    def compute():
        splits = load_splits(ctx, train=sizes.pool, val=sizes.val, test=sizes.test)
        out = run_grid(
            splits,
            shots=sizes.shots,
            seeds=ctx.seed_list,
            steps=sizes.steps,
            learning_rate=LEARNING_RATE,
            weight_decay=WEIGHT_DECAY,
            hidden=sizes.hidden,
            heads=heads,
            compiler_options=ctx.quick_compile,
        )
        out["lm_params"] = splits.lm_params
        return out

    key = f"grid_{ctx.size}_{ctx.seeds}_{sizes.pool}_{sizes.shots}_{sizes.steps}_{sizes.hidden}"
    key += "" if ATTENTION in heads else "_noattention"
    return ctx.cached(key.replace(" ", ""), compute, shared=True)


def _rows_at(grid: dict, shots: int, seeds: list[int]) -> dict[str, np.ndarray]:
    """Test accuracy per seed (mean over tasks) of every head trained at one size."""
    seed_of = np.array([r for _, r in grid["grid"]])
    res = grid["results"]
    heads = {
        name: np.asarray(by_size[str(shots)]["test"])
        for name, by_size in res.items()
        if name != "probes" and str(shots) in by_size
    }
    probes = probe_rows({k: np.asarray(v) for k, v in res["probes"][str(shots)].items()}, LAYERS)
    heads.update({k: v for k, v in probes.items() if k != "best layer index"})
    return {k: np.array([v[seed_of == r].mean() for r in seeds]) for k, v in heads.items()}


def probe_accuracy(ctx: Context, sizes: Sizes) -> Outcome:
    grid = _grid(ctx, sizes)
    top = str(max(sizes.shots))
    rows = _rows_at(grid, max(sizes.shots), ctx.seed_list)
    res = grid["results"]
    finite = all(np.all(by_size[top]["finite"]) for by_size in res.values())
    best = probe_rows({k: np.asarray(v) for k, v in res["probes"][top].items()}, LAYERS)
    return Outcome(
        {k: v.tolist() for k, v in rows.items()},
        {
            "tasks": list(TASKS),
            "shots": max(sizes.shots),
            "all_training_finite": bool(finite),
            "best_layer_index_per_cell": best["best layer index"].tolist(),
            "cells": grid["grid"],
            "metric_detail": "test accuracy averaged over the tasks, one value per seed",
        },
    )


def few_shot(ctx: Context, sizes: Sizes) -> Outcome:
    grid = _grid(ctx, sizes)
    values, curves = {}, {}
    for s in sizes.shots:
        rows = _rows_at(grid, s, ctx.seed_list)
        for name in (
            "Cayley-Encoder",
            "fully connected GNN",
            "best single layer",
            "last-layer probe",
        ):
            values[f"{name} @{s}"] = rows[name].tolist()
            curves.setdefault(name, []).append(float(rows[name].mean()))
    return Outcome(values, {"shots": list(sizes.shots), "curves": curves})


def param_budget(ctx: Context, sizes: Sizes) -> Outcome:
    grid = _grid(ctx, sizes)
    lm = grid["lm_params"]
    fractions = {k: v / lm for k, v in grid["params"].items()}
    return Outcome(
        {k: [v] * len(ctx.seed_list) for k, v in fractions.items()},
        {"lm_params": lm, "head_params": grid["params"]},
    )


def layer_contributions(ctx: Context, sizes: Sizes) -> Outcome:
    """Occlusion attribution of each layer for the trained Cayley-Encoder at the largest size."""
    grid = _grid(ctx, sizes)
    attr = np.asarray(grid["results"]["Cayley-Encoder"][str(max(sizes.shots))]["attr"])
    tasks = np.array([k for k, _ in grid["grid"]])
    seeds = np.array([r for _, r in grid["grid"]])
    # a layer "contributes" when hiding it costs at least a quarter of the largest layer's drop
    # and at least one test example (the drop is an accuracy difference)
    top = attr.max(axis=1, keepdims=True)
    counts = ((attr >= 0.25 * top) & (attr >= 1.0 / sizes.test)).sum(axis=1)
    per_seed = [float(counts[seeds == r].mean()) for r in ctx.seed_list]
    per_task = {name: attr[tasks == k].mean(axis=0).tolist() for k, name in enumerate(TASKS)}
    return Outcome({"layers contributing": per_seed}, {"mean_attribution": per_task})


def _lora_runs(ctx: Context, sizes: Sizes) -> dict:
    """LoRA adapters + head per (task, seed, size) cell, on the cells' training texts."""
    tokenizer, model = load_tokenizer(), load_minilm()
    start = len(model.layers) - sizes.lora_adapted
    out: dict = {"cells": {}}
    for name in sizes.lora_tasks:
        k = list(TASKS).index(name)
        texts, labels = task_texts(
            name, tokenizer, train=sizes.pool, val=sizes.val, test=sizes.test
        )
        ids, mask = tokenize(tokenizer, texts, MAX_TOKENS)
        pool, test = slice(0, sizes.pool), slice(sizes.pool + sizes.val, None)
        keep = np.concatenate([np.arange(sizes.pool), np.arange(len(texts))[test]])
        # frozen states entering the lowest adapted layer, for the pool and the test texts
        states = lower_states(model, ids[keep], mask[keep], start)
        h = {"pool": states[: sizes.pool], "test": states[sizes.pool :]}
        for n in sizes.lora_shots:
            idx = np.stack([cell_order(k, r, sizes.pool)[:n] for r in ctx.seed_list])
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
                adapted=sizes.lora_adapted,
                num_classes=NUM_CLASSES,
                steps=sizes.lora_steps,
                learning_rate=LEARNING_RATE,
                weight_decay=WEIGHT_DECAY,
                compiler_options=ctx.quick_compile,
            )
            keys = (
                "test",
                "final_loss",
                "finite",
                "seconds_per_step",
                "cpu_seconds_per_step",
                "compile_s",
                "compile_cpu_s",
            )
            out["cells"][f"{name} @{n}"] = {key: run[key] for key in keys}
            out["trainable"], out["adapter"] = run["trainable"], run["adapter"]
    return out


def _lora(ctx: Context, sizes: Sizes) -> dict:
    key = f"lora_{ctx.size}_{ctx.seeds}_{sizes.lora_tasks}_{sizes.lora_shots}_{sizes.lora_steps}"
    return ctx.cached(
        f"{key}_{sizes.lora_adapted}".replace(" ", ""), partial(_lora_runs, ctx, sizes), shared=True
    )


def lora_baseline(ctx: Context, sizes: Sizes) -> Outcome:
    """LoRA against the last-layer linear probe of the frozen MiniLM, on the LoRA cells.

    LoRA's head reads the same standardised mean-pooled last layer as the last-layer probe, and
    its adapters start at zero (``B = 0``), so LoRA starts as that probe and a trained LoRA can
    only add to it: a LoRA not better than the probe (paired one-sided t test at every size) is
    an untrained or undertrained baseline, and ``vs_lora`` then says nothing about LoRA
    fine-tuning (it requires this experiment). Rows: test accuracy per
    seed, mean over the LoRA tasks, at each LoRA training-set size.
    """
    grid = _grid(ctx, sizes)
    lora = _lora(ctx, sizes)
    cells = [tuple(c) for c in grid["grid"]]
    values: dict[str, list[float]] = {}
    for n in sizes.lora_shots:
        probes = {k: np.asarray(v) for k, v in grid["results"]["probes"][str(n)].items()}
        last = probe_rows(probes, LAYERS)["last-layer probe"]
        per_task = [
            [float(last[cells.index((list(TASKS).index(name), r))]) for r in ctx.seed_list]
            for name in sizes.lora_tasks
        ]
        low = [lora["cells"][f"{name} @{n}"]["test"] for name in sizes.lora_tasks]
        values[f"{LORA} @{n}"] = np.mean(low, axis=0).tolist()
        values[f"last-layer probe @{n}"] = np.mean(per_task, axis=0).tolist()
    return Outcome(
        values,
        {
            "tasks": list(sizes.lora_tasks),
            "lora_steps": sizes.lora_steps,
            "probe_steps": sizes.steps,
            "final_train_loss": {c: v["final_loss"] for c, v in lora["cells"].items()},
        },
    )


def vs_lora(ctx: Context, sizes: Sizes) -> Outcome:
    """Cayley-Encoder (frozen MiniLM) against LoRA rank 8 fine-tuning of MiniLM, same cells.

    For each task of ``sizes.lora_tasks`` and size of ``sizes.lora_shots``, LoRA (adapters on
    query and value of the top ``sizes.lora_adapted`` layers, plus a linear head) trains on the
    training texts of the Cayley-Encoder's (task, seed) cells and is tested on the same test texts
    (:mod:`._lora`). Rows: test accuracy per seed, mean over the LoRA tasks, of both. The rule
    is the abstract's verb ("outperforms LoRA fine-tuning"): the Cayley-Encoder better than LoRA
    at every size (paired one-sided t test), judged only when ``lora_baseline`` holds (a LoRA
    below the frozen last-layer probe it starts from is undertrained). Extras: trainable
    fractions of MiniLM's parameters, seconds per training step of one cell (wall and CPU, this
    run's machine load; the Cayley program runs every cell at the largest size with zero-weight
    padding, LoRA at its own size), compile times.
    """
    grid = _grid(ctx, sizes)
    lora = _lora(ctx, sizes)
    cells = [tuple(c) for c in grid["grid"]]
    values: dict[str, list[float]] = {}
    timing: dict[str, dict] = {}
    for n in sizes.lora_shots:
        gnn, low = [], []
        for name in sizes.lora_tasks:
            k = list(TASKS).index(name)
            res = grid["results"][GNN][str(n)]
            gnn.append([res["test"][cells.index((k, r))] for r in ctx.seed_list])
            low.append(lora["cells"][f"{name} @{n}"]["test"])
            timing[f"LoRA @{n} {name}"] = {
                k2: lora["cells"][f"{name} @{n}"][k2]
                for k2 in ("seconds_per_step", "cpu_seconds_per_step", "compile_cpu_s")
            }
        timing[f"{GNN} @{n}"] = {k2: res[k2] for k2 in ("seconds_per_step", "cpu_seconds_per_step")}
        values[f"{GNN} @{n}"] = np.mean(gnn, axis=0).tolist()
        values[f"{LORA} @{n}"] = np.mean(low, axis=0).tolist()
    lm = grid["lm_params"]
    return Outcome(
        values,
        {
            "tasks": list(sizes.lora_tasks),
            "shots": list(sizes.lora_shots),
            "lora": {
                "rank": LORA_RANK,
                "targets": "attention query and value",
                "adapted_layers": f"top {sizes.lora_adapted} of 6",
                "steps": sizes.lora_steps,
                "learning_rate": LEARNING_RATE,
            },
            "trainable_fraction": {
                GNN: grid["params"][GNN] / lm,
                LORA: lora["trainable"] / lm,
                f"{LORA} (adapters only)": lora["adapter"] / lm,
            },
            "timing": timing,
            # every size's rows, --full's 256 examples included (the table keeps 16 and 64)
            "mean_accuracy": {k: float(np.mean(v)) for k, v in values.items()},
            "final_train_loss": {c: v["final_loss"] for c, v in lora["cells"].items()},
            "all_training_finite": all(all(v["finite"]) for v in lora["cells"].values()),
            "load_average_1min": os.getloadavg()[0],
            "metric_detail": "test accuracy averaged over the tasks, one value per seed; the "
            "LoRA cells train on the Cayley cells' very training texts and share their test set",
        },
    )


FEATURES = 16
DIRECTION = np.ones(FEATURES, np.float32) / FEATURES**0.5


@partial(jax.jit, static_argnames=("sizes", "signal"))
def _synthetic(seeds, sizes: Sizes, signal: float):
    def one(seed):
        key = jax.random.key(seed)
        k_data, k_test, k_head = jax.random.split(key, 3)
        u = jnp.asarray(DIRECTION)
        x, y, _ = synthetic_layers(
            k_data, sizes.synthetic_train, layers=LAYERS, direction=u, signal=signal
        )
        xt, yt, _ = synthetic_layers(
            k_test, sizes.synthetic_test, layers=LAYERS, direction=u, signal=signal
        )
        gnn = LayerGNN(layer_graph(LAYERS), FEATURES, 2, key=k_head, hidden=16)
        probe = LayerProbe(LAYERS, FEATURES, 2, layer=-1, key=k_head)
        hp = {"steps": sizes.steps, "learning_rate": 1e-2, "weight_decay": 1e-2}
        return (
            accuracy(fit_head(gnn, x, y, **hp).head, xt, yt),
            accuracy(fit_head(probe, x, y, **hp).head, xt, yt),
        )

    # lax.map, not vmap, over seeds: on XLA:CPU the vmapped program compiled ~4x slower
    return jax.lax.map(one, seeds)


SIGNAL = 0.5
#: closed-form Bayes accuracies: Phi(s) from one layer, Phi(s sqrt(L)) from all of them
BAYES_ONE = normal_cdf(SIGNAL)
BAYES_ALL = normal_cdf(SIGNAL * LAYERS**0.5)


def bayes_limit(ctx: Context, sizes: Sizes) -> Outcome:
    """Synthetic layers with closed-form Bayes accuracies (see ``synthetic_layers``)."""
    seeds = np.array([1000 + s for s in ctx.seed_list], np.int32)
    program = _synthetic.lower(seeds, sizes, SIGNAL).compile(ctx.quick_compile)
    gnn, probe = (np.asarray(a) for a in program(seeds))
    return Outcome(
        {"Cayley-Encoder": gnn.tolist(), "last-layer probe": probe.tolist()},
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
