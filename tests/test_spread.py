"""The spread channels (bayesgrpo.models.spread): the Beta-binomial moments against scipy and their known
limits, the extended filter with the channels against the numpy reference (joint Gaussian conditioning,
no sequential scalar updates) and against central finite differences, the binning, the graph, and the
forecaster's routing (a run without a channel forecasts exactly as without channels)."""

import numpy as np
import pandas as pd
import pytest
from scipy.stats import betabinom

from bayesgrpo.models.degeneracy import KAPPA, ekf_filter_numpy, ekf_loglik_grad, ekf_spread_loglik_grad
from bayesgrpo.models.spread import (
    CH_BR,
    CH_CRS,
    CH_CSZ,
    CH_MS,
    CH_MZ,
    CH_NS,
    CH_YR,
    CH_YS,
    N_MOM,
    bb_constants,
    bb_moments,
    channel_array,
    group_sds,
    spread_expectations,
)

NAMES = ("r0", "r_star", "a", "mu", "q", "r", "L", "lam", "nu", "W")


def _moments(m, nu, G):
    out = np.zeros(N_MOM)
    sk = group_sds(G)
    consts, work = bb_constants(nu, G, sk)
    bb_moments(m, nu, G, sk, consts, work, out)
    return out


@pytest.mark.parametrize("G", [2, 4, 8, 16, 64])
@pytest.mark.parametrize(("m", "nu"), [(0.02, 0.5), (0.3, 2.0), (0.7, 10.0), (1e-3, 0.1), (0.5, 200.0)])
def test_moments_equal_the_beta_binomial(G, m, nu):
    o = _moments(m, nu, G)
    k = np.arange(G + 1)
    P = betabinom.pmf(k, G, m * nu, (1 - m) * nu)
    s = group_sds(G)
    ref = {0: (P * s).sum(), 5: (P * s * s).sum(), 8: P[0] + P[-1], 13: (P * (k / G) ** 2).sum(),
           16: (P * (k / G) * s).sum(), 19: P[-1]}  # fmt: skip
    for i, v in ref.items():
        assert o[i] == pytest.approx(v, rel=1e-12, abs=1e-300)
    # E[s^2] is the unbiased within-group variance: m (1 - m) nu / (nu + 1), whatever G
    assert o[5] == pytest.approx(m * (1 - m) * nu / (nu + 1), rel=1e-12)


@pytest.mark.parametrize("G", [2, 5, 8])
def test_moment_derivatives_equal_finite_differences(G):
    m, nu = 0.23, 1.7
    o = _moments(m, nu, G)

    def d(f, x, h):  # 4th-order central difference
        return (-f(x + 2 * h) + 8 * f(x + h) - 8 * f(x - h) + f(x - 2 * h)) / (12 * h)

    fm = d(lambda x: _moments(x, nu, G), m, 1e-4)
    fn = d(lambda x: _moments(m, x, G), nu, 1e-4)
    pairs = {1: fm[0], 2: fn[0], 3: fm[1], 4: fn[1], 6: fm[5], 7: fn[5], 9: fm[8], 10: fn[8], 11: fm[9], 12: fn[9],
             14: fm[13], 15: fn[13], 17: fm[16], 18: fn[16], 20: fm[19], 21: fn[19]}  # fmt: skip
    for i, v in pairs.items():
        assert o[i] == pytest.approx(v, rel=1e-7, abs=1e-9), i


def test_homogeneous_prompts_limit_is_the_binomial():
    """nu -> infinity: every prompt has the mean pass rate; the zero-std share is p^G + (1-p)^G."""
    for G, p in ((4, 0.1), (8, 0.5), (16, 0.03)):
        e = spread_expectations(p, 1e7, G)
        assert float(e["frac_reward_zero_std"]) == pytest.approx(p**G + (1 - p) ** G, rel=1e-5)
        assert float(e["variance"]) == pytest.approx(p * (1 - p), rel=1e-5)
    # and all-or-nothing prompts (nu -> 0): every group is degenerate, no spread
    e = spread_expectations(0.3, 1e-6, 8)
    assert float(e["frac_reward_zero_std"]) == pytest.approx(1.0, abs=1e-5)
    assert float(e["reward_std"]) == pytest.approx(0.0, abs=1e-5)


