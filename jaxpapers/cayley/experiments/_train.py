"""Every head trained on a grid of (task, seed) cells per training-set size; one program per group
of heads that differ only in traced data (``_programs``). Every head is tuned on validation
texts, never on test: the layer heads (Cayley-Encoder, fully connected GNN, one-node GNN) over
one shared grid of learning rates (traced per cell, so a grid is cells of one program), one
rate per head and seed, chosen on the mean validation accuracy of the seed's cells at every size
(:func:`pooled_choice`); the linear probes per cell over a grid of L2 strengths, each fitted
exactly (closed-form
ridge regression on one-hot labels, :func:`~jaxpapers.cayley.ridge_probe`;
:func:`_ridge_grid`). The linear probes fit on every layer; the one-node layer GNN (the
nonlinear single-layer baseline) trains on the layer they choose on validation and on the last
layer; the Cayley-Encoder of ``vs_lora`` trains at every learning rate of its grid in one program
(:func:`tune_heads`). Each training-set size from :data:`PAD_FLOOR` up is its own program (no
padding to the largest); the smaller sizes are padded to :data:`PAD_FLOOR` and share its
program."""

from __future__ import annotations

import math
import time
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxpapers.cayley import (
    AttentionPooling,
    LayerGNN,
    LayerGraph,
    LayerProbe,
    fit_head,
    layer_graph,
    ridge_probe,
)
from jaxpapers.core.pytrees import count_params

NUM_CLASSES = 4  # the largest task's; binary tasks leave two logits unused, so shapes are shared
#: the linear probes' grid of L2 strengths (ridge ``alpha``; the features are standardised, so a
#: layer's squared norm is ~384, and the grid spans weak to overwhelming penalties)
PROBE_ALPHAS = tuple(float(10.0**e) for e in range(-1, 6))


def _cayley(key, *, layers, features, hidden, virtual_features="learned", virtual=True):
    graph = layer_graph(layers, virtual=virtual)
    return LayerGNN(
        graph, features, NUM_CLASSES, key=key, hidden=hidden, virtual_features=virtual_features
    )


def _complete(key, *, layers, features, hidden):
    graph = layer_graph(layers, topology="complete")
    return LayerGNN(graph, features, NUM_CLASSES, key=key, hidden=hidden)


def _attention(key, *, layers, features, hidden):
    return AttentionPooling(layers, features, NUM_CLASSES, key=key, hidden=hidden)


#: Heads trained on all layers; names are the result rows.
GRAPH_HEADS = {
    "Cayley-Encoder": _cayley,
    "Cayley (zero virtual nodes)": partial(_cayley, virtual_features="zero"),
    "Cayley (truncated graph)": partial(_cayley, virtual=False),
    "fully connected GNN": _complete,
    "attention aggregation": _attention,
}


def _probe(key, *, layers, features, hidden):
    del layers, hidden
    return LayerProbe(1, features, NUM_CLASSES, layer=0, key=key)


#: One node, no edges: the graph of a one-node layer GNN.
ONE_NODE = LayerGraph(np.zeros(0, np.int32), np.zeros(0, np.int32), 1, 1)


def _single_node(key, *, layers, features, hidden):
    """The layer GNN on one layer: a one-node graph (no messages), so each of its rounds is a
    residual ``h + gelu(W_u h)``, a nonlinear head of the Cayley-Encoder's width, rounds,
    node embedding and read-out on a single layer's features."""
    del layers
    return LayerGNN(ONE_NODE, features, NUM_CLASSES, key=key, hidden=hidden)


def subgraph_mask(complete: LayerGraph, graph: LayerGraph) -> np.ndarray:
    """``graph``'s edges as a bool mask over ``complete``'s (in their order); both graphs have
    the same nodes, so a head on ``complete`` with the other edges left out (:class:`_Switched`)
    is the head on ``graph``, with the same initial weights for a key."""
    if graph.num_nodes != complete.num_nodes:
        raise ValueError(f"graph has {graph.num_nodes} nodes; expected {complete.num_nodes}")
    pairs = list(zip(complete.senders.tolist(), complete.receivers.tolist(), strict=True))
    kept = set(zip(graph.senders.tolist(), graph.receivers.tolist(), strict=True))
    mask = np.array([p in kept for p in pairs])
    # every edge of graph is a complete one (no self-loops), and in the same order
    assert [p for p, m in zip(pairs, mask, strict=True) if m] == sorted(kept)
    assert np.array_equal(np.array(sorted(kept)).T, np.stack([graph.senders, graph.receivers]))
    return mask


