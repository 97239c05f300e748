"""Decision logic (bayesgrpo.decisions) on cases with answers computed by hand."""

import math

import numpy as np
import pytest

from bayesgrpo.decisions.budget import (
    EPOCH_RULE_FRACTION,
    PathDraws,
    StopRecommendation,
    budget_table,
    exponential_draws,
    recommend_stop,
)
from bayesgrpo.plots.budget import plot_budget

TAU = 50.0


def det(**kw):
    """One deterministic draw of R(t) = 1 - exp(-t/50) from step 1 to 500 (last observed step 0)."""
    args = dict(r0=0.0, r_star=1.0, tau=TAU, last_step=0, horizon=500, include_now=True)
    args.update(kw)
    return exponential_draws("run", **args)


def R(s):
    return 1.0 - math.exp(-s / TAU)


def test_expected_value_optimum_matches_hand_calculation():
    c = 0.002
    # continuous optimum: dR/ds = exp(-s/tau)/tau = c  ->  s* = tau ln(1/(c tau)) = 50 ln 10 = 115.13
    s_cont = TAU * math.log(1.0 / (c * TAU))
    grid = np.arange(0, 501)
    s_disc = int(grid[np.argmax([R(s) - c * s for s in grid])])
    assert abs(s_disc - s_cont) < 1
    rec = recommend_stop(det(), cost_per_step=c)
    assert isinstance(rec, StopRecommendation)
    assert rec.step == s_disc == 115
    assert rec.rule == "expected utility"
    assert rec.p_best == 1.0 and rec.expected_regret == pytest.approx(0.0, abs=1e-12)
    assert rec.expected_reward == pytest.approx(R(115))
    assert rec.expected_utility == pytest.approx(R(115) - c * 115)


def test_value_per_reward_scales_the_optimum_and_cost_per_hour_is_equivalent():
    # value 10 per reward unit, cost 0.02 per step  <=>  same optimum as value 1, cost 0.002
    a = recommend_stop(det(), value_per_reward=10.0, cost_per_step=0.02)
    b = recommend_stop(det(), value_per_reward=10.0, cost_per_hour=2.0, steps_per_hour=100.0)
    assert a.step == b.step == 115
    with pytest.raises(ValueError):
        budget_table(det(), cost_per_hour=1.0)  # no rate
    with pytest.raises(ValueError):
        budget_table(det(), cost_per_step=1.0, cost_per_hour=5.0, steps_per_hour=1.0)


def test_huge_cost_means_stop_now():
    rec = recommend_stop(det(), cost_per_step=1.0)
    assert rec.step == 0  # the "stop now" candidate from latent_now


def test_p_target_zero_one_half():
    # deterministic path crosses 0.5 at tau ln 2 = 34.66 -> P = 0 at step 34, 1 from step 35
    t = budget_table(det(), target=0.5).set_index("step")
    assert t.loc[34, "p_target"] == 0.0 and t.loc[35, "p_target"] == 1.0
    assert t.loc[500, "p_target"] == 1.0
    # target above the plateau: never
    t = budget_table(det(), target=1.2)
    assert (t["p_target"] == 0).all()
    # two draws, plateaus 1.0 and 0.3: exactly one reaches 0.5
    two = exponential_draws("run", r0=[0.0, 0.0], r_star=[1.0, 0.3], tau=[TAU, TAU], last_step=0, horizon=500)
    t = budget_table(two, target=0.5)
    assert t["p_target"].iloc[-1] == 0.5
    assert t["p_target"].is_monotonic_increasing  # first passage never decreases


def test_first_passage_counts_earlier_steps():
    # an overshooting path: above target only between steps 3 and 5, then back below
    steps = np.arange(1, 11)
    lat = np.array([[0.1, 0.2, 0.6, 0.7, 0.6, 0.3, 0.3, 0.3, 0.3, 0.3]])
    d = PathDraws("o", steps, lat, lat, *(np.zeros(1),) * 7, last_step=0, horizon=10)
    t = budget_table(d, target=0.5)
    assert t["p_target"].tolist() == [0, 0, 1, 1, 1, 1, 1, 1, 1, 1]


def test_compute_saved_and_reward_given_up():
    c = 0.002
    rec = recommend_stop(det(), cost_per_step=c, max_steps=400, steps_per_hour=100.0)
    assert rec.steps_saved == 400 - 115
    assert rec.fraction_saved == pytest.approx(285 / 400)
    assert rec.hours_saved == pytest.approx(2.85)
    assert rec.cost_saved == pytest.approx(c * 285)
    assert rec.expected_reward_at_max == pytest.approx(R(400))
    assert rec.reward_given_up == pytest.approx(R(400) - R(115))
    assert rec.max_steps_in_forecast
    # max_steps beyond the forecast: saved steps still counted, reward taken at the forecast end
    rec = recommend_stop(det(), cost_per_step=c, max_steps=800)
    assert rec.steps_saved == 800 - 115 and not rec.max_steps_in_forecast
    assert rec.expected_reward_at_max == pytest.approx(R(500))
    assert any("beyond the forecast" in n for n in rec.notes)


