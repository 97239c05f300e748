"""Decision probabilities, their recalibration, the stop policy and its sequential backtest."""

from __future__ import annotations

import numpy as np
import pytest

from bayesgrpo.forecast.decision import (
    DecisionCalibration,
    gain_threshold,
    p_plateaued,
    prob_at_least,
)
from bayesgrpo.series import current_level
from bench.fit_layers import fit_decision_calibration


def _logit(p):
    return np.log(p) - np.log1p(-p)


def _sig(z):
    return 1.0 / (1.0 + np.exp(-z))


def test_current_level_is_the_mean_of_the_last_tenth_at_least_three_points():
    assert current_level(np.arange(100.0)) == pytest.approx(np.mean(np.arange(90.0, 100.0)))
    assert current_level([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(4.0)  # 10% of 5 -> at least 3
    assert current_level([np.nan, 2.0, 4.0]) == pytest.approx(3.0)  # fewer than 3 finite: all of them
    assert np.isnan(current_level([]))


def test_prob_at_least_and_the_gain_threshold():
    x = np.arange(100.0)
    assert prob_at_least(x, 90.0) == pytest.approx(0.10)
    assert prob_at_least(np.r_[x, np.nan], 0.0) == 1.0
    assert np.isnan(prob_at_least([np.nan], 0.0))
    assert gain_threshold(0.6, 0.4, 0.05) == pytest.approx(0.62)


def test_p_plateaued_counts_draws_that_realised_their_gain():
    from bayesgrpo.forecast.paths import exponential_draws

    d = exponential_draws(r0=np.zeros(4), r_star=np.ones(4), tau=np.full(4, 10.0), last_step=100, horizon=50)
    # latent_now of exp(-100/10) ~ 1: every draw has realised 95% of its gain
    assert p_plateaued(d, 0.95) == pytest.approx(1.0)
    import dataclasses

    half = dataclasses.replace(d, latent_now=np.array([0.5, 0.5, 0.99, 0.96]))
    assert p_plateaued(half, 0.95) == pytest.approx(0.5)


@pytest.mark.parametrize("method", ["platt", "beta", "isotonic"])
def test_a_known_miscalibration_is_recovered(method):
    """The model is overconfident (logit x 2) and too pessimistic early in the run (a shift that grows
    as the observed fraction falls); the fitted map returns the true probabilities."""
    rng = np.random.default_rng(0)
    n = 30_000
    p_true = rng.uniform(0.02, 0.98, n)
    f = rng.uniform(0.05, 0.95, n)
    y = (rng.uniform(size=n) < p_true).astype(float)
    p_model = _sig(2.0 * _logit(p_true) - 1.0 * (1.0 - f))
    cal = fit_decision_calibration(p_model, y, fraction=f, method=method, source=rng.integers(0, 10, n).astype(str))
    back = cal.apply(p_model, fraction=f)
    raw_err = np.mean(np.abs(p_model - p_true))
    err = np.mean(np.abs(back - p_true))
    assert raw_err > 0.08
    assert err < (0.02 if method == "platt" else 0.04), (method, err)
    # reliability of the recalibrated probabilities: every decile within 0.03 of the diagonal
    bins = np.minimum((back * 10).astype(int), 9)
    for b in np.unique(bins):
        m = bins == b
        if m.sum() > 300:
            assert abs(y[m].mean() - back[m].mean()) < 0.03


def test_a_calibrated_model_stays_calibrated_and_identity_changes_nothing():
    rng = np.random.default_rng(1)
    p = rng.uniform(0.01, 0.99, 20_000)
    y = (rng.uniform(size=p.size) < p).astype(float)
    cal = fit_decision_calibration(p, y, fraction=0.3, method="platt")
    a, b, c = cal.coef
    assert abs(a) < 0.1 and abs(b - 1.0) < 0.06 and abs(c) < 0.3
    ident = DecisionCalibration()
    np.testing.assert_array_equal(ident.apply(p, fraction=0.5), p)
    assert np.isnan(cal.apply(np.array([np.nan]), fraction=0.5)[0])


def test_calibration_round_trips_and_rejects_bad_shapes(tmp_path):
    rng = np.random.default_rng(2)
    p = rng.uniform(0, 1, 500)
    y = (rng.uniform(size=500) < p).astype(float)
    cal = fit_decision_calibration(p, y, fraction=rng.uniform(0, 1, 500), method="isotonic", name="t")
    cal.save(tmp_path / "c.json")
    back = DecisionCalibration.load(tmp_path / "c.json")
    assert back == cal and back.identity == cal.identity
    with pytest.raises(ValueError, match="needs 3 coefficients"):
        DecisionCalibration(method="platt", coef=(1.0,))
    with pytest.raises(ValueError, match="unknown decision calibration"):
        fit_decision_calibration(p, y, fraction=0.5, method="nope")
    with pytest.raises(ValueError, match="no finite case"):
        fit_decision_calibration([np.nan], [1.0], fraction=0.5)


# ----------------------------------------------------------------------------- the policy
def _policy(**kw):
    from bayesgrpo.decisions.stop import StopPolicy

    return StopPolicy(**{"threshold": 0.3, "patience": 2, "min_fraction": 0.1, "score_on": "p_gain", **kw})


def test_policy_answers_and_patience():
    pol = _policy()
    assert pol.advice(0.2, fraction=0.5) == "stop"
    assert pol.advice(0.3, fraction=0.5) == "continue"  # strictly below the threshold
    assert pol.advice(0.2, fraction=0.05) == "too early"
    assert pol.advice(float("nan"), fraction=0.5) == "too early"
    mon = pol.monitor()
    seq = [(0.2, 0.05), (0.2, 0.15), (0.5, 0.2), (0.1, 0.25), (0.1, 0.3), (0.9, 0.35)]
    answers, fired_at = [], None
    for k, (p, f) in enumerate(seq):
        answers.append(mon.update(p, fraction=f))
        if mon.fired and fired_at is None:
            fired_at = k
    assert answers == ["too early", "stop", "continue", "stop", "stop", "continue"]
    assert fired_at == 4 and mon.fired  # two consecutive stops (the continue in between reset the count)
    m2 = pol.monitor()
    m2.restore(mon.state())
    assert m2.fired and m2.count == 0


def test_policy_refuses_a_risk_no_threshold_met(monkeypatch):
    import bayesgrpo.decisions.stop as S

    thresholds = {"1": [[0.05, None], [0.1, 0.2, 0.08, 0.3], [0.2, 0.4, 0.18, 0.5]],
                  "2": [[0.05, 0.1, 0.04, 0.2], [0.1, 0.3, 0.09, 0.4]]}  # fmt: skip
    ship = {"patience": 2, "min_fraction": 0.1, "delta": 0.05, "delta_bad": 0.1, "thresholds": thresholds}
    monkeypatch.setattr(S, "shipped_policy", lambda kind="oscillator", delta=0.05: ship)
    assert S.StopPolicy(risk=0.1).threshold == pytest.approx(0.3) and S.StopPolicy(risk=0.1).patience == 2
    assert S.StopPolicy(risk=0.15, patience=1).threshold == pytest.approx(0.3)  # interpolated between risks
    assert S.StopPolicy(risk=0.15, patience=1).error_rate == pytest.approx(0.13)  # the risk table's, interpolated
    ship["measured"] = {"patience_2": {"risk": 0.1, "bad_stops": 0.07, "steps_saved": 0.3}}
    assert S.StopPolicy(risk=0.1).error_rate == pytest.approx(0.07)  # measured leave-one-source-out
    assert np.isnan(S.StopPolicy(threshold=0.2, patience=1, min_fraction=0.1).error_rate)  # explicit: unmeasured
    with pytest.raises(ValueError, match="below every measured operating point"):
        S.StopPolicy(risk=0.05, patience=1)
    with pytest.raises(ValueError, match=r"measured for delta_bad=0\.1"):
        S.StopPolicy(delta_bad=0.2)
    with pytest.raises(ValueError, match="no shipped threshold for patience 3"):
        S.StopPolicy(patience=3)


def test_add_advice_is_one_column_and_never_changes_the_input():
    import pandas as pd

    from bayesgrpo.decisions.stop import add_advice

    t = pd.DataFrame({"run_id": ["a", "b", "c", "d", "e"], "p_gain": [0.1, 0.8, 0.1, np.nan, 0.1],
                      "status": ["ok", "ok", "error", "ok", "ok"]})  # fmt: skip
    before = t.copy()
    nums = {r: {"p_gain": p, "fraction": 0.5} for r, p in zip(t["run_id"], t["p_gain"], strict=True)}
    nums.pop("e")  # no decision numbers: too early
    out = add_advice(t, _policy(), numbers=nums)
    # an error row is no forecast: no advice (a forecast without numbers is "too early")
    assert list(out["advice"]) == ["stop", "continue", "", "too early", "too early"]
    pd.testing.assert_frame_equal(t, before)
    early = {r: {**v, "fraction": 0.05} for r, v in nums.items()}
    assert list(add_advice(t, _policy(), numbers=early)["advice"]) == [
        "too early",
        "too early",
        "",
        "too early",
        "too early",
    ]
    # a forecast whose chains disagree (status "warning") is no basis for advice, whatever its p_gain says
    doubt = t.assign(status=["warning", "warning", "error", "ok", "ok"])
    assert list(add_advice(doubt, _policy(), numbers=nums)["advice"]) == ["uncertain", "uncertain", "", "too early",
                                                                          "too early"]  # fmt: skip


def _dec(seed=0, n_runs=40):
    """Decision cases of runs with a known outcome per checkpoint (synthetic, 10 checkpoints)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_runs):
        for m in ("a", "b"):
            for c in np.round(np.arange(0.1, 1.0, 0.1), 2):
                if rng.uniform() < 0.1:
                    continue  # a checkpoint the method could not forecast
                gain = rng.uniform(-0.05, 0.3) * (1 - c)
                p = float(np.clip(gain * 4 + rng.normal(0, 0.2), 0, 1))
                rows.append(dict(run_id=f"r{i}", source=f"s{i % 5}", method=m, cutoff=c, observed_until=int(c * 100),
                                 s0=0, horizon=100, fraction=c, gain=gain, p_gain=p))  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize("patience", [1, 2, 3])
def test_operating_curve_equals_the_sequential_backtest(patience):
    """The vectorised operating curve gives exactly the numbers of running the policy object through
    every run's checkpoints."""
    from bayesgrpo.evaluation.stop_rule import policy_backtest, summarize_stops
    from bench.stop_rule import operating_curve

    dec = _dec()
    for t in (0.05, 0.3, 0.6):
        pol = _policy(threshold=t, patience=patience, min_fraction=0.2)
        ref = policy_backtest(dec, pol, oracle=False)
        curve = operating_curve(dec, [t], patience=patience, min_fraction=0.2)
        for weighted in (False, True):
            a = summarize_stops(ref, weighted=weighted).set_index("method")
            b = curve[curve["weighting"] == ("source-weighted" if weighted else "per run")].set_index("method")
            for col in ("stopped", "steps_saved", "bad_stops", "reward_lost"):
                np.testing.assert_allclose(a[col], b.loc[a.index, col], atol=1e-12, err_msg=f"{col} t={t}")


def test_policy_backtest_scores_the_stop_and_the_oracle():
    import pandas as pd

    from bayesgrpo.evaluation.stop_rule import policy_backtest

    # a run whose gain ends at 0.3: stopping at 0.2 (p low twice) loses 0.25 of the range: a bad stop
    rows = [dict(run_id="r", source="s", method="m", cutoff=c, observed_until=int(c * 100), s0=0, horizon=100,
                 fraction=c, gain=g, p_gain=p)
            for c, g, p in ((0.1, 0.4, 0.1), (0.2, 0.25, 0.1), (0.3, 0.08, 0.9), (0.4, 0.02, 0.9))]  # fmt: skip
    stops = policy_backtest(pd.DataFrame(rows), _policy(patience=2, min_fraction=0.0)).set_index("method")
    assert stops.loc["m", "stop_cutoff"] == 0.2 and stops.loc["m", "steps_saved"] == pytest.approx(0.8)
    assert stops.loc["m", "reward_lost"] == pytest.approx(0.25) and stops.loc["m", "bad_stop"]
    # the oracle stops where the true remaining gain first falls below delta (0.05) of the range
    assert stops.loc["oracle", "stop_cutoff"] == 0.4 and not stops.loc["oracle", "bad_stop"]


def test_risk_thresholds_take_the_largest_threshold_that_met_the_risk():
    import pandas as pd

    from bench.stop_rule import risk_thresholds

    t = [0.05, 0.1, 0.2, 0.3, 0.4]
    curve = pd.DataFrame({"method": "m", "threshold": t * 2, "runs": 100,
                          "weighting": ["per run"] * 5 + ["source-weighted"] * 5,
                          "stopped": [0.02, 0.1, 0.2, 0.3, 0.4] * 2,
                          "bad_stops": [0.5, 0.0, 0.08, 0.12, 0.09, 0.5, 0.0, 0.05, 0.2, 0.3]})  # fmt: skip
    # 0.05 has 2 stops (one bad): too few to judge; 0.4 met 0.1 per run but 0.3 before it did not
    assert risk_thresholds(curve, [0.05, 0.1, 0.25], method="m") == [(0.05, 0.1), (0.1, 0.2), (0.25, 0.3)]
    assert risk_thresholds(curve, [0.05], method="m", min_stops=1) == [(0.05, float("nan"))] or np.isnan(
        risk_thresholds(curve, [0.05], method="m", min_stops=1)[0][1]
    )
    none = risk_thresholds(curve.assign(bad_stops=0.5), [0.1], method="m")
    assert np.isnan(none[0][1])


def test_reliability_and_scores():
    from bench.stop_rule import prob_scores, reliability

    rng = np.random.default_rng(3)
    p = rng.uniform(size=20_000)
    y = (rng.uniform(size=p.size) < p).astype(float)
    t = reliability(p, y)
    assert len(t) == 10 and t["gap"].abs().max() < 0.03 and t["n"].sum() == p.size
    s = prob_scores(p, y)
    assert s["brier"] == pytest.approx(1 / 6, abs=0.01)  # E[p(1 - p)] for p ~ U(0, 1)
    assert prob_scores(np.full(4, 0.5), np.array([0, 1, 0, 1.0]))["log"] == pytest.approx(np.log(2))


def _clustered(p, runs, rho, seed):
    """Outcomes calibrated to ``p`` with latent correlation ``rho`` inside a run (a Gaussian copula)."""
    from scipy.stats import norm

    rng = np.random.default_rng(seed)
    _, inv = np.unique(runs, return_inverse=True)
    z = np.sqrt(rho) * rng.standard_normal(inv.max() + 1)[inv] + np.sqrt(1 - rho) * rng.standard_normal(p.size)
    return (z < norm.ppf(p)).astype(float)


def test_reliability_noise_floor_tells_noise_from_miscalibration():
    """Many independent cases: a calibrated forecaster passes the +-0.07 check nearly always and is not
    flagged; the same probabilities 0.2 too high are (p-value 0). Few runs with many correlated
    checkpoints each: the copula's rho is recovered from the outcomes, and even exact calibration mostly
    fails the check (its median worst gap exceeds the band)."""
    from bench.stop_rule import reliability_noise_floor

    rng = np.random.default_rng(5)
    p = rng.uniform(0.02, 0.98, size=6000)
    ids = np.repeat(np.arange(2000), 3)  # 3 independent checkpoints per run
    y = (rng.uniform(size=p.size) < p).astype(float)
    big = reliability_noise_floor(p, y, ids, n_sim=100)
    assert big["pass_rate"] > 0.9 and big["p_value"] > 0.05 and big["rho"] < 0.1
    # a bias shared by every bin is miscalibration, not dependence: rho stays near 0, the p-value is its floor
    bad = reliability_noise_floor(np.clip(p + 0.2, 0, 0.99), y, ids, n_sim=100)
    assert bad["observed_worst_gap"] > 0.15 and bad["p_value"] == pytest.approx(1 / 101) and bad["rho"] < 0.1
    few_cases = reliability_noise_floor(p[:100], y[:100], ids[:100], n_sim=20)  # no bin of 30 cases
    assert np.isnan(few_cases["observed_worst_gap"]) and np.isnan(few_cases["p_value"])

    runs = np.repeat(np.arange(40), 20)  # 40 runs x 20 checkpoints, like the stop study
    p = rng.uniform(0.05, 0.95, size=runs.size)
    y = _clustered(p, runs, 0.6, seed=3)
    few = reliability_noise_floor(p, y, runs, n_sim=200)
    assert 0.35 < few["rho"] < 0.85
    assert few["pass_rate"] < 0.5 and few["median_worst_gap"] > 0.07
    assert few["pass_rate_independent"] > few["pass_rate"]
    assert few["p_value"] > 0.05  # calibrated: its own gap is typical of the noise


def test_the_shipped_policy_and_map_load_with_their_provenance():
    """The package data the study writes: StopPolicy() resolves its threshold, patience and start from it,
    and the p_gain map of each measured delta loads; an unmeasured delta is refused by name."""
    from bayesgrpo.decisions.stop import StopPolicy, shipped_policy
    from bayesgrpo.forecast.decision import DecisionCalibration, measured_deltas, shipped_decision

    assert 0.05 in measured_deltas("oscillator")
    entry = shipped_decision("oscillator", 0.05)
    assert entry["provenance"]["command"].startswith(".venv/bin/python bench/stop_study.py")
    # every development source the benchmark selects (devdata: 14 sources, 41 runs in the shipped study)
    assert entry["provenance"]["sources"] >= 12 and entry["provenance"]["runs"] >= 40
    pol = StopPolicy()
    assert 0.0 < pol.threshold < 1.0 and pol.patience >= 1 and 0.0 <= pol.min_fraction < 1.0
    ship = shipped_policy(pol.kind, 0.05)
    assert pol.kind == "auto" and pol.patience == ship["patience"]
    # a larger risk never stops less
    assert StopPolicy(risk=0.3).threshold >= StopPolicy(risk=0.15).threshold
    assert DecisionCalibration.default("oscillator", 0.05).method != "identity"
    with pytest.raises(ValueError, match="measured for delta"):
        StopPolicy(delta=0.07)
    # the score of one forecast's numbers is a probability
    nums = dict(p_gain=0.3, p_gain_raw=0.3, p_improve_raw=0.1, fraction=0.5, level_se=0.02, trend=0.5,
                logit_plateaued=0.0)  # fmt: skip
    s = float(np.asarray(pol.score(nums)))
    assert 0.0 <= s <= 1.0
    assert pol.advise(nums) in ("stop", "continue")
    assert pol.advise({**nums, "fraction": 0.0}) == "too early"


def test_policy_characteristic_on_a_users_own_runs():
    """backtest's operating characteristic: the policy through each run's checkpoints, against the oracle."""
    import pandas as pd

    from bayesgrpo.evaluation.stop_rule import policy_characteristic
    from bayesgrpo.forecast.decision import DecisionCalibration
    from bayesgrpo.schema import RunSet

    steps = np.arange(0, 101)
    flat = pd.DataFrame({"run_id": "flat", "step": steps, "reward": 0.5})
    rise = pd.DataFrame({"run_id": "rise", "step": steps, "reward": np.where(steps < 60, 0.1, 0.9)})
    meta = pd.DataFrame({"run_id": ["flat", "rise"], "source_repo": ["a", "b"]})
    runs = RunSet.from_frames(pd.concat([flat, rise]), meta)
    rows = []
    for rid, truth, rng in (("flat", 0.5, 0.1), ("rise", 0.9, 0.8)):
        for c in (0.1, 0.2, 0.3):
            v = 0.5 if rid == "flat" else 0.1  # the method foresees no gain for either run
            rows.append(dict(run_id=rid, source=rid, cutoff=c, method="bayesgrpo", ok=True,
                             observed_until=int(c * 100), s0=0, horizon=100, truth=truth, range=rng,
                             **{f"q{k:02d}": v for k in (5, 10, 25, 50, 75, 90, 95)}))  # fmt: skip
    pol = _policy(threshold=0.5, patience=2, min_fraction=0.1)
    stops, summary = policy_characteristic(pd.DataFrame(rows), runs, pol, calibration=DecisionCalibration())
    s = stops.set_index(["run_id", "method"])
    assert s.loc[("flat", "bayesgrpo"), "stop_cutoff"] == 0.2  # patience 2: the second checkpoint
    assert s.loc[("rise", "bayesgrpo"), "bad_stop"] and not s.loc[("rise", "oracle"), "stopped"]
    per_run = summary[summary["weighting"] == "per run"].set_index("method")
    assert per_run.loc["bayesgrpo", "bad_stops"] == pytest.approx(0.5)
    assert per_run.loc["bayesgrpo", "steps_saved"] == pytest.approx(0.8)


def test_sweep_stop_table_says_what_stopping_saves_and_costs():
    from bayesgrpo.decisions.stop import sweep_stop_table

    rng = np.random.default_rng(0)
    runs = [dict(run_id="a", advice="stop", last_step=100, horizon=400, level=0.5, scale=0.5,
                 final_draws=0.5 + 0.05 * rng.standard_normal(2000)),
            dict(run_id="b", advice="continue", last_step=300, horizon=400, level=0.2, scale=1.0,
                 final_draws=0.6 + 0.05 * rng.standard_normal(2000)),
            dict(run_id="c", advice="too early", last_step=10, horizon=400, level=0.1, scale=1.0,
                 final_draws=np.full(2000, 0.3))]  # fmt: skip
    table, summary = sweep_stop_table(runs)
    assert summary["stopped"] == 1
    assert summary["share_of_remaining_steps_saved"] == pytest.approx(300 / (300 + 100 + 390))
    a = table.set_index("run_id").loc["a"]
    assert a["lost_mean"] == pytest.approx(0.0, abs=0.01) and a["lost_lo"] < 0 < a["lost_hi"]
    assert a["lost_hi"] - a["lost_lo"] == pytest.approx(2 * 1.645 * 0.05, rel=0.1)
    assert np.isnan(table.set_index("run_id").loc["b", "lost_mean"])  # only stopped runs lose anything
    assert summary["lost_scale_lo"] < summary["lost_scale_mean"] < summary["lost_scale_hi"]


def test_p_gain_in_the_forecast_table_is_the_decision_layers(mock_sampler):
    """The table's p_gain is decision_probabilities' (mocked sampling): P(final >= level + delta x scale)
    recalibrated by the fit's map; a run far below its plateau has a gain to come, a run at it has none."""
    import pandas as pd

    from bayesgrpo.forecast.decision import DecisionCalibration, decision_probabilities
    from bayesgrpo.forecast.forecaster import Forecaster, SamplerConfig
    from bayesgrpo.schema import RunSet

    steps = np.arange(1, 121)
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"run_id": "r", "step": steps, "reward": 0.1 + 0.6 * (1 - np.exp(-steps / 60.0))
                       + 0.02 * rng.standard_normal(steps.size)})  # fmt: skip
    runs = RunSet.from_frames(df, pd.DataFrame({"run_id": ["r"], "max_steps": [400], "beta1": [0.9]}))
    smp = SamplerConfig(draws=200, tune=10, chains=2, seed=3)
    fit = Forecaster(sampler=smp, decision=False).fit(runs)
    row = fit.table().iloc[0]
    nums = decision_probabilities(fit, "r")
    assert row["p_gain"] == pytest.approx(nums["p_gain"]) and nums["p_gain"] == nums["p_gain_raw"]  # identity map
    # the mocked posterior's plateau lies far above the current level: every draw of the run's own gains; the
    # packaged outlook moves its share w of the draws to the population's changes (120 of 400 steps observed)
    w = fit.config.outlook.at(120 / 400)[0]
    assert 0.0 < w < 0.5 and nums["p_gain"] > 1.0 - w + 0.05
    assert nums["level"] == pytest.approx(df["reward"].iloc[-12:].mean())
    # a recalibration map is applied to it (here one that halves every logit's odds)
    cal = DecisionCalibration(method="platt", coef=(-np.log(2.0), 1.0, 0.0), name="t")
    half = Forecaster(sampler=smp, decision=cal).fit(runs).table().iloc[0]["p_gain"]
    p = nums["p_gain_raw"]
    assert half == pytest.approx(min(p, 0.999) / (min(p, 0.999) + 2 * (1 - min(p, 0.999))), rel=1e-6)


@pytest.mark.parametrize("n_panels", [1, 2, 6])
def test_reliability_figure_title_stays_inside_the_figure(n_panels):
    """A long title is wrapped to the figure's width: rendered, it lies inside the figure (it was cut off)."""
    import io

    from bench.plots_stop import reliability_figure

    rng = np.random.default_rng(0)
    p = rng.random(400)
    panels = {f"panel {k}": (p, (rng.random(400) < p).astype(float)) for k in range(n_panels)}
    title = "p_gain = P(final >= level + 0.05 x scale), leave-one-source-out recalibrated (p_gain:platt); " * 2
    fig = reliability_figure(panels, title=title.strip())
    fig.savefig(io.BytesIO(), format="png")  # lays the figure out
    (sup,) = [t for t in fig.texts if t.get_text() == fig.get_suptitle()]
    box = sup.get_window_extent()
    assert "\n" in sup.get_text() and box.x0 >= 0 and box.x1 <= fig.bbox.x1
