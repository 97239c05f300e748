"""The record of live forecasts: the forecast-history CSV (:data:`HISTORY_COLUMNS`, one row per result)
and the latest result as JSON, written by the callback and ``watch --history`` (atomically)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

__all__ = ["HISTORY_COLUMNS", "history_row", "append_history", "write_latest", "HistoryWriter"]

log = logging.getLogger("bayesgrpo")


#: columns of the forecast history CSV written by the callback and ``watch --history``
HISTORY_COLUMNS = (
    "time", "logged_at_step", "ok", "status", "status_reason", "observed_until", "n_obs", "horizon", "final_mean",
    "final_q10", "final_q50", "final_q90", "p_target", "stop_step_q50", "p_stop_before_horizon", "p_plateaued",
    "plateau_q50", "best", "p_improve", "p_gain", "advice",
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

    from bayesgrpo.io.output import write_text

    keep = {k: v for k, v in result.items() if k not in ("traceback",)}
    write_text(path, json.dumps(keep, indent=2, default=str))


class HistoryWriter:
    """Writes the forecast history files from a daemon thread (file I/O stays out of training steps)."""

    def __init__(self):
        import queue
        import threading

        self.q: queue.Queue = queue.Queue()
        self.t = threading.Thread(target=self._run, name="bayesgrpo-history", daemon=True)
        self.t.start()

    def put(self, item) -> None:
        self.q.put(item)

    def _run(self) -> None:
        while True:
            item = self.q.get()
            try:
                if item is None:
                    return
                folder, res, step = item
                append_history(folder / "forecasts.csv", res, logged_at_step=step)
                if res.get("ok"):
                    write_latest(folder / "latest.json", res)
            except OSError as e:
                log.warning("bayesgrpo: could not write the forecast history in %s (%s)", item[0], e)
            finally:
                self.q.task_done()

    def close(self, timeout: float = 5.0) -> None:
        self.q.put(None)
        self.t.join(timeout)
