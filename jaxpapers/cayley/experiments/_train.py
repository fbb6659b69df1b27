"""Every head trained on a grid of (task, seed) cells per training-set size; one program per group
of heads that differ only in traced data (``_programs``)."""

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
    LayerProbe,
    fit_head,
    layer_graph,
)
from jaxpapers.core.pytrees import count_params

NUM_CLASSES = 4  # the largest task's; binary tasks leave two logits unused, so shapes are shared


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


def _seven_node_edges(layers: int) -> tuple[np.ndarray, np.ndarray]:
    """The truncated Cayley graph's edges as a mask over the complete graph's (in their order):
    both graphs have the ``L`` layer nodes only and the same initial weights for a key, so the
    truncated head is the fully connected one with the other edges left out."""
    complete = layer_graph(layers, topology="complete")
    truncated = layer_graph(layers, virtual=False)
    pairs = list(zip(complete.senders.tolist(), complete.receivers.tolist(), strict=True))
    kept = set(zip(truncated.senders.tolist(), truncated.receivers.tolist(), strict=True))
    mask = np.array([p in kept for p in pairs])
    # every truncated edge is a complete one (no self-loops), and in the same order
    assert [p for p, m in zip(pairs, mask, strict=True) if m] == sorted(kept)
    assert np.array_equal(
        np.array(sorted(kept)).T, np.stack([truncated.senders, truncated.receivers])
    )
    return np.ones(len(pairs), bool), mask


def _cayley_cells(key, *, variant, layers, features, hidden):
    graph = layer_graph(layers)
    return _Switched(graph, features, NUM_CLASSES, key=key, hidden=hidden, zero_virtual=variant)


def _seven_node_cells(key, *, variant, layers, features, hidden):
    graph = layer_graph(layers, topology="complete")
    return _Switched(graph, features, NUM_CLASSES, key=key, hidden=hidden, edge_mask=variant)


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


def _train_one(make, hp, key, x, y, w, task, x_val, y_val, x_test, y_test, *, occlusion=False):
    """Fit one head; validation and test accuracy (and the occlusion drops) from one forward pass.

    The evaluations share a single batched forward (validation, test and, with ``occlusion``,
    the ``L`` occluded copies of the test set of :func:`~jaxpapers.cayley.layer_attribution`:
    layer ``l`` set to its test-set mean): each separate forward of a head is another copy of
    its graph code for XLA to compile.
    """
    fit = fit_head(make(key), x, y, weights=w, **hp)
    xv, yv, xt, yt = x_val[task], y_val[task], x_test[task], y_test[task]
    n_val, n_test, layers = xv.shape[0], xt.shape[0], xt.shape[1]
    inputs, labels = [xv, xt], [yv, yt]
    if occlusion:
        hide = jnp.eye(layers, dtype=bool)[:, None, :, None]
        occluded = jnp.where(hide, jnp.mean(xt, axis=0)[None, None], xt[None])
        inputs.append(occluded.reshape(layers * n_test, *xt.shape[1:]))
        labels.append(jnp.tile(yt, layers))
    logits = jax.vmap(fit.head)(jnp.concatenate(inputs))
    correct = (jnp.argmax(logits, -1) == jnp.concatenate(labels)).astype(jnp.float32)
    val, test = jnp.mean(correct[:n_val]), jnp.mean(correct[n_val : n_val + n_test])
    attr = None
    if occlusion:
        attr = test - jnp.mean(correct[n_val + n_test :].reshape(layers, n_test), axis=1)
    return val, test, attr, fit.finite


class _Switched(LayerGNN):
    """A layer GNN with traced switches, so that heads which differ only in them are cells of one
    compiled program: virtual nodes starting from zero (``zero_virtual``, a bool scalar) and
    edges left out (``edge_mask``, bool ``[E]``; :func:`~jaxpapers.cayley.message_passing`).

    Both give the very numbers of the head they stand for (same initial weights for a key): the
    zeroed starting states and the left-out edges' messages are exact zeros, and their gradients
    too. The switches are plain ``nnx.Variable`` values, not ``nnx.Param``, so
    :func:`~jaxpapers.cayley.fit_head` does not train them.
    """

    def __init__(
        self, graph, in_features, num_classes, *, key, hidden, zero_virtual=None, edge_mask=None
    ):
        super().__init__(graph, in_features, num_classes, key=key, hidden=hidden)
        self.zero_virtual = None if zero_virtual is None else nnx.Variable(zero_virtual)
        self.edge_mask = None if edge_mask is None else nnx.Variable(edge_mask)

    def embedding(self):
        embedding = super().embedding()
        if self.zero_virtual is None:
            return embedding
        virtual = jnp.arange(embedding.shape[0]) >= self.num_layers
        return jnp.where((virtual & self.zero_virtual[...])[:, None], 0.0, embedding)

    def __call__(self, x):
        mask = None if self.edge_mask is None else self.edge_mask[...]
        return super().__call__(x, edge_mask=mask)


