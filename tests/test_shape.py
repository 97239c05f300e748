"""The shape chosen per run (forecast.shape, Forecaster('auto')): weights from the prior over kinds and the
evidence, the mixture of the kinds' draws, each kind's dynamics for its own draws, save/load."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.forecast import forecaster as F
from bayesgrpo.forecast.forecaster import AUTO, FittedForecast, Forecaster, SamplerConfig
from bayesgrpo.forecast.outlook import Outlook
from bayesgrpo.forecast.shape import KIND_CODE, ShapeConfig, ShapePrior, draw_counts, kind_weights, weights_label
from bayesgrpo.schema import RunSet

SMALL = SamplerConfig(draws=100, tune=10, chains=2, seed=1)


def _run(reward, run_id="r1", max_steps=400):
    steps = np.arange(1, len(reward) + 1)
    df = pd.DataFrame({"run_id": run_id, "step": steps, "reward": reward})
    return RunSet.from_frames(df, pd.DataFrame({"run_id": [run_id], "max_steps": [max_steps], "beta1": [0.9]}))


def _floor_run():  # a 0-1 pass rate flat at 0 with a rare lucky batch: at its floor
    r = np.zeros(80)
    r[[17, 45]] = 0.25
    return _run(r)


def _rising_run(seed=0):
    rng = np.random.default_rng(seed)
    s = np.arange(1, 121)
    return _run(0.2 + 0.5 * (1 - np.exp(-s / 40.0)) + 0.03 * rng.standard_normal(s.size))


def test_kind_weights_prior_times_evidence_with_drops():
    cfg = ShapeConfig(prior=ShapePrior(at_floor=(1, 1, 1), elsewhere=(0.8, 0.1, 0.1)), min_weight=0.15)
    # no evidence either way: the prior's weights, kinds under min_weight dropped and renormalised
    assert kind_weights({"at_floor": 0.0}, {}, cfg) == {"oscillator": 1.0}
    w = kind_weights({"at_floor": 1.0}, {}, cfg)
    assert w == pytest.approx({"oscillator": 1 / 3, "degeneracy": 1 / 3, "logistic": 1 / 3})
    # evidence of 2 nats for the degeneracy kind: 0.1 e^2 / (0.8 + 0.1 e^2 + 0.1)
    w = kind_weights({"at_floor": 0.0}, {"oscillator": 0.0, "degeneracy": 2.0, "logistic": 0.0}, cfg)
    d = 0.1 * math.e**2 / (0.8 + 0.1 * math.e**2)
    assert w == pytest.approx({"oscillator": 0.8 / (0.8 + 0.1 * math.e**2), "degeneracy": d})
    # a kind that cannot model the run, or whose evidence failed, gets nothing
    w = kind_weights({"at_floor": 1.0}, {"degeneracy": -math.inf}, cfg, allowed=("oscillator", "logistic"))
    assert w == pytest.approx({"oscillator": 0.5, "logistic": 0.5})
    # evidence off: the prior alone
    off = cfg.model_copy(update={"evidence": False})
    assert kind_weights({"at_floor": 0.0}, {"degeneracy": 9.0}, off) == {"oscillator": 1.0}


def test_draw_counts_sum_to_n_and_follow_the_weights():
    c = draw_counts({"oscillator": 0.62, "degeneracy": 0.38}, 2000)
    assert c == {"oscillator": 1240, "degeneracy": 760}
    c = draw_counts({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3}, 100)
    assert sum(c.values()) == 100 and sorted(c.values()) == [33, 33, 34]
    assert weights_label({"oscillator": 1.0}) == "oscillator"
    assert weights_label({"oscillator": 0.625, "degeneracy": 0.375}) == "oscillator:0.62+degeneracy:0.38"


@pytest.fixture
def auto_sampler(mock_sampler, monkeypatch):
    """mock_sampler with the degeneracy kinds' parameters, and the evidence of each kind set per test."""
    mock_sampler["params"].update(L=-1e-3, lam=0.0)  # the floor just below the start: a stuck start
    mock_sampler["evidence"] = {}
    calls = []

    def fake_evidence(kind, arrays, prior, **kw):
        calls.append(kind.name)
        return mock_sampler["evidence"].get(kind.name, 0.0)

    monkeypatch.setattr(F, "run_evidence", fake_evidence)
    mock_sampler["evidence_calls"] = calls
    return mock_sampler


