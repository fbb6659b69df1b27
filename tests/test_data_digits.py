"""core.data.digits reads scikit-learn's bundled CSV itself: same arrays as sklearn's loader."""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits as sk_load_digits

from jaxpapers.core.data.digits import _raw, load_digits


def test_digits_equal_sklearn_loader():
    images, labels = _raw()
    ref = sk_load_digits()
    np.testing.assert_array_equal(labels, ref.target)
    np.testing.assert_array_equal(images, (ref.images / 16.0).astype(np.float32))
    d = load_digits(8, (-1.0, 1.0))
    assert d.images.shape == (1797, 8, 8) and d.images.dtype == np.float32
    np.testing.assert_allclose(d.images, 2.0 * images - 1.0, atol=1e-6)
