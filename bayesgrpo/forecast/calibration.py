"""A calibration layer on the final-reward draws, learned leave-source-out on backtests of real runs.

The physics model describes a run that stays in its regime. Real runs also leave it: a rise that
peaks and declines or collapses, a format reward that switches on late, a jump no prefix shows
(physics.md section 9). No prefix can time such an event, but a population can price it. This layer
turns the model's predictive draws ``F`` of the final reward into a mixture:

* with probability ``1 - pi``: the model's draws, their spread around the median scaled by ``w(f)``
  (``f`` = observed fraction of the run; ``w`` interpolated on :attr:`fraction_grid`);
* with probability ``pi = 1 - exp(-hazard * (1 - f))`` -- a constant hazard of leaving the regime per
  unit of the remaining run -- the draw moves by a jump ``scale * (jump_loc + jump_sd * t_nu)``
  (``scale`` = the run's normalising scale, ``t_nu`` a Student-t; ``jump_loc < 0`` when leaving the
  regime mostly means declining).

The parameters are fitted by minimising the source-weighted mean CRPS of backtest forecasts
(:func:`fit_calibration`); benchmarks fit them without the source they score (leave-one-source-out).
The shipped layer (``bayesgrpo/resources/calibration_<kind>.json``) is fitted on every development
run; its provenance is recorded in every saved forecast.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Calibration", "fit_calibration", "identity_calibration"]


class Calibration(BaseModel):
    """Parameters of the layer (module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fraction_grid: tuple[float, ...] = (0.1, 0.2, 0.3, 0.5)
    width: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)
    hazard: float = Field(0.0, ge=0.0)
    jump_loc: float = 0.0
    jump_sd: float = Field(0.5, gt=0.0)
    jump_df: float = Field(3.0, gt=1.0)
    name: str = "identity"
    provenance: dict = Field(default_factory=dict)

    @property
    def identity(self) -> str:
        import hashlib

        d = self.model_dump(exclude={"provenance"})
        return f"{self.name}@sha256:{hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]}"

    def leave_probability(self, fraction) -> np.ndarray:
        f = np.clip(np.asarray(fraction, dtype=float), 0.0, 1.0)
        return 1.0 - np.exp(-self.hazard * (1.0 - f))

    def apply(self, draws, *, scale: float, fraction: float, seed=0) -> np.ndarray:
        """Calibrated draws of the final reward (same number as ``draws``; run units)."""
        x = np.asarray(draws, dtype=float)
        if x.size == 0:
            return x
        rng = np.random.default_rng(seed)
        w = float(np.interp(fraction, self.fraction_grid, self.width))
        med = float(np.median(x))
        out = med + w * (x - med)
        leave = rng.uniform(size=x.size) < float(self.leave_probability(fraction))
        if leave.any():
            jump = self.jump_loc + self.jump_sd * rng.standard_t(self.jump_df, size=int(leave.sum()))
            out[leave] = out[leave] + float(scale) * jump
        return out

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
    """The layer that changes nothing (no width change, no regime change)."""
    return Calibration()


def _crps_sorted(xs: np.ndarray, y: np.ndarray) -> np.ndarray:
    n = xs.shape[1]
    coef = 2.0 * np.arange(n) - n + 1.0
    return np.mean(np.abs(xs - y[:, None]), axis=1) - (xs @ coef) / (n * n)


def fit_calibration(cases, draws: dict, *, grid=(0.1, 0.2, 0.3, 0.5), n_mc: int = 400, seed: int = 0,
                    name: str = "calibration", provenance=None) -> Calibration:
    """Fit the layer to backtest cases by minimising their source-weighted mean normalised CRPS.

    Parameters
    ----------
    cases : DataFrame
        Backtest rows with ``key`` (matching ``draws``), ``source``, ``cutoff``, ``truth``, ``range``,
        ``scale``.
    draws : dict
        ``key -> final-reward draws`` of the model for each case.
    """
    from scipy import optimize

    df = cases.reset_index(drop=True)
    X = np.stack([np.sort(np.asarray(draws[k], dtype=float))[np.linspace(0, len(draws[k]) - 1, n_mc).round().astype(int)]
                  for k in df["key"]])  # fmt: skip
    y = df["truth"].to_numpy(float)
    rng_ = df["range"].to_numpy(float)
    sc = df["scale"].to_numpy(float)
    f = df["cutoff"].to_numpy(float)
    w_case = 1.0 / df.groupby(["source"])["key"].transform("count").to_numpy(float)
    rng = np.random.default_rng(seed)
    u = rng.uniform(size=X.shape)
    t = rng.standard_t(3.0, size=X.shape)
    med = np.median(X, axis=1, keepdims=True)
    gi = np.array([int(np.argmin(np.abs(np.asarray(grid) - c))) for c in f])

    def unpack(th):
        width = np.exp(th[: len(grid)])
        return width, np.exp(th[len(grid)]), th[len(grid) + 1], np.exp(th[len(grid) + 2])

    def loss(th):
        width, hz, jl, js = unpack(th)
        out = med + width[gi][:, None] * (X - med)
        pi = (1.0 - np.exp(-hz * (1.0 - f)))[:, None]
        out = np.where(u < pi, out + sc[:, None] * (jl + js * t), out)
        crps = _crps_sorted(np.sort(out, axis=1), y) / rng_
        return float(np.sum(w_case * crps) / np.sum(w_case))

    th0 = np.r_[np.zeros(len(grid)), np.log(0.3), 0.0, np.log(0.5)]
    res = optimize.minimize(loss, th0, method="Nelder-Mead", options={"maxiter": 1500, "xatol": 1e-3, "fatol": 1e-6})
    width, hz, jl, js = unpack(res.x)
    prov = dict(provenance or {})
    prov.update(cases=int(len(df)), sources=int(df["source"].nunique()), objective="source-weighted mean CRPS / range",
                loss=round(float(res.fun), 5), loss_identity=round(loss(np.r_[np.zeros(len(grid)), -30.0, 0.0, 0.0]), 5))  # fmt: skip
    return Calibration(fraction_grid=tuple(float(g) for g in grid), width=tuple(round(float(v), 4) for v in width),
                       hazard=round(float(hz), 4), jump_loc=round(float(jl), 4), jump_sd=round(float(js), 4),
                       name=name, provenance=prov)  # fmt: skip