# ----------------------------------------------------------------------------- the filter with channels
def _case(seed, *, T=80, G=4, N=3.0, nu=1.5, W=1.0, r0=0.1, rs=0.8, L=0.0, a=0.04, mu=0.8, q=0.01**2, r=0.05**2,
          lam=1.0, points=None, p_spread=0.8, p_zero=0.6, p_reward=0.85):  # fmt: skip
    """A path of the recursion kept inside the reward's bounds, with groups drawn from the Beta-binomial."""
    rng = np.random.default_rng(seed)
    x = np.empty(T)
    x[0] = xp = r0 - rs
    D = rs - L
    for n in range(1, T):
        u = np.clip(1 + x[n - 1] / D, 1e-3, 1)
        h = 1.0 if x[n - 1] >= 0 else u**KAPPA * np.exp(lam * (1 - u))
        x[n], xp = (1 + mu) * x[n - 1] - mu * xp - a * h * x[n - 1] + np.sqrt(q) * rng.normal(), x[n - 1]
    R = np.clip(rs + x, L + 0.02, L + W - 0.02)
    ys, yz = np.zeros(T), np.zeros(T)
    for n in range(T):
        mn = (R[n] - L) / W
        k = rng.binomial(G, rng.beta(mn * nu, (1 - mn) * nu, size=int(N)))
        ys[n] = W * np.sqrt(k * (G - k) / (G * (G - 1))).mean()
        yz[n] = ((k == 0) | (k == G)).mean()
    y = R + np.sqrt(r) * rng.normal(size=T)
    mask = rng.random(T) < p_reward
    mask[0] = True
    ys[rng.random(T) > p_spread] = np.nan
    yz[rng.random(T) > p_zero] = np.nan
    keep = mask | np.isfinite(ys) | np.isfinite(yz)
    st = np.arange(T)[keep]
    ch = channel_array(st, np.where(mask, y, np.nan)[keep], ys[keep], yz[keep], s0=0, T=T, groups=N, loc=0.0,
                       scale=1.0, points=points)  # fmt: skip
    return dict(y=np.where(mask, y, 0.0), mask=mask.astype(float), ch=ch, G=G,
                p=np.array([r0, rs, a, mu, q, r, L, lam, nu, W], dtype=float))  # fmt: skip


def _kernel(c, p):
    one = lambda v: np.array([v], dtype=float)  # noqa: E731
    ll, g = ekf_spread_loglik_grad(c["y"][:, None], c["mask"][:, None], c["ch"][:, :, None], one(c["G"]), one(KAPPA),
                                   *[one(v) for v in p])  # fmt: skip
    return ll[0], g[0]


CASES = [
    dict(seed=1),  # both channels, the reward missing at some channel steps
    dict(seed=2, G=2, N=4.0, nu=0.5),  # G = 2: spread and zero-std share almost the same measurement
    dict(seed=3, G=8, N=1.0, nu=5.0, r0=0.3, lam=0.0),
    dict(seed=4, G=16, N=2.0, W=1.5, L=-0.1, r0=-0.05),  # unknown-bounds style: floor below the start, wider range
    dict(seed=5, points=8),  # binned: conditioned on the bins' mean rewards
    dict(seed=6, points=5, p_zero=1.0, G=6),
    dict(seed=7, p_zero=0.0),  # the spread only
    dict(seed=8, p_spread=0.0, points=10),  # the zero-std share only
]


@pytest.mark.parametrize("kw", CASES)
def test_kernel_equals_the_joint_gaussian_reference(kw):
    """Sequential scalar updates, each conditioned on the noise before it == one joint update of the step's
    measurements with the full (shrunk Beta-binomial) covariance, conditioned on the bin's mean reward."""
    c = _case(**kw)
    ll, _ = _kernel(c, c["p"])
    r0, rs, a, mu, q, r, L, lam, nu, W = c["p"]
    chan = dict(ch=c["ch"], G=c["G"], nu=nu, W=W)
    ref, _, _ = ekf_filter_numpy(c["y"], c["mask"].astype(bool), r0=r0, r_star=rs, a=a, mu=mu, sigma_p=np.sqrt(q),
                                 sigma_m=np.sqrt(r), L=L, lam=lam, channels=chan)  # fmt: skip
    assert ll == pytest.approx(float(np.ravel(ref)[0]), rel=1e-9)
    assert c["ch"][CH_MS].any() or c["ch"][CH_MZ].any()


@pytest.mark.parametrize("kw", CASES)
def test_gradient_equals_central_finite_differences(kw):
    c = _case(**kw)
    p = c["p"]
    _, g = _kernel(c, p)
    for k, name in enumerate(NAMES):
        h = 1e-6 * max(1e-2, abs(p[k]))
        up, dn = p.copy(), p.copy()
        up[k] += h
        dn[k] -= h
        fd = (_kernel(c, up)[0] - _kernel(c, dn)[0]) / (2 * h)
        assert g[k] == pytest.approx(fd, rel=1e-4, abs=1e-4 * max(1.0, np.abs(g).max() * 1e-3)), name


