"""Forecast a batch of logged runs the way every front end needs it (CLI verbs, the TRL callback, watch).

:func:`forecast_batch` does what surrounds a fit:

* **the run plans** (:func:`bayesgrpo.plan.plan_runs`: truncation, the horizon rule -- the live one
  too --, interval, bounds, limits);
* **one bad run is an error row, never a lost batch** -- each run's plan is checked before sampling
  (enough points, a step grid and a horizon whose cost is bounded, a forecast that fits in memory);
  long but feasible work is announced first (:func:`long_work`); a failing run gets a
  :class:`~bayesgrpo.errors.DataWarning` and a row with ``status="error"`` and the reason, the others
  are forecast; ``strict=True`` makes the first problem fatal instead. A run whose fit fails (in this
  process or on a worker) is an error row too: a group that fails is retried run by run.
* **statuses** (:data:`STATUSES`) -- ``ok``; ``warning`` (forecast, but the sampler's health is poor:
  :data:`~bayesgrpo.inference.sampling.STATUS_HEALTH`; the reason in ``error``); ``complete`` (the
  run is logged up to its horizon: the final reward is the observed one, a zero-width interval, no
  fit); ``error``; ``interrupted`` (Ctrl-C came first: :class:`~bayesgrpo.errors.Interrupted` carries
  the batch with the runs that finished).
* **one horizon** -- a forecast to a ``--horizon`` other than the run's ``max_steps`` is the forecast
  of the planned run read at that step; a :class:`~bayesgrpo.errors.DataWarning` says so.
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

from bayesgrpo.errors import DataWarning, ForecastError, Interrupted, warning_type
from bayesgrpo.plan import (
    FEW_POINTS,
    FEW_POINTS_NOTE,
    MIN_POINTS,
    Plans,
    RunPlan,
    final_reward,
    meta_number,
    plan_runs,
    run_where,
)
from bayesgrpo.schema import REWARD, STEP, RunSet

if TYPE_CHECKING:
    from bayesgrpo.forecast.fitted import FittedForecast
    from bayesgrpo.forecast.forecaster import Forecaster

__all__ = ["BatchResult", "forecast_batch", "long_work", "STATUSES"]

#: the values of the ``status`` column of a batch table
STATUSES = ("ok", "warning", "complete", "error", "interrupted")
#: a fit over more grid steps than this, or a propagation further than this, takes minutes
#: (bench/results/grid_cost.md: about 7 s per 1,000 grid steps and 0.8 s per 1,000 steps ahead on a loaded
#: 2-core machine): :func:`long_work` says so before it starts
LONG_GRID_STEPS = 5_000
LONG_FUTURE_STEPS = 20_000


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
    plans : Plans
        The plan of every run (:mod:`bayesgrpo.plan`: horizon and where it came from, interval, bounds).
    observed : RunSet
        What the forecast saw: every requested run after truncation (error rows included), e.g. for
        their diagnostics.
    decisions : dict
        run id -> the decision numbers the stop advice was judged on, when a front end added it
        (:func:`bayesgrpo.decisions.stop.advise_fit`); empty otherwise.
    """

    fit: FittedForecast | None
    table: pd.DataFrame
    errors: dict = field(default_factory=dict)
    full: RunSet | None = None
    truncated: bool = False
    plans: Plans | None = None
    complete: dict = field(default_factory=dict)
    decisions: dict = field(default_factory=dict)

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
) -> BatchResult:
    """Plan every run, fit the ones that can be forecast, and tabulate all of them.

    Parameters
    ----------
    runs : RunSet
        The runs as logged.
    forecaster : bayesgrpo.forecast.Forecaster
    horizon, until_step, until_fraction, min_points : optional
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

    Raises
    ------
    Interrupted
        Ctrl-C: ``partial`` is the BatchResult of the runs that finished (the others ``interrupted``).
    """
    from bayesgrpo.forecast.fitted import FittedForecast

    plans = plan_runs(runs, horizon=horizon, until_step=until_step, until_fraction=until_fraction,
                      final_window=forecaster.config.final_window, min_points=min_points,
                      n_draws=forecaster.sampler.draws * forecaster.sampler.chains)  # fmt: skip
    _max_steps_warnings(plans)
    _few_points_warnings(plans)
    errors, complete = _check_plans(plans, strict=strict)
    good = [r for r in plans.ok_ids if r not in complete]
    fit, cut = None, []
    if good:
        fits, failed, cut = _fit_groups(plans.select(good), forecaster=forecaster, context=context,
                                        executor=executor, progress=progress)  # fmt: skip
        for rid, msg in failed.items():
            if strict:
                raise ForecastError(f"run {rid!r}: {msg}")
            errors[rid] = msg
            warnings.warn(f"run {rid!r} could not be forecast ({msg}); the other runs are", DataWarning, stacklevel=2)
        if fits:
            fit = FittedForecast.merge(fits)
    for rid in cut:
        errors[rid] = "interrupted (Ctrl-C) before its forecast finished"
    table = _table(runs, plans, forecaster, fit, errors, complete, cut)
    res = BatchResult(fit=fit, table=table, errors=errors, full=runs, truncated=plans.truncated, plans=plans,
                      complete=complete)  # fmt: skip
    if cut:
        raise Interrupted(f"interrupted: {len(good) - len(cut)} of {len(good)} run(s) forecast", partial=res)
    return res


