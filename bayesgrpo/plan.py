"""The run plan: what every front end must know about a run before it is forecast, defined once.

:func:`plan_runs` turns a :class:`~bayesgrpo.schema.RunSet` and the options into one frozen
:class:`RunPlan` per run. ``forecast_batch`` (every CLI verb), the live worker (the TRL callback and
``watch``), the backtest harness, ``compare``, ``diagnose`` and :meth:`Forecaster.fit
<bayesgrpo.forecast.Forecaster.fit>` all plan their runs here. A plan holds:

* **truncation** -- the observed prefix: steps ``<= until_step``, or the first ``until_fraction`` of
  the run's step span, ``s0 + f (s1 - s0)`` (a backtest's cutoff is the same cut);
* **the horizon** and where it came from (:data:`HORIZON_SOURCES`): the option (one for all runs or
  per run); else the run's planned length (metadata ``max_steps``), and for a truncated run at least
  its last logged step; ``"next"`` asks for one logged step after the last (a complete curve whose
  posterior is wanted: compare, diagnose, per-run fits). A horizon the user or the trainer set is
  never moved: a run logged up to (or past) its horizon is **complete** (``RunPlan.complete``; its
  final reward is observed, and ``forecast_batch`` reports it without a fit);
* **the planned length** the population prior is conditioned on (``max_steps`` when it lies after
  the last logged step, else the horizon) and the **observed fraction** ``(last - s0) / (planned - s0)``;
* **the logging interval** -- the median step difference of the observed prefix (at least 1);
* **the reward bounds** -- metadata ``reward_min`` / ``reward_max`` (``--reward-range``); else
  ``[0, 1]`` when every observed reward lies in it (:func:`is_unit_interval`, one tolerance:
  :data:`BOUND_TOL`); else unknown; declared bounds the log contradicts are an error;
* **the final window** -- the logged steps of ``(s0 + (1 - w)(H - s0), H]`` (:func:`final_window_mask`);
* **the minimum points** (:data:`MIN_POINTS`) and **the limits** (:data:`MEMORY_LIMIT_BYTES`,
  :data:`MAX_GRID_STEPS`, :data:`MAX_FUTURE_STEPS`, :data:`MAX_STORED_STEPS`);
* **the reason a run cannot be forecast** (``RunPlan.error``: one line naming the run), or None.

Issue 19's changes to horizons are here: finished runs are complete (:func:`_plan_one`), the live
path uses the same horizon rule as every other (:func:`_horizon`), and the cost limits of a sparse
step grid or a far horizon (:func:`_grid_error`, :func:`horizon_error`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Final, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from bayesgrpo.conventions import DEFAULT_FINAL_WINDOW
from bayesgrpo.errors import DataWarning, ForecastError, OptionError
from bayesgrpo.schema import REWARD, RUN, SOURCE_FILE, STEP, RunSet

__all__ = [
    "RunPlan", "Plans", "PlanOptions", "plan_runs", "truncate", "logging_interval", "is_unit_interval",
    "reward_bounds", "final_window_threshold", "final_window_mask", "final_window_steps", "final_reward", "future_steps",
    "FinalWindow", "MIN_POINTS", "FEW_POINTS", "FEW_POINTS_NOTE", "BOUND_TOL", "MEMORY_LIMIT_BYTES", "MAX_GRID_STEPS", "MAX_FUTURE_STEPS",
    "MAX_STORED_STEPS",
    "NEXT", "HORIZON_SOURCES", "meta_number", "horizon_error", "parse_reward_range", "INFER_MIN_SHARE", "RATE_RESOLUTION",
    "run_where", "logged_steps_per_hour", "STEP_SECONDS_KEYS", "ELAPSED_KEYS",
]  # fmt: skip

#: a forecast needs at least this many logged reward points: the 10% cut of a 30-point run (a custom
#: environment's loop) has 3. Two points are refused: on real runs thinned to that geometry a forecast from 2
#: points covered far below its 80% (``bench/results/short_prefix.md``)
MIN_POINTS = 3
#: below this many points a forecast says it is rough, with what was measured from so few
#: (:data:`FEW_POINTS_NOTE`)
FEW_POINTS = 6
#: what the forecasts from 3-5 points did on the development runs thinned to 40-79 points (selection sources)
FEW_POINTS_NOTE = (
    "on development runs thinned to 40-79 points, forecasts from 3-5 points held the final reward in their 80% "
    "interval 54-57% of the time, ending above it a third of the time, at 0.65-0.74x the CRPS of the last "
    "value's; bench/results/short_prefix.md"
)
#: the one tolerance of a reward's bounds, relative to max(1, |bound|): "is this a 0-1 reward" and
#: "does the log contradict the declared bounds"
BOUND_TOL = 1e-9
#: [0, 1] is inferred silently only for rewards that reach this share of it
INFER_MIN_SHARE = 0.05
#: a reward whose every value is below this is not assumed to be a rate in [0, 1]
RATE_RESOLUTION = 1e-3
#: refuse a forecast whose posterior paths would need more memory than this (per run, in bytes)
MEMORY_LIMIT_BYTES = 2 * 1024**3
#: refuse a run whose logged steps span more grid steps than this: the model steps every optimizer step,
#: so a fit costs the grid's length however few points are logged on it (bench/results/grid_cost.md)
MAX_GRID_STEPS = 20_000
#: at most this many steps after the last logged one are forecast: every future step of every draw is
#: propagated (bench/results/grid_cost.md)
MAX_FUTURE_STEPS = 100_000
#: at most this many future steps are stored per path (long horizons are thinned evenly; the final
#: window is accumulated exactly while propagating)
MAX_STORED_STEPS = 2000
#: ``horizon=NEXT``: one logged step after each run's last (a complete curve; no future is wanted)
NEXT: Final = "next"
#: where a plan's horizon came from
HORIZON_SOURCES = ("option", "max_steps", "log", "next", "")

#: the final window as an option: a share of the run in (0, 1]
FinalWindow = Annotated[float, Field(gt=0.0, le=1.0, description="final reward = mean over this last share of the run")]

HorizonSpec = int | Mapping[str, int | None] | Literal["next"] | None


class PlanOptions(BaseModel):
    """The options of a plan, with their bounds (the CLI derives its checks and messages from these)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    horizon: int | None = Field(None, ge=1, description="step to forecast to")
    until_step: int | None = Field(None, description="use only steps <= this")
    until_fraction: float | None = Field(None, gt=0.0, lt=1.0, description="use only this first share of each run")
    final_window: FinalWindow = DEFAULT_FINAL_WINDOW
    min_points: int = Field(MIN_POINTS, ge=2, description="logged points a forecast needs")

    @model_validator(mode="after")
    def _one_cut(self):
        if self.until_step is not None and self.until_fraction is not None:
            raise ValueError("give until_step or until_fraction, not both")
        return self


