"""A calibration layer on the final-reward draws, learned leave-source-out on backtests of real runs.

The physics model describes a run that stays in its regime; real runs also leave it (a rise that
peaks and declines or collapses, a format reward that switches on late -- physics.md section 9). No
prefix can time such an event, but a population of complete runs can price how often the model's
intervals miss, above and below, at each observed fraction. The layer is split-conformal and
asymmetric (conformalised quantiles, Romano et al. 2019, on the model's own quantiles):

    x' = median + w_up(f) (x - median)    for draws above the median
    x' = median + w_dn(f) (x - median)    below it

``f`` = observed fraction of the run; ``w`` interpolated on :attr:`fraction_grid`. ``w_up`` at a
fraction is the weighted 90% quantile of ``(y - median) / (q90 - median)`` over backtest cases of
complete runs at that fraction (and ``w_dn`` the same for the lower tail), so that on those cases
10% of the outcomes fall above the 80% interval and 10% below. Each case weighs half "per case" and
half "per source" (each source the same), so neither the large sources nor the small ones decide
alone. Benchmarks fit the layer without the source they score (leave-one-source-out); the shipped
layer (``bayesgrpo/resources/calibration_<kind>.json``) is fitted on every development run and its
identity is recorded in every saved forecast.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Calibration", "fit_calibration", "identity_calibration", "W_MIN", "W_MAX"]

W_MIN, W_MAX = 0.5, 6.0  # the layer never shrinks an interval below half or widens it beyond 6x


class Calibration(BaseModel):
    """Parameters of the layer (module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fraction_grid: tuple[float, ...] = (0.1, 0.2, 0.3, 0.5)
    w_up: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)
    w_dn: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)
    name: str = "identity"
    provenance: dict = Field(default_factory=dict)

    @property
    def identity(self) -> str:
        d = self.model_dump(exclude={"provenance"})
        return f"{self.name}@sha256:{hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]}"

    def widths(self, fraction: float) -> tuple[float, float]:
        """``(w_dn, w_up)`` at an observed fraction (constant beyond the grid)."""
        return (float(np.interp(fraction, self.fraction_grid, self.w_dn)),
                float(np.interp(fraction, self.fraction_grid, self.w_up)))  # fmt: skip

    def apply(self, draws, *, fraction: float) -> np.ndarray:
        """Calibrated draws (same number and order as ``draws``; run units)."""
        x = np.asarray(draws, dtype=float)
        if x.size == 0:
            return x
        w_dn, w_up = self.widths(fraction)
        med = float(np.median(x))
        d = x - med
        return med + np.where(d > 0, w_up, w_dn) * d

    def save(self, path) -> None:
        Path(path).write_text(self.model_dump_json(indent=2) + "\n")

    @classmethod
    def load(cls, path) -> Calibration:
        p = path if hasattr(path, "read_text") else Path(path)
        return cls.model_validate(json.loads(p.read_text()))

    @classmethod
    def default(cls, kind: str = "oscillator") -> Calibration:
        """The packaged layer of ``kind`` (``calibration_<kind>.json``), else the identity."""
        from importlib.resources import files

        res = files("bayesgrpo.resources").joinpath(f"calibration_{kind}.json")
        return cls.load(res) if res.is_file() else identity_calibration()


def identity_calibration() -> Calibration:
    """The layer that changes nothing."""
    return Calibration()


def _wquantile(x: np.ndarray, w: np.ndarray, q: float) -> float:
    o = np.argsort(x)
    cw = np.cumsum(w[o]) / np.sum(w)
    return float(x[o][min(np.searchsorted(cw, q), x.size - 1)])


def fit_calibration(cases, *, grid=(0.1, 0.2, 0.3, 0.5), level: float = 0.8, name: str = "calibration",
                    provenance=None) -> Calibration:
    """Fit the layer to backtest cases of complete runs (split-conformal, asymmetric).

    Parameters
    ----------
    cases : DataFrame
        One row per case with ``source``, ``cutoff``, ``truth`` and the model's quantiles ``q10``,
        ``q50``, ``q90`` of the final reward (a backtest's ``cases.csv``).
    level : float
        The central interval the tails are fitted for (0.8: 10% above, 10% below).
    """
    import pandas as pd

    df = pd.DataFrame(cases).reset_index(drop=True)
    tail = (1.0 + level) / 2.0
    med = df["q50"].to_numpy(float)
    up = np.maximum(df["q90"].to_numpy(float) - med, 1e-12)
    dn = np.maximum(med - df["q10"].to_numpy(float), 1e-12)
    y = df["truth"].to_numpy(float)
    r_up, r_dn = (y - med) / up, (med - y) / dn
    n_src = df.groupby("source")["source"].transform("count").to_numpy(float)
    w_case = 0.5 / len(df) + 0.5 / (df["source"].nunique() * n_src)
    ws_up, ws_dn = [], []
    for c in grid:
        m = np.isclose(df["cutoff"].to_numpy(float), c)
        if m.sum() < 5:
            ws_up.append(1.0)
            ws_dn.append(1.0)
            continue
        ws_up.append(float(np.clip(_wquantile(r_up[m], w_case[m], tail), W_MIN, W_MAX)))
        ws_dn.append(float(np.clip(_wquantile(r_dn[m], w_case[m], tail), W_MIN, W_MAX)))
    prov = dict(provenance or {})
    prov.update(cases=int(len(df)), sources=int(df["source"].nunique()), level=level,
                method="split-conformal width of each tail per observed fraction; cases weigh half per case, half per source")  # fmt: skip
    return Calibration(fraction_grid=tuple(float(g) for g in grid), w_up=tuple(round(v, 4) for v in ws_up),
                       w_dn=tuple(round(v, 4) for v in ws_dn), name=name, provenance=prov)  # fmt: skip
