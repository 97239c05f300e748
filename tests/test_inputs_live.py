"""Issue 19 (round 2), the live outputs: ``bayesgrpo watch`` driven through the CLI and
BayesGRPOCallback inside real TRL GRPOTrainer runs on CPU. The worker's own request handler runs in
this process (sampling mocked, tests/conftest.py) so each test takes seconds; the process boundary
is exercised by tests/test_watch.py, tests/test_integration_trl.py and tests/test_inputs_slow.py."""

from __future__ import annotations

import csv
import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from bayesgrpo.cli import app

sys.path.insert(0, str(Path(__file__).resolve().parent))
from inprocess_worker import InProcessWorker

runner = CliRunner()
TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SMALL = {"draws": 20, "tune": 10, "chains": 2}


@pytest.fixture
def inproc(monkeypatch, mock_sampler):
    import bayesgrpo.integrations.watch as W

    InProcessWorker.instances = []
    monkeypatch.setattr(W, "ForecastWorker", InProcessWorker)
    return mock_sampler


def _log(path: Path, steps, *, lo=0.2, gain=0.5, tau=30.0):
    s = np.asarray(steps)
    pd.DataFrame({"step": s, "reward": lo + gain * (1 - np.exp(-(s - s[0]) / tau))}).to_csv(path, index=False)
    return path


def watch_lines(*args):
    res = runner.invoke(app, ["watch", *[str(a) for a in args], "--interval", "0.05", "--idle-timeout", "0.4"])
    assert "Traceback" not in res.output, res.output
    return res, [ln for ln in res.stdout.splitlines() if ln.startswith(("step ", "forecast failed"))]


# ============================================================================ 6. finished runs, the set horizon
def test_watch_never_moves_the_horizon_of_a_finished_run(tmp_path, inproc):
    p = _log(tmp_path / "metrics.csv", np.arange(1, 161))
    res, lines = watch_lines(p, "--horizon", 150, "--every", 1000)
    assert res.exit_code == 0, res.output
    assert lines and "150" in lines[-1] and "complete" in lines[-1], lines
    reqs = [r for r in InProcessWorker.instances[-1].requests if r.get("kind") == "forecast"]
    assert reqs and all(r["horizon"] == 150 for r in reqs)
    df = pd.read_csv(p)
    want = df.loc[(df.step > 1 + 0.9 * 149) & (df.step <= 150), "reward"].mean()
    assert f"final {want:.3g}" in lines[-1], (want, lines[-1])


def test_watch_of_a_run_at_its_max_steps_is_complete(tmp_path, inproc):
    p = _log(tmp_path / "metrics.csv", np.arange(1, 101))
    m = tmp_path / "m.csv"
    pd.DataFrame([{"run_id": "metrics", "max_steps": 100}]).to_csv(m, index=False)
    res, lines = watch_lines(p, "--meta", m)
    assert res.exit_code == 0, res.output
    assert lines and "step 100/100" in lines[-1] and "complete" in lines[-1], lines


# ============================================================================ 10. censoring in live outputs
def test_watch_and_history_show_a_censored_stop_step_as_censored(tmp_path, inproc):
    inproc["params"]["tau"] = 5000.0  # never settles by the horizon
    p = _log(tmp_path / "metrics.csv", np.arange(1, 41))
    hist = tmp_path / "live" / "forecasts.csv"
    res, lines = watch_lines(p, "--horizon", 300, "--history", hist)
    assert res.exit_code == 0, res.output
    assert lines and "stop >300" in lines[-1] and "stop ~" not in lines[-1], lines
    rows = list(csv.DictReader(hist.read_text().splitlines()))
    assert "p_stop_before_horizon" in rows[-1] and float(rows[-1]["p_stop_before_horizon"]) < 0.5
    latest = json.loads((hist.parent / "latest.json").read_text())
    assert latest["p_stop_before_horizon"] < 0.5


def test_watch_shows_a_settled_stop_step_as_a_number(tmp_path, inproc):
    inproc["params"]["tau"] = 10.0
    p = _log(tmp_path / "metrics.csv", np.arange(1, 41))
    _res, lines = watch_lines(p, "--horizon", 300)
    assert lines and "stop ~" in lines[-1] and ">300" not in lines[-1], lines


# ============================================================================ 13. watch outputs checked first
@pytest.mark.parametrize("opt", ["--history", "--plot"])
def test_watch_output_that_is_a_folder_is_refused_before_watching(tmp_path, inproc, opt):
    p = _log(tmp_path / "metrics.csv", np.arange(1, 41))
    folder = tmp_path / ("h.csv" if opt == "--history" else "fan.png")
    folder.mkdir()
    res = runner.invoke(app, ["watch", str(p), "--horizon", "300", opt, str(folder)])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and opt in lines[0] and "folder" in lines[0], res.output
    assert not InProcessWorker.instances or not InProcessWorker.instances[-1].requests


