"""Tests of bayesgrpo.physics.dynamics against physics.md sections 2-5 (reference numbers included)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

import bayesgrpo.physics as P  # what the package uses: the companion matrix and exact stability
from bench import physics_reference as D  # the closed forms, thresholds and simulator (bench only)

# ----------------------------------------------------------------------------- helpers


def _closed_form_error(a, mu, lag=0, n=30_000):
    """max_n |R_n(recursion) - R(n)(closed form)| / |Delta| with R0=0, R*=1."""
    x = D.simulate(n, r0=0.0, r_star=1.0, a=a, momentum=mu, lag=lag).latent
    y = D.mean_trajectory(np.arange(n), r0=0.0, r_star=1.0, a=a, momentum=mu, lag=lag)
    return float(np.max(np.abs(x - y)))


def _ar2_autocorr(a, mu, nlags):
    """Exact autocorrelation of the AR(2) x_{n+1} = (1+mu-a) x_n - mu x_{n-1} + eps."""
    phi1, phi2 = 1.0 + mu - a, -mu
    rho = np.empty(nlags + 1)
    rho[0] = 1.0
    rho[1] = phi1 / (1.0 - phi2)
    for k in range(2, nlags + 1):
        rho[k] = phi1 * rho[k - 1] + phi2 * rho[k - 2]
    return rho


# ----------------------------------------------------------------------------- section 4 references


@pytest.mark.parametrize(
    ("mu", "a", "expected"),
    [
        (0.0, 0.005, 314),
        (0.0, 0.02, 79),
        (0.0, 0.05, 31),
        (0.0, 0.2, 8),
        (0.9, 0.005, 26),
        (0.9, 0.02, 6),
        (0.9, 0.05, 3),
        (0.9, 0.2, 1),
    ],
)
def test_first_unstable_lag_reference_values(mu, a, expected):
    d = D.first_unstable_lag(a=a, momentum=mu)
    assert d == expected
    if d <= 100:  # independent check by companion eigenvalues (slow for d ~ 300 under load)
        assert P.spectral_radius(a=a, momentum=mu, lag=d) >= 1.0
        assert P.spectral_radius(a=a, momentum=mu, lag=d - 1) < 1.0
    else:
        assert D._is_stable_certified(a, mu, d - 1) and not D._is_stable_certified(a, mu, d)


@pytest.mark.parametrize(("mu", "a", "expected"), [(0.9, 0.005, 26), (0.9, 0.02, 6), (0.0, 0.2, 8)])
def test_first_unstable_lag_scan_reference(mu, a, expected):
    # brute force: every smaller lag is stable
    assert D.first_unstable_lag(a=a, momentum=mu, method="scan") == expected
    assert all(P.spectral_radius(a=a, momentum=mu, lag=d) < 1 for d in range(expected))


@settings(max_examples=25, deadline=None)
@given(mu=st.floats(0.0, 0.95), a=st.floats(0.03, 1.5))
def test_first_unstable_lag_crossing_equals_scan(mu, a):
    # (crossing + argument-principle certificate) == brute-force eigenvalue scan
    assert D.first_unstable_lag(a=a, momentum=mu) == D.first_unstable_lag(a=a, momentum=mu, method="scan")


@settings(max_examples=40, deadline=None)
@given(mu=st.floats(0.0, 0.98), a=st.floats(1e-3, 3.0), d=st.integers(0, 60))
def test_stability_certificate_matches_eigenvalues(mu, a, d):
    rho = P.spectral_radius(a=a, momentum=mu, lag=d)
    assume(abs(rho - 1.0) > 1e-9)
    assert D._is_stable_certified(a, mu, d) == (rho < 1.0)


def test_first_unstable_lag_zero_when_ar2_unstable():
    # d = 0 AR(2) has a root <= -1 iff a >= 2(1+mu)
    assert D.first_unstable_lag(a=2 * 1.5 + 1e-9, momentum=0.5) == 0
    assert D.first_unstable_lag(a=2 * 1.5 - 1e-3, momentum=0.5) == 1


@pytest.mark.parametrize(("mu", "expected"), [(0.0, 100), (0.5, 52), (0.9, 15)])
def test_refresh_threshold_reference_values(mu, expected):
    a = 0.02
    k = D.refresh_threshold(a=a, momentum=mu)
    assert k == expected
    assert P.spectral_radius(a=a, momentum=mu, refresh_interval=k) >= 1.0
    assert all(P.spectral_radius(a=a, momentum=mu, refresh_interval=j) < 1.0 for j in range(1, k))
    first = D.refresh_threshold(a=a, momentum=mu, exact=False)
    assert first == pytest.approx((1 - mu) / a)
    assert first < k  # the exact boundary is higher than the first-order one


def test_refresh_threshold_ratio_measured():
    # physics.md: "K*_exact / K*_first-order ranged 1.3-3 in a check". Measured here for a=0.02:
    ratios = [D.refresh_threshold(a=0.02, momentum=mu) / ((1 - mu) / 0.02) for mu in (0.0, 0.5, 0.9)]
    assert ratios == pytest.approx([2.0, 2.08, 3.0])


def test_refresh_mu0_period_map_is_one_minus_ka():
    # mu = 0: x_{n+K} = (1 - K a) x_n; oscillatory past Ka = 1, unstable past Ka = 2
    a = 0.02
    for k in (10, 49, 51, 99, 100, 101):
        m = P.monodromy_matrix(a=a, momentum=0.0, refresh_interval=k)
        ev = np.sort(np.abs(np.linalg.eigvals(m)))
        assert ev[-1] == pytest.approx(abs(1 - k * a), abs=1e-12)
        assert ev[0] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3, 7, 12])
@pytest.mark.parametrize("mu", [0.0, 0.5, 0.9])
def test_reduced_monodromy_matches_full(k, mu):
    a = 0.07
    red = np.linalg.eigvals(P.monodromy_matrix(a=a, momentum=mu, refresh_interval=k))
    full = P.monodromy_matrix(a=a, momentum=mu, refresh_interval=k, reduced=False)
    assert full.shape == (max(2, k + 1),) * 2
    fev = np.linalg.eigvals(full)
    assert np.max(np.abs(red)) == pytest.approx(np.max(np.abs(fev)), rel=1e-9)
    # the full map's remaining eigenvalues vanish
    assert np.sort(np.abs(fev))[: max(2, k + 1) - 2] == pytest.approx(0.0, abs=1e-6)


def test_monodromy_matches_simulation_over_periods():
    a, mu, k = 0.03, 0.7, 6
    sim = D.simulate(4 * k + 1, r0=0.0, r_star=1.0, a=a, momentum=mu, refresh_interval=k)
    x = sim.latent - 1.0
    m = P.monodromy_matrix(a=a, momentum=mu, refresh_interval=k)
    state = np.array([x[0], x[0]])  # (x_0, x_{-1} = x_0)
    for p in range(1, 4):
        state = m @ state
        assert state[0] == pytest.approx(x[p * k], rel=1e-12)
        assert state[1] == pytest.approx(x[p * k - 1], rel=1e-12)


def test_refresh_one_equals_no_lag():
    kw = dict(r0=0.1, r_star=0.8, a=0.03, momentum=0.9, sigma_p=0.01, sigma_m=0.02, seed=7)
    s1 = D.simulate(500, refresh_interval=1, **kw)
    s0 = D.simulate(500, lag=0, **kw)
    np.testing.assert_array_equal(s1.latent, s0.latent)
    np.testing.assert_array_equal(s1.observed, s0.observed)
    assert P.spectral_radius(a=0.03, momentum=0.9, refresh_interval=1) == pytest.approx(
        P.spectral_radius(a=0.03, momentum=0.9, lag=0), rel=1e-12
    )
    np.testing.assert_allclose(
        P.monodromy_matrix(a=0.03, momentum=0.9, refresh_interval=1),
        P.transition_matrix(a=0.03, momentum=0.9),
        rtol=0,
        atol=1e-15,
    )


def test_critical_stiffness_reference():
    # a_c ~ 2.6e-3 for beta1 = 0.9 (both forms); tau at a_c ~ 38 steps
    ex = D.critical_stiffness(0.9)
    co = D.critical_stiffness(0.9, exact=False)
    assert ex == pytest.approx((1 - math.sqrt(0.9)) ** 2, rel=1e-14)
    assert co == pytest.approx(0.01 / 3.8, rel=1e-14)
    assert round(ex, 4) == 0.0026 and round(co, 4) == 0.0026
    assert (1 - 0.9) / co == pytest.approx(38.0, rel=1e-12)
    assert D.coefficients(a=co, momentum=0.9).regime == "critical"
    assert D.coefficients(a=co, momentum=0.9).zeta == pytest.approx(1.0, rel=1e-12)
    # exact discrete double root at (1 - sqrt mu)^2
    roots = np.roots([1.0, -(1 + 0.9 - ex), 0.9])
    assert roots[0] == pytest.approx(roots[1], rel=1e-6)
    assert D.classify_regime(a=ex, momentum=0.9, kind="discrete") == "critical"
    assert D.classify_regime(a=0.9 * ex, momentum=0.9, kind="discrete") == "overdamped"
    assert D.classify_regime(a=1.1 * ex, momentum=0.9, kind="discrete") == "underdamped"


def test_fast_time_is_optimizer_only():
    # tau_f -> (1+mu)/(2(1-mu)) = 9.5 steps for beta1 = 0.9 as a -> 0
    assert pytest.approx(9.5) == (1 + 0.9) / (2 * (1 - 0.9))
    assert D.coefficients(a=1e-7, momentum=0.9).tau_f == pytest.approx(9.5, abs=1e-3)
    assert D.coefficients(a=1e-4, momentum=0.9).tau_f == pytest.approx(9.5, abs=0.1)
    assert D.coefficients(a=1e-4, momentum=0.0).tau_f == pytest.approx(0.5, abs=1e-3)


# ----------------------------------------------------------------------------- section 3


def test_coefficients_values():
    c = D.coefficients(learning_rate=1e-3, curvature=5.0, momentum=0.9, lag=10)
    assert c.mass == pytest.approx(0.95)
    assert c.stiffness == pytest.approx(5e-3)
    assert c.damping == pytest.approx(0.1 - 0.05)
    assert c.omega0 == pytest.approx(math.sqrt(5e-3 / 0.95))
    assert c.zeta == pytest.approx(0.05 / math.sqrt(2 * 1.9 * 5e-3))
    assert c.tau == pytest.approx(10.0)
    assert c.regime == "underdamped"
    assert math.isnan(c.tau_s) and math.isnan(c.tau_f)
    o = D.coefficients(a=1e-4, momentum=0.5)
    assert o.regime == "overdamped"
    # Vieta: tau_s tau_f = m/k, tau_s + tau_f = c/k
    assert o.tau_s * o.tau_f == pytest.approx(o.mass / o.stiffness, rel=1e-12)
    assert o.tau_s + o.tau_f == pytest.approx(o.tau, rel=1e-12)
    assert D.coefficients(a=0.01, momentum=0.5, lag=50).regime == "unstable"  # c = 0
    assert D.coefficients(a=0.01, momentum=0.5, lag=60).regime == "unstable"
    arr = D.coefficients(a=np.array([1e-4, 0.01, 0.02]), momentum=0.9)
    assert list(arr.regime) == ["overdamped", "underdamped", "underdamped"]
    with pytest.raises(ValueError):
        D.coefficients(momentum=0.9)
    with pytest.raises(ValueError):
        D.coefficients(a=0.01, momentum=1.0)


@pytest.mark.parametrize(
    ("mu", "a", "regime", "bound"),
    [
        # measured max |error| / |Delta| over 30k steps: 0.49%, 0.92%, 0.42%, 0.97%, 1.63%
        (0.0, 0.01, "overdamped", 0.006),
        (0.5, 0.01, "overdamped", 0.011),
        (0.9, 0.001, "overdamped", 0.005),
        (0.9, (1 - 0.9) ** 2 / (2 * 1.9), "critical", 0.011),
        (0.9, 0.005, "underdamped", 0.02),
    ],
)
def test_closed_form_matches_recursion_small_a(mu, a, regime, bound):
    assert D.coefficients(a=a, momentum=mu).regime == regime
    err = _closed_form_error(a, mu)
    assert err < bound
    # error shrinks ~linearly with a (continuum limit)
    assert _closed_form_error(a / 10, mu) < 0.2 * err


def test_closed_form_error_measured_values():
    assert _closed_form_error(0.01, 0.0) == pytest.approx(0.00491, abs=5e-5)
    assert _closed_form_error(0.005, 0.9) == pytest.approx(0.0163, abs=5e-4)


def test_closed_forms_diverge_with_lag():
    # physics.md: "16% error at d = 100 in a check". Reproduced at a d = (1 - mu)/2:
    # mu=0.9, a=5e-4 -> 15.8%;  mu=0, a=5e-3 -> 15.2%  (vs 0.22% / 0.25% without lag)
    e1 = _closed_form_error(5e-4, 0.9, lag=100)
    e2 = _closed_form_error(5e-3, 0.0, lag=100)
    assert e1 == pytest.approx(0.1581, abs=1e-3)
    assert e2 == pytest.approx(0.1519, abs=1e-3)
    assert _closed_form_error(5e-4, 0.9) < 0.003
    assert _closed_form_error(5e-3, 0.0) < 0.003


def test_mean_trajectory_equals_section3_formulas():
    t = np.linspace(0, 400, 801)
    r0, rs = 0.2, 0.7
    dl = rs - r0
    # overdamped
    c = D.coefficients(a=1e-3, momentum=0.5)
    ref = rs - dl * (c.tau_s * np.exp(-t / c.tau_s) - c.tau_f * np.exp(-t / c.tau_f)) / (c.tau_s - c.tau_f)
    np.testing.assert_allclose(D.mean_trajectory(t, r0=r0, r_star=rs, a=1e-3, momentum=0.5), ref, atol=1e-13)
    # critical
    a = (1 - 0.5) ** 2 / (2 * 1.5)
    w0 = math.sqrt(a / 0.75)
    ref = rs - dl * (1 + w0 * t) * np.exp(-w0 * t)
    np.testing.assert_allclose(D.mean_trajectory(t, r0=r0, r_star=rs, a=a, momentum=0.5), ref, atol=1e-12)
    # underdamped
    c = D.coefficients(a=0.02, momentum=0.9)
    wd = c.omega0 * math.sqrt(1 - c.zeta**2)
    z = c.zeta
    ref = rs - dl * np.exp(-z * c.omega0 * t) * (np.cos(wd * t) + z / math.sqrt(1 - z**2) * np.sin(wd * t))
    np.testing.assert_allclose(D.mean_trajectory(t, r0=r0, r_star=rs, a=0.02, momentum=0.9), ref, atol=1e-13)
    # continuity across critical damping (no cancellation blow-up)
    ac = (1 - 0.9) ** 2 / 3.8
    ys = [D.mean_trajectory(t, r0=r0, r_star=rs, a=ac * (1 + e), momentum=0.9) for e in (-1e-8, 0, 1e-8)]
    assert np.max(np.abs(ys[0] - ys[1])) < 1e-7 and np.max(np.abs(ys[2] - ys[1])) < 1e-7
    # R(0) = R0, R'(0) = 0 (inertial slow start)
    y = D.mean_trajectory(np.array([0.0, 1e-4]), r0=r0, r_star=rs, a=1e-3, momentum=0.9)
    assert y[0] == pytest.approx(r0, abs=1e-15)
    assert abs(y[1] - y[0]) / 1e-4 < 1e-5
    # large t: no overflow, reaches plateau
    assert D.mean_trajectory(1e7, r0=r0, r_star=rs, a=1e-5, momentum=0.5) == pytest.approx(rs)


def test_exponential_trajectory_is_overdamped_limit():
    t = np.arange(0, 20_000.0)
    a, mu = 1e-5, 0.9
    c = D.coefficients(a=a, momentum=mu)
    exp_ = D.exponential_trajectory(t, r0=0.0, r_star=1.0, tau=c.tau)
    full = D.mean_trajectory(t, r0=0.0, r_star=1.0, a=a, momentum=mu)
    # deviation is the inertial start, O(tau_f / tau) = 9.5e-4
    assert np.max(np.abs(exp_ - full)) < 1.5e-3
    assert D.exponential_trajectory(100.0, r0=0.0, r_star=1.0, tau=100.0) == pytest.approx(1 - math.exp(-1))


@pytest.mark.parametrize("mu", [0.5, 0.9])
@pytest.mark.parametrize("factor", [0.3, 0.7, 1.5, 3.0, 10.0])
def test_overshoot_iff_zeta_below_one(mu, factor):
    # continuum: overshoot of the closed form iff zeta < 1
    a = factor * D.critical_stiffness(mu, exact=False)
    zeta = D.coefficients(a=a, momentum=mu).zeta
    t = np.linspace(0, 50_000, 200_001)
    y = D.mean_trajectory(t, r0=0.0, r_star=1.0, a=a, momentum=mu)
    assert (np.max(y) > 1.0) == (zeta < 1.0)
    # discrete recursion: overshoot iff a > (1 - sqrt mu)^2 (complex roots)
    a2 = factor * D.critical_stiffness(mu)
    x = D.simulate(50_000, r0=0.0, r_star=1.0, a=a2, momentum=mu).latent
    assert (np.max(x) > 1.0) == (factor > 1.0)
    assert (D.classify_regime(a=a2, momentum=mu, kind="discrete") == "underdamped") == (factor > 1.0)


# ----------------------------------------------------------------------------- section 2 simulate


def test_lag_pattern():
    np.testing.assert_array_equal(D.lag_pattern(7, refresh_interval=3), [0, 1, 2, 0, 1, 2, 0])
    np.testing.assert_array_equal(D.lag_pattern(4, lag=5), [5, 5, 5, 5])
    assert D.lag_pattern(3).dtype.kind == "i"
    with pytest.raises(ValueError):
        D.lag_pattern(5, lag=2, refresh_interval=3)
    with pytest.raises(ValueError):
        D.lag_pattern(5, refresh_interval=0)


def test_simulate_history_convention_by_hand():
    mu, a, x0 = 0.5, 0.1, -1.0  # r0 = 0, r_star = 1
    s = D.simulate(5, r0=0.0, r_star=1.0, a=a, momentum=mu, lag=3)
    x = s.latent - 1.0
    assert x[0] == x0
    # n=0: x_{-1}=x0, x_{-3}=x0
    x1 = (1 + mu) * x0 - mu * x0 - a * x0
    x2 = (1 + mu) * x1 - mu * x0 - a * x0  # x_{-2} = x0
    x3 = (1 + mu) * x2 - mu * x1 - a * x0  # x_{-1} = x0
    x4 = (1 + mu) * x3 - mu * x2 - a * x0  # x_{0}
    np.testing.assert_allclose(x, [x0, x1, x2, x3, x4], rtol=1e-14)
    np.testing.assert_array_equal(s.lag, [3, 3, 3, 3, 3])


@pytest.mark.parametrize("d", [0, 1, 2, 5, 17])
def test_lfilter_path_equals_loop(d):
    rng = np.random.default_rng(3)
    eps = rng.normal(size=400) * 0.05
    fast = D._simulate_constant_lag_1d(0.7, 0.8, 0.03, d, eps)
    slow = D._simulate_loop(np.array(0.7), np.array(0.8), np.array(0.03), np.full(401, d), eps)
    np.testing.assert_allclose(fast, slow, rtol=1e-10, atol=1e-12)


def test_simulate_batch_and_noise():
    a = np.array([0.01, 0.05, 0.2])
    sb = D.simulate(300, r0=0.1, r_star=np.array([0.5, 0.6, 0.7]), a=a, momentum=0.5)
    for i in range(3):
        si = D.simulate(300, r0=0.1, r_star=[0.5, 0.6, 0.7][i], a=a[i], momentum=0.5)
        np.testing.assert_allclose(sb.latent[i], si.latent, rtol=1e-13)
    sr = D.simulate(300, r0=0.1, r_star=0.5, a=a, momentum=0.5, refresh_interval=4)
    for i in range(3):
        si = D.simulate(300, r0=0.1, r_star=0.5, a=a[i], momentum=0.5, refresh_interval=4)
        np.testing.assert_allclose(sr.latent[i], si.latent, rtol=1e-13)
    s = D.simulate(20_000, r0=0.5, r_star=0.5, a=0.1, momentum=0.0, sigma_m=0.03, seed=1)
    np.testing.assert_array_equal(s.latent, 0.5)  # no process noise, at the plateau
    assert np.std(s.observed - s.latent) == pytest.approx(0.03, rel=0.03)
    s2 = D.simulate(20_000, r0=0.5, r_star=0.5, a=0.1, momentum=0.0, sigma_m=0.03, seed=1)
    np.testing.assert_array_equal(s.observed, s2.observed)
    assert s.latent.shape == (20_000,) and s.latent[0] == 0.5


def test_transition_matrix_matches_recursion():
    f = P.transition_matrix(a=0.03, momentum=0.9)
    np.testing.assert_allclose(f, [[1.9 - 0.03, -0.9], [1.0, 0.0]], atol=1e-15)
    x = D.simulate(50, r0=0.2, r_star=0.9, a=0.03, momentum=0.9).latent - 0.9
    state = np.array([x[0], x[0]])
    for n in range(1, 50):
        state = f @ state
        assert state[0] == pytest.approx(x[n], rel=1e-12, abs=1e-15)
    # companion eigenvalues = roots of the characteristic polynomial
    for d in (0, 1, 4):
        ev = np.sort_complex(np.linalg.eigvals(P.transition_matrix(a=0.1, momentum=0.6, lag=d)))
        poly = D._lag_polynomial(0.1, 0.6, d)
        np.testing.assert_allclose(ev, np.sort_complex(np.roots(poly)), atol=1e-10)


# ----------------------------------------------------------------------------- section 5


@pytest.mark.parametrize(("a", "mu"), [(0.05, 0.5), (0.5, 0.0), (0.02, 0.9)])
def test_stationary_variance_vs_long_simulation(a, mu):
    sigma_p = 0.1
    exact = D.stationary_variance(sigma_p=sigma_p, a=a, momentum=mu)
    cont = D.stationary_variance(sigma_p=sigma_p, a=a, momentum=mu, kind="continuum")
    assert exact == pytest.approx(D.stationary_covariance(a=a, momentum=mu, sigma_p=sigma_p)[0, 0], rel=1e-10)
    n, burn, seeds = 200_000, 5_000, range(6)
    # effective sample size of the sample variance of a Gaussian process: n / (1 + 2 sum rho_k^2)
    rho = _ar2_autocorr(a, mu, 20_000)
    ess = n / (1 + 2 * np.sum(rho[1:] ** 2))
    se_one = exact * math.sqrt(2.0 / ess)
    est = []
    for seed in seeds:
        x = D.simulate(n + burn, r0=0.0, r_star=0.0, a=a, momentum=mu, sigma_p=sigma_p, seed=seed).latent[burn:]
        v = float(np.mean(x**2))  # known mean 0
        assert abs(v - exact) < 4 * se_one
        est.append(v)
    se = se_one / math.sqrt(len(est))
    assert abs(np.mean(est) - exact) < 3 * se
    if (a, mu) == (0.5, 0.0):
        # here the continuum formula (1.0 vs exact 4/3 sigma^2) is clearly rejected
        assert abs(np.mean(est) - cont) > 10 * se


def test_stationary_variance_values_and_divergence():
    assert D.stationary_variance(sigma_p=1.0, a=0.5, momentum=0.0) == pytest.approx(4 / 3)
    assert D.stationary_variance(sigma_p=1.0, a=0.5, momentum=0.0, kind="continuum") == pytest.approx(1.0)
    # continuum with lag: sigma^2 / (2 c k), c = 1 - mu - a d
    assert D.stationary_variance(sigma_p=1.0, a=0.01, momentum=0.5, lag=10, kind="continuum") == pytest.approx(
        1 / (2 * 0.4 * 0.01)
    )
    # exact with lag via Lyapunov grows with lag and is inf past the threshold
    v = [D.stationary_variance(sigma_p=1.0, a=0.05, momentum=0.9, lag=d) for d in (0, 1, 2)]
    assert v[0] < v[1] < v[2] < math.inf
    assert D.stationary_variance(sigma_p=1.0, a=0.05, momentum=0.9, lag=3) == math.inf
    assert D.stationary_variance(sigma_p=1.0, a=0.05, momentum=0.9, lag=20, kind="continuum") == math.inf


# most draws with a lag are unstable and filtered (the stable a shrinks with the lag): the health check would
# fail on some seeds, so it is off, and explicit stable cases with and without a lag always run
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    a=st.floats(1e-3, 3.5),
    mu=st.floats(0.0, 0.98),
    d=st.integers(0, 6),
    sigma=st.floats(0.01, 2.0),
)
@example(a=0.3, mu=0.0, d=0, sigma=1.0)
@example(a=0.02, mu=0.9, d=2, sigma=0.5)  # spectral radius 0.970
@example(a=0.1, mu=0.3, d=6, sigma=0.1)  # 0.953
def test_stationary_covariance_solves_lyapunov(a, mu, d, sigma):
    assume(P.spectral_radius(a=a, momentum=mu, lag=d) < 0.999)
    p = D.stationary_covariance(a=a, momentum=mu, sigma_p=sigma, lag=d)
    f = P.transition_matrix(a=a, momentum=mu, lag=d)
    q = np.zeros_like(f)
    q[0, 0] = sigma**2
    resid = p - f @ p @ f.T - q
    assert np.max(np.abs(resid)) <= 1e-8 * np.max(np.abs(p))
    np.testing.assert_allclose(p, p.T, atol=0)
    assert np.min(np.linalg.eigvalsh(p)) >= -1e-8 * np.max(np.abs(p))
    if d == 0:
        assert p[0, 0] == pytest.approx(D.stationary_variance(sigma_p=sigma, a=a, momentum=mu), rel=1e-6)
        assert p[0, 1] / p[0, 0] == pytest.approx((1 + mu - a) / (1 + mu), rel=1e-6, abs=1e-9)


# ----------------------------------------------------------------------------- stability properties


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(a=st.floats(1e-3, 3.0), mu=st.floats(0.0, 0.98), d=st.integers(0, 12))
@example(a=1.0, mu=0.0, d=0)  # dead-beat (rho = 0): once math.log(0) on a fresh clone
def test_spectral_radius_predicts_boundedness(a, mu, d):
    rho = P.spectral_radius(a=a, momentum=mu, lag=d)
    if rho == 0.0:  # dead-beat: at the target from the first step on
        x = D.simulate(20, r0=0.0, r_star=1.0, a=a, momentum=mu, lag=d).latent - 1.0
        assert x[0] == -1.0 and np.all(x[1:] == 0.0)
        return
    assume(abs(math.log(rho)) > 5e-4)
    n = min(int(math.ceil(40 / abs(math.log(rho)))), 100_000) + 50
    x = D.simulate(n, r0=0.0, r_star=1.0, a=a, momentum=mu, lag=d).latent - 1.0
    tail = np.max(np.abs(x[-max(10, n // 10) :]))
    if rho < 1:
        assert np.all(np.isfinite(x))
        assert tail < 1e-4 * np.max(np.abs(x))
    else:
        assert tail > 1e3


@settings(max_examples=25, deadline=None)
@given(a=st.floats(5e-3, 1.0), mu=st.floats(0.0, 0.95), k=st.integers(1, 30))
@example(a=1.0, mu=0.0, k=1)  # dead-beat (rho = 0): once a math domain error
@example(a=0.9999999999999999, mu=0.0, k=1)  # rho ~ 1e-16: once a one-period horizon (first = last points)
def test_monodromy_radius_predicts_boundedness(a, mu, k):
    rho = P.spectral_radius(a=a, momentum=mu, refresh_interval=k)
    assume(rho > 0.0 and abs(math.log(rho)) > 0.02)  # rho = 0 (a = 1, mu = 0): dead-beat, settled in one step
    periods = max(2, int(math.ceil(30 / abs(math.log(rho)))))  # the first and last period never the same points
    assume(periods * k <= 20_000)
    x = D.simulate(periods * k + 1, r0=0.0, r_star=1.0, a=a, momentum=mu, refresh_interval=k).latent - 1.0
    start, end = np.max(np.abs(x[: k + 1])), np.max(np.abs(x[-k - 1 :]))
    if rho < 1:
        assert end < 1e-6 * start
    else:
        assert end > 1e6 * start


# ----------------------------------------------------------------------------- stop step


def test_time_to_fraction():
    # mu = 0, d = 0: x_n = (1 - a)^n x_0 exactly
    a = 1e-3
    expected = math.ceil(math.log(0.05) / math.log(1 - a))
    assert D.time_to_fraction(0.95, r0=0.1, r_star=0.6, a=a, momentum=0.0) == expected
    assert D.time_to_fraction(0.5, r0=0.1, r_star=0.6, a=a, momentum=0.0) == math.ceil(math.log(0.5) / math.log(1 - a))
    # with momentum: slower start; monotone in frac; matches the simulated path
    t50 = D.time_to_fraction(0.5, r0=0.0, r_star=1.0, a=1e-3, momentum=0.9)
    t95 = D.time_to_fraction(0.95, r0=0.0, r_star=1.0, a=1e-3, momentum=0.9)
    x = D.simulate(int(t95) + 1, r0=0.0, r_star=1.0, a=1e-3, momentum=0.9).latent
    assert x[int(t95)] >= 0.95 > x[int(t95) - 1]
    assert t50 < t95
    # decreasing reward (r0 > r_star) also works
    assert D.time_to_fraction(0.95, r0=0.6, r_star=0.1, a=a, momentum=0.0) == expected
    # never within the horizon: full gain without overshoot
    assert D.time_to_fraction(1.0, r0=0.0, r_star=1.0, a=1e-3, momentum=0.0, max_steps=5000) == math.inf
    assert D.time_to_fraction(0.95, r0=0.3, r_star=0.3, a=1e-3, momentum=0.0) == 0.0


# ----------------------------------------------------------------------------- one stop-step definition
@pytest.mark.parametrize(
    ("a", "mu", "regime", "first_crossing", "settled"),
    [
        (1e-3, 0.9, "overdamped", None, None),
        ((1 - 0.9) ** 2 / (2 * (1 + 0.9)), 0.9, "critical", None, None),
        (0.05, 0.9, "underdamped", 8, 57),
        (0.2, 0.9, "underdamped", 4, 56),
        (1.2, 0.3, "underdamped", 1, 5),
    ],
)
def test_stop_step_is_the_settling_step_in_every_regime(a, mu, regime, first_crossing, settled):
    """Stop step = first step after which the mean trajectory stays within 5% of its gain from the
    plateau: equal to the first crossing when it approaches monotonically, later when it rings."""
    from bayesgrpo.physics.stopping import settling_index, stop_steps
    from bench.physics_reference import deviation_paths

    assert D.classify_regime(a=a, momentum=mu) == regime
    x = deviation_paths(a, mu, 5000)
    idx, reached = settling_index(x)
    assert reached and np.all(np.abs(x[idx:]) <= 0.05) and abs(x[idx - 1]) > 0.05  # stays inside from idx on
    # the three implementations agree: the path rule, the streaming rule, the dynamics core
    st, re = stop_steps(np.array([a]), np.array([mu]), n_steps=5000)
    assert st[0] == idx and re[0]
    assert D.time_to_fraction(0.95, r0=0.2, r_star=0.7, a=a, momentum=mu) == idx
    crossing = int(np.argmax(x <= 0.05))
    if first_crossing is None:  # monotone approach: the settling step is the first crossing
        assert np.all(np.diff(x) <= 1e-15) and idx == crossing
    else:  # ringing: the first crossing is earlier (the numbers), settling later
        assert crossing == first_crossing and idx == settled and idx > crossing


def test_stop_step_censored_at_the_horizon():
    from bayesgrpo.physics.stopping import stop_steps

    st, re = stop_steps(np.array([1e-4, 0.05]), np.array([0.9, 0.0]), n_steps=100)
    assert st.tolist()[0] == 100 and not re[0]  # tau = 1000 steps: not settled within 100
    assert re[1] and st[1] == math.ceil(math.log(0.05) / math.log(0.95))
