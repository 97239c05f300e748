"""Forecast a batch of logged runs the way every front end needs it (CLI verbs, the TRL callback, watch).

:func:`forecast_batch` does what surrounds a fit:

* **the run plans** (:func:`bayesgrpo.plan.plan_runs`: truncation, the horizon rule -- the live one
  too --, interval, bounds, limits);
* **one bad run is an error row, never a lost batch** -- each run's plan is checked before sampling
  (enough points, a horizon after its last step, a forecast that fits in memory); a failing run gets a
  :class:`~bayesgrpo.errors.DataWarning` and a row with ``status="error"`` and the reason, the others
  are forecast; ``strict=True`` makes the first problem fatal instead. A run whose fit fails (in this
  process or on a worker) is an error row too: a group that fails is retried run by run.
* **where it runs** -- an :class:`~bayesgrpo.inference.executor.Executor` (default: this process):
  runs are forecast in groups (:func:`~bayesgrpo.inference.executor.partition`), each group by
  ``forecaster.fit`` wherever the executor puts it, and the fits are merged
  (:meth:`~bayesgrpo.forecast.forecaster.FittedForecast.merge`). The numbers do not depend on the
  grouping or the worker (per-run seeds), so ``--workers N`` gives the serial table. A pooled
  (hierarchical, ``context``) fit is one group.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bayesgrpo.errors import DataWarning, ForecastError, warning_type
from bayesgrpo.plan import MIN_POINTS, Plans, plan_runs
from bayesgrpo.schema import RunSet

if TYPE_CHECKING:
    from bayesgrpo.forecast.fitted import FittedForecast
    from bayesgrpo.forecast.forecaster import Forecaster

__all__ = ["BatchResult", "forecast_batch"]


@dataclass
class BatchResult:
    """What :func:`forecast_batch` returns.

    Attributes
    ----------
    fit : FittedForecast or None
        The fit of the runs that could be forecast (None when none could).
    table : DataFrame
        One row per requested run: :data:`~bayesgrpo.forecast.TABLE_COLUMNS` plus ``status``
        (``"ok"`` / ``"error"``) and ``error`` (the reason, empty when ok).
    errors : dict
        run id -> reason, for the runs that were not forecast.
    full : RunSet
        The runs as read (before truncation), e.g. to draw the truth in fan charts.
    truncated : bool
    plans : Plans
        The plan of every run (:mod:`bayesgrpo.plan`: horizon and where it came from, interval, bounds).
    observed : RunSet
        What the forecast saw: every requested run after truncation (error rows included), e.g. for
        their diagnostics.
    """

    fit: FittedForecast | None
    table: pd.DataFrame
    errors: dict = field(default_factory=dict)
    full: RunSet | None = None
    truncated: bool = False
    plans: Plans | None = None

    @property
    def observed(self) -> RunSet | None:
        """What the forecast saw: every requested run after truncation (error rows included)."""
        return self.plans.observed if self.plans is not None else None


def forecast_batch(
    runs: RunSet,
    *,
    forecaster,
    horizon=None,
    until_step: int | None = None,
    until_fraction: float | None = None,
    context: RunSet | None = None,
    strict: bool = False,
    progress=None,
    min_points: int = MIN_POINTS,
    executor=None,
    live: bool = False,
) -> BatchResult:
    """Plan every run, fit the ones that can be forecast, and tabulate all of them.

    Parameters
    ----------
    runs : RunSet
        The runs as logged.
    forecaster : bayesgrpo.forecast.Forecaster
    horizon, until_step, until_fraction, min_points, live : optional
        The plan's options (:func:`bayesgrpo.plan.plan_runs`).
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
    from bayesgrpo.forecast.config import TABLE_COLUMNS
    from bayesgrpo.forecast.fitted import FittedForecast

    plans = plan_runs(runs, horizon=horizon, until_step=until_step, until_fraction=until_fraction,
                      final_window=forecaster.config.final_window, min_points=min_points,
                      n_draws=forecaster.sampler.draws * forecaster.sampler.chains, live=live)  # fmt: skip
    errors = {}
    for rid, msg in plans.errors.items():
        if strict:
            raise ForecastError(msg)
        errors[rid] = msg
        warnings.warn(f"{msg}; not forecast (the other runs are)", DataWarning, stacklevel=2)
    good = plans.ok_ids
    fit = None
    if good:
        fits, failed = _fit_groups(plans.select(good), forecaster=forecaster, context=context, executor=executor,
                                   progress=progress)  # fmt: skip
        for rid, msg in failed.items():
            if strict:
                raise ForecastError(f"run {rid!r}: {msg}")
            errors[rid] = msg
            warnings.warn(f"run {rid!r} could not be forecast ({msg}); the other runs are", DataWarning, stacklevel=2)
        if fits:
            fit = FittedForecast.merge(fits)
    ok = (fit.table() if fit is not None else pd.DataFrame(columns=TABLE_COLUMNS)).assign(status="ok", error="")
    ok = ok.set_index("run_id")
    rows = []
    for rid in runs.run_ids:
        if rid in errors:
            p = plans[rid]
            rows.append({"run_id": rid, "kind": forecaster.config.kind,
                         "observed_until": p.last_step if p.last_step is not None else np.nan, "n_obs": p.n_obs,
                         "horizon": p.horizon if p.horizon is not None else np.nan, "status": "error",
                         "error": errors[rid]})  # fmt: skip
        else:
            rows.append(ok.loc[rid].to_dict() | {"run_id": rid})
    table = pd.DataFrame(rows).reindex(columns=[*TABLE_COLUMNS, "status", "error"])
    return BatchResult(fit=fit, table=table, errors=errors, full=runs, truncated=plans.truncated, plans=plans)


