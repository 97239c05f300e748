"""Learning-curve families fitted by bounded least squares, their Laplace predictive draws, and the BIC
ensemble of them (Domhan, Springenberg & Hutter, IJCAI 2015; Viering & Loog 2022's families).

One fit per family and case, on the time axis ``u = (step - s0 + dt) / (H - s0 + dt)`` (``u = 1`` at the
horizon). Families (distinct shapes; the aliases name the same curve under another parameterisation):

=========  =====================================================  ======================================
flat       ``c``                                                   the persistence model
exp3       ``c - (c - r0) exp(-u / tau)``                          sat_exp; exp4 with delta = 1
pow3       ``c - a u^-alpha``
pow4       ``c - d (1 + u / b)^-alpha``
mmf        ``c - (c - r0) / (1 + (k u)^delta)``                    = ScaleRL's sigmoid in log u, dr_hill
weibull    ``c - (c - r0) exp(-(k u)^delta)``                      = janoschek, exp4
logistic   ``r0 + (c - r0) / (1 + exp(-k (u - m)))``              an S-curve in u (late take-off)
=========  =====================================================  ======================================

Predictive draws (Laplace): parameters ~ N(theta_hat, s^2 (J'J)^-1), clipped to the bounds; the future
window mean of the drawn curve plus the AR(1)-corrected noise of the window's mean. The evidence of each
family: BIC ``n ln(RSS / n) + p ln n``; and the *block score*, the log predictive density of the prefix's
last quarter under the family fitted to the first three quarters (leave-future-out).

The BIC ensemble weighs the families by ``exp(-BIC / 2)`` and mixes their draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from bayesgrpo.evaluation.peer_base import Peer, _ar1_rho, _mean_noise_sd, _Problem
from bayesgrpo.series import current_level, robust_range, start_level

LOG2PI = math.log(2 * math.pi)


@dataclass(frozen=True)
class Family:
    name: str
    f: Callable
    bounds: Callable  # (y) -> (lb, ub)
    starts: Callable  # (u, y, lb, ub) -> list of theta

    @property
    def p(self) -> int:
        return len(self.bounds(np.array([0.0, 1.0]))[0])


def _levels(y):
    lo, hi = np.quantile(y, [0.05, 0.95])
    r = robust_range(y)
    return float(lo - r), float(hi + r), r


def _edges(y):
    return start_level(y), current_level(y)


def _b_flat(y):
    a, b, _ = _levels(y)
    return np.array([a]), np.array([b])


def _s_flat(u, y, lb, ub):
    return [[float(np.mean(y))]]


def _f_flat(u, c):
    return np.full_like(u, c)


def _b_exp3(y):
    a, b, _ = _levels(y)
    return np.array([a, a, 1e-3]), np.array([b, b, 1e2])


def _s_exp3(u, y, lb, ub):
    first, last = _edges(y)
    r = robust_range(y)
    return [
        [c, first, t] for t in (0.03, 0.1, 0.3, 1.0, 5.0) for c in (last, last + 0.5 * r * np.sign(last - first or 1))
    ]


def _f_exp3(u, c, r0, tau):
    return c - (c - r0) * np.exp(-u / tau)


def _b_pow3(y):
    a, b, r = _levels(y)
    return np.array([a, -2 * r, 0.01]), np.array([b, 2 * r, 3.0])


def _s_pow3(u, y, lb, ub):
    first, last = _edges(y)
    out = []
    for al in (0.1, 0.3, 0.7, 1.5):
        for c in (last, 0.5 * (last + ub[0])):
            out.append([c, (c - first) / max(float(u[0]) ** (-al), 1e-12), al])
    return out


def _f_pow3(u, c, a, al):
    return c - a * u ** (-al)


def _b_pow4(y):
    a, b, r = _levels(y)
    return np.array([a, -3 * r, 1e-3, 0.01]), np.array([b, 3 * r, 10.0, 5.0])


def _s_pow4(u, y, lb, ub):
    first, last = _edges(y)
    out = []
    for bb in (0.01, 0.1, 1.0):
        for al in (0.5, 1.5):
            for c in (last, last + 0.5 * (last - first)):
                d = (c - first) / max((1 + float(u[0]) / bb) ** (-al), 1e-12)
                out.append([c, d, bb, al])
    return out


def _f_pow4(u, c, d, b, al):
    return c - d * (1.0 + u / b) ** (-al)


def _b_sig(y):
    a, b, _ = _levels(y)
    return np.array([a, a, 1e-2, 0.1]), np.array([b, b, 1e3, 10.0])


def _s_sig(u, y, lb, ub):
    first, last = _edges(y)
    r = robust_range(y)
    um = float(u[-1])
    out = []
    for k in (0.3 / um, 1.0 / um, 3.0 / um):
        for dl in (0.7, 1.5, 3.0):
            for c in (last, last + 0.5 * r * np.sign(last - first or 1)):
                out.append([c, first, k, dl])
    return out


def _f_mmf(u, c, r0, k, dl):
    return c - (c - r0) / (1.0 + (k * u) ** dl)


def _f_weibull(u, c, r0, k, dl):
    return c - (c - r0) * np.exp(-((k * u) ** dl))


def _b_logistic(y):
    a, b, _ = _levels(y)
    return np.array([a, a, 1.0, -0.5]), np.array([b, b, 200.0, 2.0])


def _s_logistic(u, y, lb, ub):
    first, last = _edges(y)
    r = robust_range(y)
    um = float(u[-1])
    out = []
    for m in (0.5 * um, um, 2 * um, 4 * um):
        for k in (5.0 / um, 20.0 / um):
            for c in (last, last + r):
                out.append([first, c, min(k, 199.0), min(m, 1.9)])
    return out


def _f_logistic(u, r0, c, k, m):
    z = np.clip(-k * (u - m), -50, 50)
    return r0 + (c - r0) / (1.0 + np.exp(z))


FAMILIES: dict[str, Family] = {
    "flat": Family("flat", _f_flat, _b_flat, _s_flat),
    "exp3": Family("exp3", _f_exp3, _b_exp3, _s_exp3),
    "pow3": Family("pow3", _f_pow3, _b_pow3, _s_pow3),
    "pow4": Family("pow4", _f_pow4, _b_pow4, _s_pow4),
    "mmf": Family("mmf", _f_mmf, _b_sig, _s_sig),
    "weibull": Family("weibull", _f_weibull, _b_sig, _s_sig),
    "logistic": Family("logistic", _f_logistic, _b_logistic, _s_logistic),
}


@dataclass
class Fit:
    theta: np.ndarray
    rss: float
    n: int
    p: int
    cov: np.ndarray  # s^2 (J'J)^-1
    sigma: float

    @property
    def bic(self) -> float:
        return self.n * math.log(max(self.rss / self.n, 1e-300)) + self.p * math.log(self.n)


def _jac(fam: Family, u, th, lb, ub):
    eps = 1e-6 * np.maximum(1.0, np.abs(th))
    J = np.empty((u.size, th.size))
    for i in range(th.size):
        a, b = th.copy(), th.copy()
        a[i] = min(th[i] + eps[i], ub[i])
        b[i] = max(th[i] - eps[i], lb[i])
        J[:, i] = (fam.f(u, *a) - fam.f(u, *b)) / max(a[i] - b[i], 1e-300)
    return J


def fit_family(fam: Family, u: np.ndarray, y: np.ndarray, lb=None, ub=None) -> Fit | None:
    if lb is None:
        lb, ub = fam.bounds(y)
    n, p = y.size, lb.size
    if n < p + 2:
        return None
    best = None
    with np.errstate(all="ignore"):
        for p0 in fam.starts(u, y, lb, ub):
            p0 = np.clip(np.asarray(p0, float), lb + 1e-9 * (ub - lb), ub - 1e-9 * (ub - lb))
            try:
                res = optimize.least_squares(lambda th: fam.f(u, *th) - y, p0, bounds=(lb, ub), method="trf",
                                             x_scale="jac", max_nfev=300)  # fmt: skip
            except (ValueError, FloatingPointError):
                continue
            if np.isfinite(res.cost) and (best is None or res.cost < best.cost):
                best = res
    if best is None:
        return None
    th = best.x
    resid = fam.f(u, *th) - y
    rss = float(resid @ resid)
    s2 = rss / max(n - p, 1)
    J = _jac(fam, u, th, lb, ub)
    JtJ = J.T @ J
    ridge = 1e-9 * max(float(np.trace(JtJ)), 1e-12)
    try:
        cov = s2 * np.linalg.inv(JtJ + ridge * np.eye(p))
    except np.linalg.LinAlgError:
        cov = s2 * np.linalg.pinv(JtJ)
    cov = 0.5 * (cov + cov.T)
    return Fit(th, rss, n, p, cov, math.sqrt(s2))


def _theta_draws(fam: Family, fit: Fit, lb, ub, n: int, rng) -> np.ndarray:
    w, V = np.linalg.eigh(fit.cov)
    L = V * np.sqrt(np.clip(w, 0, None))
    th = fit.theta[None, :] + rng.standard_normal((n, fit.p)) @ L.T
    return np.clip(th, lb, ub)


def _curves(fam: Family, th: np.ndarray, u: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        out = np.stack([fam.f(u, *t) for t in th])
    return out


def block_score(fam: Family, u, y, lb, ub) -> float:
    """Log predictive density of the prefix's last quarter (at least 3 points) under the family fitted to the
    rest (Gaussian: residual variance plus the delta-method variance of the curve), per held-out point."""
    n = y.size
    k = max(3, int(round(0.25 * n)))
    if n - k < lb.size + 2:
        return float("nan")
    fit = fit_family(fam, u[:-k], y[:-k], lb, ub)
    if fit is None:
        return float("nan")
    ub_ = u[-k:]
    mu = fam.f(ub_, *fit.theta)
    J = _jac(fam, ub_, fit.theta, lb, ub)
    var = fit.sigma**2 + np.einsum("ij,jk,ik->i", J, fit.cov, J)
    var = np.maximum(var, 1e-12)
    return float(np.mean(-0.5 * (LOG2PI + np.log(var) + (y[-k:] - mu) ** 2 / var)))


@dataclass
class FamilyForecast:
    name: str
    draws: np.ndarray  # final-window mean draws
    bic: float
    block: float
    ok: bool
    message: str = ""


def forecast_families(p: _Problem, n_draws: int, rng, families=FAMILIES) -> dict[str, FamilyForecast]:
    scale_u = p.horizon - p.s0 + p.dt
    u = (p.steps - p.s0 + p.dt) / scale_u
    uf = (p.future - p.s0 + p.dt) / scale_u
    y = p.y
    out = {}
    for name, fam in families.items():
        lb, ub = fam.bounds(y)
        fit = fit_family(fam, u, y, lb, ub)
        if fit is None:
            out[name] = FamilyForecast(name, np.empty(0), np.nan, np.nan, False, "no fit")
            continue
        rho = _ar1_rho(fam.f(u, *fit.theta) - y)
        if p.m_future:
            th = _theta_draws(fam, fit, lb, ub, n_draws, rng)
            cur = _curves(fam, th, uf[p.fut_win_idx]).mean(axis=1)
            sd = _mean_noise_sd(fit.sigma, p.m_future, rho)
            d = p.window_mean(cur + sd * rng.standard_normal(n_draws))
        else:
            d = p.window_mean(np.zeros(n_draws))
        ok = bool(np.all(np.isfinite(d)))
        out[name] = FamilyForecast(name, d if ok else np.empty(0), fit.bic, block_score(fam, u, y, lb, ub), ok,
                                   "" if ok else "non-finite draws")  # fmt: skip
    return out


def bic_weights(ff: dict[str, FamilyForecast]) -> dict[str, float]:
    ok = {k: v.bic for k, v in ff.items() if v.ok and np.isfinite(v.bic)}
    if not ok:
        return {}
    b = np.array(list(ok.values()))
    w = np.exp(-0.5 * (b - b.min()))
    w /= w.sum()
    return dict(zip(ok, w, strict=True))


def mix(ff: dict[str, FamilyForecast], weights: dict[str, float], n: int, rng) -> np.ndarray:
    names = [k for k, w in weights.items() if w > 0 and ff[k].ok]
    w = np.array([weights[k] for k in names])
    w = w / w.sum()
    counts = rng.multinomial(n, w)
    parts = [rng.choice(ff[k].draws, size=c, replace=True) for k, c in zip(names, counts, strict=True) if c]
    return rng.permutation(np.concatenate(parts))


class CurveFamiliesPeer(Peer):
    """The BIC ensemble of :data:`FAMILIES` as a backtest peer; every family's draws, BIC and block score of
    each forecast are kept in :attr:`extras` (key: run id, last observed step) for offline compositions."""

    name = "bic_ensemble"
    min_points = 6

    def __init__(self):
        self.extras: dict = {}

    def _forecast(self, p: _Problem, n_draws, rng):
        ff = forecast_families(p, n_draws, rng)
        w = bic_weights(ff)
        if not w:
            raise RuntimeError("no family could be fitted")
        self._last = ff
        return mix(ff, w, n_draws, rng), None, {"weights": w}

    def forecast_many(self, cases, *, final_window: float = 0.1, n_draws: int = 1000, seed=0):
        out = []
        for i, c in enumerate(cases):
            self._last = None
            res = self.forecast(c.prefix["step"].to_numpy(), c.prefix["reward"].to_numpy(), future_steps=c.future_steps,
                                final_window=final_window, n_draws=n_draws, seed=[*np.atleast_1d(seed), i])  # fmt: skip
            if self._last is not None:
                self.extras[(c.run_id, float(c.prefix["step"].max()))] = self._last
            out.append(res)
        return out