def test_no_channel_is_the_reward_only_filter():
    """Without channels the spread kernel (forward-mode sensitivities) and the reward-only kernel (one backward
    sweep) are two independent computations of the same EKF: equal to rounding, value and gradient."""
    c = _case(1)
    c["ch"][:] = 0.0
    ll, g = _kernel(c, c["p"])
    one = lambda v: np.array([v], dtype=float)  # noqa: E731
    ref, gref = ekf_loglik_grad(c["y"][:, None], c["mask"][:, None], one(KAPPA), *[one(v) for v in c["p"][:8]])
    assert ll == pytest.approx(ref[0], rel=1e-12)
    np.testing.assert_allclose(g[:8], gref[0], rtol=1e-10, atol=1e-12 * np.abs(gref).max())
    assert not g[8:].any()


def test_the_channels_pin_the_heterogeneity():
    """The log-likelihood of data drawn with nu = 1.5 peaks near 1.5 in nu (and its gradient changes sign)."""
    c = _case(11, T=300, N=8.0, nu=1.5, points=None)
    nus = np.geomspace(0.2, 12, 41)
    lls = [_kernel(c, np.r_[c["p"][:8], v, c["p"][9]])[0] for v in nus]
    best = nus[int(np.argmax(lls))]
    assert 0.8 < best < 3.0
    assert _kernel(c, np.r_[c["p"][:8], 0.5, c["p"][9]])[1][8] > 0 > _kernel(c, np.r_[c["p"][:8], 6.0, c["p"][9]])[1][8]


# ----------------------------------------------------------------------------- binning
def test_binning_means_counts_and_correlation_scales():
    steps = np.arange(10, 110)
    rew = np.linspace(0.0, 1.0, 100)
    sp = np.full(100, 0.2)
    sp[::2] = np.nan  # the spread on every other step
    fz = np.full(100, 0.5)
    ch = channel_array(steps, rew, sp, fz, s0=10, T=100, groups=3.0, loc=0.5, scale=2.0, points=10)
    at = np.flatnonzero(ch[CH_MS] + ch[CH_MZ])
    assert at.size == 10  # 100 points with a channel -> 10 bins of 10
    assert np.allclose(ch[CH_YS, at], 0.1)  # normalised by the scale
    assert np.allclose(ch[CH_NS, at], 3.0 * 5)  # 5 spread points of 3 groups
    j = at[0]
    assert ch[CH_BR, j] == 5  # the rewards of the points with a spread
    assert ch[CH_YR, j] == pytest.approx(((rew[1:10:2]) - 0.5).mean() / 2.0)
    assert ch[CH_CRS, j] == pytest.approx(1.0)  # the same 5 points
    assert ch[CH_CSZ, j] == pytest.approx(5 / np.sqrt(5 * 10))
    unbinned = channel_array(steps, rew, sp, fz, s0=10, T=100, groups=3.0, loc=0.5, scale=2.0, points=None)
    assert int((unbinned[CH_MS] + unbinned[CH_MZ] > 0).sum()) == 100


def test_binned_channel_keeps_the_information_on_nu():
    """Binning 300 steps into 24 bins moves the maximum-likelihood nu little."""
    c1 = _case(12, T=300, N=2.0, nu=2.0, points=None, p_zero=0.0)
    c2 = dict(c1)
    rng_case = _case(12, T=300, N=2.0, nu=2.0, points=24, p_zero=0.0)
    c2["ch"] = rng_case["ch"]
    nus = np.geomspace(0.3, 10, 31)
    best = [nus[int(np.argmax([_kernel(c, np.r_[c["p"][:8], v, c["p"][9]])[0] for v in nus]))] for c in (c1, c2)]
    assert abs(np.log(best[0] / best[1])) < 0.6


# ----------------------------------------------------------------------------- graph and forecaster
def _runs(with_spread: bool, n=60, seed=0):
    from bayesgrpo.schema import RunSet

    rng = np.random.default_rng(seed)
    steps = np.arange(1, n + 1)
    r = np.clip(0.1 + 0.5 * (1 - np.exp(-steps / 30)) + 0.05 * rng.normal(size=n), 0, 1)
    df = pd.DataFrame({"run_id": "a", "step": steps, "reward": r})
    if with_spread:
        df["reward_std"] = np.sqrt(r * (1 - r) * 0.6) + 0.02 * rng.normal(size=n)
    meta = pd.DataFrame({"run_id": ["a"], "group_size": [4], "batch_size": [16], "max_steps": [200]})
    return RunSet.from_frames(df, meta)


