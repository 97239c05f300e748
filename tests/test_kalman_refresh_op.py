"""The compiled refresh-interval Kalman Op: values against the numpy filter and the exact Gaussian
marginal of recursion (1) with d_n = n mod K, gradients against central finite differences, the Op
inside PyTensor graphs (python and numba linkers)."""

import warnings

import numpy as np
import pytest
from scipy.stats import multivariate_normal

import bayesgrpo.physics as dynamics  # dynamics + stability
from bayesgrpo.models.kalman import filter_numpy
from bayesgrpo.models.kalman_op import ar2_loglik_grad, refresh3_loglik_grad, refresh_loglik_grad

KS = [1, 2, 3, 7, 32, 128]
KERNELS = {"dispatch": refresh_loglik_grad, "three_state": refresh3_loglik_grad}
T_EXACT = 150  # > 128: the K = 128 anchor restarts once inside the window


def brute_force_loglik(y, obs, *, r0, r_star, a, mu, sigma_p, sigma_m, K):
    """log p(y_obs) of recursion (1) with d_n = n mod K, from x = x_det + L eps (linear in the noise)."""
    T = len(y)
    lag = np.mod(np.arange(T), K)

    def run(x0, eps):  # eps (T, m): m noise realisations at once
        x = np.zeros((T,) + eps.shape[1:])
        x[0] = x0
        for n in range(T - 1):
            prev = x[n - 1] if n >= 1 else x[0]
            x[n + 1] = (1 + mu) * x[n] - mu * prev - a * x[n - lag[n]] + eps[n]
        return x

    x_det = run(r0 - r_star, np.zeros((T, 1)))[:, 0]
    L = run(0.0, np.eye(T))  # column k: response to eps_k
    cov = sigma_p**2 * L @ L.T + sigma_m**2 * np.eye(T)
    idx = np.nonzero(obs)[0]
    return multivariate_normal(r_star + x_det[idx], cov[np.ix_(idx, idx)]).logpdf(y[idx])


def _threshold_a(K, mu):
    """Smallest stiffness a on a log grid (refined by bisection) with period spectral radius >= 1."""
    rho = lambda a: dynamics.spectral_radius(a=a, momentum=mu, refresh_interval=K)  # noqa: E731
    grid = np.geomspace(1e-5, 2.0 * (1.0 + mu) + 0.5, 300)
    i = int(np.argmax([rho(a) >= 1.0 for a in grid]))
    assert i > 0
    lo, hi = grid[i - 1], grid[i]
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if rho(mid) < 1.0 else (lo, mid)
    return lo


def _near_unstable_a(K, mu, target=0.97):
    """A stiffness below the threshold whose one-period spectral radius is ``target``."""
    rho = lambda a: dynamics.spectral_radius(a=a, momentum=mu, refresh_interval=K)  # noqa: E731
    hi = _threshold_a(K, mu)
    lo = 0.5 * hi
    assert rho(lo) < target
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if rho(mid) < target else (lo, mid)
    return lo


def regime(name, K):
    """Parameters of recursion (1) in the named regime for refresh interval K (checked, not assumed)."""
    base = dict(r0=0.1, r_star=0.8, sigma_p=0.05, sigma_m=0.2)
    mono = lambda p: dynamics.monodromy_matrix(a=p["a"], momentum=p["mu"], refresh_interval=K)  # noqa: E731
    if name == "overdamped":
        p = dict(base, mu=0.5, a=0.001)
        ev = np.linalg.eigvals(mono(p))
        dom = ev[np.argmax(np.abs(ev))]
        assert abs(dom) < 1 and abs(dom.imag) < 1e-12 and dom.real > 0  # monotone decay per period
    elif name == "underdamped":
        p = dict(base, mu=0.9, a=min(0.02, 0.5 * _threshold_a(K, 0.9)))
        ev = np.linalg.eigvals(mono(p))
        dom = ev[np.argmax(np.abs(ev))]
        assert abs(dom) < 1 and abs(dom.imag) > 1e-6  # ringing
    else:  # near-unstable: one-period spectral radius 0.97
        p = dict(base, mu=0.5, a=_near_unstable_a(K, 0.5))
        rho = dynamics.spectral_radius(a=p["a"], momentum=p["mu"], refresh_interval=K)
        assert rho == pytest.approx(0.97, abs=1e-6)
    return p