def test_auto_forecasts_a_flat_floor_prefix_as_a_possible_s_curve(auto_sampler):
    prior = ShapePrior(at_floor=(0.5, 0.5, 0.0), elsewhere=(1.0, 0.0, 0.0))
    fc = Forecaster(AUTO, shape=ShapeConfig(prior=prior), sampler=SMALL, outlook=False)
    fit = fc.fit(_floor_run())
    assert fit.shape_weights["r1"] == pytest.approx({"oscillator": 0.5, "degeneracy": 0.5})
    assert len(auto_sampler["calls"]) == 2  # one posterior fit per kind kept (the logistic kind: weight 0)
    code = fit.posterior[KIND_CODE].sel(run="r1").to_numpy().ravel()
    assert np.bincount(code, minlength=3).tolist() == [100, 100, 0]
    assert fit.table().iloc[0]["kind"] == "oscillator:0.50+degeneracy:0.50"
    # each kind's draws follow its own dynamics: the degeneracy draws (stiffness ~ 0 at the floor) have
    # not risen by the horizon, the oscillator's have
    paths = fit.paths("r1")
    end = paths.latent[:, -1]
    info = fit.infos["r1"]
    plateau = info.loc + info.scale  # r_star = 1 in normalised units
    assert np.all(end[code == 0] > 0.9 * plateau)
    assert np.all(end[code == 1] < 0.5 * plateau)
    fin = fit.final_draws("r1")
    assert np.quantile(fin, 0.9) > 0.9 * plateau and np.quantile(fin, 0.1) < 0.5 * plateau


def test_auto_weighs_kinds_by_their_evidence(auto_sampler):
    auto_sampler["evidence"] = {"oscillator": 0.0, "degeneracy": 3.0, "logistic": -2.0}
    prior = ShapePrior(at_floor=(1, 1, 1), elsewhere=(0.6, 0.2, 0.2))
    fc = Forecaster(AUTO, shape=ShapeConfig(prior=prior, min_weight=0.05), sampler=SMALL, outlook=False)  # fmt: skip
    fit = fc.fit(_rising_run())
    # the logistic kind (0.2 e^-2 / (0.6 + 0.2 e^3 + 0.2 e^-2) = 0.006 < 0.05) is dropped, the rest renormalised
    z = 0.6 + 0.2 * math.e**3
    assert fit.shape_weights["r1"] == pytest.approx({"oscillator": 0.6 / z, "degeneracy": 0.2 * math.e**3 / z})
    assert sorted(auto_sampler["evidence_calls"]) == ["degeneracy", "logistic", "oscillator"]


def test_auto_one_kind_costs_one_fit_and_equals_that_kind(auto_sampler):
    prior = ShapePrior(at_floor=(1, 0, 0), elsewhere=(1, 0, 0))
    auto = Forecaster(AUTO, shape=ShapeConfig(prior=prior), sampler=SMALL, outlook=False,
                      calibration=False).fit(_rising_run())  # fmt: skip
    assert len(auto_sampler["calls"]) == 1
    plain = Forecaster("oscillator", sampler=SMALL, calibration=False).fit(_rising_run())
    np.testing.assert_array_equal(auto.final_draws("r1"), plain.final_draws("r1"))
    assert auto.table().iloc[0]["kind"] == "oscillator"


def test_lagged_runs_get_the_linear_kinds_only(auto_sampler):
    runs = _rising_run()
    runs = RunSet.from_frames(runs.data, runs.meta.assign(refresh_interval=4).reset_index())
    prior = ShapePrior(at_floor=(1, 1, 1), elsewhere=(1, 1, 1))
    fit = Forecaster(AUTO, shape=ShapeConfig(prior=prior), sampler=SMALL, outlook=False).fit(runs)
    assert fit.shape_weights["r1"] == {"oscillator": 1.0}


def test_auto_save_load_roundtrip_and_hierarchical_refused(auto_sampler, tmp_path):
    prior = ShapePrior(at_floor=(0.5, 0.5, 0.0), elsewhere=(1.0, 0.0, 0.0))
    fit = Forecaster(AUTO, shape=ShapeConfig(prior=prior), sampler=SMALL).fit(_floor_run())  # packaged outlook
    fit.save(tmp_path / "f.nc")
    back = FittedForecast.load(tmp_path / "f.nc")
    assert back.shape_weights == fit.shape_weights and back.config.outlook == fit.config.outlook
    assert not back.config.outlook.is_identity
    pd.testing.assert_frame_equal(back.table().drop(columns="seconds"), fit.table().drop(columns="seconds"))
    with pytest.raises(F.ForecastError, match="hierarchical"):
        Forecaster(AUTO, hierarchical=True, sampler=SMALL).fit(_floor_run())


def test_the_outlook_moves_the_same_draws_in_paths_and_final(auto_sampler):
    """The one pipeline: the outlook's draws are the same on both roads, their number is the weight's share,
    their final rewards are the outlook's quantiles of level + z scale, and their paths end there."""
    from bayesgrpo.series import current_level

    r = np.r_[np.linspace(0.1, 0.9, 60), np.linspace(0.9, 0.6, 40)]  # past its peak
    ol = Outlook(grid=(0.1, 0.5), weight=(0.5, 0.5), quantiles=((-1.0, 0.0, 1.0), (-1.0, 0.0, 1.0)))
    fit = Forecaster("oscillator", sampler=SMALL, calibration=False, outlook=ol).fit(_run(r))
    base = Forecaster("oscillator", sampler=SMALL, calibration=False, outlook=False).fit(_run(r))
    fin, fin0 = fit.final_draws("r1"), base.final_draws("r1")
    moved = np.flatnonzero(fin != fin0)
    assert moved.size == round(0.5 * fin.size)
    level, scale = current_level(r), fit.infos["r1"].scale
    z = np.sort((fin[moved] - level) / scale)
    assert z[0] >= -1.0 - 1e-9 and z[-1] <= 1.0 + 1e-9 and abs(np.median(z)) < 0.02  # evenly spaced quantiles
    np.testing.assert_allclose(fit.paths("r1").latent[moved, -1], fin[moved], atol=0.05)
    keep = np.setdiff1d(np.arange(fin.size), moved)
    np.testing.assert_array_equal(fit.paths("r1").latent[keep], base.paths("r1").latent[keep])