def _seven_node_edges(layers: int) -> tuple[np.ndarray, np.ndarray]:
    """The truncated Cayley graph's edges as a mask over the complete graph's (in their order):
    both graphs have the ``L`` layer nodes only and the same initial weights for a key, so the
    truncated head is the fully connected one with the other edges left out."""
    complete = layer_graph(layers, topology="complete")
    mask = subgraph_mask(complete, layer_graph(layers, virtual=False))
    return np.ones(len(mask), bool), mask


def _cayley_cells(key, *, variant, layers, features, hidden):
    graph = layer_graph(layers)
    return _Switched(graph, features, NUM_CLASSES, key=key, hidden=hidden, zero_virtual=variant)


def _seven_node_cells(key, *, variant, layers, features, hidden):
    graph = layer_graph(layers, topology="complete")
    return _Switched(graph, features, NUM_CLASSES, key=key, hidden=hidden, edge_mask=variant)


def _coalition_cells(key, *, variant, layers, features, hidden):
    graph = layer_graph(layers)
    return _Switched(graph, features, NUM_CLASSES, key=key, hidden=hidden, layer_mask=variant)


def _attention_cells(key, *, variant, layers, features, hidden):
    del variant
    return _attention(key, layers=layers, features=features, hidden=hidden)


def _programs(layers: int) -> dict[str, tuple[Any, dict[str, Any]]]:
    """The compiled programs of :data:`GRAPH_HEADS`: ``{program: (maker, {head: switch})}``, the
    heads of a program differing only in the traced switch of their cells (:class:`_Switched`):
    one compile per program instead of one per head."""
    complete, truncated = _seven_node_edges(layers)
    return {
        "cayley": (
            _cayley_cells,
            {"Cayley-Encoder": np.False_, "Cayley (zero virtual nodes)": np.True_},
        ),
        "seven_node": (
            _seven_node_cells,
            {"fully connected GNN": complete, "Cayley (truncated graph)": truncated},
        ),
        "attention": (_attention_cells, {"attention aggregation": None}),
    }


def _param_count(make) -> int:
    """:func:`~jaxpapers.core.pytrees.count_params` of ``make(key)`` from shapes alone (no
    compile)."""
    return count_params(nnx.eval_shape(lambda: make(jax.random.key(0))))


def _over_cells(fn, *cells):
    """``fn`` over the leading (cell) axis by ``lax.map``, not ``vmap``.

    On XLA:CPU a vmap over cells of the per-example-vmapped heads compiled several times slower
    and ran no faster: the work is already batched over examples.
    """
    return jax.lax.map(lambda args: fn(*args), cells)


def _train_one(make, hp, key, x, y, w, task, x_val, y_val, x_test, y_test, *, keep_params=False):
    """Fit one head; validation and test accuracy from one forward pass (each separate forward
    of a head is another copy of its graph code for XLA to compile), and with ``keep_params``
    the trained parameters (a pure dict; the layer contributions are measured on them)."""
    fit = fit_head(make(key), x, y, weights=w, **hp)
    xv, yv, xt, yt = x_val[task], y_val[task], x_test[task], y_test[task]
    n_val, n_test = xv.shape[0], xt.shape[0]
    logits = jax.vmap(fit.head)(jnp.concatenate([xv, xt]))
    correct = (jnp.argmax(logits, -1) == jnp.concatenate([yv, yt])).astype(jnp.float32)
    val, test = jnp.mean(correct[:n_val]), jnp.mean(correct[n_val : n_val + n_test])
    params = nnx.to_pure_dict(nnx.state(fit.head, nnx.Param)) if keep_params else None
    return val, test, params, fit.finite


