"""Forecast contract with mocked sampling, definitions, save/load, errors; one real recovery test."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bayesgrpo.errors import ForecastError
from bayesgrpo.forecast import TABLE_COLUMNS, FittedForecast, Forecaster, SamplerConfig
from bayesgrpo.schema import RunSet


def _runs(n_steps=120, interval=1, seed=0, r0=0.1, r_star=0.7, tau=60.0, noise=0.05, run_id="r1", max_steps=400):
    rng = np.random.default_rng(seed)
    steps = np.arange(1, n_steps + 1, interval)
    mean = r_star - (r_star - r0) * np.exp(-(steps - 1) / tau)
    df = pd.DataFrame({"run_id": run_id, "step": steps, "reward": mean + noise * rng.standard_normal(len(steps))})
    meta = pd.DataFrame({"run_id": [run_id], "max_steps": [max_steps], "beta1": [0.9]})
    return RunSet.from_frames(df, meta)


SMALL = SamplerConfig(draws=200, tune=10, chains=2, seed=3)


def test_table_contract_and_definitions(mock_sampler):
    runs = _runs()
    fit = Forecaster(sampler=SMALL).fit(runs)
    tab = fit.table()
    assert list(tab.columns) == TABLE_COLUMNS
    row = tab.iloc[0]
    info = fit.infos["r1"]
    assert row.observed_until == 120 and row.n_obs == 120 and row.horizon == 400
    # normalised plateau 1.0 -> run units loc + scale
    assert row.plateau_q50 == pytest.approx(info.loc + info.scale, rel=1e-6)
    # deterministic posterior: latent reaches the plateau; final = plateau within measurement noise of the mean
    assert row.final_q50 == pytest.approx(info.loc + info.scale, abs=0.02 * info.scale)
    assert row.final_q05 <= row.final_q50 <= row.final_q95
    # stop step = first step of the mean recursion from R0 with 95% of the gain: the dynamics core's
    # independent implementation (tau_s = 48 here, not c/k = 60: a is not deep in the overdamped limit)
    from bench.physics_reference import time_to_fraction

    expected = 1 + time_to_fraction(0.95, r0=0.0, r_star=1.0, a=0.1 / 60, momentum=0.9)
    assert row.stop_q50 == pytest.approx(expected, abs=1)
    assert row.p_stop_before_horizon == 1.0
    assert row.p_unstable == 0.0


def test_final_window_uses_logged_grid_and_observed_points(mock_sampler):
    runs = _runs(n_steps=395, interval=5)  # logs steps 1, 6, ..., 391; horizon 400
    fit = Forecaster(sampler=SMALL).fit(runs)
    info = fit.infos["r1"]
    win = info.final_steps(0.1)
    assert win.min() > 1 + 0.9 * (400 - 1) and win.max() == 400
    assert set(np.diff(win)) <= {5, 4, 1}
    # the part of the window already logged enters as observed values
    obs = runs.run("r1")
    logged = obs.loc[obs.step > 1 + 0.9 * 399, "reward"]
    assert len(logged) > 0
    fin = fit.final_draws("r1")
    assert np.isfinite(fin).all() and fin.shape == (400,)


def test_stop_step_censored_when_gain_not_reached(mock_sampler):
    mock_sampler["params"]["tau"] = 5000.0
    fit = Forecaster(sampler=SMALL).fit(_runs())
    row = fit.table().iloc[0]
    assert row.p_stop_before_horizon == 0.0
    assert row.stop_q50 == 400


def test_save_load_roundtrip_identical(mock_sampler, tmp_path):
    mock_sampler["spread"] = 0.1
    runs = _runs()
    fit = Forecaster(sampler=SMALL).fit(runs)
    path = tmp_path / "fit.nc"
    fit.save(path)
    back = FittedForecast.load(path)
    pd.testing.assert_frame_equal(fit.table(), back.table())
    assert back.config == fit.config and back.sampler == fit.sampler


def test_errors_name_the_run():
    few = RunSet.from_frames(pd.DataFrame({"run_id": "tiny", "step": [1, 2], "reward": [0.1, 0.2]}))
    with pytest.raises(ForecastError, match=r"'tiny'.*2 logged reward point"):
        Forecaster().fit(few, horizon=100)
    runs = _runs(max_steps=np.nan)
    with pytest.raises(ForecastError, match=r"'r1'.*no horizon"):
        Forecaster().fit(runs)
    with pytest.raises(ForecastError, match="horizon 50 is not after the last logged step 120"):
        Forecaster().fit(_runs(), horizon=50)


def test_constant_curve_warns(mock_sampler):
    from bayesgrpo.errors import DataWarning

    df = pd.DataFrame({"run_id": "flat", "step": np.arange(1, 31), "reward": 5.0})
    runs = RunSet.from_frames(df)
    with pytest.warns(DataWarning, match="'flat'.*constant.*assumed scale of 0.5"):
        fit = Forecaster(sampler=SMALL).fit(runs, horizon=100)
    assert fit.infos["flat"].scale == pytest.approx(0.5) and fit.infos["flat"].bounds == ""
    # a constant 0-1 reward: bounds [0, 1] inferred, the scale is a quarter of that range, no warning
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        fit = Forecaster(sampler=SMALL).fit(RunSet.from_frames(df.assign(reward=0.5)), horizon=100)
    assert fit.infos["flat"].scale == pytest.approx(0.25) and fit.infos["flat"].bounds == "inferred"


@pytest.mark.slow
def test_recovers_plateau_and_timescale_from_simulated_run():
    """Real NUTS on a run simulated from recursion (1): the posterior covers the true plateau."""
    from bench.physics_reference import simulate

    a, mu, r0, r_star = 0.002, 0.9, 0.2, 0.75
    sim = simulate(300, r0=r0, r_star=r_star, a=a, momentum=mu, sigma_p=0.002, sigma_m=0.05, seed=11)
    df = pd.DataFrame({"run_id": "sim", "step": np.arange(300), "reward": sim.observed})
    # a second run of another shape in the same call: each run must be fitted to its OWN data
    # (regression test: the compiled model's data must really be swapped between runs)
    falling = simulate(300, r0=0.8, r_star=0.3, a=0.01, momentum=0.5, sigma_p=0.002, sigma_m=0.05, seed=12)
    df2 = pd.DataFrame({"run_id": "fall", "step": np.arange(300), "reward": falling.observed})
    runs = RunSet.from_frames(pd.concat([df, df2]), pd.DataFrame({"run_id": ["sim", "fall"], "beta1": [mu, 0.5]}))
    # the physics alone (the packaged calibration layer, tested elsewhere, widens the final interval)
    fit = Forecaster(sampler=SamplerConfig(draws=600, tune=600, seed=1), calibration=False).fit(runs, horizon=600)
    tab = fit.table().set_index("run_id")
    assert tab.loc["fall", "plateau_q05"] <= 0.3 <= tab.loc["fall", "plateau_q95"]
    assert tab.loc["fall", "final_q95"] < 0.45 < 0.65 < tab.loc["sim", "final_q05"]
    row = tab.loc["sim"]
    assert row.plateau_q05 <= r_star <= row.plateau_q95
    assert row.r_hat_max < 1.02 and row.divergences < 10
    tau = fit.paths("sim").tau
    true_tau = (1 - mu) / a  # overdamped-limit timescale c/k = 50 steps
    assert np.quantile(tau, 0.05) <= true_tau <= np.quantile(tau, 0.95)


def test_forecast_and_budget_agree_on_the_stop_step(mock_sampler):
    """The no-cost budget recommendation IS the forecast's stop_q50 (one definition, same draws), in
    the over- and the underdamped regime."""
    from bayesgrpo.decisions import recommend_stop
    from bayesgrpo.physics.stability import is_underdamped

    for tau, mu in ((60.0, 0.9), (3.0, 0.9)):  # a = 0.0017 (overdamped), a = 0.033 (underdamped, rings)
        mock_sampler["params"].update(tau=tau, mu=mu)
        mock_sampler["spread"] = 0.0
        fit = Forecaster(sampler=SMALL).fit(_runs(n_steps=5))
        row = fit.table().iloc[0]
        draws = fit.paths("r1")
        assert is_underdamped(draws.a, draws.mu).all() == (tau == 3.0)
        rec = recommend_stop(draws)
        assert rec.step == row.stop_q50 and rec.rule.startswith("stop step")


def test_saved_forecast_of_format_1_still_loads():
    """A forecast saved by bayesgrpo 0.1 (tests/data/artefacts/forecast_v1.nc, no schema attribute)
    loads; its posterior, configuration and final-reward forecast are what was saved then (the
    table saved beside it), up to the Monte-Carlo error of re-drawing the paths."""
    data = Path(__file__).parent / "data" / "artefacts"
    fit = FittedForecast.load(data / "forecast_v1.nc")
    old = pd.read_csv(data / "forecast_v1_table.csv").iloc[0]
    assert fit.forecast_ids == ["old-run"] and fit.config.kind == "oscillator"
    assert fit.posterior["r_star"].shape == (2, 50, 1)
    row = fit.table().iloc[0]
    assert row.plateau_q50 == pytest.approx(old.plateau_q50, rel=1e-12)  # posterior draws: exactly as saved
    for q in ("final_q10", "final_q50", "final_q90"):
        assert row[q] == pytest.approx(old[q], abs=0.15 * (old.final_q95 - old.final_q05))


def test_unknown_artefact_format_is_refused(tmp_path, mock_sampler):
    import xarray as xr

    from bayesgrpo.errors import ArtefactError

    fit = Forecaster(sampler=SMALL).fit(_runs())
    dt = fit.to_datatree()
    dt.attrs["bayesgrpo_schema"] = "bayesgrpo.forecast/99"
    dt.to_netcdf(tmp_path / "future.nc", engine="h5netcdf")
    with pytest.raises(ArtefactError, match=r"format 'bayesgrpo.forecast/99'.*cannot read"):
        FittedForecast.load(tmp_path / "future.nc")
    xr.Dataset({"x": ("t", np.arange(3.0))}).to_netcdf(tmp_path / "other.nc", engine="h5netcdf")
    with pytest.raises(ArtefactError, match="not a saved bayesgrpo forecast"):
        FittedForecast.load(tmp_path / "other.nc")
    assert fit.to_datatree().attrs["population_prior"] == fit.config.prior.identity


def test_load_file_without_refresh_data(mock_sampler, tmp_path):
    """Files written before the refresh Op stored a lag one-hot, not ``refresh``: K comes from the run info."""
    runs = _runs()
    runs.meta["refresh_interval"] = 8
    fit = Forecaster(sampler=SMALL).fit(runs)
    assert list(fit.arrays.refresh) == [8]
    dt = fit.to_datatree()
    const = dt["constant_data"].to_dataset().drop_vars("refresh")
    dt["constant_data"] = xr.DataTree(const)
    path = tmp_path / "old.nc"
    dt.to_netcdf(str(path), engine="h5netcdf")
    back = FittedForecast.load(path)
    assert list(back.arrays.refresh) == [8] and back.arrays.refresh.dtype == np.int64
    pd.testing.assert_frame_equal(fit.table(), back.table())


def test_nuts_swaps_refresh_interval_with_the_data(monkeypatch):
    """One compiled model serves runs of every K: the batch's ``refresh`` reaches with_data."""
    import types

    from bayesgrpo.inference import nuts_core, sampling
    from bayesgrpo.models.arrays import prepare_arrays

    runs = _runs()
    runs.meta["refresh_interval"] = 32
    arr = prepare_arrays(runs)[0]
    seen = {}

    class FakeCompiled:
        shared_var_keys = tuple(
            types.SimpleNamespace(name=n) for n in ("y", "mask", "refresh", "span", "noise", "r0_obs")
        )

        def with_data(self, **kw):
            seen.update(kw)
            return self

    # the sampler itself is faked: nutpie's Rust core (nuts_core.start) as sampling.nuts calls it
    draws = types.SimpleNamespace(dataset=lambda group: f"sampled {group}")
    monkeypatch.setattr(nuts_core, "start", lambda cm, **kw: types.SimpleNamespace(wait=lambda: draws))
    req = ("y", "mask", "refresh")
    got = sampling.nuts(FakeCompiled(), data=arr.data(), sampler=SMALL, seed=0, required=req)
    assert got == {"posterior": "sampled posterior", "sample_stats": "sampled sample_stats"}
    np.testing.assert_array_equal(seen["refresh"], arr.refresh)
    assert seen["refresh"][0] == 32 and set(seen) == {"y", "mask", "refresh", "span", "noise", "r0_obs"}
    FakeCompiled.shared_var_keys = FakeCompiled.shared_var_keys[:2]  # a model without the refresh data
    with pytest.raises(RuntimeError, match="refresh"):
        sampling.nuts(FakeCompiled(), data=arr.data(), sampler=SMALL, seed=0, required=req)


