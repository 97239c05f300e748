"""Follow a training log that is being written and re-forecast every N new steps (``bayesgrpo watch``).

Sources (re-read at every poll; what was seen is kept, later records win on a step):

* a Hugging Face / TRL output folder: the newest ``checkpoint-*/trainer_state.json`` (or
  ``trainer_state.json`` in the folder itself, whichever is further); a folder of TensorBoard event
  files;
* any log file :func:`bayesgrpo.io.read_runs` reads: a verl file-logger JSONL (which verl truncates
  when a run restarts: the steps seen before stay known), an OpenRLHF or TRL console log, a
  CSV/JSONL metrics file, ...;
* a W&B run, ``wandb:entity/project/run_id`` (full history through the public API, new rows only
  after the first read).

Forecasts run in the shared background worker (:class:`~bayesgrpo.integrations._worker.ForecastWorker`),
so polling never waits for a fit; each answer goes to the ``on_update`` callback, and its alerts (stop
advice, failure flags, P(decline): :mod:`bayesgrpo.integrations.alerts`) to the trackers active in this
process (``trackio.alert``, ``wandb.alert``).
"""

from __future__ import annotations

import logging
import math
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from bayesgrpo.conventions import DEFAULT_KIND
from bayesgrpo.integrations._requests import _light, forecast_request
from bayesgrpo.integrations._worker import ForecastWorker
from bayesgrpo.integrations.alerts import Alerter, active_trackers
from bayesgrpo.integrations.history import append_history, write_latest
from bayesgrpo.integrations.stops import PolicyStop

__all__ = ["watch", "LogSource", "format_line", "stop_text", "FIRST_FORECAST_NOTE"]

log = logging.getLogger("bayesgrpo")

#: the status line while the worker prepares the model: the first forecast waits for it (a minute on a machine
#: that never compiled it; seconds from the disk cache), and nothing else is printed until then
FIRST_FORECAST_NOTE = ("compiling the model in the background (about a minute the first time on a machine, seconds "
                       "once it is in the disk cache); the first forecast comes after it")  # fmt: skip


