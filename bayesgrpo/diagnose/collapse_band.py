"""Early (live) collapse check: the reward's rolling mean leaves the band of the plateau before it and the
latest points sit near the floor (:func:`band_collapse`, part of ``dynamical_instability``).

The band, precisely (:func:`band_track`; ``bench/diagnose_live.py`` measures detection lags from it):

* ``r_t``: the trailing mean of the last ``w`` logged rewards, ``w = min(BAND_WINDOW, max(5, n // 10))``
  (the "50-step mean" of a long log; a tenth of a short one);
* the plateau preceding ``t``: the ``BAND_PLATEAU x w`` values ``r_s`` with ``t - w - BAND_PLATEAU w <
  s <= t - w`` (it ends one window before ``t``, so ``r_t`` shares no point with it);
* its band: ``mean(r_s) +- BAND_K x noise`` with ``noise = max(sd(r_s), sigma / sqrt(w))`` (``sigma``: the
  point noise from first differences, :func:`bayesgrpo.series.noise_sd`; the s.d. of ``r_s`` adds the
  plateau's slow drift);
* the rolling mean **leaves its band** at the first ``t`` with ``r_t < mean - BAND_K x noise``.

The whole-run :func:`bayesgrpo.diagnose.instability._collapse` waits for a tenth of the run after a drop
(to see that it stays); this check raises ``critical`` as soon as the fall is deep and certain.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesgrpo.diagnose.common import COLLAPSE_FLOOR_SHARE, COLLAPSE_Z
from bayesgrpo.plan import is_unit_interval
from bayesgrpo.series import noise_sd as _noise_sd

__all__ = ["BAND_K", "BAND_PLATEAU", "BAND_WINDOW", "band_collapse", "band_exits", "band_track", "band_window"]

#: the rolling mean's window in logged points (the "50-step mean"), at most a tenth of the points
BAND_WINDOW = 50
#: the band's half-width below the plateau mean, in units of its noise
BAND_K = 3.0
#: the plateau's length in windows
BAND_PLATEAU = 2
#: a critical collapse must be seen this many windows after the band exit at the latest (a later,
#: slower fall is judged again from the band of the plateau before it)
_WITHIN = 1


def band_window(n: int) -> int:
    """The rolling mean's window for ``n`` logged points: ``min(BAND_WINDOW, max(5, n // 10))``."""
    return int(min(BAND_WINDOW, max(5, n // 10)))


def band_track(y, w: int | None = None) -> pd.DataFrame:
    """Per point: the trailing mean ``r``, its preceding plateau's ``mean`` and ``noise``, and ``lower`` =
    mean - BAND_K x noise (NaN until a full plateau precedes the point). See the module docstring."""
    y = np.asarray(y, float)
    n = y.size
    w = band_window(n) if w is None else int(w)
    p = BAND_PLATEAU * w
    r = pd.Series(y).rolling(w, min_periods=w).mean()
    past = r.shift(w)
    mean = past.rolling(p, min_periods=p).mean()
    sd = past.rolling(p, min_periods=p).std(ddof=1)
    noise = np.maximum(sd.to_numpy(), _noise_sd(y) / np.sqrt(w))
    out = pd.DataFrame({"r": r.to_numpy(), "mean": mean.to_numpy(), "noise": noise})
    out["lower"] = out["mean"] - BAND_K * out["noise"]
    return out


def band_exits(track: pd.DataFrame) -> np.ndarray:
    """Indices where the rolling mean leaves its band (below it now, not at the point before)."""
    below = (track["r"] < track["lower"]).to_numpy()
    prev = np.concatenate([[False], below[:-1]])
    return np.flatnonzero(below & ~prev)


def _no_finding() -> dict:
    return {"severity": "none", "onset": None, "text": "", "score": 0.0}


def band_collapse(step, y) -> dict:
    """Critical when, within ``w`` points after the rolling mean leaves its band (module docstring), the mean
    of the latest ``q = max(4, w // 5)`` points has **fallen**: to at most ``COLLAPSE_FLOOR_SHARE`` of the
    plateau's height above the floor (0 for non-negative rewards, else the first window's mean), or below
    the run's start level (the first window's mean) when the plateau had gained at least twice the material
    amount over it (everything learned is lost). The fall from the plateau must be material (0.1 for 0/1
    rewards, else a quarter of the 2-98% spread), twice the band's half-width, and significant (``z >=
    COLLAPSE_Z`` on the plateau's point s.d., at least the point noise); the rolling mean must still be
    below the band at the last point, else the finding is a ``watch`` (collapsed, back in the band).
    """
    y = np.asarray(y, float)
    n = y.size
    out = _no_finding()
    w = band_window(n)
    if n < (BAND_PLATEAU + 2) * w:
        return out
    tr = band_track(y, w)
    sigma = _noise_sd(y)
    q = max(4, w // 5)
    recent = pd.Series(y).rolling(q, min_periods=q).mean().to_numpy()
    unit = is_unit_interval(y)
    nonneg = bool(np.nanmin(y) >= -1e-9)
    start = float(np.mean(y[:w]))
    floor = 0.0 if nonneg else start
    p = BAND_PLATEAU * w
    for e in band_exits(tr):
        mu, noise = float(tr["mean"].iat[e]), float(tr["noise"].iat[e])
        height = mu - floor
        pre = y[: e + 1]
        material = 0.1 if unit else 0.25 * float(np.quantile(pre, 0.98) - np.quantile(pre, 0.02))
        if height <= max(material, 4 * sigma / np.sqrt(w)):
            continue
        # the plateau's points: [e - w - p + 1, e - w] shifted by the window (r_s averages y[s - w + 1 .. s])
        sd_pts = max(sigma, float(np.std(y[max(0, e - 2 * w - p + 2) : e - w + 1], ddof=1)))
        se = sd_pts * np.sqrt(1.0 / q + 1.0 / p)
        # fallen: to within COLLAPSE_FLOOR_SHARE of the height above the floor, or below the start level
        # when the run had gained a material amount over it (it lost everything it learned)
        level = floor + COLLAPSE_FLOOR_SHARE * height
        if mu - start >= 2 * material:
            level = max(level, start)
        for t in range(e, min(n, e + _WITHIN * w + 1)):
            drop = mu - recent[t]
            if not (recent[t] <= level and drop >= max(material, 2 * BAND_K * noise) and drop >= COLLAPSE_Z * se):
                continue
            lower = float(tr["lower"].iat[e])
            r = tr["r"].to_numpy()
            if r[-1] < lower:
                deep = recent[t] - floor <= COLLAPSE_FLOOR_SHARE * height
                kind = "collapse toward the floor" if deep else "collapse below the start level"
                out.update(
                    severity="critical",
                    onset=int(step[e]),
                    score=float(drop / height),
                    text=(
                        f"{kind}: the {w}-point mean left the band of its plateau "
                        f"({mu:.3g} - {BAND_K:g} x {noise:.2g}) at step {step[e]}; the mean of {q} points at step "
                        f"{step[t]} is {recent[t]:.3g} ({(recent[t] - floor) / height:.0%} of the height above floor "
                        f"{floor:.3g}{f', below the start level {start:.3g}' if recent[t] < start else ''}); "
                        f"z = {drop / se:.1f}; latest {q}-point mean {float(np.mean(y[-q:])):.3g}"
                    ),
                )
                return out
            back = t + int(np.argmax(r[t:] >= lower))
            out.update(
                severity="watch",
                onset=int(step[e]),
                score=float(drop / height),
                text=(
                    f"collapsed from the plateau at {mu:.3g} to {recent[t]:.3g} at step {step[t]}, back in its "
                    f"band (>= {lower:.3g}) since step {step[back]}"
                ),
            )
            break
    return out