def test_unstable_share_equals_spectral_radius_per_draw():
    """The vectorised instability flag of lagged draws equals dynamics.spectral_radius draw by draw."""
    from bayesgrpo.physics.stability import is_stable, spectral_radius

    rng = np.random.default_rng(4)
    for K in (2, 7, 32, 128):
        a_star = (1 - 0.9) / K  # first-order threshold: draws on both sides of the exact one
        a, mu = a_star * rng.uniform(0.2, 4.0, 300), rng.uniform(0.8, 0.95, 300)
        ref = np.array([spectral_radius(a=x, momentum=m, refresh_interval=K) >= 1 for x, m in zip(a, mu, strict=True)])
        assert 0 < ref.mean() < 1
        np.testing.assert_array_equal(~is_stable(a, mu, refresh_interval=K), ref)


def test_context_prior_pools_toward_the_source():
    from bayesgrpo.models.kinds import default_prior
    from bayesgrpo.models.prior import context_prior

    base = default_prior()
    m0 = float(base.values_at([0.3])["gain_mu"][0])
    s0 = float(base.values_at([0.3])["gain_sd"][0])
    rows = [dict(gain=m0 + 2.0 + 0.01 * k, log_tau=4.0, log_wander=-1.0, log_delta=np.nan) for k in range(8)]
    one = context_prior(base, rows[:1], fraction=0.3)
    many = context_prior(base, rows, fraction=0.3)
    # one run moves the mean halfway (its scatter is not known: the population's), eight consistent runs
    # nearly all the way; a new run of the source keeps a within-source scatter
    assert one.gain_mu == pytest.approx(m0 + 0.5 * 2.0, abs=0.01)
    assert m0 + 1.9 < many.gain_mu < m0 + 2.0
    assert many.gain_sd >= 0.5 * s0 and not many.by_fraction
    assert many.log_delta_mu == base.log_delta_mu  # no information: the population's


