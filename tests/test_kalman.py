"""The Kalman likelihood against the exact Gaussian marginal of recursion (1), and the compiled Op."""

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from bayesgrpo.models.kalman import filter_numpy, propagate_numpy
from bayesgrpo.models.kalman_op import ar2_loglik_grad


def brute_force_loglik(y, obs, *, r0, r_star, a, mu, sigma_p, sigma_m, lag):
    """log p(y_obs) from x = x_det + L eps (recursion (1) is linear in the noise)."""
    T = len(y)

    def run(x0, eps):
        x = np.zeros(T)
        x[0] = x0
        for n in range(T - 1):
            prev = x[n - 1] if n >= 1 else x[0]
            lagged = x[n - lag[n]] if n - lag[n] >= 0 else x[0]
            x[n + 1] = (1 + mu) * x[n] - mu * prev - a * lagged + eps[n]
        return x

    x_det = run(r0 - r_star, np.zeros(T))
    L = np.stack([run(0.0, np.eye(T)[k]) for k in range(T)], axis=1)  # column k: response to eps_k
    mean = r_star + x_det
    cov = sigma_p**2 * L @ L.T + sigma_m**2 * np.eye(T)
    idx = np.nonzero(obs)[0]
    return multivariate_normal(mean[idx], cov[np.ix_(idx, idx)]).logpdf(y[idx])


CASES = [
    dict(r0=0.1, r_star=0.8, a=0.05, mu=0.9, sigma_p=0.05, sigma_m=0.2, K=1),  # underdamped
    dict(r0=0.0, r_star=0.5, a=0.02, mu=0.0, sigma_p=0.1, sigma_m=0.3, K=1),  # AR(1) limit
    dict(r0=0.3, r_star=-0.2, a=0.001, mu=0.95, sigma_p=0.02, sigma_m=0.1, K=1),  # overdamped, slow
    dict(r0=0.0, r_star=1.0, a=0.1, mu=0.5, sigma_p=0.05, sigma_m=0.2, K=4),  # refresh lag pattern
]


@pytest.mark.parametrize("case", CASES)
def test_filter_equals_exact_gaussian_marginal(case):
    rng = np.random.default_rng(1)
    T = 40
    y = rng.normal(0.4, 0.3, T)
    obs = rng.random(T) < 0.6
    obs[0] = True
    K = case.pop("K")
    lag = np.mod(np.arange(T), K) if K > 1 else np.zeros(T, int)
    ll, _m, _P = filter_numpy(y, obs, lag=lag, D=max(2, K), **case)
    ref = brute_force_loglik(y, obs, lag=lag, **case)
    case["K"] = K
    assert ll == pytest.approx(ref, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("case", [c for c in CASES if c["K"] == 1])
def test_compiled_op_value_and_gradient(case):
    rng = np.random.default_rng(2)
    T = 60
    y = rng.normal(0.3, 0.3, (T, 1))
    mask = (rng.random((T, 1)) < 0.7).astype(float)
    mask[0] = 1
    p = np.array([case[k] for k in ("r0", "r_star", "a", "mu")] + [case["sigma_p"] ** 2, case["sigma_m"] ** 2])
    ll, g = ar2_loglik_grad(y, mask, *[np.array([v]) for v in p])
    ref = filter_numpy(
        y[:, 0],
        mask[:, 0].astype(bool),
        r0=p[0],
        r_star=p[1],
        a=p[2],
        mu=p[3],
        sigma_p=np.sqrt(p[4]),
        sigma_m=np.sqrt(p[5]),
    )[0]
    assert ll[0] == pytest.approx(ref, rel=1e-10)
    for k in range(6):
        h = 1e-6 * max(1.0, abs(p[k]))
        up, dn = p.copy(), p.copy()
        up[k] += h
        dn[k] -= h
        fd = (
            ar2_loglik_grad(y, mask, *[np.array([v]) for v in up])[0][0]
            - ar2_loglik_grad(y, mask, *[np.array([v]) for v in dn])[0][0]
        ) / (2 * h)
        assert g[0, k] == pytest.approx(fd, rel=1e-5, abs=1e-6), k


def test_op_in_pytensor_graph_matches_kernel():
    import pytensor
    import pytensor.tensor as pt

    from bayesgrpo.models.kalman_op import kalman_ar2_loglik

    rng = np.random.default_rng(3)
    y = rng.normal(size=(30, 2))
    mask = np.ones((30, 2))
    pars = dict(
        r0=np.array([0.0, 0.1]),
        r_star=np.array([1.0, 0.5]),
        a=np.array([0.05, 0.2]),
        mu=np.array([0.9, 0.3]),
        sigma_p=np.array([0.1, 0.05]),
        sigma_m=np.array([0.3, 0.4]),
    )
    sym = {k: pt.dvector(k) for k in pars}
    ll = kalman_ar2_loglik(pt.as_tensor(y), pt.as_tensor(mask), **sym)
    gr = pytensor.grad(ll.sum(), sym["r_star"])
    f = pytensor.function(list(sym.values()), [ll, gr])
    v, gv = f(*pars.values())
    ref = [filter_numpy(y[:, j], mask[:, j].astype(bool), **{k: p[j] for k, p in pars.items()})[0] for j in range(2)]
    np.testing.assert_allclose(v, ref, rtol=1e-10)
    assert np.all(np.isfinite(gv)) and gv.shape == (2,)


def test_propagation_matches_simulated_variance():
    """Propagating a known state forward reproduces the exact AR(2) stationary variance."""
    from bench.physics_reference import stationary_variance

    a, mu, sp = 0.05, 0.5, 0.1
    n = 4000
    rng = np.random.default_rng(4)
    x = propagate_numpy(
        np.zeros((n, 2)), np.zeros((n, 2, 2)), 400, a=np.full(n, a), mu=np.full(n, mu), sigma_p=np.full(n, sp), rng=rng
    )
    var = x[-1].var()
    exact = stationary_variance(sigma_p=sp, a=a, momentum=mu, kind="exact")
    # 4000 independent draws: the sample variance has relative sd sqrt(2/n) ~ 2.2%
    assert var == pytest.approx(exact, rel=0.09)
