"""The background forecasting process shared by :class:`~bayesgrpo.integrations.trl.BayesGRPOCallback`
and ``bayesgrpo watch``.

One persistent worker process per training run (or per ``watch``), so the model is compiled once
(the first compile takes 15-30 s; later fits about 1 s):

* started as a fresh interpreter (``python -m bayesgrpo.integrations._worker``: a *spawn*, never a
  fork of the training process, and it never re-imports the user's training script), in its own
  session (a Ctrl-C in the terminal does not reach it), with CUDA hidden, BLAS / numba / OpenMP
  threads capped and a lower CPU priority (``nice``);
* fed through its stdin with length-prefixed pickled requests by a sender thread, answered on its
  stdout (the worker's own prints go to stderr, i.e. to ``log_file``) and read by a receiver thread,
  so :meth:`ForecastWorker.submit` and :meth:`ForecastWorker.poll` never block the caller;
* one fit in flight at a time: a request submitted while a fit runs replaces any older request
  still waiting (only the newest data are worth fitting);
* a fit that raises is answered with ``{"ok": False, "error": ...}``; a worker that dies is restarted
  (at most ``max_restarts`` times) on the next request.

This module is also the single adapter to bayesgrpo modules below the top-level API (``diagnose``,
``decisions``, ``io._common``, ``errors``): when those modules move, only :func:`_lib` (worker side)
and :func:`_light` (training-process side) change.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
import time
import traceback
import warnings
from pathlib import Path

__all__ = [
    "ForecastWorker",
    "forecast_request",
    "request_runs",
    "run_config_meta",
    "summarize_fit",
    "SEVERITY_RANK",
    "HISTORY_COLUMNS",
    "append_history",
    "write_latest",
]

log = logging.getLogger("bayesgrpo")

#: seconds after which a live HTML report reloads itself
REPORT_REFRESH = 10

#: severity of a diagnose finding -> the number logged as ``bayesgrpo/flag/<mode>``
SEVERITY_RANK = {"none": 0.0, "watch": 1.0, "warning": 2.0, "critical": 3.0}

_THREAD_VARS = (
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS", "NUMBA_NUM_THREADS", "RAYON_NUM_THREADS",
)  # fmt: skip


# ----------------------------------------------------------------------------- the one adapter
def _lib():
    """Everything this package uses from bayesgrpo, imported in ONE place.

    Top-level API: ``Forecaster``, ``SamplerConfig``, ``RunSet``. Below it: ``diagnose_runs``,
    ``recommend_stop`` and the error types, plus everything of :func:`_light`. Imported lazily (the
    training process only needs the light names; PyMC is imported in the worker only).
    """
    import types

    from bayesgrpo import Forecaster, SamplerConfig, write_report
    from bayesgrpo.decisions import recommend_stop
    from bayesgrpo.diagnose import diagnose_runs
    from bayesgrpo.errors import BayesGRPOError, ForecastError, LogFormatError
    from bayesgrpo.forecast.batch import forecast_batch

    return types.SimpleNamespace(
        **vars(_light()), Forecaster=Forecaster, SamplerConfig=SamplerConfig, recommend_stop=recommend_stop,
        forecast_batch=forecast_batch,
        diagnose_runs=diagnose_runs, BayesGRPOError=BayesGRPOError, ForecastError=ForecastError,
        LogFormatError=LogFormatError, write_report=write_report,
    )  # fmt: skip


def _light():
    """The light part of the adapter, safe to import in the training process (no PyMC).

    The importers' key mapping (``ALIASES``, ``canonical_name``, ``map_metric_columns``,
    ``numeric_columns``, ``reward_std_definition``), the schema's ``RunSet`` and ``META_FIELDS`` and
    the error types.
    """
    import types

    import bayesgrpo.errors as errors
    from bayesgrpo.io._common import (
        ALIASES,
        canonical_name,
        map_metric_columns,
        numeric_columns,
        reward_std_definition,
    )
    from bayesgrpo.schema import META_FIELDS, RunSet

    return types.SimpleNamespace(
        ALIASES=ALIASES, canonical_name=canonical_name, map_metric_columns=map_metric_columns,
        numeric_columns=numeric_columns, reward_std_definition=reward_std_definition, RunSet=RunSet,
        errors=errors, META_FIELDS=META_FIELDS,
    )  # fmt: skip


def reward_keys() -> frozenset:
    """Source metric names that carry the reward (the importers' aliases), for cheap row checks."""
    return frozenset(_light().ALIASES["reward"])


# ----------------------------------------------------------------------------- run configuration
def _get(cfg, name, default=None):
    v = cfg.get(name, default) if isinstance(cfg, dict) else getattr(cfg, name, default)
    return default if v is None else v


def run_config_meta(config, *, world_size: int = 1, max_steps: int | None = None) -> dict:
    """Run metadata (schema :data:`~bayesgrpo.schema.META_FIELDS`) from a trainer configuration.

    Works on a ``transformers.TrainingArguments`` / ``trl.GRPOConfig`` object and on the dict of a
    W&B run's ``config``. The refresh interval (optimizer steps between two generations, the lag
    of physics.md) is ``steps_per_generation * num_iterations / gradient_accumulation_steps``
    (TRL >= 0.18; older TRL generates every optimizer step and reuses it ``num_iterations`` times,
    which is the same formula with ``steps_per_generation = gradient_accumulation_steps``).

    Parameters
    ----------
    config : TrainingArguments, GRPOConfig or dict
    world_size : int
        Number of data-parallel processes (the global batch is per-device batch x GAS x world).
    max_steps : int, optional
        Overrides ``config.max_steps`` (the trainer's ``state.max_steps`` is the resolved one).

    Returns
    -------
    dict
        Any of ``max_steps, learning_rate, beta1, group_size, batch_size, refresh_interval,
        logging_steps, prompts_per_step, scale_rewards`` that the configuration holds, and
        ``trl_version`` for a TRL configuration (with ``scale_rewards`` it says what TRL's ``reward_std``
        measures: :func:`bayesgrpo.io._common.trl_reward_std_definition`).

    Examples
    --------
    >>> m = run_config_meta({"max_steps": 500, "learning_rate": 1e-6, "adam_beta1": 0.9,
    ...                      "num_generations": 8, "per_device_train_batch_size": 8,
    ...                      "gradient_accumulation_steps": 4, "steps_per_generation": 8})
    >>> m["group_size"], m["batch_size"], m["refresh_interval"]
    (8, 32, 2)
    """
    out: dict = {}
    ms = max_steps if max_steps is not None else _get(config, "max_steps")
    if ms is not None and float(ms) > 0:
        out["max_steps"] = int(ms)
    for src, dst in (("learning_rate", "learning_rate"), ("adam_beta1", "beta1")):
        v = _get(config, src)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[dst] = float(v)
    g = _get(config, "num_generations")
    if isinstance(g, (int, float)) and g > 0:
        out["group_size"] = int(g)
    bs = _get(config, "per_device_train_batch_size")
    gas = _get(config, "gradient_accumulation_steps", 1) or 1
    if isinstance(bs, (int, float)) and bs > 0:
        out["batch_size"] = int(bs) * int(gas) * int(world_size or 1)
        if "group_size" in out and out["batch_size"] % out["group_size"] == 0:
            out["prompts_per_step"] = out["batch_size"] // out["group_size"]
    spg = _get(config, "steps_per_generation") or gas
    nit = _get(config, "num_iterations", 1) or 1
    try:
        k = float(spg) * float(nit) / float(gas)
    except (TypeError, ValueError, ZeroDivisionError):
        k = 1.0
    out["refresh_interval"] = max(1, int(round(k)))
    ls = _get(config, "logging_steps")
    if isinstance(ls, (int, float)) and ls >= 1:
        out["logging_steps"] = int(ls)
    sr = _get(config, "scale_rewards")  # with the TRL version: what TRL's reward_std measures
    if sr is not None:
        out["scale_rewards"] = {True: "group", False: "none"}.get(sr, str(sr)) if isinstance(sr, bool) else str(sr)
    if type(config).__module__.startswith("trl."):
        from importlib.metadata import PackageNotFoundError, version

        try:
            out["trl_version"] = version("trl")
        except PackageNotFoundError:
            pass
    return out


# ----------------------------------------------------------------------------- requests
def forecast_request(
    *,
    run_id: str,
    rows: list[dict] | None = None,
    frame=None,
    meta: dict | None = None,
    horizon: int | None = None,
    model: str = "oscillator",
    sampler: dict | None = None,
    target: float | None = None,
    improve: dict | None = None,
    utility: dict | None = None,
    ceiling: float | None = None,
    plot: str | None = None,
    diagnose: bool = True,
    report: str | None = None,
    report_refresh: int = REPORT_REFRESH,
) -> dict:
    """Build one forecast request for :meth:`ForecastWorker.submit`.

    Parameters
    ----------
    run_id : str
    rows : list of dict, optional
        Raw logged rows (trainer key names, ``step`` included); mapped onto the schema in the worker
        with the importers' key mapping. Rows of the same step are merged (eval rows into train rows).
    frame : pandas.DataFrame, optional
        Already mapped long rows (``step``, ``reward``, ...), e.g. ``RunSet.data`` of one run.
    meta : dict, optional
        Run metadata (``max_steps``, ``group_size``, ``beta1``, ``refresh_interval`` ...).
    horizon : int, optional
        Step to forecast to (default: ``meta["max_steps"]``).
    model, sampler
        ``Forecaster`` model kind and ``SamplerConfig`` fields.
    target : float, optional
        Adds ``p_target`` = P(final reward >= target).
    improve : dict, optional
        ``{"delta": d, "window": w, "relative": bool}``: adds ``best`` (largest mean of ``w`` consecutive
        logged rewards so far) and ``p_improve`` = P(final reward >= best + d), ``d`` in units of the
        run's reward scale (the forecast's normalising scale) when ``relative``.
    utility : dict, optional
        Keyword arguments of ``recommend_stop`` (``cost_per_step``, ``value_per_reward``, ...):
        adds ``recommended_stop`` and ``stop_now``.
    ceiling : float, optional
        Verifiable reward ceiling for the diagnostics.
    plot : str, optional
        Write the fan chart (PNG) to this path.
    diagnose : bool
        Add the failure-mode flags (``flags``: mode -> severity).
    report : str, optional
        Rewrite this HTML report (``bayesgrpo.write_report``) after the fit, atomically; the page
        reloads itself every ``report_refresh`` seconds.
    """
    if rows is None and frame is None:
        raise ValueError("forecast_request needs rows or frame")
    return dict(
        kind="forecast", run_id=str(run_id), rows=rows, frame=frame, meta=dict(meta or {}), horizon=horizon,
        model=model, sampler=dict(sampler or {}), target=target, improve=improve, utility=utility,
        ceiling=ceiling, plot=plot, diagnose=diagnose, report=report, report_refresh=int(report_refresh),
    )  # fmt: skip


# ----------------------------------------------------------------------------- the fit (worker side)
def request_runs(req: dict):
    """The :class:`~bayesgrpo.schema.RunSet` a forecast request describes (what the worker fits).

    Raw ``rows`` are mapped onto the schema's channels with the importers' one table
    (:func:`bayesgrpo.io._common.map_metric_columns`; the request's ``meta`` says what TRL's
    ``reward_std`` measures); a ``frame`` is already mapped (``watch`` reads logs with ``read_runs``).
    Light: usable in the training process (no PyMC).
    """
    import pandas as pd

    rid = req["run_id"]
    if req.get("frame") is not None:
        df = pd.DataFrame(req["frame"]).copy()
    else:
        df = _frame_from_rows(req["rows"], rid, meta=req.get("meta"))
    df["run_id"] = rid  # every refit swaps its data into the one compiled model (lagged runs included)
    meta = pd.DataFrame([{**req.get("meta", {}), "run_id": rid}])
    return _light().RunSet.from_frames(df, meta, source=req.get("source"), on_duplicate="last")


def _frame_from_rows(rows: list[dict], run_id: str, *, meta: dict | None = None):
    import pandas as pd

    lib = _light()
    merged: dict[int, dict] = {}
    for r in rows:
        st = r.get("step")
        if st is None:
            continue
        merged.setdefault(int(st), {}).update({k: v for k, v in r.items() if v is not None})
    if not merged:
        raise lib.errors.ForecastError(f"run {run_id!r}: no logged row with a step")
    df = pd.DataFrame.from_records(list(merged.values()))
    df["step"] = list(merged)
    df["run_id"] = run_id
    df = lib.numeric_columns(df)
    df, _ = lib.map_metric_columns(df, reward_std=lib.reward_std_definition(meta or {}))
    if "reward" not in df.columns:
        raise lib.errors.ForecastError(
            f"run {run_id!r}: none of the {len(df)} logged rows has a reward (keys: "
            f"{sorted(c for c in df.columns if c not in ('run_id', 'step'))[:10]}); expected 'reward' or another reward key"
        )
    return df


def _best_window_mean(y, window: int) -> float:
    import numpy as np

    y = np.asarray(y, dtype=float)
    y = y[np.isfinite(y)]
    if len(y) == 0:
        return math.nan
    w = max(1, min(int(window), len(y)))
    c = np.convolve(y, np.ones(w) / w, mode="valid")
    return float(c.max())


def _improve_delta(improve: dict, scale: float) -> float:
    """The improvement a stop rule asks for, in reward units (``delta x scale`` when relative)."""
    d = float(improve.get("delta", 0.0))
    return d * float(scale) if improve.get("relative") else d


def summarize_fit(fit, run_id: str, *, target=None, improve=None, utility=None, ceiling=None, diagnose=True) -> dict:
    """The numbers the callback and ``watch`` report, from a fitted forecast of one run.

    Returns a dict of plain floats: ``observed_until, n_obs, horizon, final_mean, final_q10,
    final_q50, final_q90, stop_step_q50, p_stop_before_horizon, p_plateaued, plateau_q50,
    p_underdamped, r_hat_max, divergences``, ``status`` (``ok`` or ``warning``: poor sampler health,
    the reason in ``status_reason``) plus ``p_target`` (with ``target``), ``best``/``p_improve`` (with
    ``improve``), ``recommended_stop``/``stop_now``/``expected_reward_at_stop`` (with ``utility``) and
    ``flags`` (mode -> severity name, with ``diagnose``). ``p_plateaued`` is the posterior probability
    that the latent reward has already realised ``stop_fraction`` (95%) of its gain from R0 to the
    plateau. ``stop_step_q50`` is censored at the horizon when ``p_stop_before_horizon < 0.5`` (shown
    as ``>H``; the callback then logs no stop step).
    """
    import numpy as np

    lib = _lib()
    tab = fit.table()
    row = tab.loc[tab["run_id"] == run_id].iloc[0]
    fin = np.asarray(fit.final_draws(run_id), dtype=float)
    pdr = fit.paths(run_id)
    out = {
        "run_id": run_id,
        "observed_until": int(row["observed_until"]), "n_obs": int(row["n_obs"]), "horizon": int(row["horizon"]),
        "final_mean": float(row["final_mean"]), "final_q10": float(row["final_q10"]),
        "final_q50": float(row["final_q50"]), "final_q90": float(row["final_q90"]),
        "stop_step_q50": float(row["stop_q50"]), "p_stop_before_horizon": float(row["p_stop_before_horizon"]),
        "plateau_q50": float(row["plateau_q50"]), "p_underdamped": float(row["p_underdamped"]),
        "r_hat_max": float(row["r_hat_max"]), "divergences": float(row["divergences"]),
    }  # fmt: skip
    out["status"], out["status_reason"] = fit.health_status(run_id)
    sf = float(fit.config.stop_fraction)
    if pdr.latent_now is not None:
        gain = pdr.r_star - pdr.r0
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(np.abs(gain) > 1e-12, (pdr.latent_now - pdr.r0) / gain, 1.0)
        out["p_plateaued"] = float(np.mean(frac >= sf))
    else:
        out["p_plateaued"] = math.nan
    if target is not None:
        out["p_target"] = float(np.mean(fin >= float(target)))
    if improve is not None:
        obs = fit.runs.run(run_id)["reward"].to_numpy(dtype=float)
        best = _best_window_mean(obs, int(improve.get("window", 5)))
        out["best"] = best
        out["p_improve"] = float(np.mean(fin >= best + _improve_delta(improve, fit.infos[run_id].scale)))
    if utility:
        kw = dict(utility)
        kw.setdefault("max_steps", out["horizon"])
        rec = lib.recommend_stop(pdr, **kw)
        out["recommended_stop"] = float(rec.step)
        out["stop_now"] = bool(rec.step <= out["observed_until"])
        out["expected_reward_at_stop"] = float(rec.expected_reward)
        out["stop_rule"] = rec.rule
    if diagnose:
        res = lib.diagnose_runs(fit.runs.select([run_id]), posteriors={run_id: pdr}, ceiling=ceiling)
        out["flags"] = {str(m): str(s) for m, s in zip(res["mode"], res["severity"])}
    out["table"] = {k: (v.item() if hasattr(v, "item") else v) for k, v in row.to_dict().items()}
    return out


def summarize_complete(runs, run_id: str, row, *, target=None, improve=None, utility=None, ceiling=None,
                       diagnose=True) -> dict:  # fmt: skip
    """The result for a run logged up to its horizon (status ``complete``): the observed final reward
    as a zero-width interval, no stop step; ``p_target`` / ``p_improve`` are 0 or 1 and a stop rule's
    ``stop_now`` is True (there is nothing left to train)."""
    import numpy as np

    v = float(row["final_q50"])
    out = {
        "run_id": run_id, "observed_until": int(row["observed_until"]), "n_obs": int(row["n_obs"]),
        "horizon": int(row["horizon"]), "final_mean": v, "final_q10": v, "final_q50": v, "final_q90": v,
        "stop_step_q50": math.nan, "p_stop_before_horizon": math.nan, "p_plateaued": math.nan,
        "plateau_q50": math.nan, "status": "complete", "status_reason": "",
    }  # fmt: skip
    if target is not None:
        out["p_target"] = float(v >= float(target))
    if improve is not None:
        y = runs.run(run_id)["reward"].to_numpy(dtype=float)
        best = _best_window_mean(y, int(improve.get("window", 5)))
        out["best"], out["p_improve"] = best, float(v >= best + _improve_delta(improve, float(np.ptp(y))))
    if utility:
        out.update(recommended_stop=float(out["horizon"]), stop_now=True, expected_reward_at_stop=v,
                   stop_rule="complete")  # fmt: skip
    if diagnose:
        res = _lib().diagnose_runs(runs.select([run_id]), ceiling=ceiling)
        out["flags"] = {str(m): str(s) for m, s in zip(res["mode"], res["severity"], strict=True)}
    out["table"] = {k: (v_.item() if hasattr(v_, "item") else v_) for k, v_ in row.to_dict().items()}
    return out


def _handle(req: dict) -> dict:
    lib = _lib()
    if req.get("kind") == "warmup":
        return _warmup(req)
    rid = req["run_id"]
    fid = rid
    kw = dict(target=req.get("target"), improve=req.get("improve"), utility=req.get("utility"),
              ceiling=req.get("ceiling"), diagnose=req.get("diagnose", True))  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = request_runs(req)
        # the horizon the user or the trainer set, never moved: a run logged up to it is complete
        horizon = req.get("horizon") or req.get("meta", {}).get("max_steps")
        fc = lib.Forecaster(req.get("model", "oscillator"), sampler=lib.SamplerConfig(**req.get("sampler", {})))
        res = lib.forecast_batch(runs, forecaster=fc, horizon=None if horizon is None else int(horizon), strict=True)
        row = res.table.set_index("run_id").loc[fid].copy()
        row["run_id"] = fid
        if fid in res.complete:
            out = summarize_complete(runs, fid, row, **kw)
        else:
            out = summarize_fit(res.fit, fid, **kw)
            if req.get("plot"):
                _plot(res.fit, fid, req["plot"])
                out["plot"] = str(req["plot"])
            if req.get("report"):
                out["report"] = _report(res.fit, req, title=f"bayesgrpo live: {rid}")
        out["run_id"] = rid
    caught_msgs = [f"{w.category.__name__}: {w.message}" for w in caught]
    out["warnings"] = caught_msgs[:10]
    return out


def _report(fit, req: dict, *, title: str) -> str:
    """Rewrite the live HTML report of ``fit`` (atomically; the page reloads itself)."""
    u = req.get("utility") or {}
    cost = u.get("cost_per_step")
    if cost is None and u.get("cost_per_hour") is not None and u.get("steps_per_hour"):
        cost = float(u["cost_per_hour"]) / float(u["steps_per_hour"])
    p = _lib().write_report(fit, req["report"], target=req.get("target"), ceiling=req.get("ceiling"),
                            cost_per_step=cost, value_per_reward=u.get("value_per_reward"), title=title,
                            refresh=req.get("report_refresh", REPORT_REFRESH))  # fmt: skip
    return str(p)


def _plot(fit, run_id: str, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bayesgrpo.io.output import save_figure

    fig = fit.plot(run_id)
    save_figure(fig, path, dpi=100)  # atomic: readers never see a half-written chart
    plt.close(fig)


def _warmup(req: dict) -> dict:
    """Compile the model on a synthetic curve so the first real forecast takes seconds."""
    import numpy as np
    import pandas as pd

    lib = _lib()
    n = 12
    steps = np.arange(1, n + 1)
    rng = np.random.default_rng(0)
    y = 0.6 - 0.4 * np.exp(-steps / 8.0) + 0.02 * rng.standard_normal(n)
    df = pd.DataFrame({"run_id": "warmup", "step": steps, "reward": y})
    meta = {k: v for k, v in req.get("meta", {}).items() if k in ("beta1", "refresh_interval")}
    runs = lib.RunSet.from_frames(df, pd.DataFrame([{"run_id": "warmup", **meta}]))
    smp = {**req.get("sampler", {}), "draws": 10, "tune": 10}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib.Forecaster(req.get("model", "oscillator"), sampler=lib.SamplerConfig(**smp)).fit(runs, horizon=3 * n)
    return {"run_id": "warmup"}


# ----------------------------------------------------------------------------- forecast history
#: columns of the forecast history CSV written by the callback and ``watch --history``
HISTORY_COLUMNS = (
    "time", "logged_at_step", "ok", "status", "status_reason", "observed_until", "n_obs", "horizon", "final_mean",
    "final_q10", "final_q50", "final_q90", "p_target", "stop_step_q50", "p_stop_before_horizon", "p_plateaued",
    "plateau_q50", "best", "p_improve",
    "recommended_stop", "flag_reward_hacking", "flag_advantage_degeneracy", "flag_policy_concentration",
    "flag_dynamical_instability", "r_hat_max", "divergences", "seconds", "error",
)  # fmt: skip


def history_row(result: dict, *, logged_at_step=None) -> dict:
    """One row of the forecast history (:data:`HISTORY_COLUMNS`) from a worker result."""
    row = {c: result.get(c) for c in HISTORY_COLUMNS}
    row["time"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    row["logged_at_step"] = logged_at_step
    for mode, sev in (result.get("flags") or {}).items():
        row[f"flag_{mode}"] = sev
    row["error"] = result.get("error")
    return row


def append_history(path, result: dict, *, logged_at_step=None) -> None:
    """Append one result to a forecast-history CSV (header written when the file is new)."""
    import csv

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    new = not p.exists() or p.stat().st_size == 0
    with open(p, "a", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(HISTORY_COLUMNS))
        if new:
            w.writeheader()
        row = history_row(result, logged_at_step=logged_at_step)
        w.writerow({k: ("" if v is None else v) for k, v in row.items()})


def write_latest(path, result: dict) -> None:
    """Write the latest result as JSON (atomically; the per-run table row included)."""
    import json

    from bayesgrpo.io.output import atomic_write_text

    keep = {k: v for k, v in result.items() if k not in ("traceback",)}
    atomic_write_text(path, json.dumps(keep, indent=2, default=str))


# ----------------------------------------------------------------------------- framing
def _send(fh, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    fh.write(struct.pack(">Q", len(data)) + data)
    fh.flush()


def _read_exact(fh, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = fh.read(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def _recv(fh):
    head = _read_exact(fh, 8)
    if head is None:
        return None
    (n,) = struct.unpack(">Q", head)
    body = _read_exact(fh, n)
    return None if body is None else pickle.loads(body)


# ----------------------------------------------------------------------------- parent side
class ForecastWorker:
    """Client of one persistent background forecasting process (see the module docstring).

    Parameters
    ----------
    threads : int
        Cap on BLAS / OpenMP / numba threads of the worker (NUTS chains run in nutpie's own
        threads, at most 2).
    niceness : int
        CPU priority increment of the worker (``os.nice``; 19 = lowest): training keeps priority when
        both compete for CPU cores.
    log_file : str or Path, optional
        Where the worker's own output (warnings, compile messages, tracebacks) goes; default: discarded.
    max_restarts : int
        How many times a dead worker is restarted before requests are answered with errors.
    python : str, optional
        Interpreter to run the worker with (default: this one).

    Examples
    --------
    >>> w = ForecastWorker()                                                  # doctest: +SKIP
    >>> rid = w.submit(forecast_request(run_id="r", rows=rows, meta={"max_steps": 500}))  # doctest: +SKIP
    >>> results = w.wait_for(rid, timeout=60)                                 # doctest: +SKIP
    >>> w.close()                                                             # doctest: +SKIP
    """

    def __init__(
        self, *, threads: int = 1, niceness: int = 19, log_file=None, max_restarts: int = 2, python: str | None = None
    ):
        self.threads = int(threads)
        self.niceness = int(niceness)
        self.log_file = Path(log_file) if log_file else None
        self.max_restarts = int(max_restarts)
        self.python = python or sys.executable
        self._cv = threading.Condition()
        self._pending: dict | None = None
        self._inflight: dict | None = None
        self._inflight_since = 0.0
        self._results: queue.Queue = queue.Queue()
        self._proc: subprocess.Popen | None = None
        self._starts = 0
        self._next_id = 0
        self._closed = False
        self._dead = False
        self._threads: list[threading.Thread] = []
        self._log_fh = None
        self.submitted = 0
        self.answered = 0

    # -- lifecycle
    def _env(self) -> dict:
        env = dict(os.environ)
        n = str(max(1, self.threads))
        for v in _THREAD_VARS:
            env[v] = n
        env.update(
            CUDA_VISIBLE_DEVICES="", MPLBACKEND="Agg", PYTHONUNBUFFERED="1",
            BAYESGRPO_WORKER_NICE=str(self.niceness), TOKENIZERS_PARALLELISM="false",
        )  # fmt: skip
        return env

    def start(self) -> ForecastWorker:
        """Start the process (also done by the first :meth:`submit`). Returns self."""
        with self._cv:
            if self._proc is not None and self._proc.poll() is None:
                return self
            self._start_locked()
        return self

    def _start_locked(self) -> None:
        if self._log_fh is None and self.log_file is not None:
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            self._log_fh = open(self.log_file, "ab")
        self._proc = subprocess.Popen(
            [self.python, "-m", "bayesgrpo.integrations._worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._log_fh if self._log_fh is not None else subprocess.DEVNULL,
            env=self._env(), start_new_session=True, close_fds=True,
        )  # fmt: skip
        self._starts += 1
        self._dead = False
        log.info("bayesgrpo: started forecasting worker pid %d", self._proc.pid)
        proc = self._proc
        for target, name in ((self._send_loop, "send"), (self._recv_loop, "recv")):
            t = threading.Thread(target=target, args=(proc,), name=f"bayesgrpo-worker-{name}", daemon=True)
            t.start()
            self._threads.append(t)

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def busy(self) -> bool:
        """A fit is running or waiting to be sent."""
        with self._cv:
            return self._inflight is not None or self._pending is not None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- requests
    def submit(self, request: dict) -> int:
        """Queue a request (replacing an older one still waiting); returns its id. Never blocks on the fit."""
        with self._cv:
            if self._closed:
                raise RuntimeError("ForecastWorker is closed")
            self._next_id += 1
            rid = self._next_id
            if self._pending is not None:
                log.debug("bayesgrpo: request %d superseded by %d before it was sent", self._pending["id"], rid)
            self._pending = {**request, "id": rid}
            self.submitted += 1
            if self._proc is None or (self._dead and self._inflight is None):
                if self._starts <= self.max_restarts:
                    if self._proc is not None:
                        log.warning("bayesgrpo: the forecasting worker died; restarting it")
                    self._start_locked()
                else:
                    req, self._pending = self._pending, None
                    self._results.put(
                        {
                            "id": rid,
                            "ok": False,
                            "kind": req.get("kind"),
                            "error": "the forecasting worker died repeatedly; no more forecasts",
                        }
                    )
            self._cv.notify_all()
            return rid

    def poll(self) -> list[dict]:
        """Results received so far (non-blocking)."""
        out = []
        while True:
            try:
                out.append(self._results.get_nowait())
            except queue.Empty:
                return out

    def wait_for(self, request_id: int, *, timeout: float) -> list[dict]:
        """Block until the answer to ``request_id`` (or a later one) arrives or ``timeout`` s pass.

        Returns every result received meanwhile (possibly empty).
        """
        deadline = time.monotonic() + max(0.0, float(timeout))
        out = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return out
            try:
                res = self._results.get(timeout=min(left, 0.5))
            except queue.Empty:
                with self._cv:
                    gone = self._dead and self._inflight is None and self._pending is None
                if gone:
                    return out
                continue
            out.append(res)
            if res.get("id", 0) >= request_id:
                return out

    def inflight_seconds(self) -> float:
        """How long the fit in flight has been running (0 when idle)."""
        with self._cv:
            return 0.0 if self._inflight is None else time.monotonic() - self._inflight_since

    def close(self, *, timeout: float = 5.0) -> None:
        """Stop the worker (asks it to exit, then terminates it after ``timeout`` s)."""
        with self._cv:
            if self._closed:
                return
            self._closed = True
            proc = self._proc
            self._cv.notify_all()
        if proc is not None and proc.poll() is None:
            with self._cv:
                busy = self._inflight is not None
            try:
                _send(proc.stdin, {"kind": "shutdown"})
                proc.stdin.close()
            except (OSError, ValueError) as e:
                log.debug("bayesgrpo: worker stdin already closed (%s)", e)
            try:
                # a fit in flight cannot be interrupted gracefully: do not wait for it
                proc.wait(timeout=0.2 if busy else timeout)
            except subprocess.TimeoutExpired:
                log.info("bayesgrpo: forecasting worker pid %d still busy; terminating it", proc.pid)
                proc.terminate()
                try:
                    proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=3)
        for t in self._threads:
            t.join(timeout=1.0)
        if self._log_fh is not None:
            self._log_fh.close()
            self._log_fh = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # -- threads
    def _send_loop(self, proc) -> None:
        while True:
            with self._cv:
                while not self._closed and (self._pending is None or self._inflight is not None) and self._proc is proc:
                    self._cv.wait()
                if self._closed or self._proc is not proc:
                    return
                req, self._pending = self._pending, None
                self._inflight = req
                self._inflight_since = time.monotonic()
            try:
                _send(proc.stdin, req)
            except (OSError, ValueError, pickle.PicklingError) as e:
                log.warning(
                    "bayesgrpo: could not send a request to the forecasting worker (%s: %s)", type(e).__name__, e
                )
                with self._cv:
                    self._inflight = None
                    self._dead = True
                    self._cv.notify_all()
                self._results.put(
                    {"id": req["id"], "ok": False, "kind": req.get("kind"), "error": f"{type(e).__name__}: {e}"}
                )
                return

    def _recv_loop(self, proc) -> None:
        while True:
            try:
                msg = _recv(proc.stdout)
            except (OSError, ValueError, EOFError, pickle.UnpicklingError) as e:
                log.warning("bayesgrpo: bad message from the forecasting worker (%s: %s)", type(e).__name__, e)
                msg = None
            if msg is None:
                with self._cv:
                    lost = self._inflight
                    self._inflight = None
                    self._dead = True
                    closed = self._closed
                    self._cv.notify_all()
                if lost is not None and not closed:
                    code = proc.poll()
                    self._results.put({
                        "id": lost["id"], "ok": False, "kind": lost.get("kind"),
                        "error": f"the forecasting worker exited (code {code}) during the fit"
                        + (f"; see {self.log_file}" if self.log_file else ""),
                    })  # fmt: skip
                return
            self.answered += 1
            self._results.put(msg)
            with self._cv:
                if self._inflight is not None and msg.get("id") == self._inflight["id"]:
                    self._inflight = None
                self._cv.notify_all()


# ----------------------------------------------------------------------------- worker side
def main() -> None:  # pragma: no cover - runs in the child process (exercised by the tests)
    """Entry point of the worker process: answer requests from stdin until EOF or shutdown."""
    proto_in = sys.stdin.buffer
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed by libraries goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    try:
        os.nice(int(os.environ.get("BAYESGRPO_WORKER_NICE", "19")))
    except (OSError, ValueError, AttributeError) as e:
        print(f"bayesgrpo worker: could not lower priority ({e})", file=sys.stderr)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    while True:
        req = _recv(proto_in)
        if req is None or req.get("kind") == "shutdown":
            break
        t0 = time.perf_counter()
        try:
            res = _handle(req)
            res["ok"] = True
        except Exception as e:  # noqa: BLE001 - every failure is reported back, the worker lives on
            res = {"ok": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(limit=8)}
            print(f"bayesgrpo worker: request {req.get('id')} failed\n{res['traceback']}", file=sys.stderr)
        res["id"] = req.get("id")
        res["kind"] = req.get("kind", "forecast")
        res["seconds"] = time.perf_counter() - t0
        try:
            _send(proto_out, res)
        except (OSError, ValueError) as e:
            print(f"bayesgrpo worker: parent gone ({e}); exiting", file=sys.stderr)
            break


if __name__ == "__main__":  # pragma: no cover
    main()
