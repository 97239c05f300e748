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
the recommendation then is the forecast's stop step (physics.md section 8 item 10): the median over
draws of the step after which the mean trajectory stays within 5% of its gain from the plateau
(:mod:`bayesgrpo.physics.stopping` -- the one definition, so ``budget`` and ``forecast`` agree exactly
on the same draws). When fewer than half of the draws settle before the horizon, the recommendation
is the last forecast step ("continue"), with a note.

Paper B's rule ("training beyond ~80% of one epoch yields negligible gain") is reported next to the
recommendation when the epoch length is known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from bayesgrpo.conventions import CI_PROB, interval_bounds
from bayesgrpo.forecast.paths import PathDraws, exponential_draws, stop_quantile

__all__ = [
    "PathDraws",
    "StopRecommendation",
    "Costs",
    "budget_table",
    "recommend_stop",
    "exponential_draws",
    "stop_quantile",
    "EPOCH_RULE_FRACTION",
]

#: paper B: training beyond ~80% of one epoch yields negligible gain.
EPOCH_RULE_FRACTION = 0.8


@dataclass(frozen=True)
class StopRecommendation:
    """The recommended stop for one run, with what it saves and how it compares with paper B's rule.

    ``p_best`` is the posterior probability that ``step`` is exactly the per-draw optimum;
    ``p_best_near`` that the per-draw optimum lies within ``p_best_window`` (= gain_window // 2) steps.
    ``step`` is the recommended stop step (``last_step`` means "stop now"). Rewards are latent means
    in ``units``. ``rule`` says which criterion produced ``step``: ``"expected utility"`` (a cost was
    given) or the stop step (no cost). Fields not applicable are None.
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
    # the 90% interval of what stopping at the best step saves (over the draws' own best stop steps)
    steps_saved_q05: float | None = None
    steps_saved_q95: float | None = None
    hours_saved_q05: float | None = None
    hours_saved_q95: float | None = None
    cost_saved_q05: float | None = None
    cost_saved_q95: float | None = None
    currency: str | None = None
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

    def _money(self) -> str:
        """The hours and cost saved with their 90% intervals, as the summary says them."""
        out = ""
        if self.steps_saved_q05 is not None:
            out += f" [90%: {self.steps_saved_q05:.0f}-{self.steps_saved_q95:.0f} steps]"
        if self.hours_saved is not None:
            out += f", {self.hours_saved:.3g} h"
            if self.hours_saved_q05 is not None:
                out += f" [90%: {self.hours_saved_q05:.3g}-{self.hours_saved_q95:.3g}]"
        if self.cost_saved is not None:
            cur = f"{self.currency} " if self.currency else "cost "
            out += f", {cur}{self.cost_saved:,.4g}"
            if self.cost_saved_q05 is not None:
                out += f" [90%: {self.cost_saved_q05:,.4g}-{self.cost_saved_q95:,.4g}]"
        return out

    def summary(self) -> str:
        u = f" {self.units}" if self.units else ""
        s = [
            f"{self.run_id}: stop at step {self.step} ({self.rule}); E[reward] = {self.expected_reward:.4g}{u} "
            f"(90% {self.reward_q05:.4g}..{self.reward_q95:.4g})"
        ]
        if self.p_best is not None:
            s.append(
                f"P(best) = {self.p_best:.2f} (within +-{self.p_best_window} steps: {self.p_best_near:.2f}), "
                f"expected regret = {self.expected_regret:.3g}"
            )
        if self.p_target is not None:
            s.append(f"P(reward >= {self.target:g} by then) = {self.p_target:.2f}")
        if self.steps_saved is not None and self.fraction_saved is not None:
            g = self.reward_given_up
            what = ("" if g is None else f", giving up E[{g:.3g}] reward" if g >= 0
                    else f", keeping E[{-g:.3g}] reward the forecast loses by then")  # fmt: skip
            s.append(f"saves {self.steps_saved} steps ({100 * self.fraction_saved:.0f}% of the remaining steps"
                     f"{self._money()}) vs training to {self.max_steps}{what}")  # fmt: skip
        if self.rule80_step is not None:
            if self.rule80_expected_reward is not None:
                s.append(
                    f"paper-B rule (0.8 epoch) = step {self.rule80_step}: E[reward] "
                    f"{self.rule80_expected_reward:.4g} ({self.rule80_status})"
                )
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


#: relative tolerance of "cost_per_step equals cost_per_hour / steps_per_hour"
COST_RTOL = 1e-9


class Costs(BaseModel):
    """What a step costs and a reward is worth (the bounds the CLI's checks and messages come from)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cost_per_step: float | None = Field(
        None, ge=0.0, allow_inf_nan=False, description="cost of one more optimizer step"
    )
    cost_per_hour: float | None = Field(None, ge=0.0, allow_inf_nan=False, description="cost per hour of training")
    cost_per_gpu_hour: float | None = Field(
        None, ge=0.0, allow_inf_nan=False, description="cost of one GPU for one hour (times gpus: the cost per hour)"
    )
    gpus: int | None = Field(None, gt=0, description="GPUs the run trains on (with cost_per_gpu_hour; default 1)")
    currency: str | None = Field(None, min_length=1, max_length=12, description="what costs are counted in (e.g. USD)")
    steps_per_hour: float | None = Field(None, gt=0.0, allow_inf_nan=False, description="optimizer steps per hour")
    value_per_reward: float | None = Field(
        None, gt=0.0, allow_inf_nan=False, description="value of one reward unit at the end (default 1)"
    )
    epoch_steps: int | None = Field(None, gt=0, description="steps per epoch")

    @model_validator(mode="after")
    def _consistent(self):
        if self.cost_per_hour is not None and self.cost_per_gpu_hour is not None:
            raise ValueError("give cost_per_hour or cost_per_gpu_hour, not both")
        if self.gpus is not None and self.cost_per_gpu_hour is None:
            raise ValueError("gpus needs cost_per_gpu_hour")
        for name in ("cost_per_hour", "cost_per_gpu_hour"):
            if getattr(self, name) is not None and self.steps_per_hour is None:
                raise ValueError(f"{name} needs steps_per_hour (to turn hours into optimizer steps)")
        hourly = self.hourly
        if self.cost_per_step is not None and hourly is not None and self.steps_per_hour is not None:
            implied = hourly / self.steps_per_hour
            if not math.isclose(implied, self.cost_per_step, rel_tol=COST_RTOL, abs_tol=0.0):
                raise ValueError(f"cost_per_step {self.cost_per_step:g} contradicts cost_per_hour / steps_per_hour = "
                                 f"{implied:g}; give one of them")  # fmt: skip
        return self

    @property
    def hourly(self) -> float | None:
        """The cost of one hour of training: ``cost_per_hour``, or ``cost_per_gpu_hour x gpus`` (1 GPU by default)."""
        if self.cost_per_gpu_hour is not None:
            return float(self.cost_per_gpu_hour) * float(self.gpus or 1)
        return None if self.cost_per_hour is None else float(self.cost_per_hour)

    @property
    def per_step(self) -> float | None:
        """The cost of one step (:attr:`hourly` ``/ steps_per_hour`` when only the rate is given), or None."""
        if self.cost_per_step is not None:
            return float(self.cost_per_step)
        if self.hourly is not None and self.steps_per_hour is not None:  # the validator pairs them
            return self.hourly / float(self.steps_per_hour)
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


