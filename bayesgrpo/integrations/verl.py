"""Live forecasts and alerts inside a verl run: a tracking backend ``trainer.logger`` accepts.

verl has no callback API: its trainer hands every step's metrics to ``verl.utils.tracking.Tracking``, which
builds one backend per name of ``trainer.logger`` and calls each one's ``log(data=..., step=...)``. Its
constructor accepts only the names of ``Tracking.supported_backend``. :func:`register` adds ``"bayesgrpo"``
to that list and builds a :class:`BayesGRPOTracking` for it, placed **first** among the backends, so:

    python -m verl.trainer.main_ppo ... trainer.logger='["console","wandb","bayesgrpo"]'

does for verl what :class:`~bayesgrpo.integrations.trl.BayesGRPOCallback` does for TRL:

* every ``every`` logged steps with a reward, the rows go to ONE background forecasting process
  (:class:`~bayesgrpo.integrations._worker.ForecastWorker`); a step never waits for a fit;
* the answer (``bayesgrpo/final_q50`` ...; :data:`~bayesgrpo.integrations._live.LOGGED_KEYS`) is added to the
  next step's metrics dict before the other backends receive it (console, W&B, TensorBoard, ... log it next to
  the reward); the final forecast, which arrives after the last step, is logged through them by ``finish``;
* alerts (stop advice, failure flags, P(decline): :mod:`bayesgrpo.integrations.alerts`) go to ``wandb.alert`` /
  ``trackio.alert`` when verl's own ``wandb`` / ``trackio`` backend started a run, and TensorBoard gets the
  forecast's 80% band as a margin chart;
* the forecast history goes to ``bayesgrpo_log/<project>/<experiment>/`` (``forecasts.csv``, ``latest.json``,
  ``worker.log``).

The run's configuration gives the horizon and metadata (:func:`bayesgrpo.io.verl.verl_config_meta`); options
go in ``trainer.bayesgrpo`` (``+trainer.bayesgrpo.every=10``, ``target``, ``kind``, ``alerts``, ``history``, ...:
:class:`BayesGRPOTracking`'s keyword arguments).

:func:`register` runs by itself when verl is imported (verl >= 0.9 loads the ``verl.plugins`` entry point
``bayesgrpo``, :mod:`bayesgrpo.integrations.verl_plugin`); with an older verl, or
``VERL_USE_EXTERNAL_PLUGINS=none``, call ``bayesgrpo.integrations.verl.register()`` in the script that starts
the trainer. Light: importing this module imports neither verl nor PyMC.
"""

from __future__ import annotations

import functools
import logging
import numbers
import time
from pathlib import Path
from typing import Any

from bayesgrpo.conventions import DEFAULT_KIND
from bayesgrpo.integrations._live import answer_kind, logged_values, numeric_row
from bayesgrpo.integrations._requests import forecast_request, reward_keys
from bayesgrpo.integrations._worker import ForecastWorker
from bayesgrpo.integrations.alerts import Alerter, margin_layout
from bayesgrpo.integrations.history import HistoryWriter
from bayesgrpo.integrations.stops import PolicyStop

__all__ = ["BayesGRPOTracking", "register", "BACKEND"]

log = logging.getLogger("bayesgrpo")

#: the backend's name in ``trainer.logger``
BACKEND = "bayesgrpo"
#: default live sampler (as the TRL callback's)
LIVE_SAMPLER = {"draws": 400, "tune": 400, "chains": 2}