@dataclass
class _FitJob:
    """One group of runs, fitted wherever an executor runs it (picklable: sent to Dask workers)."""

    forecaster: Forecaster
    context: RunSet | None = None

    def __call__(self, plans: Plans):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fit = self.forecaster.fit_plans(plans, context=self.context)
            fit.table()  # computed where the posterior is; the rows travel back with the fit
        return fit, [(w.category.__name__, str(w.message)) for w in caught]


def _fit_groups(plans: Plans, *, forecaster, context, executor, progress):
    """Fit the planned runs in groups on ``executor``: ``(fits in run order, {run_id: reason})``."""
    from bayesgrpo.inference.executor import SerialExecutor, partition

    good = plans.ok_ids
    executor = executor or SerialExecutor()
    joint = context is not None or bool(getattr(getattr(forecaster, "config", None), "hierarchical", False))
    if joint:
        groups = [list(good)]
    else:  # small groups in this process (frequent progress), a few per worker on a cluster
        groups = partition(good, executor.n_workers, per_worker=20 if executor.n_workers == 1 else 4)
    job = _FitJob(forecaster, context)
    done = [0]

    def tick(i, groups_=groups):
        done[0] += len(groups_[i])
        if progress is not None:
            progress(done[0], len(good))

    outcomes = executor.map(job, [plans.select(g) for g in groups], progress=tick)
    results, failed = {}, {}
    retry = []
    for g, (ok, value) in zip(groups, outcomes, strict=True):
        if ok:
            results[g[0]] = value
        elif len(g) > 1 and not joint:
            retry.extend(g)  # which run failed? each alone (its numbers do not depend on the group)
        else:
            failed.update(dict.fromkeys(g, value))
    if retry:
        singles = [[r] for r in retry]
        for g, (ok, value) in zip(singles, executor.map(job, [plans.select(g) for g in singles]), strict=True):
            if ok:
                results[g[0]] = value
            else:
                failed[g[0]] = value
    fits = []
    seen = set()
    for category, message in (w for first in sorted(results, key=good.index) for w in results[first][1]):
        if (category, message) not in seen:
            seen.add((category, message))
            warnings.warn(message, warning_type(category), stacklevel=3)
    for first in sorted(results, key=good.index):
        fits.append(results[first][0])
    return fits, failed
