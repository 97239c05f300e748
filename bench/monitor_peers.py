"""The run monitors people install, fed what they read (``bench/monitors.py``, issue 32).

Each monitor is driven through its own TRL adapter -- the callback a TRL user adds to ``GRPOTrainer`` --
at its defaults, on the rows a run logged, in TRL's key names (``reward``, ``reward_std``, ``kl``,
``completion_length``, ``entropy``, ``frac_reward_zero_std``: the names the development logs were mapped
from), one ``on_log`` per logged row with ``state.global_step`` = the row's step:

* ``rlwatch`` 0.5.1: ``RLWatch(load_config(...))`` (defaults; the metric store in a temporary folder, no
  Slack/e-mail/webhook channel), its TRL callback from ``monitor.attach_to_trainer``; every alert that passes
  its own cooldown is recorded (detector, severity, step);
* ``rldoctor`` 0.2.0: ``RLDoctorCallback()`` (defaults: a diagnosis every 25 logged rows after 60,
  announcements at ``WARNING`` and above when a finding is new or worse), configured by ``on_train_begin``
  from the run's ``num_generations`` / ``learning_rate`` as it reads them from a ``GRPOConfig``; every
  announcement is recorded, and every check's findings at ``INFO`` and above (the score it would show).

Returns one row per recorded signal: ``monitor, run_id, step, detector, severity`` (1 info, 2 warning,
3 critical) and ``announced`` (an alert the user receives).
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import tempfile
from types import SimpleNamespace

import pandas as pd

#: bayesgrpo channel -> the TRL key it was mapped from (what a TRL callback receives in ``logs``)
TRL_KEYS = {
    "reward": "reward", "reward_std": "reward_std", "kl": "kl", "completion_length": "completion_length",
    "entropy": "entropy", "frac_reward_zero_std": "frac_reward_zero_std",
}  # fmt: skip
COLUMNS = ["monitor", "run_id", "step", "detector", "severity", "announced"]


def trl_rows(df: pd.DataFrame) -> list[tuple[int, dict]]:
    """A run's logged rows as TRL ``logs`` dicts (finite values only), with their steps."""
    out = []
    for rec in df.to_dict("records"):
        logs = {}
        for ch, key in TRL_KEYS.items():
            v = rec.get(ch)
            if isinstance(v, (int, float)) and math.isfinite(v):
                logs[key] = float(v)
        if logs:
            out.append((int(rec["step"]), logs))
    return out


def _trainer_args(meta: dict) -> SimpleNamespace:
    g = meta.get("group_size")
    lr = meta.get("learning_rate")
    args = SimpleNamespace(world_size=1)
    if isinstance(g, (int, float)) and math.isfinite(g) and g > 0:
        args.num_generations = int(g)
    if isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0:
        args.learning_rate = float(lr)
    return args


def run_rlwatch(run_id: str, rows: list[tuple[int, dict]]) -> list[dict]:
    """rlwatch's TRL callback over the rows; the alerts it sends."""
    from rlwatch.config import load_config
    from rlwatch.core import RLWatch

    out: list[dict] = []
    # its console panels (rich, on stderr) are muted
    with tempfile.TemporaryDirectory() as d, contextlib.redirect_stderr(io.StringIO()):
        mon = RLWatch(load_config(None, storage={"log_dir": d}, run_id=run_id, framework="manual"))
        mon.start()
        got: list = []
        mon.attach_to_trainer(SimpleNamespace(add_callback=got.append))
        cb = got[0]
        control = SimpleNamespace(should_training_stop=False)
        for step, logs in rows:
            cb.on_log(None, SimpleNamespace(global_step=step), control, logs=dict(logs))
        for a in mon.store.get_alerts(run_id):
            det = a["detector"]
            if det == "reward_mean_drift":
                direction = "down" if "downward" in str(a.get("message", "")) else "up"
                det = f"{det}:{direction}"
            out.append(dict(monitor="rlwatch", run_id=run_id, step=int(a["step"]), detector=det,
                            severity=3 if a["severity"] == "critical" else 2, announced=True))  # fmt: skip
        mon.stop()
    return out


def run_rldoctor(run_id: str, rows: list[tuple[int, dict]], meta: dict) -> list[dict]:
    """rldoctor's TRL callback over the rows; its announcements and every check's findings."""
    from rl_doctor.detectors.base import Severity
    from rl_doctor.integrations.trl import RLDoctorCallback

    out: list[dict] = []
    cb = RLDoctorCallback()
    step_now = [0]

    def record(f) -> None:
        out.append(dict(monitor="rldoctor", run_id=run_id, step=step_now[0], detector=f.detector,
                        severity=_rank(f.severity), announced=True))  # fmt: skip

    cb.monitor.on_finding = record
    control = SimpleNamespace(should_training_stop=False)
    cb.on_train_begin(_trainer_args(meta), SimpleNamespace(global_step=0), control)
    last = None
    for step, logs in rows:
        step_now[0] = step
        cb.on_log(None, SimpleNamespace(global_step=step), control, logs=dict(logs))
        if cb.monitor.latest is not None and cb.monitor.latest is not last:
            last = cb.monitor.latest
            for f in last.findings:
                if f.severity >= Severity.INFO:
                    out.append(dict(monitor="rldoctor", run_id=run_id, step=step, detector=f.detector,
                                    severity=_rank(f.severity), announced=False))  # fmt: skip
    return out


def _rank(sev) -> int:
    from rl_doctor.detectors.base import Severity

    return {Severity.INFO: 1, Severity.WARNING: 2, Severity.CRITICAL: 3}.get(sev, 0)


def monitor_signals(runs, run_ids) -> pd.DataFrame:
    """Both monitors over every run of ``run_ids`` (quiet: their console alerts are muted)."""
    for name in ("rlwatch", "rl-doctor", "rl_doctor"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    rows: list[dict] = []
    for rid in run_ids:
        tr = trl_rows(runs.run(rid))
        meta = runs.meta.loc[rid].to_dict()
        rows += run_rlwatch(rid, tr)
        rows += run_rldoctor(rid, tr, meta)
    return pd.DataFrame(rows, columns=COLUMNS)


def versions() -> dict:
    from importlib.metadata import version

    return {p: version(p) for p in ("rlwatch", "rldoctor")}
