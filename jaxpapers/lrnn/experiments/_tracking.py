"""State tracking: data batches, one compiled training per mixer (all tasks and seeds), accuracy.

Every mixer is trained on the size's tasks (``sizes.tasks``) and all seeds in one compiled step
(one model per task and seed, parameters stacked, ``jax.vmap``; see :func:`jaxpapers.lrnn.fit`);
embeddings and heads are padded to the largest of *all* :data:`~jaxpapers.lrnn.TASKS` so the
stacked models share shapes, and a replica's index (which fixes its initialisation and batches)
is its place among all tasks, so a task's models and numbers do not depend on which other tasks
are trained with it. The result is cached per mixer (``ctx.cached``) and shared by the
training-length and length-generalisation experiments.
Every mixer sees the same training batches; runs of up to ``SHORT_RUN`` steps build them once and
share them between the mixers, and skip the orbax checkpoint (the cached result is their resume
point; a checkpoint written only at the end cost ~1 CPU-s a mixer and was never read).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def _stack_batches(batches: list[Any]) -> dict[str, np.ndarray]:
    return {k: np.stack([getattr(b, k) for b in batches]) for k in ("tokens", "labels", "mask")}


def _replicas(seeds: list[int], tasks: tuple[str, ...] = TASKS) -> list[tuple[int, str, int]]:
    """``(index, task, seed)`` of every model; ``index`` counts over all :data:`TASKS`."""
    every = [(task, seed) for task in TASKS for seed in seeds]
    return [(i, task, seed) for i, (task, seed) in enumerate(every) if task in tasks]


def _train_batches(replicas, step: int, sizes) -> dict[str, np.ndarray]:
    out = []
    for i, task, seed in replicas:
        rng = np.random.default_rng([seed, i, step])
        lo = 3 if task == "mod5_brackets" else 1
        out.append(make_batch(task, rng, sizes.batch, sizes.train_len, min_length=lo))
    return _stack_batches(out)


def _eval_batches(replicas, sizes) -> dict[str, np.ndarray]:
    """Test batches of length ``test_len`` with two masks: seen lengths and longer ones.

    Per-position tasks: positions ``<= train_len`` (``mask_train``) and ``> train_len``
    (``mask``). Bracket task: expressions of odd length 3..test_len, split by their length.
    """
    out, train_masks = [], []
    for i, task, seed in replicas:
        rng = np.random.default_rng([10_000 + seed, i])
        lo = 3 if task == "mod5_brackets" else 1
        b = make_batch(task, rng, sizes.eval_batch, sizes.test_len, min_length=lo)
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


def _train_mixer(ctx: Context, work: Path, mixer: str, sizes, batch_fn) -> dict[str, Any]:
    replicas = _replicas(ctx.seed_list, sizes.tasks)
    specs = [task_spec(t) for t in TASKS]
    cfg = ModelConfig(
        max(s.vocab for s in specs),
        max(s.n_classes for s in specs),
        mixer,
        sizes.d_model,
        sizes.d_state,
        sizes.n_layers,
    )
    # Replica i is initialised from seed 1000 * i + seed: every task and seed its own model.
    models = init_models(cfg, [1000 * i + s for i, _, s in replicas])
    params = fit(
        models,
        batch_fn,
        steps=sizes.steps,
        lr=sizes.lr,
        key=jax.random.key(0),
        checkpoint_dir=None if sizes.steps <= SHORT_RUN else (work / "ckpt" / mixer).absolute(),
        desc=f"P13 {mixer}",
        compiler_options=ctx.quick_compile,
    )
    logits_fn = jax.jit(seed_logits(models.graphdef), compiler_options=ctx.quick_compile)
    test_acc, train_acc = _accuracy(logits_fn, params, _eval_batches(replicas, sizes))
    result: dict[str, Any] = {"n_params": models.n_params}
    for task in sizes.tasks:
        idx = [j for j, (_, t, _) in enumerate(replicas) if t == task]
        result[task] = {"test": test_acc[idx].tolist(), "train": train_acc[idx].tolist()}
    return result


def tracking_results(ctx: Context, sizes) -> dict[str, Any]:
    """Every mixer trained on ``sizes.tasks`` once; cached, shared by the tracking experiments."""
    work = ctx.workdir.parent / "_state_tracking"
    shared = Context(size=ctx.size, seeds=ctx.seeds, workdir=work)
    work.mkdir(parents=True, exist_ok=True)
    batch_fn = _shared_batches(_replicas(ctx.seed_list, sizes.tasks), sizes)
    return {
        m: shared.cached(
            f"{m}_{ctx.size}_{'-'.join(sizes.tasks)}_s{ctx.seeds}",
            lambda m=m: _train_mixer(ctx, work, m, sizes, batch_fn),
        )
        for m in sizes.mixers
    }