def test_forecast_with_context_uses_the_pooled_prior(mock_sampler):
    runs = _runs(run_id="new")
    ctx = RunSet.from_frames(pd.concat([_runs(run_id=f"old{k}", n_steps=300).data for k in range(3)]))
    fit = Forecaster(sampler=SMALL).fit(runs, context=ctx)
    assert fit.forecast_ids == ["new"] and set(fit.context_priors) == {"new"}
    assert fit.context_priors["new"].startswith("context-3-runs@")
    # the forecast run's batch carried the pooled prior, not the population prior
    last = mock_sampler["calls"][-1]
    pop = fit.config.prior.values_at(fit.arrays.fraction)["gain_mu"]
    assert last["y"].shape[1] == 1 and not np.isclose(last["prior_gain_mu"][0], pop[0])


@pytest.mark.parametrize("kind", ["oscillator", "degeneracy", "logistic", "saturation", "scaling"])
def test_every_kind_keeps_what_its_forecast_needs(mock_sampler, kind):
    """A fit keeps a subset of the posterior (STORED_VARS): every kind's forecast parameters must be in it
    (the logistic kind's lam was once dropped, and every logistic forecast failed)."""
    from bayesgrpo.forecast.config import STORED_VARS
    from bayesgrpo.models.kinds import get_kind

    assert set(get_kind(kind).param_names) <= set(STORED_VARS)
    mock_sampler["params"].update(L=-0.5, lam=1.0)
    tab = Forecaster(kind, sampler=SMALL).fit(_runs()).table()
    assert len(tab) == 1 and np.isfinite(tab[["final_q05", "final_q50", "final_q95", "stop_q50"]].to_numpy(float)).all()


