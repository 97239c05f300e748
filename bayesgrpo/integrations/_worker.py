"""The background forecasting process shared by :class:`~bayesgrpo.integrations.trl.BayesGRPOCallback`
and ``bayesgrpo watch``.

One persistent worker process per training run (or per ``watch``), so the model is compiled once (a new
process's first forecast, compile included, and the later fits are timed in ``bench/results/speed.md``):

* started as a fresh interpreter (``python -m bayesgrpo.integrations._serve``: a *spawn*, never a
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

This module is the parent side (:class:`ForecastWorker`); the worker process is
:mod:`bayesgrpo.integrations._serve`, the requests and protocol :mod:`bayesgrpo.integrations._requests`
(the one adapter to the modules below), the record of results :mod:`bayesgrpo.integrations.history`.
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

from bayesgrpo.integrations._requests import _recv, _send

__all__ = ["ForecastWorker"]

log = logging.getLogger("bayesgrpo")


_THREAD_VARS = (
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS", "NUMBA_NUM_THREADS", "RAYON_NUM_THREADS",
)  # fmt: skip


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
        self._log_fh: IO[bytes] | None = None
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
            self._log_fh = open(self.log_file, "ab")  # noqa: SIM115 - the worker's stderr for its lifetime (close())
        self._proc = subprocess.Popen(
            [self.python, "-m", "bayesgrpo.integrations._serve"],
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
        out: list[dict] = []
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
                if proc.stdin is not None:
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
    def _send_loop(self, proc: subprocess.Popen) -> None:
        while True:
            with self._cv:
                while not self._closed and (self._pending is None or self._inflight is not None) and self._proc is proc:
                    self._cv.wait()
                if self._closed or self._proc is not proc:
                    return
                req, self._pending = self._pending, None
                if req is None:  # pragma: no cover - the wait above ends only with a request or a return
                    continue
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
