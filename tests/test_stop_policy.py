"""Decision probabilities, their recalibration, the stop policy and its sequential backtest."""

from __future__ import annotations

import numpy as np
import pytest

from bayesgrpo.forecast.decision import (
    DecisionCalibration,
    fit_decision_calibration,
    gain_threshold,
    p_plateaued,
    prob_at_least,
)
from bayesgrpo.series import current_level


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
