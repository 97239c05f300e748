"""The calibration layer (split-conformal, asymmetric, additive) and the stop-rule backtest, on cases with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bayesgrpo.evaluation.stop_rule import quantile_prob_at_least as prob_at_least
from bayesgrpo.evaluation.stop_rule import summarize_stops
from bayesgrpo.forecast.calibration import Calibration
from bayesgrpo.schema import RunSet
from bench.fit_layers import fit_calibration
from bench.stop_rule import stop_rule_backtest


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
                **{f"q{q}": v for q, v in zip(("05", "10", "25", "50", "75", "90", "95"), z, strict=True)},
            )
        )
    return pd.DataFrame(rows)


def test_prob_at_least_from_quantiles():
    row = {f"q{q:02d}": v for q, v in zip((5, 10, 25, 50, 75, 90, 95), (0, 1, 2, 3, 4, 5, 6), strict=True)}
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
                             **{f"q{k:02d}": v for k, v in zip((5, 10, 25, 50, 75, 90, 95), q, strict=True)}))  # fmt: skip
    stops = stop_rule_backtest(pd.DataFrame(rows), runs, delta=0.05, epsilon=0.2).set_index(["run_id", "method"])
    assert stops.loc[("flat", "m"), "stopped"] and stops.loc[("flat", "m"), "steps_saved"] == pytest.approx(0.9)
    assert not stops.loc[("flat", "m"), "bad_stop"]
    assert stops.loc[("rise", "m"), "bad_stop"] and stops.loc[("rise", "m"), "reward_lost"] == pytest.approx(1.0)
    assert not stops.loc[("rise", "oracle"), "stopped"]  # the oracle knows the rise is coming
    s = summarize_stops(stops.reset_index()).set_index("method")
    assert s.loc["m", "bad_stops"] == pytest.approx(0.5) and s.loc["oracle", "bad_stops"] == 0.0


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
    cal = fit_calibration(cases, grid=(0.1, 0.5))
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


def test_shifts_interpolate_in_the_fraction_and_identity_is_named():
    cal = Calibration(fraction_grid=(0.1, 0.5), c_up=(0.4, 0.0), c_dn=(0.0, 0.2), name="t")
    assert cal.shifts(0.1) == (0.0, 0.4) and cal.shifts(0.3) == pytest.approx((0.1, 0.2))
    assert cal.shifts(0.9) == (0.2, 0.0)  # beyond the grid: the last value
    assert cal.identity.startswith("t@sha256:") and not cal.is_identity
    assert Calibration().is_identity and Calibration().identity.startswith("identity@sha256:")
    with pytest.raises(ValueError, match="only widen"):
        Calibration(fraction_grid=(0.1,), c_up=(-0.1,), c_dn=(0.0,))


def test_layers_saved_with_the_research_fields_load_when_they_change_nothing():
    old = dict(fraction_grid=[0.1, 0.5], w_up=[1.0, 1.0], w_dn=[1.0, 1.0], p_leave=[], c_up=[0.3, 0.1],
               c_dn=[0.0, 0.0], name="old")  # fmt: skip
    cal = Calibration.model_validate(old)
    assert cal.c_up == (0.3, 0.1) and cal == Calibration(
        fraction_grid=(0.1, 0.5), c_up=(0.3, 0.1), c_dn=(0, 0), name="old"
    )
    with pytest.raises(ValueError, match=r"w_up .* research variant"):
        Calibration.model_validate({**old, "w_up": [2.0, 1.0]})
    with pytest.raises(ValueError, match=r"p_leave .* research variant"):
        Calibration.model_validate({**old, "p_leave": [0.1, 0.0]})


def test_forecast_paths_widen_from_nothing_to_the_final_shift(mock_sampler):
    from bayesgrpo.forecast.forecaster import Forecaster, SamplerConfig

    mock_sampler["spread"] = 0.05
    steps = np.arange(1, 101)
    df = pd.DataFrame({"run_id": "r", "step": steps, "reward": 0.2 + 0.5 * (1 - np.exp(-steps / 20.0))})
    runs = RunSet.from_frames(df, pd.DataFrame({"run_id": ["r"], "max_steps": [300], "beta1": [0.9]}))
    cal = Calibration(fraction_grid=(0.1, 0.5), c_up=(0.25, 0.25), c_dn=(0.0, 0.0), name="t")
    smp = SamplerConfig(draws=200, tune=10, chains=2, seed=1)
    fit = Forecaster("oscillator", sampler=smp, calibration=cal).fit(runs)
    base = Forecaster("oscillator", sampler=smp, calibration=False).fit(runs)
    p, p0 = fit.paths("r"), base.paths("r")
    scale = fit.infos["r"].scale
    up = np.quantile(p.latent, 0.9, axis=0) - np.quantile(p0.latent, 0.9, axis=0)
    go = (p.steps - 100) / 200
    np.testing.assert_allclose(up, 0.25 * scale * go, rtol=1e-6, atol=1e-9)  # the 90% point moves out by c x scale x go
    np.testing.assert_allclose(np.quantile(p.latent, 0.1, axis=0), np.quantile(p0.latent, 0.1, axis=0))  # c_dn = 0
    fin, fin0 = fit.final_draws("r"), base.final_draws("r")
    assert np.quantile(fin, 0.9) - np.quantile(fin0, 0.9) == pytest.approx(0.25 * scale, rel=1e-6)
