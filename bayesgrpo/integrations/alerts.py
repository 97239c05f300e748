"""Alerts where people already look: the trackers' own alert channels (issue 32).

The live integrations (:class:`~bayesgrpo.integrations.trl.BayesGRPOCallback`, ``watch``, the verl backend)
hand every forecast result to an :class:`Alerter`. It fires an :class:`Alert` **once per change** of a signal:

* the stop advice turns to ``stop`` (``WARN``);
* a failure flag reaches ``warning`` (``WARN``) or ``critical`` (``ERROR``);
* P(decline) -- P(final reward < current level - 0.1 x scale) -- crosses the alarm level upward (``WARN``)
  or falls back below it (``INFO``). The level is the one measured with the shipped error rates (the worker's
  ``decline_alarm``, chosen leave-one-source-out by ``bench/monitors.py``) unless the user sets one;
  :data:`DECLINE_ALARM` only when none ships.

The text says what happened with its numbers, what to do, and the signal's measured error rate: the stop
policy's share of bad stops (leave-one-source-out, the worker's ``advice_error_rate``) and, for P(decline)
and the flags, the share of false alarms measured beside ``rlwatch`` and ``rldoctor`` on the development runs
(:mod:`bayesgrpo.decisions.alerts`; the worker's ``alert_rates``); a signal never measured says so.

Each alert goes to the trackers active in this process -- ``trackio.alert`` (a ``trackio.init`` run) and
``wandb.alert`` (``wandb.run``) -- and to the ``bayesgrpo`` logger. Light: nothing here imports a tracker;
a tracker is used only when the user's script already imported and started it. A failing tracker call is
logged, never raised into training.

:func:`margin_layout` is TensorBoard's custom-scalars layout that draws the forecast's 80% band as a band
(a ``Margin`` chart of ``final_q50`` between ``final_q10`` and ``final_q90``).
"""

from __future__ import annotations

import logging
import math
import queue
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from bayesgrpo.integrations._requests import SEVERITY_RANK

__all__ = ["Alert", "Alerter", "AlertRules", "active_trackers", "margin_layout", "open_tracker_runs", "TRACKERS",
           "DECLINE_ALARM"]  # fmt: skip

log = logging.getLogger("bayesgrpo")

#: the trackers whose alert channel is used when active
TRACKERS = ("trackio", "wandb")
#: P(decline) alarm level when none was measured for the model kind ("more likely than not")
DECLINE_ALARM = 0.5
#: what to do, per failure mode (diagnose's four modes)
ACTIONS = {
    "reward_hacking": "compare completions with the verifier or a held-out eval before trusting the training reward; "
    "cap or fix the reward function if completions game it",
    "advantage_degeneracy": "most groups carry no gradient: raise the group size, drop prompts the policy always or "
    "never solves, or resample such groups (DAPO dynamic sampling)",
    "policy_concentration": "the policy narrows without gain: raise the temperature or an entropy bonus, raise the KL "
    "coefficient or lower the learning rate",
    "dynamical_instability": "lower the learning rate (or raise the KL coefficient) and resume from a checkpoint "
    "before the onset",
}  # fmt: skip
_TITLE_MAX = 63  # wandb: a title must be shorter than 64 characters


@dataclass(frozen=True)
class Alert:
    """One alert: ``signal`` (``advice``, ``decline``, ``flag/<mode>``), ``level`` (``INFO``, ``WARN``,
    ``ERROR``), a short ``title``, the ``text`` and the training ``step`` it refers to."""

    signal: str
    level: str
    title: str
    text: str
    step: int | None = None


def _num(v) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def _rate_text(res: dict, signal: str) -> str:
    r = (res.get("alert_rates") or {}).get(signal) or {}
    fs = _num(r.get("false_share"))
    if not math.isfinite(fs):
        return "Its error rate was not measured on logged runs."
    return (f"{fs:.0%} of such alarms were not followed by the event on {r.get('cases')} development cases of "
            f"{r.get('sources')} sources (bench/results/monitors.md).")  # fmt: skip


