"""Issue 19 (round 2) with real sampling: Ctrl-C sent to real batches, a constant curve and 0/1
bounds fitted by NUTS. Each test starts the CLI as a user would (a fresh process, the disk cache of
compiled models) and takes tens of seconds: all are marked slow."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def cli(*args):
    return [sys.executable, "-c", "from bayesgrpo.cli import app; app()", *[str(a) for a in args]]


def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}


def _runs(path: Path, n: int, steps: int = 120) -> Path:
    rng = np.random.default_rng(3)
    rows = []
    for k in range(n):
        s = np.arange(1, steps + 1)
        r = 0.2 + (0.3 + 0.05 * k) * (1 - np.exp(-s / (20 + 5 * k))) + 0.03 * rng.standard_normal(s.size)
        rows.append(pd.DataFrame({"run_id": f"run{k}", "step": s, "reward": r}))
    pd.concat(rows).to_csv(path, index=False)
    return path


class Proc:
    """A CLI process whose stderr is read line by line while it runs."""

    def __init__(self, args, cwd):
        self.p = subprocess.Popen(cli(*args), cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)  # fmt: skip
        self.err: list[str] = []
        self.t = threading.Thread(target=lambda: self.err.extend(self.p.stderr), daemon=True)
        self.t.start()

    def wait_for(self, pattern: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(re.search(pattern, ln) for ln in list(self.err)):
                return True
            if self.p.poll() is not None:
                return False
            time.sleep(0.05)
        return False

    def interrupt_twice(self) -> float:
        t0 = time.monotonic()
        self.p.send_signal(signal.SIGINT)
        time.sleep(0.3)
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
        out = self.p.stdout.read()
        self.p.wait(timeout=60)
        self.t.join(5)
        self.out = out
        return time.monotonic() - t0


# ============================================================================ 1. Ctrl-C
def test_ctrl_c_stops_a_real_forecast_batch_and_keeps_the_finished_rows(tmp_path):
    runs = _runs(tmp_path / "runs.csv", 8)
    out = tmp_path / "t.csv"
    pr = Proc(["-v", "forecast", runs, "--horizon", 400, "--out", out, "--draws", 1000, "--tune", 800], tmp_path)
    assert pr.wait_for(r"sampling.* [12]/8 run", timeout=240), "".join(pr.err)[-3000:]
    took = pr.interrupt_twice()
    err = "".join(pr.err)
    assert pr.p.returncode == 130, err[-3000:]
    assert took < 15, took
    assert "Traceback" not in err
    assert len([ln for ln in err.splitlines() if ln.startswith("interrupted")]) == 1, err[-2000:]
    t = pd.read_csv(out)
    assert not list(tmp_path.glob(".t.csv*"))  # no temporary file left
    assert set(t["status"]) <= {"ok", "warning", "interrupted"}
    done = t[t["status"].isin(["ok", "warning"])]
    cut = t[t["status"] == "interrupted"]
    assert len(done) >= 1 and len(cut) >= 1 and len(done) + len(cut) == 8
    assert done[["final_q10", "final_q50", "final_q90"]].notna().all().all()
    assert cut[["final_q10", "final_q50", "final_q90"]].isna().all().all()
    assert list(t["run_id"]) == [f"run{k}" for k in range(8)]


def test_ctrl_c_in_a_backtest_never_enters_the_ledger_and_a_rerun_resumes(tmp_path):
    runs = _runs(tmp_path / "runs.csv", 4, steps=100)
    bt = tmp_path / "bt"
    args = ["backtest", runs, "--cutoffs", "0.3,0.5", "--peers", "none", "--out-dir", bt, "--draws", 1000,
            "--tune", 800]  # fmt: skip
    pr = Proc(args, tmp_path)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and pr.p.poll() is None:
        if (bt / "cases.csv").exists() and len(pd.read_csv(bt / "cases.csv")) >= 1:
            break
        time.sleep(0.05)
    took = pr.interrupt_twice()
    err = "".join(pr.err)
    assert pr.p.returncode == 130, err[-3000:]
    assert took < 15, took
    assert "Traceback" not in err and "rerun" in err
    ledger = pd.read_csv(bt / "cases.csv")
    assert 1 <= len(ledger) < 8
    assert ledger["ok"].astype(bool).all() and ledger["crps"].notna().all()
    assert not ledger.duplicated(["run_id", "cutoff", "method"]).any()
    proc = subprocess.run(cli(*args), cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    full = pd.read_csv(bt / "cases.csv")
    assert len(full) == 8 and full["ok"].astype(bool).all()
    assert not full.duplicated(["run_id", "cutoff", "method"]).any()
    kept = full.set_index(["run_id", "cutoff"]).loc[list(zip(ledger["run_id"], ledger["cutoff"], strict=True))]
    assert np.allclose(kept["crps"].to_numpy(), ledger["crps"].to_numpy())  # finished cases were not redone


# ============================================================================ 8. a constant curve, really fitted
def test_a_constant_reward_has_settled(tmp_path):
    p = tmp_path / "flat.csv"
    pd.DataFrame({"run_id": "flat", "step": np.arange(1, 201), "reward": 0.5}).to_csv(p, index=False)
    out, bud = tmp_path / "t.csv", tmp_path / "b.csv"
    proc = subprocess.run(cli("forecast", p, "--horizon", 400, "--out", out), cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    t = pd.read_csv(out).iloc[0]
    assert t["p_stop_before_horizon"] >= 0.5 and t["stop_q50"] <= 200, t.to_dict()
    assert ">400" not in proc.stdout
    proc = subprocess.run(cli("budget", p, "--horizon", 400, "--out", bud), cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert pd.read_csv(bud).iloc[0]["step"] <= 200


# ============================================================================ 4. bounds, really fitted
def test_a_pass_rate_rising_towards_one_is_forecast_below_one(tmp_path):
    rng = np.random.default_rng(5)
    s = np.arange(1, 61)
    r = np.clip(0.35 + 0.6 * (1 - np.exp(-s / 15)) + 0.04 * rng.standard_normal(s.size), 0, 1)  # steep, near 1
    p = tmp_path / "rate.csv"
    pd.DataFrame({"run_id": "rate", "step": s, "reward": r}).to_csv(p, index=False)
    out, figs = tmp_path / "t.csv", tmp_path / "figs"
    proc = subprocess.run(cli("forecast", p, "--horizon", 600, "--out", out, "--out-dir", figs), cwd=tmp_path,
                          env=_env(), capture_output=True, text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    t = pd.read_csv(out).iloc[0]
    assert t["plateau_q95"] <= 1.0 and t["final_q95"] <= 1.0, t.to_dict()
    assert t["final_q50"] < 1.0  # the median does not stick at the bound
    paths = pd.read_csv(figs / "paths.csv")
    assert paths["latent_mean"].max() <= 1.0 and paths["yhat"].max() < 1.0
