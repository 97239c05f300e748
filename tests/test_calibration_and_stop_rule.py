"""The calibration layer (split-conformal, asymmetric) and the stop-rule backtest, on cases with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bayesgrpo.evaluation.stop_rule import prob_at_least, stop_rule_backtest, summarize_stops
from bayesgrpo.forecast.calibration import Calibration, fit_calibration
from bayesgrpo.schema import RunSet


def _cases(n=400, true_sd=2.0, skew=0.0, seed=0):
    """Forecasts N(0, 1) (their quantiles) of outcomes N(skew, true_sd): too narrow by true_sd."""
    rng = np.random.default_rng(seed)
    z = stats.norm.ppf([0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95])
    rows = []
    for i in range(n):
        c = (0.1, 0.2, 0.3, 0.5)[i % 4]
        rows.append(dict(source=f"s{i % 7}", cutoff=c, truth=skew + true_sd * rng.standard_normal(),
                         **{f"q{q}": v for q, v in zip(("05", "10", "25", "50", "75", "90", "95"), z)}))
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