# ============================================================================ the callback in a real TRL run
trl = pytest.importorskip("trl")
pytest.importorskip("torch")
sys.path.insert(0, str(TESTS))
import tiny_grpo  # noqa: E402


def _run(tmp_path, cb, **kw):
    trainer = tiny_grpo.make_trainer(tmp_path / "grpo-out", callbacks=[cb], **kw)
    trainer.train()
    return trainer


def test_callback_never_moves_the_trainers_horizon_and_reports_a_finished_run(tmp_path, mock_sampler):
    from bayesgrpo.integrations.trl import BayesGRPOCallback

    w = InProcessWorker()
    cb = BayesGRPOCallback(every=4, worker=w, sampler=SMALL, warmup=False)
    trainer = _run(tmp_path, cb, max_steps=12)
    fc = [r for r in w.requests if r.get("kind") == "forecast"]
    assert fc and all(r["horizon"] == 12 for r in fc)
    last = cb.latest
    assert last["horizon"] == 12 and last["status"] == "complete"
    rewards = [e["reward"] for e in trainer.state.log_history if "reward" in e]
    assert last["final_q50"] == pytest.approx(
        np.mean(rewards[-2:]), rel=1e-9
    )  # window (1 + 0.9 * 11, 12]: steps 11, 12
    assert last["final_q10"] == last["final_q90"] == last["final_q50"]


def test_callback_logs_censoring_and_writes_it_to_the_history(tmp_path, mock_sampler):
    from bayesgrpo.integrations.trl import BayesGRPOCallback

    mock_sampler["params"]["tau"] = 5000.0
    w = InProcessWorker()
    cb = BayesGRPOCallback(every=4, worker=w, sampler=SMALL, warmup=False, horizon=300)
    trainer = _run(tmp_path, cb, max_steps=14)
    logged = [e for e in trainer.state.log_history if "bayesgrpo/final_q50" in e]
    assert logged
    assert all("bayesgrpo/p_stop_before_horizon" in e for e in logged)
    assert all(e["bayesgrpo/p_stop_before_horizon"] < 0.5 for e in logged)
    assert not any("bayesgrpo/stop_step_q50" in e for e in logged)  # a censored median is not logged as a step
    rows = list(csv.DictReader((tmp_path / "grpo-out" / "bayesgrpo" / "forecasts.csv").read_text().splitlines()))
    assert rows and all(float(r["p_stop_before_horizon"]) < 0.5 for r in rows if r["ok"] == "True")


def test_callback_shows_poor_sampler_health_as_a_warning(tmp_path, mock_sampler, caplog):
    import logging

    from bayesgrpo.integrations.trl import BayesGRPOCallback

    mock_sampler["chain_shift"] = 0.5
    w = InProcessWorker()
    cb = BayesGRPOCallback(every=4, worker=w, sampler=SMALL, warmup=False, horizon=300)
    with caplog.at_level(logging.WARNING, logger="bayesgrpo"):
        trainer = _run(tmp_path, cb, max_steps=10)
    assert cb.latest["status"] == "warning" and "r_hat" in cb.latest["status_reason"]
    assert any("sampler health" in r.getMessage() for r in caplog.records)
    logged = [e for e in trainer.state.log_history if "bayesgrpo/final_q50" in e]
    assert logged and logged[-1]["bayesgrpo/sampler_warning"] == 1.0
    rows = list(csv.DictReader((tmp_path / "grpo-out" / "bayesgrpo" / "forecasts.csv").read_text().splitlines()))
    assert rows[-1]["status"] == "warning"


def test_callback_files_follow_the_umask(tmp_path, mock_sampler):
    from bayesgrpo.integrations.trl import BayesGRPOCallback

    old = os.umask(0o027)
    try:
        cb = BayesGRPOCallback(every=4, worker=InProcessWorker(), sampler=SMALL, warmup=False, plot=True)
        _run(tmp_path, cb, max_steps=10)
    finally:
        os.umask(old)
    files = [f for f in (tmp_path / "grpo-out" / "bayesgrpo").iterdir() if f.is_file()]
    assert {f.name for f in files} >= {"forecasts.csv", "latest.json", "fan_chart.png"}
    assert {f.name: oct(stat.S_IMODE(f.stat().st_mode)) for f in files} == {f.name: oct(0o640) for f in files}