class LogSource:
    """One followed log: resolves what to read at each poll and keeps every step seen.

    Parameters
    ----------
    path : str or Path
        File, HF output folder, TensorBoard folder or ``wandb:entity/project/run_id``.
    fmt : str, optional
        Log format for files (default: detected).
    run : str, optional
        Run id to follow when the log holds several runs (default: the first).
    wandb_api : object, optional
        ``wandb.Api``-like object for ``wandb:`` paths (tests pass a mock).
    meta : DataFrame, optional
        The user's metadata (``--meta``): the row of the followed run (or a single row without
        ``run_id``) overrides what the log holds.
    reward_range : (float, float), optional
        The reward's bounds where the metadata has none (``--reward-range``).
    reward_key : str, optional
        The logged metric to use as the reward.

    Examples
    --------
    >>> src = LogSource("outputs/")           # doctest: +SKIP
    >>> new = src.poll()                      # doctest: +SKIP
    >>> src.frame().tail()                    # doctest: +SKIP
    """

    def __init__(self, path, *, fmt: str | None = None, run: str | None = None, wandb_api=None, meta=None,
                 reward_range=None, reward_key: str | None = None):  # fmt: skip
        self.user_meta = meta  # a metadata frame (bayesgrpo.io.load_meta) or None
        self.reward_range = reward_range
        self.reward_key = reward_key
        self.spec = str(path)
        self.is_wandb = self.spec.startswith("wandb:")
        self.path = None if self.is_wandb else Path(path)
        self.fmt = fmt
        self.run = run
        self.wandb_api = wandb_api
        self.rows: dict[int, dict] = {}
        self.meta: dict = {}
        self.run_id: str | None = None
        self._sig = None
        self._size = None
        self._wandb_step: int | None = None
        self.truncations = 0

    # ------------------------------------------------------------------ resolving
    def target(self) -> Path | None:
        """The file (or TensorBoard folder) to read now; None while nothing readable exists."""
        p = self.path
        if p is None or not p.exists():
            return None
        if p.is_file():
            return p
        from bayesgrpo.io.trl import hf_trainer_state

        ts = hf_trainer_state(p)
        if ts is not None:
            return ts
        if any("tfevents" in f.name for f in p.rglob("*") if f.is_file()):
            return p
        return None

    # ------------------------------------------------------------------ reading
    def poll(self) -> int:
        """Re-read the source if it changed; returns the number of steps new or changed since the last poll."""
        if self.is_wandb:
            return self._poll_wandb()
        t = self.target()
        if t is None:
            return 0
        sig = _signature(t)
        if sig == self._sig:
            return 0
        size = sig[1] if t.is_file() else None
        if (
            size is not None
            and self._size is not None
            and size < self._size
            and t == getattr(self, "_last_target", None)
        ):
            self.truncations += 1
            log.info("bayesgrpo watch: %s shrank (%d -> %d bytes; a restarted run?); keeping the %d steps seen so far",
                     t, self._size, size, len(self.rows))  # fmt: skip
        from bayesgrpo.io import read_runs

        errs = _light().errors
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                # a folder's run keeps one id whichever checkpoint is newest
                kw = {"reward_key": self.reward_key} if self.reward_key else {}
                rs = read_runs(t, format=self.fmt, run_id=self.path.name if self.path and self.path.is_dir() else None,
                               **kw)  # fmt: skip
        except errs.OptionError:  # --reward-key naming no logged key: no later write mends it
            raise
        except errs.BayesGRPOError as e:
            # a file caught mid-write (truncated JSON, half a line) or not yet holding a reward
            log.debug("bayesgrpo watch: %s not readable yet (%s)", t, e)
            return 0
        self._sig, self._size, self._last_target = sig, size, t
        return self._merge(rs)

    def _poll_wandb(self) -> int:
        from bayesgrpo.io.wandb_api import read_wandb_run

        errs = _light().errors
        start = None if self._wandb_step is None else self._wandb_step + 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rs = read_wandb_run(self.spec, api=self.wandb_api, min_step=start)
        except errs.LogFormatError as e:
            if "needs the optional package" in str(e) or "cannot open" in str(e) or "expected a W&B run path" in str(e):
                raise
            log.debug("bayesgrpo watch: no new W&B rows (%s)", e)
            return 0
        if "_step" in rs.data.columns and rs.data["_step"].notna().any():
            self._wandb_step = int(rs.data["_step"].max())
        return self._merge(rs)

    def _merge(self, rs) -> int:
        rid = self.run if self.run is not None else (self.run_id or rs.run_ids[0])
        if rid not in rs.run_ids:
            raise KeyError(f"no run {rid!r} in {self.spec}; runs: {rs.run_ids[:10]}")
        self.run_id = rid
        m = rs.meta.loc[rid].to_dict()
        self.meta.update({k: v for k, v in m.items() if v is not None and not (isinstance(v, float) and math.isnan(v))})
        self.meta.update(self._user_row(rid))
        n = 0
        for rec in rs.run(rid).to_dict("records"):
            st = int(rec["step"])
            rec = {k: v for k, v in rec.items() if not (isinstance(v, float) and math.isnan(v))}
            old = self.rows.get(st)
            if old != rec:
                n += 1
                self.rows[st] = rec
        return n

    def _user_row(self, rid: str) -> dict:
        """The user's metadata for run ``rid`` (``--meta`` row, then ``--reward-range`` where unset)."""
        out: dict = {}
        m = self.user_meta
        if m is not None and len(m):
            if "run_id" in m.columns:
                rows = m.loc[m["run_id"].astype(str) == str(rid)]
                if not len(rows) and len(m) == 1:
                    rows = m  # one row for the one run followed
            else:
                rows = m
            if len(rows):
                out = {k: v for k, v in rows.iloc[0].to_dict().items()
                       if k != "run_id" and v is not None and not (isinstance(v, float) and math.isnan(v))}  # fmt: skip
        if self.reward_range is not None:
            out.setdefault("reward_min", float(self.reward_range[0]))
            out.setdefault("reward_max", float(self.reward_range[1]))
        return out

    def frame(self):
        """The steps seen so far as a long frame (``step``, ``reward``, ...), sorted by step."""
        import pandas as pd

        df = pd.DataFrame.from_records([self.rows[s] for s in sorted(self.rows)])
        drop = [c for c in ("run_id", "source_file", "source_line") if c in df.columns]
        return df.drop(columns=drop)

    @property
    def n_reward(self) -> int:
        return sum(1 for r in self.rows.values() if isinstance(r.get("reward"), float) and math.isfinite(r["reward"]))

    @property
    def last_step(self) -> int | None:
        return max(self.rows) if self.rows else None


