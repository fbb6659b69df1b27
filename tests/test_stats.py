"""core.stats.fit_loglog_slope against numpy.polyfit, a known exponent and bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from jaxpapers.core.stats import SlopeFit, fit_loglog_slope


def test_matches_polyfit_on_noisy_points(rng):
    x = np.geomspace(1.0, 1e3, 12)
    y = 2.0 * x**0.7 * np.exp(rng.normal(0.0, 0.2, x.shape))
    fit = fit_loglog_slope(x, y, num_bootstrap=500)
    slope, intercept = np.polyfit(np.log(x), np.log(y), 1)
    assert isinstance(fit, SlopeFit)
    np.testing.assert_allclose([fit.slope, fit.intercept], [slope, intercept], rtol=1e-10)
    assert fit.low < fit.slope < fit.high
    assert fit.low < 0.7 < fit.high  # noise sd 0.2 over three decades: the truth is covered


def test_known_exponent_over_seeds_resamples_seeds(rng):
    x = np.array([16.0, 64.0, 256.0, 1024.0])
    y = x**0.5 * np.exp(rng.normal(0.0, 0.1, (20, 4)))
    fit = fit_loglog_slope(x, y, num_bootstrap=1000, seed=3)
    slope, _ = np.polyfit(np.log(x), np.log(y.mean(axis=0)), 1)
    np.testing.assert_allclose(fit.slope, slope, rtol=1e-10)
    assert fit.low < 0.5 < fit.high
    assert fit.high - fit.low < 0.1  # 20 seeds of 10 % noise pin the exponent down
    # exact power law: every resample returns the same slope
    exact = fit_loglog_slope(x, np.tile(3.0 * x**-1.5, (5, 1)), num_bootstrap=50)
    np.testing.assert_allclose(exact, (-1.5, np.log(3.0), -1.5, -1.5), rtol=1e-12, atol=1e-12)


def test_same_seed_same_interval(rng):
    x = np.arange(1.0, 9.0)
    y = x**1.2 * np.exp(rng.normal(0.0, 0.3, x.shape))
    assert fit_loglog_slope(x, y, seed=1) == fit_loglog_slope(x, y, seed=1)


@pytest.mark.parametrize(
    ("x", "y", "match"),
    [
        ([1.0, 2.0, 0.0], [1.0, 2.0, 3.0], "x of shape"),
        ([1.0, 2.0, 3.0], [1.0, -2.0, 3.0], "y of shape"),
        ([1.0, 2.0, 3.0], [1.0, np.nan, 3.0], "non-finite"),
        ([1.0, 2.0, 3.0], [1.0, 2.0], "expected \\(3,\\)"),
        ([2.0, 2.0, 2.0], [1.0, 2.0, 3.0], "two distinct"),
    ],
)
def test_bad_inputs(x, y, match):
    with pytest.raises(ValueError, match=match):
        fit_loglog_slope(x, y)
