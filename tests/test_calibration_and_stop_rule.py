"""The calibration layer (split-conformal, asymmetric) and the stop-rule backtest, on cases with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bayesgrpo.evaluation.stop_rule import quantile_prob_at_least as prob_at_least
from bayesgrpo.evaluation.stop_rule import stop_rule_backtest, summarize_stops
from bayesgrpo.forecast.calibration import Calibration, fit_calibration
from bayesgrpo.schema import RunSet


def _cases(n=400, true_sd=2.0, skew=0.0, seed=0):
    """Forecasts N(0, 1) (their quantiles) of outcomes N(skew, true_sd): too narrow by true_sd."""
    rng = np.random.default_rng(seed)
    z = stats.norm.ppf([0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95])
    rows = []
    for i in range(n):
        c = (0.1, 0.2, 0.3, 0.5)[i % 4]
        rows.append(
            dict(
                source=f"s{i % 7}",
                cutoff=c,
                truth=skew + true_sd * rng.standard_normal(),
                **{f"q{q}": v for q, v in zip(("05", "10", "25", "50", "75", "90", "95"), z)},
            )
        )
    return pd.DataFrame(rows)


def test_conformal_widths_recover_the_miscalibration_and_its_side():
    cal = fit_calibration(_cases(true_sd=2.0))
    assert np.allclose(cal.w_up, 2.0, atol=0.35) and np.allclose(cal.w_dn, 2.0, atol=0.35)
    # outcomes shifted up: the upper tail must widen more than the lower
    cal = fit_calibration(_cases(true_sd=1.0, skew=1.0))
    assert all(u > d + 0.5 for u, d in zip(cal.w_up, cal.w_dn))
    # a calibrated forecast stays (about) as it is
    cal = fit_calibration(_cases(true_sd=1.0, n=2000))
    assert np.allclose(cal.w_up, 1.0, atol=0.15) and np.allclose(cal.w_dn, 1.0, atol=0.15)


def test_apply_scales_each_side_and_interpolates_in_the_fraction():
    cal = Calibration(fraction_grid=(0.1, 0.5), w_up=(3.0, 1.0), w_dn=(1.0, 1.0), name="t")
    x = np.array([-1.0, 0.0, 1.0])
    np.testing.assert_allclose(cal.apply(x, fraction=0.1), [-1.0, 0.0, 3.0])
    np.testing.assert_allclose(cal.apply(x, fraction=0.3), [-1.0, 0.0, 2.0])  # halfway: w_up 2
    np.testing.assert_allclose(cal.apply(x, fraction=0.9), x)  # beyond the grid: the last value
    assert cal.identity.startswith("t@sha256:")


def test_prob_at_least_from_quantiles():
    row = {f"q{q:02d}": v for q, v in zip((5, 10, 25, 50, 75, 90, 95), (0, 1, 2, 3, 4, 5, 6))}
    assert prob_at_least(row, 3.0) == pytest.approx(0.5)
    assert prob_at_least(row, 4.5) == pytest.approx(1 - 0.825)
    assert prob_at_least(row, 10) == 0.0 and prob_at_least(row, -5) == 1.0


def test_stop_rule_saves_steps_and_flags_bad_stops():
    steps = np.arange(0, 101)
    flat = pd.DataFrame({"run_id": "flat", "step": steps, "reward": 0.5})
    rise = pd.DataFrame({"run_id": "rise", "step": steps, "reward": np.where(steps < 60, 0.1, 0.9)})
    runs = RunSet.from_frames(pd.concat([flat, rise]))
    rows = []
    for rid, truth, rng in (("flat", 0.5, 0.1), ("rise", 0.9, 0.8)):
        for c in (0.1, 0.3):
            q = np.full(7, 0.5 if rid == "flat" else 0.1)  # the method foresees no gain for either run
            rows.append(dict(run_id=rid, source=rid, cutoff=c, method="m", ok=True, observed_until=int(c * 100), s0=0,
                             horizon=100, truth=truth, range=rng,
                             **{f"q{k:02d}": v for k, v in zip((5, 10, 25, 50, 75, 90, 95), q)}))  # fmt: skip
    stops = stop_rule_backtest(pd.DataFrame(rows), runs, delta=0.05, epsilon=0.2).set_index(["run_id", "method"])
    assert stops.loc[("flat", "m"), "stopped"] and stops.loc[("flat", "m"), "steps_saved"] == pytest.approx(0.9)
    assert not stops.loc[("flat", "m"), "bad_stop"]
    assert stops.loc[("rise", "m"), "bad_stop"] and stops.loc[("rise", "m"), "reward_lost"] == pytest.approx(1.0)
    assert not stops.loc[("rise", "oracle"), "stopped"]  # the oracle knows the rise is coming
    s = summarize_stops(stops.reset_index()).set_index("method")
    assert s.loc["m", "bad_stops"] == pytest.approx(0.5) and s.loc["oracle", "bad_stops"] == 0.0


def test_leave_sets_a_fixed_share_between_floor_and_level():
    cal = Calibration(fraction_grid=(0.1, 0.5), w_up=(1.0, 1.0), w_dn=(1.0, 1.0), p_leave=(0.2, 0.0), name="t")
    x = np.linspace(0.8, 0.9, 1000)
    out = cal.apply(x, fraction=0.1, level=0.6, floor=0.0)
    moved = out != x
    assert moved.sum() == 200  # p_leave 0.2 of 1000 draws
    assert out[moved].min() >= 0.0 and out[moved].max() <= 0.6
    # evenly spread between the floor and the level: their mean is halfway
    assert out[moved].mean() == pytest.approx(0.3, abs=0.01)
    np.testing.assert_array_equal(cal.apply(x, fraction=0.1, level=0.6, floor=0.0), out)  # the same subset every time
    assert (cal.apply(x, fraction=0.3, level=0.6, floor=0.0) != x).sum() == 100  # interpolated in the fraction
    np.testing.assert_array_equal(cal.apply(x, fraction=0.5, level=0.6, floor=0.0), x)  # p_leave 0
    np.testing.assert_array_equal(cal.apply(x, fraction=0.1), x)  # no level known: nothing leaves


def test_leave_anchor_level_and_floor():
    from bayesgrpo.forecast.calibration import leave_anchor

    y = np.r_[np.full(90, 0.2), np.full(10, 0.7)]
    assert leave_anchor(y) == pytest.approx((0.7, 0.0))  # last tenth; a [0, 1] reward's floor is 0
    assert leave_anchor(y, reward_min=0.1) == pytest.approx((0.7, 0.1))  # a declared floor wins
    assert leave_anchor(y + 5.0) == pytest.approx((5.7, 5.2))  # unknown bounds: the lowest observed value
    assert leave_anchor(np.array([0.5, 0.4, 0.3]), reward_min=0.9) == pytest.approx((0.4, 0.4))  # never above the level


def test_forecast_paths_end_where_the_leaving_draws_end(mock_sampler):
    from bayesgrpo.forecast.forecaster import Forecaster, SamplerConfig

    steps = np.arange(1, 101)
    df = pd.DataFrame({"run_id": "r", "step": steps, "reward": 0.2 + 0.5 * (1 - np.exp(-steps / 20.0))})
    runs = RunSet.from_frames(df, pd.DataFrame({"run_id": ["r"], "max_steps": [300], "beta1": [0.9]}))
    cal = Calibration(fraction_grid=(0.1, 0.5), p_leave=(0.25, 0.25), w_up=(1.0, 1.0), w_dn=(1.0, 1.0), name="t")
    fit = Forecaster(sampler=SamplerConfig(draws=200, tune=10, chains=2, seed=1), calibration=cal).fit(runs)
    base = Forecaster(sampler=SamplerConfig(draws=200, tune=10, chains=2, seed=1), calibration=False).fit(runs)
    fin, fin0 = fit.final_draws("r"), base.final_draws("r")
    moved = np.abs(fin - fin0) > 1e-9
    assert moved.sum() == 100  # a quarter of 400 draws
    level = df["reward"].iloc[-10:].mean()
    assert fin[moved].max() <= level + 1e-9 and fin[moved].min() >= 0.0
    paths = fit.paths("r")
    # the leaving draws' latent paths end at their final values; the others are the uncalibrated paths
    np.testing.assert_allclose(paths.latent[moved, -1], fin[moved], atol=1e-9)
    np.testing.assert_allclose(paths.latent[~moved], base.paths("r").latent[~moved])


def test_widen_only_by_default_and_narrowing_on_request():
    wide = _cases(true_sd=0.5)  # intervals twice too wide
    assert np.allclose(fit_calibration(wide).w_up, 1.0) and np.allclose(fit_calibration(wide).w_dn, 1.0)
    cal = fit_calibration(wide, w_min=0.3)
    assert np.allclose(cal.w_up, 0.5, atol=0.1) and np.allclose(cal.w_dn, 0.5, atol=0.1)


def test_leave_share_is_learned_where_runs_collapse_and_zero_where_none_do():
    rng = np.random.default_rng(0)
    rows, draws = [], []
    for i in range(240):
        collapsed = i % 5 == 0  # a fifth of the runs end between the floor (0) and the level (0.6)
        truth = rng.uniform(0.0, 0.6) if collapsed else 0.8 + 0.02 * rng.standard_normal()
        x = 0.8 + 0.02 * rng.standard_normal(400)
        q = np.quantile(x, (0.1, 0.5, 0.9))
        rows.append(
            dict(
                source=f"s{i % 6}",
                cutoff=(0.1, 0.3)[i % 2],
                truth=truth,
                range=1.0,
                level=0.6,
                floor=0.0,
                q10=q[0],
                q50=q[1],
                q90=q[2],
            )
        )
        draws.append(x)
    cases = pd.DataFrame(rows)
    cal = fit_calibration(cases, draws=draws, grid=(0.1, 0.3), leave=True)
    assert all(0.12 <= p <= 0.28 for p in cal.p_leave), cal.p_leave
    keep = [i for i in range(len(rows)) if i % 5]
    cal0 = fit_calibration(cases.iloc[keep], draws=[draws[i] for i in keep], grid=(0.1, 0.3), leave=True)
    assert cal0.p_leave == (0.0, 0.0)
    with pytest.raises(ValueError, match="draws"):
        fit_calibration(cases, leave=True)


def test_additive_tails_widen_even_a_zero_width_forecast():
    # forecasts of (almost) no width, outcomes spread by 0.3 x scale above: a ratio cannot help, a shift does
    rng = np.random.default_rng(1)
    rows = []
    for i in range(400):
        truth = 0.5 + 0.3 * abs(rng.standard_normal()) * 2.0  # scale 2.0: misses of 0.6 x |z| above
        rows.append(
            dict(
                source=f"s{i % 5}",
                cutoff=(0.1, 0.5)[i % 2],
                truth=truth,
                scale=2.0,
                q10=0.5 - 1e-6,
                q50=0.5,
                q90=0.5 + 1e-6,
            )
        )
    cases = pd.DataFrame(rows)
    cal = fit_calibration(cases, additive=True, grid=(0.1, 0.5))
    assert cal.w_up == (1.0, 1.0)
    z90 = stats.halfnorm.ppf(0.9)
    assert np.allclose(cal.c_up, 0.3 * z90, rtol=0.15) and np.allclose(cal.c_dn, 0.0, atol=1e-6)
    x = 0.5 + 1e-6 * rng.standard_normal(4000)
    out = cal.apply(x, fraction=0.1, scale=2.0)
    assert np.quantile(out, 0.9) == pytest.approx(0.5 + 2.0 * cal.c_up[0], rel=0.02)
    assert np.quantile(out, 0.1) == pytest.approx(np.quantile(x, 0.1), abs=1e-5)  # the lower tail as it was
    np.testing.assert_array_equal(cal.apply(x, fraction=0.1), x)  # no scale given: no shift
    # paths: nothing at the last observation, all of it at the horizon
    paths = np.repeat(x[:, None], 3, axis=1)
    wide = cal.stretch(paths, fraction=0.1, scale=2.0, go=np.array([[0.0, 0.5, 1.0]]), axis=0)
    up = np.quantile(wide, 0.9, axis=0) - 0.5
    assert up[0] == pytest.approx(np.quantile(x, 0.9) - 0.5, abs=1e-6) and up[2] == pytest.approx(2 * up[1], rel=0.05)