def _signature(p: Path):
    if p.is_file():
        st = p.stat()
        return (str(p), st.st_size, st.st_mtime_ns)
    files = sorted(f for f in p.rglob("*") if f.is_file())
    return tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)


# ----------------------------------------------------------------------------- formatting
def format_line(res: dict) -> str:
    """One plain text line for a forecast result (what ``watch`` prints when not on a terminal).

    Examples
    --------
    >>> format_line({"ok": True, "observed_until": 120, "horizon": 1000, "final_q50": 0.61,
    ...              "final_q10": 0.55, "final_q90": 0.66, "stop_step_q50": 640.0, "p_plateaued": 0.1,
    ...              "seconds": 1.2, "flags": {"reward_hacking": "none"}})
    'step 120/1000  final 0.61 [0.55, 0.66]  stop ~640  P(plateaued) 0.10  flags -  (1.2 s)'
    """
    if not res.get("ok"):
        return f"forecast failed: {res.get('error')}"
    flags = [f"{m}={v}" for m, v in (res.get("flags") or {}).items() if v not in ("none", "watch")]
    if res.get("status") == "complete":
        return (f"step {res['observed_until']}/{res['horizon']}  complete: final {res['final_q50']:.3g} (observed)"
                f"  flags {','.join(flags) if flags else '-'}")  # fmt: skip
    s = (f"step {res['observed_until']}/{res['horizon']}  final {res['final_q50']:.3g} "
         f"[{res['final_q10']:.3g}, {res['final_q90']:.3g}]")  # fmt: skip
    if res.get("p_target") is not None:
        s += f"  P(>= target) {res['p_target']:.2f}"
    s += f"  stop {stop_text(res)}  P(plateaued) {res['p_plateaued']:.2f}"
    if res.get("recommended_stop") is not None:
        s += f"  budget: stop at {res['recommended_stop']:.0f}" + (" (now)" if res.get("stop_now") else "")
    if res.get("advice"):
        s += f"  P(gain) {res['p_gain']:.2f} advice {res['advice']}"
    s += "  flags " + (",".join(flags) if flags else "-")
    if res.get("status") == "warning":
        s += f"  WARNING {res.get('status_reason')}"
    s += f"  ({res.get('seconds', float('nan')):.1f} s)"
    return s


def stop_text(res: dict) -> str:
    """The stop step as ``forecast`` shows it: ``~N``, or ``>H`` when it is censored at the horizon
    (``p_stop_before_horizon < 0.5``)."""
    p = res.get("p_stop_before_horizon")
    if p is not None and not p >= 0.5:
        return f">{res['horizon']}"
    return f"~{res['stop_step_q50']:.0f}"


