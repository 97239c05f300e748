"""Forecast contract with mocked sampling, definitions, save/load, errors; one real recovery test."""

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


@pytest.fixture
def mock_sampler(monkeypatch):
    """Replace compile + NUTS with draws around fixed normalised parameters (no MCMC)."""
    import bayesgrpo.forecast as fc

    state = {"params": dict(r0=0.0, r_star=1.0, tau=60.0, mu=0.9, sigma_p=1e-6, sigma_m=0.01), "spread": 0.0}

    def fake_nuts(compiled, arr, sampler, seed):
        rng = np.random.default_rng(seed)
        C, D, R = sampler.chains, sampler.draws, len(arr.run_ids)
        p = state["params"]
        post = {}
        for k, v in p.items():
            vals = np.full((C, D, R), float(v))
            if state["spread"] and k in ("r_star",):
                vals = vals + state["spread"] * rng.standard_normal((C, D, R))
            post[k] = (("chain", "draw", "run"), vals)
        post["a"] = (("chain", "draw", "run"), (1 - post["mu"][1]) / post["tau"][1])
        post["wander"] = (("chain", "draw", "run"), np.full((C, D, R), 0.01) + 1e-3 * rng.standard_normal((C, D, R)))
        for k in ("r0", "r_star", "tau", "sigma_m"):
            post[k] = (post[k][0], post[k][1] + 1e-9 * rng.standard_normal((C, D, R)))
        ds = xr.Dataset(post, coords={"chain": np.arange(C), "draw": np.arange(D), "run": list(arr.run_ids)})
        stats = xr.Dataset({"diverging": (("chain", "draw"), np.zeros((C, D), bool))})
        return {"posterior": ds, "sample_stats": stats}

    monkeypatch.setattr(fc, "_compiled_model", lambda arr, **kw: None)
    monkeypatch.setattr(fc, "_nuts", fake_nuts)
    return state


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
    from bayesgrpo.dynamics import time_to_fraction

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
    """One compiled model serves runs of every K: _nuts must pass each batch's ``refresh`` to with_data."""
    import types

    import nutpie

    import bayesgrpo.forecast as fc
    from bayesgrpo.prepare import prepare_arrays

    runs = _runs()
    runs.meta["refresh_interval"] = 32
    arr = fc._subset(prepare_arrays(runs)[0], [0])
    seen = {}

    class FakeCompiled:
        shared_var_keys = [types.SimpleNamespace(name=n) for n in ("y", "mask", "refresh", "span", "noise", "r0_obs")]

        def with_data(self, **kw):
            seen.update(kw)
            return self

    monkeypatch.setattr(nutpie, "sample", lambda cm, **kw: "sampled")
    assert fc._nuts(FakeCompiled(), arr, SMALL, seed=0) == "sampled"
    np.testing.assert_array_equal(seen["refresh"], arr.refresh)
    assert seen["refresh"][0] == 32 and set(seen) == {"y", "mask", "refresh", "span", "noise", "r0_obs"}
    FakeCompiled.shared_var_keys = FakeCompiled.shared_var_keys[:2]  # a model without the refresh data
    with pytest.raises(RuntimeError, match="refresh"):
        fc._nuts(FakeCompiled(), arr, SMALL, seed=0)


def test_errors_name_the_run():
    few = RunSet.from_frames(pd.DataFrame({"run_id": "tiny", "step": [1, 2, 3], "reward": [0.1, 0.2, 0.1]}))
    with pytest.raises(ForecastError, match="'tiny'.*3 logged reward point"):
        Forecaster().fit(few, horizon=100)
    runs = _runs(max_steps=np.nan)
    with pytest.raises(ForecastError, match="'r1'.*no horizon"):
        Forecaster().fit(runs)
    with pytest.raises(ForecastError, match="horizon 50 is not after the last logged step 120"):
        Forecaster().fit(_runs(), horizon=50)


def test_constant_curve_warns(mock_sampler):
    from bayesgrpo.errors import DataWarning

    df = pd.DataFrame({"run_id": "flat", "step": np.arange(1, 31), "reward": 0.5})
    runs = RunSet.from_frames(df)
    with pytest.warns(DataWarning, match="'flat'.*constant"):
        Forecaster(sampler=SMALL).fit(runs, horizon=100)


@pytest.mark.slow
def test_recovers_plateau_and_timescale_from_simulated_run():
    """Real NUTS on a run simulated from recursion (1): the posterior covers the true plateau."""
    from bayesgrpo.dynamics import simulate

    a, mu, r0, r_star = 0.002, 0.9, 0.2, 0.75
    sim = simulate(300, r0=r0, r_star=r_star, a=a, momentum=mu, sigma_p=0.002, sigma_m=0.05, seed=11)
    df = pd.DataFrame({"run_id": "sim", "step": np.arange(300), "reward": sim.observed})
    # a second run of another shape in the same call: each run must be fitted to its OWN data
    # (regression test: the compiled model's data must really be swapped between runs)
    falling = simulate(300, r0=0.8, r_star=0.3, a=0.01, momentum=0.5, sigma_p=0.002, sigma_m=0.05, seed=12)
    df2 = pd.DataFrame({"run_id": "fall", "step": np.arange(300), "reward": falling.observed})
    runs = RunSet.from_frames(pd.concat([df, df2]), pd.DataFrame({"run_id": ["sim", "fall"], "beta1": [mu, 0.5]}))
    fit = Forecaster(sampler=SamplerConfig(draws=600, tune=600, seed=1)).fit(runs, horizon=600)
    tab = fit.table().set_index("run_id")
    assert tab.loc["fall", "plateau_q05"] <= 0.3 <= tab.loc["fall", "plateau_q95"]
    assert tab.loc["fall", "final_q95"] < 0.45 < 0.65 < tab.loc["sim", "final_q05"]
    row = tab.loc["sim"]
    assert row.plateau_q05 <= r_star <= row.plateau_q95
    assert row.r_hat_max < 1.02 and row.divergences < 10
    tau = fit.paths("sim").tau
    true_tau = (1 - mu) / a  # overdamped-limit timescale c/k = 50 steps
    assert np.quantile(tau, 0.05) <= true_tau <= np.quantile(tau, 0.95)


def test_unstable_share_equals_spectral_radius_per_draw():
    """The vectorised instability flag of lagged runs equals dynamics.spectral_radius draw by draw."""
    import types

    from bayesgrpo.dynamics import spectral_radius
    from bayesgrpo.forecast import _unstable

    rng = np.random.default_rng(4)
    for K in (2, 7, 32, 128):
        a_star = (1 - 0.9) / K  # first-order threshold: draws on both sides of the exact one
        pd_ = types.SimpleNamespace(a=a_star * rng.uniform(0.2, 4.0, 300), mu=rng.uniform(0.8, 0.95, 300), refresh_interval=K)
        ref = np.array([spectral_radius(a=x, momentum=m, refresh_interval=K) >= 1 for x, m in zip(pd_.a, pd_.mu)])
        assert 0 < ref.mean() < 1
        np.testing.assert_array_equal(_unstable(pd_), ref)