class AlertRules:
    """The signals' previous states and the alerts their changes fire (module docstring).

    Parameters
    ----------
    decline : float, optional
        The P(decline) alarm level (default: the measured one each result carries, else :data:`DECLINE_ALARM`).
    run_id : str
        Named in the titles.
    """

    def __init__(self, *, decline: float | None = None, run_id: str = "run"):
        if decline is not None and not 0.0 < decline < 1.0:
            raise ValueError(f"the decline alarm level must lie in (0, 1); got {decline}")
        self.decline = None if decline is None else float(decline)
        self.run_id = str(run_id)
        self._advice: str | None = None
        self._flags: dict[str, float] = {}
        self._decline_on = False

    def state(self) -> dict:
        return {"advice": self._advice, "flags": dict(self._flags), "decline_on": self._decline_on}

    def restore(self, state: dict) -> None:
        self._advice = state.get("advice")
        self._flags = {str(k): float(v) for k, v in (state.get("flags") or {}).items()}
        self._decline_on = bool(state.get("decline_on", False))

    def update(self, res: dict) -> list[Alert]:
        """The alerts one forecast result fires (none for a failed fit or a run logged up to its horizon)."""
        if not res.get("ok", True) or res.get("status") not in ("ok", "warning"):
            return []
        out: list[Alert] = []
        adv = res.get("advice")
        if adv == "stop" and self._advice != "stop":
            out.append(self._stop(res))
        if adv:
            self._advice = adv
        for mode, sev in (res.get("flags") or {}).items():
            rank = SEVERITY_RANK.get(sev, 0.0)
            if rank >= SEVERITY_RANK["warning"] and rank > self._flags.get(mode, 0.0):
                out.append(self._flag(res, mode, sev))
            self._flags[mode] = rank
        p, level = _num(res.get("p_decline")), self.level(res)
        if math.isfinite(p) and (p >= level) != self._decline_on:
            self._decline_on = p >= level
            out.append(self._decline(res, p, level))
        return out

    def level(self, res: dict) -> float:
        """The P(decline) alarm level for a result: the user's, else the measured one it carries, else the default."""
        if self.decline is not None:
            return self.decline
        lv = _num(res.get("decline_alarm"))
        return lv if 0.0 < lv < 1.0 else DECLINE_ALARM

    # -- texts
    def _title(self, what: str) -> str:
        t = f"bayesgrpo: {what} ({self.run_id})"
        return t if len(t) <= _TITLE_MAX else t[: _TITLE_MAX - 1] + "…"

    def _stop(self, res: dict) -> Alert:
        err = _num(res.get("advice_error_rate"))
        measured = (f"{err:.0%} of such stops lost more than 0.1 of the run's reward range on held-out sources"
                    if math.isfinite(err) else "its error rate is unmeasured (an explicit threshold)")  # fmt: skip
        text = (f"Step {res.get('observed_until')}: stop advised: P(gain) = {_num(res.get('p_gain')):.2f} "
                f"({res.get('policy', 'stop policy')}); {measured}. Forecast final reward "
                f"{_num(res.get('final_q50')):.4g} [80%: {_num(res.get('final_q10')):.4g}, "
                f"{_num(res.get('final_q90')):.4g}]. What to do: keep this checkpoint and stop the run "
                "(BayesGRPOCallback(stop=StopPolicy()) stops it for you).")  # fmt: skip
        return Alert("advice", "WARN", self._title("stop advised"), text, res.get("observed_until"))

    def _flag(self, res: dict, mode: str, sev: str) -> Alert:
        ev = (res.get("flag_evidence") or {}).get(mode, "")
        text = (f"Step {res.get('observed_until')}: {mode.replace('_', ' ')} is {sev}"
                f"{': ' + ev if ev else ''}. What to do: {ACTIONS.get(mode, 'inspect the run')}. "
                f"{_rate_text(res, f'flag/{mode}')}")  # fmt: skip
        level = "ERROR" if sev == "critical" else "WARN"
        return Alert(f"flag/{mode}", level, self._title(f"{mode} {sev}"), text, res.get("observed_until"))

    def _decline(self, res: dict, p: float, level: float) -> Alert:
        lev = _num(res.get("level"))
        fc = (f"forecast final reward {_num(res.get('final_q50')):.4g} [80%: {_num(res.get('final_q10')):.4g}, "
              f"{_num(res.get('final_q90')):.4g}] against the current level {lev:.4g}")  # fmt: skip
        if p >= level:
            text = (f"Step {res.get('observed_until')}: P(decline) = {p:.2f} >= {level:g}: the run is "
                    f"forecast to end more than 0.1 of its scale below where it is now ({fc}). What to do: keep the "
                    "best checkpoint so far; lower the learning rate or raise the KL coefficient before going on, "
                    f"or stop. {_rate_text(res, 'decline')}")  # fmt: skip
            return Alert("decline", "WARN", self._title("decline likely"), text, res.get("observed_until"))
        text = (f"Step {res.get('observed_until')}: P(decline) = {p:.2f} fell back below {level:g} ({fc}). "
                "Nothing to do.")  # fmt: skip
        return Alert("decline", "INFO", self._title("decline no longer likely"), text, res.get("observed_until"))


# ----------------------------------------------------------------------------- the trackers
def _trackio_sink():
    m = sys.modules.get("trackio")
    if m is None:
        return None
    cv = getattr(getattr(m, "context_vars", None), "current_run", None)
    run = cv.get() if cv is not None else None
    if run is None:
        return None
    level_type = getattr(m, "AlertLevel", None)

    def send(a: Alert) -> None:
        # what trackio.alert does once it has found the run in its context variable, bound here so the
        # sender thread (whose context has no run) reaches the same run
        lvl = level_type(a.level.lower()) if level_type is not None else a.level.lower()
        run.alert(title=a.title, text=a.text, level=lvl)

    return send


def _wandb_sink():
    m = sys.modules.get("wandb")
    if m is None or getattr(m, "run", None) is None:
        return None
    level_type = getattr(m, "AlertLevel", None)

    def send(a: Alert) -> None:
        lvl = level_type[a.level] if level_type is not None else a.level
        # alerts already fire once per change: W&B's own throttle of a title (default 1 min) is not needed
        m.alert(title=a.title, text=a.text, level=lvl, wait_duration=1)

    return send


