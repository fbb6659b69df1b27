"""Every head trained on a grid of (task, seed) cells per training-set size, one program each."""

from __future__ import annotations

import math
import time
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.cayley import (
    AttentionPooling,
    LayerGNN,
    LayerProbe,
    count_params,
    fit_head,
    layer_graph,
)

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


def _over_cells(fn, *cells):
    """``fn`` over the leading (cell) axis by ``lax.map``, not ``vmap``.

    On XLA:CPU a vmap over cells of the per-example-vmapped heads compiled ~4x slower (7.6 s vs
    2 s for the Cayley head, 6 cells of 256 examples) and ran no faster: the work is already
    batched over examples.
    """
    return jax.lax.map(lambda args: fn(*args), cells)


def _train_one(make, hp, key, x, y, w, task, x_val, y_val, x_test, y_test, *, occlusion=False):
    """Fit one head; validation and test accuracy (and the occlusion drops) from one forward pass.

    The evaluations share a single batched forward (validation, test and, with ``occlusion``,
    the ``L`` occluded copies of the test set of :func:`~jaxpapers.cayley.layer_attribution`:
    layer ``l`` set to its test-set mean): each separate forward of a head is another copy of
    its graph code for XLA to compile (about 1 s each on the Cayley head).
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


@partial(jax.jit, static_argnames=("make", "hp"))
def _graph_grid(make, hp, keys, x, y, w, task, x_val, y_val, x_test, y_test):
    def one(key, x, y, w, task):
        return _train_one(
            make, dict(hp), key, x, y, w, task, x_val, y_val, x_test, y_test, occlusion=True
        )

    return _over_cells(one, keys, x, y, w, task)


@partial(jax.jit, static_argnames=("make", "hp"))
def _probe_grid(make, hp, keys, x, y, w, task, x_val, y_val, x_test, y_test):
    """Probes on each layer and on the layer mean: inputs ``j = 0 .. L-1`` and ``L`` (mean)."""

    def with_mean(a):
        return jnp.concatenate([a, jnp.mean(a, axis=-2, keepdims=True)], axis=-2)

    xv, xt = with_mean(x_val), with_mean(x_test)

    def one(key, x, y, w, task):
        xs = with_mean(x)

        def per_input(j):
            pick = partial(jax.lax.dynamic_slice_in_dim, start_index=j, slice_size=1, axis=-2)
            val, test, _, finite = _train_one(
                make, dict(hp), key, pick(xs), y, w, task, pick(xv), y_val, pick(xt), y_test
            )
            return val, test, finite

        return jax.vmap(per_input)(jnp.arange(xs.shape[-2]))

    return _over_cells(one, keys, x, y, w, task)


def normal_cdf(x: float) -> float:
    """Standard normal CDF ``Phi(x) = erfc(-x / sqrt 2) / 2`` (the same float as
    ``scipy.stats.norm.cdf`` here, without importing scipy.stats: ~1 s of a quick run)."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _timed(fn, static, args, compiler_options=None):
    """``fn(*static, *args)`` compiled ahead of time (with XLA's ``compiler_options``), then run:
    its outputs, wall and CPU seconds of the run alone (the compile excluded)."""
    compiled = fn.lower(*static, *args).compile(compiler_options)
    t0, c0 = time.perf_counter(), time.process_time()
    out = jax.block_until_ready(compiled(*args))
    return out, time.perf_counter() - t0, time.process_time() - c0


#: Heads also trained at the smaller training-set sizes (the variants only at the largest).
FEW_SHOT_HEADS = ("Cayley-Encoder", "fully connected GNN", "attention aggregation")


def cell_order(task: int, seed: int, pool: int) -> np.ndarray:
    """The training pool's order for cell (task, seed): a cell of size ``n`` trains on the first
    ``n`` (so the sizes are nested)."""
    return np.random.default_rng([seed, task]).permutation(pool)