def _cells(one, top, seed, task, row, n, variant, x_top, y_top):
    """``one(key, x, y, w, task, variant)`` over the cells: cell ``c`` trains on row ``row[c]`` of
    the (task, seed) grid's largest training sets, its first ``n[c]`` examples weighted 1 and the
    rest 0; its key is ``fold_in(key(seed[c]), task[c])``."""

    def cell(seed, task, row, n, variant):
        key = jax.random.fold_in(jax.random.key(seed), task)
        w = (jnp.arange(top) < n).astype(x_top.dtype)
        return one(key, x_top[row], y_top[row], w, task, variant)

    return _over_cells(cell, seed, task, row, n, variant)


@partial(jax.jit, static_argnames=("make", "hp"))
def _graph_grid(make, hp, cells, x_top, y_top, x_val, y_val, x_test, y_test):
    def one(key, x, y, w, task, variant):
        return _train_one(
            partial(make, variant=variant),
            dict(hp),
            key,
            x,
            y,
            w,
            task,
            x_val,
            y_val,
            x_test,
            y_test,
            occlusion=True,
        )

    return _cells(one, x_top.shape[1], *cells, x_top, y_top)


@partial(jax.jit, static_argnames=("make", "hp"))
def _probe_grid(make, hp, cells, x_top, y_top, x_val, y_val, x_test, y_test):
    """Probes on each layer and on the layer mean: inputs ``j = 0 .. L-1`` and ``L`` (mean)."""

    def with_mean(a):
        return jnp.concatenate([a, jnp.mean(a, axis=-2, keepdims=True)], axis=-2)

    xv, xt = with_mean(x_val), with_mean(x_test)

    def one(key, x, y, w, task, variant):
        del variant
        xs = with_mean(x)

        def per_input(j):
            pick = partial(jax.lax.dynamic_slice_in_dim, start_index=j, slice_size=1, axis=-2)
            val, test, _, finite = _train_one(
                make, dict(hp), key, pick(xs), y, w, task, pick(xv), y_val, pick(xt), y_test
            )
            return val, test, finite

        return jax.vmap(per_input)(jnp.arange(xs.shape[-2]))

    return _cells(one, x_top.shape[1], *cells, x_top, y_top)


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


#: Heads also trained at the smaller training-set sizes (the variants only at the largest).
FEW_SHOT_HEADS = ("Cayley-Encoder", "fully connected GNN", "attention aggregation")


def cell_order(task: int, seed: int, pool: int) -> np.ndarray:
    """The training pool's order for cell (task, seed): a cell of size ``n`` trains on the first
    ``n`` (so the sizes are nested)."""
    return np.random.default_rng([seed, task]).permutation(pool)


class HeadRun(NamedTuple):
    """One head trained at one training-set size on every (task, seed) cell.

    Attributes:
      val, test: ``[cells]`` accuracies (probes: ``[cells, L + 1]``, the last input being the
        layer mean), float64.
      finite: ``[cells]`` whether every training step was finite.
      attr: ``[cells, L]`` occlusion drops on the test set (layer heads; ``None`` for probes).
      seconds_per_step, cpu_seconds_per_step: wall and CPU seconds of the head's program per
        training step of one cell (every cell padded to the largest size; the evaluation and the
        program's compile, or its load from the compilation cache, included).
    """

    val: np.ndarray
    test: np.ndarray
    finite: np.ndarray
    attr: np.ndarray | None = None
    seconds_per_step: float = math.nan
    cpu_seconds_per_step: float = math.nan


class Grid(NamedTuple):
    """Every head trained on every (task, seed) cell at every training-set size.

    Attributes:
      cells: the ``(task, seed)`` cells, in the order of the arrays' leading axis.
      params: trainable scalars of each head (every head of :data:`GRAPH_HEADS` and the probe).
      heads: ``{head: {training-set size: HeadRun}}`` of the layer heads trained.
      probes: ``{training-set size: HeadRun}`` of the probes on each layer and the layer mean.
      lm_params: parameters of the frozen LM (0 until the caller fills it in).
    """

    cells: tuple[tuple[int, int], ...]
    params: dict[str, int]
    heads: dict[str, dict[int, HeadRun]]
    probes: dict[int, HeadRun]
    lm_params: int = 0


