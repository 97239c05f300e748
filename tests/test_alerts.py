"""Alerts through the trackers' own channels (issue 32): the rules (once per change, levels, what the text
quotes), the measured rates they read, and every path end to end against the real packages, offline --
trackio's local store, W&B in offline mode (its run file read back), TensorBoard event files read back."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bayesgrpo.decisions.alerts import alert_rates_for, decline_alarm_for
from bayesgrpo.integrations.alerts import DECLINE_ALARM, Alerter, AlertRules, margin_layout
from bayesgrpo.resources import resource_path

ROOT = Path(__file__).resolve().parents[1]

#: the forecast results of one scripted run: what each of them must fire, in order
SCRIPT = [
    dict(advice="continue", flag="none", p=0.05),  # nothing
    dict(advice="continue", flag="warning", p=0.90),  # flag WARN, decline WARN
    dict(advice="stop", flag="warning", p=0.95),  # stop WARN (flag and decline unchanged: nothing)
    dict(advice="stop", flag="critical", p=0.01),  # flag ERROR, decline INFO (back below)
    dict(advice="continue", flag="critical", p=0.01),  # nothing
    dict(advice="stop", flag="critical", p=0.01),  # stop WARN again (a new change)
]
EXPECTED = [("flag/dynamical_instability", "WARN"), ("decline", "WARN"), ("advice", "WARN"),
            ("flag/dynamical_instability", "ERROR"), ("decline", "INFO"), ("advice", "WARN")]  # fmt: skip


def result(k: int, *, rates=None, error_rate=0.0625, level=None) -> dict:
    s = SCRIPT[min(k, len(SCRIPT) - 1)]
    return {"ok": True, "status": "ok", "observed_until": 10 * (k + 1), "final_q10": 0.3, "final_q50": 0.4,
            "final_q90": 0.5, "level": 0.55, "p_decline": s["p"], "advice": s["advice"], "p_gain": 0.07,
            "advice_error_rate": error_rate, "policy": "the stop policy", "decline_alarm": level,
            "flags": {"dynamical_instability": s["flag"], "reward_hacking": "none"},
            "flag_evidence": {"dynamical_instability": "the reward fell by 0.6 of its range at step 40"},
            "alert_rates": rates or {}}  # fmt: skip


# ----------------------------------------------------------------------------- the rules
def test_rules_fire_once_per_change_at_their_levels():
    rules = AlertRules(run_id="r")
    fired = [(a.signal, a.level) for k in range(len(SCRIPT)) for a in rules.update(result(k))]
    assert fired == EXPECTED
    # a failed fit or a run logged up to its horizon fires nothing and changes no state
    assert rules.update({"ok": False, "error": "x"}) == [] and rules.update({**result(1), "status": "complete"}) == []


def test_alert_texts_say_what_to_do_and_quote_the_measured_rates():
    rates = {"decline": {"false_share": 0.25, "cases": 192, "sources": 29}}
    rules = AlertRules(run_id="a-run-with-a-rather-long-name-that-will-not-fit-in-a-wandb-title")
    al = {(a.signal, a.level): a for k in range(len(SCRIPT)) for a in rules.update(result(k, rates=rates))}
    stop = al[("advice", "WARN")].text
    assert "P(gain) = 0.07" in stop and "6% of such stops lost more than 0.1" in stop and "What to do" in stop
    dec = al[("decline", "WARN")].text
    assert f"P(decline) = 0.90 >= {DECLINE_ALARM:g}" in dec and "25% of such alarms" in dec and "192" in dec
    assert "What to do" in dec and "learning rate" in dec
    flag = al[("flag/dynamical_instability", "ERROR")].text
    assert "is critical: the reward fell by 0.6" in flag and "not measured" in flag and "learning rate" in flag
    assert all(len(a.title) < 64 for a in al.values())  # W&B refuses longer titles
    # an explicit stop threshold has no measured error rate, and the text says so instead of a number
    r = AlertRules().update({**result(2), "advice_error_rate": float("nan")})
    assert "unmeasured" in next(a.text for a in r if a.signal == "advice")


def test_the_decline_level_is_the_measured_one_unless_the_user_sets_one():
    assert AlertRules().level(result(0, level=0.3)) == 0.3  # carried by the worker's result
    assert AlertRules().level(result(0)) == DECLINE_ALARM  # nothing measured for the kind
    assert AlertRules(decline=0.8).level(result(0, level=0.3)) == 0.8
    r = AlertRules()
    assert [a.level for a in r.update({**result(0, level=0.3), "p_decline": 0.35})] == ["WARN"]
    with pytest.raises(ValueError, match="alarm level"):
        AlertRules(decline=1.5)
    with pytest.raises(ValueError, match="unknown tracker"):
        Alerter(["slack"])


def test_shipped_rates_are_the_benchmarks_measurement():
    bench = json.loads((ROOT / "bench" / "results" / "monitors.json").read_text())["alert_rates"]
    ship = json.loads(resource_path("alerts_oscillator.json").read_text())  # the packaged measurement
    assert ship["signals"] == bench and ship["provenance"]["command"].endswith("bench.monitors")
    assert decline_alarm_for("oscillator") == bench["decline"]["alarm_level"]
    got = alert_rates_for("oscillator")
    assert got["decline"]["false_share"] == bench["decline"]["false_share"]
    assert set(got) == {k for k, v in bench.items() if v["false_share"] is not None}
    assert alert_rates_for("no-such-kind") == {} and decline_alarm_for("no-such-kind") is None


def test_the_worker_result_carries_what_the_alerts_read(mock_sampler):
    import numpy as np
    import pandas as pd

    from bayesgrpo.decisions.stop import StopPolicy
    from bayesgrpo.integrations._requests import forecast_request
    from bayesgrpo.integrations._serve import _handle
    from bayesgrpo.integrations.stops import PolicyStop

    steps = np.arange(1, 41)
    y = 0.6 - 0.5 * np.exp(-steps / 10) + 0.01 * np.random.default_rng(0).standard_normal(steps.size)
    req = forecast_request(run_id="r", frame=pd.DataFrame({"step": steps, "reward": y}), meta={"max_steps": 200},
                           kind="oscillator", sampler={"draws": 50, "tune": 50}, **PolicyStop().request())  # fmt: skip
    res = _handle(req)
    assert 0.0 <= res["p_decline"] <= 1.0 and res["level"] == pytest.approx(y[-4:].mean())
    assert res["alert_rates"] == alert_rates_for("oscillator") and res["decline_alarm"] == decline_alarm_for()
    assert (
        res["advice"] in ("stop", "continue", "too early")
        and res["advice_error_rate"] == StopPolicy(kind="oscillator").error_rate
    )
    assert set(res["flag_evidence"]) == {m for m, s in res["flags"].items() if s in ("warning", "critical")}


def test_tensorboard_margin_layout_draws_the_80_percent_band():
    lay = margin_layout("train/bayesgrpo/")
    (chart,) = lay["bayesgrpo"].values()
    assert chart == ["Margin", ["train/bayesgrpo/final_q50", "train/bayesgrpo/final_q10", "train/bayesgrpo/final_q90"]]


# ----------------------------------------------------------------------------- end to end, real packages
def wandb_alerts(folder: Path) -> list[tuple[str, str, str]]:
    """(title, level, text) of the alert records of W&B offline run files under ``folder`` (W&B's LevelDB-style
    log: a 7-byte file header, 32 KiB blocks, 7-byte record headers; payload a ``wandb_internal_pb2.Record``)."""
    from wandb.proto import wandb_internal_pb2 as pb

    out = []
    for f in sorted(folder.rglob("run-*.wandb")):
        data, pos, block, buf = f.read_bytes(), 7, 32768, b""
        assert data[:4] == b":W&B"
        while pos + 7 <= len(data):
            left = block - pos % block
            if left < 7:
                pos += left
                continue
            _, n, kind = struct.unpack("<IHB", data[pos : pos + 7])
            pos += 7
            if kind == 0 and n == 0:
                pos += left - 7
                continue
            buf, pos = buf + data[pos : pos + n], pos + n
            if kind in (1, 4):  # a full record, or the last piece of one
                r = pb.Record()
                r.ParseFromString(buf)
                buf = b""
                if r.WhichOneof("record_type") == "alert":
                    out.append((r.alert.title, r.alert.level, r.alert.text))
    return out


def tensorboard_layout_and_tags(folder: Path):
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.custom_scalar import layout_pb2

    layouts, tags = [], set()
    for f in folder.rglob("events.out.tfevents.*"):
        for ev in EventFileLoader(str(f)).Load():
            for v in ev.summary.value:
                if v.tag == "custom_scalars__config__":
                    lay = layout_pb2.Layout()
                    lay.ParseFromString(v.tensor.string_val[0])
                    layouts.append(lay)
                else:
                    tags.add(v.tag)
    return layouts, tags


def script(*parts: str) -> str:
    return "".join(textwrap.dedent(p) for p in parts)


def run_script(code: str, tmp_path: Path, timeout: float = 600) -> dict:
    env = {**os.environ, "TRACKIO_DIR": str(tmp_path / "trackio"), "WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path),
           "WANDB_SILENT": "true", "WANDB_PROJECT": "bgtest", "TRACKIO_PROJECT": "bgtest", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(ROOT / "tests")}  # fmt: skip
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=timeout)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


FAKE_WORKER = """
    from test_alerts import result
    class Worker:  # answers every forecast request at once with the scripted result of its turn
        def __init__(self):
            self.n, self.k, self.out, self.busy = 0, 0, [], False
        def submit(self, req):
            self.n += 1
            if req.get("kind") != "warmup":
                self.out.append({**result(self.k, rates=RATES), "id": self.n, "kind": "forecast"})
                self.k += 1
            return self.n
        def poll(self):
            out, self.out = self.out, []
            return out
        def wait_for(self, rid, *, timeout):
            return self.poll()
        def close(self):
            pass
