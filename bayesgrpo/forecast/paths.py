"""The forecaster -> decisions contract: posterior draws of one run's future reward path.

:class:`PathDraws` is what :meth:`bayesgrpo.forecast.FittedForecast.paths` returns and what the
decision functions (:mod:`bayesgrpo.decisions`) and diagnostics consume; :func:`exponential_draws`
builds one from the overdamped law (tests, examples, a cheap stand-in); :func:`stop_quantile` is the
one way a stop-step quantile is read off the draws (the forecast table and the budget both use it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bayesgrpo.physics.stopping import DEFAULT_STOP_FRACTION, settling_index

__all__ = ["PathDraws", "exponential_draws", "stop_quantile"]

_PER_DRAW = ("r0", "r_star", "tau", "a", "mu", "sigma_p", "sigma_m")


@dataclass(frozen=True)
class PathDraws:
    """Posterior draws of one run's future reward path (the forecaster -> decisions contract).

    Attributes
    ----------
    run_id : str
    steps : ndarray of int, shape (n_future,)
        Strictly increasing optimizer steps of the forecast grid (after ``last_step``).
    observed : ndarray, shape (n_draws, n_future)
        Posterior predictive draws of the *logged* reward (with measurement noise).
    latent : ndarray, shape (n_draws, n_future)
        Draws of the latent mean reward (no measurement noise). Decisions use these.
    r0, r_star, tau, a, mu, sigma_p, sigma_m : ndarray, shape (n_draws,)
        Per-draw parameters (initial reward, plateau, timescale in steps, stiffness ``a``,
        momentum ``mu``, process-noise s.d., measurement-noise s.d.), in reward units.
    last_step : int
        Last observed step.
    horizon : int
        Forecast horizon in steps (``steps[-1] <= last_step + horizon``).
    interval : int
        Logging interval of the run (steps between logged points).
    units : str or None
        The run's reward units (e.g. ``"sum of 4 reward fns"``, ``"accuracy"``).
    latent_now : ndarray, shape (n_draws,), optional
        Latent reward at ``last_step``; when given, "stop now" is a candidate decision.
    lag : int
        Constant lag ``d`` of recursion (1) (``c = 1 - mu - a d``); 0 by default.
    refresh_interval : int or None
        Refresh interval ``K`` when the run uses the refresh lag pattern.
    stop_step : ndarray of int, shape (n_draws,), optional
        Per draw, the stop step of the mean trajectory (:mod:`bayesgrpo.physics.stopping`, the one
        definition), in absolute steps, censored at ``last_step + horizon``.
    stop_reached : ndarray of bool, shape (n_draws,), optional
        False where ``stop_step`` is censored.
    """

    run_id: str
    steps: np.ndarray
    observed: np.ndarray
    latent: np.ndarray
    r0: np.ndarray
    r_star: np.ndarray
    tau: np.ndarray
    a: np.ndarray
    mu: np.ndarray
    sigma_p: np.ndarray
    sigma_m: np.ndarray
    last_step: int
    horizon: int
    interval: int = 1
    units: str | None = None
    latent_now: np.ndarray | None = None
    lag: int = 0
    refresh_interval: int | None = None
    stop_step: np.ndarray | None = None
    stop_reached: np.ndarray | None = None

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731  (frozen dataclass)
        steps = np.asarray(self.steps)
        if steps.ndim != 1 or steps.size == 0:
            raise ValueError(f"PathDraws {self.run_id!r}: steps must be a non-empty 1-d array; got shape {steps.shape}")
        if not np.all(np.isfinite(steps)) or np.any(steps != np.round(steps)):
            raise ValueError(f"PathDraws {self.run_id!r}: steps must be integers")
        steps = steps.astype(np.int64)
        if np.any(np.diff(steps) <= 0):
            raise ValueError(f"PathDraws {self.run_id!r}: steps must be strictly increasing")
        set_("steps", steps)
        obs = np.atleast_2d(np.asarray(self.observed, dtype=float))
        lat = np.atleast_2d(np.asarray(self.latent, dtype=float))
        for name, arr in (("observed", obs), ("latent", lat)):
            if arr.ndim != 2 or arr.shape[1] != steps.size:
                raise ValueError(
                    f"PathDraws {self.run_id!r}: {name} must have shape (n_draws, {steps.size}); got {arr.shape}"
                )
        if obs.shape != lat.shape:
            raise ValueError(f"PathDraws {self.run_id!r}: observed {obs.shape} and latent {lat.shape} differ")
        n = lat.shape[0]
        set_("observed", obs)
        set_("latent", lat)
        for k in _PER_DRAW:
            v = np.asarray(getattr(self, k), dtype=float).reshape(-1)
            if v.size == 1 and n > 1:
                v = np.full(n, v.item())
            if v.size != n:
                raise ValueError(f"PathDraws {self.run_id!r}: {k} must have {n} draws; got {v.size}")
            set_(k, v)
        if self.latent_now is not None:
            v = np.asarray(self.latent_now, dtype=float).reshape(-1)
            if v.size == 1 and n > 1:
                v = np.full(n, v.item())
            if v.size != n:
                raise ValueError(f"PathDraws {self.run_id!r}: latent_now must have {n} draws; got {v.size}")
            set_("latent_now", v)
        if (self.stop_step is None) != (self.stop_reached is None):
            raise ValueError(f"PathDraws {self.run_id!r}: give stop_step and stop_reached together")
        if self.stop_step is not None:
            st = np.asarray(self.stop_step).reshape(-1)
            sr = np.asarray(self.stop_reached, dtype=bool).reshape(-1)
            if st.size != n or sr.size != n:
                raise ValueError(f"PathDraws {self.run_id!r}: stop_step/stop_reached must have {n} draws")
            set_("stop_step", st.astype(np.int64))
            set_("stop_reached", sr)
        set_("last_step", int(self.last_step))
        set_("horizon", int(self.horizon))
        set_("interval", max(1, int(self.interval)))
        set_("lag", int(self.lag))
        if steps[0] < self.last_step:
            raise ValueError(
                f"PathDraws {self.run_id!r}: forecast steps start at {steps[0]} before last_step {self.last_step}"
            )

    @property
    def n_draws(self) -> int:
        return self.latent.shape[0]

    def stop_steps(self) -> tuple[np.ndarray, np.ndarray]:
        """``(stop_step, stop_reached)`` per draw; ValueError for paths made without them."""
        if self.stop_step is None or self.stop_reached is None:
            raise ValueError(f"PathDraws {self.run_id!r}: no stop steps (made without stop_step / stop_reached)")
        return self.stop_step, self.stop_reached

    @property
    def damping(self) -> np.ndarray:
        """Per-draw damping ``c = 1 - mu - a d`` (physics.md section 3)."""
        d = self.lag if self.refresh_interval is None else (self.refresh_interval - 1) / 2.0
        return (1.0 - self.mu) - self.a * d


def exponential_draws(
    run_id: str = "run",
    *,
    r0,
    r_star,
    tau,
    last_step: int,
    horizon: int,
    start_step: int = 0,
    interval: int = 1,
    sigma_m: float = 0.0,
    mu: float = 0.9,
    units: str | None = None,
    include_now: bool = True,
    seed: int | None = 0,
    stop_fraction: float = DEFAULT_STOP_FRACTION,
) -> PathDraws:
    """PathDraws of the overdamped law ``R(t) = R* - (R* - R0) exp(-(t - start)/tau)`` (paper B).

    ``r0``, ``r_star``, ``tau`` may be scalars (one deterministic draw) or arrays of draws. Handy for
    tests, examples, and as a cheap stand-in when only point estimates are available.
    """
    r0, r_star, tau = np.broadcast_arrays(*(np.atleast_1d(np.asarray(v, dtype=float)) for v in (r0, r_star, tau)))
    steps = np.arange(last_step + interval, last_step + horizon + 1, interval, dtype=np.int64)
    t = (steps - start_step)[None, :]
    lat = r_star[:, None] - (r_star - r0)[:, None] * np.exp(-t / tau[:, None])
    rng = np.random.default_rng(seed)
    obs = lat + (rng.normal(0.0, sigma_m, lat.shape) if sigma_m > 0 else 0.0)
    now = r_star - (r_star - r0) * np.exp(-(last_step - start_step) / tau)
    a = np.clip((1.0 - mu) / tau, 1e-12, None)
    # stop step of the exponential mean path from start_step (the one definition)
    n_all = np.arange(0, last_step + horizon - start_step + 1)
    idx, reached = settling_index(np.exp(-n_all[None, :] / tau[:, None]), fraction=stop_fraction)
    stop = start_step + np.minimum(idx, n_all[-1])
    return PathDraws(run_id=run_id, steps=steps, observed=obs, latent=lat, r0=r0, r_star=r_star, tau=tau, a=a,
                     mu=np.full_like(r0, mu), sigma_p=np.zeros_like(r0), sigma_m=np.full_like(r0, sigma_m),
                     last_step=last_step, horizon=horizon, interval=interval, units=units,
                     latent_now=now if include_now else None, stop_step=stop, stop_reached=reached)  # fmt: skip


def stop_quantile(draws: PathDraws, q: float = 0.5) -> int:
    """A quantile of the stop-step draws, as a value that one of the draws takes (an integer step).

    The forecast table's ``stop_q05/q50/q95`` and the no-cost budget recommendation both use this.
    """
    if draws.stop_step is None:
        raise ValueError(f"PathDraws {draws.run_id!r} carry no stop_step draws")
    return int(np.quantile(draws.stop_step, q, method="inverted_cdf"))
