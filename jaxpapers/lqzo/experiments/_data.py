"""Data of the P02 experiments: VADER word sentiment for MiniLM, shifted digits for the ViT.

* Text: :func:`jaxpapers.core.data.text.vader_sentiment` (human-rated VADER lexicon entries with
  ``|rating| >= 1``), tokenised to 8 WordPiece tokens (99.7% of entries fit).
* Images: sklearn's 8x8 digits (:func:`jaxpapers.core.data.digits.load_digits`); the ViT is
  pretrained on one half (centred) and fine-tuned on the other half shifted by one pixel right
  and one down (zero fill): a covariate shift, labels keep their meaning.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jaxpapers.core.data.digits import load_digits
from jaxpapers.core.data.text import vader_sentiment


class ImageSplit(NamedTuple):
    """``x [N, 8, 8, 1]`` float32 in [0, 1] and integer labels ``y [N]``."""

    x: np.ndarray
    y: np.ndarray


class TextData(NamedTuple):
    """Token ids ``[N, L]``, attention mask ``[N, L]`` and 0/1 labels ``[N]`` (train first)."""

    ids: np.ndarray
    mask: np.ndarray
    y: np.ndarray


def digits_transfer(seed: int = 0) -> tuple[ImageSplit, ImageSplit]:
    """Source task (centred digits) and target task (the other digits, shifted by (1, 1))."""
    d = load_digits()
    x, y = d.images[..., None], d.labels
    perm = np.random.default_rng(seed).permutation(len(y))
    half = len(y) // 2
    src, tgt = perm[:half], perm[half:]
    shifted = np.zeros_like(x[tgt])
    shifted[:, 1:, 1:] = x[tgt][:, :-1, :-1]
    return ImageSplit(x[src], y[src]), ImageSplit(shifted, y[tgt])


def vader_tokens(n: int, max_len: int = 8) -> TextData:
    """The first ``n`` entries of a fixed permutation (seed 0) of the VADER task, tokenised."""
    from jaxpapers.core.nn.bert import load_tokenizer, tokenize

    task = vader_sentiment()
    perm = np.random.default_rng(0).permutation(len(task.labels))[:n]
    ids, mask = tokenize(load_tokenizer(), [task.texts[i] for i in perm], max_len)
    return TextData(np.asarray(ids), np.asarray(mask), task.labels[perm])


__all__ = ["ImageSplit", "TextData", "digits_transfer", "vader_tokens"]
