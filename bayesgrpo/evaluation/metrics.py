"""Scoring metrics for final-reward forecasts (pure numpy).

The forecast target
-------------------
The *final reward* of a run is the mean of its logged reward over the steps in the last
``final_window`` (default 10%) of the run, i.e. over the half-open interval

    ( s0 + (1 - final_window) * (H - s0),  H ]

where ``s0`` is the run's first logged step and ``H`` its horizon (last step), at the run's own
logging interval (:func:`bayesgrpo.plan.final_window_mask`, the one definition; :func:`final_reward`).

Scores
------
* :func:`crps_sample` -- CRPS of an ensemble / sample forecast, energy form, exact for the
  empirical distribution of the draws; vectorised over cases.
* :func:`pit` -- probability integral transform, randomised for ties.
* :func:`reward_range` -- the robust per-run reward scale (:func:`bayesgrpo.series.robust_range`)
  used to normalise errors and CRPS before pooling runs on different reward scales.

All functions accept array-likes; NaN handling is documented per function.
"""

from __future__ import annotations

import numpy as np

from bayesgrpo.plan import final_reward  # the final window, defined once
from bayesgrpo.series import robust_range as reward_range  # the one definition of a run's reward scale

__all__ = [
    "crps_sample",
    "pit",
    "final_reward",
    "reward_range",
]


def _as_cases(samples) -> np.ndarray:
    x = np.asarray(samples, dtype=float)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2:
        raise ValueError(f"samples must have shape (n_cases, n_draws) or (n_draws,), got {x.shape}")
    return x


def crps_sample(samples, y) -> np.ndarray | float:
    """Continuous ranked probability score of a sample forecast (lower is better).

    Energy form ``CRPS(F, y) = E|X - y| - 1/2 E|X - X'|`` with ``X, X'`` independent draws
    from the empirical distribution of ``samples`` (the n^2 "NRG" form, which *is* the CRPS of
    the empirical CDF -- no finite-sample correction). ``E|X - X'|`` is computed exactly in
    ``O(n log n)`` from the order statistics: ``sum_{i,j}|x_i - x_j| = 2 sum_i (2i - n + 1) x_(i)``
    (0-based ``i``).

    Parameters
    ----------
    samples : array (n_cases, n_draws) or (n_draws,)
        Forecast draws per case. Non-finite draws are dropped per case; a case with no finite
        draw (or a NaN ``y``) scores NaN.
    y : array (n_cases,) or scalar
        Observed values.

    Returns
    -------
    float if ``samples`` is 1-D and ``y`` scalar, else array (n_cases,).

    Notes
    -----
    A point forecast (one draw, or all draws equal) scores ``|x - y|``.
    """
    scalar = np.ndim(samples) == 1 and np.ndim(y) == 0
    x = _as_cases(samples)
    yy = np.broadcast_to(np.asarray(y, dtype=float), (x.shape[0],)).astype(float)
    out = np.full(x.shape[0], np.nan)
    finite = np.isfinite(x)
    if finite.all():
        out = _crps_dense(x, yy)
    else:
        for i in range(x.shape[0]):
            xi = x[i, finite[i]]
            if xi.size:
                out[i] = _crps_dense(xi[None, :], yy[i : i + 1])[0]
    out = np.where(np.isfinite(yy), out, np.nan)
    return float(out[0]) if scalar else out


def _crps_dense(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    n = x.shape[1]
    xs = np.sort(x, axis=1)
    term1 = np.mean(np.abs(xs - y[:, None]), axis=1)
    coef = 2.0 * np.arange(n) - n + 1.0
    # 1/2 E|X - X'| = (1/n^2) sum_i (2i - n + 1) x_(i)
    term2 = (xs @ coef) / (n * n)
    return term1 - term2


def pit(samples, y, *, seed=None) -> np.ndarray | float:
    """Probability integral transform of ``y`` under the empirical forecast distribution.

    Rank form, randomised for ties: ``PIT = (#{x_i < y} + U * (#{x_i == y} + 1)) / (n + 1)``
    with ``U ~ Uniform(0, 1)``. For ``y`` exchangeable with the ``n`` draws (a calibrated
    forecast) this is exactly Uniform(0, 1); ties (e.g. discrete rewards or point forecasts) are
    spread uniformly over their rank range instead of piling up at one value.

    Parameters
    ----------
    samples : array (n_cases, n_draws) or (n_draws,)
        Non-finite draws are dropped per case (NaN result if none remain or ``y`` is NaN).
    y : array (n_cases,) or scalar
    seed : int or numpy Generator, optional
        For the tie-breaking uniforms.
    """
    scalar = np.ndim(samples) == 1 and np.ndim(y) == 0
    x = _as_cases(samples)
    yy = np.broadcast_to(np.asarray(y, dtype=float), (x.shape[0],))
    rng = np.random.default_rng(seed)
    u = rng.uniform(size=x.shape[0])
    fin = np.isfinite(x)
    n = fin.sum(axis=1)
    less = np.sum(fin & (x < yy[:, None]), axis=1)
    eq = np.sum(fin & (x == yy[:, None]), axis=1)
    out = (less + u * (eq + 1)) / (n + 1)
    out = np.where((n > 0) & np.isfinite(yy), out, np.nan)
    return float(out[0]) if scalar else out