class _Switched(LayerGNN):
    """A layer GNN with traced switches, so that heads which differ only in them are cells of one
    compiled program: virtual nodes starting from zero (``zero_virtual``, a bool scalar) and
    edges left out (``edge_mask``, bool ``[E]``; :func:`~jaxpapers.cayley.message_passing`).

    ``layer_mask`` (bool ``[L]``) zeroes the layers outside a coalition in every input (the
    features are standardised: zero is each layer's mean), so a head trained with it is the
    head retrained on the coalition's layers alone (:func:`retrain_coalitions`).

    The first two give the very numbers of the head they stand for (same initial weights for a
    key): the zeroed starting states and the left-out edges' messages are exact zeros, and their
    gradients too. The switches are plain ``nnx.Variable`` values, not ``nnx.Param``, so
    :func:`~jaxpapers.cayley.fit_head` does not train them.
    """

    def __init__(
        self,
        graph,
        in_features,
        num_classes,
        *,
        key,
        hidden,
        zero_virtual=None,
        edge_mask=None,
        layer_mask=None,
    ):
        super().__init__(graph, in_features, num_classes, key=key, hidden=hidden)
        self.zero_virtual = None if zero_virtual is None else nnx.Variable(zero_virtual)
        self.edge_mask = None if edge_mask is None else nnx.Variable(edge_mask)
        self.layer_mask = None if layer_mask is None else nnx.Variable(layer_mask)

    def embedding(self):
        embedding = super().embedding()
        if self.zero_virtual is None:
            return embedding
        virtual = jnp.arange(embedding.shape[0]) >= self.num_layers
        return jnp.where((virtual & self.zero_virtual[...])[:, None], 0.0, embedding)

    def __call__(self, x):
        if self.layer_mask is not None:  # the layers outside a coalition: zero (their mean)
            x = jnp.where(self.layer_mask[...][:, None], x, 0.0)
        mask = None if self.edge_mask is None else self.edge_mask[...]
        return super().__call__(x, edge_mask=mask)


def _cells(one, top, seed, task, row, n, variant, lr, x_top, y_top):
    """``one(key, x, y, w, task, variant, lr)`` over the cells: cell ``c`` trains on row
    ``row[c]`` of the (task, seed) grid's largest training sets, its first ``n[c]`` examples
    weighted 1 and the rest 0; its key is ``fold_in(key(seed[c]), task[c])``; ``lr`` is ``None``
    (the program's learning rate) or one learning rate per cell."""

    def cell(seed, task, row, n, variant, lr):
        key = jax.random.fold_in(jax.random.key(seed), task)
        w = (jnp.arange(top) < n).astype(x_top.dtype)
        return one(key, x_top[row], y_top[row], w, task, variant, lr)

    return _over_cells(cell, seed, task, row, n, variant, lr)


def _with_lr(hp, lr):
    """The static settings ``hp`` (a tuple of pairs) as a dict, with a cell's learning rate."""
    return dict(hp) if lr is None else {**dict(hp), "learning_rate": lr}


@partial(jax.jit, static_argnames=("make", "hp"))
def _graph_grid(make, hp, cells, x_top, y_top, x_val, y_val, x_test, y_test):
    def one(key, x, y, w, task, variant, lr):
        return _train_one(
            partial(make, variant=variant),
            _with_lr(hp, lr),
            key,
            x,
            y,
            w,
            task,
            x_val,
            y_val,
            x_test,
            y_test,
            keep_params=True,
        )

    return _cells(one, x_top.shape[1], *cells, x_top, y_top)


@partial(jax.jit, static_argnames=("make", "hp"))
def _single_grid(make, hp, cells, x_top, y_top, x_val, y_val, x_test, y_test):
    """The one-node GNN on the layers ``pick [cells, P]`` of each cell (the cells' traced
    switch), each layer alone: validation and test accuracy and finiteness ``[cells, P]``."""

    def one(key, x, y, w, task, pick, lr):
        def per_input(j):
            take = partial(jax.lax.dynamic_slice_in_dim, start_index=j, slice_size=1, axis=-2)
            val, test, _, finite = _train_one(
                make,
                _with_lr(hp, lr),
                key,
                take(x),
                y,
                w,
                task,
                take(x_val),
                y_val,
                take(x_test),
                y_test,
            )
            return val, test, finite

        return jax.vmap(per_input)(pick)

    return _cells(one, x_top.shape[1], *cells, x_top, y_top)


