"""Live forecasts inside a ``transformers.Trainer`` / TRL ``GRPOTrainer`` run.

>>> from bayesgrpo.integrations.trl import BayesGRPOCallback          # doctest: +SKIP
>>> trainer = GRPOTrainer(..., callbacks=[BayesGRPOCallback(target=0.8)])  # doctest: +SKIP

What the callback does (details in :class:`BayesGRPOCallback`):

* collects what the trainer already logs (``on_log``) and the run's configuration
  (``on_train_begin``: ``max_steps``, ``learning_rate``, ``adam_beta1``, ``num_generations``, batch
  sizes, refresh interval);
* every N logged reward rows, hands the rows to ONE persistent background forecasting process
  (:class:`~bayesgrpo.integrations._worker.ForecastWorker`) on rank 0; a step never waits for a fit;
* logs the answer (``bayesgrpo/final_q10`` ... ) **through the trainer's own logging path**: at
  ``on_train_begin`` it moves itself to the front of the trainer's callback list, so at the next
  ``on_log`` it adds its numbers to the very ``logs`` dict the reporting callbacks
  (TensorBoard, W&B, MLflow, ..., the console printer) then receive, and to the ``state.log_history``
  entry of that step. The final forecast, which arrives after the last log, is sent through the
  callback handler's ``on_log`` before the reporting callbacks close (``on_train_end``);
* sends an alert through the trackers' own channels (``trackio.alert``, ``wandb.alert``) when the stop
  advice, a failure flag or P(decline) changes (:mod:`bayesgrpo.integrations.alerts`), and draws the 80%
  band in TensorBoard as a band (a custom-scalars margin chart);
* optionally stops training (the same decision on every rank, broadcast from rank 0).
"""

from __future__ import annotations

import logging
import math
import sys
import time
import warnings
from pathlib import Path

from transformers.trainer_callback import ExportableState, TrainerCallback

from bayesgrpo.conventions import DEFAULT_KIND
from bayesgrpo.integrations._live import LOGGED_KEYS, PREFIX, answer_kind, logged_values, numeric_row
from bayesgrpo.integrations._requests import forecast_request, request_runs, reward_keys
from bayesgrpo.integrations._trainer import _broadcast, _find_handler, _model_meta
from bayesgrpo.integrations._worker import ForecastWorker
from bayesgrpo.integrations.alerts import Alerter, margin_layout
from bayesgrpo.integrations.history import HistoryWriter
from bayesgrpo.integrations.stops import ImprovementStop, PolicyStop, UtilityStop, _stop_rule
from bayesgrpo.io.trl import run_config_meta
from bayesgrpo.plan import MIN_POINTS

__all__ = ["BayesGRPOCallback", "ImprovementStop", "UtilityStop", "PolicyStop", "LOGGED_KEYS"]

log = logging.getLogger("bayesgrpo")

#: default sampler of live fits (small: a live forecast is refreshed every few dozen steps)
LIVE_SAMPLER = {"draws": 400, "tune": 400, "chains": 2}


def _visible_warnings() -> None:
    """Make the package's warnings (a stop and its reason, failed fits, a final forecast that did not
    arrive, poor sampler health) reach the user of a training script by default: the library's logger
    has only a NullHandler (quiet as a library should be), and a training script rarely configures
    logging. When no handler other than a NullHandler is found between the ``bayesgrpo`` logger and the
    root, one stderr handler for WARNING and above is added (once); configured logging is left alone."""
    lg: logging.Logger | None = log
    while lg is not None:
        if any(not isinstance(h, logging.NullHandler) for h in lg.handlers):
            return
        if not lg.propagate:
            break
        lg = lg.parent
    h = logging.StreamHandler(sys.stderr)
    h.setLevel(logging.WARNING)
    h.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(h)


