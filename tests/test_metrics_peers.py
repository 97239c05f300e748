"""Tests of bayesgrpo.evaluation.metrics (scores, final-window target) and bayesgrpo.evaluation.peers (benchmarks)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bayesgrpo.evaluation import metrics as M
from bayesgrpo.evaluation.peers import PEERS, PeerForecast, get_peer


# ----------------------------------------------------------------------------------------- CRPS
def crps_normal(mu, sigma, y):
    """Closed-form CRPS of a Normal(mu, sigma) forecast at ``y`` (Gneiting & Raftery 2007): the reference."""
    mu, sigma, y = (np.asarray(a, dtype=float) for a in (mu, sigma, y))
    z = (y - mu) / sigma
    return sigma * (z * (2 * stats.norm.cdf(z) - 1) + 2 * stats.norm.pdf(z) - 1 / np.sqrt(np.pi))


def test_crps_matches_normal_closed_form():
    mu, s, y = 0.3, 1.7, 1.1
    draws = stats.norm.ppf((np.arange(20000) + 0.5) / 20000, loc=mu, scale=s)
    exact = crps_normal(mu, s, y)
    assert M.crps_sample(draws, y) == pytest.approx(float(exact), rel=2e-3)
    rng = np.random.default_rng(1)
    rand = rng.normal(mu, s, size=(3, 40000))
    got = M.crps_sample(rand, [y, mu, mu + 3 * s])
    want = crps_normal(mu, s, np.array([y, mu, mu + 3 * s]))
    np.testing.assert_allclose(got, want, rtol=0.02)


def test_crps_point_forecast_is_absolute_error():
    assert M.crps_sample([2.5], 1.0) == pytest.approx(1.5)
    assert M.crps_sample(np.full(50, -1.0), 2.0) == pytest.approx(3.0)
    got = M.crps_sample(np.array([[0.0] * 7, [4.0] * 7]), np.array([1.0, 1.0]))
    np.testing.assert_allclose(got, [1.0, 3.0])


def test_crps_energy_form_matches_brute_force_and_handles_nan():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(4, 13))
    y = rng.normal(size=4)
    brute = np.abs(x - y[:, None]).mean(1) - 0.5 * np.abs(x[:, :, None] - x[:, None, :]).mean((1, 2))
    np.testing.assert_allclose(M.crps_sample(x, y), brute, rtol=1e-12, atol=1e-12)
    x[1, 3] = np.nan
    got = M.crps_sample(x, y)
    xi = np.delete(x[1], 3)
    assert got[1] == pytest.approx(M.crps_sample(xi, y[1]))
    assert np.isnan(M.crps_sample(x, [0.0, np.nan, 0.0, 0.0])[1])


# ------------------------------------------------------------------------------------------- PIT
def test_pit_uniform_for_calibrated_draws():
    rng = np.random.default_rng(3)
    n = 3000
    mu = rng.normal(size=n)
    draws = mu[:, None] + rng.normal(size=(n, 200))
    y = mu + rng.normal(size=n)
    u = M.pit(draws, y, seed=4)
    assert stats.kstest(u, "uniform").pvalue > 0.01
    # an overconfident forecast is not uniform (U-shaped)
    u_bad = M.pit(mu[:, None] + 0.3 * rng.normal(size=(n, 200)), y, seed=4)
    assert stats.kstest(u_bad, "uniform").pvalue < 1e-6


def test_pit_randomises_ties():
    # a point forecast equal to y: every rank is tied -> PIT ~ Uniform(0, 1)
    u = M.pit(np.zeros((4000, 10)), np.zeros(4000), seed=5)
    assert stats.kstest(u, "uniform").pvalue > 0.01
    assert 0 < M.pit([0.0, 1.0, 2.0], 1.5, seed=0) < 1


# ---------------------------------------------------------------------------- final window
def test_final_window_mask_hand_examples():
    from bayesgrpo import plan as M

    steps = np.arange(1, 101)
    m = M.final_window_mask(steps, s0=1, horizon=100)
    np.testing.assert_array_equal(steps[m], np.arange(91, 101))
    steps5 = np.arange(5, 201, 5)
    m5 = M.final_window_mask(steps5, s0=5, horizon=200)
    np.testing.assert_array_equal(steps5[m5], [185, 190, 195, 200])
    # left end is open: s0=0, H=100 -> (90, 100]
    s = np.arange(0, 101)
    np.testing.assert_array_equal(s[M.final_window_mask(s, s0=0, horizon=100)], np.arange(91, 101))
    # steps beyond the horizon are not in the window
    assert not M.final_window_mask([101], s0=1, horizon=100)[0]
    with pytest.raises(ValueError):
        M.final_window_mask(steps, s0=1, horizon=100, final_window=0)


def test_final_reward_and_reward_range():
    steps = np.arange(1, 101)
    rewards = np.where(steps > 90, 2.0, 0.0)
    rewards[-1] = 4.0
    assert M.final_reward(steps, rewards) == pytest.approx((9 * 2 + 4) / 10)
    assert M.final_reward(steps, rewards, s0=1, horizon=100) == pytest.approx(2.2)
    r = np.linspace(0, 1, 101)
    assert M.reward_range(r) == pytest.approx(0.9)
    # fallbacks: ~constant run with one outlier -> full range; constant -> |median|; zeros -> 1
    assert M.reward_range(np.r_[np.zeros(99), 5.0]) == pytest.approx(5.0)
    assert M.reward_range(np.full(10, -3.0)) == pytest.approx(3.0)
    assert M.reward_range(np.zeros(10)) == 1.0


# ------------------------------------------------------------------------------------- peers
def _exp_run(seed, *, n=200, r0=0.2, rinf=0.8, tau=30.0, noise=0.05):
    rng = np.random.default_rng(seed)
    steps = np.arange(1, n + 1)
    mean = rinf - (rinf - r0) * np.exp(-(steps - 1) / tau)
    y = mean + noise * rng.standard_normal(n)
    return steps, mean, y


def test_registry_and_aliases():
    assert set(PEERS) == {"last_value", "sat_exp", "scalerl_sigmoid", "pow3", "domhan", "domhan_fast"}
    with pytest.raises(KeyError, match="unknown peer 'nope'"):
        get_peer("nope")
    p = get_peer("exponential")
    assert p.name == "exponential" and type(p) is type(get_peer("sat_exp"))
    f = p.forecast([1, 2, 3, 4, 5, 6], [0.1, 0.2, 0.3, 0.35, 0.4, 0.42], future_steps=[7, 8, 9, 10])
    assert isinstance(f, PeerForecast) and f.ok and f.name == "exponential"


def test_peer_failure_is_captured():
    f = get_peer("sat_exp").forecast([1, 2], [0.1, 0.2], future_steps=[3, 4, 5])
    assert not f.ok and "at least" in f.message and f.final_draws.size == 0


@pytest.mark.parametrize("name", ["sat_exp", "scalerl_sigmoid", "pow3"])
def test_lsq_peer_recovers_final_value_and_covers(name):
    peer = get_peer(name, n_boot=60)
    cut = 80  # 40% of the run
    hits, errs = 0, []
    reps = 5
    for seed in range(reps):
        steps, _mean, y = _exp_run(seed)
        truth = M.final_reward(steps, y)
        f = peer.forecast(steps[:cut], y[:cut], future_steps=steps[cut:], n_draws=500, seed=seed)
        assert f.ok, f.message
        assert f.final_draws.shape == (500,)
        assert f.path_quantiles.shape == (7, 200 - cut)
        errs.append(abs(f.median - truth))
        lo, hi = f.interval(0.8)
        hits += lo <= truth <= hi
    assert np.median(errs) < 0.06, errs  # reward range of the curve is 0.6
    assert hits > reps / 2, (hits, errs)
    if name == "sat_exp":
        params, _ = peer.fit(*_exp_run(0)[::2], horizon=200)
        assert params["R_inf"] == pytest.approx(0.8, abs=0.05)
        assert params["R0"] == pytest.approx(0.2, abs=0.07)


def test_last_value_peer_on_a_plateau():
    rng = np.random.default_rng(7)
    hits = 0
    for seed in range(5):
        rng = np.random.default_rng(seed)
        steps = np.arange(5, 1001, 5)
        y = 0.5 + 0.1 * rng.standard_normal(steps.size)
        truth = M.final_reward(steps, y)
        f = get_peer("last_value").forecast(steps[:60], y[:60], future_steps=steps[60:], seed=seed)
        assert f.ok
        assert f.median == pytest.approx(0.5, abs=0.08)
        lo, hi = f.interval(0.8)
        hits += lo <= truth <= hi
    assert hits >= 3


def test_partially_observed_window_uses_observed_points():
    steps, _mean, y = _exp_run(0, n=100)
    # cutoff inside the final window: steps 91..95 observed, 96..100 forecast
    f = get_peer("last_value").forecast(steps[:95], y[:95], future_steps=steps[95:], seed=0)
    assert f.ok
    obs_part = y[90:95].sum()
    # every draw is (observed sum + 5 * forecast mean) / 10, so draws*10 - obs_part spreads around 5*level
    assert np.median(f.final_draws * 10 - obs_part) / 5 == pytest.approx(y[86:95].mean(), abs=0.05)
    # nothing left to forecast: the window mean is known exactly
    g = get_peer("pow3").forecast(steps, y, future_steps=[], n_draws=10)
    assert g.ok and np.allclose(g.final_draws, M.final_reward(steps, y))


@pytest.mark.slow
def test_domhan_ensemble_final_value():
    """Real NUTS on one synthetic curve (compiles the nutpie model: minutes on a loaded machine).

    The ensemble posterior is multimodal (11 families x weights), so the median varies between runs
    by ~0.05 here; the tolerance (1/5 of the curve's 0.6 range) allows for that.
    """
    steps, mean, y = _exp_run(11, tau=20.0)
    truth = M.final_reward(steps, mean)
    peer = get_peer("domhan")
    f = peer.forecast(steps[:100], y[:100], future_steps=steps[100:], n_draws=400, seed=0)
    assert f.ok, f.message
    assert f.final_draws.shape == (400,)
    assert f.path_quantiles.shape == (7, 100)
    assert abs(f.median - truth) < 0.12
    assert sum(f.info["mean_weights"].values()) == pytest.approx(1.0)


def test_domhan_families_increasing_under_their_priors():
    """Sign-constrained priors make every family non-decreasing on the x axis (paper's constraint)."""
    from bayesgrpo.evaluation.domhan import DOMHAN_FAMILIES, DomhanEnsemblePeer, _domhan_numpy_curves

    rng = np.random.default_rng(0)
    x = np.linspace(1, 100, 400)
    n = 300
    post = {"w": rng.dirichlet(np.ones(len(DOMHAN_FAMILIES)), size=n), "sigma": np.full(n, 0.1)}
    for name, params, f in DOMHAN_FAMILIES:
        p = {}
        for pn, prior, m, s in params:
            z = rng.normal(m, s, size=(n, 1))
            p[pn] = {"normal": z, "lognormal": np.exp(z), "neglognormal": -np.exp(z)}[prior]
            post[f"{name}_{pn}"] = p[pn][:, 0]
        with np.errstate(all="ignore"):
            y = f(x[None, :], p, np)
        ok = np.all(np.isfinite(y), axis=1)
        assert ok.mean() > 0.95, name
        d = np.diff(y[ok], axis=1)
        assert np.all(d >= -1e-9 * np.maximum(1, np.abs(y[ok][:, 1:]))), name
    comb = _domhan_numpy_curves(post, x)
    assert comb.shape == (n, x.size)
    model = DomhanEnsemblePeer.build_model()
    assert {"w", "sigma", "pow3_c", "weibull_delta"} <= {v.name for v in model.free_RVs}
    assert len(model.free_RVs) == 2 + sum(len(p) for _, p, _ in DOMHAN_FAMILIES)
