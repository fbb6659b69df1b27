"""The labelled tasks of the LQZO experiments, all available offline from installed packages.

* Text: word/phrase sentiment from the VADER lexicon (``vaderSentiment`` package,
  ``vader_lexicon.txt``: 7,520 English words, emoticons and slang, each rated by 10 human
  annotators on [-4, 4]). Entries with ``|mean rating| >= 1`` are labelled positive / negative
  (5,830 entries, 44% positive). No sentence-level sentiment corpus (SST-2, IMDB) ships inside a
  PyPI package, and data sets may not be downloaded at run time; VADER's human labels are the
  closest real labelled text task available offline.
* Images: sklearn's bundled 8x8 digits; the cross-modality transfer task is the other half of
  the digits shifted by one pixel right and one down (zero fill): the ViT is pretrained on the
  centred digits and fine-tuned on the shifted ones (a covariate shift: patch contents and
  positions change, labels keep their meaning).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np


class TextTask(NamedTuple):
    """Texts and 0/1 labels (1 = positive)."""

    texts: list[str]
    labels: np.ndarray


def vader_sentiment(min_abs: float = 1.0) -> TextTask:
    """Binary sentiment of VADER lexicon entries with ``|mean rating| >= min_abs``."""
    try:
        import vaderSentiment
    except ImportError as err:
        raise FileNotFoundError("the VADER lexicon needs `pip install vaderSentiment`") from err
    path = Path(vaderSentiment.__file__).resolve().parent / "vader_lexicon.txt"
    texts, labels = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) < 2:
            continue
        v = float(parts[1])
        if abs(v) >= min_abs:
            texts.append(parts[0])
            labels.append(int(v > 0))
    return TextTask(texts, np.asarray(labels, np.int32))


class ImageSplit(NamedTuple):
    """``x [N, 8, 8, 1]`` float32 in [0, 1] and integer labels ``y [N]``."""

    x: np.ndarray
    y: np.ndarray


def digits_transfer(seed: int = 0) -> tuple[ImageSplit, ImageSplit]:
    """Source task (centred digits) and target task (the other digits, shifted by (1, 1) pixels)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[..., None]
    y = d.target.astype(np.int32)
    perm = np.random.default_rng(seed).permutation(len(y))
    half = len(y) // 2
    src, tgt = perm[:half], perm[half:]
    shifted = np.zeros_like(x[tgt])
    shifted[:, 1:, 1:] = x[tgt][:, :-1, :-1]
    return ImageSplit(x[src], y[src]), ImageSplit(shifted, y[tgt])


__all__ = ["ImageSplit", "TextTask", "digits_transfer", "vader_sentiment"]
