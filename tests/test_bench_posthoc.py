"""The research layers of bench/posthoc (the hazard of leaving the regime, the conditioned interval layer; in no
default since the yardstick study) and the prefix features: known coefficients and miscalibrations recovered."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bayesgrpo.forecast.features import prefix_features
from bench.posthoc.hazard import P_MAX, Hazard, fit_hazard, left_regime
from bench.posthoc.intervals import LEVELS, IntervalLayer, _transport, fit_layer


def _simulated_events(n=4000, b0=-1.5, b1=1.0, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 2))
    go = rng.uniform(0.5, 0.9, n)
    rate = np.exp(b0 + b1 * x[:, 0])  # the second feature does nothing
    ev = rng.uniform(size=n) < 1 - np.exp(-rate * go)
    return x, ev, go


def test_fit_hazard_recovers_the_rate_of_a_known_proportional_hazard():
    x, ev, go = _simulated_events()
    hz = fit_hazard(x, ev, features=("a", "b"), to_go=go, l2=0.0)
    # coefficients are per robust spread (10-90% range of a standard normal: 2.563)
    spread = np.array(hz.spread)
    b = np.array(hz.coef) / spread
    assert b[0] == pytest.approx(1.0, abs=0.12)
    assert abs(b[1]) < 0.12
    # the fitted probability of a case matches the true one
    f = {"a": 1.0, "b": 0.0}
    true = 1 - math.exp(-math.exp(-1.5 + 1.0) * 0.6)
    assert hz.p_leave(f, to_go=0.6) == pytest.approx(true, abs=0.04)


def test_hazard_widens_only_where_its_input_fires_and_is_capped():
    hz = Hazard(features=("past_peak",), centre=(0.0,), spread=(0.1,), coef=(2.0,), intercept=-4.0)
    quiet = hz.p_leave({"past_peak": 0.0, "fraction": 0.2})
    fired = hz.p_leave({"past_peak": 0.2, "fraction": 0.2})
    assert quiet == pytest.approx(1 - math.exp(-math.exp(-4.0) * 0.8))
    assert fired > 10 * quiet
    assert hz.p_leave({"past_peak": 5.0, "fraction": 0.0}) == P_MAX
    assert Hazard().p_leave({"past_peak": 1.0}) == 0.0  # no hazard: nothing leaves


def test_hazard_apply_replaces_a_fixed_share_between_floor_and_level():
    hz = Hazard(features=("x",), centre=(0.0,), spread=(1.0,), coef=(0.0,), intercept=math.log(-math.log(0.75)),
                outcome=(0.5, 2.0))  # fmt: skip
    draws = np.linspace(0.6, 0.9, 1000)
    out = hz.apply(draws, {"x": 0.0, "fraction": 0.0}, level=0.8, floor=0.0)
    changed = out != draws
    assert changed.sum() == 250  # p = 0.25 exactly
    assert np.all((out[changed] >= 0.0) & (out[changed] <= 0.8))
    # the leaving outcome follows the Beta: its median at the Beta's median of the way up
    assert np.median(out[changed]) == pytest.approx(0.8 * stats.beta.median(0.5, 2.0), abs=0.01)
    np.testing.assert_array_equal(out, hz.apply(draws, {"x": 0.0, "fraction": 0.0}, level=0.8, floor=0.0))
    assert draws[0] == 0.6  # the input is not modified


def test_hazard_round_trip_and_identity(tmp_path):
    hz = Hazard(features=("a",), centre=(0.1,), spread=(1.0,), coef=(0.5,), intercept=-2.0, name="h")
    hz.save(tmp_path / "h.json")
    back = Hazard.load(tmp_path / "h.json")
    assert back == hz and back.identity == hz.identity
    assert hz.model_copy(update={"coef": (0.6,)}).identity != hz.identity
    with pytest.raises(ValueError, match="one value each"):
        Hazard(features=("a", "b"), centre=(0.0,), spread=(1.0,), coef=(0.0,))


def test_left_regime_is_a_fall_of_more_than_a_share_of_the_range():
    np.testing.assert_array_equal(
        left_regime([0.8, 0.8, 0.8], [0.45, 0.55, 0.9], [1.0, 1.0, 1.0]), [True, False, False]
    )


def _cases(n, sd_true, group, seed):
    rng = np.random.default_rng(seed)
    z = stats.norm.ppf(LEVELS)
    rows = []
    for i in range(n):
        mu = rng.normal()
        row = {"source": f"s{i % 10}", "cutoff": 0.2, "truth": mu + sd_true * rng.standard_normal(), "scale": 1.0,
               "recent": group}  # fmt: skip
        row.update({f"q{round(lv * 100):02d}": mu + zz for lv, zz in zip(LEVELS, z, strict=True)})  # forecast: N(mu, 1)
        rows.append(row)
    return pd.DataFrame(rows)


def test_fit_layer_recovers_a_known_miscalibration_per_group():
    # group "falling": truths twice as spread as forecast; group "level": forecast calibrated
    train = pd.concat([_cases(3000, 2.0, -0.5, 0), _cases(3000, 1.0, 0.0, 1)], ignore_index=True)
    lay = fit_layer(train, rule="recent", n0=10.0)
    d_fall = lay.delta({"recent": -0.5}, 0.2)
    d_level = lay.delta({"recent": 0.0}, 0.2)
    z = stats.norm.ppf(LEVELS)
    np.testing.assert_allclose(d_fall, z, atol=0.2)  # 2z - z (the 5% quantile of 3000 cases: SE 0.08)
    np.testing.assert_allclose(d_level, 0.0, atol=0.08)
    # applied to fresh falling cases: 80% of the truths inside the 80% interval
    rng = np.random.default_rng(5)
    inside = []
    for _ in range(400):
        mu = rng.normal()
        draws = mu + rng.standard_normal(2000)
        x = lay.apply(draws, {"recent": -0.5}, fraction=0.2, scale=1.0)
        lo, hi = np.quantile(x, [0.1, 0.9])
        inside.append(lo <= mu + 2.0 * rng.standard_normal() <= hi)
    assert np.mean(inside) == pytest.approx(0.8, abs=0.05)


def test_fit_layer_shrinks_small_groups_and_only_widens():
    big = _cases(2000, 2.0, 0.0, 2)
    small = _cases(10, 0.3, 0.5, 3)  # an over-dispersed forecast: widen_only keeps it
    lay = fit_layer(pd.concat([big, small], ignore_index=True), rule="recent", n0=10.0)
    d_small = lay.delta({"recent": 0.5}, 0.2)
    assert np.all(d_small[np.array(LEVELS) < 0.5] <= 0) and np.all(d_small[np.array(LEVELS) > 0.5] >= 0)
    free = fit_layer(pd.concat([big, small], ignore_index=True), rule="recent", n0=10.0, widen_only=False)
    d_free, d_pool = free.delta({"recent": 0.5}, 0.2), np.array(free.pooled)[1]
    # halfway between its own (narrowing) value and the pooled one: 10 cases against 10 pseudo-cases
    assert np.all(np.abs(d_free) < np.abs(d_pool))
    # an unknown group gets the pooled shifts
    np.testing.assert_allclose(lay.delta({"recent": 0.5, "x": 1}, 0.2), d_small)


def test_transport_is_monotone_and_hits_the_target_quantiles():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(5000)
    shift = np.array([-0.5, -0.4, -0.1, 0.2, 0.6, 0.9])
    y = _transport(x, shift, LEVELS)
    assert np.all(np.diff(y[np.argsort(x)]) >= -1e-12)
    np.testing.assert_allclose(np.quantile(y, LEVELS), np.quantile(x, LEVELS) + shift, atol=1e-2)


def test_layer_paths_grow_with_the_time_to_go_and_the_identity_changes_nothing():
    lay = IntervalLayer(rule="none", pooled=((0.0,) * 6,) * 4,
                        shifts={"all": tuple((-0.3, -0.2, 0.0, 0.0, 0.2, 0.3) for _ in range(4))})  # fmt: skip
    rng = np.random.default_rng(0)
    paths = rng.standard_normal((1000, 3))
    out = lay.apply(paths, {}, fraction=0.3, scale=2.0, go=np.array([0.0, 0.5, 1.0]))
    np.testing.assert_array_equal(out[:, 0], paths[:, 0])
    w = lambda a: np.subtract(*np.quantile(a, [0.9, 0.1]))  # noqa: E731
    assert w(out[:, 1]) == pytest.approx(w(paths[:, 1]) + 0.4, abs=0.02)
    assert w(out[:, 2]) == pytest.approx(w(paths[:, 2]) + 0.8, abs=0.02)
    same = IntervalLayer().apply(paths[:, 0], {}, fraction=0.3, scale=1.0)
    np.testing.assert_array_equal(same, paths[:, 0])
    with pytest.raises(ValueError, match="unknown rule"):
        IntervalLayer(rule="nope")


def test_prefix_features_of_known_shapes():
    steps = np.arange(100)
    flat_floor = pd.DataFrame({"step": steps, "reward": np.r_[np.zeros(30), [1.0, 0, 0, 0.5, 0], np.zeros(65)]})
    f = prefix_features(flat_floor, fraction=0.2)
    assert f["bounded"] == 1.0 and f["at_floor"] == 1.0 and f["position"] < 0.05
    rise = pd.DataFrame({"step": steps, "reward": 1 - np.exp(-steps / 30.0), "kl": np.linspace(0.01, 0.1, 100)})
    g = prefix_features(rise, fraction=0.5)
    assert g["trend"] > 0.8 and g["recent"] > 0 and g["past_peak"] == 0.0 and g["has_kl"] == 1.0
    assert g["kl_growth"] == pytest.approx(math.log(np.mean(np.linspace(0.01, 0.1, 100)[-10:]) / 0.055), rel=1e-6)
    peak = pd.DataFrame({"step": steps, "reward": np.r_[np.linspace(0, 1, 60), np.linspace(1, 0.4, 40)]})
    h = prefix_features(peak, fraction=0.5)
    assert h["past_peak"] > 0.4 and h["recent"] < 0 and h["has_kl"] == 0.0 and h["kl_growth"] == 0.0