# ----------------------------------------------------------------------------------- the facts
def logging_interval(steps) -> int:
    """The run's logging interval: the median difference of its logged steps, at least 1 (1 for one point)."""
    s = np.asarray(steps)
    return max(1, int(np.median(np.diff(s)))) if s.size > 1 else 1


#: logged columns holding the seconds of one optimizer step (verl, TRL >= 0.2x, from-scratch loops), in the order read
STEP_SECONDS_KEYS = ("timing_s/step", "step_time", "iter_time_s", "perf/time_per_step")
#: logged columns holding the seconds elapsed since the run started (verl's file logger, W&B exports)
ELAPSED_KEYS = ("elapsed_seconds", "_runtime")


def logged_steps_per_hour(df) -> tuple[float, str] | None:
    """The run's optimizer steps per hour from the times its log records, and the column read: ``3600 /`` the
    median seconds per step of the first :data:`STEP_SECONDS_KEYS` column it logs, else the median rate of
    the intervals between logged :data:`ELAPSED_KEYS` times (a restart that resets the clock is skipped);
    None when the log records no time."""
    for key in STEP_SECONDS_KEYS:
        if key in df.columns:
            v = np.asarray(df[key], dtype=float)
            v = v[np.isfinite(v) & (v > 0)]
            if v.size:
                return 3600.0 / float(np.median(v)), key
    for key in ELAPSED_KEYS:
        if key in df.columns:
            d = df[[STEP, key]].astype(float).dropna().sort_values(STEP)
            ds, dt = np.diff(d[STEP].to_numpy()), np.diff(d[key].to_numpy())
            ok = (ds > 0) & (dt > 0)
            if ok.any():
                return 3600.0 * float(np.median(ds[ok] / dt[ok])), key
    return None