def _ridge_grid(shots, alphas, task, row, x_top, y_top, x_val, y_val, x_test, y_test):
    """Linear probes in closed form (:func:`~jaxpapers.cayley.ridge_probe`, NumPy) on each input
    (layers ``0 .. L-1`` and the layer mean, input ``L``) at every training-set size of ``shots``
    and every L2 strength of ``alphas``, per cell (``task [cells]``, ``row [cells]`` into the
    largest training sets): validation and test accuracy ``[cells, shots, inputs, alphas]`` and
    whether the fit is finite."""

    def add_mean(a):
        a = np.asarray(a, np.float64)
        return np.concatenate([a, a.mean(axis=-2, keepdims=True)], axis=-2)

    xv, xt = add_mean(x_val), add_mean(x_test)
    y_val, y_test, y_top, x_top = (np.asarray(a) for a in (y_val, y_test, y_top, x_top))
    inputs = xv.shape[-2]
    shape = (len(task), len(shots), inputs, len(alphas))
    val, test, finite = np.zeros(shape), np.zeros(shape), np.zeros(shape, bool)
    for c, (k, r) in enumerate(zip(np.asarray(task), np.asarray(row), strict=True)):
        x, y = add_mean(x_top[r]), y_top[r]
        for i, n in enumerate(shots):
            w = np.ones(n)  # the first n examples (the padded rest would drop out exactly)
            for j in range(inputs):
                weights, bias = ridge_probe(
                    x[:n, j], y[:n], w, alphas=alphas, num_classes=NUM_CLASSES
                )
                for out, xs, ys in ((val, xv[k], y_val[k]), (test, xt[k], y_test[k])):
                    logits = np.matmul(xs[:, j], weights) + bias[:, None]
                    out[c, i, j] = np.mean(np.argmax(logits, -1) == ys[None], axis=-1)
                finite[c, i, j] = np.all(np.isfinite(weights), axis=(1, 2))
    return val, test, finite


def _tuned_on_validation(val, test, axis: int):
    """Per entry, the setting along ``axis`` of highest validation accuracy (the first on a tie):
    its validation and test accuracy and its index."""
    best = np.argmax(val, axis=axis)
    pick = np.expand_dims(best, axis)
    return (
        np.take_along_axis(val, pick, axis).squeeze(axis),
        np.take_along_axis(test, pick, axis).squeeze(axis),
        best,
    )


def pooled_choice(vals, seed) -> np.ndarray:
    """One setting per seed: the index of highest validation accuracy averaged over the seed's
    cells, every array of ``vals`` (e.g. one per training-set size, each ``[cells, settings,
    ...]``: the trailing axes, e.g. a head's inputs, are averaged too) and its entries; the
    first on a tie. Returns ``[cells]``, each cell its seed's choice.

    Per cell, 128 validation texts left the choice noisy (both edges of a three-rate grid chosen
    in the 2026-12-05 run); the seed's two tasks and three sizes pool ~6x the texts."""
    seed = np.asarray(seed)
    score = sum(
        np.asarray(v, np.float64).reshape(*np.shape(v)[:2], -1).mean(-1) for v in vals
    )  # [cells, settings]
    best = np.zeros(len(seed), np.int64)
    for r in np.unique(seed):
        mine = seed == r
        best[mine] = int(np.argmax(score[mine].mean(0)))
    return best


def normal_cdf(x: float) -> float:
    """Standard normal CDF ``Phi(x) = erfc(-x / sqrt 2) / 2`` (the same float as
    ``scipy.stats.norm.cdf`` here, without importing scipy.stats, a slow import)."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _timed(fn, *args):
    """``fn(*args)`` and the wall and CPU seconds of the call (its compile, or loading it from
    the persistent compilation cache, included)."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = jax.block_until_ready(fn(*args))
    return out, time.perf_counter() - t0, time.process_time() - c0


#: Training-set sizes below this are padded to it (weight 0) in the layer heads' programs, so
#: that they share one compiled program (:func:`run_grid`).
PAD_FLOOR = 64

#: Heads also trained at the smaller training-set sizes (the variants only at the largest).
FEW_SHOT_HEADS = ("Cayley-Encoder", "fully connected GNN", "attention aggregation")


def cell_order(task: int, seed: int, pool: int) -> np.ndarray:
    """The training pool's order for cell (task, seed): a cell of size ``n`` trains on the first
    ``n`` (so the sizes are nested)."""
    return np.random.default_rng([seed, task]).permutation(pool)


