"""Forecast a batch of logged runs the way every front end needs it (CLI verbs, the TRL callback, watch).

:func:`forecast_batch` does what surrounds a fit:

* **truncation** -- ``until_step`` or ``until_fraction`` ("what would the forecast have said then?");
* **the horizon rule** (:func:`resolve_horizons`, one definition): an explicit horizon; else the
  run's planned length (metadata ``max_steps``); for a truncated run at least its last logged step
  (the log shows it ran that far);
* **one bad run is an error row, never a lost batch** -- each run is checked before sampling (enough
  points, a step grid and a horizon whose cost is bounded (:data:`MAX_GRID_STEPS`,
  :data:`MAX_FUTURE_STEPS`), a forecast that fits in memory); a failing run gets a
  :class:`~bayesgrpo.errors.DataWarning` and a row with ``status="error"`` and the reason, the others
  are forecast; ``strict=True`` makes the first problem fatal instead. A run whose fit fails (in this
  process or on a worker) is an error row too: a group that fails is retried run by run.
* **statuses** (:data:`STATUSES`) -- ``ok``; ``warning`` (forecast, but the sampler's health is poor:
  :data:`~bayesgrpo.inference.sampling.STATUS_HEALTH`; the reason in ``error``); ``complete`` (the
  run is logged up to its horizon: the final reward is the observed one, a zero-width interval, no
  fit); ``error``; ``interrupted`` (Ctrl-C came first: :class:`~bayesgrpo.errors.Interrupted` carries
  the batch with the runs that finished).
* **where it runs** -- an :class:`~bayesgrpo.inference.executor.Executor` (default: this process):
  runs are forecast in groups (:func:`~bayesgrpo.inference.executor.partition`), each group by
  ``forecaster.fit`` wherever the executor puts it, and the fits are merged
  (:meth:`~bayesgrpo.forecast.forecaster.FittedForecast.merge`). The numbers do not depend on the
  grouping or the worker (per-run seeds), so ``--workers N`` gives the serial table. A pooled
  (hierarchical, ``context``) fit is one group.
"""

from __future__ import annotations

import builtins
import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayesgrpo import errors as _errors
from bayesgrpo.errors import DataWarning, ForecastError, Interrupted, OptionError
from bayesgrpo.schema import REWARD, STEP, RunSet
from bayesgrpo.series import final_reward

__all__ = ["BatchResult", "forecast_batch", "resolve_horizons", "truncate_runs", "long_work", "MEMORY_LIMIT_BYTES",
           "MAX_GRID_STEPS", "MAX_FUTURE_STEPS", "STATUSES"]  # fmt: skip

#: refuse a forecast whose posterior paths would need more memory than this (per run, in bytes)
MEMORY_LIMIT_BYTES = 2 * 1024**3
#: refuse a run whose logged steps span more grid steps than this: the model steps every optimizer step,
#: so a fit costs the grid's length however few points are logged on it (bench/results/grid_cost.md)
MAX_GRID_STEPS = 20_000
#: refuse a horizon more steps after the last logged step than this: every future step of every draw is
#: propagated (bench/results/grid_cost.md)
MAX_FUTURE_STEPS = 100_000
#: the values of the ``status`` column of a batch table
STATUSES = ("ok", "warning", "complete", "error", "interrupted")


def truncate_runs(runs: RunSet, *, until_step: int | None = None, until_fraction: float | None = None) -> RunSet:
    """The logged prefix of every run (``until_step`` XOR ``until_fraction``; neither: unchanged)."""
    if until_step is not None and until_fraction is not None:
        raise OptionError("give --until-step or --until-fraction, not both")
    if until_fraction is not None:
        if not 0.0 < float(until_fraction) < 1.0:
            raise OptionError(f"--until-fraction must lie in (0, 1), got {until_fraction:g}")
        return runs.truncate(fraction=float(until_fraction))
    if until_step is not None:
        return runs.truncate(until_step=int(until_step))
    return runs