def _rows(draws, steps, budgets) -> np.ndarray:
    """Grid indices of the table's rows: every step, or the requested budgets (each mapped to the
    largest grid step <= it: a run stopped at b has trained up to the last grid step <= b)."""
    if budgets is None:
        return np.arange(steps.size)
    b = np.atleast_1d(np.asarray(budgets))
    if b.size == 0:
        raise ValueError("budgets is empty")
    bad = b[(b < steps[0]) | (b > steps[-1])]
    if bad.size:
        raise ValueError(
            f"budget step(s) {bad.tolist()} outside the forecast grid {steps[0]}..{steps[-1]} "
            f"of run {draws.run_id!r} (last observed step {draws.last_step}, horizon "
            f"{draws.horizon}); forecast further or choose budgets inside it"
        )
    return np.unique(np.searchsorted(steps, b, side="right") - 1)


def _gains(steps, lat, gain_window: int) -> np.ndarray:
    """Expected gain over the next ``gain_window`` steps at every grid step (NaN past the grid)."""
    gain = np.full(steps.size, np.nan)
    for j, s in enumerate(steps):
        fut = _value_at(steps, lat, s + gain_window)
        if fut is not None:
            gain[j] = float(np.mean(fut - lat[:, j]))
    return gain


def _choose(draws, c, e_util, cand_steps) -> tuple[int, str, int, list[str]]:
    """``(row, rule, recommended step, notes)``: the expected-utility optimum with a cost, else the stop step."""
    n, notes = cand_steps.size, []
    if c is not None:
        j = int(np.argmax(e_util))
        if j == n - 1 and n > 1:
            notes.append("the optimum is at the end of the forecast: forecast further before trusting the stop")
        return j, "expected utility", int(cand_steps[j]), notes
    if draws.stop_step is None:
        notes.append("without a cost the recommendation is the stop step, but these draws carry none: "
                     "give cost_per_step (or cost_per_hour with steps_per_hour)")  # fmt: skip
        return n - 1, "none (no cost given and no stop-step draws)", int(cand_steps[-1]), notes
    rule = "stop step (mean trajectory within 5% of its gain from the plateau)"
    if draws.stop_reached.mean() >= 0.5:
        stop = stop_quantile(draws, 0.5)
        rec_step = max(stop, int(cand_steps[0]))
        if stop < rec_step:
            notes.append(f"the mean trajectory settled by step {stop}, before the last observation: by the settling "
                         "rule the run could stop now (the stop advice, P(gain), weighs what a late rise may still "
                         "add; give a cost for the expected-utility optimum)")  # fmt: skip
        return int(min(np.searchsorted(cand_steps, rec_step, side="left"), n - 1)), rule, rec_step, notes
    notes.append(f"only {100 * draws.stop_reached.mean():.0f}% of the draws settle before the horizon: "
                 "continue to the last forecast step")  # fmt: skip
    return n - 1, rule, int(cand_steps[-1]), notes


