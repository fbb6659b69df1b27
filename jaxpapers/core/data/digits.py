"""sklearn's bundled 8x8 handwritten digits (1,797 images, 10 classes), the one real image set
that ships inside a package here: loading, upsampling, scaling and seeded splits.

Examples:
    >>> from jaxpapers.core.data.digits import load_digits, split
    >>> d = load_digits(size=16, value_range=(-1.0, 1.0))
    >>> d.images.shape, d.labels.shape, float(d.images.min()), float(d.images.max())
    ((1797, 16, 16), (1797,), -1.0, 1.0)
    >>> train, test = split(d, test_fraction=0.25, seed=0)
    >>> len(train.labels), len(test.labels)
    (1348, 449)
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import NamedTuple

import numpy as np

NUM_CLASSES = 10


class Digits(NamedTuple):
    """``images [N, size, size]`` float32 and integer ``labels [N]`` in ``[0, 10)``."""

    images: np.ndarray
    labels: np.ndarray


@functools.cache
def _raw() -> tuple[np.ndarray, np.ndarray]:
    # Read the CSV that scikit-learn ships (64 pixel counts in 0..16, then the label) without
    # importing scikit-learn itself (~2 CPU-s per process); same arrays as its load_digits.
    spec = importlib.util.find_spec("sklearn")
    path = None
    if spec is not None and spec.submodule_search_locations:
        path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data"
        path = path / "digits.csv.gz"
    if path is None or not path.exists():  # another layout: let scikit-learn find it
        from sklearn.datasets import load_digits as sk_load

        d = sk_load()
        return (d.images / 16.0).astype(np.float32), d.target.astype(np.int32)
    table = np.loadtxt(path, delimiter=",")
    images = table[:, :-1].reshape(-1, 8, 8)
    return (images / 16.0).astype(np.float32), table[:, -1].astype(np.int32)


def load_digits(size: int = 8, value_range: tuple[float, float] = (0.0, 1.0)) -> Digits:
    """All 1,797 digits at ``size x size`` (8, or bilinear upsampling to a multiple of 8).

    Args:
      size: side length; 8 is the original, 16 or 32 upsample bilinearly (clipped to the range).
      value_range: ``(low, high)`` that ink-free and full-ink pixels map to.

    Returns:
      :class:`Digits` (fresh arrays; the caller may modify them).
    """
    if not isinstance(size, int) or size < 8 or size % 8:
        raise ValueError(f"size={size!r}; expected a positive multiple of 8")
    low, high = (float(v) for v in value_range)
    if not high > low:
        raise ValueError(f"value_range={value_range!r}; expected (low, high) with high > low")
    images, labels = _raw()
    if size != 8:
        from scipy.ndimage import zoom

        f = size // 8
        images = np.clip(zoom(images, (1, f, f), order=1, grid_mode=True, mode="nearest"), 0, 1)
    return Digits((low + (high - low) * images).astype(np.float32), labels.copy())


def split(data: Digits, test_fraction: float = 0.25, seed: int = 0) -> tuple[Digits, Digits]:
    """A seeded random split into ``(train, test)``."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction={test_fraction!r}; expected a value in (0, 1)")
    n = len(data.labels)
    perm = np.random.default_rng(seed).permutation(n)
    n_test = round(n * test_fraction)
    te, tr = perm[:n_test], perm[n_test:]
    return Digits(data.images[tr], data.labels[tr]), Digits(data.images[te], data.labels[te])


__all__ = ["NUM_CLASSES", "Digits", "load_digits", "split"]
