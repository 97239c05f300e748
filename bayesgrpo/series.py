"""Robust statistics of one reward series -- each defined once, used by models, scoring, peers, diagnostics.

* :func:`robust_range` -- the reward scale of a run: 95% minus 5% quantile (with fallbacks);
* :func:`noise_sd` -- white measurement-noise sd from first differences (MAD, with a floor for
  quantised series);
* :func:`start_level` -- mean of the first ``max(3, 10%)`` points;
* :func:`current_level` -- mean of the last ``max(3, 10%)`` points: where a run is *now* (the level a
  stop decision compares the forecast with, the anchor of the calibration layer's leaving draws, the
  ``last_value`` peer's forecast);
* :func:`best_window_mean` -- the best mean of ``w`` consecutive points ("best so far" of
  ``ImprovementStop``).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "robust_range",
    "noise_sd",
    "start_level",
    "current_level",
    "level_points",
    "START_SHARE",
    "MIN_START_POINTS",
    "LEVEL_SHARE",
]

START_SHARE = 0.1
LEVEL_SHARE = 0.1  # the current level: the mean of the last 10% of the logged points (at least 3)
MIN_START_POINTS = 3


def _finite(values) -> np.ndarray:
    v = np.asarray(values, dtype=float).ravel()
    return v[np.isfinite(v)]


def robust_range(values) -> float:
    """Robust reward scale: the 95% minus the 5% quantile of the finite values.

    Fallbacks when that range is ~0 (fewer than ~10% of points differ from the rest): the full
    range ``max - min``; if that is 0 too (a constant series), ``|median|``; if that is 0 as well,
    1.0. Always strictly positive, so it can be divided by.
    """
    r = _finite(values)
    if r.size == 0:
        return 1.0
    lo, hi, med = np.quantile(r, [0.05, 0.95, 0.5])
    tiny = 1e-12 * max(1.0, abs(med))
    for v in (hi - lo, r.max() - r.min(), abs(med)):
        if v > tiny:
            return float(v)
    return 1.0


def noise_sd(values) -> float:
    """White measurement-noise sd of a series from its first differences.

    ``max(1.4826 MAD(diff) / sqrt 2, 0.5 sd(diff) / sqrt 2)``: the MAD is robust to the trend and to
    jumps; the second term floors it for sparse or quantised series whose differences are mostly
    exactly 0 (MAD = 0). 0.0 with fewer than 3 finite values.
    """
    d = np.diff(_finite(values))
    if d.size < 2:
        return 0.0
    mad = 1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2.0)
    return float(max(mad, 0.5 * float(np.std(d)) / math.sqrt(2.0)))


def start_level(values) -> float:
    """Mean of the first ``max(3, ceil(10%))`` finite values (the level a run starts from)."""
    r = _finite(values)
    if r.size == 0:
        return float("nan")
    k = max(MIN_START_POINTS, int(math.ceil(START_SHARE * r.size)))
    return float(np.mean(r[:k]))


def current_level(values) -> float:
    """Where a run is now: the mean of the last ``max(3, ceil(10%))`` finite values (all of them when
    fewer than 3). NaN for no finite value.

    The one definition of "current level": the stop advice compares the forecast final reward with it
    (``p_gain`` = P(final >= current level + delta x scale)), the calibration layer's leaving draws start
    from it, and the stop backtests measure the reward a stop gives up from it.
    """
    r = _finite(values)
    if r.size == 0:
        return float("nan")
    return float(np.mean(r[-level_points(r.size) :]))


def level_points(n: int) -> int:
    """How many of ``n`` finite points the current level averages: ``max(3, ceil(10% of n))``, at most n."""
    return min(int(n), max(MIN_START_POINTS, int(math.ceil(LEVEL_SHARE * n))))


def best_window_mean(values, window: int = 5) -> float:
    """The largest mean of ``window`` consecutive finite values (all of them when fewer); NaN for none."""
    y = _finite(values)
    if y.size == 0:
        return float("nan")
    w = max(1, min(int(window), y.size))
    return float(np.convolve(y, np.ones(w) / w, mode="valid").max())