def _draw_optima(draws, cand_steps, best, c) -> np.ndarray | None:
    """Each draw's own best stop: its expected-utility optimum with a cost, else its stop step (the last forecast
    step for a draw that does not settle); None without stop-step draws."""
    if c is not None:
        return cand_steps[best].astype(float)
    if draws.stop_step is None:
        return None
    # a draw settled before the last observation stops now, not in the past: it saves the remaining steps, no more
    return np.maximum(np.where(draws.stop_reached, draws.stop_step, cand_steps[-1]), cand_steps[0]).astype(float)


def _saved_interval(saved: np.ndarray, costs: Costs) -> dict:
    """The 90% interval of the steps (hours, cost) that stopping at each draw's own best step saves."""
    lo, hi = (float(v) for v in np.quantile(saved, interval_bounds(CI_PROB)))
    out = dict(steps_saved_q05=lo, steps_saved_q95=hi)
    if costs.steps_per_hour:
        sph = float(costs.steps_per_hour)
        out.update(hours_saved_q05=lo / sph, hours_saved_q95=hi / sph)
    if costs.per_step is not None:
        out.update(cost_saved_q05=lo * costs.per_step, cost_saved_q95=hi * costs.per_step)
    return out


def _savings(draws, steps, lat, j_grid: int, rec_step: int, *, max_steps, costs: Costs, optima, notes) -> dict:
    """What stopping at the recommendation saves against running to ``max_steps`` (in steps, hours and cost), and
    the 90% interval of what stopping at the best step saves (``optima``: each draw's own best stop)."""
    if max_steps is None:
        return {}
    ms = int(max_steps)
    in_fc = steps[0] <= ms <= steps[-1]
    ms_eff = ms if in_fc else int(steps[-1]) if ms > steps[-1] else None
    if ms_eff is None or ms_eff < rec_step:
        notes.append(f"max_steps {ms} is not after the recommended step {rec_step}")
        return dict(max_steps=ms, max_steps_in_forecast=bool(in_fc), steps_saved=max(ms - rec_step, 0),
                    currency=costs.currency)  # fmt: skip
    at_max = _value_at(steps, lat, ms_eff)
    if not in_fc:
        notes.append(f"max_steps {ms} lies beyond the forecast (to step {steps[-1]}): reward at max_steps "
                     f"taken at the forecast end (a lower bound on the gain given up for a rising curve)")  # fmt: skip
    c, sph = costs.per_step, costs.steps_per_hour
    out = dict(
        max_steps=ms, max_steps_in_forecast=bool(in_fc), expected_reward_at_max=float(at_max.mean()),
        reward_given_up=float(np.mean(at_max - lat[:, j_grid])), steps_saved=ms - rec_step,
        fraction_saved=(ms - rec_step) / max(ms - draws.last_step, 1),
        hours_saved=(ms - rec_step) / sph if sph else None,
        cost_saved=(c * (ms - rec_step)) if c is not None else None, currency=costs.currency,
    )  # fmt: skip
    if optima is not None:
        out.update(_saved_interval(np.maximum(ms_eff - optima, 0.0), costs))
    return out


