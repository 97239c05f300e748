"""A cost in money (issue 32): the steps an hour runs (given, or read from the step times a log records), a cost
per hour or per GPU-hour, and what stopping saves in hours and currency with its 90% interval -- through
``budget`` and ``report`` as a user runs them, and the functions underneath."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from bayesgrpo.cli import app
from bayesgrpo.decisions.budget import Costs, budget_table
from bayesgrpo.decisions.stop import sweep_stop_table
from bayesgrpo.forecast.paths import exponential_draws
from bayesgrpo.plan import logged_steps_per_hour

runner = CliRunner()


def test_steps_per_hour_from_the_times_a_log_records():
    s = np.arange(1, 41)
    df = pd.DataFrame({"step": s, "timing_s/step": np.r_[np.full(39, 36.0), 900.0]})  # one slow checkpoint step
    assert logged_steps_per_hour(df) == (100.0, "timing_s/step")
    df = pd.DataFrame({"step": s * 10, "step_time": 18.0})
    assert logged_steps_per_hour(df) == (200.0, "step_time")
    # elapsed seconds, every 10 steps, with a restart that resets the clock after step 200
    el = np.where(s <= 20, s * 10 * 72.0, (s - 20) * 10 * 72.0)
    assert logged_steps_per_hour(pd.DataFrame({"step": s * 10, "elapsed_seconds": el})) == (
        pytest.approx(50.0),
        "elapsed_seconds",
    )
    assert logged_steps_per_hour(pd.DataFrame({"step": s, "reward": 0.1})) is None


def test_costs_per_gpu_hour_and_their_checks():
    c = Costs(cost_per_gpu_hour=2.5, gpus=8, steps_per_hour=100.0)
    assert c.hourly == 20.0 and c.per_step == pytest.approx(0.2)
    assert Costs(cost_per_gpu_hour=3.0, steps_per_hour=10.0).hourly == 3.0  # one GPU by default
    for bad, msg in [(dict(cost_per_hour=1.0, cost_per_gpu_hour=1.0, steps_per_hour=1.0), "not both"),
                     (dict(gpus=4), "gpus needs cost_per_gpu_hour"),
                     (dict(cost_per_gpu_hour=1.0), "cost_per_gpu_hour needs steps_per_hour"),
                     (dict(cost_per_step=1.0, cost_per_gpu_hour=2.0, gpus=2, steps_per_hour=1.0), "contradicts")]:  # fmt: skip
        with pytest.raises(ValueError, match=msg):
            Costs(**bad)


def test_savings_in_hours_and_money_with_their_90_percent_interval():
    rng = np.random.default_rng(0)
    draws = exponential_draws("r", r0=0.0, r_star=1.0, tau=rng.uniform(30, 90, 400), last_step=0, horizon=500)
    rec = budget_table(draws, max_steps=500, cost_per_gpu_hour=2.5, gpus=8, steps_per_hour=100.0, currency="USD",
                       value_per_reward=100.0).attrs["recommendation"]  # fmt: skip
    # the recommended stop: steps -> hours at 100 steps/h -> money at 20 USD/h
    assert rec.hours_saved == pytest.approx(rec.steps_saved / 100.0)
    assert rec.cost_saved == pytest.approx(rec.hours_saved * 20.0)
    # the interval: what stopping at each draw's own best step (its expected-utility optimum) saves
    per_step = 20.0 / 100.0
    util = 100.0 * draws.latent - per_step * (draws.steps - draws.last_step)[None, :]
    best = np.r_[draws.last_step, draws.steps][np.argmax(np.c_[100.0 * draws.latent_now, util], axis=1)]
    lo, hi = np.quantile(500 - best, [0.05, 0.95])
    assert (rec.steps_saved_q05, rec.steps_saved_q95) == pytest.approx((lo, hi))
    assert lo < hi and (rec.hours_saved_q05, rec.hours_saved_q95) == pytest.approx((lo / 100, hi / 100))
    assert (rec.cost_saved_q05, rec.cost_saved_q95) == pytest.approx((lo * per_step, hi * per_step))
    text = rec.summary()
    assert "USD" in text and f"{rec.hours_saved:.3g} h [90%: {lo / 100:.3g}-{hi / 100:.3g}]" in text
    # without a cost the draws' best stops are their stop steps (the interval in steps and hours, no money)
    rec = budget_table(draws, max_steps=500, steps_per_hour=100.0).attrs["recommendation"]
    stop = np.where(draws.stop_reached, draws.stop_step, draws.steps[-1])
    assert (rec.steps_saved_q05, rec.steps_saved_q95) == pytest.approx(tuple(np.quantile(500 - stop, [0.05, 0.95])))
    assert rec.cost_saved is None and rec.cost_saved_q05 is None
    # a run whose draws settled before its last observation: each can stop now, which saves the steps left, no more
    late = exponential_draws("r", r0=0.0, r_star=1.0, tau=rng.uniform(5, 15, 400), last_step=300, horizon=500)
    rec = budget_table(late, max_steps=500).attrs["recommendation"]
    assert rec.step == 300 and rec.steps_saved == 200
    assert rec.steps_saved_q05 <= rec.steps_saved <= rec.steps_saved_q95 <= 200
    assert any("settled by step" in n and "stop advice" in n for n in rec.notes)


def test_a_sweep_says_the_hours_and_money_stopping_now_saves():
    d = np.linspace(0.4, 0.6, 50)
    runs = [dict(run_id="a", advice="stop", last_step=100, horizon=300, level=0.5, scale=1.0, final_draws=d,
                 steps_per_hour=50.0),
            dict(run_id="b", advice="stop", last_step=200, horizon=300, level=0.5, scale=1.0, final_draws=d,
                 steps_per_hour=20.0),
            dict(run_id="c", advice="continue", last_step=10, horizon=300, level=0.5, scale=1.0, final_draws=d)]  # fmt: skip
    _, summ = sweep_stop_table(runs, cost_per_hour=20.0)
    assert summ["hours_saved"] == pytest.approx(200 / 50 + 100 / 20) and summ["cost_saved"] == pytest.approx(180.0)
    _, summ = sweep_stop_table([{**runs[0], "steps_per_hour": None}, runs[2]])
    assert "hours_saved" not in summ  # a stopped run without a rate: no hours claimed


def _verl_log(path, *, timing=True, n=60):
    with path.open("w") as f:
        for s in range(1, n + 1):
            data = {"critic/score/mean": 0.8 - 0.7 * np.exp(-s / 15)}
            if timing:
                data["timing_s/step"] = 36.0  # 100 steps per hour
            f.write(json.dumps({"step": s, "data": data}) + "\n")
    return path


def test_budget_cli_reads_the_rate_from_the_log_and_says_what_stopping_saves(tmp_path, mock_sampler):
    log = _verl_log(tmp_path / "grpo.jsonl")
    out = tmp_path / "budget.csv"
    res = runner.invoke(app, ["budget", str(log), "--horizon", "400", "--cost-per-gpu-hour", "2.5", "--gpus", "8",
                              "--currency", "USD", "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "100 steps per hour, from the logged timing_s/step" in res.output
    t = pd.read_csv(out).iloc[0]
    assert t["hours_saved"] == pytest.approx(t["steps_saved"] / 100.0)
    assert t["cost_saved"] == pytest.approx(t["hours_saved"] * 20.0) and t["currency"] == "USD"
    assert t["hours_saved_q05"] == pytest.approx(t["steps_saved_q05"] / 100.0)
    assert (
        t["cost_saved_q95"] == pytest.approx(t["steps_saved_q95"] * 0.2)
        and t["steps_saved_q05"] <= t["steps_saved_q95"]
    )
    assert "USD" in res.output and "[90%:" in res.output
    # --steps-per-hour wins over the log's times
    res = runner.invoke(app, ["budget", str(log), "--horizon", "400", "--cost-per-hour", "10", "--steps-per-hour",
                              "50", "--out", str(out)])  # fmt: skip
    t = pd.read_csv(out).iloc[0]
    assert res.exit_code == 0 and t["hours_saved"] == pytest.approx(t["steps_saved"] / 50.0)


def test_budget_cli_needs_a_rate_for_an_hourly_cost_before_sampling(tmp_path, mock_sampler):
    log = _verl_log(tmp_path / "grpo.jsonl", timing=False)
    res = runner.invoke(app, ["budget", str(log), "--horizon", "400", "--cost-per-gpu-hour", "2.5"])
    assert (
        res.exit_code == 2 and "--cost-per-gpu-hour needs --steps-per-hour: run 'grpo' logs no step times" in res.output
    )
    res = runner.invoke(app, ["budget", str(log), "--horizon", "400", "--gpus", "4"])
    assert res.exit_code == 2 and "--gpus needs --cost-per-gpu-hour" in res.output
    assert not mock_sampler["calls"]


def test_report_cli_says_what_stopping_saves_in_hours_and_money(tmp_path, mock_sampler):
    log = _verl_log(tmp_path / "grpo.jsonl")
    page = tmp_path / "r.html"
    res = runner.invoke(app, ["report", str(log), "--horizon", "400", "--cost-per-gpu-hour", "2.5", "--gpus", "8",
                              "--currency", "EUR", "--out", str(page)])  # fmt: skip
    assert res.exit_code == 0, res.output
    html = page.read_text(encoding="utf-8")
    assert "h [90%:" in html and "EUR " in html  # the budget's caption: hours and money with their interval
    assert "from each run&#x27;s logged step times" in html or "from each run's logged step times" in html
