"""Forecast a batch of logged runs the way every front end needs it (CLI verbs, the TRL callback, watch).

:func:`forecast_batch` does what surrounds a fit:

* **truncation** -- ``until_step`` or ``until_fraction`` ("what would the forecast have said then?");
* **the horizon rule** (:func:`resolve_horizons`, one definition): an explicit horizon; else the
  run's planned length (metadata ``max_steps``); for a truncated run at least its last logged step
  (the log shows it ran that far);
* **one bad run is an error row, never a lost batch** -- each run is checked before sampling (enough
  points, a horizon after its last step, a forecast that fits in memory); a failing run gets a
  :class:`~bayesgrpo.errors.DataWarning` and a row with ``status="error"`` and the reason, the others
  are forecast; ``strict=True`` makes the first problem fatal instead.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayesgrpo.errors import DataWarning, ForecastError, OptionError
from bayesgrpo.schema import STEP, RunSet

__all__ = ["BatchResult", "forecast_batch", "resolve_horizons", "truncate_runs", "MEMORY_LIMIT_BYTES"]

#: refuse a forecast whose posterior paths would need more memory than this (per run, in bytes)
MEMORY_LIMIT_BYTES = 2 * 1024**3


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
        if last_full > int(observed.run(rid)[STEP].iloc[-1]):
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
        (``"ok"`` / ``"error"``) and ``error`` (the reason, empty when ok).
    errors : dict
        run id -> reason, for the runs that were not forecast.
    full : RunSet
        The runs as read (before truncation), e.g. to draw the truth in fan charts.
    truncated : bool
    """

    fit: object
    table: pd.DataFrame
    errors: dict = field(default_factory=dict)
    full: RunSet | None = None
    truncated: bool = False


def _check_run(observed: RunSet, rid: str, horizon, *, min_points: int, n_draws: int) -> str | None:
    g = observed.run(rid)
    where = f"run {rid!r}" + (f" ({observed.source})" if observed.source else "")
    if len(g) < min_points:
        last = f" (logged up to step {int(g[STEP].iloc[-1])})" if len(g) else ""
        return f"{where} has {len(g)} logged reward point(s){last}; a forecast needs at least {min_points}"
    if horizon is None:
        return f"{where}: no horizon; pass --horizon STEPS or log max_steps in the metadata"
    last = int(g[STEP].iloc[-1])
    if horizon <= last:
        return f"{where}: the horizon {horizon} is not after the last logged step {last}; nothing to forecast (pass a larger --horizon)"
    # stored paths are thinned to MAX_STORED_STEPS, but propagation state and stop steps scale with draws
    from bayesgrpo.forecast.forecaster import MAX_STORED_STEPS

    interval = max(1, int(np.median(np.diff(g[STEP].to_numpy()))) if len(g) > 1 else 1)
    stored = min((horizon - last) // interval + 1, MAX_STORED_STEPS)
    need = 8 * n_draws * (2 * stored + 16)
    if need > MEMORY_LIMIT_BYTES:
        return f"{where}: the forecast would need about {need / 1024**3:.1f} GiB; use fewer --draws"
    if horizon - last > 10_000_000:
        return f"{where}: the horizon {horizon} is {horizon - last:,} steps beyond the log; at most 10,000,000 are forecast"
    return None


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
        Forwarded to :meth:`Forecaster.fit`.

    Returns
    -------
    BatchResult
    """
    from bayesgrpo.forecast.forecaster import TABLE_COLUMNS
    from bayesgrpo.models.arrays import MIN_POINTS

    min_points = MIN_POINTS if min_points is None else int(min_points)
    truncated = until_step is not None or until_fraction is not None
    observed = truncate_runs(runs, until_step=until_step, until_fraction=until_fraction)
    horizons = resolve_horizons(runs, observed, horizon)
    n_draws = forecaster.sampler.draws * forecaster.sampler.chains
    errors = {}
    for rid in observed.run_ids:
        msg = _check_run(observed, rid, horizons[rid], min_points=min_points, n_draws=n_draws)
        if msg is None:
            continue
        if strict:
            raise ForecastError(msg)
        errors[rid] = msg
        warnings.warn(f"{msg}; not forecast (the other runs are)", DataWarning, stacklevel=2)
    good = [r for r in observed.run_ids if r not in errors]
    fit = None
    if good:
        fit = forecaster.fit(observed.select(good), horizon={r: horizons[r] for r in good}, context=context,
                             progress=progress)  # fmt: skip
        ok = fit.table().assign(status="ok", error="")
    else:
        ok = pd.DataFrame(columns=[*TABLE_COLUMNS, "status", "error"])
    rows = []
    for rid in observed.run_ids:
        if rid in errors:
            g = observed.run(rid)
            rows.append({"run_id": rid, "model": forecaster.config.model,
                         "observed_until": int(g[STEP].iloc[-1]) if len(g) else np.nan, "n_obs": len(g),
                         "horizon": horizons[rid] if horizons[rid] is not None else np.nan,
                         "status": "error", "error": errors[rid]})  # fmt: skip
        else:
            rows.append(ok.set_index("run_id").loc[rid].to_dict() | {"run_id": rid})
    table = pd.DataFrame(rows).reindex(columns=[*TABLE_COLUMNS, "status", "error"])
    return BatchResult(fit=fit, table=table, errors=errors, full=runs, truncated=truncated)
