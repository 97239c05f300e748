"""Stop / budget decisions from posterior reward paths (issue 6).

Input contract: :class:`PathDraws` -- posterior draws of one run's future reward path, produced by
the forecaster (``bayesgrpo.forecast``). Everything here is pure numpy / pandas and works on any
draws that satisfy the contract (tests build them from closed-form curves).

Decision quantities (per budget step ``s`` on the forecast grid):

* ``p_target``: posterior probability that the **latent** (noise-free) mean reward reaches
  ``target`` at some step ``<= s`` (first passage, ``max_{t<=s} R_t >= target``);
* ``expected_reward`` (and a 90% interval) of the latent reward at ``s``;
* ``expected_gain_next``: ``E[R_{s+N} - R_s]`` for the next ``N = gain_window`` steps;
* utility ``U_d(s) = value_per_reward * R_d(s) - cost_per_step * (s - last_step)`` per draw ``d``;
  the recommended stop maximises ``E[U(s)]``; ``p_best`` is the posterior probability that ``s`` is
  the per-draw optimum and ``expected_regret = E[max_t U_d(t) - U_d(s)]``.

Without a cost the utility is maximised at the horizon (a saturating curve never stops rising), so
the recommendation then falls back to the physics.md section 8 item 10 criterion: the first step at
which the expected realised fraction of the asymptotic gain ``(R - R0)/(R* - R0)`` reaches
``gain_fraction`` (default 0.95).

Paper B's rule ("training beyond ~80% of one epoch yields negligible gain") is reported next to the
recommendation when the epoch length is known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy as np
import pandas as pd

__all__ = [
    "PathDraws",
    "StopRecommendation",
    "budget_table",
    "recommend_stop",
    "plot_budget",
    "exponential_draws",
    "EPOCH_RULE_FRACTION",
]

#: paper B: training beyond ~80% of one epoch yields negligible gain.
EPOCH_RULE_FRACTION = 0.8

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
                    f"PathDraws {self.run_id!r}: {name} must have shape (n_draws, {steps.size}); got {arr.shape}")
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
        set_("last_step", int(self.last_step))
        set_("horizon", int(self.horizon))
        set_("interval", max(1, int(self.interval)))
        set_("lag", int(self.lag))
        if steps[0] < self.last_step:
            raise ValueError(f"PathDraws {self.run_id!r}: forecast steps start at {steps[0]} before last_step {self.last_step}")

    @property
    def n_draws(self) -> int:
        return self.latent.shape[0]

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
    return PathDraws(
        run_id=run_id, steps=steps, observed=obs, latent=lat, r0=r0, r_star=r_star, tau=tau, a=a,
        mu=np.full_like(r0, mu), sigma_p=np.zeros_like(r0), sigma_m=np.full_like(r0, sigma_m),
        last_step=last_step, horizon=horizon, interval=interval, units=units,
        latent_now=now if include_now else None,
    )


@dataclass(frozen=True)
class StopRecommendation:
    """The recommended stop for one run, with what it saves and how it compares with paper B's rule.

    ``p_best`` is the posterior probability that ``step`` is exactly the per-draw optimum;
    ``p_best_near`` that the per-draw optimum lies within ``p_best_window`` (= gain_window // 2) steps.
    ``step`` is the recommended stop step (``last_step`` means "stop now"). Rewards are latent means
    in ``units``. ``rule`` says which criterion produced ``step``: ``"expected utility"`` (a cost was
    given) or ``"gain fraction >= 0.95"`` (no cost). Fields not applicable are None.
    """

    run_id: str
    step: int
    rule: str
    expected_reward: float
    reward_q05: float
    reward_q95: float
    p_best: float | None
    p_best_near: float | None
    p_best_window: int | None
    expected_regret: float | None
    expected_utility: float | None
    p_target: float | None
    target: float | None
    last_step: int
    units: str | None
    # compute saved versus running to max_steps
    max_steps: int | None = None
    max_steps_in_forecast: bool | None = None
    expected_reward_at_max: float | None = None
    reward_given_up: float | None = None
    steps_saved: int | None = None
    fraction_saved: float | None = None
    hours_saved: float | None = None
    cost_saved: float | None = None
    # paper B's 80%-of-an-epoch rule
    epoch_steps: int | None = None
    rule80_step: int | None = None
    rule80_status: str | None = None
    rule80_expected_reward: float | None = None
    rule80_expected_utility: float | None = None
    recommendation_minus_rule80: int | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def summary(self) -> str:
        u = f" {self.units}" if self.units else ""
        s = [f"{self.run_id}: stop at step {self.step} ({self.rule}); E[reward] = {self.expected_reward:.4g}{u} "
             f"(90% {self.reward_q05:.4g}..{self.reward_q95:.4g})"]
        if self.p_best is not None:
            s.append(f"P(best) = {self.p_best:.2f} (within +-{self.p_best_window} steps: {self.p_best_near:.2f}), "
                     f"expected regret = {self.expected_regret:.3g}")
        if self.p_target is not None:
            s.append(f"P(reward >= {self.target:g} by then) = {self.p_target:.2f}")
        if self.steps_saved is not None:
            extra = ""
            if self.hours_saved is not None:
                extra += f", {self.hours_saved:.3g} h"
            if self.cost_saved is not None:
                extra += f", cost {self.cost_saved:.3g}"
            s.append(f"saves {self.steps_saved} steps ({100 * self.fraction_saved:.0f}%{extra}) vs max_steps "
                     f"{self.max_steps}, giving up E[{self.reward_given_up:.3g}] reward")
        if self.rule80_step is not None:
            if self.rule80_expected_reward is not None:
                s.append(f"paper-B rule (0.8 epoch) = step {self.rule80_step}: E[reward] "
                         f"{self.rule80_expected_reward:.4g} ({self.rule80_status})")
            else:
                s.append(f"paper-B rule (0.8 epoch) = step {self.rule80_step} ({self.rule80_status})")
        return "; ".join(s)


# ----------------------------------------------------------------------------- internals
def _grid(draws: PathDraws):
    """Candidate stop steps and latent paths, prepending "stop now" when latent_now is known."""
    if draws.latent_now is not None and draws.steps[0] > draws.last_step:
        steps = np.concatenate([[draws.last_step], draws.steps])
        lat = np.concatenate([draws.latent_now[:, None], draws.latent], axis=1)
    else:
        steps, lat = draws.steps, draws.latent
    return steps, lat


def _cost_per_step(cost_per_step, cost_per_hour, steps_per_hour):
    if cost_per_step is not None:
        if cost_per_hour is not None and steps_per_hour is not None:
            implied = cost_per_hour / steps_per_hour
            if not math.isclose(implied, cost_per_step, rel_tol=1e-6):
                raise ValueError(f"cost_per_step={cost_per_step} contradicts cost_per_hour/steps_per_hour={implied}")
        return float(cost_per_step)
    if cost_per_hour is not None:
        if steps_per_hour is None or steps_per_hour <= 0:
            raise ValueError("cost_per_hour needs steps_per_hour (> 0) to convert to a cost per step")
        return float(cost_per_hour) / float(steps_per_hour)
    return None


def _value_at(steps, lat, s):
    """Latent draws at step ``s`` (linear interpolation on the grid; NaN outside it)."""
    if s < steps[0] or s > steps[-1]:
        return None
    j = np.searchsorted(steps, s)
    if steps[j] == s:
        return lat[:, j]
    w = (s - steps[j - 1]) / (steps[j] - steps[j - 1])
    return (1 - w) * lat[:, j - 1] + w * lat[:, j]


def _analyse(draws, *, target, budgets, cost_per_step, value_per_reward, steps_per_hour, cost_per_hour,
             max_steps, epoch_steps, gain_window, gain_fraction):
    steps, lat = _grid(draws)
    n_draws = lat.shape[0]
    c = _cost_per_step(cost_per_step, cost_per_hour, steps_per_hour)
    v = 1.0 if value_per_reward is None else float(value_per_reward)
    if gain_window is None:
        gain_window = max(draws.interval, int(round(0.1 * max(draws.horizon, 1))))
    gain_window = int(gain_window)
    if gain_window <= 0:
        raise ValueError(f"gain_window must be > 0; got {gain_window}")

    # rows of the table: all grid steps or the requested budgets (mapped to the grid)
    if budgets is None:
        idx = np.arange(steps.size)
    else:
        b = np.atleast_1d(np.asarray(budgets))
        if b.size == 0:
            raise ValueError("budgets is empty")
        bad = b[(b < steps[0]) | (b > steps[-1])]
        if bad.size:
            raise ValueError(f"budget step(s) {bad.tolist()} outside the forecast grid {steps[0]}..{steps[-1]} "
                             f"of run {draws.run_id!r} (last observed step {draws.last_step}, horizon "
                             f"{draws.horizon}); forecast further or choose budgets inside it")
        # largest grid step <= budget (a run stopped at b has trained up to the last grid step <= b)
        idx = np.unique(np.searchsorted(steps, b, side="right") - 1)

    # first-passage probability of the target (over all grid steps, then read at the rows)
    p_target = None
    if target is not None:
        passed = np.maximum.accumulate(lat, axis=1) >= float(target)
        p_target = passed.mean(axis=0)

    mean = lat.mean(axis=0)
    q05, q95 = np.quantile(lat, [0.05, 0.95], axis=0)
    # expected gain over the next gain_window steps
    gain = np.full(steps.size, np.nan)
    for j, s in enumerate(steps):
        fut = _value_at(steps, lat, s + gain_window)
        if fut is not None:
            gain[j] = float(np.mean(fut - lat[:, j]))

    # utility over the rows (candidates)
    cand_steps = steps[idx]
    cand_lat = lat[:, idx]
    util = v * cand_lat - (0.0 if c is None else c) * (cand_steps - draws.last_step)[None, :]
    best = np.argmax(util, axis=1)
    p_best = np.bincount(best, minlength=idx.size) / n_draws
    regret = (util.max(axis=1, keepdims=True) - util).mean(axis=0)
    e_util = util.mean(axis=0)

    # realised fraction of the asymptotic gain (for the no-cost criterion)
    delta = draws.r_star - draws.r0
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(np.abs(delta)[:, None] > 0, (cand_lat - draws.r0[:, None]) / delta[:, None], 1.0)
    e_frac = frac.mean(axis=0)

    table = pd.DataFrame({
        "run_id": draws.run_id,
        "step": cand_steps.astype(int),
        "steps_from_now": (cand_steps - draws.last_step).astype(int),
        "expected_reward": mean[idx],
        "reward_q05": q05[idx],
        "reward_q95": q95[idx],
        "expected_gain_next": gain[idx],
        "gain_window": gain_window,
        "expected_gain_fraction": e_frac,
    })
    if p_target is not None:
        table["target"] = float(target)
        table["p_target"] = p_target[idx]
    if c is not None:
        table["cost"] = c * (cand_steps - draws.last_step)
    table["expected_utility"] = e_util
    table["p_best"] = p_best
    table["expected_regret"] = regret
    if steps_per_hour:
        table["hours_from_now"] = (cand_steps - draws.last_step) / float(steps_per_hour)
    if epoch_steps:
        table["epoch"] = cand_steps / float(epoch_steps)

    notes = []
    if c is not None:
        j = int(np.argmax(e_util))
        rule = "expected utility"
        if j == idx.size - 1 and idx.size > 1:
            notes.append("the optimum is at the end of the forecast: forecast further before trusting the stop")
    else:
        hit = np.flatnonzero(e_frac >= gain_fraction)
        if hit.size:
            j = int(hit[0])
        else:
            j = idx.size - 1
            notes.append(f"expected gain fraction never reaches {gain_fraction:g} within the forecast "
                         f"(max {np.nanmax(e_frac):.3f}): recommending the last forecast step")
        rule = f"gain fraction >= {gain_fraction:g}"
    table["recommended"] = False
    table.loc[table.index[j], "recommended"] = True
    rec_step = int(cand_steps[j])

    # compute saved vs max_steps
    sv = {}
    if max_steps is not None:
        ms = int(max_steps)
        in_fc = steps[0] <= ms <= steps[-1]
        ms_eff = ms if in_fc else int(steps[-1]) if ms > steps[-1] else None
        if ms_eff is not None and ms_eff >= rec_step:
            at_max = _value_at(steps, lat, ms_eff)
            sv = dict(
                max_steps=ms, max_steps_in_forecast=bool(in_fc),
                expected_reward_at_max=float(at_max.mean()),
                reward_given_up=float(np.mean(at_max - lat[:, idx[j]])),
                steps_saved=ms - rec_step,
                fraction_saved=(ms - rec_step) / max(ms - draws.last_step, 1),
                hours_saved=(ms - rec_step) / steps_per_hour if steps_per_hour else None,
                cost_saved=(c * (ms - rec_step)) if c is not None else None,
            )
            if not in_fc:
                notes.append(f"max_steps {ms} lies beyond the forecast (to step {steps[-1]}): reward at max_steps "
                             f"taken at the forecast end (a lower bound on the gain given up for a rising curve)")
        else:
            sv = dict(max_steps=ms, max_steps_in_forecast=bool(in_fc), steps_saved=max(ms - rec_step, 0))
            notes.append(f"max_steps {ms} is not after the recommended step {rec_step}")

    r80 = {}
    if epoch_steps:
        r80_step = int(round(EPOCH_RULE_FRACTION * float(epoch_steps)))
        r80 = dict(epoch_steps=int(epoch_steps), rule80_step=r80_step,
                   recommendation_minus_rule80=rec_step - r80_step)
        if r80_step < draws.last_step:
            r80["rule80_status"] = "already passed"
        elif r80_step > steps[-1]:
            r80["rule80_status"] = "beyond the forecast"
        else:
            at = _value_at(steps, lat, r80_step)
            r80["rule80_status"] = "within the forecast"
            r80["rule80_expected_reward"] = float(at.mean())
            r80["rule80_expected_utility"] = float(np.mean(v * at - (c or 0.0) * (r80_step - draws.last_step)))

    rec = StopRecommendation(
        run_id=draws.run_id, step=rec_step, rule=rule,
        expected_reward=float(mean[idx[j]]), reward_q05=float(q05[idx[j]]), reward_q95=float(q95[idx[j]]),
        p_best=float(p_best[j]) if c is not None else None,
        p_best_window=int(gain_window // 2) if c is not None else None,
        p_best_near=float(np.mean(np.abs(cand_steps[best] - rec_step) <= gain_window / 2)) if c is not None else None,
        expected_regret=float(regret[j]) if c is not None else None,
        expected_utility=float(e_util[j]) if c is not None else None,
        p_target=float(p_target[idx[j]]) if p_target is not None else None,
        target=float(target) if target is not None else None,
        last_step=draws.last_step, units=draws.units, notes=tuple(notes), **sv, **r80,
    )
    table.attrs["recommendation"] = rec
    return table, rec


def budget_table(
    draws: PathDraws,
    *,
    target: float | None = None,
    budgets=None,
    cost_per_step: float | None = None,
    value_per_reward: float | None = None,
    steps_per_hour: float | None = None,
    cost_per_hour: float | None = None,
    max_steps: int | None = None,
    epoch_steps: int | None = None,
    gain_window: int | None = None,
    gain_fraction: float = 0.95,
) -> pd.DataFrame:
    """Tidy per-budget decision table for one run.

    Parameters
    ----------
    draws : PathDraws
    target : float, optional
        Reward target (run units). Adds ``p_target`` = P(latent reward >= target at some step <= budget).
    budgets : sequence of int, optional
        Budget steps (absolute). Default: every forecast step (plus ``last_step`` = "stop now" when
        ``draws.latent_now`` is given). Each budget is mapped to the last forecast step <= it.
    cost_per_step, value_per_reward : float, optional
        Utility ``value_per_reward * R(s) - cost_per_step * (s - last_step)``; ``value_per_reward``
        defaults to 1 (cost then in reward units per step).
    steps_per_hour, cost_per_hour : float, optional
        Wall-clock rate; ``cost_per_hour / steps_per_hour`` is used as ``cost_per_step`` when that is
        not given; adds ``hours_from_now`` and ``hours_saved``.
    max_steps : int, optional
        The planned length; the recommendation reports what stopping early saves against it.
    epoch_steps : int, optional
        Steps in one epoch; adds an ``epoch`` column and compares with paper B's 0.8-epoch rule.
    gain_window : int, optional
        ``N`` of ``expected_gain_next`` (default 10% of the horizon, at least one interval).
    gain_fraction : float
        Criterion used when no cost is given (see module docstring).

    Returns
    -------
    pandas.DataFrame
        Columns ``run_id, step, steps_from_now, expected_reward, reward_q05, reward_q95,
        expected_gain_next, gain_window, expected_gain_fraction, [target, p_target], [cost],
        expected_utility, p_best, expected_regret, [hours_from_now], [epoch], recommended``.
        ``df.attrs["recommendation"]`` holds the :class:`StopRecommendation`.
    """
    table, _ = _analyse(draws, target=target, budgets=budgets, cost_per_step=cost_per_step,
                        value_per_reward=value_per_reward, steps_per_hour=steps_per_hour,
                        cost_per_hour=cost_per_hour, max_steps=max_steps, epoch_steps=epoch_steps,
                        gain_window=gain_window, gain_fraction=gain_fraction)
    return table


def recommend_stop(draws: PathDraws, **kwargs) -> StopRecommendation:
    """The :class:`StopRecommendation` of :func:`budget_table` (same keyword arguments)."""
    return budget_table(draws, **kwargs).attrs["recommendation"]


# ----------------------------------------------------------------------------- plot
def plot_budget(
    draws: PathDraws,
    table: pd.DataFrame | None = None,
    *,
    history: pd.DataFrame | None = None,
    title: str | None = None,
    **kwargs,
):
    """Two-panel figure: expected reward (90% band) vs step with the recommendation, and P(target).

    Parameters
    ----------
    draws : PathDraws
    table : DataFrame, optional
        Output of :func:`budget_table`; computed from ``kwargs`` when omitted.
    history : DataFrame, optional
        The observed run (columns ``step``, ``reward``) to draw before the forecast.
    **kwargs
        Passed to :func:`budget_table` when ``table`` is None.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.figure import Figure

    if table is None:
        table = budget_table(draws, **kwargs)
    rec: StopRecommendation = table.attrs.get("recommendation")
    has_p = "p_target" in table.columns
    fig = Figure(figsize=(9, 7), layout="constrained")
    axes = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [2.2, 1]})
    ax = axes[0]
    units = f" [{draws.units}]" if draws.units else ""
    if history is not None and len(history):
        ax.plot(history["step"], history["reward"], ".", ms=3, color="0.55", label="observed")
    oq = np.quantile(draws.observed, [0.05, 0.95], axis=0)
    ax.fill_between(draws.steps, oq[0], oq[1], color="C0", alpha=0.12, lw=0, label="90% predictive (logged)")
    ax.fill_between(table["step"], table["reward_q05"], table["reward_q95"], color="C0", alpha=0.3, lw=0,
                    label="90% latent reward")
    ax.plot(table["step"], table["expected_reward"], color="C0", lw=2, label="E[latent reward]")
    if has_p:
        ax.axhline(table["target"].iloc[0], color="C3", ls=":", lw=1.2, label=f"target {table['target'].iloc[0]:.4g}")
    ax.axvline(draws.last_step, color="0.3", lw=1, ls="-")
    ax.annotate("now", (draws.last_step, 1), xycoords=("data", "axes fraction"), xytext=(3, -12),
                textcoords="offset points", fontsize=9, color="0.3")
    if rec is not None:
        ax.axvline(rec.step, color="C2", lw=2, ls="--", label=f"recommended stop: {rec.step}")
        ax.plot([rec.step], [rec.expected_reward], "o", color="C2", ms=7)
        if rec.rule80_step is not None and rec.rule80_status != "already passed":
            ax.axvline(rec.rule80_step, color="C1", lw=1.5, ls="-.", label=f"0.8 epoch (paper B): {rec.rule80_step}")
        if rec.max_steps is not None:
            ax.axvline(min(rec.max_steps, int(draws.steps[-1])), color="C4", lw=1.2, ls=":",
                       label=f"max_steps {rec.max_steps}" + ("" if rec.max_steps_in_forecast else " (beyond)"))
    ax.set_ylabel(f"reward{units}")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    if title is None:
        title = draws.run_id
        if rec is not None:
            title += (f"\nstop at step {rec.step} ({rec.rule}): E[reward] {rec.expected_reward:.3g}"
                      f" (90% {rec.reward_q05:.3g}..{rec.reward_q95:.3g})")
            if rec.steps_saved is not None:
                title += f"; saves {rec.steps_saved} of max_steps {rec.max_steps}"
    ax.set_title(title, fontsize=10)

    ax2 = axes[1]
    if has_p:
        ax2.plot(table["step"], table["p_target"], color="C3", lw=2, label="P(reached target by step)")
        ax2.set_ylim(-0.03, 1.03)
        ax2.set_ylabel("probability")
    if "cost" in table.columns:
        ax2.plot(table["step"], np.cumsum(table["p_best"]), color="C2", lw=1.5,
                 label="P(optimal stop <= step)")
        ax2.set_ylim(-0.03, 1.03)
        ax2.set_ylabel("probability")
    if not has_p and "cost" not in table.columns:
        ax2.plot(table["step"], table["expected_gain_fraction"], color="C0", lw=2,
                 label="E[fraction of asymptotic gain]")
        ax2.set_ylabel("gain fraction")
    if rec is not None:
        ax2.axvline(rec.step, color="C2", lw=2, ls="--")
    ax2.set_xlabel("optimizer step")
    ax2.grid(alpha=0.3)
    ax2.legend(loc="lower right", fontsize=8, framealpha=0.9)
    return fig
