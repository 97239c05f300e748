"""Peer forecasters: the benchmarks bayesgrpo is judged against.

Every peer forecasts, from the first logged points of a run, the *final reward* -- the mean of the
logged reward over the steps of the final window ``(s0 + (1 - fw)(H - s0), H]`` (see
:func:`bayesgrpo.plan.final_window_mask`) -- as draws that include the measurement noise of the
average of the logged points in that window.

Common interface
----------------
``peer.forecast(steps_obs, rewards_obs, *, future_steps, final_window=0.1, n_draws=1000, seed=None)``
returns a :class:`PeerForecast`.

* ``steps_obs``, ``rewards_obs``: the observed prefix (NaN rewards are dropped, steps sorted).
* ``future_steps``: the steps at which the run *will* log after the prefix, up to and including the
  horizon ``H`` (at the run's logging interval). ``s0`` is the first observed step and ``H`` the
  last of ``future_steps`` (or of ``steps_obs`` when nothing is left to forecast). Observed points
  that already fall in the final window enter the window mean as they are; only the future points
  are forecast.

Peers (see :data:`PEERS`, :func:`get_peer`)
------------------------------------------
``last_value``       mean of the last 10% of the observed points; interval from a random-walk
                     variance growth fitted to the observed block-mean changes.
``sat_exp``          bounded LSQ fit of ``R_inf - (R_inf - R0) exp(-u / tau)``.
``scalerl_sigmoid``  bounded LSQ fit of the ScaleRL curve ``R0 + (A - R0) / (1 + (C_mid / u)^B)``.
``pow3``             bounded LSQ fit of ``c - a u^(-alpha)``.
``domhan``           Bayesian combination of 11 parametric learning-curve families (Domhan,
                     Springenberg & Hutter, IJCAI 2015) in PyMC 6, NUTS via nutpie
                     (2 chains x 300 draws after 300 tuning steps).
``domhan_fast``      the same compiled model, 2 chains x 150 draws / 150 tuning, tree depth <= 6.

LC-PFN (Adriaensen et al., NeurIPS 2023) is not among them: its pretrained transformer is downloaded
at run time, and bayesgrpo runs offline (no weights or data may be fetched), so it cannot be run here.

The LSQ peers share :class:`LSQPeer` (several starts, moving-block residual bootstrap with refits,
plus window-mean noise); details in its docstring.

Cost (measured on the 100 public runs cut at 30%, 2 shared cores under load ~5): last_value ~ms;
LSQ peers 2-5 s per forecast (100 bootstrap refits); domhan / domhan_fast ~4-5 s per forecast
(median ~3.8 s) after a one-off nutpie/numba compilation of 3-5 min per process (the first
forecast's ``seconds`` includes it; ``info['compile_seconds']`` reports it).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from scipy import optimize, stats

from bayesgrpo.conventions import DEFAULT_FINAL_WINDOW, QUANTILES
from bayesgrpo.plan import final_window_mask, logging_interval
from bayesgrpo.schema import REWARD, STEP
from bayesgrpo.series import robust_range as reward_range

__all__ = [
    "PeerForecast",
    "Peer",
    "LastValuePeer",
    "LSQPeer",
    "DomhanEnsemblePeer",
    "PEERS",
    "PEER_ALIASES",
    "get_peer",
    "PATH_LEVELS",
    "DOMHAN_FAMILIES",
]

#: quantile levels of :attr:`PeerForecast.path_quantiles` (the reported ones)
PATH_LEVELS = QUANTILES


# =====================================================================================  result
@dataclass
class PeerForecast:
    """Result of one peer forecast.

    Attributes
    ----------
    name : str
        Peer name.
    final_draws : ndarray (n_draws,)
        Draws of the final-window reward mean (raw reward units), including the measurement noise
        of averaging the logged points of the window. Empty when ``ok`` is False.
    path_quantiles : ndarray (len(path_levels), len(future_steps)) or None
        Quantiles of the *mean* reward trajectory (no measurement noise) on ``future_steps``.
    path_levels : tuple of float
        Levels of the rows of ``path_quantiles``.
    future_steps : ndarray
        The steps ``path_quantiles`` refers to.
    seconds : float
        Wall-clock time of the forecast (including any one-off model compilation, which is
        reported separately in ``info['compile_seconds']`` when it happened).
    ok : bool
        False when the peer could not forecast; ``message`` says why.
    message : str
    info : dict
        Peer-specific diagnostics (fitted parameters, block length, divergences, ...).
    """

    name: str
    final_draws: np.ndarray
    path_quantiles: np.ndarray | None = None
    path_levels: tuple = PATH_LEVELS
    future_steps: np.ndarray | None = None
    seconds: float = 0.0
    ok: bool = True
    message: str = ""
    info: dict = field(default_factory=dict)

    def quantiles(self, levels) -> np.ndarray:
        """Quantiles of :attr:`final_draws` (NaN when not ok)."""
        levels = np.asarray(levels, dtype=float)
        if not self.ok or self.final_draws.size == 0:
            return np.full(levels.shape, np.nan)
        return np.quantile(self.final_draws, levels)

    def interval(self, mass: float = 0.8) -> tuple[float, float]:
        """Central interval holding ``mass`` of the draws."""
        lo, hi = self.quantiles([(1 - mass) / 2, (1 + mass) / 2])
        return float(lo), float(hi)

    @property
    def median(self) -> float:
        return float(self.quantiles([0.5])[0])


# =====================================================================================  geometry
@dataclass
class _Problem:
    """The observed prefix and the forecast target, validated."""

    steps: np.ndarray  # observed steps (float)
    y: np.ndarray  # observed rewards
    future: np.ndarray  # future steps (float), > last observed step
    s0: float
    horizon: float
    dt: float  # logging interval (bayesgrpo.plan.logging_interval)
    fw: float
    obs_win: np.ndarray  # observed rewards already inside the final window
    fut_win_idx: np.ndarray  # indices into ``future`` of the future points in the final window

    @property
    def m(self) -> int:
        return int(self.obs_win.size + self.fut_win_idx.size)

    @property
    def m_future(self) -> int:
        return int(self.fut_win_idx.size)

    def window_mean(self, future_window_means: np.ndarray) -> np.ndarray:
        """Final-window mean given draws of the mean of the *future* window points."""
        if self.m_future == 0:
            return np.full(np.shape(future_window_means), float(np.mean(self.obs_win)))
        return (self.obs_win.sum() + self.m_future * np.asarray(future_window_means)) / self.m


def _problem(steps_obs, rewards_obs, future_steps, final_window, min_points) -> _Problem:
    s = np.asarray(steps_obs, dtype=float).ravel()
    r = np.asarray(rewards_obs, dtype=float).ravel()
    if s.shape != r.shape:
        raise ValueError(f"steps_obs {s.shape} and rewards_obs {r.shape} differ in shape")
    keep = np.isfinite(s) & np.isfinite(r)
    s, r = s[keep], r[keep]
    order = np.argsort(s, kind="stable")
    s, r = s[order], r[order]
    if s.size < min_points:
        raise ValueError(f"only {s.size} finite observed point(s); this peer needs at least {min_points}")
    fut = np.asarray(future_steps, dtype=float).ravel()
    fut = np.sort(fut[np.isfinite(fut)])
    fut = fut[fut > s[-1]]
    s0 = float(s[0])
    horizon = float(fut[-1]) if fut.size else float(s[-1])
    if horizon <= s0:
        raise ValueError("the horizon must lie after the first observed step")
    dt = float(logging_interval(s))  # the run's logging interval, as the forecaster's grid has it
    obs_in = final_window_mask(s, s0=s0, horizon=horizon, final_window=final_window)
    fut_in = final_window_mask(fut, s0=s0, horizon=horizon, final_window=final_window)
    if not (obs_in.any() or fut_in.any()):
        raise ValueError(
            "no observed or future step falls in the final window; pass future_steps at the run's "
            "logging interval up to the horizon"
        )
    return _Problem(s, r, fut, s0, horizon, dt, final_window, r[obs_in], np.flatnonzero(fut_in))


def _ar1_rho(resid: np.ndarray) -> float:
    """Lag-1 autocorrelation of residuals, clipped to [0, 0.95]."""
    e = np.asarray(resid, dtype=float)
    e = e - e.mean()
    if e.size < 4 or np.dot(e, e) <= 0:
        return 0.0
    rho = float(np.dot(e[1:], e[:-1]) / np.dot(e, e))
    return float(np.clip(rho, 0.0, 0.95))


def _mean_noise_sd(sigma: float, m: int, rho: float = 0.0) -> float:
    """SD of the mean of ``m`` consecutive AR(1) noise values with marginal SD ``sigma``.

    ``Var = sigma^2 / m * (1 + 2 sum_{k=1}^{m-1} (1 - k/m) rho^k)``.
    """
    if m <= 0:
        return 0.0
    k = np.arange(1, m)
    infl = 1.0 + 2.0 * np.sum((1.0 - k / m) * rho**k) if m > 1 else 1.0
    return float(sigma * math.sqrt(max(infl, 1e-12) / m))


def _resample(x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` rows of ``x``: all rows (in a random order) first, then random extra rows."""
    k = x.shape[0]
    if n <= k:
        idx = rng.choice(k, size=n, replace=False)
    else:
        idx = np.concatenate([rng.permutation(k), rng.integers(0, k, size=n - k)])
    return x[idx]


