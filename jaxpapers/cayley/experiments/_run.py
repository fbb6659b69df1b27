"""The measurements behind each P03 experiment, and their plots."""

from __future__ import annotations

import dataclasses
import os
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxpapers.cayley import LayerGNN, LayerProbe, fit_head, layer_graph, layer_shapley
from jaxpapers.cayley import shapley_values as _shapley_values
from jaxpapers.cayley.experiments._beds import (
    BEDS,
    CONTRIBUTION_LAYERS,
    CONTRIBUTION_SIGNAL,
    COPY_LAYERS,
    DEEP_BAYES,
    DEEP_HEADS,
    DEEP_HIDDEN,
    DEEP_LAYERS,
    DEEP_ROUNDS,
    DEEP_SPREAD,
    DIRECTION,
    FEATURES,
    SIGNAL_LAYER,
    adjacency,
    contribution_runs,
    deep_graphs,
    deep_pair,
    deep_runs,
    graph_distance,
)
from jaxpapers.cayley.experiments._data import MAX_TOKENS, TASKS, load_splits, task_texts
from jaxpapers.cayley.experiments._lora import lower_states, train_lora
from jaxpapers.cayley.experiments._train import (
    GRAPH_HEADS,
    NUM_CLASSES,
    SINGLE,
    SINGLE_LAST,
    Grid,
    cell_order,
    normal_cdf,
    probe_rows,
    retrain_coalitions,
    run_grid,
    single_rows,
    synthetic_layers,
    tune_heads,
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
#: AdamW settings of the synthetic beds' heads (``contributions_sanity``); the MiniLM beds' heads
#: tune their learning rate on ``Config.learning_rates`` with this weight decay
LEARNING_RATE, WEIGHT_DECAY = 5e-3, 1e-2
#: the Cayley-Encoder variants (zero virtual nodes, truncated graph): rows no verdict reads,
#: trained where ``Config.variants`` is set
VARIANTS = ("Cayley (zero virtual nodes)", "Cayley (truncated graph)")
#: ``layer_contributions``: a layer contributes meaningfully when its Shapley value is at least
#: half of an equal share of the head's gain (1 / (2 L)), and "multiple" layers means two
MEANINGFUL_SHARE = 1.0 / (2 * LAYERS)
CONTRIBUTING = 2


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """Everything that depends on the run size.

    Attributes:
      pool, val, test: examples per task in the training pool, validation and test splits.
      shots: training-set sizes of the heads (nested subsets of the pool).
      steps: full-batch AdamW steps of every head on the MiniLM beds, and of LoRA (the same
        step budget).
      synthetic_steps: full-batch AdamW steps of every head on the synthetic beds
        (``bayes_limit``, ``contributions_sanity``, ``deep_topology``).
      learning_rates: the shared tuning grid of the layer heads of ``probe_accuracy`` and
        ``few_shot`` (Cayley-Encoder, fully connected GNN, one-node GNN), one rate per head
        and seed, chosen on validation accuracy averaged over the seed's cells and sizes
        (``_train.pooled_choice``; the linear probes tune their L2 strength per cell on
        ``_train.PROBE_ALPHAS`` instead).
      variants: whether the Cayley-Encoder variants (zero virtual nodes, truncated graph; rows
        no verdict reads) are trained.
      hidden: node width of the layer GNNs and attention pooling.
      synthetic_train, synthetic_test: examples of ``bayes_limit``'s synthetic task.
      attention: whether the attention-aggregation baseline is trained (``probe_accuracy``'s
        row, which no verdict reads; left out of quick runs).
      sanity_train, sanity_test: examples of ``contributions_sanity``'s synthetic beds.
      deep_train, deep_val, deep_test: training, validation and test examples of
        ``deep_topology``'s bed.
      deep_learning_rates: the shared tuning grid of ``deep_topology``'s heads.
      few_shot_gnn: whether the fully connected GNN also trains at the smaller sizes
        (``few_shot``'s rows, which no verdict reads; left out of quick runs).
      retrain_coalitions: whether ``layer_contributions`` also values coalitions of layers by
        retraining the Cayley-Encoder on them (none, all, each layer alone, all but each layer:
        16 trainings per cell; rows no verdict reads).
      lora_tasks, lora_shots: ``vs_lora``'s tasks and training-set sizes.
      lora_learning_rates, lora_adapted: the tuning grid of LoRA (learning rate; number of top
        MiniLM layers adapted).
      lora_head_learning_rates: the tuning grid of ``vs_lora``'s Cayley-Encoder (learning
        rates; as many settings as LoRA's grid).
      lora_tuning_seeds: both grids are trained on the cells of the first ``lora_tuning_seeds``
        seeds; the setting of highest mean validation accuracy over them is used for every seed.
    """

    pool: int
    val: int
    test: int
    shots: tuple[int, ...]
    steps: int
    synthetic_steps: int
    learning_rates: tuple[float, ...]
    variants: bool
    hidden: int
    synthetic_train: int
    synthetic_test: int
    attention: bool
    sanity_train: int
    sanity_test: int
    deep_train: int
    deep_val: int
    deep_test: int
    deep_learning_rates: tuple[float, ...]
    retrain_coalitions: bool
    few_shot_gnn: bool
    lora_tasks: tuple[str, ...]
    lora_shots: tuple[int, ...]
    lora_learning_rates: tuple[float, ...]
    lora_adapted: tuple[int, ...]
    lora_head_learning_rates: tuple[float, ...]
    lora_tuning_seeds: int


def _grid(ctx: Context, config: Config) -> Grid:
    """Every head on every cell (one run cache step shared by the experiments)."""
    heads = tuple(
        h
        for h in GRAPH_HEADS
        if (h != ATTENTION or config.attention) and (h not in VARIANTS or config.variants)
    )

    def compute():
        splits = load_splits(ctx, train=config.pool, val=config.val, test=config.test)
        grid = run_grid(
            splits,
            shots=config.shots,
            seeds=ctx.seed_list,
            steps=config.steps,
            learning_rates=config.learning_rates,
            weight_decay=WEIGHT_DECAY,
            hidden=config.hidden,
            heads=heads,
            few_shot_heads=(GNN, ATTENTION)
            + (("fully connected GNN",) if config.few_shot_gnn else ()),
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
    single = single_rows(grid.single[shots])
    heads.update({k: v for k, v in single.items() if k in (SINGLE, SINGLE_LAST)})
    return {k: np.array([v[seed_of == r].mean() for r in seeds]) for k, v in heads.items()}


def probe_accuracy(ctx: Context, config: Config) -> Outcome:
    grid = _grid(ctx, config)
    top = max(config.shots)
    rows = _rows_at(grid, top, ctx.seed_list)
    finite = all(np.all(by_size[top].finite) for by_size in grid.heads.values())
    finite = finite and bool(np.all(grid.probes[top].finite))
    finite = finite and bool(np.all(grid.single[top].finite))
    best = probe_rows(grid.probes[top], LAYERS)
    best_single = single_rows(grid.single[top])
    return Outcome(
        {k: v.tolist() for k, v in rows.items()},
        {
            "tasks": list(TASKS),
            "shots": top,
            "all_training_finite": bool(finite),
            "best_layer_index_per_cell": best["best layer index"].tolist(),
            "tuned_settings_per_cell": {
                **{
                    f"{name} learning rate": by_size[top].setting.tolist()
                    for name, by_size in grid.heads.items()
                },
                "linear probe L2 strength (per input: layers, then the layer mean)": grid.probes[
                    top
                ].setting.tolist(),
                "one-node GNN learning rate (one per seed, shared by both its inputs)": (
                    grid.single[top].setting.tolist()
                ),
            },
            "best_layer_index_per_cell_1_node_gnn": best_single[
                "best layer index (1-node GNN)"
            ].tolist(),
            "cells": [list(c) for c in grid.cells],
            "metric_detail": "test accuracy averaged over the tasks, one value per seed; every "
            "head tuned on validation accuracy (layer heads: learning rate, one per head and "
            "seed on the mean over the seed's cells and sizes; linear probes: L2 strength per "
            "cell, closed-form ridge); the best single layer (linear probe or one-node GNN) is "
            "chosen per cell on validation accuracy",
        },
    )


#: ``few_shot``'s rows at each training-set size
FEW_SHOT_ROWS = (GNN, "fully connected GNN", SINGLE, "best single layer", "last-layer probe")


def few_shot(ctx: Context, config: Config) -> Outcome:
    grid = _grid(ctx, config)
    values, curves = {}, {}
    for s in config.shots:
        rows = _rows_at(grid, s, ctx.seed_list)
        for name in FEW_SHOT_ROWS:
            if name in rows:  # the fully connected GNN: the largest size only at quick
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


class Contributions(NamedTuple):
    """``layer_contributions``' measurements: ``coalitions [cells, 2^L]``, the accuracy of the
    trained Cayley-Encoder of each (task, seed) cell on its task's test set for every coalition of
    layers (the others at their test-set mean; :func:`~jaxpapers.cayley.coalition_accuracy`)."""

    coalitions: np.ndarray


def _contributions(ctx: Context, config: Config) -> Contributions:
    grid = _grid(ctx, config)

    def compute():
        splits = load_splits(ctx, train=config.pool, val=config.val, test=config.test)
        run = grid.heads[GNN][max(config.shots)]
        sizes = {"layers": LAYERS, "features": splits.x_test.shape[-1], "hidden": config.hidden}
        head = GRAPH_HEADS[GNN](jax.random.key(0), **sizes)
        values = []
        for i, (task, _) in enumerate(grid.cells):
            state = nnx.state(head, nnx.Param)
            nnx.replace_by_pure_dict(state, jax.tree.map(lambda a, i=i: a[i], run.params))
            nnx.update(head, state)
            res = layer_shapley(head, jnp.asarray(splits.x_test[task]), splits.y_test[task])
            values.append(np.asarray(res.coalitions))
        return Contributions(np.stack(values))

    return ctx.cached("contributions", compute)


def _retrained(ctx: Context, config: Config) -> np.ndarray:
    """Test accuracy ``[cells, 2 + 2L]`` of the Cayley-Encoder retrained on each coalition of
    :func:`~._train.coalition_masks`, largest size (:func:`~._train.retrain_coalitions`)."""
    grid = _grid(ctx, config)

    def compute():
        splits = load_splits(ctx, train=config.pool, val=config.val, test=config.test)
        top = max(config.shots)
        return retrain_coalitions(
            splits,
            cells=grid.cells,
            n=top,
            learning_rates=grid.heads[GNN][top].setting,
            steps=config.steps,
            weight_decay=WEIGHT_DECAY,
            hidden=config.hidden,
        )

    return ctx.cached("retrained_coalitions", compute)


def _occlusion(coalitions: np.ndarray) -> np.ndarray:
    """One-at-a-time occlusion drops ``[..., L]`` from coalition accuracies ``[..., 2^L]``."""
    full = coalitions.shape[-1] - 1
    drops = [full ^ (1 << layer) for layer in range(full.bit_length())]
    return coalitions[..., full, None] - coalitions[..., drops]


def layer_contributions(ctx: Context, config: Config) -> Outcome:
    """Shapley values of the layers for the trained Cayley-Encoder's test accuracy, largest size.

    Per cell, :func:`~jaxpapers.cayley.layer_shapley` on the task's test set: a coalition's value
    is the accuracy with the layers outside it at their test-set mean, the Shapley values split
    the head's gain over that all-mean input exactly. Rows, one value per seed (mean over tasks):
    each layer's Shapley value and the whole gain. A layer contributes meaningfully when its value
    is at least :data:`MEANINGFUL_SHARE` of the gain (one-sided 95% t test on the per-seed
    ratios); the claim holds when at least :data:`CONTRIBUTING` layers do and the layers
    complement each other: the Cayley-Encoder's test accuracy beats the best single layer's
    (linear probe and one-node GNN, both tuned; rows "<head> (test accuracy)"), since with
    redundant layers occluding one at a time leaves mean-occlusion Shapley values spread over
    layers that a head on one of them matches. Extras: the values per task, and the
    one-at-a-time occlusion drops (the former measure) from the same coalitions.
    """
    grid = _grid(ctx, config)
    coalitions = np.asarray(_contributions(ctx, config).coalitions, np.float64)
    phi = np.asarray(_shapley_values(jnp.asarray(coalitions)), np.float64)
    gain = coalitions[:, -1] - coalitions[:, 0]
    tasks = np.array([k for k, _ in grid.cells])
    seeds = np.array([r for _, r in grid.cells])

    def per_seed(v):
        return [float(v[seeds == r].mean()) for r in ctx.seed_list]

    rows = {f"layer {layer}": per_seed(phi[:, layer]) for layer in range(LAYERS)}
    rows["all layers"] = per_seed(gain)
    # complementarity: the trained Cayley-Encoder against the best single layer (both tuned)
    accuracy = _rows_at(grid, max(config.shots), ctx.seed_list)
    for name in (GNN, SINGLE, "best single layer"):
        rows[f"{name} (test accuracy)"] = accuracy[name].tolist()
    occlusion = _occlusion(coalitions)
    retrained = {}
    if config.retrain_coalitions:
        v = _retrained(ctx, config)  # [cells, 2 + 2L]: none, all, alone..., without...
        for layer in range(LAYERS):
            rows[f"layer {layer} alone (retrained)"] = per_seed(v[:, 2 + layer] - v[:, 0])
            rows[f"without layer {layer} (retrained)"] = per_seed(
                v[:, 1] - v[:, 2 + LAYERS + layer]
            )
        retrained = {
            "retrained_accuracy": {n: v[tasks == k].mean(0).tolist() for k, n in enumerate(TASKS)},
            "retrained_coalitions": "none, all, each layer alone (0..6), all but each layer "
            "(0..6); the Cayley-Encoder retrained on them at its tuned learning rate",
        }
    return Outcome(
        rows,
        {
            **retrained,
            "mean_shapley": {n: phi[tasks == k].mean(0).tolist() for k, n in enumerate(TASKS)},
            "mean_occlusion": {
                n: occlusion[tasks == k].mean(0).tolist() for k, n in enumerate(TASKS)
            },
            "accuracy_all_layers": {
                n: coalitions[tasks == k, -1].mean().item() for k, n in enumerate(TASKS)
            },
            "accuracy_no_layer": {
                n: coalitions[tasks == k, 0].mean().item() for k, n in enumerate(TASKS)
            },
            "meaningful_share": MEANINGFUL_SHARE,
            "metric_detail": "Shapley value of each layer for the Cayley-Encoder's test accuracy "
            "(coalition value: accuracy with the other layers at their test-set mean), mean over "
            "tasks, one value per seed; 'all layers' is their sum, the gain over the all-mean "
            "input",
        },
    )


def contributions_sanity(ctx: Context, config: Config) -> Outcome:
    """``layer_contributions``' measure on synthetic beds whose answer is known (:mod:`._beds`).

    The Cayley-Encoder of the MiniLM beds (same width, rounds and training) is trained per seed
    on two beds of seven layers: one carrier of the class signal (the measure must rank it
    first: row "carrier's lead", its Shapley value minus the largest other layer's; and the pure
    noise layers must not get a meaningful share on average: row "mean noise-layer share"), and
    two layers holding the same copy (each must get a meaningful share of the gain, the
    criterion of ``layer_contributions``). The bed must separate the measure from one-at-a-time
    occlusion: row "copies' occlusion share (two copies)", the mean of the two copies' occlusion
    drops over the gain, must stay below a meaningful share (else occlusion would pass too and
    the bed would not tell the measures apart). Extras: the mean Shapley values and the
    occlusion drops of each layer on both beds.
    """
    make = partial(
        GRAPH_HEADS[GNN], layers=CONTRIBUTION_LAYERS, features=FEATURES, hidden=config.hidden
    )
    hp = (
        ("steps", config.synthetic_steps),
        ("learning_rate", LEARNING_RATE),
        ("weight_decay", WEIGHT_DECAY),
    )
    seeds = np.array([3000 + s for s in ctx.seed_list], np.int32)
    values, finite = contribution_runs(
        seeds, make=make, train=config.sanity_train, test=config.sanity_test, hp=hp
    )
    values = np.asarray(values, np.float64)
    phi = np.asarray(_shapley_values(jnp.asarray(values)), np.float64)  # [seeds, beds, L]
    one, two = phi[:, 0], phi[:, 1]
    others = np.delete(one, SIGNAL_LAYER, axis=1)
    gain_one = values[:, 0, -1] - values[:, 0, 0]
    a, b = COPY_LAYERS
    rows = {
        "carrier's lead (one carrier)": (one[:, SIGNAL_LAYER] - others.max(axis=1)).tolist(),
        "mean noise-layer share (one carrier)": (others.mean(axis=1) / gain_one).tolist(),
        f"copy in layer {a}": two[:, a].tolist(),
        f"copy in layer {b}": two[:, b].tolist(),
        "gain (two copies)": (values[:, 1, -1] - values[:, 1, 0]).tolist(),
    }
    occlusion = _occlusion(values)
    gain_two = values[:, 1, -1] - values[:, 1, 0]
    rows["copies' occlusion share (two copies)"] = (
        occlusion[:, 1, list(COPY_LAYERS)].mean(axis=1) / gain_two
    ).tolist()
    return Outcome(
        rows,
        {
            "beds": {name: list(c) for name, c in BEDS.items()},
            "mean_shapley": {n: phi[:, i].mean(0).tolist() for i, n in enumerate(BEDS)},
            "mean_occlusion": {n: occlusion[:, i].mean(0).tolist() for i, n in enumerate(BEDS)},
            "accuracy_all_layers": {n: values[:, i, -1].mean() for i, n in enumerate(BEDS)},
            "bayes_accuracy": normal_cdf(CONTRIBUTION_SIGNAL),
            "all_training_finite": bool(np.all(finite)),
        },
    )


def deep_topology(ctx: Context, config: Config) -> Outcome:
    """The layer GNN on 24 synthetic layers whose label needs two distant layers to interact
    (:mod:`._beds`): Cayley graph (96 edges), complete graph (552), a ring of the Cayley graph's
    degree (96) and no edges, the same head otherwise (nodes, parameters, initial weights,
    steps, data per seed); each head's learning rate tuned per seed on validation over one grid
    (``config.deep_learning_rates``); test accuracy against the closed-form Bayes accuracy.

    Why the bed can show the topology either way: the label ``1[c_a c_b > 0]`` carries no
    information in either layer alone (``E[y | x_a] = 1/2``), so a head whose read-out logit is a
    sum of functions of single layers (no edges; or a graph where no node's state after
    :data:`DEEP_ROUNDS` rounds depends on both ``x_a`` and ``x_b``, i.e. hop distance
    ``> 2 DEEP_ROUNDS``) has the constant logit as its cross-entropy optimum (the loss is convex
    in the additive logits and its gradient at 0 is ``-E[y' | x_l] / 2 = 0`` for ``y' = 2y - 1``):
    chance. The ring's hop distance of the pair is 6 > 4 (the pair sits at the ring's diameter),
    the Cayley graph's at most its diameter 4, the complete graph's 1, so the ring and the
    no-edge head are at chance by construction, the Cayley and complete heads can reach the Bayes
    accuracy (whether they do at this data size is measured). Cayley against complete is open
    either way: the complete graph reaches the pair in one hop, but its mean aggregation averages
    the 22 noise layers into every message (a shared message map cannot single out two of 23
    in-neighbours), the Cayley graph's over four neighbours.

    Rules (``__init__``): Cayley-Encoder > ring and > no-edge (low diameter at equal edges), and
    Cayley-Encoder > fully connected GNN (the abstract's "further improves": strictly better),
    each a paired one-sided test, and below the Bayes accuracy + 0.01.

    Out of reach at quick size (512 examples, width 8, 150 steps): more training examples
    (learning XOR-like labels from 24 layers is data hungry), more rounds and width, and deeper
    stacks (48+ layers, ``SL(2, Z_4)``); the full size has 2048 examples and a wider grid."""
    graphs = deep_graphs()
    lrs = tuple(config.deep_learning_rates)
    seeds = [2000 + r for r in ctx.seed_list]
    cells = [(r, h, lr) for r in seeds for h in DEEP_HEADS for lr in lrs]
    val, test, finite = deep_runs(
        np.array([r for r, _, _ in cells], np.int32),
        np.array([deep_pair(r) for r, _, _ in cells], np.int32),
        np.stack([adjacency(graphs[h]) for _, h, _ in cells]),
        np.array([lr for _, _, lr in cells], np.float32),
        train=config.deep_train,
        val=config.deep_val,
        test=config.deep_test,
        hp=(("steps", config.synthetic_steps), ("weight_decay", WEIGHT_DECAY)),
        hidden=DEEP_HIDDEN,
    )
    shape = (len(seeds), len(DEEP_HEADS), len(lrs))
    val = np.asarray(val, np.float64).reshape(shape)
    test = np.asarray(test, np.float64).reshape(shape)
    best = np.argmax(val, axis=-1)  # per (seed, head): the rate of highest validation accuracy
    chosen = np.take_along_axis(test, best[..., None], -1)[..., 0]
    rows = {h: chosen[:, j].tolist() for j, h in enumerate(DEEP_HEADS)}
    pairs = [deep_pair(r) for r in seeds]
    return Outcome(
        rows,
        {
            "layers": DEEP_LAYERS,
            "rounds": DEEP_ROUNDS,
            "hidden": DEEP_HIDDEN,
            "spread": DEEP_SPREAD,
            "bayes_accuracy": DEEP_BAYES,
            "train": config.deep_train,
            "interacting_layers_per_seed": [list(p) for p in pairs],
            "hop_distance_per_seed": {
                h: [graph_distance(graphs[h], a, b) for a, b in pairs] for h in DEEP_HEADS
            },
            "directed_edges": {h: int(graphs[h].sum()) for h in DEEP_HEADS},
            "learning_rates": list(lrs),
            "chosen_learning_rate": {
                h: [lrs[i] for i in best[:, j]] for j, h in enumerate(DEEP_HEADS)
            },
            "validation_accuracy_per_rate": {
                h: val[:, j].mean(0).tolist() for j, h in enumerate(DEEP_HEADS)
            },
            "all_training_finite": bool(np.all(finite)),
        },
    )


class LoRACell(NamedTuple):
    """A tuned method on one (task, training-set size) over the seeds: ``[seeds]`` test accuracy
    (float64), final training loss and finiteness of the runs at the chosen setting; seconds per
    training step of one cell (wall, CPU); the chosen setting and the mean validation accuracy
    of every setting of the grid over the tuning seeds."""

    test: np.ndarray
    final_loss: np.ndarray
    finite: np.ndarray
    seconds_per_step: float
    cpu_seconds_per_step: float
    chosen: dict
    validation: dict


class LoRARuns(NamedTuple):
    """``vs_lora``'s LoRA: ``cells["<task> @<n>"]``, and the trainable and adapter scalars of
    each number of adapted layers."""

    cells: dict[str, LoRACell]
    trainable: dict[int, int]
    adapter: dict[int, int]


def _choose(validation: dict) -> Any:
    """The setting of highest mean validation accuracy (the first of the grid on a tie)."""
    return max(validation, key=lambda k: validation[k])


def _lora_cells(
    model, h, mask, labels, *, config: Config, task: int, n: int, adapted, seeds, rates
):
    """LoRA with ``adapted`` layers on the cells ``(seed, rate)`` of ``seeds`` x ``rates``: each
    trains on the first ``n`` texts of its seed's order of task ``task``'s pool (states ``h``
    entering the lowest adapted layer, for every text of the task in split order)."""
    pool = slice(0, config.pool)
    val = slice(config.pool, config.pool + config.val)
    test = slice(config.pool + config.val, None)
    idx = np.stack([cell_order(task, r, config.pool)[:n] for r in seeds for _ in rates])
    keys = [jax.random.fold_in(jax.random.key(10_000 + r), task) for r in seeds]
    return train_lora(
        model,
        [key for key in keys for _ in rates],
        h[pool][idx],
        mask[pool][idx],
        labels[pool][idx],
        h[test],
        mask[test],
        labels[test],
        rank=LORA_RANK,
        adapted=adapted,
        num_classes=NUM_CLASSES,
        steps=config.steps,
        learning_rate=np.array([lr for _ in seeds for lr in rates]),
        weight_decay=WEIGHT_DECAY,
        validation=(h[val], mask[val], labels[val]),
    )


def _lora_runs(ctx: Context, config: Config) -> LoRARuns:
    """LoRA adapters + head per (task, seed, size) cell, on the cells' training texts, tuned.

    For each task and size, every setting of the grid (learning rate x adapted layers) trains on
    the cells of the tuning seeds; the setting of highest mean validation accuracy trains on the
    other seeds' cells (the tuning seeds keep their run of it).
    """
    tokenizer, model = load_tokenizer(), load_minilm()
    tuning = ctx.seed_list[: config.lora_tuning_seeds]
    others = ctx.seed_list[config.lora_tuning_seeds :]
    lrs = config.lora_learning_rates
    cells: dict[str, LoRACell] = {}
    trainable: dict[int, int] = {}
    adapter: dict[int, int] = {}
    for name in config.lora_tasks:
        k = list(TASKS).index(name)
        texts, labels = task_texts(
            name, tokenizer, train=config.pool, val=config.val, test=config.test
        )
        ids, mask = tokenize(tokenizer, texts, MAX_TOKENS)
        # frozen states entering the lowest adapted layer, for every text
        states = {
            a: lower_states(model, ids, mask, len(model.layers) - a) for a in config.lora_adapted
        }
        for n in config.lora_shots:
            run = partial(_lora_cells, model, mask=mask, labels=labels, config=config, task=k, n=n)
            grid = {
                a: run(states[a], adapted=a, seeds=tuning, rates=lrs) for a in config.lora_adapted
            }
            for a, g in grid.items():
                trainable[a], adapter[a] = g.trainable, g.adapter
            validation = {
                (a, lr): float(np.mean(grid[a].val[j :: len(lrs)]))
                for a in config.lora_adapted
                for j, lr in enumerate(lrs)
            }
            best_a, best_lr = _choose(validation)
            tuned = grid[best_a]
            sel = np.arange(len(tuning)) * len(lrs) + lrs.index(best_lr)
            test_acc = list(tuned.test[sel])
            losses = list(tuned.losses[sel, -1])
            finite = list(tuned.finite[sel])
            timing = (tuned.seconds_per_step, tuned.cpu_seconds_per_step)
            if others:
                rest = run(states[best_a], adapted=best_a, seeds=others, rates=(best_lr,))
                test_acc += list(rest.test)
                losses += list(rest.losses[:, -1])
                finite += list(rest.finite)
                timing = (rest.seconds_per_step, rest.cpu_seconds_per_step)
            cells[f"{name} @{n}"] = LoRACell(
                np.array(test_acc, np.float64),
                np.array(losses, np.float64),
                np.array(finite),
                *timing,
                {"adapted_layers": best_a, "learning_rate": best_lr},
                {f"{a} layers, lr {lr:g}": v for (a, lr), v in validation.items()},
            )
    return LoRARuns(cells, trainable, adapter)


def _lora(ctx: Context, config: Config) -> LoRARuns:
    return ctx.cached("lora", partial(_lora_runs, ctx, config))


class TunedHeads(NamedTuple):
    """``vs_lora``'s Cayley-Encoder, its learning rate tuned like LoRA's:
    ``cells["<task> @<n>"]`` (a :class:`LoRACell` of the head's runs at the chosen rate; no
    training losses: ``final_loss`` is NaN)."""

    cells: dict[str, LoRACell]


def _tuned_cayley(ctx: Context, config: Config) -> TunedHeads:
    """The Cayley-Encoder of each LoRA task and size at every learning rate of the grid (every
    seed; :func:`._train.tune_heads`); the rate of highest mean validation accuracy over the
    tuning seeds is chosen, as for LoRA."""

    def compute():
        splits = load_splits(ctx, train=config.pool, val=config.val, test=config.test)
        cells = {}
        lrs = config.lora_head_learning_rates
        tuning = len(ctx.seed_list[: config.lora_tuning_seeds])
        for name in config.lora_tasks:
            runs = tune_heads(
                splits,
                task=list(TASKS).index(name),
                shots=config.lora_shots,
                seeds=ctx.seed_list,
                learning_rates=lrs,
                steps=config.steps,
                weight_decay=WEIGHT_DECAY,
                hidden=config.hidden,
            )
            for n, run in runs.items():
                validation = {lr: float(np.mean(run.val[:tuning, j])) for j, lr in enumerate(lrs)}
                lr = _choose(validation)
                j = lrs.index(lr)
                cells[f"{name} @{n}"] = LoRACell(
                    run.test[:, j],
                    np.full(len(ctx.seed_list), np.nan),
                    run.finite[:, j],
                    run.seconds_per_step,
                    run.cpu_seconds_per_step,
                    {"learning_rate": lr},
                    {f"lr {rate:g}": v for rate, v in validation.items()},
                )
        return TunedHeads(cells)

    return ctx.cached("cayley_tuned", compute)


def _cell_index(grid: Grid) -> dict[tuple[int, int], int]:
    return {tuple(int(v) for v in c): i for i, c in enumerate(grid.cells)}


def lora_baseline(ctx: Context, config: Config) -> Outcome:
    """LoRA against the tuned last-layer linear probe of the frozen MiniLM, on the LoRA cells.

    LoRA's head reads the mean-pooled last layer (standardised with the cell's training texts)
    and its adapters start at zero (``B = 0``), so at its start LoRA is a linear probe of the
    frozen last layer with a random head; the probe it is compared with is the last-layer probe
    of ``probe_accuracy``, its L2 strength tuned on validation and fitted exactly, the best a
    linear head on the frozen last layer does. A LoRA not better than it (paired one-sided t
    test at every size) has not learned anything from adapting MiniLM, and ``vs_lora`` then says
    nothing about LoRA fine-tuning (it requires this experiment). Rows: test accuracy per seed,
    mean over the LoRA tasks, at each LoRA training-set size (LoRA tuned as in ``vs_lora``).
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
            "steps": config.steps,
            "chosen": {c: v.chosen for c, v in lora.cells.items()},
            "final_train_loss": {c: v.final_loss.tolist() for c, v in lora.cells.items()},
        },
    )


def vs_lora(ctx: Context, config: Config) -> Outcome:
    """Cayley-Encoder (frozen MiniLM) against LoRA rank 8 fine-tuning of MiniLM, same cells, both
    tuned on the same validation texts with the same step budget.

    For each task of ``config.lora_tasks`` and size of ``config.lora_shots``: LoRA (adapters on
    query and value of the top layers, plus a linear head) with its learning rate and number of
    adapted layers chosen from ``config.lora_learning_rates`` x ``config.lora_adapted``, and the
    Cayley-Encoder with its learning rate chosen from ``config.lora_head_learning_rates`` (as many
    settings; both grids bracket the optimum of their method), each by the mean validation
    accuracy of the tuning seeds' cells (:func:`_lora_runs`, :func:`_tuned_cayley`); both train
    ``config.steps`` full-batch AdamW steps on the training texts of the (task, seed) cells and
    are tested on the same test texts. Rows: test accuracy per seed, mean over the LoRA tasks.
    The rule is the abstract's verb ("outperforms LoRA fine-tuning"): the Cayley-Encoder better
    than LoRA (paired one-sided t test), judged only when ``lora_baseline`` holds. Extras: the
    chosen settings and every setting's validation accuracy, trainable fractions of MiniLM's
    parameters, seconds per training step of one cell (wall and CPU, this run's machine load;
    each program's compile, or its load from the compilation cache, included).
    """
    grid = _grid(ctx, config)
    lora = _lora(ctx, config)
    heads = _tuned_cayley(ctx, config)
    values: dict[str, list[float]] = {}
    timing: dict[str, dict] = {}
    for n in config.lora_shots:
        gnn, low = [], []
        for name in config.lora_tasks:
            for rows, runs, label in ((gnn, heads, GNN), (low, lora, "LoRA")):
                cell = runs.cells[f"{name} @{n}"]
                rows.append(cell.test)
                timing[f"{label} @{n} {name}"] = {
                    "seconds_per_step": cell.seconds_per_step,
                    "cpu_seconds_per_step": cell.cpu_seconds_per_step,
                }
        values[f"{GNN} @{n}"] = np.mean(gnn, axis=0).tolist()
        values[f"{LORA} @{n}"] = np.mean(low, axis=0).tolist()
    lm = grid.lm_params
    return Outcome(
        values,
        {
            "tasks": list(config.lora_tasks),
            "shots": list(config.lora_shots),
            "steps": config.steps,
            "lora": {
                "rank": LORA_RANK,
                "targets": "attention query and value",
                "learning_rates": list(config.lora_learning_rates),
                "adapted_layers": list(config.lora_adapted),
                "tuning_seeds": ctx.seed_list[: config.lora_tuning_seeds],
            },
            "cayley_learning_rates": list(config.lora_head_learning_rates),
            "chosen": {
                "LoRA": {c: v.chosen for c, v in lora.cells.items()},
                GNN: {c: v.chosen for c, v in heads.cells.items()},
            },
            "validation_accuracy": {
                "LoRA": {c: v.validation for c, v in lora.cells.items()},
                GNN: {c: v.validation for c, v in heads.cells.items()},
            },
            "trainable_fraction": {
                GNN: grid.params[GNN] / lm,
                **{f"{LORA} ({a} layers)": t / lm for a, t in lora.trainable.items()},
                **{f"{LORA} ({a} layers, adapters only)": t / lm for a, t in lora.adapter.items()},
            },
            "timing": timing,
            "mean_accuracy": {k: float(np.mean(v)) for k, v in values.items()},
            "final_train_loss": {c: v.final_loss.tolist() for c, v in lora.cells.items()},
            "all_training_finite": all(bool(np.all(v.finite)) for v in lora.cells.values())
            and all(bool(np.all(v.finite)) for v in heads.cells.values()),
            "load_average_1min": os.getloadavg()[0],
            "metric_detail": "test accuracy averaged over the tasks, one value per seed; the "
            "LoRA cells train on the Cayley cells' very training texts and share their test set",
        },
    )


#: width of the synthetic beds' layer GNNs (``bayes_limit``, ``deep_topology``)
SYNTHETIC_HIDDEN = 16


@partial(jax.jit, static_argnames=("train", "test", "steps", "signal"))
def _synthetic(seeds, *, train: int, test: int, steps: int, signal: float):
    def one(seed):
        key = jax.random.key(seed)
        k_data, k_test, k_head = jax.random.split(key, 3)
        u = jnp.asarray(DIRECTION)
        x, y, _ = synthetic_layers(k_data, train, layers=LAYERS, direction=u, signal=signal)
        xt, yt, _ = synthetic_layers(k_test, test, layers=LAYERS, direction=u, signal=signal)
        gnn = LayerGNN(layer_graph(LAYERS), FEATURES, 2, key=k_head, hidden=SYNTHETIC_HIDDEN)
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
        steps=config.synthetic_steps,
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
        # a head trained at the largest sizes only has the last points
        ax.plot(outcome.extras["shots"][-len(curve) :], curve, marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("labelled training examples")
    ax.set_ylabel("test accuracy (mean over tasks)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def plot_contributions(outcome: Outcome, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), sharey=True)
    for ax, key, title in (
        (axes[0], "mean_shapley", "Shapley value"),
        (axes[1], "mean_occlusion", "occlusion drop (one layer at a time)"),
    ):
        per_task = outcome.extras[key]
        width = 0.8 / len(per_task)
        for i, (name, attr) in enumerate(per_task.items()):
            ax.bar(np.arange(len(attr)) + i * width, attr, width, label=name)
        ax.axhline(0.0, color="k", lw=0.5)
        ax.set_xlabel("layer (0 = embeddings)")
        ax.set_title(title, fontsize=9)
    axes[0].set_ylabel("test accuracy")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