def make_mask(kind, T, rng):
    mask = np.zeros(T, bool)
    if kind == "every3":  # a run that logs every 3 steps
        mask[::3] = True
    elif kind == "gaps":  # random 70% with a 30-step hole
        mask = rng.random(T) < 0.7
        mask[40:70] = False
        mask[0] = True
    elif kind == "padded":  # a run that ends at step 110 of the batch grid (padding masked, garbage y)
        mask[:111] = True
    return mask


def kernel_args(p):
    return [np.array([p[k]], dtype=float) for k in ("r0", "r_star", "a", "mu")] + [
        np.array([p["sigma_p"] ** 2]),
        np.array([p["sigma_m"] ** 2]),
    ]


@pytest.mark.parametrize("mask_kind", ["every3", "gaps", "padded"])
@pytest.mark.parametrize("name", ["overdamped", "underdamped", "near_unstable"])
@pytest.mark.parametrize("K", KS)
def test_value_equals_numpy_filter_and_exact_gaussian_marginal(K, name, mask_kind):
    p = regime(name, K)
    rng = np.random.default_rng(K * 31 + len(name) + len(mask_kind))
    T = T_EXACT
    y = p["r_star"] + 0.3 * rng.standard_normal(T)
    obs = make_mask(mask_kind, T, rng)
    y_kernel = np.where(obs, y, np.nan)  # the kernel must never read an unobserved y
    lag = np.mod(np.arange(T), K)
    ref_np = filter_numpy(y, obs, lag=lag, D=max(2, K), **p)[0]
    ref_bf = brute_force_loglik(y, obs, K=K, **p)
    assert ref_np == pytest.approx(ref_bf, rel=1e-9)
    for label, kern in KERNELS.items():
        ll, g = kern(y_kernel[:, None], obs[:, None].astype(float), np.array([K], dtype=np.int64), *kernel_args(p))
        assert ll[0] == pytest.approx(ref_bf, rel=1e-9), label
        assert np.all(np.isfinite(g)), label


def test_batch_of_runs_with_different_K_and_lengths():
    """Several runs of different K, parameters and lengths in one call: each equals its own filter."""
    rng = np.random.default_rng(5)
    T = 300
    Ks = np.array([1, 2, 7, 32, 128, 3], dtype=np.int64)
    ends = [300, 250, 300, 180, 299, 90]  # padded at the end
    R = len(Ks)
    y = rng.normal(0.5, 0.3, (T, R))
    mask = np.zeros((T, R))
    for j, e in enumerate(ends):
        mask[:e, j] = (rng.random(e) < 0.8) | (np.arange(e) % 5 == 0)
        mask[0, j] = 1.0
        mask[e - 1, j] = 1.0
        y[e:, j] = 0.0  # padding as prepare_arrays writes it
    mask[:, 2] = 0.0
    mask[::4, 2] = 1.0  # logs every 4 steps
    pars = dict(
        r0=rng.normal(0.0, 0.2, R), r_star=rng.normal(0.8, 0.2, R), a=np.array([0.01, 0.05, 0.02, 0.004, 0.001, 0.1]),
        mu=np.array([0.9, 0.5, 0.7, 0.5, 0.3, 0.0]), sigma_p=rng.uniform(0.01, 0.1, R), sigma_m=rng.uniform(0.1, 0.3, R),
    )  # fmt: skip
    args = [pars[k] for k in ("r0", "r_star", "a", "mu")] + [pars["sigma_p"] ** 2, pars["sigma_m"] ** 2]
    for label, kern in KERNELS.items():
        ll, g = kern(y, mask, Ks, *args)
        assert ll.shape == (R,) and g.shape == (R, 6)
        for j in range(R):
            e = ends[j]
            ref = filter_numpy(
                y[:e, j],
                mask[:e, j] > 0,
                lag=np.mod(np.arange(e), Ks[j]),
                D=max(2, int(Ks[j])),
                **{k: v[j] for k, v in pars.items()},
            )[0]
            assert ll[j] == pytest.approx(ref, rel=1e-9), (label, j)
            one, gone = kern(
                y[:, j : j + 1].copy(), mask[:, j : j + 1].copy(), Ks[j : j + 1], *[v[j : j + 1] for v in args]
            )
            assert one[0] == ll[j] and np.array_equal(gone[0], g[j]), (label, j)  # runs do not interact


