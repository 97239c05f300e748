"""From a :class:`~bayesgrpo.schema.RunSet` to the arrays a model is built from.

Conventions (one place for all of them):

* **Grid.** Each run lives on the unit-step grid from its first logged step ``s0`` to its last logged
  step; runs are padded to a common length with ``mask = 0`` (padding never enters the likelihood).
* **Normalisation.** Per run, ``z = (reward - loc) / scale`` with ``loc`` = mean of the first
  ``max(3, 10%)`` observed points (the start level) and ``scale`` = 5%–95% quantile range of the
  observed rewards. Everything is reported back in the run's own units through the exact inverse.
  A constant observed curve gets a unit-free fallback scale and a :class:`DataWarning`.
* **Noise estimate.** Robust measurement sd from first differences: ``1.4826 * MAD(diff) / sqrt(2)``.
* **Horizon.** ``horizon`` argument, else metadata ``max_steps``, else :class:`ForecastError`.
* **Lag.** Metadata ``refresh_interval`` K > 1 gives the refresh pattern d_n = n mod K (n = grid index
  from ``s0``; :func:`lag_sequence`); else d = 0. The model arrays carry K per run (``refresh``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from bayesgrpo.errors import DataWarning, ForecastError
from bayesgrpo.models import ModelArrays
from bayesgrpo.population import PopulationPrior
from bayesgrpo.schema import REWARD, RUN, STEP, RunSet

__all__ = ["RunInfo", "prepare_arrays", "MIN_POINTS", "REFERENCE_SIZE_B"]

MIN_POINTS = 5
REFERENCE_SIZE_B = 7.0  # reference model size (billions) of the curvature-scaling law


@dataclass(frozen=True)
class RunInfo:
    """Per-run bookkeeping needed to go back to the run's own steps and units."""

    run_id: str
    s0: int
    last_step: int
    horizon: int
    interval: int
    loc: float
    scale: float
    n_obs: int
    refresh_interval: int
    model_name: str

    def future_steps(self) -> np.ndarray:
        """Logged steps after the last observation, up to the horizon, at the run's interval."""
        return np.arange(self.last_step + self.interval, self.horizon + 1, self.interval, dtype=np.int64)

    def final_steps(self, final_window: float) -> np.ndarray:
        """Logged steps of the final window (s0 + (1 - w)(H - s0), H] at the run's interval."""
        lo = self.s0 + (1.0 - final_window) * (self.horizon - self.s0)
        grid = np.arange(self.s0, self.horizon + 1, self.interval, dtype=np.int64)
        if grid[-1] != self.horizon:
            grid = np.append(grid, self.horizon)
        return grid[grid > lo]


def _robust_noise(z: np.ndarray) -> float:
    d = np.diff(z)
    if len(d) < 2:
        return 0.3
    mad = 1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2.0)
    if mad <= 1e-6:  # quantised rewards: many identical differences
        mad = float(np.std(d)) / math.sqrt(2.0)
    return float(max(mad, 0.02))


def _family(meta_row) -> str:
    for key in ("family", "model"):
        v = meta_row.get(key)
        if isinstance(v, str) and v:
            return v
    return "unknown"


def _num(meta_row, key) -> float:
    v = meta_row.get(key)
    try:
        v = float(v)
    except (TypeError, ValueError):
        return float("nan")
    return v