def test_auto_with_spread_channels_fits_the_degeneracy_kind_with_them(auto_sampler, monkeypatch, tmp_path):
    """``--model auto --channels``: a run that logs a channel gets the spread graph for its degeneracy kind (whose
    draws are filtered with the channel) and the reward-only graph for the oscillator (its spread parameters NaN,
    its draws exactly as without channels); the block evidence is not computed on a spread graph."""
    from bayesgrpo.inference import sampling

    keys = []
    monkeypatch.setattr(sampling, "compile_model", lambda key, build, **kw: keys.append(key))
    auto_sampler["params"].update(nu=2.0, W=1.5)
    base = _floor_run()
    data = base.data.assign(reward_std=lambda d: np.sqrt(d["reward"] * (1 - d["reward"])) + 0.02)
    runs = RunSet.from_frames(data, base.meta.assign(group_size=4, batch_size=16).reset_index())
    prior = ShapePrior(at_floor=(0.5, 0.5, 0.0), elsewhere=(1.0, 0.0, 0.0))
    kw = dict(shape=ShapeConfig(prior=prior), sampler=SMALL, outlook=False)
    fit = Forecaster(AUTO, channels=("reward_std",), **kw).fit(runs)
    assert fit.shape_weights["r1"] == pytest.approx({"oscillator": 0.5, "degeneracy": 0.5})
    assert [k[0] for k in keys] == ["oscillator", "degeneracy"]
    assert "spread" not in keys[0] and "spread" in keys[1]
    assert auto_sampler["calls"][-1]["channels"].any()
    code = fit.posterior[KIND_CODE].sel(run="r1").to_numpy().ravel()
    nu = fit.posterior["nu"].sel(run="r1").to_numpy().ravel()
    assert np.all(np.isnan(nu[code == 0])) and np.all(nu[code == 1] == 2.0)
    plain = Forecaster(AUTO, **kw).fit(runs)
    a, b = fit.paths("r1").latent, plain.paths("r1").latent
    np.testing.assert_array_equal(a[code == 0], b[code == 0])
    assert not np.allclose(a[code == 1], b[code == 1])
    fit.save(tmp_path / "f.nc")
    back = FittedForecast.load(tmp_path / "f.nc")
    assert back.config.channels == ("reward_std",) and back.shape_weights == fit.shape_weights
    np.testing.assert_array_equal(back.final_draws("r1"), fit.final_draws("r1"))
    with pytest.raises(ValueError, match="degeneracy state"):
        Forecaster(AUTO, channels=("reward_std",), shape=ShapeConfig(kinds=("oscillator",), prior=ShapePrior(
            at_floor=(1.0,), elsewhere=(1.0,))))  # fmt: skip


def test_the_shipped_auto_package_data_loads_with_its_provenance():
    """The default's package data (bench/yardstick/study.py's choice on the selection sources): the shape
    configuration and the outlook load, name the study that chose them, and are what Forecaster() uses; no
    post-hoc interval layer or hazard ships (the study chose neither)."""
    from importlib.resources import files

    from bayesgrpo.forecast.outlook import Outlook

    res = files("bayesgrpo.resources")
    shape, ol = ShapeConfig.default(), Outlook.default()
    for prov in (shape.provenance, ol.provenance):
        assert prov["command"] == "nice .venv/bin/python -m bench.yardstick.study --ship"
        assert prov["study"] == "bench/results/yardstick/study.md" and prov["date"]
        assert "selection sources" in prov["data"]
    assert shape.kinds == ("oscillator", "stationary", "degeneracy") and len(shape.prior.at_floor) == 3
    assert not ol.is_identity and ol.grid == (0.1, 0.2, 0.3, 0.5) and all(0 <= w <= 1 for w in ol.weight)
    assert not res.joinpath("intervals_auto.json").is_file() and not res.joinpath("hazard.json").is_file()
    fc = Forecaster()
    assert fc.config.kind == "auto" and fc.config.shape == shape and fc.config.outlook == ol
    assert not hasattr(fc.config, "hazard") and not hasattr(fc.config, "intervals")
    assert Forecaster("oscillator").config.outlook.is_identity  # a single kind gets no auto data
    # p_gain's map is the default's own (the identity its stop thresholds were chosen on), not its first kind's
    from bayesgrpo.forecast.decision import DecisionCalibration

    assert fc.config.decision == DecisionCalibration.default("auto", 0.05) and fc.config.decision.method == "identity"
    assert Forecaster("oscillator").config.decision.method != "identity"