# ----------------------------------------------------------------------------- the loop
def watch(
    path,
    *,
    every: int = 5,
    interval: float = 2.0,
    horizon: int | None = None,
    target: float | None = None,
    utility: dict | None = None,
    kind: str = DEFAULT_KIND,
    sampler: dict | None = None,
    fmt: str | None = None,
    run: str | None = None,
    min_points: int = 6,
    ceiling: float | None = None,
    plot=None,
    report=None,
    history=None,
    on_update: Callable[[dict], None] | None = None,
    on_status: Callable[[str], None] | None = None,
    max_updates: int | None = None,
    idle_timeout: float | None = None,
    final_wait: float = 120.0,
    stop_event: threading.Event | None = None,
    worker: ForecastWorker | None = None,
    wandb_api=None,
    meta=None,
    reward_range=None,
    reward_key: str | None = None,
    policy: dict | None = None,
    alerts=True,
    decline_alarm: float | None = None,
) -> list[dict]:
    """Follow ``path`` and forecast the run every ``every`` new logged steps until stopped.

    Parameters
    ----------
    path : str or Path
        See :class:`LogSource`.
    every : int
        Re-forecast after this many new (or changed) logged steps.
    interval : float
        Seconds between polls of the source.
    horizon : int, optional
        Step to forecast to (default: the log's ``max_steps``).
    target : float, optional
        Adds P(final reward >= target).
    utility : dict, optional
        ``recommend_stop`` keyword arguments (``cost_per_step``, ``value_per_reward``, ...): adds the
        budget's recommended stop step.
    kind, sampler
        ``Forecaster`` model kind and ``SamplerConfig`` fields (default 2 chains of 400 + 400).
    fmt, run
        Log format (files) and run id (logs with several runs).
    min_points : int
        Logged rewards needed for the first forecast.
    ceiling : float, optional
        Verifiable reward ceiling for the failure diagnostics.
    plot : str or Path, optional
        Keep an updated fan chart PNG here.
    report : str or Path, optional
        Keep an updated HTML report here (``bayesgrpo.write_report``: rewritten atomically after each
        forecast; the page reloads itself).
    history : str or Path, optional
        Append every forecast to this CSV (and write ``latest.json`` beside it).
    on_update : callable, optional
        Called with each forecast result (a dict; ``result["ok"]`` False for a failed fit).
    on_status : callable, optional
        Called with progress messages (default: logged at INFO).
    max_updates : int, optional
        Return after this many forecasts.
    idle_timeout : float, optional
        Return when the source has not changed for this many seconds and no fit is pending (after
        one last forecast of steps not yet forecast, waiting at most ``final_wait`` seconds).
    final_wait : float
        Bound on that last wait (covers a first compile).
    stop_event : threading.Event, optional
        Return when set.
    worker : ForecastWorker, optional
        Use this worker (not closed here) instead of starting one.
    wandb_api : object, optional
        ``wandb.Api``-like object for ``wandb:`` paths.
    meta, reward_range, reward_key
        See :class:`LogSource` (``--meta``, ``--reward-range``, ``--reward-key``).
    policy : dict, optional
        ``StopPolicy`` fields: each forecast carries the stop policy's advice.
    alerts : bool or list of str
        Alerts (:class:`~bayesgrpo.integrations.alerts.Alerter`) through the trackers with a run active in this
        process (True), the named ones, or none (False). With a tracker active and no ``policy``, the default
        stop policy's advice is asked for (its ``stop`` is one of the alerts).
    decline_alarm : float, optional
        P(decline) at which the decline alert fires (default: the measured level).

    Returns
    -------
    list of dict
        Every forecast result received, in order. Ctrl-C (KeyboardInterrupt) ends the loop cleanly
        and returns them too.

    Raises
    ------
    ForecastError
        No horizon (neither ``horizon`` nor ``max_steps`` in the log).

    Examples
    --------
    >>> from bayesgrpo.integrations.watch import watch, format_line
    >>> watch("outputs/", every=5, target=0.8, on_update=lambda r: print(format_line(r)))  # doctest: +SKIP
    """
    status = on_status or (lambda m: log.info("bayesgrpo watch: %s", m))
    src = LogSource(path, fmt=fmt, run=run, wandb_api=wandb_api, meta=meta, reward_range=reward_range,
                    reward_key=reward_key)  # fmt: skip
    alerter = Alerter(alerts, decline=decline_alarm, run_id=str(run or Path(str(path)).stem or "run"))
    if policy is None and alerter.trackers and active_trackers(alerter.trackers):
        policy = PolicyStop().request()["policy"]  # the default stop policy: its advice is an alert
    own = worker is None
    w = worker or ForecastWorker(log_file=(Path(history).parent / "worker.log") if history else None)
    status(f"following {path} (re-forecast every {every} new steps; first forecast after {min_points})")
    loop = _Watch(src, w, path=path, horizon=horizon, status=status, history=history, on_update=on_update,
                  max_updates=max_updates, alerter=alerter, request=dict(kind=kind, sampler=dict(sampler or {"draws": 400, "tune": 400}),
                                                        target=target, utility=utility, ceiling=ceiling,
                                                        plot=str(plot) if plot else None,
                                                        report=str(report) if report else None,
                                                        policy=policy))  # fmt: skip
    try:
        w.submit({"kind": "warmup", "model_kind": kind, "sampler": loop.request["sampler"]})
        status(FIRST_FORECAST_NOTE)
        loop.run(every=every, interval=interval, min_points=min_points, idle_timeout=idle_timeout,
                 final_wait=final_wait, stop_event=stop_event)  # fmt: skip
    except KeyboardInterrupt:
        status(f"interrupted; {len(loop.results)} forecast(s) made")
    finally:
        if not alerter.flush(timeout=10.0):
            status("some alerts had not reached the trackers after 10 s")
        if own:
            w.close()
    return loop.results