_SINKS: dict[str, Callable] = {"trackio": _trackio_sink, "wandb": _wandb_sink}


def active_trackers(names: Iterable[str] = TRACKERS) -> dict[str, Callable[[Alert], None]]:
    """Tracker name -> a function sending an :class:`Alert` through its alert channel, for the trackers of
    ``names`` with a run active in this process (a tracker the script never imported is never imported)."""
    out = {}
    for n in names:
        try:
            s = _SINKS[n]()
        except Exception as e:  # noqa: BLE001 - a tracker's own state must never break training
            log.debug("bayesgrpo: could not look up %s (%s)", n, e)
            s = None
        if s is not None:
            out[n] = s
    return out


class Alerter:
    """Alert rules plus where their alerts go: the active trackers of ``trackers`` (looked up when an alert
    fires, in the caller's thread) and the ``bayesgrpo`` logger. The trackers' calls run in one sender thread,
    so a training step never waits for a tracker; :meth:`flush` waits for them (at the end of training).

    Parameters
    ----------
    trackers : bool, str or iterable of str
        ``True`` (``"auto"``): every tracker of :data:`TRACKERS` with an active run; ``False``: the logger
        only; names: those trackers only.
    decline : float, optional
        P(decline) alarm level (default: the measured one, :class:`AlertRules`).
    run_id : str
    """

    def __init__(self, trackers=True, *, decline: float | None = None, run_id: str = "run"):
        if trackers is True or trackers == "auto":
            self.trackers: tuple[str, ...] = TRACKERS
        elif trackers is False or trackers is None:
            self.trackers = ()
        else:
            names = (trackers,) if isinstance(trackers, str) else tuple(trackers)
            bad = [n for n in names if n not in _SINKS]
            if bad:
                raise ValueError(f"unknown tracker(s) {bad}; alerts go to {', '.join(TRACKERS)}")
            self.trackers = names
        self.rules = AlertRules(decline=decline, run_id=run_id)
        self.sent: list[tuple[str, Alert]] = []
        self._queue: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None

    def update(self, res: dict) -> list[Alert]:
        """Fire the alerts of one forecast result (logged now, sent to the trackers by the sender thread);
        returns them."""
        alerts = self.rules.update(res)
        if not alerts:
            return alerts
        sinks = active_trackers(self.trackers)
        for a in alerts:
            log.log(logging.INFO if a.level == "INFO" else logging.WARNING, "bayesgrpo alert [%s] %s: %s",
                    a.level, a.title, a.text)  # fmt: skip
            for name, send in sinks.items():
                self._queue.put((name, send, a))
        if sinks and self._thread is None:
            self._thread = threading.Thread(target=self._send_loop, name="bayesgrpo-alerts", daemon=True)
            self._thread.start()
        return alerts

    def _send_loop(self) -> None:
        while True:
            name, send, a = self._queue.get()
            try:
                send(a)
                self.sent.append((name, a))
            except Exception as e:  # noqa: BLE001 - never raise into training
                log.warning("bayesgrpo: %s alert failed (%s: %s)", name, type(e).__name__, e)
            finally:
                self._queue.task_done()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait (at most ``timeout`` s) until every alert fired so far has reached its trackers; True if so."""
        t = threading.Thread(target=self._queue.join, daemon=True)
        t.start()
        t.join(timeout)
        return not t.is_alive()


def margin_layout(prefix: str = "bayesgrpo/") -> dict:
    """TensorBoard custom-scalars layout: the final-reward forecast as a ``Margin`` chart (median between the
    10% and 90% quantiles: the 80% band drawn as a band). ``prefix``: the tag prefix of the logged
    ``bayesgrpo/*`` scalars as the writer names them (transformers' TensorBoard callback: ``train/bayesgrpo/``)."""
    q = [f"{prefix}final_q50", f"{prefix}final_q10", f"{prefix}final_q90"]
    return {"bayesgrpo": {"final reward forecast (median, 80% band)": ["Margin", q]}}


def open_tracker_runs(names: Iterable[str], *, project: str, name: str) -> list[Callable[[], None]]:
    """Start a run of each tracker of ``names`` for a process that has none (``watch --alert-to``): trackio
    in its local store (``TRACKIO_DIR``), W&B as ``WANDB_MODE`` says (``offline`` writes the run to ``./wandb``).
    Returns the functions that finish them.

    Raises
    ------
    ImportError
        A tracker is not installed (the message says which package to install).
    """
    fins: list[Callable[[], None]] = []
    for n in names:
        if n not in _SINKS:
            raise ValueError(f"unknown tracker {n!r}; alerts go to {', '.join(TRACKERS)}")
        try:
            mod = __import__(n)
        except ImportError as e:
            raise ImportError(f"alerts to {n} need the package {n!r} (pip install {n})") from e
        if n == "trackio":
            mod.init(project=project, name=name)
            fins.append(mod.finish)
        else:
            fins.append(mod.init(project=project, name=name).finish)
    return fins
