"""The stop policy in the front ends (issue 18 items 3-5), driven through the CLI as a user would:
``forecast``'s p_gain / advice columns, ``budget`` over a sweep, ``backtest``'s operating characteristic,
and the options checked before any sampling (sampling mocked except where marked slow)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from bayesgrpo.cli import app

runner = CliRunner()
DATA = Path(__file__).parent / "data"


def invoke(*args):
    res = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in res.output, res.output
    return res


def write_runs(tmp_path, n=60):
    """Two runs: one still climbing steeply, one flat from the start."""
    rng = np.random.default_rng(0)
    s = np.arange(1, n + 1)
    rise = 0.1 + 0.8 * s / (2 * n) + 0.01 * rng.standard_normal(n)
    flat = 0.5 + 0.01 * rng.standard_normal(n)
    df = pd.concat([pd.DataFrame({"run_id": "rise", "step": s, "reward": rise}),
                    pd.DataFrame({"run_id": "flat", "step": s, "reward": flat})])  # fmt: skip
    p = tmp_path / "runs.csv"
    df.to_csv(p, index=False)
    return p


def test_the_defaults_are_defined_once():
    """DEFAULT_KIND, DEFAULT_DELTA and DEFAULT_RISK are assigned in bayesgrpo/conventions.py only (every front end
    imports them), and the CLI's options use them."""
    import ast

    from bayesgrpo import conventions
    from bayesgrpo.cli import options

    pkg = Path(conventions.__file__).parent
    where = {}
    for f in pkg.rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(t, ast.Name) and t.id in ("DEFAULT_KIND", "DEFAULT_DELTA", "DEFAULT_RISK"):
                        where.setdefault(t.id, []).append(str(f.relative_to(pkg)))
    assert where == {k: ["conventions.py"] for k in ("DEFAULT_KIND", "DEFAULT_DELTA", "DEFAULT_RISK")}, where
    assert options.OPTIONS["risk"][1] == conventions.DEFAULT_RISK
    assert options.OPTIONS["delta"][1] == conventions.DEFAULT_DELTA


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--risk", "0"], ["--risk must lie in (0, 1)"]),
        (["--risk", "1.5"], ["--risk must lie in (0, 1)"]),
        (["--risk", "0.01"], ["--risk 0.01", "below every measured operating point"]),
        (["--delta", "0.07"], ["--delta 0.07", "measured for delta 0.05 only"]),
        (["--delta", "-1"], ["--delta must be > 0"]),
    ],
)
@pytest.mark.parametrize("verb", ["forecast", "budget", "backtest"])
def test_risk_and_delta_checked_before_sampling(tmp_path, mock_sampler, verb, args, needles):
    p = write_runs(tmp_path)
    extra = ["--horizon", 200] if verb != "backtest" else ["--out-dir", tmp_path / "bt"]
    res = invoke(verb, p, *extra, *args)
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, res.output
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert not mock_sampler["calls"]


def test_forecast_table_carries_p_gain_and_advice(tmp_path, mock_sampler):
    """The table's advice is the policy's answer to the table's own p_gain: 'stop' exactly where p_gain is
    below the shipped threshold (patience 1), with the measured error rate on those rows only."""
    from bayesgrpo.decisions.stop import StopPolicy

    p = write_runs(tmp_path)
    mock_sampler["spread"] = 0.05
    res = invoke("forecast", p, "--horizon", 200, "--out", tmp_path / "t.csv")
    assert res.exit_code == 0, res.output
    assert "P(gain)" in res.output and "advice" in res.output
    t = pd.read_csv(tmp_path / "t.csv")
    assert {"p_gain", "advice", "advice_error_rate"} <= set(t.columns)
    pol = StopPolicy()
    assert t["p_gain"].between(0, 1).all()
    # the fit's p_gain is the shipped policy's score input only when the policy thresholds p_gain itself;
    # either way every ok row gets one of the three answers, and 'stop' rows carry the measured rate
    assert set(t["advice"]) <= {"stop", "continue", "too early", "uncertain"}
    stop = t["advice"] == "stop"
    assert np.allclose(t.loc[stop, "advice_error_rate"], pol.error_rate)
    assert t.loc[~stop, "advice_error_rate"].isna().all()
    # measured on the locked test at the shipped risk: the share, its count of stops and where
    assert 0 <= pol.error_rate <= 1 and " stops were bad (" in pol.measured and "locked test" in pol.measured
    assert pol.measured in res.output


def test_forecast_advice_too_early_before_the_policys_start(tmp_path, mock_sampler):
    """Before min_fraction of the run is seen, the answer is 'too early' whatever the probability."""
    from bayesgrpo.decisions.stop import StopPolicy

    p = write_runs(tmp_path, n=60)
    horizon = int(60 / (StopPolicy().min_fraction * 0.5))  # 60 logged steps = half the policy's start
    res = invoke("forecast", p, "--horizon", horizon, "--out", tmp_path / "t.csv")
    assert res.exit_code == 0, res.output
    assert (pd.read_csv(tmp_path / "t.csv")["advice"] == "too early").all()