def run_grid(
    splits,
    *,
    shots,
    seeds,
    steps,
    learning_rate,
    weight_decay,
    hidden,
    compiler_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Train every head for every (task, seed) at each training-set size; report accuracies.

    Every size is one compiled program per head, mapped over the (size, task, seed) cells; the
    training examples of a (task, seed) cell (``grid``) are the first ``n`` of a seeded order of
    the task's training pool (:func:`cell_order`), the rest padded in with weight 0.

    Returns a JSON-able dict: ``grid`` (the (task, seed) cells), ``params`` per head, and per
    head and size (``results[head][str(shots)]``) ``val``/``test`` accuracies ``[cells]``
    (probes: ``[cells, L + 1]``, the last input being the layer mean), ``attr`` ``[cells, L]``
    occlusion attributions on the test set, and ``finite``. ``compiler_options``: XLA options
    of the heads' and probes' programs (quick mode: ``core.pytrees.QUICK_COMPILE``).
    """
    num_tasks, pool, layers, features = splits.x_train.shape
    if max(shots) > pool:
        raise ValueError(f"shots={shots} exceed the training pool of {pool} examples")
    grid = [(k, r) for k in range(num_tasks) for r in seeds]
    task_arr = np.array([k for k, _ in grid])
    keys = jnp.stack([jax.random.fold_in(jax.random.key(r), k) for k, r in grid])
    perms = np.stack([cell_order(k, r, pool) for k, r in grid])
    val_test = tuple(
        jnp.asarray(a) for a in (splits.x_val, splits.y_val, splits.x_test, splits.y_test)
    )
    hp = (("steps", steps), ("learning_rate", learning_rate), ("weight_decay", weight_decay))
    sizes = {"layers": layers, "features": features, "hidden": hidden}
    top = max(shots)
    # The sizes are nested (a cell of size n trains on the first n of its order), so every size is
    # the largest training set with the examples beyond n weighted 0: all sizes are cells of one
    # program per head (a compile costs more than the padded steps).
    x_top = splits.x_train[task_arr[:, None], perms[:, :top]]
    y_top = splits.y_train[task_arr[:, None], perms[:, :top]]

    def cells_for(ns):
        reps = len(ns)
        w = np.concatenate([np.broadcast_to(np.arange(top) < n, y_top.shape) for n in ns])
        tiled = (np.tile(a, (reps,) + (1,) * (a.ndim - 1)) for a in (x_top, y_top))
        return (
            jnp.tile(keys, reps),
            *map(jnp.asarray, tiled),
            jnp.asarray(w, jnp.float32),
            jnp.asarray(np.tile(task_arr, reps)),
            *val_test,
        )

    def per_size(out, ns):
        cells = len(grid)
        return {
            str(n): jax.tree.map(lambda a, s=s: a[s * cells : (s + 1) * cells], out)
            for s, n in enumerate(ns)
        }

    results: dict[str, dict[str, Any]] = {}
    params: dict[str, int] = {}
    for name in GRAPH_HEADS:
        ns = shots if name in FEW_SHOT_HEADS else (top,)
        make = partial(GRAPH_HEADS[name], **sizes)
        args = cells_for(ns)
        (val, test, attr, finite), wall, cpu = _timed(
            _graph_grid, (make, hp), args, compiler_options
        )
        per_step = {
            # per training step of one cell (padded to the largest size), evaluation included
            "seconds_per_step": wall / (len(args[0]) * steps),
            "cpu_seconds_per_step": cpu / (len(args[0]) * steps),
        }
        by_size = per_size({"val": val, "test": test, "attr": attr, "finite": finite}, ns)
        results[name] = {n: {**r, **per_step} for n, r in by_size.items()}
        params[name] = count_params(make(jax.random.key(0)))
    make = partial(_probe, **sizes)
    args = cells_for(shots)
    val, test, finite = _probe_grid.lower(make, hp, *args).compile(compiler_options)(*args)
    results["probes"] = per_size({"val": val, "test": test, "finite": finite}, shots)
    params["linear probe"] = count_params(make(jax.random.key(0)))
    out = {"grid": grid, "params": params, "results": results}
    return jax.tree.map(lambda a: np.asarray(a).tolist() if hasattr(a, "shape") else a, out)


def probe_rows(probes: dict[str, Any], layers: int) -> dict[str, np.ndarray]:
    """Last-layer probe, best single layer (argmax validation accuracy), mean over layers."""
    val, test = np.asarray(probes["val"]), np.asarray(probes["test"])
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
