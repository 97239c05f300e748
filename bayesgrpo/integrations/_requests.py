"""The light side of the live integrations, importable in the training process (no PyMC): forecast
requests (:func:`forecast_request`), the RunSet a request describes (:func:`request_runs`, mapped with
the importers' one key table), and the protocol with the worker process (length-prefixed pickles).

This is the one adapter to the modules below (:func:`_light`): when they move, only it changes.
"""

from __future__ import annotations

import pickle
import struct

from bayesgrpo.conventions import DEFAULT_KIND

__all__ = ["forecast_request", "request_runs", "reward_keys", "SEVERITY_RANK", "REPORT_REFRESH"]

#: seconds after which a live HTML report reloads itself
REPORT_REFRESH = 10

#: severity of a diagnose finding -> the number logged as ``bayesgrpo/flag/<mode>``
SEVERITY_RANK = {"none": 0.0, "watch": 1.0, "warning": 2.0, "critical": 3.0}


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


# ----------------------------------------------------------------------------- requests
def forecast_request(
    *,
    run_id: str,
    rows: list[dict] | None = None,
    frame=None,
    meta: dict | None = None,
    horizon: int | None = None,
    kind: str = DEFAULT_KIND,
    sampler: dict | None = None,
    target: float | None = None,
    improve: dict | None = None,
    utility: dict | None = None,
    ceiling: float | None = None,
    plot: str | None = None,
    diagnose: bool = True,
    report: str | None = None,
    report_refresh: int = REPORT_REFRESH,
    policy: dict | None = None,
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
    kind, sampler
        ``Forecaster`` model kind and ``SamplerConfig`` fields (the request carries the kind as
        ``model_kind``: its ``kind`` says what the request is).
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
    policy : dict, optional
        ``StopPolicy`` fields (``risk``, ``delta``, ``patience``): adds the stop policy's answer (``p_gain``,
        ``advice``, ``advice_error_rate``, ``policy_patience``, ``policy``), computed in the worker
        (:mod:`bayesgrpo.decisions.stop`).
    """
    if rows is None and frame is None:
        raise ValueError("forecast_request needs rows or frame")
    return dict(
        kind="forecast", run_id=str(run_id), rows=rows, frame=frame, meta=dict(meta or {}), horizon=horizon,
        model_kind=kind, sampler=dict(sampler or {}), target=target, improve=improve, utility=utility,
        ceiling=ceiling, plot=plot, diagnose=diagnose, report=report, report_refresh=int(report_refresh),
        policy=dict(policy) if policy else None,
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