def test_k1_three_state_equals_lag_free_kernel():
    """K = 1: the 3-state filter (anchor = current state) reproduces the lag-free 2-state likelihood."""
    rng = np.random.default_rng(6)
    T, R = 200, 3
    y = rng.normal(0.4, 0.3, (T, R))
    mask = (rng.random((T, R)) < 0.6).astype(float)
    mask[0] = 1.0
    args = [
        np.array(v, dtype=float)
        for v in (
            [0.0, 0.2, -0.1],
            [0.8, 0.5, 0.3],
            [0.02, 0.001, 0.3],
            [0.9, 0.5, 0.0],
            [0.0025, 0.01, 1e-4],
            [0.04, 0.09, 0.01],
        )
    ]
    K1 = np.ones(R, dtype=np.int64)
    ll2, g2 = ar2_loglik_grad(y, mask, *args)
    lld, gd = refresh_loglik_grad(y, mask, K1, *args)
    ll3, g3 = refresh3_loglik_grad(y, mask, K1, *args)
    np.testing.assert_array_equal(lld, ll2)  # the dispatch runs the 2-state kernel itself
    np.testing.assert_array_equal(gd, g2)
    np.testing.assert_allclose(ll3, ll2, rtol=1e-12)
    np.testing.assert_allclose(g3, g2, rtol=1e-9, atol=1e-9 * np.abs(g2).max())


@pytest.mark.parametrize("name", ["overdamped", "underdamped", "near_unstable"])
@pytest.mark.parametrize("K", KS)
def test_gradient_equals_central_finite_differences(K, name):
    p = regime(name, K)
    rng = np.random.default_rng(100 + K)
    T = 220
    y = p["r_star"] + 0.3 * rng.standard_normal((T, 1))
    mask = (rng.random((T, 1)) < 0.7).astype(float)
    mask[0] = 1.0
    mask[190:] = 0.0  # padded end
    Kv = np.array([K], dtype=np.int64)
    theta = np.array([a[0] for a in kernel_args(p)])
    f = lambda th, kern: kern(y, mask, Kv, *[np.array([v]) for v in th])[0][0]  # noqa: E731
    for label, kern in KERNELS.items():
        _, g = kern(y, mask, Kv, *[np.array([v]) for v in theta])
        for k in range(6):
            h = 1e-6 * max(abs(theta[k]), 1e-2)
            up, dn = theta.copy(), theta.copy()
            up[k] += h
            dn[k] -= h
            fd = (f(up, kern) - f(dn, kern)) / (2.0 * h)
            assert g[0, k] == pytest.approx(fd, rel=1e-5, abs=1e-6), (label, k, g[0, k], fd)


def _graph_inputs():
    rng = np.random.default_rng(7)
    T, R = 160, 4
    y = rng.normal(0.5, 0.3, (T, R))
    mask = (rng.random((T, R)) < 0.8).astype(float)
    mask[0] = 1.0
    mask[120:, 3] = 0.0
    K = np.array([1, 4, 32, 128], dtype=np.int64)
    pars = dict(
        r0=np.array([0.0, 0.1, -0.1, 0.2]), r_star=np.array([1.0, 0.5, 0.8, 0.6]), a=np.array([0.05, 0.02, 0.005, 0.001]),
        mu=np.array([0.9, 0.5, 0.7, 0.3]), sigma_p=np.array([0.05, 0.05, 0.02, 0.03]), sigma_m=np.array([0.3, 0.2, 0.25, 0.2]),
    )  # fmt: skip
    return y, mask, K, pars