def prepare_arrays(
    runs: RunSet,
    *,
    horizon: int | dict | None = None,
    prior: PopulationPrior | None = None,
    families: list[str] | None = None,
    min_points: int = MIN_POINTS,
    normalize_with: RunSet | None = None,
) -> tuple[ModelArrays, list[RunInfo]]:
    """Build model arrays and per-run info for every run of ``runs``.

    Parameters
    ----------
    runs : RunSet
        The observed runs (their logged prefix).
    horizon : int or dict, optional
        Forecast horizon (a step), one for all runs or per run id; defaults to metadata ``max_steps``.
    prior : PopulationPrior, optional
    families : list of str, optional
        Family order (for hierarchical models); default: order of first appearance.
    min_points : int
        Fewer observed points raise :class:`ForecastError` naming the run.
    normalize_with : RunSet, optional
        Compute each run's normalisation (loc, scale, noise estimate) from these rows instead (used to
        fit complete runs in the units a forecast from their prefix would use; see
        ``bench/fit_population_prior.py``).

    Raises
    ------
    ForecastError
        Too few points, no horizon, or a horizon not after the last observed step.
    """
    prior = prior or PopulationPrior.default()
    infos: list[RunInfo] = []
    zs, masks_steps, noises, r0s = [], [], [], []
    fam_names = []
    for rid in runs.run_ids:
        g = runs.data.loc[runs.data[RUN] == rid]
        meta = runs.meta.loc[rid]
        s = g[STEP].to_numpy(dtype=np.int64)
        r = g[REWARD].to_numpy(dtype=float)
        where = f"run {rid!r}" + (f" ({runs.source})" if runs.source else "")
        if len(s) < min_points:
            raise ForecastError(
                f"{where} has {len(s)} logged reward point(s); a forecast needs at least {min_points}. "
                "Wait for more steps or drop the run (--run)."
            )
        if isinstance(horizon, dict):
            H = horizon.get(rid)
        else:
            H = horizon
        if H is None or (isinstance(H, float) and math.isnan(H)):
            H = _num(meta, "max_steps")
            if math.isnan(H):
                raise ForecastError(
                    f"{where}: no horizon. Pass --horizon STEPS (or horizon=...) or log max_steps in the metadata."
                )
        H = int(H)
        if H <= s[-1]:
            raise ForecastError(
                f"{where}: the horizon {H} is not after the last logged step {s[-1]}; nothing to forecast. "
                "Pass a larger --horizon."
            )
        rn = r if normalize_with is None else normalize_with.run(rid)[REWARD].to_numpy(dtype=float)
        k = max(3, int(math.ceil(0.1 * len(rn))))
        loc = float(np.mean(rn[:k]))
        q05, q95 = np.quantile(rn, [0.05, 0.95])
        scale = float(q95 - q05)
        if scale <= 1e-9 * max(1.0, abs(loc)):
            warnings.warn(
                f"{where}: the observed reward is constant ({loc:g}); the forecast uses a unit scale "
                f"of {max(abs(loc), 1.0):g} and will be wide.",
                DataWarning,
                stacklevel=2,
            )
            scale = max(abs(loc), 1.0)
        z = (r - loc) / scale
        zn = z if normalize_with is None else (rn - loc) / scale  # the rows the normalisation comes from
        noises.append(_robust_noise(zn))
        r0s.append(float(np.mean(zn[:k])))  # the start level, in normalised units
        interval = int(np.median(np.diff(s))) if len(s) > 1 else 1
        K = _num(meta, "refresh_interval")
        K = int(K) if not math.isnan(K) and K >= 1 else 1
        infos.append(
            RunInfo(
                run_id=rid,
                s0=int(s[0]),
                last_step=int(s[-1]),
                horizon=H,
                interval=max(interval, 1),
                loc=loc,
                scale=scale,
                n_obs=len(s),
                refresh_interval=K,
                model_name=str(meta.get("model")) if isinstance(meta.get("model"), str) else "",
            )
        )
        zs.append(z)
        masks_steps.append(s - s[0])
        fam_names.append(_family(meta))
    T = max(int(ms[-1]) + 1 for ms in masks_steps)
    R = len(infos)
    y = np.zeros((T, R))
    mask = np.zeros((T, R))
    for j, (z, ms) in enumerate(zip(zs, masks_steps)):
        y[ms, j] = z
        mask[ms, j] = 1.0
    fam_order = families or list(dict.fromkeys(fam_names))
    fam_idx = np.array([fam_order.index(f) if f in fam_order else 0 for f in fam_names], dtype=np.int64)
    beta1 = np.array([_num(runs.meta.loc[i.run_id], "beta1") for i in infos])
    mu_known = (~np.isnan(beta1)).astype(float)
    mu_mean = np.where(np.isnan(beta1), prior.mu_default, np.clip(beta1, 0.01, 0.99))
    size = np.array([_num(runs.meta.loc[i.run_id], "params_b") for i in infos])
    log_size = np.where(np.isnan(size) | (size <= 0), 0.0, np.log(np.where(size > 0, size, 1.0) / REFERENCE_SIZE_B))
    arrays = ModelArrays(
        y=y,
        mask=mask,
        refresh=np.array([i.refresh_interval for i in infos], dtype=np.int64),  # lag pattern: lag_sequence
        span=np.array([float(i.horizon - i.s0) for i in infos]),
        noise=np.array(noises),
        mu_mean=mu_mean,
        mu_known=mu_known,
        family_idx=fam_idx,
        log_size=log_size,
        r0_obs=np.array(r0s),
        run_ids=tuple(i.run_id for i in infos),
        families=tuple(fam_order),
    )
    return arrays, infos


def lag_sequence(info: RunInfo, steps_from_s0: np.ndarray) -> np.ndarray:
    """Lag d used in the transition out of each given grid step (refresh pattern or 0)."""
    if info.refresh_interval <= 1:
        return np.zeros(len(steps_from_s0), dtype=int)
    return np.mod(steps_from_s0, info.refresh_interval).astype(int)

