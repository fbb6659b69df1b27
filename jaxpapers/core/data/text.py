"""Labelled text tasks available offline from installed packages.

* :func:`vader_sentiment`: word/phrase sentiment from the VADER lexicon (``vaderSentiment``
  package, ``vader_lexicon.txt``: 7,520 English words, emoticons and slang, each rated by 10 human
  annotators on [-4, 4]). Entries with ``|mean rating| >= 1`` are labelled positive / negative
  (5,830 entries, 44% positive). No sentence-level sentiment corpus (SST-2, IMDB) ships inside a
  PyPI package and data sets cannot be downloaded at run time; VADER's human labels are the closest
  real labelled text task available offline.
* :func:`afinn_valence`: integer valence of AFINN-165 entries (``afinn`` package,
  ``AFINN-en-165.txt``: 3,382 English words and phrases rated by F. A. Nielsen on -5..5; the
  3,380 non-zero ones are kept), binned
  into four classes: strongly negative (<= -3), mildly negative (-2, -1), mildly positive (1, 2),
  strongly positive (>= 3). Telling strong from mild valence asks for more than the sign, so the
  task is harder than the binary VADER one.

Examples:
    >>> from jaxpapers.core.data.text import vader_sentiment
    >>> task = vader_sentiment()
    >>> len(task.texts), task.labels.shape, int(task.labels.sum())
    (5830, (5830,), 2580)
    >>> from jaxpapers.core.data.text import afinn_valence
    >>> task = afinn_valence()
    >>> len(task.texts), task.num_classes
    (3380, 4)
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np


class TextTask(NamedTuple):
    """Texts and integer labels (for binary sentiment, 1 = positive)."""

    texts: list[str]
    labels: np.ndarray

    @property
    def num_classes(self) -> int:
        """Number of classes (largest label + 1)."""
        return int(self.labels.max()) + 1


def vader_sentiment(min_abs: float = 1.0) -> TextTask:
    """Binary sentiment of VADER lexicon entries with ``|mean rating| >= min_abs``."""
    if not min_abs >= 0:
        raise ValueError(f"min_abs={min_abs!r}; expected a rating threshold >= 0")
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


def _package_file(module: str, relative: str, pip_name: str) -> Path:
    try:
        package = __import__(module)
    except ImportError as err:
        raise FileNotFoundError(f"this task needs `pip install {pip_name}`") from err
    return Path(package.__file__).resolve().parent / relative


def afinn_valence() -> TextTask:
    """Four-class valence of AFINN-165 entries: labels 0..3 for <= -3, -2..-1, 1..2, >= 3."""
    path = _package_file("afinn", "data/AFINN-en-165.txt", "afinn")
    texts, labels = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        word, _, score = line.rpartition("\t")
        if not word:
            continue
        v = int(score)
        if v != 0:
            texts.append(word)
            labels.append(int(np.searchsorted([-2.5, 0.0, 2.5], v)))
    return TextTask(texts, np.asarray(labels, np.int32))


__all__ = ["TextTask", "afinn_valence", "vader_sentiment"]