"""


@pytest.mark.slow  # a real GRPOTrainer with trackio, W&B (offline) and TensorBoard in a fresh process
def test_callback_alerts_reach_trackio_wandb_and_tensorboard(tmp_path):
    pytest.importorskip("trackio")
    pytest.importorskip("wandb")
    pytest.importorskip("tensorboard")
    code = script(
        """
        import json, trackio
        RATES = {"decline": {"false_share": 0.25, "cases": 192, "sources": 29}}
        """,
        FAKE_WORKER,
        """
        import tiny_grpo
        from bayesgrpo.integrations.trl import BayesGRPOCallback
        w = Worker()
        cb = BayesGRPOCallback(every=2, worker=w, warmup=False, history=False)
        tr = tiny_grpo.make_trainer("out", max_steps=16, callbacks=[cb], report_to=["trackio", "wandb", "tensorboard"])
        tr.train()
        got = [(a.signal, a.level) for t, a in cb._alerter.sent if t == "trackio"]
        print(json.dumps({"sent": got, "stored": trackio.Api().alerts(tr.args.project)}))
        """,
    )
    out = run_script(code, tmp_path)
    want = [list(e) for e in EXPECTED]
    assert out["sent"] == want
    # trackio: the alerts in its local store, levels and texts as fired
    stored = sorted(out["stored"], key=lambda a: a["timestamp"])
    assert [a["level"] for a in stored] == [lv.lower() for _, lv in EXPECTED]
    assert "25% of such alarms" in stored[1]["text"] and "What to do" in stored[2]["text"]
    # W&B offline: the alert records in the run file
    wb = wandb_alerts(tmp_path / "wandb")
    assert [lv for _, lv, _ in wb] == [lv for _, lv in EXPECTED]
    assert [t for t, _, _ in wb] == [a["title"] for a in stored]
    # TensorBoard: the margin chart over the tags the trainer's callback wrote
    layouts, tags = tensorboard_layout_and_tags(tmp_path / "out" / "runs")
    assert len(layouts) == 1
    chart = layouts[0].category[0].chart[0]
    m = [(s.value, s.lower, s.upper) for s in chart.margin.series]
    assert m == [("train/bayesgrpo/final_q50", "train/bayesgrpo/final_q10", "train/bayesgrpo/final_q90")]
    assert set(m[0]) <= tags  # the band's three tags hold the logged forecast


@pytest.mark.slow  # watch with trackio and W&B (offline) runs opened as `--alert-to` opens them, in a fresh process
def test_watch_alerts_reach_the_trackers_alert_to_opens(tmp_path):
    pytest.importorskip("trackio")
    pytest.importorskip("wandb")
    code = script(
        """
        import json, threading, time, trackio
        RATES = {}
        """,
        FAKE_WORKER,
        """
        from bayesgrpo.integrations.alerts import open_tracker_runs
        from bayesgrpo.integrations.watch import watch
        fins = open_tracker_runs(["trackio", "wandb"], project="bgwatch", name="log")
        log = open("log.jsonl", "w")
        def write():  # a verl file log being written: 10 steps at a time
            for s in range(1, 81):
                log.write(json.dumps({"step": s, "data": {"critic/score/mean": 0.5 + 0.001 * s}}) + "\\n")
                if s % 10 == 0:
                    log.flush()
                    time.sleep(0.4)
        t = threading.Thread(target=write)
        t.start()
        res = watch("log.jsonl", every=10, interval=0.05, horizon=200, worker=Worker(), max_updates=6,
                    idle_timeout=5, final_wait=1)
        t.join()
        stored = trackio.Api().alerts("bgwatch")
        for f in fins:
            f()
        print(json.dumps({"updates": len(res), "stored": stored}))
        """,
    )
    out = run_script(code, tmp_path)
    assert out["updates"] == len(SCRIPT)
    stored = sorted(out["stored"], key=lambda a: a["timestamp"])
    assert [a["level"] for a in stored] == [lv.lower() for _, lv in EXPECTED]
    assert [lv for _, lv, _ in wandb_alerts(tmp_path / "wandb")] == [lv for _, lv in EXPECTED]


def test_alert_to_names_only_the_trackers_it_knows(tmp_path):
    from typer.testing import CliRunner

    from bayesgrpo.cli import app

    log = tmp_path / "log.jsonl"
    log.write_text('{"step": 1, "data": {"critic/score/mean": 0.5}}\n')
    r = CliRunner().invoke(app, ["watch", str(log), "--alert-to", "slack", "--max-updates", "1"])
    assert r.exit_code == 2 and "alerts go to trackio or wandb" in r.output


def test_the_default_kind_quotes_its_own_measured_decline_alarm():
    """The default (kind auto) ships its own P(decline) alarm level and false share (bench/yardstick/alerts.py,
    the selection sources only); its flags were never measured for it, so none is quoted."""
    ship = json.loads((ROOT / "bayesgrpo" / "resources" / "alerts_auto.json").read_text())
    assert ship["kind"] == "auto" and ship["provenance"]["command"] == "nice .venv/bin/python -m bench.yardstick.alerts"
    assert set(alert_rates_for("auto")) == {"decline"} and 0.0 < alert_rates_for("auto")["decline"]["false_share"] < 1
    assert decline_alarm_for("auto") == ship["signals"]["decline"]["alarm_level"] and decline_alarm_for("auto") > 0