class BayesGRPOTracking:
    """A verl tracking backend: ``log(data, step)`` per step, ``finish()`` at the end (module docstring).

    Parameters
    ----------
    project_name, experiment_name : str
        verl's ``trainer.project_name`` / ``trainer.experiment_name`` (the run id is the experiment name).
    config : dict, optional
        The trainer configuration verl's ``Tracking`` receives: metadata and horizon
        (:func:`bayesgrpo.io.verl.verl_config_meta`), and these options under ``trainer.bayesgrpo``.
    every : int
        Forecast after every ``every`` new logged steps with a reward.
    horizon : int, optional
        Step to forecast to (default: the configuration's total training steps).
    target, ceiling, kind, sampler, min_points, diagnose
        As for :class:`~bayesgrpo.integrations.trl.BayesGRPOCallback`.
    alerts, decline_alarm
        As for the callback: alerts through the trackers with an active run (verl's own ``wandb`` / ``trackio``
        backends start them).
    history : bool or str
        Write ``forecasts.csv``, ``latest.json`` and ``worker.log`` to ``bayesgrpo_log/<project>/<experiment>``
        (True), to the given folder, or not at all.
    final_wait, max_wait : float
        What ``finish`` waits for the last forecast (seconds; ``max_wait`` when a fit is in flight).
    threads : int
        Thread cap of the worker.
    worker : ForecastWorker, optional
        Use this worker (not closed here).
    tracking : object, optional
        The verl ``Tracking`` this backend belongs to (:func:`register` passes it): ``finish`` logs the final
        forecast through its other backends.

    Attributes
    ----------
    latest : dict or None
        The latest forecast.
    log_seconds, log_calls, max_log_seconds : float, int, float
        Time spent in (and number of) ``log`` calls, and the longest one.
    """

    def __init__(self, project_name: str = "verl", experiment_name: str = "run", config: dict | None = None, *,
                 every: int = 10, horizon: int | None = None, target: float | None = None, ceiling: float | None = None,
                 kind: str = DEFAULT_KIND, sampler: dict | None = None, min_points: int = 6, diagnose: bool = True,
                 alerts=True, decline_alarm: float | None = None, history: bool | str = True,
                 final_wait: float = 10.0, max_wait: float = 120.0, threads: int = 1,
                 worker: ForecastWorker | None = None, tracking=None):  # fmt: skip
        from bayesgrpo.io.verl import verl_config_meta

        if int(every) < 1 or int(min_points) < 5:
            raise ValueError(f"every must be >= 1 and min_points >= 5; got {every}, {min_points}")
        self.run_id = str(experiment_name or "run")
        self.meta = verl_config_meta(config)
        self.horizon = int(horizon) if horizon is not None else self.meta.get("max_steps")
        self.every, self.min_points, self.final_wait, self.max_wait = int(every), int(min_points), final_wait, max_wait
        self.request_args: dict[str, Any] = dict(kind=kind, sampler=dict(sampler or LIVE_SAMPLER), target=target, ceiling=ceiling,
                                 diagnose=bool(diagnose))  # fmt: skip
        self.alerter = Alerter(alerts, decline=decline_alarm, run_id=self.run_id)
        self.tracking = tracking
        self.hist_dir = None if not history else Path(history if isinstance(history, str) else
                                                       Path("bayesgrpo_log") / str(project_name) / self.run_id)  # fmt: skip
        self._own_worker = worker is None
        self.worker = worker or ForecastWorker(threads=threads, log_file=self.hist_dir / "worker.log"
                                               if self.hist_dir else None)  # fmt: skip
        self._files = HistoryWriter() if self.hist_dir is not None else None
        self._reward_keys = reward_keys()
        self._rows: list[dict] = []
        self._n_reward = self._last_submit_n = self._n_fits = self._n_failures = 0
        self._last_rid: int | None = None
        self._unlogged: dict | None = None
        self._last_step = 0
        self._finished = False
        self.latest: dict | None = None
        self.log_seconds, self.log_calls, self.max_log_seconds = 0.0, 0, 0.0
        self.worker.submit({"kind": "warmup", "model_kind": kind, "sampler": self.request_args["sampler"]})
        log.info("bayesgrpo: verl backend forecasting %s every %d logged steps to step %s", self.run_id, self.every,
                 self.horizon)  # fmt: skip

    def add_tensorboard_layout(self, writer) -> None:
        """Draw the forecast's 80% band in TensorBoard (a margin chart) through verl's TensorBoard writer."""
        try:
            writer.add_custom_scalars(margin_layout())
        except Exception as e:  # noqa: BLE001 - a layout is a nicety
            log.debug("bayesgrpo: no TensorBoard layout (%s: %s)", type(e).__name__, e)

    # ------------------------------------------------------------------ verl's backend interface
    def log(self, data: dict, step: int, **kwargs) -> None:
        """Record one step's metrics, hand due rows to the worker, and add the latest forecast to ``data`` (the
        dict the later backends receive). Never raises, never waits for a fit."""
        t0 = time.perf_counter()
        try:
            nums = {k: float(v) for k, v in data.items() if isinstance(v, numbers.Real) and not isinstance(v, bool)}
            row = numeric_row(nums, int(step))
            if row is not None:
                self._rows.append(row)
                self._last_step = max(self._last_step, int(step))
                if not self._reward_keys.isdisjoint(row):
                    self._n_reward += 1
            self._collect(int(step))
            if self._unlogged is not None:
                data.update(logged_values(self._unlogged, n_failures=self._n_failures))
                self._unlogged = None
            if self._n_reward >= self.min_points and self._n_reward - self._last_submit_n >= self.every:
                self._submit()
        except Exception as e:  # noqa: BLE001 - never raise into the trainer
            log.warning("bayesgrpo: verl backend bookkeeping failed at step %s (%s: %s); training goes on", step,
                        type(e).__name__, e)  # fmt: skip
        dt = time.perf_counter() - t0
        self.log_seconds += dt
        self.log_calls += 1
        self.max_log_seconds = max(self.max_log_seconds, dt)

    def finish(self, *args, **kwargs) -> None:
        """The last forecast (the rows since the last fit; waits at most ``final_wait``, plus ``max_wait`` for a fit
        in flight), logged through the other backends of the ``Tracking``; alerts flushed; the worker closed."""
        if self._finished:
            return
        self._finished = True
        try:
            self._final_forecast()
        except Exception as e:  # noqa: BLE001 - never raise into the trainer
            log.warning("bayesgrpo: final forecast failed (%s: %s)", type(e).__name__, e)
        finally:
            self.alerter.flush(timeout=self.final_wait)
            if self._own_worker:
                self.worker.close()
            if self._files is not None:
                self._files.close()

    close = finish

    # ------------------------------------------------------------------ internals
    def _final_forecast(self) -> None:
        w = self.worker
        self._collect(self._last_step)
        busy = w.busy or self._n_fits == 0
        rid = self._submit() if self._n_reward >= self.min_points and self._n_reward > self._last_submit_n else (
            self._last_rid if w.busy else None)  # fmt: skip
        if rid is not None:
            for res in w.wait_for(rid, timeout=self.final_wait + (self.max_wait if busy else 0.0)):
                self._handle(res, self._last_step)
        if self._unlogged is None:
            return
        vals = logged_values(self._unlogged, n_failures=self._n_failures)
        self._unlogged = None
        others = {k: v for k, v in (getattr(self.tracking, "logger", None) or {}).items() if v is not self}
        for name, backend in others.items():
            try:
                backend.log(data=dict(vals), step=self._last_step)
            except Exception as e:  # noqa: BLE001 - one backend failing must not stop the others
                log.warning("bayesgrpo: could not log the final forecast through %s (%s: %s)", name,
                            type(e).__name__, e)  # fmt: skip
        if not others:
            log.warning("bayesgrpo: final forecast at step %d: %s", self._last_step, vals)

    def _submit(self) -> int | None:
        self._last_submit_n = self._n_reward
        req = forecast_request(run_id=self.run_id, rows=list(self._rows), meta=self.meta, horizon=self.horizon,
                               **self.request_args, **PolicyStop().request())  # fmt: skip
        try:
            self._last_rid = self.worker.submit(req)
        except Exception as e:  # noqa: BLE001 - e.g. the interpreter cannot start a process
            self._n_failures += 1
            log.warning("bayesgrpo: could not hand a forecast to the worker (%s: %s)", type(e).__name__, e)
            self._last_rid = None
        return self._last_rid

    def _collect(self, step: int) -> None:
        for res in self.worker.poll():
            self._handle(res, step)

    def _handle(self, res: dict, step: int) -> None:
        kind = answer_kind(res, step)
        if kind == "warmup":
            return
        if kind == "forecast":
            self._n_fits += 1
            self.latest = self._unlogged = res
            self.alerter.update(res)
        else:
            self._n_failures += 1
        if self._files is not None and self.hist_dir is not None:
            self._files.put((self.hist_dir, res, step))


