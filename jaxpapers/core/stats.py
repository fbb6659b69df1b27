"""Small statistics for verdicts on rates: log-log slopes with bootstrap percentile intervals.

A rate claim such as "regret grows like ``K^{1/2}``" is checked by fitting the least-squares line

.. math:: \\log y_i = b + a \\log x_i

and bootstrapping the slope ``a``. With a 1-D ``y`` the points are resampled with replacement;
with a 2-D ``y`` of shape ``[seeds, points]`` the seeds (rows) are resampled and each resample is
fitted on the log of its seed-mean, so the interval reflects seed-to-seed variation and keeps the
design ``x`` fixed. Everything runs in float64 NumPy on the host (these are tiny problems).

Examples:
    >>> import numpy as np
    >>> from jaxpapers.core.stats import fit_loglog_slope
    >>> x = np.array([1.0, 2.0, 4.0, 8.0])
    >>> fit = fit_loglog_slope(x, 3.0 * x**0.5, num_bootstrap=200)
    >>> round(fit.slope, 6), round(float(np.exp(fit.intercept)), 6)
    (0.5, 3.0)
    >>> fit.low <= fit.slope <= fit.high
    True

References:
    Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993 (percentile intervals).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

__all__ = ["SlopeFit", "fit_loglog_slope"]


class SlopeFit(NamedTuple):
    """Least-squares log-log fit ``log y = intercept + slope * log x`` with a bootstrap interval.

    Attributes:
        slope: fitted exponent ``a``.
        intercept: fitted ``b`` (natural log of the constant).
        low: lower end of the percentile interval for ``slope``.
        high: upper end of the percentile interval for ``slope``.
    """

    slope: float
    intercept: float
    low: float
    high: float


def _as_positive(name: str, value: Any) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} of shape {arr.shape} holds non-finite values; expected > 0")
    if np.any(arr <= 0):
        raise ValueError(
            f"{name} of shape {arr.shape} has minimum {arr.min()!r}; expected values > 0 for logs"
        )
    return arr


def _lines(logx: np.ndarray, logy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares slopes/intercepts of rows of ``logy`` on rows of ``logx`` (both [B, n]).

    Rows whose ``logx`` has zero spread give a NaN slope.
    """
    mx = logx.mean(axis=-1, keepdims=True)
    my = logy.mean(axis=-1, keepdims=True)
    dx = logx - mx
    sxx = np.sum(dx * dx, axis=-1)
    sxy = np.sum(dx * (logy - my), axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where(sxx > 0, sxy / np.where(sxx > 0, sxx, 1.0), np.nan)
    return slope, my[..., 0] - slope * mx[..., 0]


def fit_loglog_slope(
    x: Any,
    y: Any,
    *,
    num_bootstrap: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> SlopeFit:
    """Fit the exponent of ``y ~ C x^a`` by least squares in log-log space, with a bootstrap CI.

    Args:
        x: positive design points, shape ``[n]`` with at least two distinct values.
        y: positive responses, shape ``[n]`` (points are resampled) or ``[seeds, n]`` (seeds are
            resampled and the fit uses the log of the seed-mean).
        num_bootstrap: number of bootstrap resamples (>= 1).
        seed: NumPy seed of the resampling.
        confidence: two-sided level of the percentile interval, in ``(0, 1)``.

    Returns:
        ``SlopeFit(slope, intercept, low, high)`` as Python floats.

    Raises:
        ValueError: non-positive or non-finite ``x``/``y``, mismatched shapes, fewer than two
            distinct ``x``, or bad ``num_bootstrap``/``confidence``.

    Examples:
        >>> import numpy as np
        >>> from jaxpapers.core.stats import fit_loglog_slope
        >>> x = np.array([10.0, 100.0, 1000.0])
        >>> y = np.stack([x**2 * c for c in (1.0, 1.1, 0.9)])
        >>> round(fit_loglog_slope(x, y, num_bootstrap=100).slope, 6)
        2.0
    """
    x = _as_positive("x", x)
    y = _as_positive("y", y)
    if x.ndim != 1:
        raise ValueError(f"x has shape {x.shape}; expected a 1-D array of design points")
    if y.ndim not in (1, 2) or y.shape[-1] != x.shape[0]:
        raise ValueError(
            f"y has shape {y.shape}; expected ({x.shape[0]},) or (seeds, {x.shape[0]}) to match x"
        )
    if np.unique(x).size < 2:
        raise ValueError(f"x={x.tolist()} needs at least two distinct values to fit a slope")
    if int(num_bootstrap) < 1:
        raise ValueError(f"num_bootstrap={num_bootstrap!r}; expected an integer >= 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence!r}; expected a value in (0, 1)")

    logx = np.log(x)
    rng = np.random.default_rng(seed)
    if y.ndim == 1:
        slope, intercept = _lines(logx[None], np.log(y)[None])
        idx = rng.integers(0, x.shape[0], size=(int(num_bootstrap), x.shape[0]))
        boot, _ = _lines(logx[idx], np.log(y)[idx])
    else:
        slope, intercept = _lines(logx[None], np.log(y.mean(axis=0))[None])
        idx = rng.integers(0, y.shape[0], size=(int(num_bootstrap), y.shape[0]))
        boot_logy = np.log(y[idx].mean(axis=1))  # [B, n]
        boot, _ = _lines(np.broadcast_to(logx, boot_logy.shape), boot_logy)
    boot = boot[np.isfinite(boot)]
    alpha = 0.5 * (1.0 - confidence)
    if boot.size:
        low, high = np.quantile(boot, [alpha, 1.0 - alpha])
    else:  # every resample collapsed onto one x value
        low = high = float(slope[0])
    return SlopeFit(float(slope[0]), float(intercept[0]), float(low), float(high))
