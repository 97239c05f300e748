"""Research variants of the calibration layer that no shipped layer uses, for ``calibration_study.py``.

The package ships one mechanism (``bayesgrpo.forecast.calibration``: additive split-conformal tails,
the ``shift`` variant of the study). The study also prices two others, which used to run inside the
forecaster on every forecast although no shipped layer set them; they live here now:

* **width ratios** -- ``x' = median + w(f) (x - median)``, ``w_up`` above the median and ``w_dn`` below,
  the weighted 90% quantile of ``(y - median) / (q90 - median)`` (and of the lower tail) at each
  observed fraction ``f``, clipped to ``[w_min, W_MAX]``;
* **leaving the regime** -- a share ``p_leave(f)`` of the draws (a fixed subset) ends anywhere between
  the reward's floor and the current level (:func:`leave_anchor`), the share per fraction minimising the
  weighted CRPS.

:class:`VariantCalibration` applies widths, then the package's additive tails, then the draws that
leave -- the order the forecaster used. Numbers of the study are those of the package for the
variants the package still implements (``none``, ``shift``).
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from bayesgrpo.evaluation.metrics import crps_sample
from bayesgrpo.forecast.calibration import Calibration
from bench.fit_layers import (
    case_weights,
    leave_anchor,  # the one definition (bench/fit_layers.py)
    weighted_quantile,
)

__all__ = ["VariantCalibration", "fit_variant_layer", "leave_anchor", "W_MAX", "P_LEAVE_GRID", "apply_layer"]

W_MAX = 6.0  # the layer never widens an interval beyond 6x
LEAVE_SEED = 20_260_601  # the draws that leave the regime are a fixed subset (reproducible)
#: shares of draws leaving the regime tried by :func:`fit_variant_layer` (``leave=True``)
P_LEAVE_GRID = tuple(np.round(np.arange(0.0, 0.31, 0.02), 2))


class VariantCalibration(BaseModel):
    """A layer with width ratios and draws leaving the regime (module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fraction_grid: tuple[float, ...] = (0.1, 0.2, 0.3, 0.5)
    w_up: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)
    w_dn: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)
    p_leave: tuple[float, ...] = ()  # empty: no draw leaves the regime
    name: str = "variant"
    provenance: dict = Field(default_factory=dict)

    @model_validator(mode="after")
    def _lengths(self):
        n = len(self.fraction_grid)
        for name in ("w_up", "w_dn") + (("p_leave",) if self.p_leave else ()):
            if len(getattr(self, name)) != n:
                raise ValueError(f"calibration {self.name!r}: {name} has {len(getattr(self, name))} values for {n}")
        if any(not 0.0 <= v < 1.0 for v in self.p_leave):
            raise ValueError(f"calibration {self.name!r}: p_leave must lie in [0, 1)")
        return self

    def widths(self, fraction: float) -> tuple[float, float]:
        """``(w_dn, w_up)`` at an observed fraction (constant beyond the grid)."""
        return (float(np.interp(fraction, self.fraction_grid, self.w_dn)),
                float(np.interp(fraction, self.fraction_grid, self.w_up)))  # fmt: skip

    def leave(
        self, n: int, *, fraction: float, level: float = float("nan"), floor: float = float("nan")
    ) -> tuple[np.ndarray, np.ndarray]:
        """The draws that leave the regime: ``(indices, final values)``, evenly spread between the floor
        and the current level; none when the share rounds to no draw or the level is unknown."""
        p = float(np.interp(fraction, self.fraction_grid, self.p_leave)) if self.p_leave else 0.0
        k = int(round(p * n))
        if k == 0 or not (np.isfinite(level) and np.isfinite(floor)):
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        rng = np.random.default_rng(LEAVE_SEED)
        idx = np.sort(rng.choice(n, size=k, replace=False))
        lo = min(float(floor), float(level))
        return idx, lo + (float(level) - lo) * (rng.permutation(k) + 0.5) / k

    def apply(self, draws, *, fraction: float, level=float("nan"), floor=float("nan"), scale=float("nan")):
        """Widths about the median, then the draws that leave the regime set to where they end."""
        x = np.asarray(draws, dtype=float)
        if x.size == 0:
            return x
        w_dn, w_up = self.widths(fraction)
        med = float(np.median(x))
        d = x - med
        out = med + np.where(d > 0, w_up, w_dn) * d
        idx, v = self.leave(out.size, fraction=fraction, level=level, floor=floor)
        out[idx] = v
        return out


