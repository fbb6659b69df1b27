"""Few-shot splits of frozen all-MiniLM-L6-v2 layer features on offline lexicon tasks."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jaxpapers.cayley import encode_layers
from jaxpapers.core.data.text import TextTask, afinn_valence, vader_sentiment
from jaxpapers.core.experiment import Context
from jaxpapers.core.nn.bert import load_minilm, load_tokenizer, tokenize
from jaxpapers.core.pytrees import count_params

#: Task loaders; both are human-rated word/phrase lexicons shipped by PyPI packages.
TASKS = {"vader_sentiment": vader_sentiment, "afinn_valence": afinn_valence}
MAX_TOKENS = 6


class Splits(NamedTuple):
    """Per-task pools: ``train [K, P, L, D]`` (first ``shots`` rows used), val, test, labels."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    lm_params: int


def _short_texts(task: TextTask, tokenizer, limit: int) -> tuple[list[str], np.ndarray]:
    """Entries that fit in ``limit`` word pieces with [CLS] and [SEP] (so none is truncated)."""
    tokenizer.no_truncation()
    tokenizer.no_padding()
    lengths = np.array([len(e.ids) for e in tokenizer.encode_batch(task.texts)])
    keep = np.flatnonzero(lengths <= limit)
    return [task.texts[i] for i in keep], task.labels[keep]


def task_texts(name: str, tokenizer, *, train: int, val: int, test: int, seed: int = 0):
    """The texts and labels of task ``name`` in split order: train pool, validation, test.

    The same seeded permutation :func:`load_splits` encodes, so row ``i`` of its arrays is text
    ``i`` here (``vs_lora`` fine-tunes on these very texts).
    """
    texts, labels = _short_texts(TASKS[name](), tokenizer, MAX_TOKENS)
    order = np.random.default_rng(seed).permutation(len(texts))[: train + val + test]
    return [texts[i] for i in order], labels[order]


def load_splits(ctx: Context, *, train: int, val: int, test: int, seed: int = 0) -> Splits:
    """Seeded random pools per task, encoded once by the frozen MiniLM and standardised.

    Each task's encoding is a step of the paper's run cache (``ctx.cached``, keyed on the run's
    configuration, which fixes ``train``, ``val`` and ``test``; ``seed`` is in the step's name).
    Features are centred per layer and dimension and scaled per layer over the whole pool (no
    labels involved), so that every layer enters the heads on the same scale.
    """
    tokenizer = load_tokenizer()
    model = load_minilm()
    lm_params = count_params(model)
    parts = []
    for name in TASKS:
        texts, y = task_texts(name, tokenizer, train=train, val=val, test=test, seed=seed)

        def encode(texts=texts):
            ids, mask = tokenize(tokenizer, texts, MAX_TOKENS)
            return encode_layers(model, ids, mask, batch_size=512)

        x = ctx.cached(f"minilm_{name}_{train}_{val}_{test}_{seed}", encode)
        x = (x - x.mean(0)) / x.std(0).mean(-1, keepdims=True)
        cut = (train, train + val)
        parts.append((x[: cut[0]], y[: cut[0]], x[cut[0] : cut[1]], y[cut[0] : cut[1]]))
        parts[-1] += (x[cut[1] :], y[cut[1] :])
    arrays = [np.stack(p) for p in zip(*parts, strict=True)]
    return Splits(*arrays, lm_params=lm_params)
