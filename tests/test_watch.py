"""``bayesgrpo watch``: following growing logs (a writer thread appends), the CLI output when piped,
the OpenRLHF console reader and the W&B API reader (mocked API object)."""

from __future__ import annotations

import csv
import itertools
import json
import threading
import time
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bayesgrpo.errors import DataWarning, LogFormatError
from bayesgrpo.integrations.watch import LogSource, format_line, watch
from bayesgrpo.io import detect_format, read_runs
from bayesgrpo.io.wandb_api import read_wandb_run, wandb_rows


def _reward(s: int) -> float:
    import math

    return 0.7 - 0.5 * math.exp(-s / 30.0) + 0.02 * math.sin(1.7 * s)


def _verl_line(s: int) -> str:
    return json.dumps({"step": s, "data": {"critic/score/mean": _reward(s), "actor/entropy": 1.0 - s / 500}}) + "\n"


class Writer(threading.Thread):
    """Appends verl file-logger lines; optionally restarts (truncates and rewrites from an earlier step)."""

    def __init__(self, path, steps, *, delay=0.02, restart_at=None, resume_from=None):
        super().__init__(daemon=True)
        self.path, self.steps, self.delay = path, steps, delay
        self.restart_at, self.resume_from = restart_at, resume_from

    def run(self):
        for s in self.steps:
            if self.restart_at is not None and s == self.restart_at:
                self.path.write_text("")  # verl's file logger opens with "w" on restart
                for r in range(self.resume_from, s):
                    with open(self.path, "a") as fh:
                        fh.write(_verl_line(r))
            with open(self.path, "a") as fh:
                fh.write(_verl_line(s))
            time.sleep(self.delay)


class InstantWorker:
    """A worker answering at once (tests the follower's bookkeeping without sampling)."""

    def __init__(self):
        self.requests, self._out, self.busy = [], [], False

    def submit(self, req):
        self.requests.append(req)
        if req.get("kind") != "warmup":
            f = req["frame"]
            self._out.append({"id": len(self.requests), "ok": True, "kind": "forecast", "observed_until": int(f["step"].max()),
                              "n_obs": len(f), "horizon": req["horizon"], "final_q10": 0.6, "final_q50": 0.65,
                              "final_q90": 0.7, "stop_step_q50": 90.0, "p_plateaued": 0.3, "seconds": 0.0})  # fmt: skip
        return len(self.requests)

    def poll(self):
        out, self._out = self._out, []
        return out

    def close(self):
        pass


# ------------------------------------------------------------------------------------ follower
def test_watch_reforecasts_every_n_new_steps_of_a_growing_file(tmp_path):
    p = tmp_path / "exp.jsonl"
    p.write_text("")
    w = Writer(p, range(1, 61), delay=0.01)
    w.start()
    seen = []
    worker = InstantWorker()
    res = watch(
        p,
        every=10,
        interval=0.05,
        horizon=200,
        min_points=6,
        worker=worker,
        on_update=seen.append,
        idle_timeout=0.6,
        report=tmp_path / "live.html",
    )
    w.join()
    assert res == seen and len(res) >= 3
    fc = [r for r in worker.requests if r.get("kind") == "forecast"]
    sizes = [len(r["frame"]) for r in fc]
    assert sizes == sorted(sizes) and sizes[0] >= 6 and sizes[-1] == 60  # the last one saw everything
    assert all(b - a >= 10 for a, b in itertools.pairwise(sizes[:-1]))  # every 10 new steps ...
    assert sizes[-1] > sizes[-2]  # ... and one more when the log went quiet with steps not yet forecast
    assert fc[-1]["horizon"] == 200 and "reward" in fc[-1]["frame"].columns
    assert {r["report"] for r in fc} == {str(tmp_path / "live.html")}  # the worker rewrites the page each time


def test_verl_restart_truncation_keeps_the_steps_seen(tmp_path):
    p = tmp_path / "exp.jsonl"
    p.write_text("".join(_verl_line(s) for s in range(1, 41)))
    src = LogSource(p)
    assert src.poll() == 40 and src.n_reward == 40
    # verl restarts from a checkpoint at step 30: the file is truncated and rewritten from there
    p.write_text("".join(_verl_line(s) for s in range(30, 36)))
    src.poll()
    assert src.truncations == 1 and src.n_reward == 40 and src.last_step == 40
    with open(p, "a") as fh:
        fh.write("".join(_verl_line(s) for s in range(36, 46)))
    src.poll()
    assert src.last_step == 45 and src.n_reward == 45