def _tol(*bounds: float) -> float:
    return BOUND_TOL * max([1.0] + [abs(b) for b in bounds if math.isfinite(b)])


def is_unit_interval(values) -> bool:
    """Every finite value lies in [0, 1] (within :data:`BOUND_TOL`): a 0-1 rate (accuracy, pass rate).
    False when there is no finite value."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return bool(v.size) and float(v.min()) >= -_tol(0.0, 1.0) and float(v.max()) <= 1.0 + _tol(0.0, 1.0)


def meta_number(meta_row, key: str) -> float:
    """A numeric metadata field of a run (``meta_row``: its row of ``RunSet.meta``); NaN when missing."""
    try:
        v = float(meta_row.get(key))
    except (TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) else math.nan


def reward_bounds(meta_row, rewards, *, where: str = "the run") -> tuple[float, float, str]:
    """``(L, U, source)`` of a run's reward: declared (``"metadata"``; one bound may be missing),
    inferred ``[0, 1]`` (``"inferred"``: every observed reward lies in it), or unknown (NaN, NaN, "").

    A reward that uses less than :data:`INFER_MIN_SHARE` of [0, 1] is assumed a rate only with a
    :class:`~bayesgrpo.errors.DataWarning` naming ``where`` and how to declare its bounds (a pass rate
    flat at its floor, 0.01, may still rise; 0.001-0.007 may as well be another scale), and not at all
    below :data:`RATE_RESOLUTION` (no batch pass rate is that fine: a 1e-12 reward keeps its scale)."""
    lo, hi = meta_number(meta_row, "reward_min"), meta_number(meta_row, "reward_max")
    if math.isfinite(lo) or math.isfinite(hi):
        return lo, hi, "metadata"
    if not is_unit_interval(rewards):
        return math.nan, math.nan, ""
    v = np.asarray(rewards, dtype=float)
    v = v[np.isfinite(v)]
    if float(v.max()) >= INFER_MIN_SHARE:
        return 0.0, 1.0, "inferred"
    rate = float(v.max()) >= RATE_RESOLUTION
    warnings.warn(
        f"{where}: its rewards lie in [{v.min():.3g}, {v.max():.3g}], less than {INFER_MIN_SHARE:.0%} of [0, 1]; "
        + ("assumed a rate in [0, 1] (a rate flat at its floor may still rise)" if rate else
           "not assumed a rate in [0, 1] (finer than any batch pass rate): no bounds")
        + "; declare them with --reward-range LO,HI (or reward_min/reward_max in --meta)",
        DataWarning,
        stacklevel=4,
    )  # fmt: skip
    return (0.0, 1.0, "inferred") if rate else (math.nan, math.nan, "")


def parse_reward_range(text: str | None) -> tuple[float, float] | None:
    """``"0,1"`` -> ``(0.0, 1.0)`` (``--reward-range``: the reward's bounds, metadata ``reward_min`` /
    ``reward_max``); None -> None; anything else is an :class:`~bayesgrpo.errors.OptionError`."""
    if text is None:
        return None
    try:
        lo, hi = (float(v) for v in str(text).split(","))
    except ValueError:
        raise OptionError(f"--reward-range {text!r}: expected LO,HI, e.g. 0,1") from None
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise OptionError(f"--reward-range {text!r}: LO and HI must be finite numbers")
    if not lo < hi:
        raise OptionError(f"--reward-range {text!r}: LO must be below HI")
    return lo, hi


def _contradiction(steps, rewards, lo: float, hi: float) -> str | None:
    """Where the log leaves declared bounds (``None`` when it does not)."""
    tol = _tol(lo, hi)
    checks = ((rewards > hi + tol, "above reward_max", hi), (rewards < lo - tol, "below reward_min", lo))
    for bad, name, bound in checks:
        if math.isfinite(bound) and bad.any():
            k = int(np.flatnonzero(bad)[0])
            return (f"the logged reward {rewards[k]:g} at step {int(steps[k])} is {name} {bound:g} (metadata or "
                    f"--reward-range; {int(bad.sum())} point(s) outside); give the reward's true range")  # fmt: skip
    return None


def final_window_threshold(*, s0: float, horizon: float, final_window: float = DEFAULT_FINAL_WINDOW) -> float:
    """Left (open) end of the final window: ``s0 + (1 - w)(H - s0)``, computed as ``H - w (H - s0)``
    (exact for the usual integer steps and ``w = 0.1``: ``s0=1, H=100`` gives 90.1)."""
    if not 0 < final_window <= 1:
        raise ValueError(f"final_window must be in (0, 1], got {final_window}")
    if horizon < s0:
        raise ValueError(f"horizon {horizon} is before the first step {s0}")
    return float(horizon) - float(final_window) * (float(horizon) - float(s0))


def final_window_mask(steps, *, s0: float, horizon: float, final_window: float = DEFAULT_FINAL_WINDOW) -> np.ndarray:
    """Boolean mask of ``steps`` in the final window ``(s0 + (1 - w)(H - s0), H]``.

    A relative tolerance of 1e-9 guards the open left end against round-off (a step equal to the
    threshold in exact arithmetic is excluded). Steps 1..100 with ``s0=1, H=100``: 91..100; logging
    every 5 with ``s0=5, H=200`` (threshold 180.5): 185, 190, 195, 200.
    """
    s = np.asarray(steps, dtype=float)
    thr = final_window_threshold(s0=s0, horizon=horizon, final_window=final_window)
    tol = 1e-9 * max(1.0, abs(float(horizon)))
    return (s > thr + tol) & (s <= float(horizon) + tol)


def final_window_steps(*, s0: int, horizon: int, interval: int, final_window: float) -> np.ndarray:
    """The logged steps of the final window: the run's grid ``s0, s0 + interval, ...`` up to the
    horizon (the horizon itself always among them) inside :func:`final_window_mask`."""
    grid = np.arange(s0, horizon + 1, interval, dtype=np.int64)
    if grid[-1] != horizon:
        grid = np.append(grid, horizon)
    return grid[final_window_mask(grid, s0=s0, horizon=horizon, final_window=final_window)]


def final_reward(
    steps, rewards, *, horizon: float | None = None, s0: float | None = None, final_window: float = DEFAULT_FINAL_WINDOW
) -> float:
    """The forecast target from logged rewards: the mean reward over the final window (the truth of a
    backtest, and the observed final reward of a run logged up to its horizon).

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


