"""Robust statistics of one reward series -- each defined once, used by models, scoring, peers, diagnostics.

* :func:`robust_range` -- the reward scale of a run: 95% minus 5% quantile (with fallbacks);
* :func:`noise_sd` -- white measurement-noise sd from first differences (MAD, with a floor for
  quantised series);
* :func:`start_level` -- mean of the first ``max(3, 10%)`` points;
* :func:`final_reward` -- the forecast target: the mean logged reward over the final window
  ``(s0 + (1 - w)(H - s0), H]`` (:func:`final_window_mask`, :func:`final_window_threshold`): the
  truth of a backtest, and the observed final reward of a run logged up to its horizon.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["robust_range", "noise_sd", "start_level", "final_window_threshold", "final_window_mask", "final_reward",
           "START_SHARE", "MIN_START_POINTS"]  # fmt: skip

START_SHARE = 0.1
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


def final_window_threshold(*, s0: float, horizon: float, final_window: float = 0.1) -> float:
    """Left (open) end of the final window: ``s0 + (1 - final_window) (H - s0)``.

    Computed as ``H - final_window (H - s0)`` (exact for the usual integer steps and
    ``final_window = 0.1``: e.g. ``s0=1, H=100`` gives 90.1).
    """
    if not 0 < final_window <= 1:
        raise ValueError(f"final_window must be in (0, 1], got {final_window}")
    if horizon < s0:
        raise ValueError(f"horizon {horizon} is before the first step {s0}")
    return float(horizon) - float(final_window) * (float(horizon) - float(s0))


def final_window_mask(steps, *, s0: float, horizon: float, final_window: float = 0.1) -> np.ndarray:
    """Boolean mask of ``steps`` in the final window ``(s0 + (1 - fw)(H - s0), H]``.

    A relative tolerance of 1e-9 guards the open left end against floating-point round-off
    (a step equal to the threshold in exact arithmetic is excluded).

    Examples
    --------
    steps 1..100, ``s0=1, H=100`` -> steps 91..100. Logging every 5 with ``s0=5, H=200``
    (threshold 180.5) -> steps 185, 190, 195, 200.
    """
    s = np.asarray(steps, dtype=float)
    thr = final_window_threshold(s0=s0, horizon=horizon, final_window=final_window)
    tol = 1e-9 * max(1.0, abs(float(horizon)))
    return (s > thr + tol) & (s <= float(horizon) + tol)


def final_reward(
    steps, rewards, *, horizon: float | None = None, s0: float | None = None, final_window: float = 0.1
) -> float:
    """Truth of the forecast target from a complete run: mean reward over the final window.

    ``s0`` defaults to the first step and ``horizon`` to the last step of ``steps``. NaN rewards
    are ignored; returns NaN when the window holds no finite reward.
    """
    s = np.asarray(steps, dtype=float)
    r = np.asarray(rewards, dtype=float)
    if s.shape != r.shape:
        raise ValueError(f"steps {s.shape} and rewards {r.shape} differ in shape")
    if s.size == 0:
        return float("nan")
    s0 = float(np.min(s)) if s0 is None else float(s0)
    horizon = float(np.max(s)) if horizon is None else float(horizon)
    m = final_window_mask(s, s0=s0, horizon=horizon, final_window=final_window) & np.isfinite(r)
    return float(np.mean(r[m])) if m.any() else float("nan")