def test_hf_output_folder_follows_the_newest_checkpoint(tmp_path):
    out = tmp_path / "outputs"

    def ckpt(n):
        d = out / f"checkpoint-{n}"
        d.mkdir(parents=True)
        hist = [{"step": s, "reward": _reward(s), "loss": 0.0} for s in range(1, n + 1)]
        (d / "trainer_state.json").write_text(json.dumps({"log_history": hist, "max_steps": 300, "global_step": n}))

    ckpt(10)
    src = LogSource(out)
    assert src.poll() == 10 and src.meta["max_steps"] == 300
    ckpt(20)
    ckpt(30)
    assert src.target().parent.name == "checkpoint-30"
    src.poll()
    assert src.n_reward == 30
    # half-written JSON (caught mid-write) is skipped until complete
    d = out / "checkpoint-40"
    d.mkdir()
    (d / "trainer_state.json").write_text('{"log_history": [{"step": 1, "rew')
    assert src.poll() == 0 and src.n_reward == 30


def test_cli_watch_refuses_a_report_that_is_not_html_before_following(tmp_path):
    from bayesgrpo.cli import app

    res = CliRunner().invoke(app, ["watch", str(tmp_path / "nothing-yet.jsonl"), "--report", str(tmp_path / "r.txt")])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "--report" in lines[0] and "'.txt'" in lines[0] and ".html" in lines[0], res.output


def test_watch_needs_a_horizon(tmp_path):
    p = tmp_path / "exp.jsonl"
    p.write_text("".join(_verl_line(s) for s in range(1, 20)))
    from bayesgrpo.errors import ForecastError

    with pytest.raises(ForecastError, match="no horizon"):
        watch(p, every=5, interval=0.01, worker=InstantWorker(), max_updates=1)


def test_format_line_with_target_budget_and_flags():
    r = {"ok": True, "observed_until": 50, "horizon": 200, "final_q50": 0.6, "final_q10": 0.5, "final_q90": 0.7,
         "p_target": 0.25, "stop_step_q50": 120.0, "p_plateaued": 0.05, "recommended_stop": 50.0, "stop_now": True,
         "flags": {"advantage_degeneracy": "warning", "reward_hacking": "watch"}, "seconds": 0.8}  # fmt: skip
    line = format_line(r)
    assert "P(>= target) 0.25" in line and "budget: stop at 50 (now)" in line
    assert "flags advantage_degeneracy=warning" in line and "reward_hacking" not in line
    assert format_line({"ok": False, "error": "ForecastError: boom"}) == "forecast failed: ForecastError: boom"


@pytest.mark.slow
def test_cli_watch_real_forecasts_plain_lines_when_piped(tmp_path):
    """The command itself, real worker (one compile): re-forecasts a growing file, plain output."""
    from bayesgrpo.cli import app

    p = tmp_path / "exp.jsonl"
    p.write_text("")
    hist = tmp_path / "live" / "forecasts.csv"
    png = tmp_path / "live" / "fan.png"
    page = tmp_path / "live" / "report.html"

    def write():  # 30 steps, then (once the first forecast is out) 30 more
        Writer(p, range(1, 31), delay=0.05).run()
        deadline = time.monotonic() + 240
        while not (hist.exists() and len(hist.read_text().splitlines()) >= 2) and time.monotonic() < deadline:
            time.sleep(0.2)
        Writer(p, range(31, 61), delay=0.02).run()

    t = threading.Thread(target=write, daemon=True)
    t.start()
    res = CliRunner().invoke(app, [
        "watch", str(p), "--every", "20", "--interval", "0.2", "--horizon", "300", "--target", "0.6",
        "--cost-per-step", "0.0005", "--max-updates", "2", "--idle-timeout", "240", "--draws", "100",
        "--tune", "100", "--history", str(hist), "--plot", str(png), "--report", str(page),
    ])  # fmt: skip
    t.join()
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("step ")]
    assert len(lines) == 2, res.output
    assert "\x1b[" not in res.stdout and "━" not in res.stdout  # plain when piped (no live table)
    assert all("/300  final " in ln and "P(>= target)" in ln and "budget: stop at" in ln for ln in lines)
    rows = list(csv.DictReader(Path(hist).read_text().splitlines()))
    assert [r["ok"] for r in rows] == ["True", "True"]
    seen = [int(r["observed_until"]) for r in rows]
    assert 6 <= seen[0] <= 30 and seen[1] >= seen[0] + 20  # re-forecast after 20 new steps
    q = [(float(r["final_q10"]), float(r["final_q50"]), float(r["final_q90"])) for r in rows]
    assert all(a <= b <= c for a, b, c in q) and all(0.2 < b < 1.2 for _, b, _ in q)
    assert png.exists() and png.stat().st_size > 1000
    html = page.read_text(encoding="utf-8")  # the live report of the last forecast, reloading itself
    assert '<meta http-equiv="refresh"' in html and f"{seen[1]} / 300" in html and "P(final" in html
    assert json.loads((hist.parent / "latest.json").read_text())["observed_until"] == seen[1]