def test_paper_b_epoch_rule_comparison():
    rec = recommend_stop(det(), cost_per_step=0.002, epoch_steps=200)
    assert rec.rule80_step == int(EPOCH_RULE_FRACTION * 200) == 160
    assert rec.rule80_expected_reward == pytest.approx(R(160))
    assert rec.rule80_expected_utility == pytest.approx(R(160) - 0.002 * 160)
    assert rec.recommendation_minus_rule80 == 115 - 160
    assert rec.rule80_status == "within the forecast"
    assert recommend_stop(det(last_step=0), epoch_steps=2000).rule80_status == "beyond the forecast"
    assert "paper-B rule" in rec.summary()


def test_no_cost_uses_the_stop_step():
    # exponential path: stays within 5% of the gain from step 50 ln 20 = 149.8 on -> step 150
    rec = recommend_stop(det())
    assert rec.rule.startswith("stop step") and rec.step == 150
    assert rec.p_best is None


def test_table_columns_budgets_and_gain():
    t = budget_table(
        det(), target=0.9, cost_per_step=0.001, budgets=[100, 250.0], gain_window=20, epoch_steps=500, steps_per_hour=50
    )
    assert t["step"].tolist() == [100, 250]
    for col in (
        "run_id",
        "expected_reward",
        "reward_q05",
        "reward_q95",
        "expected_gain_next",
        "p_target",
        "cost",
        "expected_utility",
        "p_best",
        "expected_regret",
        "hours_from_now",
        "epoch",
        "recommended",
    ):
        assert col in t.columns
    assert t["expected_gain_next"].iloc[0] == pytest.approx(R(120) - R(100))
    assert t["recommended"].sum() == 1
    assert t["p_best"].sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="outside the forecast grid"):
        budget_table(det(), budgets=[1000])


def test_uncertain_draws_give_probabilities():
    rng = np.random.default_rng(0)
    n = 300
    d = exponential_draws(
        "u",
        r0=0.1,
        r_star=rng.normal(0.8, 0.05, n),
        tau=rng.lognormal(np.log(60), 0.3, n),
        last_step=50,
        horizon=450,
        sigma_m=0.02,
    )
    t = budget_table(d, target=0.7, cost_per_step=1e-4, max_steps=500)
    rec = t.attrs["recommendation"]
    assert 0 < rec.p_best < 1 and 0 <= rec.p_best <= rec.p_best_near <= 1
    assert rec.expected_regret > 0
    assert 0 < t["p_target"].iloc[-1] < 1
    assert (t["reward_q05"] <= t["expected_reward"]).all() and (t["expected_reward"] <= t["reward_q95"]).all()


def test_pathdraws_validation():
    steps = np.arange(1, 5)
    ok = np.zeros((2, 4))
    with pytest.raises(ValueError, match="shape"):
        PathDraws("x", steps, np.zeros((2, 3)), np.zeros((2, 3)), *(np.zeros(2),) * 7, last_step=0, horizon=4)
    with pytest.raises(ValueError, match="increasing"):
        PathDraws("x", [1, 1, 2, 3], ok, ok, *(np.zeros(2),) * 7, last_step=0, horizon=4)
    with pytest.raises(ValueError, match="draws"):
        PathDraws("x", steps, ok, ok, np.zeros(3), *(np.zeros(2),) * 6, last_step=0, horizon=4)
    d = PathDraws("x", steps, ok, ok, 0.0, 1.0, 10.0, 0.01, 0.9, 0.0, 0.0, last_step=0, horizon=4)
    assert d.r_star.shape == (2,) and d.n_draws == 2
    assert np.allclose(d.damping, 0.1)


def test_plot_budget(tmp_path):
    rng = np.random.default_rng(1)
    d = exponential_draws(
        "p",
        r0=0.2,
        r_star=rng.normal(0.8, 0.03, 100),
        tau=80.0,
        last_step=100,
        horizon=300,
        sigma_m=0.03,
        units="accuracy",
    )
    import pandas as pd

    hist = pd.DataFrame({"step": np.arange(0, 101), "reward": 0.8 - 0.6 * np.exp(-np.arange(0, 101) / 80.0)})
    fig = plot_budget(d, target=0.75, cost_per_step=2e-4, max_steps=400, epoch_steps=300, history=hist)
    out = tmp_path / "b.png"
    fig.savefig(out, dpi=60)
    assert out.stat().st_size > 1000
    assert len(fig.axes) == 2
