"""From a :class:`~bayesgrpo.schema.RunSet` to the arrays a model is built from.

Conventions (one place for all of them):

* **Grid.** Each run lives on the unit-step grid from its first logged step ``s0`` to its last logged
  step; runs are padded to a common length with ``mask = 0`` (padding never enters the likelihood).
* **Reward bounds.** ``[L, U]`` from metadata ``reward_min`` / ``reward_max`` (``--reward-range``);
  when they are not given and every observed reward lies in [0, 1], the reward is taken to be a 0-1
  rate (accuracy, pass rate) with bounds [0, 1] ("inferred"; every development run whose prefix lay
  in [0, 1] stayed there). A reward that uses less than :data:`INFER_MIN_SHARE` (5%) of [0, 1] is
  assumed a rate only with a :class:`DataWarning` that says how to declare its bounds (a pass rate
  flat at its floor, 0.01, may still rise -- the case the assumption is for -- but 0.001-0.007 may as
  well be another scale), and not at all below :data:`RATE_RESOLUTION` (no batch pass rate is that
  fine: a 1e-12 reward keeps its own scale); otherwise the bounds are unknown.
* **Normalisation.** Per run, ``z = (reward - loc) / scale`` with ``loc`` = mean of the first
  ``max(3, 10%)`` observed points (the start level) and ``scale`` = the full range (max - min) of the
  observed rewards -- the rare batches that already reach a high reward show how far the run can
  rise before it rises (measured: the misses of a robust 5-95% range were the late rises of
  bimodal, few-completion rewards) -- but at least :data:`SCALE_FLOOR` of the reward's range
  ``U - L`` when the bounds are known: a flat prefix must not shrink the future to the prefix (a
  run flat at 0.01 of a 0-1 reward may still rise to 0.5). Everything is reported back in
  the run's own units through the exact inverse. A constant observed curve with unknown bounds gets
  the scale :data:`CONSTANT_SCALE` x |level| (x 1 at level 0) and a :class:`DataWarning` saying so.
* **Noise estimate.** :func:`bayesgrpo.series.noise_sd` of the normalised rewards, floored at
  :data:`NOISE_FLOOR` (2% of the scale).
* **Horizon.** ``horizon`` argument, else metadata ``max_steps``, else :class:`ForecastError`.
* **Timescale.** The prior of ``tau`` is in optimizer steps: measured on the development runs
  (per-run fits of complete runs, ``bench/fit_population_prior.py``), ``log tau`` in steps spreads
  1.23 across runs, ``log(tau / run length)`` 1.34 -- the planned length carries no information about
  the timescale beyond the steps themselves, so the posterior of a prefix never depends on the
  horizon asked for.
* **Observed fraction.** The population prior is conditional on the share of the planned run
  already observed, ``f = (last - s0) / (planned - s0)`` (in prefix units the gain still to come
  shrinks as more of the rise is seen: fitted ``gain_mu`` 0.91 at f = 0.1, 0.55 at f = 0.5).
  ``planned`` is metadata ``max_steps`` when it lies after the last logged step, else the horizon:
  with ``max_steps`` known, asking for another horizon changes nothing about the posterior, and a
  forecast to an earlier step is the forecast of the planned run read at that step (the calibration
  layer, fitted at the planned end, widens pro rata: :meth:`RunInfo.time_to_go`). An explicit
  horizon that differs from ``max_steps`` is warned about (:func:`bayesgrpo.forecast.batch.forecast_batch`).
* **Model size.** ``log_size = log(params_b / REFERENCE_SIZE_B)``; ``size_known = 0`` where
  ``params_b`` is missing (the scaling kind then gives the run no size effect, with the population's
  size spread added to its timescale prior -- never the reference size).
* **Lag.** Metadata ``refresh_interval`` K > 1 gives the refresh pattern d_n = n mod K (n = grid index
  from ``s0``; :func:`lag_sequence`); else d = 0. The model arrays carry K per run (``refresh``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from bayesgrpo.errors import DataWarning, ForecastError
from bayesgrpo.models.kinds import ModelArrays
from bayesgrpo.models.prior import PopulationPrior
from bayesgrpo.schema import REWARD, RUN, STEP, RunSet
from bayesgrpo.series import noise_sd, start_level

__all__ = ["RunInfo", "prepare_arrays", "reward_bounds", "MIN_POINTS", "REFERENCE_SIZE_B", "SCALE_FLOOR"]

MIN_POINTS = 5
REFERENCE_SIZE_B = 4.0  # reference model size (billions) of the curvature-scaling law (median of the dev runs)
LOG_SIZE_SD = 0.8  # spread of log model size across the development runs (for runs of unknown size)
SCALE_FLOOR = 0.25  # the normalising scale is at least this share of a known reward range
CONSTANT_SCALE = 0.1  # scale of a constant curve of unknown bounds, per unit of its |level| (1 at level 0)
INFER_MIN_SHARE = 0.05  # [0, 1] is inferred silently only for rewards that reach this share of it
RATE_RESOLUTION = 1e-3  # a reward whose every value is below this is not assumed to be a rate in [0, 1]


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
    planned: int = 0
    reward_min: float = float("nan")
    reward_max: float = float("nan")
    bounds: str = ""  # "metadata", "inferred" or "" (unknown)

    def time_to_go(self, steps) -> np.ndarray:
        """Share of the planned run's time to go at ``steps``: 0 at the last observation, 1 at the planned
        end (and after it): how much of the calibration layer's widening a forecast at ``steps`` gets."""
        end = self.planned if self.planned > self.last_step else self.horizon
        go = (np.asarray(steps, dtype=float) - self.last_step) / max(1, end - self.last_step)
        return np.clip(go, 0.0, 1.0)

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