def test_graph_with_channels_has_finite_logp_and_the_channel_terms():
    from bayesgrpo.models.arrays import prepare_arrays
    from bayesgrpo.models.kinds import build_model

    arr, _ = prepare_arrays(_runs(True), channels=("reward_std",))
    assert arr.has_channels and arr.group_size[0] == 4
    model = build_model(arr, kind="degeneracy", spread=True)
    names = {v.name for v in model.free_RVs}
    assert {"z_nu", "z_headroom"} <= names
    logp = model.compile_logp()(model.initial_point())
    assert np.isfinite(logp)
    # a run without its channel in the spread graph: the reward-only graph's logp plus the priors of z_nu, z_headroom
    arr0, _ = prepare_arrays(_runs(False), channels=("reward_std",))
    m_spread, m_plain = build_model(arr0, kind="degeneracy", spread=True), build_model(arr0, kind="degeneracy")
    ip = m_spread.initial_point()
    extra = sum(-0.5 * ip[k] ** 2 - 0.5 * np.log(2 * np.pi) for k in ("z_nu", "z_headroom")).sum()
    plain = m_plain.compile_logp()({k: v for k, v in ip.items() if k in m_plain.initial_point()})
    assert m_spread.compile_logp()(ip) == pytest.approx(plain + extra, rel=1e-12)


def test_spread_channels_need_a_degeneracy_kind():
    from bayesgrpo import Forecaster

    with pytest.raises(ValueError, match="degeneracy state"):
        Forecaster("oscillator", channels=("reward_std",))
    with pytest.raises(ValueError, match="unknown spread channel"):
        Forecaster("degeneracy", channels=("kl",))


def test_run_without_a_channel_forecasts_exactly_as_without_channels(mock_sampler):
    """Routing: the reward-only graph fits it, its table equals the reward-only forecaster's bit for bit."""
    from bayesgrpo import Forecaster

    runs = _runs(False)
    mock_sampler["params"].update(L=-0.2)
    a = Forecaster("degeneracy", calibration=False).fit(runs).table()
    b = Forecaster("degeneracy", channels=("reward_std", "frac_reward_zero_std"), calibration=False).fit(runs).table()
    cols = [c for c in a.columns if c != "seconds"]
    pd.testing.assert_frame_equal(a[cols], b[cols])
    assert "channels" not in mock_sampler["calls"][-1] or not mock_sampler["calls"][-1]["channels"][CH_MS].any()


def test_run_with_a_channel_is_fitted_and_forecast_with_it(mock_sampler, tmp_path):
    from bayesgrpo import Forecaster
    from bayesgrpo.forecast import FittedForecast

    mock_sampler["params"].update(L=-0.2, nu=2.0, W=1.5)
    runs = _runs(True)
    fit = Forecaster("degeneracy", channels=("reward_std",), calibration=False).fit(runs)
    call = mock_sampler["calls"][-1]
    assert call["channels"][CH_MS].sum() > 0 and call["group_size"][0] == 4
    plain = Forecaster("degeneracy", calibration=False).fit(runs)
    # the forecast's filter uses the channel: another filtered state, so another forecast
    assert not np.allclose(fit.final_draws("a"), plain.final_draws("a"))
    fit.save(tmp_path / "f.nc")
    back = FittedForecast.load(tmp_path / "f.nc")
    np.testing.assert_array_equal(back.final_draws("a"), fit.final_draws("a"))


