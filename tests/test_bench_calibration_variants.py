"""The research variants of the calibration layer (``bench/calibration_variants.py``: width ratios, draws
leaving the regime) that ``bench/calibration_study.py`` prices against the shipped additive layer."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from calibration_variants import VariantCalibration as Calibration
from calibration_variants import fit_variant_layer as fit_calibration
from calibration_variants import leave_anchor


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


def test_conformal_widths_recover_the_miscalibration_and_its_side():
    cal = fit_calibration(_cases(true_sd=2.0))
    assert np.allclose(cal.w_up, 2.0, atol=0.35) and np.allclose(cal.w_dn, 2.0, atol=0.35)
    # outcomes shifted up: the upper tail must widen more than the lower
    cal = fit_calibration(_cases(true_sd=1.0, skew=1.0))
    assert all(u > d + 0.5 for u, d in zip(cal.w_up, cal.w_dn, strict=True))
    # a calibrated forecast stays (about) as it is
    cal = fit_calibration(_cases(true_sd=1.0, n=2000))
    assert np.allclose(cal.w_up, 1.0, atol=0.15) and np.allclose(cal.w_dn, 1.0, atol=0.15)


def test_apply_scales_each_side_and_interpolates_in_the_fraction():
    cal = Calibration(fraction_grid=(0.1, 0.5), w_up=(3.0, 1.0), w_dn=(1.0, 1.0), name="t")
    x = np.array([-1.0, 0.0, 1.0])
    np.testing.assert_allclose(cal.apply(x, fraction=0.1), [-1.0, 0.0, 3.0])
    np.testing.assert_allclose(cal.apply(x, fraction=0.3), [-1.0, 0.0, 2.0])  # halfway: w_up 2
    np.testing.assert_allclose(cal.apply(x, fraction=0.9), x)  # beyond the grid: the last value


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
    y = np.r_[np.full(90, 0.2), np.full(10, 0.7)]
    assert leave_anchor(y) == pytest.approx((0.7, 0.0))  # last tenth; a [0, 1] reward's floor is 0
    assert leave_anchor(y, reward_min=0.1) == pytest.approx((0.7, 0.1))  # a declared floor wins
    assert leave_anchor(y + 5.0) == pytest.approx((5.7, 5.2))  # unknown bounds: the lowest observed value
    assert leave_anchor(np.array([0.5, 0.4, 0.3]), reward_min=0.9) == pytest.approx((0.4, 0.4))  # never above the level


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
