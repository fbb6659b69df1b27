"""Character-level language model at matched parameter counts."""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxpapers.core.experiment import Context
from jaxpapers.lrnn import (
    VOCAB,
    ModelConfig,
    SequenceModel,
    fit,
    init_models,
    load_corpus,
    masked_xent,
    seed_logits,
)
from jaxpapers.lrnn._models import parse_mixer
from jaxpapers.lrnn.experiments._tracking import SHORT_RUN

LM_MIXERS: tuple[str, ...] = ("lru", "hlru2", "bdlru4")


class LMSizes(NamedTuple):
    """Sizes of the character language models (every mixer alike but its state width)."""

    d_model: int
    d_state: int
    n_layers: int
    batch: int
    steps: int
    seq: int
    eval_windows: int
    lr: float
    max_chars: int | None


class LMResult(NamedTuple):
    """One mixer's language models: per-seed validation bits per character, parameter count
    and the state width that matched the LRU's parameter count."""

    bpc: list[float]
    n_params: int
    d_state: int


def _n_params(mixer: str, d_model: int, d_state: int, n_layers: int) -> int:
    abstract = nnx.eval_shape(
        lambda: SequenceModel(
            VOCAB,
            VOCAB,
            mixer=mixer,
            d_model=d_model,
            d_state=d_state,
            n_layers=n_layers,
            rngs=nnx.Rngs(0),
        )
    )
    return int(sum(math.prod(p.shape) for p in jax.tree.leaves(nnx.state(abstract, nnx.Param))))


def matched_state_width(mixer: str, d_model: int, n_layers: int, target: int) -> int:
    """The state width (a multiple of the block size) whose model is closest to ``target`` params.

    Every mixer's parameter count is affine in its state width (all its matrices have one side of
    that width), so two abstract models give the slope; the nearest admissible widths are checked.
    """
    kind, k = parse_mixer(mixer)
    step = k if kind == "bdlru" else 1
    n1, n2 = (
        _n_params(mixer, d_model, step, n_layers),
        _n_params(mixer, d_model, 2 * step, n_layers),
    )
    slope = (n2 - n1) / step
    guess = step + (target - n1) / slope
    below = max(step, int(guess // step) * step)
    candidates = {below, below + step}
    return min(candidates, key=lambda w: (abs(_n_params(mixer, d_model, w, n_layers) - target), w))


def _train_lm(ctx: Context, mixer: str, d_state: int, sizes: LMSizes) -> LMResult:
    corpus = load_corpus(max_chars=sizes.max_chars)
    seq, batch = sizes.seq, sizes.batch
    config = ModelConfig(VOCAB, VOCAB, mixer, sizes.d_model, d_state, sizes.n_layers)
    models = init_models(ctx.seed_list, config=config)
    train_codes = corpus.train.astype(np.int32)

    def batch_fn(step: int) -> dict[str, np.ndarray]:
        toks, labs = [], []
        for s in ctx.seed_list:
            starts = np.random.default_rng([s, step]).integers(
                0, train_codes.size - seq - 1, size=batch
            )
            win = np.stack([train_codes[i : i + seq + 1] for i in starts])
            toks.append(win[:, :-1])
            labs.append(win[:, 1:])
        tokens, labels = np.stack(toks), np.stack(labs)
        return {"tokens": tokens, "labels": labels, "mask": np.ones(tokens.shape, np.float32)}

    trained = fit(
        models,
        batch_fn,
        steps=sizes.steps,
        lr=sizes.lr,
        key=jax.random.key(1),
        # Short runs are resumed from the cached result; an end-only checkpoint is never read.
        checkpoint_dir=None if sizes.steps <= SHORT_RUN else ctx.checkpoint_dir(f"lm_{mixer}"),
        desc=f"P13 LM {mixer}",
    )
    valid = corpus.valid.astype(np.int32)
    n_win = min(sizes.eval_windows, (valid.size - 1) // seq)
    win = np.stack([valid[i * seq : i * seq + seq + 1] for i in range(n_win)])
    tokens = np.broadcast_to(win[:, :-1], (ctx.seeds, *win[:, :-1].shape))
    labels = np.broadcast_to(win[:, 1:], tokens.shape)
    logits = jax.jit(seed_logits(models.graphdef))(trained.params, jnp.asarray(tokens))
    nats = masked_xent(logits, jnp.asarray(labels), jnp.ones(tokens.shape, jnp.float32))
    return LMResult((np.asarray(nats) / math.log(2.0)).tolist(), models.n_params, d_state)


def lm_results(ctx: Context, sizes: LMSizes) -> dict[str, LMResult]:
    """Validation bits per character of every LM mixer (state widths matched to the LRU)."""
    d, layers = sizes.d_model, sizes.n_layers
    target = _n_params("lru", d, sizes.d_state, layers)
    widths = {
        m: sizes.d_state if m == "lru" else matched_state_width(m, d, layers, target)
        for m in LM_MIXERS
    }
    return {
        m: ctx.cached(f"lm_{m}", lambda m=m: _train_lm(ctx, m, widths[m], sizes)) for m in LM_MIXERS
    }