def _check_plans(plans: Plans, *, strict: bool) -> tuple[dict, dict]:
    """``(errors, complete)`` of the plans: run id -> reason for the runs that cannot be forecast (a
    :class:`DataWarning` each; ``strict``: the first is a ForecastError), run id -> the observed final
    reward for the runs logged up to their horizon."""
    errors, complete = {}, {}
    for p in plans:
        msg = p.error
        if p.complete:
            v = _observed_final(plans, p)
            if np.isfinite(v):
                complete[p.run_id] = v
                continue
            msg = f"run {p.run_id!r}: logged up to its horizon {p.horizon}, but no finite reward in its final window"
        if msg is None:
            continue
        if strict:
            raise ForecastError(msg)
        errors[p.run_id] = msg
        warnings.warn(f"{msg}; not forecast (the other runs are)", DataWarning, stacklevel=3)
    return errors, complete


def _observed_final(plans: Plans, p: RunPlan) -> float:
    """The final reward of a run logged up to (or past) its horizon: the mean logged reward over the
    final window ``(s0 + (1 - w)(H - s0), H]``."""
    g = plans.observed.run(p.run_id)
    _, _, horizon = p.span()
    return final_reward(g[STEP].to_numpy(), g[REWARD].to_numpy(), s0=float(g[STEP].iloc[0]), horizon=float(horizon),
                        final_window=p.final_window)  # fmt: skip


def _max_steps_warnings(plans: Plans) -> None:
    """One horizon: a forecast to ``--horizon`` is the forecast of the planned run (metadata
    ``max_steps``) read at that step; say so where the two differ, where ``--horizon`` is before the
    last observed step (the run is complete there), and where ``max_steps`` is before the end of the log
    (the run went on past it: not its planned length, :func:`bayesgrpo.plan._horizon`)."""
    for p in plans:
        ms = meta_number(plans.full.meta.loc[p.run_id], "max_steps")
        where = run_where(plans.full, p.run_id)
        before = (
            p.horizon_from == "option" and p.horizon is not None and p.last_step is not None and p.horizon < p.last_step
        )
        if np.isfinite(ms) and p.last_logged is not None and 0 < ms < p.last_logged:
            warnings.warn(f"{where}: its max_steps {int(ms)} (metadata) is before its last logged step "
                          f"{p.last_logged}; the run went on past it, so it is not the run's planned length"
                          + (f" (horizon: {p.horizon}, {p.horizon_from})" if p.horizon is not None else ""),
                          DataWarning, stacklevel=4)  # fmt: skip
        elif before:  # complete at the horizon: not a forecast of the planned run read there
            pass
        elif p.horizon_from == "option" and p.horizon is not None and np.isfinite(ms) and int(ms) != int(p.horizon):
            warnings.warn(f"{where}: --horizon {int(p.horizon)} differs from its max_steps {int(ms)} (metadata); the "
                          f"table is the forecast of the planned {int(ms)} steps read at step {int(p.horizon)}",
                          DataWarning, stacklevel=4)  # fmt: skip
        if before:
            warnings.warn(f"{where}: --horizon {int(p.horizon)} is before its last logged step {p.last_step}: the run "
                          f"is complete at step {int(p.horizon)} (its final reward is the one logged up to it; the later "
                          "steps are not used). To see what a forecast at an earlier step said, use --until-step",
                          DataWarning, stacklevel=4)  # fmt: skip


