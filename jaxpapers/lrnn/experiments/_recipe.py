"""S_5 with a training recipe (issue 11): more steps and a length curriculum, at ``--full`` only.

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

from pathlib import Path
from typing import Any, NamedTuple

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
        b = make_batch(TASK, np.random.default_rng([seed, i, step]), sizes.batch, sizes.train_len)
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
        b = make_batch(TASK, np.random.default_rng([20_000 + seed]), sizes.eval_batch,
                       sizes.test_len)  # fmt: skip
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


def _train(ctx: Context, work: Path, mixer: str, curricula: tuple[bool, ...], sizes) -> dict:
    spec = task_spec(TASK)
    cfg = ModelConfig(spec.vocab, spec.n_classes, mixer, sizes.d_model, sizes.d_state,
                      sizes.n_layers)  # fmt: skip
    variants = [(c, s) for c in curricula for s in ctx.seed_list]
    models = init_models(cfg, [500 * i + s for i, (_, s) in enumerate(variants)])
    params = fit(
        models,
        lambda step: _batches(variants, step, sizes),
        steps=sizes.steps,
        lr=sizes.lr,
        key=jax.random.key(2),
        checkpoint_dir=(work / "ckpt" / mixer).absolute(),
        desc=f"P13 S5 recipe {mixer}",
    )
    ev = _eval(variants, sizes)
    logits = jax.jit(seed_logits(models.graphdef))(params, jnp.asarray(ev["tokens"]))
    longer = masked_accuracy(logits, ev["labels"], ev["mask"])
    train = masked_accuracy(logits, ev["labels"], ev["mask_train"])
    n = len(ctx.seed_list)
    out: dict[str, Any] = {"n_params": models.n_params}
    for j, c in enumerate(curricula):
        part = slice(j * n, (j + 1) * n)
        out["curriculum" if c else "flat"] = {
            "train": train[part].tolist(),
            "test": longer[part].tolist(),
        }
    return out


def recipe_results(ctx: Context, sizes: RecipeSizes) -> dict[str, Any]:
    """Accuracies (training lengths and longer) of every row, cached per mixer."""
    work = ctx.workdir
    work.mkdir(parents=True, exist_ok=True)
    lru = ctx.cached(f"lru_s{ctx.seeds}", lambda: _train(ctx, work, "lru", (True,), sizes))
    bd = ctx.cached(
        f"bdlru8_s{ctx.seeds}", lambda: _train(ctx, work, "bdlru8", (False, True), sizes)
    )
    return {
        "lru": lru["curriculum"],
        "bdlru8_flat": bd["flat"],
        "bdlru8_curriculum": bd["curriculum"],
        "n_params": {"lru": lru["n_params"], "bdlru8": bd["n_params"]},
    }