class HeadRun(NamedTuple):
    """One head trained at one training-set size on every (task, seed) cell.

    Attributes:
      val, test: ``[cells]`` accuracies (probes and one-node heads: ``[cells, inputs]``, one per
        layer, the probes' last input being the layer mean), float64.
      finite: ``[cells]`` whether every training step was finite.
      params: the trained parameters of the layer heads (a pure dict, leading axis ``[cells]``;
        ``None`` for probes).
      seconds_per_step, cpu_seconds_per_step: wall and CPU seconds of the head's program per
        training step of one cell (the cells of a size below :data:`PAD_FLOOR` padded to it; the
        evaluation and the program's compile, or its load from the compilation cache, included).
      setting: the tuned setting of each entry of ``val`` (the learning rate of the layer heads,
        the L2 strength of the probes), chosen on validation accuracy; ``None`` when not tuned.
      layer: the one-node GNN's: ``[cells]`` the layer its first input is (the one the tuned
        linear probes choose on validation; its second input is the last layer).
    """

    val: np.ndarray
    test: np.ndarray
    finite: np.ndarray
    params: Any = None
    seconds_per_step: float = math.nan
    cpu_seconds_per_step: float = math.nan
    setting: Any = None
    layer: Any = None


class Grid(NamedTuple):
    """Every head trained on every (task, seed) cell at every training-set size.

    Attributes:
      cells: the ``(task, seed)`` cells, in the order of the arrays' leading axis.
      params: trainable scalars of each head (every head of :data:`GRAPH_HEADS`, the probe and
        the one-node layer GNN).
      heads: ``{head: {training-set size: HeadRun}}`` of the layer heads trained.
      probes: ``{training-set size: HeadRun}`` of the probes on each layer and the layer mean.
      single: ``{training-set size: HeadRun}`` of the one-node layer GNN on the probe-chosen
        layer and on the last layer.
      lm_params: parameters of the frozen LM (0 until the caller fills it in).
    """

    cells: tuple[tuple[int, int], ...]
    params: dict[str, int]
    heads: dict[str, dict[int, HeadRun]]
    probes: dict[int, HeadRun]
    single: dict[int, HeadRun]
    lm_params: int = 0


class _Cells(NamedTuple):
    """The (task, seed) cells of a grid and their largest training sets (device arrays)."""

    seed: np.ndarray
    task: np.ndarray
    data: tuple


def _cell_data(splits, cells, top: int) -> _Cells:
    """Each cell's training set: the first ``top`` of its seeded order (:func:`cell_order`), and
    the validation and test splits, as device arrays."""
    task_arr = np.array([k for k, _ in cells], np.int32)
    seed_arr = np.array([r for _, r in cells], np.int32)
    pool = splits.x_train.shape[1]
    perms = np.stack([cell_order(k, r, pool) for k, r in cells])
    x_top = splits.x_train[task_arr[:, None], perms[:, :top]]
    y_top = splits.y_train[task_arr[:, None], perms[:, :top]]
    data = (x_top, y_top, splits.x_val, splits.y_val, splits.x_test, splits.y_test)
    return _Cells(seed_arr, task_arr, tuple(jnp.asarray(a) for a in data))


def _cell_arrays(cells: _Cells, groups) -> tuple:
    """Per-cell arrays (host-side) of ``groups``, each ``(n, switch, lr)`` a copy of the cells
    (``lr``: one rate, ``[cells]`` rates, or ``None`` in every group: the program's rate)."""
    reps, g = len(groups), len(cells.seed)
    switches = [s for _, s, _ in groups]
    lrs = [lr for _, _, lr in groups]
    return (
        np.tile(cells.seed, reps),
        np.tile(cells.task, reps),
        np.tile(np.arange(g, dtype=np.int32), reps),
        np.repeat(np.array([n for n, _, _ in groups], np.int32), g),
        None if switches[0] is None else np.concatenate([_per_cell(sw, g) for sw in switches]),
        None
        if lrs[0] is None
        else np.concatenate([np.broadcast_to(np.float32(lr), (g,)) for lr in lrs]),
    )


def _per_cell(switch, g: int) -> np.ndarray:
    """A group's switch for each of its ``g`` cells: one switch for all, or one per cell
    (an array with a leading axis of ``g``, e.g. the layers a one-node GNN trains on)."""
    switch = np.asarray(switch)
    if switch.ndim and switch.shape[0] == g and switch.dtype.kind == "i":
        return switch
    return np.repeat(switch[None], g, axis=0)


