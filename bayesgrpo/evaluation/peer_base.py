"""What every peer forecaster shares: the result (:class:`PeerForecast`), the forecast problem of one
truncated run (observed prefix, future steps, final window) and the :class:`Peer` base class with its
protocol (``forecast`` / ``forecast_many``). The peers themselves: :mod:`bayesgrpo.evaluation.peers`."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from bayesgrpo.conventions import DEFAULT_FINAL_WINDOW, QUANTILES
from bayesgrpo.plan import final_window_mask, logging_interval
from bayesgrpo.schema import REWARD, STEP

__all__ = ["PeerForecast", "Peer", "PATH_LEVELS"]

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
        except Exception as exc:  # noqa: BLE001 - a peer failing on one run must not stop a backtest
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
