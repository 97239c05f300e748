"""Post-hoc layers studied on the yardstick: fitted on some sources' cases, applied to others' draws.

Every layer here is fitted per cutoff with each source weighing the same (a source's cases share a total
weight of 1), and is judged leave-one-source-out on the selection sources (:func:`loso`) or fitted on every
selection source and applied to the locked test (:func:`fit_apply`).

* :class:`SideStretch` -- conformal stretch of each side of the forecast around its median, per quantile
  level (the upper and lower tails calibrated apart): the lower quantile at level ``1 - l`` moves to
  ``med - k_lo(l) (med - q_{1-l})`` with ``k_lo(l)`` the source-weighted ``l``-quantile of
  ``(med - y) / (med - q_{1-l})``; likewise the upper side. Draws are moved by the piecewise-linear map of
  their levels.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

#: the central levels a side-stretch calibrates (its quantiles 1 - l and l)
LEVELS = (0.75, 0.9, 0.95)


def weighted_quantile(x: np.ndarray, w: np.ndarray, q: float) -> float:
    """The ``q``-quantile of ``x`` under weights ``w`` (the inverse of the weighted empirical CDF, midpoints)."""
    o = np.argsort(x)
    x, w = np.asarray(x, float)[o], np.asarray(w, float)[o]
    cw = (np.cumsum(w) - 0.5 * w) / w.sum()
    return float(np.interp(q, cw, x))


def source_weights(sources: pd.Series) -> np.ndarray:
    n = sources.map(sources.value_counts())
    return (1.0 / n).to_numpy(float)


def _qs(x: np.ndarray, levels=LEVELS) -> tuple[float, np.ndarray, np.ndarray]:
    lo = np.quantile(x, [1 - lv for lv in levels])
    hi = np.quantile(x, list(levels))
    return float(np.median(x)), lo, hi


class SideStretch:
    def __init__(self, levels=LEVELS, floor: float = 0.0, scale_floor: float = 0.02):
        self.levels, self.floor, self.scale_floor = tuple(levels), floor, scale_floor
        self.k: dict[float, tuple[np.ndarray, np.ndarray]] = {}

    def fit(self, draws: dict[str, np.ndarray], cases: pd.DataFrame) -> SideStretch:
        for c, g in cases.groupby("cutoff"):
            g = g[g["key"].isin(draws)]
            w = source_weights(g["source"])
            zl, zh = [], []
            for r in g.itertuples():
                med, lo, hi = _qs(draws[r.key], self.levels)
                eps = self.scale_floor * r.prange
                zl.append((med - r.truth) / np.maximum(med - lo, eps))
                zh.append((r.truth - med) / np.maximum(hi - med, eps))
            zl, zh = np.array(zl), np.array(zh)
            klo = np.array([weighted_quantile(zl[:, i], w, lv) for i, lv in enumerate(self.levels)])
            khi = np.array([weighted_quantile(zh[:, i], w, lv) for i, lv in enumerate(self.levels)])
            # monotone in the level: a wider level never moves less far than a narrower one (in units of q)
            self.k[float(c)] = (np.maximum(klo, self.floor), np.maximum(khi, self.floor))
        return self

    def apply_one(self, x: np.ndarray, cutoff: float, prange: float) -> np.ndarray:
        cs = sorted(self.k)
        c = min(cs, key=lambda v: abs(v - cutoff))
        klo, khi = self.k[c]
        med, lo, hi = _qs(x, self.levels)
        eps = self.scale_floor * prange
        # target quantiles at the levels; the draws' own levels map piecewise linearly onto them
        src = np.concatenate([lo[::-1], [med], hi])
        dst = np.concatenate(
            [(med - klo * np.maximum(med - lo, eps))[::-1], [med], med + khi * np.maximum(hi - med, eps)]
        )
        dst = np.maximum.accumulate(dst)
        src = np.maximum.accumulate(src)
        y = np.interp(x, src, dst)  # piecewise linear in the draws' values between the levels' quantiles
        # beyond the outermost levels' quantiles: the draws keep their distance to them (the tail's shape)
        beyond_lo, beyond_hi = x < src[0], x > src[-1]
        y[beyond_lo] = dst[0] + (x[beyond_lo] - src[0])
        y[beyond_hi] = dst[-1] + (x[beyond_hi] - src[-1])
        return y

    def apply(self, draws: dict[str, np.ndarray], cases: pd.DataFrame) -> dict[str, np.ndarray]:
        out = {}
        for r in cases.itertuples():
            if r.key in draws:
                out[r.key] = self.apply_one(draws[r.key], r.cutoff, r.prange)
        return out


def loso(make: Callable, draws: dict[str, np.ndarray], cases: pd.DataFrame) -> dict[str, np.ndarray]:
    """Each source's draws through the layer fitted on every other source's cases."""
    out = {}
    for s in sorted(cases["source"].unique()):
        tr, te = cases[cases["source"] != s], cases[cases["source"] == s]
        out.update(make().fit(draws, tr).apply(draws, te))
    return out


def fit_apply(make: Callable, draws: dict[str, np.ndarray], train: pd.DataFrame, test: pd.DataFrame):
    return make().fit(draws, train).apply(draws, test)