def _split_groups(out, groups, g: int):
    """The program's outputs of each group of ``g`` cells, accuracies as float64."""

    def host(a):
        if isinstance(a, dict):  # trained parameters: kept in their own dtype
            return jax.tree.map(np.asarray, a)
        a = np.asarray(a)
        return a.astype(np.float64) if a.dtype.kind == "f" else a

    out = [None if a is None else host(a) for a in out]
    return [
        [None if a is None else jax.tree.map(lambda v, i=i: v[i * g : (i + 1) * g], a) for a in out]
        for i in range(len(groups))
    ]


def run_grid(
    splits,
    *,
    shots,
    seeds,
    steps,
    learning_rates,
    weight_decay,
    hidden,
    heads: tuple[str, ...] = tuple(GRAPH_HEADS),
    probe_alphas=PROBE_ALPHAS,
    few_shot_heads: tuple[str, ...] = FEW_SHOT_HEADS,
) -> Grid:
    """Train every head for every (task, seed) at each training-set size; report accuracies.

    Tuning on validation texts: the layer heads train at every rate of ``learning_rates`` and
    keep, per head and seed, the rate of highest validation accuracy averaged over the seed's
    cells (tasks), every size the head trains at and (the one-node GNN) both its inputs
    (:func:`pooled_choice`: per cell, 128 validation texts chose both edges of the grid); the
    linear probe of each input fits in closed form at every L2 strength of ``probe_alphas`` and
    keeps the best per cell; the one-node GNN trains (at every rate) on the layer the tuned
    linear probes choose on validation and on the last layer.

    Every size is one compiled program per head, mapped over the (task, seed) cells and the
    rates (and the heads that differ only in a traced switch, ``_programs``); the training
    examples of a (task, seed) cell are the first ``n`` of a seeded order of the task's training
    pool (:func:`cell_order`). ``heads``: the heads of :data:`GRAPH_HEADS` trained (``params``
    counts every one); those of ``few_shot_heads`` at every size, the others at the largest.
    """
    num_tasks, pool, layers, features = splits.x_train.shape
    if max(shots) > pool:
        raise ValueError(f"shots={shots} exceed the training pool of {pool} examples")
    if set(heads) - set(GRAPH_HEADS):
        raise ValueError(f"heads={heads}; expected some of {tuple(GRAPH_HEADS)}")
    grid = tuple((k, r) for k in range(num_tasks) for r in seeds)
    hp = (("steps", steps), ("weight_decay", weight_decay))
    lrs = tuple(float(lr) for lr in learning_rates)
    sizes = {"layers": layers, "features": features, "hidden": hidden}
    top = max(shots)
    cells = _cell_data(splits, grid, top)
    g = len(grid)

    def first_examples(n: int) -> _Cells:
        """The cells with their first ``max(n, PAD_FLOOR)`` training examples (the examples past
        ``n`` weighted 0): each size from ``PAD_FLOOR`` up is its own program, the smaller ones
        share the ``PAD_FLOOR`` one (a program compiles in ~5 CPU-s; padding a size to the
        largest cost more than the compile, the run time growing with the padded examples, but
        16 examples run in ~1.5 CPU-s, less than their own compile)."""
        x_top, y_top, *rest = cells.data
        width = min(max(n, PAD_FLOOR), top)
        return cells._replace(data=(x_top[:, :width], y_top[:, :width], *rest))

    # the linear probes: every input, size and L2 strength (closed form, NumPy)
    cs = tuple(float(c) for c in probe_alphas)
    v, t, f = (
        np.asarray(a)
        for a in _ridge_grid(
            tuple(shots),
            np.asarray(cs),
            np.asarray(cells.task),
            np.arange(g),
            *cells.data,
        )
    )  # [cells, shots, inputs, C]
    probes = {}
    for i, n in enumerate(shots):
        val, test, best = _tuned_on_validation(
            v[:, i].astype(np.float64), t[:, i].astype(np.float64), axis=-1
        )
        probes[n] = HeadRun(val, test, np.all(f[:, i], axis=(1, 2)), setting=np.array(cs)[best])

    results: dict[str, dict[int, HeadRun]] = {}
    raw: dict[str, dict[int, tuple]] = {}
    for make, switches in _programs(layers).values():
        make = partial(make, **sizes)  # one static argument: padded sizes reuse the program
        for n in shots:
            groups, names = [], []
            for name, switch in switches.items():
                if name not in heads or (n != top and name not in few_shot_heads):
                    continue
                groups += [(n, switch, lr) for lr in lrs]
                names.append(name)
            if not groups:
                continue
            mine_cells = first_examples(n)
            arrays = _cell_arrays(mine_cells, groups)
            out, wall, cpu = _timed(_graph_grid, make, hp, arrays, *mine_cells.data)
            per_step = len(arrays[0]) * steps
            parts = _split_groups(out, groups, g)
            for i, name in enumerate(names):
                raw.setdefault(name, {})[n] = (
                    parts[i * len(lrs) : (i + 1) * len(lrs)],  # [lrs] of (val, test, ...)
                    wall / per_step,
                    cpu / per_step,
                )
    # one rate per head and seed, on the mean validation accuracy of its cells at every size
    for name in (name for name in GRAPH_HEADS if name in raw):
        best = pooled_choice(
            [np.stack([m[0] for m in mine], 1) for mine, _, _ in raw[name].values()], cells.seed
        )
        for n, (mine, wall_step, cpu_step) in raw[name].items():
            pick = (np.arange(g), best)
            params = jax.tree.map(lambda *a, pick=pick: np.stack(a, 1)[pick], *[m[2] for m in mine])
            results.setdefault(name, {})[n] = HeadRun(
                np.stack([m[0] for m in mine], 1)[pick],
                np.stack([m[1] for m in mine], 1)[pick],
                np.stack([m[3] for m in mine], 1)[pick],
                params,
                wall_step,
                cpu_step,
                np.array(lrs)[best],
            )
    results = {name: results[name] for name in GRAPH_HEADS if name in heads}
    params = {name: _param_count(partial(GRAPH_HEADS[name], **sizes)) for name in GRAPH_HEADS}
    # the one-node GNN on the probe-chosen layer and on the last layer, at every rate of the
    # grid; per (cell, input) the best rate
    make = partial(_single_node, **sizes)
    runs = {}
    for n in shots:
        chosen = probe_rows(probes[n], layers)["best layer index"]
        picks = np.stack([chosen, np.full(g, layers - 1)], axis=1).astype(np.int32)
        groups = [(n, picks, lr) for lr in lrs]
        mine_cells = first_examples(n)
        arrays = _cell_arrays(mine_cells, groups)
        out = _single_grid(make, hp, arrays, *mine_cells.data)
        runs[n] = (_split_groups(out, groups, g), chosen)  # [lrs] of (val, test, finite) [g, 2]
    # one rate per seed (both inputs, every size), as for the other layer heads
    best = pooled_choice(
        [np.stack([m[0] for m in mine], 1) for mine, _ in runs.values()], cells.seed
    )
    single = {}
    for n, (mine, chosen) in runs.items():
        pick = (np.arange(g), best)
        single[n] = HeadRun(
            np.stack([m[0] for m in mine], 1)[pick],
            np.stack([m[1] for m in mine], 1)[pick],
            np.all(np.stack([m[2] for m in mine], 1), axis=(1, 2)),
            setting=np.array(lrs)[best],
            layer=chosen,
        )
    params["one-node GNN"] = _param_count(make)
    params["linear probe"] = _param_count(partial(_probe, **sizes))
    return Grid(grid, params, results, probes, single)