def _rule80(draws, steps, lat, rec_step: int, *, epoch_steps, v: float, c) -> dict:
    """Paper B's 0.8-epoch rule next to the recommendation (when the epoch length is known)."""
    if not epoch_steps:
        return {}
    r80_step = int(round(EPOCH_RULE_FRACTION * float(epoch_steps)))
    r80: dict[str, object] = dict(
        epoch_steps=int(epoch_steps), rule80_step=r80_step, recommendation_minus_rule80=rec_step - r80_step
    )
    if r80_step < draws.last_step:
        r80["rule80_status"] = "already passed"
    elif r80_step > steps[-1]:
        r80["rule80_status"] = "beyond the forecast"
    else:
        at = _value_at(steps, lat, r80_step)
        r80["rule80_status"] = "within the forecast"
        r80["rule80_expected_reward"] = float(at.mean())
        r80["rule80_expected_utility"] = float(np.mean(v * at - (c or 0.0) * (r80_step - draws.last_step)))
    return r80


def _table(draws, cand_steps, idx, *, mean, q05, q95, gain, gain_window, p_settled, target, p_target, c, e_util,
           p_best, regret, steps_per_hour, epoch_steps) -> pd.DataFrame:  # fmt: skip
    table = pd.DataFrame({
        "run_id": draws.run_id, "step": cand_steps.astype(int), "steps_from_now": (cand_steps - draws.last_step).astype(int),
        "expected_reward": mean[idx], "reward_q05": q05[idx], "reward_q95": q95[idx], "expected_gain_next": gain[idx],
        "gain_window": gain_window,
    })  # fmt: skip
    if p_settled is not None:
        table["p_settled"] = p_settled
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
    return table