def _few_points_warnings(plans: Plans) -> None:
    """A forecast from fewer than :data:`~bayesgrpo.plan.FEW_POINTS` logged points says it is rough, and what
    was measured from so few."""
    for p in plans:
        if p.ok and not p.complete and p.n_obs < FEW_POINTS:
            warnings.warn(f"{run_where(plans.full, p.run_id)}: forecast from only {p.n_obs} logged points, a rough "
                          f"answer ({FEW_POINTS_NOTE})", DataWarning, stacklevel=4)  # fmt: skip


def long_work(plans: Plans) -> list[str]:
    """One line per planned run whose forecast will take minutes (a long step grid or a far horizon), to
    print before sampling starts: long work is never silent."""
    out = []
    for p in plans:
        if not p.ok or p.s0 is None or p.last_step is None or p.horizon is None:
            continue
        grid, ahead = p.last_step - p.s0 + 1, max(p.horizon - p.last_step, 0)
        if grid > LONG_GRID_STEPS or ahead > LONG_FUTURE_STEPS:
            minutes = (7.0 * grid / 1000 + 0.8 * ahead / 1000) / 60
            out.append(f"run {p.run_id!r}: a grid of {grid:,} steps and {ahead:,} steps ahead; its forecast "
                       f"takes about {minutes:.0f} min (more on a busy machine)")  # fmt: skip
    return out


def _table(runs: RunSet, plans: Plans, forecaster, fit, errors, complete, cut) -> pd.DataFrame:
    """One row per run of ``runs``, in its order: forecast (ok / warning), complete, error or interrupted."""
    from bayesgrpo.forecast.config import TABLE_COLUMNS

    cols = [*TABLE_COLUMNS, "status", "error"]
    ok = (fit.table() if fit is not None else pd.DataFrame(columns=TABLE_COLUMNS)).set_index("run_id")
    rows = []
    for rid in runs.run_ids:
        p = plans[rid]
        base = {"run_id": rid, "kind": forecaster.config.kind,
                "observed_until": p.last_step if p.last_step is not None else np.nan, "n_obs": p.n_obs,
                "horizon": p.horizon if p.horizon is not None else np.nan}  # fmt: skip
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

    forecaster: Forecaster
    context: RunSet | None = None

    def __call__(self, plans: Plans):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                fit = self.forecaster.fit_plans(plans, context=self.context)
            except Interrupted as e:  # the group's runs that finished, as this job's (partial) answer
                if e.partial is None:
                    raise
                e.partial.table()
                raise Interrupted(partial=(e.partial, [(w.category.__name__, str(w.message)) for w in caught])) from e
            fit.table()  # computed where the posterior is; the rows travel back with the fit
        return fit, [(w.category.__name__, str(w.message)) for w in caught]


def _map(executor, job, items, progress=None):
    """``executor.map`` of ``job`` over ``items``; after a Ctrl-C the outcomes that finished (None for
    the others) and True."""
    try:
        return executor.map(job, items, progress=progress), False
    except KeyboardInterrupt as e:
        done = list(getattr(e, "partial", None) or [])
        return done + [None] * (len(items) - len(done)), True


def _fit_groups(plans: Plans, *, forecaster, context, executor, progress):
    """Fit the planned runs in groups on ``executor``: ``(fits in run order, {run_id: reason}, [runs a
    Ctrl-C cut off])``."""
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

    outcomes, stopped = _map(executor, job, [plans.select(g) for g in groups], progress=tick)
    results, failed = {}, {}
    retry = []
    for g, out in zip(groups, outcomes, strict=True):
        if out is None:
            continue
        ok, value = out
        if ok:
            results[g[0]] = value
        elif len(g) > 1 and not joint:
            retry.extend(g)  # which run failed? each alone (its numbers do not depend on the group)
        else:
            failed.update(dict.fromkeys(g, value))
    if retry and not stopped:
        singles = [[r] for r in retry]
        again, stopped = _map(executor, job, [plans.select(g) for g in singles])
        for g, out in zip(singles, again, strict=True):
            if out is not None:
                (results if out[0] else failed)[g[0]] = out[1]
    fits = []
    seen = set()
    for category, message in (w for first in sorted(results, key=good.index) for w in results[first][1]):
        if (category, message) not in seen:
            seen.add((category, message))
            warnings.warn(message, warning_type(category), stacklevel=3)
    for first in sorted(results, key=good.index):
        fits.append(results[first][0])
    finished = {r for fit, _ in results.values() for r in fit.forecast_ids}
    return fits, failed, [r for r in good if r not in finished and r not in failed]
