"""State tracking: data batches, one compiled training per mixer (all tasks and seeds), accuracy.

Every mixer is trained on the size's tasks (``sizes.tasks``) and all seeds in one compiled step
(one model per task and seed, parameters stacked, ``jax.vmap``; see :func:`jaxpapers.lrnn.fit`);
embeddings and heads are padded to the largest of *all* :data:`~jaxpapers.lrnn.TASKS` so the
stacked models share shapes, and a replica's index (which fixes its initialisation and batches)
is its place among all tasks, so a task's models and numbers do not depend on which other tasks
are trained with it. The result of each mixer is kept with ``ctx.cached`` (name: the mixer and
the tasks) and shared by the training-length and length-generalisation experiments.
Every mixer sees the same training batches; runs of up to ``SHORT_RUN`` steps build them once and
share them between the mixers, and skip the orbax checkpoint (the cached result is their resume
point).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.experiment import Context
from jaxpapers.lrnn import (
    TASKS,
    ModelConfig,
    fit,
    init_models,
    make_batch,
    masked_accuracy,
    seed_logits,
    task_spec,
)

MIXERS: tuple[str, ...] = ("lru", "hlru2", "hlru4", "bdlru2", "bdlru4", "bdlru8")
SHORT_RUN = 1000  # steps up to which batches are shared in memory and no checkpoint is written


class TrackingSizes(NamedTuple):
    """Sizes of the state-tracking trainings (every mixer, task and seed alike)."""

    d_model: int
    d_state: int
    n_layers: int
    batch: int
    steps: int
    train_len: int
    test_len: int
    eval_batch: int
    lr: float
    mixers: tuple[str, ...]
    tasks: tuple[str, ...]


class MixerResult(NamedTuple):
    """One mixer trained on every task of a run: its parameter count and, per task, the
    per-seed accuracy at the training lengths (``train``) and beyond them (``test``)."""

    n_params: int
    train: dict[str, list[float]]
    test: dict[str, list[float]]


def _stack_batches(batches: list[Any]) -> dict[str, np.ndarray]:
    return {k: np.stack([getattr(b, k) for b in batches]) for k in ("tokens", "labels", "mask")}


def _replicas(seeds: list[int], tasks: tuple[str, ...] = TASKS) -> list[tuple[int, str, int]]:
    """``(index, task, seed)`` of every model; ``index`` counts over all :data:`TASKS`."""
    every = [(task, seed) for task in TASKS for seed in seeds]
    return [(i, task, seed) for i, (task, seed) in enumerate(every) if task in tasks]


def _train_batches(replicas, step: int, sizes) -> dict[str, np.ndarray]:
    out = []
    for i, task, seed in replicas:
        lo = 3 if task == "mod5_brackets" else 1
        out.append(
            make_batch(task, sizes.batch, sizes.train_len, seed=[seed, i, step], min_length=lo)
        )
    return _stack_batches(out)


def _eval_batches(replicas, sizes) -> dict[str, np.ndarray]:
    """Test batches of length ``test_len`` with two masks: seen lengths and longer ones.

    Per-position tasks: positions ``<= train_len`` (``mask_train``) and ``> train_len``
    (``mask``). Bracket task: expressions of odd length 3..test_len, split by their length.
    """
    out, train_masks = [], []
    for i, task, seed in replicas:
        lo = 3 if task == "mod5_brackets" else 1
        b = make_batch(
            task, sizes.eval_batch, sizes.test_len, seed=[10_000 + seed, i], min_length=lo
        )
        if task == "mod5_brackets":
            bos = task_spec(task).vocab - 2
            n = sizes.test_len - np.argmax(b.tokens == bos, axis=1)
            short = (n <= sizes.train_len).astype(np.float32)[:, None]
            train_masks.append(b.mask * short)
            out.append(b._replace(mask=b.mask * (1.0 - short)))
        else:
            seen = (np.arange(b.mask.shape[1]) <= sizes.train_len).astype(np.float32)
            train_masks.append(b.mask * seen)
            out.append(b._replace(mask=b.mask * (1.0 - seen)))
    return {**_stack_batches(out), "mask_train": np.stack(train_masks)}


def _accuracy(logits_fn, params, batch: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Accuracy per replica on ``mask`` and on ``mask_train`` (NaN where a mask is empty)."""
    logits = logits_fn(params, jnp.asarray(batch["tokens"]))
    return (
        masked_accuracy(logits, batch["labels"], batch["mask"]),
        masked_accuracy(logits, batch["labels"], batch["mask_train"]),
    )


def _shared_batches(replicas, sizes) -> Callable[[int], dict[str, np.ndarray]]:
    """``step -> batch``; for short runs every step's batch is built once for all mixers."""
    if sizes.steps > SHORT_RUN:
        return lambda step: _train_batches(replicas, step, sizes)
    memo: dict[int, dict[str, np.ndarray]] = {}

    def batch_fn(step: int) -> dict[str, np.ndarray]:
        if step not in memo:
            memo[step] = _train_batches(replicas, step, sizes)
        return memo[step]

    return batch_fn


def _train_mixer(ctx: Context, mixer: str, sizes: TrackingSizes, batch_fn) -> MixerResult:
    replicas = _replicas(ctx.seed_list, sizes.tasks)
    specs = [task_spec(t) for t in TASKS]
    config = ModelConfig(
        max(s.vocab for s in specs),
        max(s.n_classes for s in specs),
        mixer,
        sizes.d_model,
        sizes.d_state,
        sizes.n_layers,
    )
    # Replica i is initialised from seed 1000 * i + seed: every task and seed its own model.
    models = init_models([1000 * i + s for i, _, s in replicas], config=config)
    long_run = sizes.steps > SHORT_RUN
    trained = fit(
        models,
        batch_fn,
        steps=sizes.steps,
        lr=sizes.lr,
        key=jax.random.key(0),
        checkpoint_dir=ctx.checkpoint_dir(f"tracking_{mixer}") if long_run else None,
        desc=f"P13 {mixer}",
    )
    logits_fn = jax.jit(seed_logits(models.graphdef))
    test_acc, train_acc = _accuracy(logits_fn, trained.params, _eval_batches(replicas, sizes))
    train, test = {}, {}
    for task in sizes.tasks:
        idx = [j for j, (_, t, _) in enumerate(replicas) if t == task]
        train[task], test[task] = train_acc[idx].tolist(), test_acc[idx].tolist()
    return MixerResult(models.n_params, train, test)


def tracking_results(ctx: Context, sizes: TrackingSizes) -> dict[str, MixerResult]:
    """Every mixer trained on ``sizes.tasks`` once; cached, shared by the tracking experiments."""
    batch_fn = _shared_batches(_replicas(ctx.seed_list, sizes.tasks), sizes)
    return {
        m: ctx.cached(
            f"tracking_{m}_{'-'.join(sizes.tasks)}",
            lambda m=m: _train_mixer(ctx, m, sizes, batch_fn),
        )
        for m in sizes.mixers
    }