def tune_heads(
    splits,
    *,
    task: int,
    shots,
    seeds,
    learning_rates,
    steps,
    weight_decay,
    hidden,
) -> dict[int, HeadRun]:
    """The Cayley-Encoder of task ``task``'s cells at every size of ``shots`` and every learning
    rate of ``learning_rates`` (one compiled program, the learning rate traced per cell).

    Returns ``{n: HeadRun}`` with ``val``/``test`` of shape ``[seeds, learning rates]``.
    """
    _, _, layers, features = splits.x_train.shape
    grid = tuple((task, r) for r in seeds)
    cells = _cell_data(splits, grid, max(shots))
    hp = (("steps", steps), ("weight_decay", weight_decay))
    groups = [(n, np.False_, lr) for n in shots for lr in learning_rates]
    arrays = _cell_arrays(cells, groups)
    sizes = {"layers": layers, "features": features, "hidden": hidden}
    out, wall, cpu = _timed(_graph_grid, partial(_cayley_cells, **sizes), hp, arrays, *cells.data)
    parts = _split_groups(out, groups, len(grid))
    per_step = (wall / (len(arrays[0]) * steps), cpu / (len(arrays[0]) * steps))
    runs = {}
    for i, n in enumerate(shots):
        mine = parts[i * len(learning_rates) : (i + 1) * len(learning_rates)]
        val = np.stack([p[0] for p in mine], axis=1)
        test = np.stack([p[1] for p in mine], axis=1)
        finite = np.stack([p[3] for p in mine], axis=1)
        runs[n] = HeadRun(val, test, finite, None, *per_step)
    return runs