NOISE_FLOOR = 0.02  # normalised units: a prior centre below 2% of the reward scale is not credible
SIGMA_M_FLOOR = 0.01  # normalised units: the measurement noise never falls below 1% of the reward scale
NOISE_FEW_POINTS = 0.3  # prior centre of the noise when there are too few differences to estimate it


def _noise_estimate(z: np.ndarray) -> float:
    if len(z) < 3:
        return NOISE_FEW_POINTS
    return float(max(noise_sd(z), NOISE_FLOOR))


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


def reward_bounds(meta_row, rewards, *, where: str = "the run") -> tuple[float, float, str]:
    """``(L, U, source)`` of a run's reward: metadata, inferred [0, 1], or unknown (NaN, NaN, "")
    (module docstring; ``where`` names the run in the warning about a reward too small to infer)."""
    lo, hi = _num(meta_row, "reward_min"), _num(meta_row, "reward_max")
    if math.isfinite(lo) and math.isfinite(hi):
        return lo, hi, "metadata"
    r = np.asarray(rewards, dtype=float)
    r = r[np.isfinite(r)]
    if r.size and r.min() >= 0.0 and r.max() <= 1.0 and not (math.isfinite(lo) or math.isfinite(hi)):
        if r.max() >= INFER_MIN_SHARE:
            return 0.0, 1.0, "inferred"
        rate = r.max() >= RATE_RESOLUTION
        warnings.warn(
            f"{where}: its rewards lie in [{r.min():.3g}, {r.max():.3g}], less than {INFER_MIN_SHARE:.0%} of [0, 1]; "
            + ("assumed a rate in [0, 1] (a rate flat at its floor may still rise)" if rate else
               "not assumed a rate in [0, 1] (finer than any batch pass rate): no bounds")
            + "; declare them with --reward-range LO,HI (or reward_min/reward_max in --meta)",
            DataWarning,
            stacklevel=3,
        )  # fmt: skip
        if rate:
            return 0.0, 1.0, "inferred"
    if math.isfinite(lo) or math.isfinite(hi):  # one bound only: use it as given, the other unknown
        return lo, hi, "metadata"
    return float("nan"), float("nan"), ""


