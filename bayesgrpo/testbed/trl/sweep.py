"""Run a sweep of TRL testbed jobs, resumably: one finished run folder per run, skipped when present."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from fnmatch import fnmatch
from pathlib import Path

import pandas as pd

from bayesgrpo.testbed.trl.config import TRLSweepConfig, load_trl_sweep

__all__ = ["sweep_trl", "read_index", "SweepResult"]

log = logging.getLogger("bayesgrpo")

RUNS_DIR = "runs"


class SweepResult:
    """What a sweep did: ``ran`` / ``skipped`` run ids, ``failed`` {run_id: message}, ``seconds`` of wall time."""

    def __init__(self):
        self.ran: list[str] = []
        self.skipped: list[str] = []
        self.failed: dict[str, str] = {}
        self.seconds = 0.0


def _done(folder: Path, digest: str) -> bool:
    info = folder / "run.json"
    if not info.is_file():
        return False
    try:
        return json.loads(info.read_text()).get("digest") == digest
    except (OSError, ValueError):
        return False


def sweep_trl(
    config: TRLSweepConfig | str | Path,
    out_dir: str | Path,
    *,
    only: str | None = None,
    progress: Callable[[int, int, str, str, float], None] | None = None,
) -> SweepResult:
    """Run every run of ``config`` not already finished in ``out_dir/runs``.

    A run folder whose ``run.json`` carries the same configuration digest is kept (resume); one
    with another digest is re-run. A run that raises is reported in ``SweepResult.failed`` and the
    sweep goes on. ``only`` keeps the run ids matching a shell pattern (``"lr-*"``).
    ``progress(k, n, run_id, status, seconds)`` is called after each run.
    """
    from bayesgrpo.testbed.trl.runner import run_trl

    if not isinstance(config, TRLSweepConfig):
        config = load_trl_sweep(config)
    items = [it for it in config.expand() if only is None or fnmatch(it[0], only)]
    runs = Path(out_dir) / RUNS_DIR
    res = SweepResult()
    t0 = time.perf_counter()
    for k, (run_id, cfg, labels) in enumerate(items, start=1):
        t1 = time.perf_counter()
        if _done(runs / run_id, cfg.digest()):
            res.skipped.append(run_id)
            status = "done before"
        else:
            try:
                run_trl(run_id, cfg, runs, labels=labels)
                res.ran.append(run_id)
                status = "ran"
            except Exception as e:  # noqa: BLE001 - one failing run must not lose the sweep
                res.failed[run_id] = f"{type(e).__name__}: {e}"
                status = f"FAILED ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
                log.warning("bayesgrpo: TRL testbed run %s failed: %s", run_id, e)
        if progress:
            progress(k, len(items), run_id, status, time.perf_counter() - t1)
    res.seconds = time.perf_counter() - t0
    return res


def read_index(out_dir: str | Path, config: TRLSweepConfig | None = None) -> pd.DataFrame:
    """The metadata table of the finished runs in ``out_dir/runs`` (one row per run, sweep order when
    ``config`` is given, else by run id)."""
    runs = Path(out_dir) / RUNS_DIR
    rows = {}
    for info in sorted(runs.glob("*/run.json")):
        rows[info.parent.name] = json.loads(info.read_text())["meta"]
    order = [r for r, _, _ in config.expand() if r in rows] if config is not None else sorted(rows)
    return pd.DataFrame([rows[r] for r in order])