# ============================================================================ 9. visible stop reasons
_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
import tiny_grpo
from bayesgrpo.integrations.trl import BayesGRPOCallback, ImprovementStop

class Worker:
    def __init__(self, mode):
        self.mode, self.busy, self.out, self.n = mode, False, [], 0
    def submit(self, req):
        self.n += 1
        if req.get("kind") == "forecast" and self.mode == "silent":
            self.busy = True  # a fit that never comes back (a worker stuck on it)
        if req.get("kind") == "forecast" and self.mode != "silent":
            last = max(r["step"] for r in req["rows"])
            if self.mode == "fail":
                self.out.append({{"id": self.n, "kind": "forecast", "ok": False, "error": "ValueError: boom"}})
            else:
                self.out.append({{"id": self.n, "kind": "forecast", "ok": True, "observed_until": last,
                                 "horizon": 40, "final_q10": 0.1, "final_q50": 0.2, "final_q90": 0.3,
                                 "p_improve": 0.0, "best": 0.5, "p_stop_before_horizon": 1.0, "stop_step_q50": 5.0,
                                 "status": "ok"}})
        return self.n
    def poll(self):
        out, self.out = self.out, []
        return out
    def wait_for(self, rid, *, timeout):
        return self.poll()
    def close(self):
        pass

mode = sys.argv[1]
stop = ImprovementStop(delta=0.01, epsilon=0.05, patience=2) if mode == "stop" else None
cb = BayesGRPOCallback(every=2, worker=Worker(mode), stop=stop, warmup=False, final_wait=0.1, max_wait=0.1)
t = tiny_grpo.make_trainer(sys.argv[2], max_steps=40, callbacks=[cb])
t.train()
print("GLOBAL_STEP", t.state.global_step)
"""


def _script_run(tmp_path, mode):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(_SCRIPT.format(tests=str(TESTS))))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(script), mode, str(tmp_path / "out")], capture_output=True, text=True,
                          env=env, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_stop_reason_reaches_the_user_without_any_logging_setup(tmp_path):
    proc = _script_run(tmp_path, "stop")
    step = int(proc.stdout.split("GLOBAL_STEP")[1].split()[0])
    assert step < 40
    lines = [ln for ln in proc.stderr.splitlines() if "bayesgrpo" in ln and "stopping training" in ln]
    assert len(lines) == 1, proc.stderr[-3000:]
    assert f"step {step}" in lines[0] and "P(final reward >= best so far" in lines[0]


def test_failed_fits_and_a_missing_final_forecast_reach_the_user(tmp_path):
    proc = _script_run(tmp_path, "fail")
    assert "bayesgrpo" in proc.stderr and "forecast failed" in proc.stderr and "boom" in proc.stderr
    proc = _script_run(tmp_path, "silent")
    assert "final forecast did not arrive" in proc.stderr, proc.stderr[-3000:]


# ============================================================================ issue 18: the stop policy, live
def test_callback_with_the_stop_policy_stops_a_flat_run_and_says_why(tmp_path, mock_sampler, caplog):
    """BayesGRPOCallback(stop=StopPolicy()) inside a real GRPOTrainer: the worker answers with the policy's
    advice; a run the forecast says has nothing left to gain (a flat plateau, draws tight around it) is
    stopped after the policy's patience, the reason (with its measured error rate) reaches the log."""
    import logging

    from bayesgrpo.decisions.stop import StopPolicy
    from bayesgrpo.integrations.trl import BayesGRPOCallback

    mock_sampler["params"].update(r_star=0.0, tau=2.0)  # the plateau is the start level: no gain ahead
    w = InProcessWorker()
    cb = BayesGRPOCallback(every=4, worker=w, sampler=SMALL, warmup=False, horizon=400, stop=StopPolicy(risk=0.15))
    with caplog.at_level(logging.WARNING, logger="bayesgrpo"):
        trainer = _run(tmp_path, cb, max_steps=40)
    fc = [r for r in w.requests if r.get("kind") == "forecast"]
    assert fc and all(r["policy"]["risk"] == 0.15 and r["policy"]["delta"] == 0.05 for r in fc)
    answered = [e for e in trainer.state.log_history if "bayesgrpo/p_gain" in e]
    assert answered, "no forecast carried the policy's p_gain"
    assert trainer.state.global_step < 40
    msgs = [r.getMessage() for r in caplog.records if "stopping training" in r.getMessage()]
    assert len(msgs) == 1 and "stop policy (risk 0.15)" in msgs[0] and "of its stops were bad" in msgs[0], msgs