def _analyse(draws, *, target, budgets, costs: Costs, value_per_reward, max_steps, epoch_steps, gain_window):
    steps, lat = _grid(draws)
    c, steps_per_hour = costs.per_step, costs.steps_per_hour
    v = 1.0 if value_per_reward is None else float(value_per_reward)
    if gain_window is None:
        gain_window = max(draws.interval, int(round(0.1 * max(draws.horizon, 1))))
    gain_window = int(gain_window)
    if gain_window <= 0:
        raise ValueError(f"gain_window must be > 0; got {gain_window}")
    idx = _rows(draws, steps, budgets)
    # first-passage probability of the target (over all grid steps, then read at the rows)
    p_target = None if target is None else (np.maximum.accumulate(lat, axis=1) >= float(target)).mean(axis=0)
    mean = lat.mean(axis=0)
    q05, q95 = np.quantile(lat, interval_bounds(CI_PROB), axis=0)
    # utility over the rows (candidates)
    cand_steps = steps[idx]
    util = v * lat[:, idx] - (0.0 if c is None else c) * (cand_steps - draws.last_step)[None, :]
    best = np.argmax(util, axis=1)
    p_best = np.bincount(best, minlength=idx.size) / lat.shape[0]
    regret = (util.max(axis=1, keepdims=True) - util).mean(axis=0)
    e_util = util.mean(axis=0)
    # share of draws whose mean trajectory has settled (stop step) by each candidate step
    p_settled = None
    if draws.stop_step is not None:
        p_settled = (draws.stop_reached[:, None] & (draws.stop_step[:, None] <= cand_steps[None, :])).mean(axis=0)
    table = _table(draws, cand_steps, idx, mean=mean, q05=q05, q95=q95, gain=_gains(steps, lat, gain_window),
                   gain_window=gain_window, p_settled=p_settled, target=target, p_target=p_target, c=c, e_util=e_util,
                   p_best=p_best, regret=regret, steps_per_hour=steps_per_hour, epoch_steps=epoch_steps)  # fmt: skip
    j, rule, rec_step, notes = _choose(draws, c, e_util, cand_steps)
    table["recommended"] = False
    table.loc[table.index[j], "recommended"] = True
    sv = _savings(draws, steps, lat, idx[j], rec_step, max_steps=max_steps, costs=costs,
                  optima=_draw_optima(draws, cand_steps, best, c), notes=notes)  # fmt: skip
    r80 = _rule80(draws, steps, lat, rec_step, epoch_steps=epoch_steps, v=v, c=c)
    rec = StopRecommendation(
        run_id=draws.run_id, step=rec_step, rule=rule, expected_reward=float(mean[idx[j]]),
        reward_q05=float(q05[idx[j]]), reward_q95=float(q95[idx[j]]),
        p_best=float(p_best[j]) if c is not None else None,
        p_best_window=int(gain_window // 2) if c is not None else None,
        p_best_near=float(np.mean(np.abs(cand_steps[best] - rec_step) <= gain_window / 2)) if c is not None else None,
        expected_regret=float(regret[j]) if c is not None else None,
        expected_utility=float(e_util[j]) if c is not None else None,
        p_target=float(p_target[idx[j]]) if p_target is not None else None,
        target=float(target) if target is not None else None,
        last_step=draws.last_step, units=draws.units, notes=tuple(notes), **sv, **r80,
    )  # fmt: skip
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
    cost_per_gpu_hour: float | None = None,
    gpus: int | None = None,
    currency: str | None = None,
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
    cost_per_gpu_hour, gpus : optional
        Instead of ``cost_per_hour``: the price of one GPU-hour and the GPUs the run uses (default 1).
    currency : str, optional
        What costs are counted in (``USD``, ...): named in the recommendation's summary.
    max_steps : int, optional
        The planned length; the recommendation reports what stopping early saves against it.
    epoch_steps : int, optional
        Steps in one epoch; adds an ``epoch`` column and compares with paper B's 0.8-epoch rule.
    gain_window : int, optional
        ``N`` of ``expected_gain_next`` (default 10% of the horizon, at least one interval).

    Returns
    -------
    pandas.DataFrame
        Columns ``run_id, step, steps_from_now, expected_reward, reward_q05, reward_q95,
        expected_gain_next, gain_window, [p_settled], [target, p_target], [cost],
        expected_utility, p_best, expected_regret, [hours_from_now], [epoch], recommended``.
        ``df.attrs["recommendation"]`` holds the :class:`StopRecommendation`: what stopping at it saves against
        ``max_steps`` (steps, hours, cost) and the 90% interval of what stopping at the best step saves (over
        each draw's own best stop: its expected-utility optimum with a cost, else its stop step).
    """
    try:
        costs = Costs(cost_per_step=cost_per_step, cost_per_hour=cost_per_hour, cost_per_gpu_hour=cost_per_gpu_hour,
                      gpus=gpus, steps_per_hour=steps_per_hour, currency=currency)  # fmt: skip
    except ValidationError as e:  # the message of the one check, as a plain ValueError
        raise ValueError(e.errors()[0]["msg"].removeprefix("Value error, ")) from None
    table, _ = _analyse(draws, target=target, budgets=budgets, costs=costs, value_per_reward=value_per_reward,
                        max_steps=max_steps, epoch_steps=epoch_steps, gain_window=gain_window)  # fmt: skip
    return table


def recommend_stop(draws: PathDraws, **kwargs) -> StopRecommendation:
    """The :class:`StopRecommendation` of :func:`budget_table` (same keyword arguments)."""
    return budget_table(draws, **kwargs).attrs["recommendation"]