def _max_steps(meta_row) -> float:
    try:
        v = float(meta_row.get("max_steps"))
    except (TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) and v > 0 else math.nan


def resolve_horizons(full: RunSet, observed: RunSet, horizon: int | dict | None = None) -> dict:
    """The step each run is forecast to: ``{run_id: int or None}`` (None: no horizon known).

    ``horizon`` when given (one for all runs, or per run id); else the planned length (metadata
    ``max_steps``); and when ``observed`` is a truncated view of ``full``, at least the last step
    ``full`` logged.
    """
    out = {}
    for rid in observed.run_ids:
        h = horizon.get(rid) if isinstance(horizon, dict) else horizon
        if h is not None:
            out[rid] = int(h)
            continue
        cands = []
        ms = _max_steps(full.meta.loc[rid])
        if math.isfinite(ms):
            cands.append(int(ms))
        last_full = int(full.run(rid)[STEP].iloc[-1])
        obs = observed.run(rid)
        if not len(obs) or last_full > int(obs[STEP].iloc[-1]):  # truncated (even to nothing)
            cands.append(last_full)
        out[rid] = max(cands) if cands else None
    return out


@dataclass
class BatchResult:
    """What :func:`forecast_batch` returns.

    Attributes
    ----------
    fit : FittedForecast or None
        The fit of the runs that could be forecast (None when none could).
    table : DataFrame
        One row per requested run: :data:`~bayesgrpo.forecast.TABLE_COLUMNS` plus ``status``
        (:data:`STATUSES`) and ``error`` (the reason; empty when ok or complete).
    errors : dict
        run id -> reason, for the runs that were not forecast (errors and interrupted runs).
    complete : dict
        run id -> observed final reward, for runs logged up to their horizon.
    full : RunSet
        The runs as read (before truncation), e.g. to draw the truth in fan charts.
    truncated : bool
    observed : RunSet
        What the forecast saw: every requested run after truncation (error rows included), e.g. for
        their diagnostics.
    """

    fit: object
    table: pd.DataFrame
    errors: dict = field(default_factory=dict)
    full: RunSet | None = None
    truncated: bool = False
    complete: dict = field(default_factory=dict)
    observed: RunSet | None = None


def _where(observed: RunSet, rid: str) -> str:
    return f"run {rid!r}" + (f" ({observed.source})" if observed.source else "")