def test_posterior_of_a_prefix_does_not_depend_on_the_horizon():
    """Real sampling: the same prefix (planned length known) forecast to two horizons has the same posterior
    (the timescale prior is in steps; the horizon only decides how far the paths are propagated)."""
    runs = _runs(n_steps=120, max_steps=400)
    smp = SamplerConfig(draws=100, tune=100, chains=2, seed=5)
    a = Forecaster(sampler=smp, calibration=False).fit(runs, horizon=300)
    b = Forecaster(sampler=smp, calibration=False).fit(runs, horizon=600)
    for v in ("r_star", "tau", "mu", "sigma_m"):
        np.testing.assert_array_equal(a.posterior[v].to_numpy(), b.posterior[v].to_numpy())
    assert a.infos["r1"].horizon == 300 and b.infos["r1"].horizon == 600
    assert b.table()["final_q50"].iloc[0] >= a.table()["final_q50"].iloc[0] - 0.02  # farther on a rising curve


def test_flat_prefix_at_the_floor_is_not_a_narrow_future():
    """Real sampling, the verl-like case of physics.md section 9: a 0/1-reward pass rate logged as exactly 0.01
    for 25 of 116 steps. The sampler must not stick (a constant prefix once gave r_hat > 2 and a zero-width
    interval), and the packaged calibration layer (the population's late rises) must keep room above."""
    steps = np.arange(1, 26)
    runs = RunSet.from_frames(pd.DataFrame({"run_id": "flat", "step": steps, "reward": 0.01}),
                              pd.DataFrame({"run_id": ["flat"], "max_steps": [116]}))  # fmt: skip
    smp = SamplerConfig(draws=300, tune=300, chains=2, seed=0)
    fit = Forecaster("oscillator", sampler=smp).fit(runs, horizon=116)  # bounds [0, 1] inferred: the scale is known
    row = fit.table().iloc[0]
    assert row.r_hat_max < 1.05
    assert fit.config.calibration.c_up and row.final_q90 - row.final_q50 >= 0.03  # room above: 3x the current level
    assert 0.0 <= row.final_q05 <= row.final_q50 <= 0.1  # most likely still near the floor by step 116
    raw = Forecaster("oscillator", sampler=smp, calibration=False).fit(runs, horizon=116).table().iloc[0]
    assert raw.final_q90 - raw.final_q50 < row.final_q90 - row.final_q50