def test_forecast_other_kinds_get_p_gain_without_advice(tmp_path, mock_sampler, monkeypatch):
    monkeypatch.setattr("bayesgrpo.forecast.decision.measured_deltas", lambda kind="oscillator": ())
    p = write_runs(tmp_path)
    res = invoke("forecast", p, "--horizon", 200, "--out", tmp_path / "t.csv")
    assert res.exit_code == 0, res.output
    assert "measured for kinds auto and oscillator only" in res.output and "--risk has no effect" in res.output
    t = pd.read_csv(tmp_path / "t.csv")
    assert t["p_gain"].between(0, 1).all()  # the raw p_gain is there
    assert t["advice"].isna().all() and t["advice_error_rate"].isna().all()  # and no advice
    assert "P(gain)" in res.output


def test_budget_over_a_sweep_says_which_runs_to_stop(tmp_path, mock_sampler):
    p = write_runs(tmp_path)
    mock_sampler["spread"] = 0.05
    res = invoke("budget", p, "--horizon", 200, "--out", tmp_path / "b.csv")
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.output.splitlines() if ln.startswith("sweep: stop "))
    t = pd.read_csv(tmp_path / "b.csv")
    assert {"advice", "p_gain", "remaining_steps", "lost_mean", "lost_lo", "lost_hi"} <= set(t.columns)
    stopped = t["advice"] == "stop"
    assert f"sweep: stop {int(stopped.sum())} of 2 run(s) now" in line
    share = t.loc[stopped, "remaining_steps"].sum() / t["remaining_steps"].sum()
    assert f"saves {share:.0%} of the sweep's remaining steps" in line
    assert (t["remaining_steps"] == 140).all()  # horizon 200, last step 60
    assert t.loc[stopped, "lost_lo"].le(t.loc[stopped, "lost_mean"]).all()
    assert t.loc[~stopped, "lost_mean"].isna().all()


@pytest.mark.parametrize("forced", ["stop", "continue"])
def test_budget_says_where_its_stop_step_and_the_policy_disagree(tmp_path, mock_sampler, monkeypatch, forced):
    """The budget's stop step lies ahead for both runs (they are far from settled); a policy that says 'stop'
    disagrees and each run gets one line naming it and both answers; one that says 'continue' agrees: no line."""
    from bayesgrpo.decisions.stop import StopPolicy

    monkeypatch.setattr(StopPolicy, "advise", lambda self, numbers, status="ok": forced)
    p = write_runs(tmp_path)
    mock_sampler["spread"] = 0.05
    res = invoke("budget", p, "--horizon", 200, "--out", tmp_path / "b.csv")
    assert res.exit_code == 0, res.output
    t = pd.read_csv(tmp_path / "b.csv")
    assert (t["step"] > 60).all() and (t["advice"] == forced).all()  # the budget stops later than now
    out = " ".join(res.output.split())  # rich folds long lines
    for r in t.itertuples():
        line = f"{r.run_id}: the budget says stop at step {int(r.step)} ({r.rule}), the stop policy says stop"
        assert (line in out) == (forced == "stop"), out


@pytest.mark.slow
def test_backtest_prints_the_policys_operating_characteristic(tmp_path):
    """Real sampling on the six grpo_small runs: the policy's stops at the cutoffs, against the oracle,
    written per run; the oracle saves at least what the policy saves without a bad stop."""
    small = DATA / "grpo_small"
    out = tmp_path / "bt"
    res = invoke("backtest", small / "runs.csv", "--meta", small / "meta.csv", "--peers", "none", "--cutoffs",
                 "0.2,0.4,0.6", "--draws", 200, "--tune", 200, "--out-dir", out)  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "stop policy on these runs" in res.output
    stops = pd.read_csv(out / "stop_policy.csv")
    assert set(stops["method"]) == {"bayesgrpo", "oracle"} and stops["run_id"].nunique() == 6
    assert stops["steps_saved"].between(0, 1).all()
    assert stops.loc[~stops["stopped"].astype(bool), "steps_saved"].eq(0).all()
    assert (out / "draws.npz").exists()


