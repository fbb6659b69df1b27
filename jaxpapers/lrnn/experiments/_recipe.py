"""S_5 with a training recipe: more steps and a length curriculum, at ``--full`` only.

The tracking experiments train every mixer on all four tasks with one shared recipe (300 steps in
quick mode); BD-LRU b = 8 does not learn S_5 there even at the training lengths, although a
hand-set BD-LRU b = 8 tracks it exactly (``handset_bdlru8``). This experiment asks whether a
longer training with a *length curriculum* (the labelled prefix length grows from
``start_len`` to ``train_len`` over the first ``ramp`` of the steps, then stays at
``train_len``) finds it. Rows, all trained on S_5 alone with the same optimiser, learning rate,
steps, batch and width:

* ``lru``: the diagonal LRU with the curriculum (baseline);
* ``bdlru8_flat``: BD-LRU b = 8 on every prefix length ``1..train_len`` from the first step;
* ``bdlru8_curriculum``: BD-LRU b = 8 with the curriculum (the method the rule judges).

The curriculum masks the labels of positions beyond the current length (the models are causal,
so this is training on the shorter sequences) and keeps one batch shape: one compiled step for
both BD-LRU variants (stacked with the seeds, :func:`jaxpapers.lrnn.fit`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.experiment import Context
from jaxpapers.lrnn import (
    ModelConfig,
    fit,
    init_models,
    make_batch,
    masked_accuracy,
    seed_logits,
    task_spec,
)

TASK = "s5"


class RecipeSizes(NamedTuple):
    """Sizes of the S_5 recipe study (its own CPU-sized table, ``--full`` only)."""

    d_model: int
    d_state: int
    n_layers: int
    batch: int
    steps: int
    train_len: int
    test_len: int
    eval_batch: int
    lr: float
    start_len: int
    ramp: float


def curriculum_length(step: int, sizes: RecipeSizes) -> int:
    """Labelled prefix length at ``step``: linear from ``start_len`` to ``train_len`` over the
    first ``ramp * steps`` steps, then ``train_len``."""
    if not 0.0 < sizes.ramp <= 1.0 or not 1 <= sizes.start_len <= sizes.train_len:
        raise ValueError(
            f"ramp={sizes.ramp}, start_len={sizes.start_len}, train_len={sizes.train_len}; "
            "expected 0 < ramp <= 1 and 1 <= start_len <= train_len"
        )
    frac = min(1.0, step / max(1.0, sizes.ramp * sizes.steps))
    return round(sizes.start_len + frac * (sizes.train_len - sizes.start_len))


def _batches(variants: list[tuple[bool, int]], step: int, sizes: RecipeSizes) -> dict:
    out = {"tokens": [], "labels": [], "mask": []}
    for i, (curriculum, seed) in enumerate(variants):
        b = make_batch(TASK, sizes.batch, sizes.train_len, seed=[seed, i, step])
        mask = b.mask
        if curriculum:
            length = curriculum_length(step, sizes)
            mask = mask * (np.arange(mask.shape[1]) <= length).astype(np.float32)
        for k, v in (("tokens", b.tokens), ("labels", b.labels), ("mask", mask)):
            out[k].append(v)
    return {k: np.stack(v) for k, v in out.items()}


def _eval(variants, sizes: RecipeSizes) -> dict:
    toks, labs, masks, seen = [], [], [], []
    for _, seed in variants:
        b = make_batch(TASK, sizes.eval_batch, sizes.test_len, seed=[20_000 + seed])
        short = (np.arange(b.mask.shape[1]) <= sizes.train_len).astype(np.float32)
        toks.append(b.tokens)
        labs.append(b.labels)
        masks.append(b.mask * (1.0 - short))
        seen.append(b.mask * short)
    return {
        "tokens": np.stack(toks),
        "labels": np.stack(labs),
        "mask": np.stack(masks),
        "mask_train": np.stack(seen),
    }


class Accuracy(NamedTuple):
    """Per-seed accuracy at the training lengths (``train``) and beyond them (``test``)."""

    train: list[float]
    test: list[float]


class RecipeRun(NamedTuple):
    """One mixer of the recipe study: its parameter count and, per curriculum setting (``True``:
    with the length curriculum), the per-seed accuracies."""

    n_params: int
    by_curriculum: dict[bool, Accuracy]


def _train(ctx: Context, mixer: str, curricula: tuple[bool, ...], sizes: RecipeSizes) -> RecipeRun:
    spec = task_spec(TASK)
    config = ModelConfig(
        spec.vocab, spec.n_classes, mixer, sizes.d_model, sizes.d_state, sizes.n_layers
    )
    variants = [(c, s) for c in curricula for s in ctx.seed_list]
    models = init_models([500 * i + s for i, (_, s) in enumerate(variants)], config=config)
    trained = fit(
        models,
        lambda step: _batches(variants, step, sizes),
        steps=sizes.steps,
        lr=sizes.lr,
        key=jax.random.key(2),
        checkpoint_dir=ctx.checkpoint_dir(f"recipe_{mixer}"),
        desc=f"P13 S5 recipe {mixer}",
    )
    ev = _eval(variants, sizes)
    logits = jax.jit(seed_logits(models.graphdef))(trained.params, jnp.asarray(ev["tokens"]))
    longer = masked_accuracy(logits, ev["labels"], ev["mask"])
    train = masked_accuracy(logits, ev["labels"], ev["mask_train"])
    n = len(ctx.seed_list)
    by_curriculum = {}
    for j, c in enumerate(curricula):
        part = slice(j * n, (j + 1) * n)
        by_curriculum[c] = Accuracy(train[part].tolist(), longer[part].tolist())
    return RecipeRun(models.n_params, by_curriculum)


class RecipeResults(NamedTuple):
    """The rows of the recipe study and the parameter count of each mixer."""

    rows: dict[str, Accuracy]
    n_params: dict[str, int]


def recipe_results(ctx: Context, sizes: RecipeSizes) -> RecipeResults:
    """Accuracies (training lengths and longer) of every row, cached per mixer."""
    lru = ctx.cached("recipe_lru", lambda: _train(ctx, "lru", (True,), sizes))
    bd = ctx.cached("recipe_bdlru8", lambda: _train(ctx, "bdlru8", (False, True), sizes))
    rows = {
        "lru": lru.by_curriculum[True],
        "bdlru8_flat": bd.by_curriculum[False],
        "bdlru8_curriculum": bd.by_curriculum[True],
    }
    return RecipeResults(rows, {"lru": lru.n_params, "bdlru8": bd.n_params})