# =====================================================================================  base
class Peer:
    """Base class: validation, timing and error capture around :meth:`_forecast`.

    Subclasses implement ``_forecast(problem, n_draws, rng) -> (final_draws, path_quantiles, info)``
    and set :attr:`name` and :attr:`min_points`.
    """

    name: str = "peer"
    min_points: int = 2

    def forecast(
        self,
        steps_obs,
        rewards_obs,
        *,
        future_steps,
        final_window: float = DEFAULT_FINAL_WINDOW,
        n_draws: int = 1000,
        seed=None,
    ) -> PeerForecast:
        t0 = time.perf_counter()
        fut = np.asarray(future_steps, dtype=float).ravel()
        try:
            prob = _problem(steps_obs, rewards_obs, future_steps, final_window, self.min_points)
            rng = np.random.default_rng(seed)
            draws, pathq, info = self._forecast(prob, int(n_draws), rng)
            draws = np.asarray(draws, dtype=float)
            if draws.shape != (int(n_draws),) or not np.all(np.isfinite(draws)):
                raise FloatingPointError(f"{self.name}: draws are not finite / of shape ({n_draws},)")
            return PeerForecast(
                name=self.name,
                final_draws=draws,
                path_quantiles=pathq,
                future_steps=prob.future,
                seconds=time.perf_counter() - t0,
                ok=True,
                info=info,
            )
        except Exception as exc:  # a peer failing on one run must not stop a backtest
            return PeerForecast(
                name=self.name,
                final_draws=np.empty(0),
                future_steps=fut,
                seconds=time.perf_counter() - t0,
                ok=False,
                message=f"{type(exc).__name__}: {exc}",
            )

    def forecast_many(
        self, cases, *, final_window: float = DEFAULT_FINAL_WINDOW, n_draws: int = 1000, seed=0
    ) -> list[PeerForecast]:
        """The forecaster protocol of :mod:`bayesgrpo.evaluation.backtest`: one forecast per case.

        ``cases`` are :class:`bayesgrpo.evaluation.methods.Case`; peers forecast each alone.
        """
        return [
            self.forecast(c.prefix[STEP].to_numpy(), c.prefix[REWARD].to_numpy(), future_steps=c.future_steps,
                          final_window=final_window, n_draws=n_draws, seed=[*np.atleast_1d(seed), i])
            for i, c in enumerate(cases)
        ]  # fmt: skip

    def _forecast(self, p: _Problem, n_draws: int, rng: np.random.Generator):  # pragma: no cover
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


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
        c = q = None
        if lags.size >= 3:
            msd = np.array([np.mean((blocks[L:] - blocks[:-L]) ** 2) for L in lags])
            A = np.column_stack([np.ones_like(lags, dtype=float), lags.astype(float)])
            (c, q), _ = optimize.nnls(A, msd)
        if c is None or (c == 0 and q == 0):
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
        jac = (lambda th: self.jac(u, *th)) if self.jac is not None else "2-point"
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
        return dict(zip(self.param_names, res.x)), (
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
            "params": dict(zip(self.param_names, map(float, theta))),
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
    k = max(3, int(math.ceil(0.1 * y.size)))
    return float(y[:k].mean()), float(y[-k:].mean())


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


# =====================================================================================  Domhan et al.
# Curve families of Domhan, Springenberg & Hutter (IJCAI 2015), formulas as in their reference code
# (github.com/automl/pylearningcurvepredictor, curvefunctions.py). x is the "epoch" axis, here
# x = 1 + 99 (step - s0) / (H - s0) in [1, 100]; y is the per-run normalised reward.
# Every parameter that decides the direction of a family is sign-constrained (LogNormal /
# negated LogNormal prior) so that every family is increasing in x -- the paper's monotonicity
# constraint, enforced by construction instead of by rejection. ``MMF``, ``Janoschek`` and
# ``Weibull`` are parameterised with ``d = upper - lower > 0``.
#
# (name, [(param, prior, mu, sd)], f(x, p, xp))  with prior in {"normal", "lognormal", "neglognormal"}
def _fam_vap(x, p, xp):
    return xp.exp(p["a"] + p["b"] / x + p["c"] * xp.log(x))


def _fam_pow3(x, p, xp):
    return p["c"] - p["a"] * x ** (-p["alpha"])


def _fam_loglog_linear(x, p, xp):
    return xp.log(p["a"] * xp.log(x) + p["b"])


def _fam_hill3(x, p, xp):
    xe = x ** p["eta"]
    return p["theta"] * xe / (p["kappa"] ** p["eta"] + xe)


def _fam_log_power(x, p, xp):
    return p["a"] / (1.0 + (x / xp.exp(p["b"])) ** p["c"])


def _fam_pow4(x, p, xp):
    return p["c"] - (p["a"] * x + p["b"]) ** (-p["alpha"])


def _fam_mmf(x, p, xp):
    return p["alpha"] - p["d"] / (1.0 + (p["kappa"] * x) ** p["delta"])


def _fam_exp4(x, p, xp):
    return p["c"] - xp.exp(-p["a"] * x ** p["alpha"] + p["b"])


def _fam_janoschek(x, p, xp):
    return p["a"] - p["d"] * xp.exp(-p["k"] * x ** p["delta"])


def _fam_weibull(x, p, xp):
    return p["alpha"] - p["d"] * xp.exp(-((p["kappa"] * x) ** p["delta"]))


def _fam_ilog2(x, p, xp):
    return p["c"] - p["a"] / xp.log(x + 1.0)


_L = math.log
DOMHAN_FAMILIES: list[tuple[str, list[tuple[str, str, float, float]], Callable]] = [
    (
        "vap",
        [("a", "normal", -0.5, 1.0), ("b", "neglognormal", _L(0.5), 1.0), ("c", "lognormal", _L(0.05), 1.0)],
        _fam_vap,
    ),
    (
        "pow3",
        [("c", "normal", 0.8, 1.0), ("a", "lognormal", _L(0.5), 1.0), ("alpha", "lognormal", _L(0.5), 1.0)],
        _fam_pow3,
    ),
    ("loglog_linear", [("a", "lognormal", _L(0.3), 1.0), ("b", "lognormal", 0.5, 0.5)], _fam_loglog_linear),
    (
        "hill3",
        [("theta", "lognormal", 0.0, 0.5), ("eta", "lognormal", 0.0, 0.75), ("kappa", "lognormal", _L(5.0), 1.5)],
        _fam_hill3,
    ),
    (
        "log_power",
        [("a", "lognormal", 0.0, 0.5), ("b", "normal", 1.5, 1.5), ("c", "neglognormal", _L(0.5), 0.75)],
        _fam_log_power,
    ),
    (
        "pow4",
        [
            ("c", "normal", 0.8, 1.0),
            ("a", "lognormal", 0.0, 1.5),
            ("b", "lognormal", _L(0.5), 1.5),
            ("alpha", "lognormal", _L(0.5), 1.0),
        ],
        _fam_pow4,
    ),
    (
        "mmf",
        [
            ("alpha", "normal", 0.8, 1.0),
            ("d", "lognormal", _L(0.5), 1.0),
            ("kappa", "lognormal", _L(0.1), 1.5),
            ("delta", "lognormal", 0.0, 0.75),
        ],
        _fam_mmf,
    ),
    (
        "exp4",
        [
            ("c", "normal", 0.8, 1.0),
            ("a", "lognormal", _L(0.3), 1.5),
            ("alpha", "lognormal", _L(0.5), 0.75),
            ("b", "normal", -0.5, 1.0),
        ],
        _fam_exp4,
    ),
    (
        "janoschek",
        [
            ("a", "normal", 0.8, 1.0),
            ("d", "lognormal", _L(0.5), 1.0),
            ("k", "lognormal", _L(0.2), 1.5),
            ("delta", "lognormal", _L(0.5), 0.75),
        ],
        _fam_janoschek,
    ),
    (
        "weibull",
        [
            ("alpha", "normal", 0.8, 1.0),
            ("d", "lognormal", _L(0.5), 1.0),
            ("kappa", "lognormal", _L(0.05), 1.5),
            ("delta", "lognormal", _L(0.7), 0.75),
        ],
        _fam_weibull,
    ),
    ("ilog2", [("c", "normal", 0.8, 1.0), ("a", "lognormal", _L(0.5), 1.0)], _fam_ilog2),
]

_X_MAX = 100.0  # x of the horizon
_N_MAX = 64  # observation slots of the compiled model (longer prefixes are bin-averaged)
_Y_BOUNDS = (-1.0, 2.0)  # sane range of f_comb(x_max) in normalised units (soft, width 0.05)


def _domhan_x(steps, s0, horizon):
    return 1.0 + (_X_MAX - 1.0) * (np.asarray(steps, dtype=float) - s0) / (horizon - s0)


def _bin_observations(x, y, n_max):
    """Pad (or bin-average, when longer) to ``n_max`` slots: returns x, y, counts (0 = padding)."""
    n = x.size
    xo, yo, wo = np.full(n_max, 1.0), np.zeros(n_max), np.zeros(n_max)
    if n <= n_max:
        xo[:n], yo[:n], wo[:n] = x, y, 1.0
    else:
        edges = np.linspace(0, n, n_max + 1).round().astype(int)
        for j in range(n_max):
            a, b = edges[j], edges[j + 1]
            xo[j], yo[j], wo[j] = x[a:b].mean(), y[a:b].mean(), b - a
    return xo, yo, wo


def _domhan_numpy_curves(post: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """f_comb on ``x`` for every posterior draw: (n_draws, len(x))."""
    w = post["w"]  # (n_draws, K)
    out = np.zeros((w.shape[0], x.size))
    with np.errstate(all="ignore"):
        for k, (name, params, f) in enumerate(DOMHAN_FAMILIES):
            p = {pn: post[f"{name}_{pn}"][:, None] for pn, *_ in params}
            out += w[:, k : k + 1] * f(x[None, :], p, np)
    return out


class DomhanEnsemblePeer(Peer):
    """Bayesian combination of parametric learning-curve families (Domhan et al., IJCAI 2015).

    Model (per run, normalised)
        ``y_i ~ Normal(f_comb(x_i), sigma)``,
        ``f_comb(x) = sum_k w_k f_k(x | theta_k)`` over the 11 families of the paper's ensemble
        (vapor pressure, pow3, log-log linear, Hill(3), log power, pow4, MMF, exp4, Janoschek,
        Weibull, ilog2; formulas of the reference implementation), ``w ~ Dirichlet(1)`` (the
        paper's positive, normalised weights), ``sigma ~ HalfNormal(0.5)``.
        Scaling: ``x = 1 + 99 (step - s0) / (H - s0)`` (the horizon is x = 100, like a
        100-epoch curve), ``y = (reward - q05) / reward_range`` of the observed prefix.
        Constraints: each family is increasing by sign-constrained priors (the paper's
        monotonicity constraint); the final value ``f_comb(100)`` is softly kept in [-1, 2]
        (normalised; the paper's "sane final value" check) by a Potential with a one-sided
        quadratic penalty of scale 0.05. Priors are weakly informative LogNormal/Normal around
        the defaults of the reference code, rescaled to the normalised axes.
    Observations
        One compiled model with ``pm.Data`` slots for 64 observations (padding has count 0 and
        drops out; longer prefixes are averaged in consecutive bins and enter with SD
        ``sigma / sqrt(count)``). The model is compiled once per process by nutpie (numba) and
        reused through ``CompiledPyMCModel.with_data``.
    Sampling
        nutpie NUTS, ``chains`` x ``draws`` after ``tune`` tuning steps, ``maxdepth`` tree depth,
        through :mod:`bayesgrpo.inference.sampling` (the one sampling path of the package).
    Prediction
        Posterior predictive of the model: ``f_comb`` on the future window steps plus the
        Normal noise of averaging the ``m_f`` future window points (``sigma / sqrt(m_f)``, the
        paper's iid noise model), mapped back to raw reward units.
    Caveats
        The posterior (11 families x weights) is multimodal and the chains are short: on one
        synthetic curve two processes with the same data and seed gave medians ~0.1 of the reward
        range apart (not investigated; the 100-run public benchmark did reproduce exactly). The iid noise
        model makes its intervals narrow on autocorrelated GRPO logs (80% coverage ~0.54 on the
        public runs at a 30% cutoff).
    """

    min_points = 5

    def __init__(
        self,
        name: str = "domhan",
        *,
        chains: int = 2,
        draws: int = 300,
        tune: int = 300,
        maxdepth: int = 8,
        target_accept: float = 0.9,
    ):
        self.name = name
        self.chains, self.draws, self.tune = chains, draws, tune
        self.maxdepth, self.target_accept = maxdepth, target_accept

    # -- model
    @staticmethod
    def build_model():
        import pymc as pm
        import pytensor.tensor as pt

        with pm.Model() as model:
            x_obs = pm.Data("x_obs", np.linspace(1, 30, _N_MAX))
            y_obs = pm.Data("y_obs", np.zeros(_N_MAX))
            w_obs = pm.Data("w_obs", np.ones(_N_MAX))
            K = len(DOMHAN_FAMILIES)
            w = pm.Dirichlet("w", a=np.ones(K))
            sigma = pm.HalfNormal("sigma", 0.5)
            mu = 0.0
            f_lim = 0.0
            for k, (name, params, f) in enumerate(DOMHAN_FAMILIES):
                p = {}
                for pn, prior, m, s in params:
                    if prior == "normal":
                        p[pn] = pm.Normal(f"{name}_{pn}", m, s)
                    elif prior == "lognormal":
                        p[pn] = pm.LogNormal(f"{name}_{pn}", m, s)
                    elif prior == "neglognormal":
                        p[pn] = pm.Deterministic(f"{name}_{pn}", -pm.LogNormal(f"{name}_{pn}_neg", m, s))
                    else:  # pragma: no cover
                        raise ValueError(prior)
                mu = mu + w[k] * f(x_obs, p, pt)
                f_lim = f_lim + w[k] * f(pt.as_tensor(_X_MAX), p, pt)
            sd = sigma / pt.sqrt(pt.maximum(w_obs, 1.0))
            logp = -0.5 * ((y_obs - mu) / sd) ** 2 - pt.log(sd) - 0.5 * np.log(2 * np.pi)
            pm.Potential("lik", pt.sum(pt.switch(w_obs > 0, logp, 0.0)))
            lo, hi = _Y_BOUNDS
            pen = pt.maximum(f_lim - hi, 0.0) ** 2 + pt.maximum(lo - f_lim, 0.0) ** 2
            pm.Potential("final_bound", -0.5 * pen / 0.05**2)
        return model

    def _posterior(self, xo, yo, wo, seed):
        from bayesgrpo.inference import sampling

        names = ["w", "sigma"] + [f"{n}_{pn}" for n, ps, _ in DOMHAN_FAMILIES for pn, *_ in ps]
        t0 = time.perf_counter()
        fresh = not sampling.is_cached(("domhan",))
        compiled = sampling.compile_model(("domhan",), self.build_model, backend="numba")
        t_compile = time.perf_counter() - t0 if fresh else 0.0
        smp = sampling.SamplerConfig(draws=self.draws, tune=self.tune, chains=self.chains,
                                     target_accept=self.target_accept, low_rank_mass_matrix=False)  # fmt: skip
        tr = sampling.nuts(compiled, data={"x_obs": xo, "y_obs": yo, "w_obs": wo}, sampler=smp, seed=int(seed),
                           maxdepth=self.maxdepth, save_warmup=False)  # fmt: skip
        post = sampling.posterior_dataset(tr)
        out = {}
        for nm in names:
            v = np.asarray(post[nm])
            out[nm] = v.reshape((-1,) + v.shape[2:])
        stats = sampling.posterior_dataset(tr, "sample_stats")
        div = int(np.asarray(stats["diverging"]).sum()) if "diverging" in stats else np.nan
        return out, {"divergences": div, "compile_seconds": t_compile}

    def _forecast(self, p: _Problem, n_draws, rng):
        loc = float(np.quantile(p.y, 0.05))
        scale = reward_range(p.y)
        x = _domhan_x(p.steps, p.s0, p.horizon)
        xf = _domhan_x(p.future, p.s0, p.horizon)
        yn = (p.y - loc) / scale
        xo, yo, wo = _bin_observations(x, yn, _N_MAX)
        post, info = self._posterior(xo, yo, wo, rng.integers(2**31 - 1))
        curves = _domhan_numpy_curves(post, xf) if p.future.size else np.zeros((post["w"].shape[0], 0))
        good = np.all(np.isfinite(curves), axis=1)
        if good.sum() < 10:
            raise FloatingPointError("posterior curves are not finite")
        curves, sig = curves[good], post["sigma"][good]
        info.update(
            n_posterior=int(good.sum()),
            mean_weights=dict(zip([f[0] for f in DOMHAN_FAMILIES], map(float, post["w"][good].mean(axis=0)))),
        )
        if p.m_future:
            win = np.column_stack([curves[:, p.fut_win_idx].mean(axis=1), sig])
            win = _resample(win, n_draws, rng)
            fut_mean = win[:, 0] + win[:, 1] / math.sqrt(p.m_future) * rng.standard_normal(n_draws)
            draws = p.window_mean(loc + scale * fut_mean)
        else:
            draws = p.window_mean(np.zeros(n_draws))
        pathq = loc + scale * np.quantile(curves, PATH_LEVELS, axis=0) if p.future.size else None
        return draws, pathq, info


# =====================================================================================  registry
_DOMHAN_SETTINGS = {
    "domhan": dict(chains=2, draws=300, tune=300, maxdepth=8),
    "domhan_fast": dict(chains=2, draws=150, tune=150, maxdepth=6),
}


def _make_peers() -> dict[str, Callable[..., Peer]]:
    return {
        "last_value": LastValuePeer,
        "sat_exp": lambda **kw: LSQPeer(
            "sat_exp", _f_sat_exp, ("R_inf", "R0", "tau"), _sat_exp_bounds, _sat_exp_starts, jac=_j_sat_exp, **kw
        ),
        "scalerl_sigmoid": lambda **kw: LSQPeer(
            "scalerl_sigmoid",
            _f_scalerl,
            ("A", "R0", "C_mid", "B"),
            _scalerl_bounds,
            _scalerl_starts,
            jac=_j_scalerl,
            **kw,
        ),
        "pow3": lambda **kw: LSQPeer(
            "pow3", _f_pow3, ("c", "a", "alpha"), _pow3_bounds, _pow3_starts, jac=_j_pow3, **kw
        ),
        "domhan": lambda **kw: DomhanEnsemblePeer("domhan", **{**_DOMHAN_SETTINGS["domhan"], **kw}),
        "domhan_fast": lambda **kw: DomhanEnsemblePeer("domhan_fast", **{**_DOMHAN_SETTINGS["domhan_fast"], **kw}),
    }


#: name -> factory of a peer with default settings (keyword arguments override them)
PEERS: dict[str, Callable[..., Peer]] = _make_peers()

#: other names accepted for peers -> registry name
PEER_ALIASES = {"exponential": "sat_exp", "exp": "sat_exp", "scalerl": "scalerl_sigmoid"}


def get_peer(name: str, **kwargs: Any) -> Peer:
    """A peer by name or alias (see :data:`PEERS`, :data:`PEER_ALIASES`); keyword arguments override
    its settings (e.g. ``get_peer("sat_exp", n_boot=200)``, ``get_peer("domhan", draws=500)``).

    The peer keeps the name it was asked for (so an alias shows up in backtest tables as given).
    """
    key = PEER_ALIASES.get(name, name)
    if key not in PEERS:
        raise KeyError(
            f"unknown peer {name!r}; available: {', '.join(sorted(PEERS))} (aliases {', '.join(PEER_ALIASES)})"
        )
    peer = PEERS[key](**kwargs)
    peer.name = name
    return peer