def _check_run(observed: RunSet, rid: str, horizon, *, min_points: int, n_draws: int) -> str | None:
    """Why run ``rid`` cannot be forecast to ``horizon`` (None: it can, or it is complete)."""
    g = observed.run(rid)
    where = _where(observed, rid)
    if len(g) < min_points:
        last = f" (logged up to step {int(g[STEP].iloc[-1])})" if len(g) else ""
        return f"{where} has {len(g)} logged reward point(s){last}; a forecast needs at least {min_points}"
    if horizon is None:
        return f"{where}: no horizon; pass --horizon STEPS or log max_steps in the metadata"
    s = g[STEP].to_numpy()
    last = int(s[-1])
    if horizon <= last:
        return None  # complete: the final reward is observed
    grid = last - int(s[0]) + 1
    if grid > MAX_GRID_STEPS:
        return (f"{where}: its {len(s)} logged steps span a grid of {grid:,} steps (steps {int(s[0])} to {last}); "
                f"the model steps every optimizer step and fits at most {MAX_GRID_STEPS:,}; forecast from an "
                "earlier prefix (--until-step) or log the run more evenly")  # fmt: skip
    if horizon - last > MAX_FUTURE_STEPS:
        return (f"{where}: the horizon {horizon:,} is {horizon - last:,} steps after its last logged step {last:,}; "
                f"every step of every draw is propagated and at most {MAX_FUTURE_STEPS:,} are; pass a nearer "
                "--horizon")  # fmt: skip
    # stored paths are thinned to MAX_STORED_STEPS, but propagation state and stop steps scale with draws
    from bayesgrpo.forecast.forecaster import MAX_STORED_STEPS

    interval = max(1, int(np.median(np.diff(s))) if len(s) > 1 else 1)
    stored = min((horizon - last) // interval + 1, MAX_STORED_STEPS)
    need = 8 * n_draws * (2 * stored + 16)
    if need > MEMORY_LIMIT_BYTES:
        return f"{where}: the forecast would need about {need / 1024**3:.1f} GiB; use fewer --draws"
    return None


#: a fit over more grid steps than this, or a propagation further than this, takes minutes
#: (bench/results/grid_cost.md: about 7 s per 1,000 grid steps and 0.8 s per 1,000 steps ahead on a loaded
#: 2-core machine): :func:`long_work` says so before it starts
LONG_GRID_STEPS = 5_000
LONG_FUTURE_STEPS = 20_000


def long_work(runs: RunSet, *, horizon=None, until_step=None, until_fraction=None) -> list[str]:
    """One line per run whose forecast will take minutes (a long step grid or a far horizon), to print
    before sampling starts: long work is never silent."""
    observed = truncate_runs(runs, until_step=until_step, until_fraction=until_fraction)
    horizons = resolve_horizons(runs, observed, horizon)
    out = []
    for rid in observed.run_ids:
        s = observed.run(rid)[STEP].to_numpy()
        if len(s) < 2:
            continue
        grid, ahead = int(s[-1] - s[0] + 1), (horizons[rid] or 0) - int(s[-1])
        if MAX_GRID_STEPS >= grid > LONG_GRID_STEPS or MAX_FUTURE_STEPS >= ahead > LONG_FUTURE_STEPS:
            minutes = (7.0 * grid / 1000 + 0.8 * max(ahead, 0) / 1000) / 60
            out.append(f"run {rid!r}: a grid of {grid:,} steps and {max(ahead, 0):,} steps ahead; its forecast "
                       f"takes about {minutes:.0f} min (more on a busy machine)")  # fmt: skip
    return out


def _observed_final(observed: RunSet, rid: str, horizon: int, final_window: float) -> float:
    """The final reward of a run logged up to (or past) its horizon: the mean logged reward over the
    final window ``(s0 + (1 - w)(H - s0), H]``."""
    g = observed.run(rid)
    return final_reward(g[STEP].to_numpy(), g[REWARD].to_numpy(), s0=float(g[STEP].iloc[0]), horizon=float(horizon),
                        final_window=final_window)  # fmt: skip


def _max_steps_warnings(runs: RunSet, observed: RunSet, horizon, horizons: dict) -> None:
    """One horizon: a forecast to ``--horizon`` is the forecast of the planned run (metadata
    ``max_steps``) read at that step; say so where the two differ."""
    if horizon is None:
        return
    for rid in observed.run_ids:
        ms = _max_steps(runs.meta.loc[rid])
        h = horizons.get(rid)
        if h is not None and math.isfinite(ms) and int(ms) != int(h):
            warnings.warn(f"{_where(observed, rid)}: --horizon {int(h)} differs from its max_steps {int(ms)} "
                          f"(metadata); the table is the forecast of the planned {int(ms)} steps read at step "
                          f"{int(h)}", DataWarning, stacklevel=3)  # fmt: skip


def forecast_batch(
    runs: RunSet,
    *,
    forecaster,
    horizon: int | dict | None = None,
    until_step: int | None = None,
    until_fraction: float | None = None,
    context: RunSet | None = None,
    strict: bool = False,
    progress=None,
    min_points: int | None = None,
    executor=None,
) -> BatchResult:
    """Truncate, resolve horizons, check every run, fit the good ones, and tabulate all of them.

    Parameters
    ----------
    runs : RunSet
        The runs as logged.
    forecaster : bayesgrpo.forecast.Forecaster
    horizon, until_step, until_fraction : optional
        See :func:`resolve_horizons` and :func:`truncate_runs`.
    context : RunSet, optional
        Complete related runs to pool with (hierarchical fit).
    strict : bool
        Raise :class:`~bayesgrpo.errors.ForecastError` at the first run that cannot be forecast.
    progress : callable, optional
        Called as ``progress(n_runs_done, n_runs)`` as groups of runs finish.
    executor : Executor, optional
        Where the fits run (:mod:`bayesgrpo.inference.executor`; default: this process).

    Returns
    -------
    BatchResult
    """
    from bayesgrpo.models.arrays import MIN_POINTS

    min_points = MIN_POINTS if min_points is None else int(min_points)
    truncated = until_step is not None or until_fraction is not None
    observed = truncate_runs(runs, until_step=until_step, until_fraction=until_fraction)
    horizons = resolve_horizons(runs, observed, horizon)
    _max_steps_warnings(runs, observed, horizon, horizons)
    n_draws = forecaster.sampler.draws * forecaster.sampler.chains
    fw = forecaster.config.final_window
    errors, complete = {}, {}
    for rid in observed.run_ids:
        msg = _check_run(observed, rid, horizons[rid], min_points=min_points, n_draws=n_draws)
        if msg is None and horizons[rid] <= int(observed.run(rid)[STEP].iloc[-1]):
            complete[rid] = _observed_final(observed, rid, horizons[rid], fw)
            if np.isfinite(complete[rid]):
                continue
            del complete[rid]
            msg = f"{_where(observed, rid)}: logged up to its horizon {horizons[rid]}, but no finite reward in its final window"
        if msg is None:
            continue
        if until_step is not None and len(observed.run(rid)) < min_points and len(runs.run(rid)):
            first = int(runs.run(rid)[STEP].iloc[0])
            msg += f" with --until-step {int(until_step)} (its first logged step is {first})"
        if strict:
            raise ForecastError(msg)
        errors[rid] = msg
        warnings.warn(f"{msg}; not forecast (the other runs are)", DataWarning, stacklevel=2)
    good = [r for r in observed.run_ids if r not in errors and r not in complete]
    fit, cut = None, []
    if good:
        fits, failed, cut = _fit_groups(observed, good, forecaster=forecaster, horizons=horizons, context=context,
                                        executor=executor, progress=progress)  # fmt: skip
        for rid, msg in failed.items():
            if strict:
                raise ForecastError(f"run {rid!r}: {msg}")
            errors[rid] = msg
            warnings.warn(f"run {rid!r} could not be forecast ({msg}); the other runs are", DataWarning, stacklevel=2)
        if fits:
            from bayesgrpo.forecast.forecaster import FittedForecast

            fit = FittedForecast.merge(fits)
    for rid in cut:
        errors[rid] = "interrupted (Ctrl-C) before its forecast finished"
    table = _table(observed, forecaster, horizons, fit, errors, complete, cut)
    res = BatchResult(
        fit=fit, table=table, errors=errors, full=runs, truncated=truncated, complete=complete, observed=observed
    )
    if cut:
        raise Interrupted(f"interrupted: {len(good) - len(cut)} of {len(good)} run(s) forecast", partial=res)
    return res


def _table(observed: RunSet, forecaster, horizons, fit, errors, complete, cut) -> pd.DataFrame:
    """One row per run of ``observed``, in its order: forecast, complete, error or interrupted."""
    from bayesgrpo.forecast.forecaster import TABLE_COLUMNS

    cols = [*TABLE_COLUMNS, "status", "error"]
    ok = fit.table().set_index("run_id") if fit is not None else pd.DataFrame(columns=cols).set_index("run_id")
    rows = []
    for rid in observed.run_ids:
        g = observed.run(rid)
        base = {"run_id": rid, "model": forecaster.config.model,
                "observed_until": int(g[STEP].iloc[-1]) if len(g) else np.nan, "n_obs": len(g),
                "horizon": horizons[rid] if horizons[rid] is not None else np.nan}  # fmt: skip
        if rid in complete:
            v = complete[rid]
            rows.append(base | {"final_mean": v, **{c: v for c in TABLE_COLUMNS if c.startswith("final_q")},
                                "status": "complete", "error": ""})  # fmt: skip
        elif rid in errors:
            rows.append(base | {"status": "interrupted" if rid in cut else "error", "error": errors[rid]})
        else:
            status, reason = fit.health_status(rid)
            rows.append(ok.loc[rid].to_dict() | {"run_id": rid, "status": status, "error": reason})
    return pd.DataFrame(rows).reindex(columns=cols)


@dataclass
class _FitJob:
    """One group of runs, fitted wherever an executor runs it (picklable: sent to Dask workers)."""

    forecaster: object
    horizons: dict
    context: RunSet | None = None

    def __call__(self, runs: RunSet):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                fit = self.forecaster.fit(runs, horizon={r: self.horizons[r] for r in runs.run_ids},
                                          context=self.context)  # fmt: skip
            except Interrupted as e:  # the group's runs that finished, as this job's (partial) answer
                if e.partial is None:
                    raise
                e.partial.table()
                raise Interrupted(partial=(e.partial, [(w.category.__name__, str(w.message)) for w in caught])) from e
            fit.table()  # computed where the posterior is; the rows travel back with the fit
        return fit, [(w.category.__name__, str(w.message)) for w in caught]


def _warning_class(name: str):
    cls = getattr(_errors, name, None) or getattr(builtins, name, None)
    return cls if isinstance(cls, type) and issubclass(cls, Warning) else UserWarning


def _map(executor, job, groups, observed, progress=None):
    """``executor.map`` of ``job`` over the groups; after a Ctrl-C the outcomes that finished (None for
    the others) and True."""
    try:
        return executor.map(job, [observed.select(g) for g in groups], progress=progress), False
    except KeyboardInterrupt as e:
        done = list(getattr(e, "partial", None) or [])
        return done + [None] * (len(groups) - len(done)), True


def _fit_groups(observed: RunSet, good: list, *, forecaster, horizons, context, executor, progress):
    """Fit the runs ``good`` in groups on ``executor``: ``(fits in run order, {run_id: reason},
    [runs a Ctrl-C cut off])``."""
    from bayesgrpo.inference.executor import SerialExecutor, partition

    executor = executor or SerialExecutor()
    joint = context is not None or bool(getattr(getattr(forecaster, "config", None), "hierarchical", False))
    if joint:
        groups = [list(good)]
    else:  # small groups in this process (frequent progress), a few per worker on a cluster
        groups = partition(good, executor.n_workers, per_worker=20 if executor.n_workers == 1 else 4)
    job = _FitJob(forecaster, {r: horizons[r] for r in good}, context)
    done = [0]

    def tick(i, groups_=groups):
        done[0] += len(groups_[i])
        if progress is not None:
            progress(done[0], len(good))

    outcomes, stopped = _map(executor, job, groups, observed, progress=tick)
    results, failed = {}, {}
    retry = []
    for g, out in zip(groups, outcomes):
        if out is None:
            continue
        ok, value = out
        if ok:
            results[g[0]] = value
        elif len(g) > 1 and not joint:
            retry.extend(g)  # which run failed? each alone (its numbers do not depend on the group)
        else:
            failed.update({r: value for r in g})
    if retry and not stopped:
        singles = [[r] for r in retry]
        again, stopped = _map(executor, job, singles, observed)
        for g, out in zip(singles, again):
            if out is None:
                continue
            if out[0]:
                results[g[0]] = out[1]
            else:
                failed[g[0]] = out[1]
    done = {r for fit, _ in results.values() for r in fit.forecast_ids}
    cut = [r for r in good if r not in done and r not in failed]
    fits = []
    seen = set()
    for category, message in (w for first in sorted(results, key=good.index) for w in results[first][1]):
        if (category, message) not in seen:
            seen.add((category, message))
            warnings.warn(message, _warning_class(category), stacklevel=3)
    for first in sorted(results, key=good.index):
        fits.append(results[first][0])
    return fits, failed, cut