class _Watch:
    """The loop of :func:`watch`: poll the log, submit a forecast every ``every`` new steps, hand results on."""

    def __init__(self, src, worker, *, path, horizon, status, history, on_update, max_updates, request: dict,
                 alerter=None):  # fmt: skip
        self.src, self.w, self.path, self.horizon, self.status = src, worker, path, horizon, status
        self.alerter = alerter
        self.history, self.on_update, self.max_updates, self.request = history, on_update, max_updates, request
        self.results: list[dict] = []

    def submit(self, n: int) -> int:
        src = self.src
        hz = self.horizon or src.meta.get("max_steps")
        if hz is None or (isinstance(hz, float) and math.isnan(hz)):
            raise _light().errors.ForecastError(
                f"{self.path}: no horizon; pass --horizon STEPS (the log has no max_steps)"
            )
        req = forecast_request(run_id=src.run_id or "run", frame=src.frame(), meta=_meta(src.meta), horizon=int(hz),
                               **self.request)  # fmt: skip
        self.status(f"forecasting from step {src.last_step} ({n} logged rewards)")
        return self.w.submit(req)

    def collect(self) -> bool:
        """Hand new results on; True when max_updates is reached."""
        for res in self.w.poll():
            if res.get("kind") == "warmup":
                if not res.get("ok"):
                    self.status(f"model warm-up failed: {res.get('error')}")
                continue
            self.results.append(res)
            if self.history:
                append_history(self.history, res, logged_at_step=self.src.last_step)
                if res.get("ok"):
                    write_latest(Path(self.history).with_name("latest.json"), res)
            if self.alerter is not None and res.get("ok"):
                self.alerter.update(res)
            if self.on_update is not None:
                self.on_update(res)
            if self.max_updates is not None and len(self.results) >= self.max_updates:
                return True
        return False

    def run(self, *, every, interval, min_points, idle_timeout, final_wait, stop_event) -> None:
        src, w = self.src, self.w
        submitted_n, changed_since, last_change = 0, 0, time.monotonic()
        waiting = False
        while not (stop_event is not None and stop_event.is_set()):
            if not waiting and not src.is_wandb and src.target() is None and not src.rows:
                self.status(f"waiting for {self.path} to appear (nothing readable there yet; Ctrl-C to stop)")
                waiting = True
            n_new = src.poll()
            if n_new:
                changed_since += n_new
                last_change = time.monotonic()
            n = src.n_reward
            if n >= min_points and (submitted_n == 0 or changed_since >= every):
                self.submit(n)
                submitted_n, changed_since = n, 0
            if self.collect():
                return
            if idle_timeout is not None and time.monotonic() - last_change > idle_timeout and not w.busy:
                if changed_since and src.n_reward >= min_points:
                    # the log went quiet with steps not yet forecast: one last forecast (bounded wait)
                    self.submit(src.n_reward)
                    changed_since = 0
                    deadline = time.monotonic() + final_wait
                    while w.busy and time.monotonic() < deadline:
                        time.sleep(0.1)
                    self.collect()
                self.status(f"no new steps for {idle_timeout:g} s; stopping")
                return
            if stop_event is not None:
                if stop_event.wait(interval):
                    return
            else:
                time.sleep(interval)


def _meta(meta: dict) -> dict:
    keep = set(_light().META_FIELDS) | {"logging_steps"}
    return {k: v for k, v in meta.items() if k in keep and k != "source_file"}