def run_grid(
    splits,
    *,
    shots,
    seeds,
    steps,
    learning_rate,
    weight_decay,
    hidden,
    heads: tuple[str, ...] = tuple(GRAPH_HEADS),
) -> Grid:
    """Train every head for every (task, seed) at each training-set size; report accuracies.

    Every size is one compiled program per head, mapped over the (size, task, seed) cells; the
    training examples of a (task, seed) cell are the first ``n`` of a seeded order of the task's
    training pool (:func:`cell_order`), the rest padded in with weight 0. ``heads``: the heads of
    :data:`GRAPH_HEADS` trained (``params`` counts every one).
    """
    num_tasks, pool, layers, features = splits.x_train.shape
    if max(shots) > pool:
        raise ValueError(f"shots={shots} exceed the training pool of {pool} examples")
    if set(heads) - set(GRAPH_HEADS):
        raise ValueError(f"heads={heads}; expected some of {tuple(GRAPH_HEADS)}")
    grid = tuple((k, r) for k in range(num_tasks) for r in seeds)
    task_arr = np.array([k for k, _ in grid], np.int32)
    seed_arr = np.array([r for _, r in grid], np.int32)
    perms = np.stack([cell_order(k, r, pool) for k, r in grid])
    hp = (("steps", steps), ("learning_rate", learning_rate), ("weight_decay", weight_decay))
    sizes = {"layers": layers, "features": features, "hidden": hidden}
    top = max(shots)
    # The sizes are nested (a cell of size n trains on the first n of its order), so every size is
    # the largest training set with the examples beyond n weighted 0: all sizes are cells of one
    # program per head (a compile costs more than the padded steps), and so are the heads that
    # differ only in a traced switch (``_programs``).
    x_top = splits.x_train[task_arr[:, None], perms[:, :top]]
    y_top = splits.y_train[task_arr[:, None], perms[:, :top]]
    data = (x_top, y_top, splits.x_val, splits.y_val, splits.x_test, splits.y_test)
    data = tuple(jnp.asarray(a) for a in data)

    def cells_for(groups):
        """Per-cell arrays (host-side) of ``groups``, each ``(n, switch)`` a copy of ``grid``."""
        reps, g = len(groups), len(grid)
        switches = [s for _, s in groups]
        return (
            np.tile(seed_arr, reps),
            np.tile(task_arr, reps),
            np.tile(np.arange(g, dtype=np.int32), reps),
            np.repeat(np.array([n for n, _ in groups], np.int32), g),
            None if switches[0] is None else np.repeat(np.stack(switches), g, axis=0),
        )

    def split_groups(out, groups):
        """The program's outputs of each group, accuracies as float64 (the rows' precision)."""
        out = [None if a is None else np.asarray(a) for a in out]
        out = [a.astype(np.float64) if a is not None and a.dtype.kind == "f" else a for a in out]
        g = len(grid)
        return [
            [None if a is None else a[i * g : (i + 1) * g] for a in out] for i in range(len(groups))
        ]

    results: dict[str, dict[int, HeadRun]] = {}
    for make, switches in _programs(layers).values():
        groups, names = [], []
        for name, switch in switches.items():
            if name not in heads:
                continue
            for n in shots if name in FEW_SHOT_HEADS else (top,):
                groups.append((n, switch))
                names.append((name, n))
        if not groups:
            continue
        cells = cells_for(groups)
        (val, test, attr, finite), wall, cpu = _timed(
            _graph_grid, partial(make, **sizes), hp, cells, *data
        )
        per_step = len(cells[0]) * steps
        for (name, n), (v, t, a, f) in zip(
            names, split_groups((val, test, attr, finite), groups), strict=True
        ):
            results.setdefault(name, {})[n] = HeadRun(v, t, f, a, wall / per_step, cpu / per_step)
    results = {name: results[name] for name in GRAPH_HEADS if name in heads}
    params = {name: _param_count(partial(GRAPH_HEADS[name], **sizes)) for name in GRAPH_HEADS}
    make = partial(_probe, **sizes)
    groups = [(n, None) for n in shots]
    val, test, finite = _probe_grid(make, hp, cells_for(groups), *data)
    probes = {
        n: HeadRun(v, t, f)
        for n, (v, t, f) in zip(shots, split_groups((val, test, finite), groups), strict=True)
    }
    params["linear probe"] = _param_count(make)
    return Grid(grid, params, results, probes)


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
