"""The extended Kalman filter of the degeneracy / heterogeneity law (bayesgrpo.models.degeneracy):
its compiled kernel against the numpy reference, its gradient against finite differences, and its
exact limits (linear oscillator above the floor's reach; lam = 0 is the degeneracy law)."""

import numpy as np
import pytest

from bayesgrpo.models.degeneracy import (
    KAPPA,
    degenerate_deviation_paths,
    ekf_filter_numpy,
    ekf_loglik_grad,
    propagate_degenerate_numpy,
)
from bayesgrpo.models.kalman import filter_numpy

NAMES = ("r0", "r_star", "a", "mu", "q", "r", "L", "lam")
CASES = [
    # a slow start near the floor, heterogeneous difficulty
    dict(r0=0.05, r_star=0.9, a=0.03, mu=0.9, q=0.02**2, r=0.1**2, L=0.0, lam=2.0),
    # the degeneracy law alone
    dict(r0=0.1, r_star=0.7, a=0.05, mu=0.8, q=0.03**2, r=0.15**2, L=0.0, lam=0.0),
    # start deep in the clipped region (u < H_MIN): only lam's gradient is non-zero there
    dict(r0=-0.2, r_star=1.0, a=0.08, mu=0.5, q=0.05**2, r=0.2**2, L=0.0, lam=1.0),
    # no momentum, strong heterogeneity
    dict(r0=0.2, r_star=0.6, a=0.02, mu=0.0, q=0.01**2, r=0.05**2, L=0.1, lam=3.5),
]


def _data(case, T=80, seed=3):
    """A noisy path of the recursion itself (so the filter's state visits the nonlinear region)."""
    rng = np.random.default_rng(seed)
    D = case["r_star"] - case["L"]
    x = np.empty(T)
    x[0] = xp = case["r0"] - case["r_star"]
    for n in range(1, T):
        u = np.clip(1 + x[n - 1] / D, 1e-3, 1.0)
        h = 1.0 if x[n - 1] >= 0 else u**KAPPA * np.exp(case["lam"] * (1 - u))
        x[n], xp = (
            (1 + case["mu"]) * x[n - 1]
            - case["mu"] * xp
            - case["a"] * h * x[n - 1]
            + np.sqrt(case["q"]) * rng.normal(),
            x[n - 1],
        )
    y = case["r_star"] + x + np.sqrt(case["r"]) * rng.normal(size=T)
    mask = (rng.random(T) < 0.8).astype(float)
    mask[0] = 1.0
    return y[:, None], mask[:, None]


def _kernel(y, mask, p):
    return ekf_loglik_grad(y, mask, np.array([KAPPA]), *[np.array([v]) for v in p])


@pytest.mark.parametrize("case", CASES)
def test_kernel_equals_numpy_reference(case):
    y, mask = _data(case)
    p = [case[k] for k in NAMES]
    ll, _ = _kernel(y, mask, p)
    ref, _, _ = ekf_filter_numpy(y, mask.astype(bool), r0=case["r0"], r_star=case["r_star"], a=case["a"], mu=case["mu"],
                                 sigma_p=np.sqrt(case["q"]), sigma_m=np.sqrt(case["r"]), L=case["L"], lam=case["lam"])  # fmt: skip
    assert ll[0] == pytest.approx(float(ref[0]), rel=1e-10)


@pytest.mark.parametrize("case", CASES)
def test_gradient_equals_finite_differences(case):
    y, mask = _data(case)
    p = np.array([case[k] for k in NAMES], dtype=float)
    _, g = _kernel(y, mask, p)
    for k, name in enumerate(NAMES):
        h = 1e-6 * max(1e-2, abs(p[k]))
        up, dn = p.copy(), p.copy()
        up[k] += h
        dn[k] -= h
        fd = (_kernel(y, mask, up)[0][0] - _kernel(y, mask, dn)[0][0]) / (2 * h)
        assert g[0, k] == pytest.approx(fd, rel=2e-5, abs=1e-5), name
    if case["r0"] - case["L"] < 1e-3 * (case["r_star"] - case["L"]):  # clipped start: the law is flat in L there
        assert abs(g[0, 7]) > 0


def test_linear_limit_above_the_floor_is_the_exact_kalman_filter():
    """A run falling from above its plateau never sees h < 1: the EKF is the exact linear filter (any lam)."""
    case = dict(r0=1.0, r_star=0.5, a=0.05, mu=0.6, q=1e-8, r=0.1**2, L=0.0, lam=3.0)
    rng = np.random.default_rng(0)
    n = np.arange(60)
    y = (0.5 + 0.5 * 0.9**n + 0.1 * rng.normal(size=60))[:, None]
    mask = np.ones_like(y)
    ll, _ = _kernel(y, mask, [case[k] for k in NAMES])
    ref = filter_numpy(y[:, 0], mask[:, 0].astype(bool), r0=1.0, r_star=0.5, a=0.05, mu=0.6, sigma_p=1e-4, sigma_m=0.1)[
        0
    ]
    assert ll[0] == pytest.approx(ref, rel=1e-6)


def test_heterogeneity_makes_the_rise_fast_then_slow():
    """lam > 0: the same plateau stiffness, a faster early rise and the same final approach rate."""
    kw = dict(r0=0.05, r_star=1.0, L=0.0)
    base = degenerate_deviation_paths(np.array(0.01), np.array(0.0), 2000, lam=0.0, **kw)
    het = degenerate_deviation_paths(np.array(0.01), np.array(0.0), 2000, lam=3.0, **kw)
    half = lambda x: int(np.argmax(x <= 0.5))  # noqa: E731 - steps to cover half the gain
    assert half(het) < half(base) / 5
    # near the plateau both relax at the plateau's rate a (recursion (1) is the local law)
    tail_b = np.log(base[1900] / base[1800]) / 100
    tail_h = np.log(het[1000] / het[900]) / 100
    assert tail_b == pytest.approx(np.log(1 - 0.01), rel=0.05) and tail_h == pytest.approx(np.log(1 - 0.01), rel=0.05)


def test_forecast_paths_follow_the_deterministic_law_without_noise():
    m = np.array([[-0.8, -0.8]])
    P = np.zeros((1, 2, 2))
    out = propagate_degenerate_numpy(m, P, 50, a=0.05, mu=0.3, sigma_p=0.0, r_star=1.0, L=0.0, lam=2.0,
                                     rng=np.random.default_rng(0))  # fmt: skip
    ref = degenerate_deviation_paths(np.array(0.05), np.array(0.3), 50, r0=0.2, r_star=1.0, L=0.0, lam=2.0) * (-0.8)
    np.testing.assert_allclose(out[:, 0], ref[1:], rtol=1e-12)