def _options(config) -> dict:
    """``trainer.bayesgrpo`` of the configuration (the backend's keyword arguments)."""
    opts = (config or {}).get("trainer", {}).get(BACKEND) if isinstance(config, dict) else None
    return dict(opts) if isinstance(opts, dict) else {}


def register(tracking_cls=None):
    """Make verl's ``Tracking`` accept ``"bayesgrpo"`` in ``trainer.logger`` (idempotent); returns the class.

    Adds the name to ``Tracking.supported_backend``; wraps the constructor so that a ``Tracking`` asked for
    ``"bayesgrpo"`` gets a :class:`BayesGRPOTracking` first among its backends (and verl's TensorBoard writer
    the forecast's margin chart), and ``finish`` (``__del__`` in verl < 0.9) so that the final forecast reaches
    the other backends before they close. ``tracking_cls``: default ``verl.utils.tracking.Tracking``.
    """
    if tracking_cls is None:
        from verl.utils.tracking import Tracking

        tracking_cls = Tracking
    if getattr(tracking_cls, "_bayesgrpo_registered", False):
        return tracking_cls
    if BACKEND not in tracking_cls.supported_backend:
        tracking_cls.supported_backend = [*tracking_cls.supported_backend, BACKEND]
    init = tracking_cls.__init__

    @functools.wraps(init)
    def __init__(self, project_name, experiment_name, default_backend="console", config=None, *args, **kwargs):
        init(self, project_name, experiment_name, default_backend, config, *args, **kwargs)
        names = [default_backend] if isinstance(default_backend, str) else list(default_backend)
        if BACKEND in names:
            ours = BayesGRPOTracking(project_name, experiment_name, config, tracking=self, **_options(config))
            tb = self.logger.get("tensorboard")
            if getattr(tb, "writer", None) is not None:
                ours.add_tensorboard_layout(tb.writer)
            self.logger = {BACKEND: ours, **{k: v for k, v in self.logger.items() if k != BACKEND}}

    tracking_cls.__init__ = __init__
    for name in ("finish", "__del__"):
        end = tracking_cls.__dict__.get(name)
        if end is None:
            continue

        def wrapped(self, *args, _end=end, **kwargs):
            ours = (getattr(self, "logger", None) or {}).get(BACKEND)
            if ours is not None:
                ours.finish()
            return _end(self, *args, **kwargs)

        setattr(tracking_cls, name, functools.wraps(end)(wrapped))
    tracking_cls._bayesgrpo_registered = True
    return tracking_cls