def apply_layer(cal, draws, *, fraction: float, level: float, floor: float, scale: float) -> np.ndarray:
    """Either kind of layer on one case's draws (the package's needs no anchor of the prefix)."""
    if isinstance(cal, Calibration):
        return cal.apply(draws, fraction=fraction, scale=scale)
    return cal.apply(draws, fraction=fraction, level=level, floor=floor, scale=scale)


def _leave_shares(df, draws, w_case, cut, grid) -> tuple[float, ...]:
    ps = []
    for c in grid:
        m = np.where(np.isclose(cut, c))[0]
        if m.size < 5:
            ps.append(0.0)
            continue
        cost = []
        for p in P_LEAVE_GRID:
            one = VariantCalibration(fraction_grid=(c,), w_up=(1.0,), w_dn=(1.0,), p_leave=(p,), name="fit")
            cost.append(sum(w_case[i] * crps_sample(one.apply(draws[i], fraction=c, level=df["level"][i],
                                                              floor=df["floor"][i]), df["truth"][i]) / df["range"][i]
                            for i in m))  # fmt: skip
        ps.append(float(P_LEAVE_GRID[int(np.argmin(cost))]))
    return tuple(ps)


def fit_variant_layer(cases, *, draws=None, grid=(0.1, 0.2, 0.3, 0.5), level: float = 0.8, w_min: float = 1.0,
                      leave: bool = False, name: str = "variant", provenance=None) -> VariantCalibration:  # fmt: skip
    """Fit width ratios (and with ``leave`` the share of draws leaving the regime) to backtest cases.

    ``cases`` as for :func:`bench.fit_layers.fit_calibration` plus ``q50``; with ``leave``
    also ``range``, ``level`` and ``floor`` (:func:`leave_anchor`) and the draws of every case.
    ``w_min`` is the smallest width ratio (1: only ever widen).
    """
    import pandas as pd

    df = pd.DataFrame(cases).reset_index(drop=True)
    w_case = case_weights(df["source"])
    cut = df["cutoff"].to_numpy(float)
    p_leave = ()
    if leave:
        if draws is None or len(draws) != len(df):
            raise ValueError("fit_variant_layer(leave=True) needs the draws of every case")
        p_leave = _leave_shares(df, draws, w_case, cut, grid)
        lv = VariantCalibration(fraction_grid=tuple(grid), w_up=(1.0,) * len(grid), w_dn=(1.0,) * len(grid),
                                p_leave=p_leave, name="fit")  # fmt: skip
        q = np.array([np.quantile(lv.apply(draws[i], fraction=cut[i], level=df["level"][i], floor=df["floor"][i]),
                                  (0.1, 0.5, 0.9)) for i in range(len(df))])  # fmt: skip
        df = df.assign(q10=q[:, 0], q50=q[:, 1], q90=q[:, 2])
    tail = (1.0 + level) / 2.0
    med = df["q50"].to_numpy(float)
    up = np.maximum(df["q90"].to_numpy(float) - med, 1e-12)
    dn = np.maximum(med - df["q10"].to_numpy(float), 1e-12)
    y = df["truth"].to_numpy(float)
    r_up, r_dn = (y - med) / up, (med - y) / dn
    ws_up, ws_dn = [], []
    for c in grid:
        m = np.isclose(cut, c)
        few = m.sum() < 5
        ws_up.append(1.0 if few else float(np.clip(weighted_quantile(r_up[m], w_case[m], tail), w_min, W_MAX)))
        ws_dn.append(1.0 if few else float(np.clip(weighted_quantile(r_dn[m], w_case[m], tail), w_min, W_MAX)))
    prov = dict(provenance or {})
    prov.update(cases=int(len(df)), sources=int(df["source"].nunique()), level=level, w_min=w_min, leave=bool(leave),
                method="split-conformal width of each tail per observed fraction; cases weigh half per case, half per source")  # fmt: skip
    return VariantCalibration(fraction_grid=tuple(float(g) for g in grid), w_up=tuple(round(v, 4) for v in ws_up),
                              w_dn=tuple(round(v, 4) for v in ws_dn), p_leave=p_leave, name=name, provenance=prov)  # fmt: skip