# ----------------------------------------------------------------------------- the callback
class BayesGRPOCallback(TrainerCallback, ExportableState):
    """Forecast the run while it trains and log ``bayesgrpo/*`` next to the reward.

    ``BayesGRPOCallback()`` with no arguments forecasts to ``max_steps`` every ~50 optimizer steps
    (every 5 logs with ``logging_steps=10``) once 6 rewards are logged, logs the forecast to every
    reporting integration the trainer has, writes ``<output_dir>/bayesgrpo/forecasts.csv`` and
    ``latest.json``, and never stops training.

    Parameters
    ----------
    every : int, optional
        Fit after every ``every`` new logged reward rows. Default: ``ceil(50 / logging_steps)``.
    target : float, optional
        Reward target: adds ``bayesgrpo/p_target`` = P(final reward >= target).
    horizon : int, optional
        Step to forecast to (default: the trainer's ``max_steps``).
    stop : StopPolicy, PolicyStop, ImprovementStop, UtilityStop or dict, optional
        Stopping rule (off by default). ``bayesgrpo.decisions.stop.StopPolicy(risk=0.15)`` (or
        ``PolicyStop(risk=0.15)``) is the stop policy of the forecast table's ``advice``, with its
        measured error rate (docs/guide.md, "Should this run stop?"). When it fires, ``control.should_training_stop`` is set on
        every rank at the same step, ``bayesgrpo/stop = 1`` is logged and the reason is logged as a
        warning.
    kind : str
        ``Forecaster`` model kind (default: the default forecast, ``auto``).
    sampler : dict, optional
        ``SamplerConfig`` fields (default :data:`LIVE_SAMPLER`: 2 chains of 400 + 400).
    min_points : int
        Logged reward rows needed before the first fit.
    ceiling : float, optional
        Verifiable reward ceiling (e.g. 1.0 for 0/1 rewards) for the failure diagnostics.
    diagnose : bool
        Log failure-mode flags ``bayesgrpo/flag/<mode>`` (0 none, 1 watch, 2 warning, 3 critical).
    history : bool or str
        Write the forecast history (CSV, JSON, worker log) to ``<output_dir>/bayesgrpo`` (True), to
        the given folder, or not at all (False).
    plot : bool
        Also keep an updated fan chart ``fan_chart.png`` in the history folder (costs the worker ~0.5 s).
    report : bool or str
        Also keep an updated HTML report (``bayesgrpo.write_report``) of the run: ``report.html`` in the
        history folder (True), at the given path, or none (False, default). Rewritten atomically by the
        worker after each forecast; the page reloads itself.
    warmup : bool
        Compile the model in the worker as soon as training starts.
    final_wait : float
        Seconds ``on_train_end`` waits for the last forecast, on top of the fit in flight.
    max_wait : float
        Upper bound on the wait for the fit in flight at the end (covers the first compile).
    threads : int
        BLAS/OpenMP/numba thread cap of the worker.
    worker : ForecastWorker, optional
        Use this worker (not closed by the callback) instead of starting one.
    alerts : bool or list of str
        Send an alert when the stop advice turns to ``stop``, a failure flag reaches ``warning`` /
        ``critical`` or P(decline) crosses ``decline_alarm`` (once per change; level INFO / WARN / ERROR;
        the text says what to do and the signal's measured error rate) through ``trackio.alert`` and
        ``wandb.alert`` when a run of them is active (True), only through the named ones, or not at all
        (False). The stop policy's advice is asked for even without a ``stop`` rule.
    decline_alarm : float, optional
        P(decline) = P(final reward < current level - 0.1 x scale) at which the decline alert fires (default:
        the level measured with the shipped error rates, ``bench/results/monitors.md``).

    Attributes
    ----------
    latest : dict or None
        The latest forecast (worker result).
    overhead_seconds : float
        Time spent inside ``on_train_begin`` and ``on_log`` in the training process (the cost per step).
    log_seconds, log_calls : float, int
        Time spent in, and number of, ``on_log`` calls.
    max_log_seconds : float
        The longest single ``on_log`` call (a fit never runs inside it).
    end_seconds : float
        Time ``on_train_end`` spent (mostly waiting for the last forecast; bounded by
        ``final_wait`` + ``max_wait``).

    Examples
    --------
    >>> from trl import GRPOConfig, GRPOTrainer                                    # doctest: +SKIP
    >>> from bayesgrpo.integrations.trl import BayesGRPOCallback, ImprovementStop  # doctest: +SKIP
    >>> cb = BayesGRPOCallback(target=0.8, stop=ImprovementStop())                  # doctest: +SKIP
    >>> trainer = GRPOTrainer(model=..., reward_funcs=..., args=GRPOConfig(...),
    ...                       train_dataset=..., callbacks=[cb])                    # doctest: +SKIP
    >>> trainer.train()                                                            # doctest: +SKIP
    >>> cb.latest["final_q50"]                                                     # doctest: +SKIP
    """

    def __init__(
        self,
        every: int | None = None,
        *,
        target: float | None = None,
        horizon: int | None = None,
        stop=None,
        kind: str = DEFAULT_KIND,
        sampler: dict | None = None,
        min_points: int = 6,
        ceiling: float | None = None,
        diagnose: bool = True,
        history: bool | str = True,
        plot: bool = False,
        report: bool | str = False,
        warmup: bool = True,
        final_wait: float = 10.0,
        max_wait: float = 120.0,
        threads: int = 1,
        worker: ForecastWorker | None = None,
        alerts: bool | str | list[str] = True,
        decline_alarm: float | None = None,
        model: str | None = None,
    ):
        if model is not None:  # the statistical kind was once called "model" (still in old checkpoints' state)
            warnings.warn("BayesGRPOCallback(model=...) is deprecated: the model kind is kind=...; 'model' is the "
                          "LLM being trained", DeprecationWarning, stacklevel=2)  # fmt: skip
            kind = model
        if every is not None and int(every) < 1:
            raise ValueError(f"every must be >= 1; got {every}")
        if min_points < MIN_POINTS:
            raise ValueError(f"min_points must be >= {MIN_POINTS} (a forecast needs {MIN_POINTS} logged points); "
                             f"got {min_points}")  # fmt: skip
        self.every = None if every is None else int(every)
        self.target = None if target is None else float(target)
        self.horizon = None if horizon is None else int(horizon)
        self.stop = _stop_rule(stop)
        self.kind = kind
        self.sampler = dict(
            LIVE_SAMPLER if sampler is None else (sampler.model_dump() if hasattr(sampler, "model_dump") else sampler)
        )
        self.min_points = int(min_points)
        self.ceiling = ceiling
        self.diagnose = bool(diagnose)
        self.history = history
        self.plot = bool(plot)
        self.report = report if isinstance(report, str) else bool(report)
        self.warmup = bool(warmup)
        self.final_wait = float(final_wait)
        self.max_wait = float(max_wait)
        self.threads = int(threads)
        self._worker = worker
        self._own_worker = worker is None
        self.alerts = alerts if isinstance(alerts, (bool, str)) else list(alerts)
        self.decline_alarm = None if decline_alarm is None else float(decline_alarm)
        Alerter(self.alerts, decline=self.decline_alarm)  # checks the arguments now, not at the first forecast
        self._alert_state: dict = {}
        # run state (restored from a checkpoint when restore_callback_states_from_checkpoint=True)
        self._stop_count = 0
        self._stop_reason: str | None = None
        self._n_fits = 0
        self._n_failures = 0
        self.latest: dict | None = None
        self._reset_run()

    def _reset_run(self) -> None:
        self._rows: list[dict] = []
        self._n_reward = 0
        self._last_submit_n = 0
        self._last_rid: int | None = None
        self._unlogged: dict | None = None
        self._handler = None
        self._is_main = True
        self._dispatching = False
        self._stopped = False
        self._meta: dict = {}
        self._hz: int | None = None
        self._run_id = "run"
        self._hist_dir: Path | None = None
        self._files: HistoryWriter | None = None
        self._every = self.every or 5
        self._reward_keys: frozenset[str] = frozenset()
        self._alerter: Alerter | None = None
        self._tb_layout = False
        self.overhead_seconds = 0.0
        self.max_log_seconds = 0.0
        self.log_seconds = 0.0
        self.log_calls = 0
        self.hook_calls = 0
        self.end_seconds = 0.0

    @property
    def runs(self):
        """The live :class:`~bayesgrpo.schema.RunSet`: the rows logged so far, mapped onto the schema's
        channels as the worker maps them (``runs.channels(run_id)``; raises ``ForecastError`` before
        the first reward is logged)."""
        return request_runs(self._request())

    # ------------------------------------------------------------------ ExportableState
    def state(self) -> dict:
        stop = self.stop.to_dict() if hasattr(self.stop, "to_dict") else None
        latest = None
        if self.latest is not None:
            latest = {k: v for k, v in self.latest.items() if k not in ("table", "traceback", "warnings")}
        return {
            "args": {
                "every": self.every, "target": self.target, "horizon": self.horizon, "stop": stop, "kind": self.kind,
                "sampler": self.sampler, "min_points": self.min_points, "ceiling": self.ceiling,
                "diagnose": self.diagnose, "history": self.history, "plot": self.plot, "report": self.report,
                "warmup": self.warmup,
                "final_wait": self.final_wait, "max_wait": self.max_wait, "threads": self.threads,
                "alerts": self.alerts, "decline_alarm": self.decline_alarm,
            },
            "attributes": {
                "_stop_count": self._stop_count, "_stop_reason": self._stop_reason, "_n_fits": self._n_fits,
                "_n_failures": self._n_failures, "latest": latest,
                "_alert_state": self._alerter.rules.state() if self._alerter is not None else self._alert_state,
            },
        }  # fmt: skip

    # ------------------------------------------------------------------ events
    def on_train_begin(self, args, state, control, **kwargs):
        t0 = time.perf_counter()
        _visible_warnings()
        self._reset_run()
        self._is_main = bool(state.is_world_process_zero)
        self._reward_keys = reward_keys()
        handler = _find_handler()
        if handler is not None:
            # run first: our numbers are then in the logs dict every reporting callback receives
            handler.callbacks = [self] + [c for c in handler.callbacks if c is not self]
            self._handler = handler
        else:
            log.warning(
                "bayesgrpo: could not find the trainer's callback handler; forecasts go to the console "
                "and state.log_history only (not to TensorBoard/W&B)"
            )
        ls = float(getattr(args, "logging_steps", 10) or 10)
        if ls < 1:  # a fraction of the run
            ls = max(1.0, ls * float(state.max_steps or 0))
        self._every = self.every or max(1, math.ceil(50 / ls))
        self._meta = run_config_meta(
            args, world_size=int(getattr(args, "world_size", 1) or 1), max_steps=state.max_steps
        )
        if kwargs.get("model") is not None:
            self._meta.update(_model_meta(kwargs["model"]))
        self._hz = self.horizon or self._meta.get("max_steps")
        out = Path(getattr(args, "output_dir", None) or ".")
        self._run_id = out.name or "run"
        self._alerter = Alerter(self.alerts, decline=self.decline_alarm, run_id=self._run_id)
        self._alerter.rules.restore(self._alert_state)
        # a resumed run: the trainer restored its log history from the checkpoint
        for entry in state.log_history:
            self._record(entry, int(entry.get("step", 0) or 0))
        self._last_submit_n = 0 if self._n_reward < self.min_points else self._n_reward - self._every
        if self._is_main:
            if self.history:
                self._hist_dir = Path(self.history) if isinstance(self.history, str) else out / "bayesgrpo"
            if self._hist_dir is not None:
                self._files = HistoryWriter()
            if self._worker is None:
                self._worker = ForecastWorker(
                    threads=self.threads, log_file=(self._hist_dir / "worker.log") if self._hist_dir else None
                )
                self._own_worker = True
            if self.warmup:
                self._safe_submit({"kind": "warmup", "model_kind": self.kind, "sampler": self.sampler,
                                   "meta": {k: v for k, v in self._meta.items() if k in ("beta1", "refresh_interval")}})  # fmt: skip
            log.info(
                "bayesgrpo: live forecasts every %d logged rewards to step %s (%s)", self._every, self._hz, self._run_id
            )
        self._tick(t0, on_log=False)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self._dispatching:
            return
        t0 = time.perf_counter()
        logs = logs if logs is not None else {}
        if self._is_main:
            try:
                self._record(logs, state.global_step)
                self._collect(state.global_step)
                if self._unlogged is not None:
                    vals = self._values(self._unlogged)
                    logs.update(vals)
                    if state.log_history and state.log_history[-1].get("step") == state.global_step:
                        state.log_history[-1].update(vals)
                    self._unlogged = None
                    if not self._tb_layout:
                        self._tb_layout = _tensorboard_layout(self._handler)
                if self._n_reward >= self.min_points and self._n_reward - self._last_submit_n >= self._every:
                    self._submit(state.global_step)
            except Exception as e:
                log.warning("bayesgrpo: live forecast bookkeeping failed at step %d (%s: %s); training goes on",
                            state.global_step, type(e).__name__, e, exc_info=log.isEnabledFor(logging.DEBUG))  # fmt: skip
        if self.stop is not None and not self._stopped:
            reason = _broadcast(self._stop_reason if self._is_main else None)
            if reason:
                self._stopped = True
                control.should_training_stop = True
                logs[PREFIX + "stop"] = 1.0
                if self._is_main and state.log_history and state.log_history[-1].get("step") == state.global_step:
                    state.log_history[-1][PREFIX + "stop"] = 1.0
                log.warning("bayesgrpo: stopping training at step %d: %s", state.global_step, reason)
        self._tick(t0)
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if not self._is_main or self._worker is None:
            return
        t0 = time.perf_counter()
        w = self._worker
        try:
            self._collect(state.global_step)
            was_busy = w.busy or self._n_fits == 0
            rid = None
            if self._n_reward >= self.min_points and self._n_reward > self._last_submit_n:
                rid = self._submit(state.global_step)  # the rows logged since the last fit
            elif w.busy:
                rid = self._last_rid  # the fit in flight already has every row
            if rid is not None:
                timeout = self.final_wait + (self.max_wait if was_busy else 0.0)
                got = w.wait_for(rid, timeout=timeout)
                for res in got:
                    self._handle_result(res, state.global_step)
                if not any(r.get("id") == rid for r in got):
                    log.warning("bayesgrpo: the final forecast did not arrive within %.0f s; the last one logged is %s",
                                timeout, "none" if self.latest is None else f"from step {self.latest.get('observed_until')}")  # fmt: skip
            if self._unlogged is not None:
                self._dispatch(args, state, control, self._values(self._unlogged))
                self._unlogged = None
        except Exception as e:  # noqa: BLE001 - never raise into the trainer
            log.warning("bayesgrpo: final forecast failed (%s: %s)", type(e).__name__, e)
        finally:
            if self._alerter is not None and not self._alerter.flush(timeout=self.final_wait):
                log.warning("bayesgrpo: some alerts had not reached the trackers after %.0f s", self.final_wait)
            if self._own_worker:
                w.close()
                self._worker = None
            if self._files is not None:
                self._files.close()
                self._files = None
            self.end_seconds = time.perf_counter() - t0

    # ------------------------------------------------------------------ internals
    def _tick(self, t0: float, *, on_log: bool = True) -> None:
        dt = time.perf_counter() - t0
        self.overhead_seconds += dt
        self.hook_calls += 1
        if on_log:
            self.log_seconds += dt
            self.log_calls += 1
            self.max_log_seconds = max(self.max_log_seconds, dt)

    def _record(self, logs: dict, step: int) -> None:
        row = numeric_row(logs, step)
        if row is None:
            return
        self._rows.append(row)
        if not self._reward_keys.isdisjoint(row):
            self._n_reward += 1

    def _request(self) -> dict:
        extra = PolicyStop().request() if self.alerts else {}  # the stop advice the alerts read
        extra.update(self.stop.request() if self.stop is not None else {})
        return forecast_request(
            run_id=self._run_id, rows=list(self._rows), meta=self._meta, horizon=self._hz, kind=self.kind,
            sampler=self.sampler, target=self.target, ceiling=self.ceiling, diagnose=self.diagnose,
            plot=str(self._hist_dir / "fan_chart.png") if (self.plot and self._hist_dir) else None,
            report=self._report_path(), **extra,
        )  # fmt: skip

    def _report_path(self) -> str | None:
        if isinstance(self.report, str):
            return self.report
        return str(self._hist_dir / "report.html") if (self.report and self._hist_dir) else None

    def _submit(self, step: int) -> int | None:
        self._last_submit_n = self._n_reward
        self._last_rid = self._safe_submit(self._request())
        return self._last_rid

    def _safe_submit(self, req: dict) -> int | None:
        if self._worker is None:  # closed (training ended)
            return None
        try:
            return self._worker.submit(req)
        except Exception as e:  # noqa: BLE001 - e.g. the interpreter cannot start a process
            self._n_failures += 1
            log.warning("bayesgrpo: could not hand a forecast to the worker (%s: %s)", type(e).__name__, e)
            return None

    def _collect(self, step: int) -> None:
        if self._worker is None:
            return
        for res in self._worker.poll():
            self._handle_result(res, step)

    def _handle_result(self, res: dict, step: int) -> None:
        kind = answer_kind(res, step)
        if kind == "warmup":
            return
        if kind == "forecast":
            self._n_fits += 1
            self.latest = res
            self._unlogged = res
            if self.stop is not None:
                why = self.stop.check(res)
                self._stop_count = self._stop_count + 1 if why else 0
                if why and self._stop_count >= self.stop.patience:
                    self._stop_reason = f"{why} for {self._stop_count} consecutive forecast(s)"
            if self._alerter is not None:
                self._alerter.update(res)
        else:
            self._n_failures += 1
        if self._hist_dir is not None and self._files is not None:
            self._files.put((self._hist_dir, res, step))  # written by a thread: no file I/O in a step

    def _values(self, res: dict) -> dict:
        return logged_values(res, n_failures=self._n_failures)

    def _dispatch(self, args, state, control, vals: dict) -> None:
        """Send ``vals`` through the trainer's logging path after its last log (on_train_end)."""
        last = state.log_history[-1] if state.log_history else None
        if last is not None and last.get("step") == state.global_step and "train_runtime" not in last:
            last.update(vals)
        else:
            state.log_history.append({**vals, "step": state.global_step})
        if self._handler is None:
            log.warning("bayesgrpo: final forecast at step %d: %s", state.global_step, vals)
            return
        self._dispatching = True
        try:
            self._handler.on_log(args, state, control, dict(vals))
        finally:
            self._dispatching = False


def _tensorboard_layout(handler) -> bool:
    """Add the margin chart of the forecast (:func:`~bayesgrpo.integrations.alerts.margin_layout`) to the
    event files of the trainer's TensorBoard callback, once its writer exists. True when done (or when there is
    no TensorBoard callback: nothing to do)."""
    tb = [c for c in (handler.callbacks if handler is not None else []) if type(c).__name__ == "TensorBoardCallback"]
    if not tb:
        return True
    writer = getattr(tb[0], "tb_writer", None)
    if writer is None:
        return False
    try:
        from transformers.integrations.integration_utils import rewrite_logs

        prefix = next(iter(rewrite_logs({PREFIX + "x": 0.0})))[:-1]  # how the callback names our tags
        writer.add_custom_scalars(margin_layout(prefix))
    except Exception as e:  # noqa: BLE001 - a layout is a nicety, never a reason to fail a step
        log.debug("bayesgrpo: no TensorBoard layout (%s: %s)", type(e).__name__, e)
    return True
