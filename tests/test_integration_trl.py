"""BayesGRPOCallback inside real TRL GRPOTrainer runs on CPU (tiny random Llama, local tokenizer).

Nothing is downloaded (HF_HUB_OFFLINE=1). One real forecasting worker is shared by the tests of this
module so the model is compiled once; the stop-rule tests drive the callback with a worker whose
answers they control.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import warnings

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("transformers")

import tiny_grpo

from bayesgrpo.integrations._worker import ForecastWorker
from bayesgrpo.integrations.trl import BayesGRPOCallback, ImprovementStop, UtilityStop
from bayesgrpo.io.trl import run_config_meta

SMALL = {"draws": 100, "tune": 100, "chains": 2}
KEYS = (
    "bayesgrpo/final_q10",
    "bayesgrpo/final_q50",
    "bayesgrpo/final_q90",
    "bayesgrpo/stop_step_q50",
    "bayesgrpo/p_plateaued",
)


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    """A real worker, compiled once for the module (the compile overlaps nothing here: ~20-30 s)."""
    w = ForecastWorker(log_file=tmp_path_factory.mktemp("worker") / "worker.log")
    rid = w.submit({"kind": "warmup", "sampler": SMALL})
    res = w.wait_for(rid, timeout=240)
    assert res and res[-1]["ok"], res
    yield w
    w.close()


class FakeWorker:
    """Answers every forecast request at once with numbers the test chooses."""

    def __init__(self, answer):
        self.answer = answer
        self.requests = []
        self._out = []
        self.busy = False

    def submit(self, req):
        self.requests.append(req)
        rid = len(self.requests)
        if req.get("kind") == "warmup":
            self._out.append({"id": rid, "kind": "warmup", "ok": True})
        else:
            last = max(r["step"] for r in req["rows"])
            self._out.append({"id": rid, "kind": "forecast", "ok": True, "observed_until": last, **self.answer(req)})
        return rid

    def poll(self):
        out, self._out = self._out, []
        return out

    def wait_for(self, rid, *, timeout):
        return self.poll()

    def close(self):
        pass


def _forecast_entries(state):
    return [e for e in state.log_history if "bayesgrpo/final_q50" in e]


@pytest.mark.slow  # the real worker (its compile, ~20-30 s, is the module fixture) and a real trainer
def test_real_run_logs_sane_forecasts_and_never_blocks_a_step(tmp_path, worker):
    cb = BayesGRPOCallback(every=5, target=0.9, sampler=SMALL, worker=worker, final_wait=30, report=True)
    tr = tiny_grpo.make_trainer(tmp_path / "out", max_steps=40, callbacks=[cb])
    tr.train()
    st = tr.state
    assert st.global_step == 40
    ents = _forecast_entries(st)
    # forecasts arrived while training ran (next to a logged reward), not only at the end
    mid = [e for e in ents if "reward" in e]
    assert len(mid) >= 2, [e.get("step") for e in ents]
    for e in ents:
        if e["bayesgrpo/complete"] == 1.0:  # logged up to max_steps: the observed final reward, nothing to settle
            assert all(k in e for k in KEYS[:3]) and e["bayesgrpo/final_q10"] == e["bayesgrpo/final_q90"]
            continue
        censored = e["bayesgrpo/p_stop_before_horizon"] < 0.5  # no stop step is logged then
        assert all(k in e for k in KEYS if not (censored and k == "bayesgrpo/stop_step_q50"))
        assert e["bayesgrpo/final_q10"] <= e["bayesgrpo/final_q50"] <= e["bayesgrpo/final_q90"]
        assert -0.5 < e["bayesgrpo/final_q50"] < 1.5  # the reward is a share in [0, 1]
        assert 0.0 <= e["bayesgrpo/p_plateaued"] <= 1.0 and 0.0 <= e["bayesgrpo/p_target"] <= 1.0
        assert e["bayesgrpo/observed_until"] <= e["step"]
        assert e["bayesgrpo/flag/advantage_degeneracy"] in (0.0, 1.0, 2.0, 3.0)
    # the last forecast saw the whole run
    assert ents[-1]["bayesgrpo/observed_until"] == 40
    # a fit never runs inside a training step: the longest on_log stays far below one fit
    fit_s = [e["bayesgrpo/fit_seconds"] for e in ents if e["bayesgrpo/complete"] == 0.0]  # a complete run: no fit
    assert cb.max_log_seconds < 0.05, cb.max_log_seconds
    assert cb.max_log_seconds < 0.2 * min(fit_s), (cb.max_log_seconds, fit_s)
    # the history written next to the trainer output
    hist = list(csv.DictReader((tmp_path / "out" / "bayesgrpo" / "forecasts.csv").read_text().splitlines()))
    assert len(hist) == cb._n_fits >= len(ents) and all(r["ok"] == "True" for r in hist)
    latest = json.loads((tmp_path / "out" / "bayesgrpo" / "latest.json").read_text())
    assert latest["observed_until"] == 40 and latest["final_q50"] == pytest.approx(ents[-1]["bayesgrpo/final_q50"])
    # the live HTML report, reloading itself, rewritten after every answer: the last one is the complete run
    # (what the console says last), its observed final reward on the page
    page = (tmp_path / "out" / "bayesgrpo" / "report.html").read_text(encoding="utf-8")
    assert '<meta http-equiv="refresh"' in page and "P(final" in page
    assert "complete: logged up to its horizon" in page and "40 / 40" in page
    # the callback moved itself in front of the reporting callbacks
    assert tr.callback_handler.callbacks[0] is cb


@pytest.mark.slow  # the real worker (its compile, ~20-30 s, is the module fixture) and a real trainer
def test_tensorboard_event_files_hold_the_forecast_next_to_the_reward(tmp_path, worker):
    pytest.importorskip("tensorboard")
    pytest.importorskip("tbparse")
    from bayesgrpo import read_runs

    cb = BayesGRPOCallback(every=5, sampler=SMALL, worker=worker, final_wait=30)
    tr = tiny_grpo.make_trainer(tmp_path / "out", max_steps=30, callbacks=[cb], report_to=["tensorboard"])
    tr.train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rs = read_runs(tmp_path / "out" / "runs")  # the project's TensorBoard reader
    d = rs.data
    assert "reward" in d.columns and "bayesgrpo/final_q50" in d.columns and "bayesgrpo/p_plateaued" in d.columns
    both = d.loc[d["bayesgrpo/final_q50"].notna()]
    assert len(both) >= 2  # mid-run forecasts and the final one
    assert both["reward"].notna().sum() >= 1  # same TensorBoard step as train/reward
    # the scalars are the numbers in log_history
    hist = {e["step"]: e["bayesgrpo/final_q50"] for e in _forecast_entries(tr.state)}
    for step, v in zip(both["step"], both["bayesgrpo/final_q50"], strict=True):
        assert v == pytest.approx(hist[int(step)], rel=1e-5)
    assert int(both["step"].max()) == 30  # the end-of-training forecast reached TensorBoard


@pytest.mark.slow  # the real worker (its compile, ~20-30 s, is the module fixture) and a real trainer
def test_failing_fit_is_logged_and_training_goes_on(tmp_path, worker, caplog):
    # draws=5 is refused by SamplerConfig inside the worker: every fit raises there
    cb = BayesGRPOCallback(every=5, sampler={"draws": 5, "tune": 100}, worker=worker, final_wait=20, warmup=False)
    tr = tiny_grpo.make_trainer(tmp_path / "out", max_steps=20, callbacks=[cb])
    with caplog.at_level(logging.WARNING, logger="bayesgrpo"):
        tr.train()
    assert tr.state.global_step == 20
    assert cb._n_failures >= 1 and cb._n_fits == 0
    assert any("forecast failed" in r.getMessage() and "draws" in r.getMessage() for r in caplog.records)
    hist = list(csv.DictReader((tmp_path / "out" / "bayesgrpo" / "forecasts.csv").read_text().splitlines()))
    assert hist and all(r["ok"] == "False" and "draws" in r["error"] for r in hist)


class BrokenWorker(FakeWorker):
    def poll(self):
        raise RuntimeError("worker pipe exploded")


def test_exception_inside_the_callback_does_not_stop_training(tmp_path, caplog):
    cb = BayesGRPOCallback(every=2, worker=BrokenWorker(lambda r: {}), final_wait=1)
    tr = tiny_grpo.make_trainer(tmp_path / "out", max_steps=12, callbacks=[cb])
    with caplog.at_level(logging.WARNING, logger="bayesgrpo"):
        tr.train()
    assert tr.state.global_step == 12
    assert any("worker pipe exploded" in r.getMessage() for r in caplog.records)


def _answer(p_improve):
    return lambda req: {"final_q10": 0.4, "final_q50": 0.5, "final_q90": 0.6, "stop_step_q50": 10.0,
                        "p_plateaued": 0.9, "best": 0.55, "p_improve": p_improve, "horizon": 60, "seconds": 0.0}  # fmt: skip


def test_stop_rule_sets_should_training_stop_when_its_condition_holds(tmp_path, caplog):
    fake = FakeWorker(_answer(0.001))
    cb = BayesGRPOCallback(
        every=2, stop=ImprovementStop(delta=0.0, epsilon=0.05, patience=2), worker=fake, warmup=False
    )
    tr = tiny_grpo.make_trainer(tmp_path / "out", max_steps=60, callbacks=[cb])
    with caplog.at_level(logging.WARNING, logger="bayesgrpo"):
        tr.train()
    # fits after 6, 8 rewards -> two consecutive P < eps -> stop at the next log
    assert tr.state.global_step < 60
    stops = [e for e in tr.state.log_history if e.get("bayesgrpo/stop") == 1.0]
    assert len(stops) == 1 and stops[0]["step"] == tr.state.global_step
    assert fake.requests[-1]["improve"] == {"delta": 0.0, "window": 5, "relative": True}
    msg = [r.getMessage() for r in caplog.records if "stopping training" in r.getMessage()]
    assert msg and "P(final reward >= best so far 0.55 + 0) = 0.001 < 0.05 for 2 consecutive" in msg[0]


def test_report_true_asks_the_worker_for_the_live_page_in_the_history_folder(tmp_path):
    fake = FakeWorker(_answer(0.5))
    cb = BayesGRPOCallback(every=2, worker=fake, warmup=False, report=True)
    tiny_grpo.make_trainer(tmp_path / "out", max_steps=12, callbacks=[cb]).train()
    fc = [r for r in fake.requests if r.get("kind") == "forecast"]
    assert fc and {r["report"] for r in fc} == {str(tmp_path / "out" / "bayesgrpo" / "report.html")}
    assert cb.state()["args"]["report"] is True
    other = FakeWorker(_answer(0.5))
    cb = BayesGRPOCallback(every=2, worker=other, warmup=False, report=str(tmp_path / "elsewhere.html"))
    tiny_grpo.make_trainer(tmp_path / "out2", max_steps=8, callbacks=[cb]).train()
    assert {r["report"] for r in other.requests if r.get("kind") == "forecast"} == {str(tmp_path / "elsewhere.html")}
    plain = FakeWorker(_answer(0.5))
    tiny_grpo.make_trainer(tmp_path / "out3", max_steps=8, callbacks=[BayesGRPOCallback(every=2, worker=plain,
                                                                                        warmup=False)]).train()  # fmt: skip
    assert all(r["report"] is None for r in plain.requests if r.get("kind") == "forecast")  # off by default


def test_stop_rule_does_not_fire_when_improvement_is_likely(tmp_path):
    cb = BayesGRPOCallback(every=2, stop={"rule": "improvement", "epsilon": 0.05, "patience": 2},
                           worker=FakeWorker(_answer(0.4)), warmup=False)  # fmt: skip
    tr = tiny_grpo.make_trainer(tmp_path / "out", max_steps=16, callbacks=[cb])
    tr.train()
    assert tr.state.global_step == 16
    assert not any("bayesgrpo/stop" in e for e in tr.state.log_history)


def test_utility_rule_stops_when_stopping_now_is_best(tmp_path):
    def ans(req):
        return {**_answer(0.5)(req), "stop_now": True, "recommended_stop": float(max(r["step"] for r in req["rows"]))}

    fake = FakeWorker(ans)
    cb = BayesGRPOCallback(every=2, stop=UtilityStop(cost_per_step=0.01, patience=1), worker=fake, warmup=False)
    tr = tiny_grpo.make_trainer(tmp_path / "out", max_steps=40, callbacks=[cb])
    tr.train()
    assert tr.state.global_step < 40
    assert fake.requests[-1]["utility"] == {"value_per_reward": 1.0, "cost_per_step": 0.01}


def test_resume_rebuilds_history_and_restores_callback_state(tmp_path):
    fake = FakeWorker(_answer(0.5))
    cb = BayesGRPOCallback(every=2, stop=ImprovementStop(patience=5), worker=fake, warmup=False)
    tr = tiny_grpo.make_trainer(tmp_path / "out", max_steps=20, callbacks=[cb], save_strategy="steps", save_steps=10)
    tr.train()
    saved = json.loads((tmp_path / "out" / "checkpoint-20" / "trainer_state.json").read_text())
    st = saved["stateful_callbacks"]["BayesGRPOCallback"]
    # saved at step 20, before the end-of-training forecast
    assert st["args"]["stop"]["rule"] == "improvement" and 0 < st["attributes"]["_n_fits"] <= cb._n_fits
    # what Trainer does with restore_callback_states_from_checkpoint=True (ExportableState)
    back = BayesGRPOCallback.from_state(st)
    assert back._n_fits == st["attributes"]["_n_fits"] and back.stop.patience == 5 and back.latest["final_q50"] == 0.5
    # a plain resume: the new callback re-reads the rows logged before the checkpoint
    fake2 = FakeWorker(_answer(0.5))
    cb2 = BayesGRPOCallback(every=2, worker=fake2, warmup=False)
    tr2 = tiny_grpo.make_trainer(tmp_path / "out", max_steps=24, callbacks=[cb2], save_strategy="no")
    tr2.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-20"))
    assert tr2.state.global_step == 24
    reqs = [r for r in fake2.requests if r.get("kind") == "forecast"]
    assert reqs
    steps = sorted({r["step"] for r in reqs[-1]["rows"]})
    assert steps[0] == 1 and steps[-1] == 24 and len(steps) == 24


def test_run_config_from_a_grpo_config(tmp_path):
    from trl import GRPOConfig

    args = GRPOConfig(output_dir=str(tmp_path), max_steps=500, learning_rate=2e-6, adam_beta1=0.8, num_generations=4,
                      per_device_train_batch_size=8, gradient_accumulation_steps=2, steps_per_generation=4,
                      num_iterations=2, use_cpu=True, report_to="none")  # fmt: skip
    m = run_config_meta(args, world_size=1, max_steps=500)
    assert m["max_steps"] == 500 and m["learning_rate"] == 2e-6 and m["beta1"] == 0.8
    assert m["group_size"] == 4 and m["batch_size"] == 16 and m["prompts_per_step"] == 4
    assert m["refresh_interval"] == 4  # 4 micro-batches per generation x 2 iterations / 2 per optimizer step
    # defaults: one generation per optimizer step, used once
    d = run_config_meta(
        GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", per_device_train_batch_size=8)
    )
    assert d["refresh_interval"] == 1


def test_old_trl_key_names_none_values_and_rows_without_reward_map_through_the_project_mapping():
    from bayesgrpo.integrations._requests import _frame_from_rows

    old = [  # TRL <= 0.16 names
        {"step": 1, "loss": 0.1},  # logged between generations: no reward
        {
            "step": 2,
            "reward": 0.2,
            "rewards/acc": 0.2,
            "completion_length": 50.0,
            "frac_zero_reward_std": 0.5,
            "kl": None,
        },
        {"step": 2, "eval_reward": 0.3},  # the eval row of the same step
        {"step": 3, "reward": 0.3, "rewards/acc": 0.3, "completion_length": 48.0, "frac_zero_reward_std": 0.4},
    ]
    df = _frame_from_rows(old, "r")
    assert list(df["step"]) == [1, 2, 3]
    assert math.isnan(df.loc[0, "reward"]) and df.loc[1, "reward"] == 0.2
    assert df.loc[1, "eval/reward"] == 0.3 and df.loc[1, "reward_fn/acc"] == 0.2
    assert df.loc[1, "frac_reward_zero_std"] == 0.5 and df.loc[2, "completion_length"] == 48.0
    new = [
        {
            "step": 1,
            "reward": 0.3,
            "rewards/acc/mean": 0.3,
            "completions/mean_length": 48.0,
            "frac_reward_zero_std": 0.4,
        }
    ]
    dn = _frame_from_rows(new, "r")
    assert (
        dn.loc[0, "reward_fn/acc"] == 0.3
        and dn.loc[0, "completion_length"] == 48.0
        and dn.loc[0, "frac_reward_zero_std"] == 0.4
    )


# ------------------------------------------------------------------ issue 17.7: live channels
LIVE = {  # channel -> the key TRL 1.x logs it under
    "reward_std_batch": "reward_std",  # TRL >= 0.27 logs the batch std under "reward_std"
    "frac_reward_zero_std": "frac_reward_zero_std",
    "kl": "kl",
    "entropy": "entropy",
    "completion_length": "completions/mean_length",
    "frac_truncated": "completions/clipped_ratio",
    "clip_ratio": "clip_ratio/region_mean",
    "reward_fn/reward_has_x": "rewards/reward_has_x/mean",
}


def test_callback_and_watch_feed_the_channels_trl_logged(tmp_path):
    """A real GRPOTrainer (beta > 0, so TRL logs kl): the live RunSet of the callback and the one ``watch``
    reads from the run's checkpoint carry every channel with exactly the values in state.log_history."""
    import trl

    from bayesgrpo.integrations._requests import request_runs
    from bayesgrpo.integrations.watch import LogSource

    fake = FakeWorker(_answer(0.5))
    cb = BayesGRPOCallback(every=4, worker=fake, warmup=False, history=False)
    out = tmp_path / "out"
    tr = tiny_grpo.make_trainer(out, max_steps=12, callbacks=[cb], beta=0.04, save_strategy="steps", save_steps=12)
    tr.train()
    logged = {e["step"]: e for e in tr.state.log_history if "reward" in e}
    assert len(logged) == 12 and all(all(k in e for k in LIVE.values()) for e in logged.values())

    live = cb.runs
    rid = live.run_ids[0]
    assert live.channels(rid) == tuple(LIVE)  # and no "reward_std": TRL 1.x does not log the within-group mean
    assert live.meta.loc[rid, "trl_version"] == trl.__version__ and live.meta.loc[rid, "scale_rewards"] == "group"
    d = live.run(rid).set_index("step")
    for step, e in logged.items():
        for ch, key in LIVE.items():
            assert d.loc[step, ch] == e[key], (step, ch)
        assert d.loc[step, "reward"] == e["reward"]
    # the worker builds the same RunSet from the request it was sent (one mapping, both sides)
    last = [r for r in fake.requests if r.get("kind") == "forecast"][-1]
    sent = request_runs(last).run(rid).set_index("step")
    assert sent.loc[sent.index, list(LIVE)].equals(d.loc[sent.index, list(LIVE)])

    # watch follows the output folder: checkpoint-12/trainer_state.json + TRL's model card (README.md, "- TRL: x")
    assert f"- TRL: {trl.__version__}" in (out / "README.md").read_text()
    src = LogSource(out)
    assert src.poll() == 12
    w = src.frame().set_index("step")
    assert [c for c in LIVE if c in w.columns] == list(LIVE) and "reward_std" not in w.columns
    for step, e in logged.items():
        for ch, key in LIVE.items():
            assert w.loc[step, ch] == e[key], (step, ch)