def coalition_masks(layers: int) -> np.ndarray:
    """``[2 + 2L, L]`` bool: the coalitions a retrained head is valued on: none, all, each layer
    alone (rows ``2 .. L+1``), all but each layer (rows ``L+2 .. 2L+1``)."""
    eye = np.eye(layers, dtype=bool)
    return np.concatenate([np.zeros((1, layers), bool), np.ones((1, layers), bool), eye, ~eye])


def retrain_coalitions(
    splits, *, cells, n: int, learning_rates, steps, weight_decay, hidden
) -> np.ndarray:
    """Test accuracy ``[cells, 2 + 2L]`` of the Cayley-Encoder retrained on each coalition of
    :func:`coalition_masks` (the other layers zeroed in training, validation and test inputs),
    per (task, seed) cell of ``cells`` on its first ``n`` training examples with its own
    learning rate ``learning_rates [cells]`` (the one tuned for the head on all layers) and the
    same key: one compiled program over (coalition, cell), the coalition a traced mask."""
    _, _, layers, features = splits.x_train.shape
    data = _cell_data(splits, cells, n)
    hp = (("steps", steps), ("weight_decay", weight_decay))
    lrs = np.asarray(learning_rates, np.float32)
    groups = [(n, mask, lrs) for mask in coalition_masks(layers)]
    arrays = _cell_arrays(data, groups)
    sizes = {"layers": layers, "features": features, "hidden": hidden}
    out = _graph_grid(partial(_coalition_cells, **sizes), hp, arrays, *data.data)
    parts = _split_groups(out, groups, len(cells))
    return np.stack([p[1] for p in parts], axis=1)


def probe_rows(probes: HeadRun, layers: int) -> dict[str, np.ndarray]:
    """Last-layer probe, best single layer (argmax validation accuracy), mean over layers."""
    val, test = np.asarray(probes.val), np.asarray(probes.test)
    best = np.argmax(val[:, :layers], axis=1)
    return {
        "last-layer probe": test[:, layers - 1],
        "best single layer": test[np.arange(len(best)), best],
        "mean over layers": test[:, layers],
        "best layer index": best,
    }


#: Rows of the one-node layer GNN (:func:`single_rows`).
SINGLE = "best single layer (1-node GNN)"
SINGLE_LAST = "last layer (1-node GNN)"


def single_rows(single: HeadRun) -> dict[str, np.ndarray]:
    """The one-node layer GNN on the layer the tuned linear probes choose per cell on validation
    (input 0 of ``single``) and on the last layer (input 1)."""
    test = np.asarray(single.test)
    return {
        SINGLE: test[:, 0],
        SINGLE_LAST: test[:, 1],
        "best layer index (1-node GNN)": np.asarray(single.layer),
    }


def synthetic_layers(key: jax.Array, n: int, *, layers: int, direction: jax.Array, signal: float):
    r"""Labels ``y`` in {0, 1} and per-layer features ``x_l = (2y - 1) s u + e_l``, i.i.d. noise.

    Every layer holds an independent noisy copy (standard normal noise) of the class signal along
    the unit vector ``u = direction``, so the Bayes accuracy is :math:`\Phi(s)` from one layer and
    :math:`\Phi(s \sqrt L)` from all of them (the sufficient statistic is
    :math:`u^\top \sum_l x_l`).
    """
    k_y, k_noise = jax.random.split(key)
    y = jax.random.bernoulli(k_y, 0.5, (n,)).astype(jnp.int32)
    noise = jax.random.normal(k_noise, (n, layers, direction.shape[0]))
    x = (2 * y - 1)[:, None, None] * signal * direction[None, None] + noise
    bayes = {
        "one layer": normal_cdf(signal),
        "all layers": normal_cdf(signal * layers**0.5),
    }
    return x, y, bayes