def prepare_arrays(
    runs: RunSet,
    *,
    horizon: int | dict | None = None,
    prior: PopulationPrior | None = None,
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
    zs, masks_steps, noises, r0s, floors, ceils = [], [], [], [], [], []
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
        lo_b, hi_b, bsrc = reward_bounds(meta, rn, where=where)
        if bsrc == "metadata":  # declared bounds the log contradicts would clip every forecast silently
            tol = 1e-9 * max(1.0, abs(lo_b) if math.isfinite(lo_b) else 0.0, abs(hi_b) if math.isfinite(hi_b) else 0.0)
            for bad, name, bound in (
                (r > hi_b + tol, "above reward_max", hi_b),
                (r < lo_b - tol, "below reward_min", lo_b),
            ):
                if bad.any():
                    k = int(np.flatnonzero(bad)[0])
                    raise ForecastError(
                        f"{where}: the logged reward {r[k]:g} at step {int(s[k])} is {name} {bound:g} (metadata or "
                        f"--reward-range; {int(bad.sum())} point(s) outside); give the reward's true range"
                    )
        loc = start_level(rn)
        # the full range of the prefix, not a robust one: the rare batches that already reach a high
        # reward (0/1-like rewards of few completions, a format reward that starts to switch on) are
        # what shows how far the run can rise before the rise
        scale = float(np.ptp(rn)) if np.ptp(rn) > 1e-12 * max(1.0, abs(loc)) else 0.0
        width = hi_b - lo_b if math.isfinite(hi_b) and math.isfinite(lo_b) else float("nan")
        if math.isfinite(width):
            scale = max(scale, SCALE_FLOOR * width)
        elif scale <= 0.0:
            scale = CONSTANT_SCALE * (
                abs(loc) if abs(loc) > 0 else 1.0
            )  # 10% of its level: a 1e-12 reward keeps its scale
            warnings.warn(
                f"{where}: the observed reward is constant ({loc:g}) and its range is unknown; the forecast's "
                f"width rests on an assumed scale of {scale:g} (give reward_min/reward_max or --reward-range "
                "for an honest one)",
                DataWarning,
                stacklevel=2,
            )
        z = (r - loc) / scale
        zn = z if normalize_with is None else (rn - loc) / scale  # the rows the normalisation comes from
        noises.append(_noise_estimate(zn))
        r0s.append(float(start_level(zn)))  # the start level, in normalised units
        floors.append((lo_b - loc) / scale if math.isfinite(lo_b) else np.nan)
        ceils.append((hi_b - loc) / scale if math.isfinite(hi_b) else np.nan)
        interval = int(np.median(np.diff(s))) if len(s) > 1 else 1
        ms_ = _num(meta, "max_steps")
        planned = int(ms_) if math.isfinite(ms_) and ms_ > s[-1] else H
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
                planned=planned,
                reward_min=lo_b,
                reward_max=hi_b,
                bounds=bsrc,
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
    fam_order = list(dict.fromkeys(fam_names))
    fam_idx = np.array([fam_order.index(f) if f in fam_order else 0 for f in fam_names], dtype=np.int64)
    beta1 = np.array([_num(runs.meta.loc[i.run_id], "beta1") for i in infos])
    mu_known = (~np.isnan(beta1)).astype(float)
    mu_mean = np.where(np.isnan(beta1), prior.mu_default, np.clip(beta1, 0.01, 0.99))
    size = np.array([_num(runs.meta.loc[i.run_id], "params_b") for i in infos])
    size_known = (np.isfinite(size) & (size > 0)).astype(float)
    log_size = np.where(size_known > 0, np.log(np.where(size_known > 0, size, 1.0) / REFERENCE_SIZE_B), 0.0)
    floor = np.array(floors, dtype=float)
    ceil = np.array(ceils, dtype=float)
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
        size_known=size_known,
        r0_obs=np.array(r0s),
        floor=np.where(np.isfinite(floor), floor, 0.0),
        floor_known=np.isfinite(floor).astype(float),
        ceil=np.where(np.isfinite(ceil), ceil, 0.0),
        ceil_known=np.isfinite(ceil).astype(float),
        fraction=np.array([(i.last_step - i.s0) / max(1, i.planned - i.s0) for i in infos]),
        run_ids=tuple(i.run_id for i in infos),
        families=tuple(fam_order),
    )
    return arrays, infos


def lag_sequence(info: RunInfo, steps_from_s0: np.ndarray) -> np.ndarray:
    """Lag d used in the transition out of each given grid step (refresh pattern or 0)."""
    if info.refresh_interval <= 1:
        return np.zeros(len(steps_from_s0), dtype=int)
    return np.mod(steps_from_s0, info.refresh_interval).astype(int)