def future_steps(*, last_step: int, horizon: int, interval: int) -> np.ndarray:
    """The steps logged after the last observation up to the horizon, at the run's interval."""
    return np.arange(last_step + interval, horizon + 1, interval, dtype=np.int64)


def truncate(runs: RunSet, *, until_step: int | None = None, until_fraction: float | None = None) -> RunSet:
    """The logged prefix of every run (``until_step`` XOR ``until_fraction``; neither: unchanged).

    A run with no step up to ``until_step`` keeps no row (its plan says so)."""
    PlanOptions(until_step=until_step, until_fraction=until_fraction)
    if until_fraction is not None:
        return runs.truncate(fraction=float(until_fraction))
    if until_step is not None:
        return runs.truncate(until_step=int(until_step))
    return runs


# ----------------------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class RunPlan:
    """The facts about one run (module docstring). ``error`` is None when the run can be forecast.

    Steps are the run's own; ``last_step`` is the last observed (after truncation), ``last_logged``
    the last of the whole log; ``n_obs`` counts the observed points. ``complete``: the run is logged
    up to its horizon (its final reward is observed; ``error`` says why there is nothing to forecast).
    """

    run_id: str
    n_obs: int
    s0: int | None
    last_step: int | None
    last_logged: int | None
    interval: int
    horizon: int | None
    horizon_from: str
    planned: int | None
    reward_min: float
    reward_max: float
    bounds: str
    final_window: float
    min_points: int
    error: str | None = None
    complete: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    def span(self) -> tuple[int, int, int]:
        """``(s0, last_step, horizon)`` of a run that has all three, else the plan's error (ForecastError)."""
        if self.s0 is None or self.last_step is None or self.horizon is None:
            raise ForecastError(self.error or f"{self._where()}: no horizon")
        return self.s0, self.last_step, self.horizon

    @property
    def fraction(self) -> float:
        """The observed share of the planned run, ``(last - s0) / (planned - s0)``."""
        s0, last, h = self.span()
        return (last - s0) / max(1, (self.planned if self.planned is not None else h) - s0)

    def future_steps(self) -> np.ndarray:
        _, last, h = self.span()
        return future_steps(last_step=last, horizon=h, interval=self.interval)

    def final_steps(self) -> np.ndarray:
        s0, _, h = self.span()
        return final_window_steps(s0=s0, horizon=h, interval=self.interval, final_window=self.final_window)

    def stored_steps(self) -> int:
        """How many future steps a forecast stores per path (:data:`MAX_STORED_STEPS` at most)."""
        _, last, h = self.span()
        return min((h - last) // self.interval + 1, MAX_STORED_STEPS)

    def with_horizon(self, horizon: int) -> RunPlan:
        """The same run forecast to another horizon (``"option"``); the planned length stays the fit's."""
        err = self.error
        if self.ok:
            err = horizon_error(self._where(), horizon, self.span()[1], None, self.interval)
        return _replace(self, horizon=int(horizon), horizon_from="option", error=err)

    def _where(self) -> str:
        return f"run {self.run_id!r}"


def _replace(plan: RunPlan, **kw) -> RunPlan:
    import dataclasses

    return dataclasses.replace(plan, **kw)


@dataclass
class Plans:
    """The plans of a RunSet: ``observed`` (the truncated runs), ``full`` (as read) and one plan per run."""

    observed: RunSet
    full: RunSet
    plans: dict[str, RunPlan]
    truncated: bool = False
    options: PlanOptions = field(default_factory=PlanOptions)

    def __getitem__(self, run_id: str) -> RunPlan:
        return self.plans[run_id]

    def __iter__(self):
        return iter(self.plans.values())

    @property
    def ok_ids(self) -> list[str]:
        return [r for r, p in self.plans.items() if p.ok]

    @property
    def errors(self) -> dict[str, str]:
        return {r: p.error for r, p in self.plans.items() if p.error is not None}

    def horizons(self) -> dict[str, int | None]:
        return {r: p.horizon for r, p in self.plans.items()}

    def require(self) -> Plans:
        """These plans, or :class:`~bayesgrpo.errors.ForecastError` for the first run that cannot be forecast."""
        for p in self.plans.values():
            if not p.ok:
                raise ForecastError(p.error)
        return self

    def select(self, run_ids) -> Plans:
        ids = list(run_ids)
        return Plans(self.observed.select(ids), self.full.select(ids), {r: self.plans[r] for r in ids},
                     self.truncated, self.options)  # fmt: skip


def _horizon(spec, rid: str, meta_row, last_obs: int, last_full: int | None, interval: int):
    """``(horizon or None, where it came from)`` of one run (module docstring)."""
    h = spec.get(rid) if isinstance(spec, Mapping) else spec
    if isinstance(h, float) and math.isnan(h):
        h = None
    if h == NEXT:
        return last_obs + interval, "next"
    if h is not None:
        h, src = int(h), "option"
    else:
        cands = []
        last = last_obs if last_full is None else max(last_full, last_obs)
        ms = meta_number(meta_row, "max_steps")
        if math.isfinite(ms) and ms >= last:
            cands.append((int(ms), "max_steps"))
        elif math.isfinite(ms) and ms > 0:  # the run went on past it: not its planned length (batch warns)
            cands.append((last, "log"))
        if last_full is not None and last_full > last_obs:
            cands.append((last_full, "log"))
        if not cands:
            return None, ""
        h, src = max(cands, key=lambda c: c[0])  # a tie is the planned length
    return h, src


def _planned(meta_row, last_obs: int, last_full: int | None, horizon: int) -> int:
    """The planned length the prior is conditioned on: ``max_steps`` after the last logged step (of the
    observed prefix, and not before the end of the log: a run that went on past it did not plan it), else
    the horizon."""
    ms = meta_number(meta_row, "max_steps")
    return int(ms) if math.isfinite(ms) and ms > last_obs and ms >= (last_full or 0) else horizon


def horizon_error(where: str, horizon: int | None, last: int, n_draws: int | None = None, interval: int = 1):
    """Why a run (``where``: e.g. ``"run 'a'"``) logged up to step ``last`` cannot be forecast to
    ``horizon`` (no horizon, not after the log, the memory or distance limit), or None."""
    if horizon is None:
        return f"{where}: no horizon; pass --horizon STEPS or log max_steps in the metadata"
    if horizon <= last:
        return (f"{where}: the horizon {horizon} is not after the last logged step {last}; nothing to forecast "
                "(pass a larger --horizon)")  # fmt: skip
    if n_draws:
        stored = min((horizon - last) // interval + 1, MAX_STORED_STEPS)
        need = 8 * n_draws * (2 * stored + 16)  # paths are thinned, but state and stop steps scale with the draws
        if need > MEMORY_LIMIT_BYTES:
            return f"{where}: the forecast would need about {need / 1024**3:.1f} GiB; use fewer --draws"
    if horizon - last > MAX_FUTURE_STEPS:
        return (f"{where}: the horizon {horizon:,} is {horizon - last:,} steps beyond the log (its last logged step "
                f"{last:,}); every step of every draw is propagated and at most {MAX_FUTURE_STEPS:,} are forecast; "
                "pass a nearer --horizon")  # fmt: skip
    return None


def _grid_error(where: str, s) -> str | None:
    """Why the logged steps ``s`` span too long a grid to fit (:data:`MAX_GRID_STEPS`), or None."""
    grid = int(s[-1]) - int(s[0]) + 1
    if grid <= MAX_GRID_STEPS:
        return None
    return (f"{where}: its {len(s)} logged steps span a grid of {grid:,} steps (steps {int(s[0])} to {int(s[-1])}); "
            f"the model steps every optimizer step and fits at most {MAX_GRID_STEPS:,}; forecast from an "
            "earlier prefix (--until-step) or log the run more evenly")  # fmt: skip


def run_where(runs: RunSet, rid: str) -> str:
    """How every message names a run: ``run 'x' (its own log file)``, else the run set's source."""
    src = runs.meta.loc[rid].get(SOURCE_FILE) if SOURCE_FILE in runs.meta.columns else None
    src = src if isinstance(src, str) and src else runs.source
    return f"run {rid!r}" + (f" ({src})" if src else "")


def _plan_one(rid, g_obs, g_full, meta_row, *, horizon, opts: PlanOptions, n_draws, where, bound_rows):
    s = g_obs[STEP].to_numpy(dtype=np.int64)
    r = g_obs[REWARD].to_numpy(dtype=float)
    n = int(s.size)
    last_full = int(g_full[STEP].iloc[-1]) if len(g_full) else None
    base = dict(run_id=rid, n_obs=n, last_logged=last_full, final_window=opts.final_window, min_points=opts.min_points)
    if n < opts.min_points:
        msg = f"{where} has {n} logged reward point(s)"
        msg += f" (logged up to step {int(s[-1])})" if n else ""
        msg += f"; a forecast needs at least {opts.min_points}"
        if opts.until_step is not None and len(g_full):
            msg += f" with --until-step {int(opts.until_step)} (its first logged step is {int(g_full[STEP].iloc[0])})"
        return RunPlan(**base, s0=int(s[0]) if n else None, last_step=int(s[-1]) if n else None,
                       interval=logging_interval(s), horizon=None, horizon_from="", planned=None, reward_min=math.nan,
                       reward_max=math.nan, bounds="", error=msg)  # fmt: skip
    interval = logging_interval(s)
    h, src = _horizon(horizon, rid, meta_row, int(s[-1]), last_full, interval)
    lo, hi, bsrc = reward_bounds(meta_row, r if bound_rows is None else bound_rows, where=where)
    err = horizon_error(where, h, int(s[-1]), n_draws, interval)
    complete = h is not None and h <= int(s[-1])  # logged up to its horizon: the final reward is observed
    if h is not None and not complete:  # a sparse step axis is named first: it is the run's own problem
        err = _grid_error(where, s) or err
    if err is None and bsrc == "metadata":
        bad = _contradiction(s, r, lo, hi)
        err = f"{where}: {bad}" if bad else None
    return RunPlan(**base, s0=int(s[0]), last_step=int(s[-1]), interval=interval, horizon=h, horizon_from=src,
                   planned=_planned(meta_row, int(s[-1]), last_full, h) if h is not None else None, reward_min=lo, reward_max=hi,
                   bounds=bsrc, error=err, complete=complete)  # fmt: skip


def plan_runs(
    runs: RunSet,
    *,
    horizon: HorizonSpec = None,
    until_step: int | None = None,
    until_fraction: float | None = None,
    final_window: float = DEFAULT_FINAL_WINDOW,
    min_points: int = MIN_POINTS,
    n_draws: int | None = None,
    bounds_from: RunSet | None = None,
) -> Plans:
    """The plan of every run of ``runs`` (module docstring); a run that cannot be forecast has ``error``.

    Parameters
    ----------
    runs : RunSet
        The runs as logged.
    horizon : int, dict, "next" or None
        The step to forecast to: one for all runs, per run id (a missing or None entry: the default
        rule), :data:`NEXT` (one logged step after the last), or None (the default rule).
    until_step, until_fraction : optional
        Truncation (:func:`truncate`).
    final_window, min_points : optional
    n_draws : int, optional
        Posterior draws per run (for the memory limit; None: not checked).
    bounds_from : RunSet, optional
        Infer each run's reward bounds from these rows (the prefix a normalisation comes from) instead.

    Raises
    ------
    OptionError
        An option outside its bounds (one line naming it).
    """
    try:
        opts = PlanOptions(horizon=horizon if isinstance(horizon, int) else None, until_step=until_step,
                           until_fraction=until_fraction, final_window=final_window, min_points=min_points)  # fmt: skip
    except ValueError as e:
        raise OptionError(_first_error(e)) from None
    observed = truncate(runs, until_step=until_step, until_fraction=until_fraction)
    obs_groups = dict(tuple(observed.data.groupby(RUN, sort=False)))  # a GroupBy is no mapping for dict()
    full_groups = dict(tuple(runs.data.groupby(RUN, sort=False)))
    empty = runs.data.iloc[:0]
    plans = {}
    for rid in runs.run_ids:
        bound_rows = None if bounds_from is None else bounds_from.run(rid)[REWARD].to_numpy(dtype=float)
        plans[rid] = _plan_one(rid, obs_groups.get(rid, empty), full_groups.get(rid, empty), runs.meta.loc[rid],
                               horizon=horizon, opts=opts, n_draws=n_draws, where=run_where(runs, rid),
                               bound_rows=bound_rows)  # fmt: skip
    truncated = until_step is not None or until_fraction is not None
    return Plans(observed=observed, full=runs, plans=plans, truncated=truncated, options=opts)


def _first_error(e: Exception) -> str:
    errs = getattr(e, "errors", None)
    if callable(errs):
        first = errs()[0]
        loc = ".".join(str(x) for x in first.get("loc", ()))
        return f"{loc}: {first.get('msg')}" if loc else str(first.get("msg"))
    return str(e)