# ------------------------------------------------------------------ the API of a fit: ArviZ data, identity, any horizon
def test_saved_forecast_of_format_2_loads_and_forecasts_exactly_as_then(monkeypatch):
    """A forecast saved by the landed code of bayesgrpo 0.1 in format 2 (tests/data/artefacts/forecast_v2.nc:
    the example run to step 120, real sampling) loads and gives the table saved beside it, number for number
    (its config said ``model`` for the kind and carried the identity fields of the calibration variants),
    under the rules of then. Two rules of issue 19 changed numbers since, and only those: a horizon (400)
    before the planned length (max_steps 500) gets its pro-rata share of the calibration layer's widening
    (item 7: one horizon), and a gain below one reward scale unit settles in a band of the scale (item 8)."""
    import bayesgrpo.physics.stopping as stopping
    from bayesgrpo.models.arrays import RunInfo

    data = Path(__file__).parent / "data" / "artefacts"
    old = pd.read_csv(data / "forecast_v2_table.csv")
    num = [c for c in old.columns if c not in ("run_id", "model")]
    now = FittedForecast.load(data / "forecast_v2.nc").table()
    changed = {c for c in num if not np.allclose(now[c].to_numpy(float), old[c].to_numpy(float), rtol=1e-12, atol=0)}
    assert changed and changed <= {"final_mean", *(f"final_q{q}" for q in ("05", "10", "25", "50", "75", "90", "95")),
                                   "stop_q05", "stop_q50", "stop_q95", "p_stop_before_horizon"}, changed  # fmt: skip
    # the rules of then: the widening by the time to the horizon, the band 1 - fraction whatever the gain
    band = stopping.band
    monkeypatch.setattr(stopping, "band", lambda fraction, gain=None: band(fraction, None))
    monkeypatch.setattr(RunInfo, "time_to_go", lambda self, steps: np.clip(
        (np.asarray(steps, dtype=float) - self.last_step) / max(1, self.horizon - self.last_step), 0.0, 1.0))  # fmt: skip
    fit = FittedForecast.load(data / "forecast_v2.nc")
    assert fit.config.kind == "oscillator" and fit.sample_stats is None  # format 2 kept no sampler statistics
    new = fit.table()
    assert list(new["kind"]) == list(old["model"])
    np.testing.assert_allclose(new[num].to_numpy(float), old[num].to_numpy(float), rtol=1e-12, atol=0)