def _kernel_reference(y, mask, K, pars):
    ll, g = refresh_loglik_grad(
        y, mask, K, pars["r0"], pars["r_star"], pars["a"], pars["mu"], pars["sigma_p"] ** 2, pars["sigma_m"] ** 2
    )
    # chain rule to (r0, r_star, a, mu, sigma_p, sigma_m)
    gs = g.copy()
    gs[:, 4] *= 2.0 * pars["sigma_p"]
    gs[:, 5] *= 2.0 * pars["sigma_m"]
    return ll, gs


@pytest.mark.parametrize("mode", ["FAST_COMPILE", "NUMBA"])
def test_op_in_pytensor_graph_matches_kernel(mode):
    """The Op inside a graph (data as symbolic inputs, K as an int vector): value and gradient of the
    summed log-likelihood equal the kernel's; under the numba linker no object-mode fallback."""
    import pytensor
    import pytensor.tensor as pt

    from bayesgrpo.models.kalman_op import kalman_refresh_loglik

    y, mask, K, pars = _graph_inputs()
    ys, ms, Ks = pt.dmatrix("y"), pt.dmatrix("mask"), pt.lvector("K")
    sym = {k: pt.dvector(k) for k in pars}
    ll = kalman_refresh_loglik(ys, ms, Ks, **sym)
    total = (ll * pt.arange(1, 5)).sum()  # weights: the gradient must route each run's own output gradient
    grads = pytensor.grad(total, list(sym.values()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. a numba object-mode fallback warns
        f = pytensor.function([ys, ms, Ks, *sym.values()], [ll, *grads], mode=mode)
    out = f(y, mask, K, *pars.values())
    ref_ll, ref_g = _kernel_reference(y, mask, K, pars)
    np.testing.assert_allclose(out[0], ref_ll, rtol=1e-12)
    w = np.arange(1, 5)
    for k, gk in enumerate(out[1:]):
        np.testing.assert_allclose(gk, w * ref_g[:, k], rtol=1e-10, atol=1e-12)


def test_verify_grad():
    """PyTensor's own randomised finite-difference check of the Op's gradient (python linker).

    verify_grad differences one-sidedly, so its truncation error is eps * f''/2: a, sigma_p and sigma_m
    enter on the log scale, where the log-likelihood is far less curved than in a itself."""
    import pytensor.tensor as pt
    from pytensor.gradient import verify_grad

    from bayesgrpo.models.kalman_op import kalman_refresh_loglik

    y, mask, K, pars = _graph_inputs()

    def fun(r0, r_star, log_a, mu, log_sp, log_sm):
        return kalman_refresh_loglik(
            pt.as_tensor(y), pt.as_tensor(mask), pt.as_tensor(K),
            r0=r0, r_star=r_star, a=pt.exp(log_a), mu=mu, sigma_p=pt.exp(log_sp), sigma_m=pt.exp(log_sm),
        )  # fmt: skip

    pt_vals = [
        pars["r0"],
        pars["r_star"],
        np.log(pars["a"]),
        pars["mu"],
        np.log(pars["sigma_p"]),
        np.log(pars["sigma_m"]),
    ]
    verify_grad(
        fun, pt_vals, n_tests=3, rng=np.random.default_rng(8), mode="FAST_COMPILE", eps=1e-7, abs_tol=1e-5, rel_tol=1e-5
    )


def test_K_must_be_an_integer_vector():
    import pytensor.tensor as pt

    from bayesgrpo.models.kalman_op import kalman_refresh_loglik

    kw = {k: pt.dvector(k) for k in ("r0", "r_star", "a", "mu", "sigma_p", "sigma_m")}
    with pytest.raises(TypeError, match="integer vector"):
        kalman_refresh_loglik(pt.dmatrix(), pt.dmatrix(), pt.dvector(), **kw)


# ----------------------------------------------------------------- numpy 3-state filter (forecasting)
@pytest.mark.parametrize("K", KS)
def test_numpy_refresh_filter_equals_general_filter_state_and_likelihood(K):
    """The 3-state numpy filter (forecasts of runs with K > 1) gives the likelihood and the filtered
    state of the K-dimensional filter: x_n, x_{n-1} and the anchor x_{n - n mod K}, means and covariances."""
    from bayesgrpo.models.kalman import filter_refresh_numpy

    rng = np.random.default_rng(200 + K)
    T = T_EXACT
    p = regime("underdamped", K)
    draws = {k: v * (1.0 + 0.1 * rng.standard_normal(5)) for k, v in p.items()}  # a batch of 5 "draws"
    draws["r0"] = p["r0"] + 0.1 * rng.standard_normal(5)
    y = p["r_star"] + 0.3 * rng.standard_normal(T)
    obs = make_mask("gaps", T, rng)
    ll3, m3, P3 = filter_refresh_numpy(y[:, None], obs[:, None], K=K, **draws)
    llD, mD, PD = filter_numpy(y[:, None], obs[:, None], lag=np.mod(np.arange(T), K), D=max(2, K), **draws)
    np.testing.assert_allclose(ll3, llD, rtol=1e-10)
    d = (T - 1) % K  # the anchor of the last step is x_{T-1-d}, slot d of the K-dimensional state
    idx = [0, 1, d]
    np.testing.assert_allclose(m3, mD[:, idx], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(P3, PD[:, idx][:, :, idx], rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("K", [2, 7, 32])
def test_numpy_refresh_propagation_matches_general_propagation(K):
    """Noise-free paths are identical; with noise the spread after many steps matches (same law)."""
    from bayesgrpo.models.kalman import filter_refresh_numpy, propagate_numpy, propagate_refresh_numpy

    rng = np.random.default_rng(300 + K)
    T, n_future = 75, 3 * K + 11
    p = dict(regime("underdamped", K), sigma_p=0.0)
    y = p["r_star"] + 0.3 * rng.standard_normal(T)
    obs = np.ones(T, bool)
    _, m3, _P3 = filter_refresh_numpy(y, obs, K=K, **p)
    _, mD, PD = filter_numpy(y, obs, lag=np.mod(np.arange(T), K), D=max(2, K), **p)
    # sigma_p = 0: the filtered state is exact (P = 0) and the paths deterministic
    kw = dict(a=np.array([p["a"]]), mu=np.array([p["mu"]]), sigma_p=np.array([0.0]))
    x3 = propagate_refresh_numpy(
        m3[None], np.zeros((1, 3, 3)), n_future, K=K, n_last=T - 1, rng=np.random.default_rng(0), **kw
    )
    lag_out = np.mod(np.arange(T - 1, T - 1 + n_future), K)
    xD = propagate_numpy(
        mD[None], np.zeros((1,) + PD.shape), n_future, lag=lag_out, D=max(2, K), rng=np.random.default_rng(0), **kw
    )
    np.testing.assert_allclose(x3, xD, rtol=1e-10, atol=1e-12)
    # with process noise: the variance of the end point over 4000 independent paths
    n = 4000
    kw = dict(a=np.full(n, p["a"]), mu=np.full(n, p["mu"]), sigma_p=np.full(n, 0.05))
    v3 = propagate_refresh_numpy(
        np.tile(m3, (n, 1)), np.zeros((n, 3, 3)), n_future, K=K, n_last=T - 1, rng=np.random.default_rng(1), **kw
    )[-1].var()
    vD = propagate_numpy(
        np.tile(mD, (n, 1)),
        np.zeros((n,) + PD.shape),
        n_future,
        lag=lag_out,
        D=max(2, K),
        rng=np.random.default_rng(2),
        **kw,
    )[-1].var()
    # two independent sample variances of 4000 draws: relative sd of their ratio ~ sqrt(4/n) ~ 3%
    assert v3 == pytest.approx(vD, rel=0.12)