# ------------------------------------------------------------------------------------ OpenRLHF
OPENRLHF = (
    "\x1b[36m(TrainingActor pid=4242)\x1b[0m INFO 03-05 12:34:56 ppo_trainer_async.py:150] \u2728 Global step 1: "
    "{'policy_loss': 0.12, 'reward': 0.25, 'return': 0.2, 'response_length': 120.5, 'kl': 0.001, 'actor_lr': 1e-06, 'entropy_loss': nan}\r\n"
    "(TrainingActor pid=4242) Episode [1/1]:  10%|#         | 1/10 [00:10<01:30, ...]\n"
    "(TrainingActor pid=4242) INFO 03-05 12:35:56 ppo_trainer_async.py:150] \u2728 Global step 2: "
    "{'policy_loss': np.float64(0.1), 'reward': 0.3, 'response_length': 118.0, 'kl': None, 'eval_gsm8k_pass1': 0.4}\n"
)


def test_openrlhf_console_reader(tmp_path):
    p = tmp_path / "grpo_run.log"
    p.write_text(OPENRLHF, encoding="utf-8")
    assert detect_format(p) == "openrlhf_console"
    rs = read_runs(p)
    d = rs.run("grpo_run")
    assert list(d["step"]) == [1, 2] and list(d["reward"]) == [0.25, 0.3]
    assert list(d["completion_length"]) == [120.5, 118.0] and d["kl"].iloc[0] == 0.001
    assert d["policy_loss"].iloc[1] == 0.1 and d["eval/gsm8k_pass1"].iloc[1] == 0.4
    assert list(d["source_line"]) == [1, 3]
    assert rs.meta.loc["grpo_run", "completion_length_key"] == "response_length"