def test_saved_file_is_arviz_inference_data(mock_sampler, tmp_path):
    import arviz as az

    mock_sampler["spread"] = 0.1
    fit = Forecaster(sampler=SMALL).fit(_runs())
    fit.save(tmp_path / "fit.nc")
    dt = xr.open_datatree(str(tmp_path / "fit.nc"), engine="h5netcdf")
    for group in ("posterior", "sample_stats", "observed_data", "posterior_predictive", "constant_data"):
        assert group in dt.children, group
    assert dt["sample_stats"]["diverging"].dims == ("chain", "draw", "run")
    assert dt["observed_data"]["reward"].sizes["step"] == 120
    summ = az.summary(dt, var_names=["r_star", "tau"], kind="stats", ci_prob=0.9)
    assert len(summ) == 2  # one row per variable and run
    pp = dt["posterior_predictive"]["final_reward"].to_numpy().ravel()
    assert np.median(pp) == pytest.approx(fit.table()["final_q50"].iloc[0], rel=1e-12)
    assert dt.attrs["model_identity"] == fit.config.identity and dt.attrs["bayesgrpo_schema"] == "bayesgrpo.forecast/3"
    back = FittedForecast.load(tmp_path / "fit.nc")
    xr.testing.assert_identical(back.sample_stats, fit.sample_stats)


def test_identity_is_checked_on_load(mock_sampler, tmp_path):
    from bayesgrpo.errors import ArtefactError

    fc = Forecaster("oscillator", sampler=SMALL)
    fit = fc.fit(_runs())
    fit.save(tmp_path / "fit.nc")
    assert FittedForecast.load(tmp_path / "fit.nc", expected=fc).config.identity == fc.config.identity
    with pytest.raises(ArtefactError, match=r"saved by a different model.*kind oscillator.*kind saturation"):
        FittedForecast.load(tmp_path / "fit.nc", expected=Forecaster("saturation"))
    with pytest.raises(ArtefactError, match="saved by a different model"):
        FittedForecast.load(tmp_path / "fit.nc", expected=Forecaster(final_window=0.2))
    dt = fit.to_datatree()
    dt.attrs["model_identity"] = "sha256:0000000000000000"
    dt.to_netcdf(str(tmp_path / "edited.nc"), engine="h5netcdf")
    with pytest.raises(ArtefactError, match=r"does not match its configuration.*edited or is damaged"):
        FittedForecast.load(tmp_path / "edited.nc")
    # the identity is the model's, not the sampler's
    assert Forecaster("oscillator", sampler=SamplerConfig(draws=50)).config.identity == fc.config.identity


def test_predict_to_any_horizon_without_refitting(mock_sampler):
    mock_sampler["spread"] = 0.1
    runs = _runs(max_steps=400)
    fit = Forecaster(sampler=SMALL).fit(runs, horizon=300)
    n_calls = len(mock_sampler["calls"])
    far = fit.predict(horizon=600)
    assert len(mock_sampler["calls"]) == n_calls  # nothing sampled again
    assert far.posterior is fit.posterior and far.infos["r1"].planned == fit.infos["r1"].planned == 400
    assert fit.infos["r1"].horizon == 300 and far.infos["r1"].horizon == 600  # the fit itself is unchanged
    # the same numbers as a fit made to that horizon (the posterior depends on the planned length only)
    direct = Forecaster(sampler=SMALL).fit(runs, horizon=600)
    cols = [c for c in TABLE_COLUMNS if c != "seconds"]
    pd.testing.assert_frame_equal(far.table()[cols], direct.table()[cols])
    pd.testing.assert_frame_equal(fit.table(horizon=600)[cols], direct.table()[cols])
    assert far.paths("r1").steps[-1] == 600 and fit.paths("r1").steps[-1] == 300
    with pytest.raises(ForecastError, match="run 'r1': the horizon 100 is not after the last logged step 120"):
        fit.predict(horizon=100)
    assert fit.predict(horizon={"r1": 500}).table()["horizon"].iloc[0] == 500