# ----------------------------------------------------------------------------- the live front ends
def test_policy_stop_reads_the_workers_answer_and_its_patience():
    """The callback's rule: 'stop' only on the policy's own answer, with the patience the worker reports;
    a StopPolicy or a dict spec becomes it (the training process never loads the decision layer)."""
    from bayesgrpo.decisions.stop import StopPolicy
    from bayesgrpo.integrations.stops import PolicyStop, _stop_rule

    rule = PolicyStop(risk=0.1, delta=0.05)
    assert rule.request() == {"policy": {"risk": 0.1, "delta": 0.05}}
    assert rule.check({"advice": "continue", "p_gain": 0.6, "policy_patience": 2, "observed_until": 50}) is None
    assert rule.patience == 2
    why = rule.check({"advice": "stop", "p_gain": 0.12, "advice_error_rate": 0.062, "policy_patience": 2,
                      "observed_until": 60})  # fmt: skip
    assert why == "stop policy (risk 0.1): P(gain) 0.12 says stop (measured: 6% of its stops were bad)"
    assert rule.check({"advice": "too early", "observed_until": 5}) is None
    pol = StopPolicy(risk=0.2)
    r2 = _stop_rule(pol)
    assert isinstance(r2, PolicyStop) and (r2.risk, r2.delta, r2.patience) == (0.2, 0.05, pol.patience)
    assert isinstance(_stop_rule({"rule": "policy", "risk": 0.15}), PolicyStop)
    with pytest.raises(ValueError, match="risk must be in"):
        PolicyStop(risk=1.5)


@pytest.mark.parametrize("chain_shift", [0.0, 0.5])  # healthy chains; chains that disagree (status warning)
def test_worker_answer_equals_the_forecast_tables_advice(tmp_path, mock_sampler, chain_shift):
    """What the live worker answers for one run is what `forecast` writes in its table for the same run -- for a fit
    in doubt too (both ``uncertain``)."""
    from bayesgrpo.decisions.stop import StopPolicy, advise_fit
    from bayesgrpo.forecast import Forecaster, SamplerConfig
    from bayesgrpo.forecast.batch import forecast_batch
    from bayesgrpo.integrations._serve import policy_answer
    from bayesgrpo.io import read_runs

    mock_sampler["spread"] = 0.05
    mock_sampler["chain_shift"] = chain_shift
    runs = read_runs(write_runs(tmp_path))
    res = forecast_batch(runs, forecaster=Forecaster(sampler=SamplerConfig(draws=50, tune=20)), horizon=200)
    table, nums = advise_fit(res.table, res.fit, StopPolicy(risk=0.2))
    for rid in res.fit.forecast_ids:
        ans = policy_answer(res.fit, rid, {"risk": 0.2, "delta": 0.05})
        row = table.set_index("run_id").loc[rid]
        assert ans["advice"] == row["advice"] and ans["p_gain"] == pytest.approx(nums[rid]["p_gain"])
        assert (ans["advice"] == "uncertain") == (row["status"] == "warning") == (chain_shift > 0), (ans, row)
        assert ans["policy_patience"] == StopPolicy().patience


def test_watch_stop_shows_the_advice_on_every_forecast(tmp_path, monkeypatch, mock_sampler):
    import sys as _sys

    import bayesgrpo.integrations.watch as W

    _sys.path.insert(0, str(Path(__file__).resolve().parent))
    from inprocess_worker import InProcessWorker

    InProcessWorker.instances = []
    monkeypatch.setattr(W, "ForecastWorker", InProcessWorker)
    s = np.arange(1, 41)
    p = tmp_path / "metrics.csv"
    pd.DataFrame({"step": s, "reward": 0.2 + 0.5 * (1 - np.exp(-s / 30.0))}).to_csv(p, index=False)
    res = runner.invoke(app, ["watch", str(p), "--horizon", "300", "--stop", "--interval", "0.05",
                              "--idle-timeout", "0.4"])  # fmt: skip
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("step ")]
    assert lines and all(" advice " in ln and "P(gain) " in ln for ln in lines), lines
    from bayesgrpo.decisions.stop import StopPolicy

    assert f"stop policy: {StopPolicy().describe()}" in res.output
    bad = runner.invoke(app, ["watch", str(p), "--stop", "--risk", "0.01"])
    assert bad.exit_code == 2 and "below every measured operating point" in bad.output, bad.output


@pytest.mark.slow
def test_the_guides_slow_start_example_is_never_told_to_stop(tmp_path):
    """Issue 33 item 14: the shipped verl slow-start run (a 0/1 score at its floor for ~80 steps, then a rise to
    ~0.56) read at 10 / 20 / 30% of its 400 steps by the default forecast (real sampling): no `stop` (each
    would have lost 15-30% of the run's range)."""
    ex = Path(__file__).resolve().parents[1] / "bayesgrpo" / "resources" / "examples" / "verl-slow-start" / "grpo.jsonl"
    for until in (40, 80, 120):
        out = tmp_path / f"t{until}.csv"
        res = invoke("forecast", ex, "--until-step", until, "--horizon", 400, "--reward-range", "0,1", "--out", out)
        assert res.exit_code == 0, res.output
        row = pd.read_csv(out).iloc[0]
        assert row["status"] == "ok" and row["advice"] in ("too early", "continue"), (until, row.to_dict())