def test_openrlhf_cut_off_last_line_and_malformed_line(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(
        OPENRLHF + "(TrainingActor pid=4242) INFO ...] \u2728 Global step 3: {'policy_loss': 0.1, 'rew",
        encoding="utf-8",
    )
    with pytest.warns(DataWarning, match="line 4: last metric line is incomplete"):
        rs = read_runs(p)
    assert list(rs.data["step"]) == [1, 2]
    p.write_text("x Global step 1: {'reward': 0.1,, }\n" + OPENRLHF, encoding="utf-8")
    with pytest.raises(
        LogFormatError, match=r"train.log, line 1: cannot parse the metrics dict after 'Global step 1:'"
    ):
        read_runs(p)
    p.write_text("Global step: nothing here\n", encoding="utf-8")
    with pytest.raises(LogFormatError):
        read_runs(p, format="openrlhf_console")


def test_openrlhf_log_followed_while_written(tmp_path):
    p = tmp_path / "train.log"
    p.write_text("")
    lines = [
        f"(TrainingActor pid=1) INFO x.py:1] \u2728 Global step {s}: {{'reward': {_reward(s)}, 'kl': 0.01}}\n"
        for s in range(1, 41)
    ]

    def write():
        for ln in lines:
            with open(p, "a", encoding="utf-8") as fh:
                fh.write(ln)
            time.sleep(0.005)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    worker = InstantWorker()
    res = watch(p, every=10, interval=0.03, horizon=100, worker=worker, idle_timeout=0.5)
    t.join()
    assert res and res[-1]["observed_until"] == 40


# ------------------------------------------------------------------------------------ W&B API
class MockRun:
    def __init__(self, rows, config):
        self.rows, self.config, self.name, self.id = rows, config, "brisk-sun-7", "abc123"
        self.calls = []

    def scan_history(self, keys=None, page_size=1000, min_step=None, max_step=None):
        self.calls.append({"page_size": page_size, "min_step": min_step})
        return iter([r for r in self.rows if min_step is None or r["_step"] >= min_step])

    def history(self, *a, **k):  # sampled: must never be used
        raise AssertionError("run.history() is sampled; use scan_history()")


class MockApi:
    def __init__(self, run):
        self._run, self.paths = run, []

    def run(self, path):
        self.paths.append(path)
        return self._run


def _wandb_history(n, start=0):
    rows = []
    for s in range(start + 1, start + n + 1):
        rows.append({"_step": 2 * s, "_runtime": s * 3.0, "train/global_step": s, "train/reward": _reward(s),
                     "train/completions/mean_length": 40.0, "train/rewards/acc/mean": _reward(s)})  # fmt: skip
        if s % 10 == 0:
            rows.append({"_step": 2 * s + 1, "train/global_step": s, "eval/reward": _reward(s) - 0.05})
    return rows


CONFIG = {"max_steps": 200, "learning_rate": 1e-6, "adam_beta1": 0.9, "num_generations": 8,
          "per_device_train_batch_size": 8, "gradient_accumulation_steps": 4, "model_name_or_path": "Qwen/Qwen2.5-0.5B"}  # fmt: skip


def test_wandb_api_reader_uses_scan_history_and_the_run_config():
    run = MockRun(_wandb_history(30), CONFIG)
    api = MockApi(run)
    rs = read_wandb_run("wandb:team/grpo/abc123", api=api)
    assert api.paths == ["team/grpo/abc123"] and run.calls == [{"page_size": 1000, "min_step": None}]
    d = rs.run("brisk-sun-7")
    assert list(d["step"]) == list(range(1, 31))
    assert d["reward"].iloc[4] == pytest.approx(_reward(5)) and d["completion_length"].iloc[0] == 40.0
    assert d.loc[d["step"] == 10, "eval/reward"].iloc[0] == pytest.approx(_reward(10) - 0.05)
    m = rs.meta.loc["brisk-sun-7"]
    assert m["max_steps"] == 200 and m["group_size"] == 8 and m["beta1"] == 0.9 and m["batch_size"] == 32
    assert m["model"] == "Qwen/Qwen2.5-0.5B"
    with pytest.raises(LogFormatError, match="entity/project/run_id"):
        read_wandb_run("team/abc", api=api)


def test_wandb_without_the_package(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_wandb(name, *a, **k):
        if name == "wandb":
            raise ImportError("no wandb")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_wandb)
    with pytest.raises(LogFormatError, match=r"pip install bayesgrpo\[wandb\]"):
        read_wandb_run("team/grpo/abc123")


def test_watch_follows_a_wandb_run_fetching_new_rows_only():
    run = MockRun(_wandb_history(12), CONFIG)
    api = MockApi(run)
    src = LogSource("wandb:team/grpo/abc123", wandb_api=api)
    assert src.poll() == 12 and src.meta["max_steps"] == 200
    run.rows += _wandb_history(8, start=12)
    assert src.poll() == 8 and src.n_reward == 20
    assert run.calls[1]["min_step"] == 2 * 12 + 1  # only rows after the last W&B _step seen


def test_wandb_rows_merges_rows_of_one_step():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        recs = wandb_rows([{"_step": 0, "train/global_step": 10, "train/reward": 0.5, "train/kl": None},
                           {"_step": 1, "train/global_step": 10, "eval/reward": 0.4}])  # fmt: skip
    assert recs == [{"reward": 0.5, "step": 10, "_step": 1, "eval/reward": 0.4}]


def test_live_table_renders_results_and_failures():
    from rich.console import Console

    from bayesgrpo.integrations.cli import _live_table

    ok = {"ok": True, "observed_until": 50, "horizon": 200, "final_q50": 0.6, "final_q10": 0.5, "final_q90": 0.7,
          "p_target": 0.25, "stop_step_q50": 120.0, "p_plateaued": 0.05, "seconds": 0.8,
          "flags": {"advantage_degeneracy": "critical"}}  # fmt: skip
    con = Console(record=True, width=160)
    con.print(_live_table([ok, {"ok": False, "error": "ForecastError: boom"}], title="watching x"))
    text = con.export_text()
    assert "50/200" in text and "0.6 [0.5, 0.7]" in text and "advantage_degeneracy=critical" in text
    assert "failed: ForecastError: boom" in text
    # forecast's labels where the quantity is the same; p_gain and advice in their own columns (with --stop)
    assert "seen/horizon" in text and "P(gain)" in text and "advice" in text
    con = Console(record=True, width=200)
    con.print(_live_table([ok | {"p_gain": 0.12, "advice": "stop"}], title="watching x"))
    row = next(ln for ln in con.export_text().splitlines() if "50/200" in ln)
    assert row.split("│")[3].strip() == "0.12" and row.split("│")[4].strip() == "stop", row


def test_worker_that_dies_answers_with_an_error_and_is_restarted(tmp_path):
    import os
    import signal

    from bayesgrpo.integrations._worker import ForecastWorker

    w = ForecastWorker(log_file=tmp_path / "worker.log", max_restarts=1)
    try:
        rid = w.submit({"kind": "warmup", "sampler": {"draws": 10, "tune": 10}})
        first = w.pid
        time.sleep(0.5)
        os.kill(first, signal.SIGKILL)  # our own child, during its start-up
        res = w.wait_for(rid, timeout=30)
        assert res and res[-1]["ok"] is False and "exited" in res[-1]["error"]
        w.submit({"kind": "warmup"})
        assert w.pid != first and w.alive()  # restarted for the next request
    finally:
        t0 = time.monotonic()
        w.close()
        assert time.monotonic() - t0 < 5  # a busy worker is not waited for
    assert not w.alive()


# ------------------------------------------------------------------------------------ issue 33, item 10
def _in_process_worker(monkeypatch):
    import sys

    import bayesgrpo.integrations.watch as W

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from inprocess_worker import InProcessWorker

    InProcessWorker.instances = []
    monkeypatch.setattr(W, "ForecastWorker", InProcessWorker)
    return InProcessWorker


def test_cli_watch_says_it_is_compiling_before_the_first_forecast(tmp_path, monkeypatch, mock_sampler):
    """(a) not quiet while the first compile runs: one status line says so, before the first forecast's line."""
    from bayesgrpo.cli import app
    from bayesgrpo.integrations.watch import FIRST_FORECAST_NOTE

    _in_process_worker(monkeypatch)
    p = tmp_path / "exp.jsonl"
    p.write_text("".join(_verl_line(s) for s in range(1, 31)))
    res = CliRunner().invoke(app, ["watch", str(p), "--horizon", "300", "--interval", "0.05", "--idle-timeout", "0.3"])
    assert res.exit_code == 0, res.output
    out = res.output.splitlines()
    note = [i for i, ln in enumerate(out) if "compiling the model" in ln and "first forecast" in ln]
    first = next(i for i, ln in enumerate(out) if ln.startswith("step "))
    assert len(note) == 1 and note[0] < first and out[note[0]] == f"# {FIRST_FORECAST_NOTE}", res.output


def test_live_table_shows_the_latest_status_while_waiting():
    """(a) on a terminal the status lines are not printed (a live table): the latest one is its caption."""
    from rich.console import Console

    from bayesgrpo.integrations.cli import _Display, _live_table
    from bayesgrpo.integrations.watch import FIRST_FORECAST_NOTE

    show = _Display("watching x", tty=True, line=str)
    try:
        show.status(FIRST_FORECAST_NOTE)
        assert show.live is not None and show.note == FIRST_FORECAST_NOTE
    finally:
        show.live.stop()
    con = Console(record=True, width=300)
    con.print(_live_table([], title="watching x", note=show.note))
    assert "compiling the model in the background" in con.export_text()


@pytest.mark.parametrize("horizon", [300, 80])  # the last answer a forecast with advice / the run complete
def test_cli_watch_report_is_rewritten_after_the_last_forecast_printed(tmp_path, monkeypatch, mock_sampler, horizon):
    """(b) the live page shows the forecast the terminal printed last: its step (also when that answer is the run
    being complete) and the stop policy's advice the terminal shows (not the budget's)."""
    from bayesgrpo.cli import app

    _in_process_worker(monkeypatch)
    from test_report import Page  # the tests folder is on the path now

    mock_sampler["params"]["r_star"] = 0.0  # a run heading down: the policy says stop, the budget says stop at ...
    p = tmp_path / "exp.jsonl"
    p.write_text("")
    w = Writer(p, range(1, 81), delay=0.01)
    w.start()
    page = tmp_path / "live.html"
    res = CliRunner().invoke(app, ["watch", str(p), "--horizon", str(horizon), "--stop", "--risk", "0.3", "--every", "20",
                                   "--interval", "0.05", "--idle-timeout", "0.5", "--report", str(page)])  # fmt: skip
    w.join()
    assert res.exit_code == 0, res.output
    last = [ln for ln in res.stdout.splitlines() if ln.startswith("step ")][-1]
    cells = Page(page.read_text(encoding="utf-8")).cell_texts(0)
    step = last.split()[1]  # "80/300"
    assert cells[1].replace(" ", "") == step, (last, cells)
    if horizon == 80:
        assert "complete" in last and "complete" in cells[-1], (last, cells)
    else:
        advice = last.split(" advice ")[1].split()[0]
        assert advice == "stop" and cells[4] == advice, (last, cells)  # the terminal's stop is the page's
