"""What a run's observed prefix shows: the features the shape prior reads (and the research layers of bench/posthoc).

Every feature is a dimensionless number computed from the logged prefix alone (the reward, the
channels of :data:`bayesgrpo.schema.CHANNELS` when logged, the reward's bounds and the observed
fraction), so a forecast, a backtest and a study compute the same values. One definition each:

Shape of the reward (``y`` = the prefix's rewards, ``level`` = :func:`bayesgrpo.series.current_level`,
``start`` = :func:`bayesgrpo.series.start_level`, ``span`` = max - min of the prefix, never 0):

* ``bounded`` -- 1 when the reward's bounds are known or inferred 0-1
  (:func:`bayesgrpo.models.arrays.reward_bounds`), else 0;
* ``at_floor`` -- 1 when the level lies in the lowest :data:`FLOOR_SHARE` of the reward's range: the
  bounds' where known, else the prefix's own (a prefix that sits at its minimum while rare batches
  score high: the start of an S-curve of a summed format + correctness reward);
* ``position`` -- ``(level - min) / span``: 0 at the prefix's bottom, 1 at its top;
* ``trend`` -- ``(level - start) / span``;
* ``recent`` -- the trend of the last third of the prefix: mean of its last sixth minus the mean of
  the sixth before, over ``span``;
* ``noise`` -- :func:`bayesgrpo.series.noise_sd` over ``span``;
* ``past_peak`` -- how far the level lies below the highest running mean of the prefix (windows of
  the level's length), over ``span``: > 0 once a decline has begun;
* ``fraction`` -- the observed share of the planned run.

Precursors of leaving the regime (physics.md sections 7 and 10; 0 where the channel is not logged,
``has_<channel>`` says which are): ``kl_growth`` -- log of the KL's current level over its median
over the prefix (KL from the reference, else the approximate KL), floored at 0; ``entropy_fall`` -- the
relative fall of the entropy from its start to its current level, floored at 0; ``length_growth`` --
log of the completion length's current level over its start level, floored at 0; ``zero_std_rise`` --
the rise of the zero-spread share from its start to its current level while the reward's recent trend
is down (else 0); ``spread_fall`` -- the relative fall of the within-group spread (``reward_std``,
else ``reward_std_batch``) from its start level to its current level, floored at 0.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from bayesgrpo.schema import REWARD
from bayesgrpo.series import current_level, noise_sd, start_level

__all__ = ["FEATURES", "SHAPE_FEATURES", "PRECURSORS", "CHANNEL_FLAGS", "FLOOR_SHARE", "prefix_features"]

#: the level is "at the floor" in the lowest 10% of the reward's range
FLOOR_SHARE = 0.1
SHAPE_FEATURES = ("bounded", "at_floor", "position", "trend", "recent", "noise", "past_peak", "fraction")
PRECURSORS = ("kl_growth", "entropy_fall", "length_growth", "zero_std_rise", "spread_fall")
#: the channels the precursors read (a run that logs none of them forecasts from its reward alone)
CHANNEL_FLAGS = ("has_kl", "has_entropy", "has_length", "has_zero_std", "has_spread")
FEATURES = SHAPE_FEATURES + PRECURSORS + CHANNEL_FLAGS
#: channel flag -> the channel columns it reads, first logged one wins
_CHANNELS = {
    "has_kl": ("kl", "approx_kl"),
    "has_entropy": ("entropy",),
    "has_length": ("completion_length",),
    "has_zero_std": ("frac_reward_zero_std",),
    "has_spread": ("reward_std", "reward_std_batch"),
}
MIN_CHANNEL_POINTS = 5


def _finite(x) -> np.ndarray:
    v = np.asarray(x, dtype=float)
    return v[np.isfinite(v)]


def _channel(prefix: pd.DataFrame, names) -> np.ndarray | None:
    for n in names:
        if n in prefix.columns:
            v = _finite(prefix[n])
            if v.size >= MIN_CHANNEL_POINTS:
                return v
    return None


def _log_ratio(now: float, ref: float) -> float:
    if not (np.isfinite(now) and np.isfinite(ref)) or ref <= 0 or now <= 0:
        return 0.0
    return max(0.0, math.log(now / ref))


def _rel_fall(start: float, now: float) -> float:
    if not (np.isfinite(start) and np.isfinite(now)) or start <= 0:
        return 0.0
    return float(np.clip((start - now) / start, 0.0, 1.0))


def prefix_features(
    prefix: pd.DataFrame,
    *,
    fraction: float,
    reward_min: float = float("nan"),
    reward_max: float = float("nan"),
) -> dict[str, float]:
    """The features of one run's observed prefix (module docstring).

    Parameters
    ----------
    prefix : DataFrame
        The logged rows of the prefix (``reward`` and any channel columns), in step order.
    fraction : float
        The observed share of the planned run.
    reward_min, reward_max : float
        The reward's bounds (NaN where unknown; a prefix inside [0, 1] is then taken as 0-1).

    Returns
    -------
    dict
        One float per name of :data:`FEATURES`.
    """
    from bayesgrpo.plan import reward_bounds

    y = _finite(prefix[REWARD]) if REWARD in prefix.columns else np.zeros(0)
    out = dict.fromkeys(FEATURES, 0.0)
    out["fraction"] = float(fraction)
    if y.size < 3:
        return out
    lo, hi, _ = reward_bounds({"reward_min": reward_min, "reward_max": reward_max}, y)
    level, start = current_level(y), start_level(y)
    span = float(y.max() - y.min()) or max(abs(level), 1.0) * 1e-3
    out["bounded"] = float(np.isfinite(lo) and np.isfinite(hi))
    floor, top = (lo, hi) if out["bounded"] else (float(y.min()), float(y.max()))
    out["at_floor"] = float(level - floor <= FLOOR_SHARE * max(top - floor, 1e-12))
    out["position"] = float((level - y.min()) / span)
    out["trend"] = float((level - start) / span)
    k6 = max(1, y.size // 6)
    out["recent"] = float((y[-k6:].mean() - y[-2 * k6 : -k6].mean()) / span) if y.size >= 2 * k6 + 1 else 0.0
    out["noise"] = float(noise_sd(y) / span)
    k = max(3, int(math.ceil(0.1 * y.size)))
    peak = float(pd.Series(y).rolling(k, min_periods=1).mean().max())
    out["past_peak"] = float(max(0.0, peak - level) / span)
    ch = {flag: _channel(prefix, names) for flag, names in _CHANNELS.items()}
    for flag, v in ch.items():
        out[flag] = float(v is not None)
    if ch["has_kl"] is not None:
        v = ch["has_kl"]
        out["kl_growth"] = _log_ratio(current_level(v), float(np.median(v)))
    if ch["has_entropy"] is not None:
        v = ch["has_entropy"]
        out["entropy_fall"] = _rel_fall(start_level(v), current_level(v))
    if ch["has_length"] is not None:
        v = ch["has_length"]
        out["length_growth"] = _log_ratio(current_level(v), start_level(v))
    if ch["has_zero_std"] is not None:
        v = ch["has_zero_std"]
        rise = current_level(v) - start_level(v)
        out["zero_std_rise"] = float(max(0.0, rise)) if out["recent"] < 0 else 0.0
    if ch["has_spread"] is not None:
        v = ch["has_spread"]
        out["spread_fall"] = _rel_fall(start_level(v), current_level(v))
    return out