def test_sampler_retry_settings_and_trigger():
    """A run whose chains disagree (r_hat > 1.01) or diverged is sampled again, once, with twice the draws,
    1.25x the tuning and target_accept 0.995; short chains (r_hat noisy by itself) and retry=False never."""
    from bayesgrpo.inference import sampling

    s = SamplerConfig()
    again = s.retried()
    assert (again.draws, again.tune, again.target_accept, again.retry) == (2000, 1000, 0.995, False)
    assert SamplerConfig(target_accept=0.999).retried().target_accept == 0.999  # never a larger step
    bad_rhat = {"r_hat_max": 1.02, "ess_min": 900.0, "divergences": 0}
    bad_div = {"r_hat_max": 1.001, "ess_min": 900.0, "divergences": 1}
    good = {"r_hat_max": 1.005, "ess_min": 900.0, "divergences": 0}
    assert sampling.needs_retry(bad_rhat, s) and sampling.needs_retry(bad_div, s)
    assert not sampling.needs_retry(good, s)
    assert not sampling.needs_retry({"r_hat_max": float("nan"), "ess_min": float("nan"), "divergences": 0}, s)
    assert not sampling.needs_retry(bad_rhat, SamplerConfig(retry=False))
    assert not sampling.needs_retry(bad_rhat, again)  # a retry is never retried
    assert not sampling.needs_retry(bad_div, SamplerConfig(draws=sampling.RETRY_MIN_DRAWS - 1))
    div = np.array([[False, True, False, False], [False, False, False, False]])
    ds = xr.Dataset({"x": (("chain", "draw"), np.arange(8.0).reshape(2, 4)), "diverging": (("chain", "draw"), div)},
                    coords={"draw": [10, 11, 12, 13]})  # fmt: skip
    th = sampling.thinned(ds, 2)
    assert th["x"].values.tolist() == [[0.0, 2.0], [4.0, 6.0]] and th["draw"].values.tolist() == [0, 1]
    assert th["diverging"].values.tolist() == [[True, False], [False, False]]  # a dropped divergence is kept
    assert sampling.thinned(ds, 4) is ds
    assert sampling.retry_seed(3) == sampling.retry_seed(3) != 3 and sampling.retry_seed(3) != sampling.retry_seed(4)


def test_a_run_whose_chains_disagree_is_sampled_again(mock_sampler):
    """Through the forecaster: the first chains disagree (mock chain shift) -> a second NUTS call with the
    retry's settings, whose draws are thinned back to the asked number; the reported health is the second
    call's; a healthy run is sampled once."""
    from bayesgrpo.inference import sampling

    asked, seeds = [], []
    fake = sampling.nuts

    def nuts(compiled, *, sampler, seed, **kw):
        asked.append(sampler)
        seeds.append(seed)
        mock_sampler["chain_shift"] = 0.0 if len(asked) > 1 else 0.5  # the second sampling mixes
        return fake(compiled, sampler=sampler, seed=seed, **kw)

    sampling.nuts = nuts  # the fixture's monkeypatch restores the module attribute after the test
    mock_sampler["spread"] = 0.05
    cfg = SamplerConfig(draws=600, tune=100, seed=1)
    fit = Forecaster(sampler=cfg).fit(_runs())
    assert [a.draws for a in asked] == [600, 1200] and asked[1].target_accept == 0.995
    assert seeds[1] == sampling.retry_seed(seeds[0]) != seeds[0]
    assert fit.posterior.sizes["draw"] == 600 and fit.sample_stats.sizes["draw"] == 600
    assert fit.health["r1"]["r_hat_max"] < 1.01
    # the health reported is that of the 2 x 600 draws kept (independent mock draws: ESS ~1200), not of the
    # 2 x 1200 sampled (~2400)
    assert 900 < fit.health["r1"]["ess_min"] < 1600
    asked.clear()
    Forecaster(sampler=cfg.model_copy(update={"retry": False})).fit(_runs())
    assert [a.draws for a in asked] == [600]


def test_a_saved_fit_from_before_the_retry_loads_as_sampled_without_it():
    from bayesgrpo.forecast.artefact import _sampler

    assert _sampler('{"draws": 300, "tune": 200, "chains": 2, "seed": 1}').retry is False
    assert _sampler(SamplerConfig().model_dump_json()) == SamplerConfig()
