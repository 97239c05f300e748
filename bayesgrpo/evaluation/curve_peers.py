"""Curve-fit peers: the last value (random-walk interval) and bounded least-squares fits of saturating
curves (exponential, ScaleRL sigmoid, pow3) with a moving-block residual bootstrap (:class:`LSQPeer`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import optimize, stats

from bayesgrpo.conventions import DEFAULT_FINAL_WINDOW
from bayesgrpo.evaluation.peer_base import PATH_LEVELS, Peer, _ar1_rho, _mean_noise_sd, _Problem, _problem, _resample
from bayesgrpo.series import current_level, start_level
from bayesgrpo.series import robust_range as reward_range

__all__ = ["LastValuePeer", "LSQPeer"]


# =====================================================================================  last value
class LastValuePeer(Peer):
    """Persistence forecast: the final reward equals the mean of the last observed points.

    Point forecast
        Mean of the last ``k = max(ceil(0.1 n), min(3, n))`` observed points (the last 10% of the
        ``n`` observed points, at least 3).

    Interval (the choice, documented)
        A random-walk-ish variance growth fitted *within the observed prefix*: block means
        ``B_j`` of ``k`` consecutive points are formed, and for every lag ``L`` (in logged points,
        ``k <= L <= n - k``) the mean squared change ``MSD(L) = mean_j (B_{j+L} - B_j)^2`` is
        computed. ``MSD(L) = c + q L`` is fitted with ``c, q >= 0`` (non-negative least squares):
        ``c / 2`` estimates the noise variance of a k-point block mean and ``q`` the per-point
        growth of the variance of level changes (a drift/trend in the prefix inflates ``q``,
        which is the honest penalty for a no-trend forecast). The forecast error of the future
        window mean at distance ``d`` (points between the centre of the last block and the centre
        of the future window points) is Normal with variance
        ``q d + c/2 + (c/2) k / m_f`` (level change + noise of the last block + noise of the
        ``m_f`` future window points, scaled as iid). With fewer than 3 usable lags the variance
        growth falls back to ``q = var(y) / n`` (the whole observed spread over the prefix).
        The forecast distance here is usually longer than any lag in the prefix, so this is a
        linear extrapolation of the variance growth.
    """

    name = "last_value"
    min_points = 2

    def _forecast(self, p: _Problem, n_draws, rng):
        y = p.y
        n = y.size
        k = max(int(math.ceil(p.fw * n)), min(3, n))
        last_mean = float(y[-k:].mean())
        cs = np.concatenate([[0.0], np.cumsum(y)])
        blocks = (cs[k:] - cs[:-k]) / k  # B_j, j = 0..n-k
        lags = np.arange(k, n - k + 1)
        c = q = 0.0  # (0, 0): no fit (too few lags, or a flat prefix)
        if lags.size >= 3:
            msd = np.array([np.mean((blocks[L:] - blocks[:-L]) ** 2) for L in lags])
            A = np.column_stack([np.ones_like(lags, dtype=float), lags.astype(float)])
            (c, q), _ = optimize.nnls(A, msd)
        if c == 0 and q == 0:
            v = float(np.var(y, ddof=1)) if n > 1 else 0.0
            c = 2.0 * v / k
            q = v / n
        sig_block2 = c / 2.0
        # distances (in logged points) from the centre of the last block
        centre_last = float(p.steps[-k:].mean())
        d_future = np.maximum((p.future - centre_last) / p.dt, 0.0)
        info = {"k": k, "c": float(c), "q": float(q), "last_mean": last_mean}
        if p.m_future:
            d = float(np.mean(d_future[p.fut_win_idx]))
            var = q * d + sig_block2 + sig_block2 * k / p.m_future
            fut_mean = last_mean + math.sqrt(max(var, 0.0)) * rng.standard_normal(n_draws)
            draws = p.window_mean(fut_mean)
            info["distance_points"] = d
        else:
            draws = p.window_mean(np.zeros(n_draws))
        pathq = None
        if p.future.size:
            sd = np.sqrt(q * d_future + sig_block2)
            z = stats.norm.ppf(np.asarray(PATH_LEVELS))[:, None]
            pathq = last_mean + z * sd[None, :]
        return draws, pathq, info


# =====================================================================================  LSQ peers
def _f_sat_exp(u, r_inf, r0, tau):
    return r_inf - (r_inf - r0) * np.exp(-u / tau)


def _f_scalerl(u, a, r0, c_mid, b):
    return r0 + (a - r0) / (1.0 + (c_mid / u) ** b)


def _f_pow3(u, c, a, alpha):
    return c - a * u ** (-alpha)


def _j_sat_exp(u, r_inf, r0, tau):
    e = np.exp(-u / tau)
    return np.column_stack([1.0 - e, e, -(r_inf - r0) * e * u / tau**2])


def _j_scalerl(u, a, r0, c_mid, b):
    g = (c_mid / u) ** b
    d = 1.0 / (1.0 + g)
    k = -(a - r0) * d * d * g
    return np.column_stack([d, 1.0 - d, k * b / c_mid, k * np.log(c_mid / u)])


def _j_pow3(u, c, a, alpha):
    v = u ** (-alpha)
    return np.column_stack([np.ones_like(u), -v, a * v * np.log(u)])


class LSQPeer(Peer):
    """Bounded least-squares curve fit with a moving-block residual bootstrap.

    Time axis
        ``u = (step - s0 + dt) / (H - s0 + dt)`` with ``dt`` the logging interval, so ``u`` is in
        ``(0, 1]`` and ``u = 1`` at the horizon (positive, as the power/sigmoid forms need).

    Bounds (the choice, documented)
        With ``lo``, ``hi`` the 5% / 95% quantiles of the observed rewards and
        ``r = reward_range(observed)``, every asymptote / level parameter is bounded to
        ``[lo - r, hi + r]``; rate / shape parameters have wide fixed bounds (see each family).

    Fit
        ``scipy.optimize.least_squares`` (trust-region reflective, bounds) from several starts;
        the lowest cost wins.

    Uncertainty
        Moving-block bootstrap of the centred residuals, inflated by ``sqrt(n / (n - p))``, with
        block length ``ceil(n^(1/3))`` (respects the autocorrelation of logged interval means);
        each of ``n_boot`` (default 100) replicates ``fit + resampled residuals`` is refitted
        (from the best fit, analytic Jacobian, at most 100 evaluations).
        Final draws = window mean of a resampled replicate curve + Normal noise of the mean of the
        ``m_f`` future window points, whose SD uses the residual SD and an AR(1) correction with the
        lag-1 residual autocorrelation (:func:`_mean_noise_sd`).
    """

    min_points = 6

    def __init__(
        self,
        name: str,
        func: Callable,
        param_names: tuple[str, ...],
        bounds: Callable,
        starts: Callable,
        *,
        jac: Callable | None = None,
        n_boot: int = 100,
    ):
        self.name = name
        self.func = func
        self.jac = jac
        self.param_names = param_names
        self._bounds = bounds
        self._starts = starts
        self.n_boot = n_boot

    # -- helpers
    def _fit(self, u, y, lb, ub, starts, max_nfev=400):
        best = None
        f_jac = self.jac
        jac = (lambda th: f_jac(u, *th)) if f_jac is not None else "2-point"
        for p0 in starts:
            p0 = np.clip(np.asarray(p0, dtype=float), lb + 1e-9 * (ub - lb), ub - 1e-9 * (ub - lb))
            try:
                with np.errstate(all="ignore"):
                    res = optimize.least_squares(
                        lambda th: self.func(u, *th) - y,
                        p0,
                        jac=jac,
                        bounds=(lb, ub),
                        method="trf",
                        x_scale="jac",
                        max_nfev=max_nfev,
                    )
            except (ValueError, FloatingPointError):
                continue
            if not np.isfinite(res.cost):
                continue
            if best is None or res.cost < best.cost:
                best = res
        return best

    def fit(self, steps, rewards, horizon):
        """Point fit on raw data (exposed for tests): returns ``(params dict, u-transform)``."""
        p = _problem(steps, rewards, [horizon], DEFAULT_FINAL_WINDOW, self.min_points)
        u = (p.steps - p.s0 + p.dt) / (p.horizon - p.s0 + p.dt)
        lb, ub = self._bounds(p.y)
        res = self._fit(u, p.y, lb, ub, self._starts(u, p.y, lb, ub))
        if res is None:
            raise RuntimeError("no start converged")
        return dict(zip(self.param_names, res.x, strict=True)), (
            lambda s: (np.asarray(s, float) - p.s0 + p.dt) / (p.horizon - p.s0 + p.dt)
        )

    def _forecast(self, p: _Problem, n_draws, rng):
        scale_u = p.horizon - p.s0 + p.dt
        u = (p.steps - p.s0 + p.dt) / scale_u
        uf = (p.future - p.s0 + p.dt) / scale_u
        y = p.y
        n = y.size
        lb, ub = self._bounds(y)
        best = self._fit(u, y, lb, ub, self._starts(u, y, lb, ub))
        if best is None:
            raise RuntimeError("least squares failed from every start")
        theta = best.x
        fit = self.func(u, *theta)
        resid = y - fit
        npar = len(theta)
        infl = math.sqrt(n / max(n - npar, 1))
        e = (resid - resid.mean()) * infl
        sigma = float(np.sqrt(np.mean(e**2)))
        rho = _ar1_rho(resid)
        b = int(min(max(1, math.ceil(n ** (1 / 3))), max(1, n // 4)))
        n_blocks = int(math.ceil(n / b))
        boot_fut = np.empty((self.n_boot, p.future.size))
        n_ok = 0
        with np.errstate(all="ignore"):
            for _ in range(self.n_boot):
                starts_idx = rng.integers(0, n - b + 1, size=n_blocks)
                e_star = np.concatenate([e[i : i + b] for i in starts_idx])[:n]
                y_star = fit + e_star
                res = self._fit(u, y_star, lb, ub, [theta], max_nfev=100)
                if res is None:
                    continue
                boot_fut[n_ok] = self.func(uf, *res.x)
                n_ok += 1
        if n_ok < max(10, self.n_boot // 4):
            raise RuntimeError(f"only {n_ok} of {self.n_boot} bootstrap refits succeeded")
        boot_fut = boot_fut[:n_ok]
        if not np.all(np.isfinite(boot_fut)):
            boot_fut = boot_fut[np.all(np.isfinite(boot_fut), axis=1)]
        info = {
            "params": dict(zip(self.param_names, map(float, theta), strict=True)),
            "sigma": sigma,
            "rho": rho,
            "block_length": b,
            "n_boot_ok": int(boot_fut.shape[0]),
        }
        if p.m_future:
            curves = _resample(boot_fut[:, p.fut_win_idx].mean(axis=1)[:, None], n_draws, rng)[:, 0]
            sd = _mean_noise_sd(sigma, p.m_future, rho)
            draws = p.window_mean(curves + sd * rng.standard_normal(n_draws))
            info["window_noise_sd"] = sd
        else:
            draws = p.window_mean(np.zeros(n_draws))
        pathq = np.quantile(boot_fut, PATH_LEVELS, axis=0) if p.future.size else None
        return draws, pathq, info


def _level_bounds(y):
    lo, hi = np.quantile(y, [0.05, 0.95])
    r = reward_range(y)
    return float(lo - r), float(hi + r)


def _edge_means(y):
    return start_level(y), current_level(y)


def _sat_exp_bounds(y):
    a, b = _level_bounds(y)
    # R_inf, R0 in the level range; tau in [1e-3, 1e2] horizons (1e2: indistinguishable from linear)
    return np.array([a, a, 1e-3]), np.array([b, b, 1e2])


def _sat_exp_starts(u, y, lb, ub):
    first, last = _edge_means(y)
    r = reward_range(y)
    out = []
    for tau in (0.03, 0.1, 0.3, 1.0, 5.0):
        for rinf in (last, last + 0.5 * r * np.sign(last - first or 1.0)):
            out.append([rinf, first, tau])
    return out


def _scalerl_bounds(y):
    a, b = _level_bounds(y)
    # A, R0 in the level range; C_mid in [1e-3, 1e2] horizons; B (steepness) in [0.1, 10]
    return np.array([a, a, 1e-3, 0.1]), np.array([b, b, 1e2, 10.0])


def _scalerl_starts(u, y, lb, ub):
    first, last = _edge_means(y)
    r = reward_range(y)
    umax = float(u[-1])
    out = []
    for cmid in (0.3 * umax, umax, 3 * umax):
        for bb in (0.7, 1.5, 3.0):
            for a in (last, last + 0.5 * r * np.sign(last - first or 1.0)):
                out.append([a, first, cmid, bb])
    return out


def _pow3_bounds(y):
    a, b = _level_bounds(y)
    r = reward_range(y)
    # c (asymptote) in the level range; a in [-2r, 2r] (either direction); alpha in [0.01, 3]
    return np.array([a, -2 * r, 0.01]), np.array([b, 2 * r, 3.0])


def _pow3_starts(u, y, lb, ub):
    first, last = _edge_means(y)
    out = []
    for alpha in (0.1, 0.3, 0.7, 1.5):
        # choose a so that c - a u0^-alpha ~ first, with c ~ last
        u0 = float(u[0])
        for c in (last, 0.5 * (last + ub[0])):
            a = (c - first) / max(u0 ** (-alpha), 1e-12)
            out.append([c, a, alpha])
    return out