def test_channel_arrays_from_the_logged_columns_and_metadata():
    """G from group_size, the groups from prompts_per_step or batch_size / G (1 when unknown) times the logging
    interval, the width from the bounds; invalid values are dropped with a warning naming the run."""
    from bayesgrpo.errors import DataWarning
    from bayesgrpo.models.arrays import prepare_arrays
    from bayesgrpo.schema import RunSet

    steps = np.arange(2, 202, 2)  # logged every 2 steps
    r = np.clip(np.linspace(0.05, 0.6, 100), 0, 1)
    rows = []
    for rid in ("meta", "none", "bad"):
        sd = np.sqrt(r * (1 - r) * 0.5)
        if rid == "bad":
            sd = sd.copy()
            sd[:3] = -1.0
        rows.append(pd.DataFrame({"run_id": rid, "step": steps, "reward": r, "reward_std": sd,
                                  "frac_reward_zero_std": 0.5}))  # fmt: skip
    meta = pd.DataFrame({"run_id": ["meta", "none", "bad"], "group_size": [4, np.nan, 4],
                         "batch_size": [32, np.nan, 32], "max_steps": [300, 300, 300]})  # fmt: skip
    runs = RunSet.from_frames(pd.concat(rows), meta)
    with pytest.warns(DataWarning, match="'bad'.*3 logged reward_std"):
        arr, infos = prepare_arrays(runs, channels=("reward_std", "frac_reward_zero_std"))
    from bayesgrpo.models.spread import DEFAULT_GROUP_SIZE

    assert list(arr.group_size) == [4, DEFAULT_GROUP_SIZE, 4]
    per_bin = arr.channels[CH_NS].max(axis=0)  # 100 points in 24 bins of 5 (the last of 0..5)
    assert per_bin[0] == pytest.approx(32 / 4 * 2 * 5)  # 8 groups a step, 2 steps a logged point, 5 points a bin
    assert per_bin[1] == pytest.approx(1 * 2 * 5)  # unknown batch: one group a step
    assert np.all(arr.width_known == 1) and arr.width[0] == pytest.approx(1.0 / infos[0].scale)
    assert arr.channels[CH_MS, :, 2].sum() == arr.channels[CH_MS, :, 0].sum()  # the bad values only drop points
    only_std, _ = prepare_arrays(runs.select(["meta"]), channels=("reward_std",))
    assert not only_std.channels[CH_MZ].any() and only_std.channels[CH_MS].any()
    off, _ = prepare_arrays(runs.select(["meta"]))
    assert not off.has_channels


def test_spread_population_leaves_the_other_fields_alone():
    from bayesgrpo.models.kinds import default_prior
    from bayesgrpo.models.prior import SPREAD_FIELDS, with_spread_population

    base = default_prior("degeneracy")
    rows = pd.DataFrame({"run_id": list("abcd"), "source": ["s1", "s1", "s2", "s3"], "cutoff": 0.5,
                         "log_nu": [0.0, 0.2, 1.0, -1.0], "log_headroom": [np.nan, np.nan, 0.5, 0.7],
                         "r0_dev": 0.0, "log_noise_dev": 0.0, "gain": 0.5, "log_tau": 3.0,
                         "log_wander": -1.0})  # fmt: skip
    p = with_spread_population(base, rows)
    # each source weighs the same: s1's mean 0.1, s2 1.0, s3 -1.0
    assert p.log_nu_mu == pytest.approx((0.1 + 1.0 - 1.0) / 3, abs=1e-4)
    assert p.log_headroom_mu == pytest.approx(0.6, abs=1e-4)
    same = {k: v for k, v in base.model_dump().items() if k not in (*SPREAD_FIELDS, "name", "provenance")}
    assert {k: p.model_dump()[k] for k in same} == same
    q = with_spread_population(base, rows, exclude_source="s3")
    assert q.log_nu_mu == pytest.approx((0.1 + 1.0) / 2, abs=1e-4)


def test_cli_channels_option_is_checked_before_reading():
    from typer.testing import CliRunner

    from bayesgrpo.cli.app import app

    res = CliRunner().invoke(app, ["forecast", "no-such-file.json", "--kind", "oscillator", "--channels", "spread"])
    assert res.exit_code == 2 and "degeneracy state" in res.output and "no-such-file" not in res.output
    res = CliRunner().invoke(
        app, ["forecast", "no-such-file.json", "--model", "logistic", "--channels", "kl,reward_std"]
    )
    assert res.exit_code == 2 and "kl is not a spread channel" in res.output


@pytest.mark.slow
def test_run_without_a_channel_forecasts_exactly_as_before_with_real_sampling():
    """The same compiled reward-only model, the same seed: the same draws, bit for bit (real NUTS)."""
    from bayesgrpo import Forecaster
    from bayesgrpo.inference.sampling import SamplerConfig

    runs = _runs(False, n=40)
    smp = SamplerConfig(draws=100, tune=100, seed=3)
    a = Forecaster("degeneracy", calibration=False, sampler=smp).fit(runs)
    b = Forecaster("degeneracy", channels=("reward_std",), calibration=False, sampler=smp).fit(runs)
    np.testing.assert_array_equal(a.posterior["r_star"].to_numpy(), b.posterior["r_star"].to_numpy())
    np.testing.assert_array_equal(a.final_draws("a"), b.final_draws("a"))
