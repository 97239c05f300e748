"""The stop policy: stop / continue / too early, with a measured error rate (issue 18).

One policy object drives every front end (``forecast``'s ``advice`` column, ``budget`` over many runs,
``backtest``'s operating characteristic, ``BayesGRPOCallback(stop=...)``, ``watch --stop``):

* at each forecast the condition is ``p_gain < threshold`` (``p_gain`` = P(final reward >= current level
  + delta x scale), recalibrated: :mod:`bayesgrpo.forecast.decision`), checked only once ``min_fraction``
  of the run is observed (before that: ``too early``; so is a forecast without a probability);
* the policy **stops** when the condition has held at ``patience`` consecutive forecasts
  (:class:`StopMonitor`; a single forecast -- the forecast table -- is judged with the thresholds
  measured for patience 1);
* ``risk`` is the share of stops allowed to be **bad**: to lose more than ``delta_bad`` of the run's
  reward range (final reward minus the current level at the stop). The threshold for a risk and a
  patience is not chosen by hope: it is the largest threshold whose stops were bad at most ``risk`` of
  the time on a leave-one-source-out backtest at every 5% of every development run
  (``bench/stop_study.py``), shipped with its provenance in ``bayesgrpo/resources/decision_<kind>.json``
  (interpolated between the risks measured; a risk below the smallest is refused: no threshold met it).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from bayesgrpo.conventions import DEFAULT_KIND, DEFAULT_RISK
from bayesgrpo.forecast.decision import DEFAULT_DELTA, DecisionCalibration, shipped_decision

__all__ = ["StopPolicy", "StopMonitor", "add_advice", "advise_fit", "fit_decision_numbers", "policy_from_options",
           "sweep_stop_table", "ADVICE", "DEFAULT_RISK", "DEFAULT_DELTA_BAD",
           "shipped_policy"]  # fmt: skip

#: the three answers, in the order of the table's documentation
ADVICE = ("stop", "continue", "too early", "uncertain")
DEFAULT_DELTA_BAD = 0.1


def shipped_policy(kind: str = "oscillator", delta: float = DEFAULT_DELTA) -> dict:
    """The ``policy`` entry of the packaged decision data of ``kind`` at ``delta``
    (:func:`bayesgrpo.forecast.decision.shipped_decision`): the score it thresholds, ``patience``,
    ``min_fraction``, ``delta_bad``, the thresholds per patience and risk, and what was ``measured``;
    ``{}`` when the kind ships none."""
    entry = shipped_decision(kind, delta)
    if entry is None:
        return {}
    return {**entry["policy"], "measured": entry.get("measured", {}), "provenance": entry.get("provenance", {})}


class StopPolicy(BaseModel):
    """Stop / continue / too early from the decision probability of each forecast (module docstring).

    Parameters
    ----------
    risk : float
        The largest share of stops allowed to lose more than ``delta_bad`` of the run's range.
    delta : float
        The gain worth continuing for, in units of the run's scale (``p_gain``'s delta).
    delta_bad : float
        A stop losing more than this share of the run's reward range is bad.
    patience : int, optional
        Consecutive forecasts the condition must hold for (default: the shipped one).
    min_fraction : float, optional
        Observed share of the run before which the answer is ``too early`` (default: the shipped one).
    threshold : float, optional
        Stop when the score (:meth:`score`) is below it; default: the shipped threshold for ``risk`` and
        ``patience``. An explicit threshold has no measured error rate.
    score_on : {"shipped", "p_gain"}
        What the threshold applies to: the shipped policy's score (``p_gain``, or the model's probability
        calibrated to the bad-stop outcome when that is what was measured best), or ``p_gain`` itself.
    kind : str
        The model kind whose shipped thresholds apply.

    Raises
    ------
    ValueError
        No shipped threshold for the kind, or ``risk`` below every measured operating point.

    Examples
    --------
    >>> policy = StopPolicy(risk=0.1, threshold=0.3, patience=2, min_fraction=0.1)
    >>> policy.advice(0.2, fraction=0.5), policy.advice(0.6, fraction=0.5), policy.advice(0.2, fraction=0.05)
    ('stop', 'continue', 'too early')
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    risk: float = Field(DEFAULT_RISK, gt=0.0, lt=1.0)
    delta: float = Field(DEFAULT_DELTA, gt=0.0)
    delta_bad: float = Field(DEFAULT_DELTA_BAD, gt=0.0)
    patience: int | None = Field(None, ge=1)
    min_fraction: float | None = Field(None, ge=0.0, lt=1.0)
    threshold: float | None = Field(None, ge=0.0, le=1.0)
    score_on: Literal["shipped", "p_gain"] = "shipped"
    kind: str = DEFAULT_KIND
    _score: tuple | None = PrivateAttr(default=None)
    _error: float = PrivateAttr(default=float("nan"))

    @model_validator(mode="after")
    def _resolve(self):
        explicit = self.threshold is not None and self.patience is not None and self.min_fraction is not None
        try:
            ship = shipped_policy(self.kind, self.delta)
        except ValueError:
            if not explicit:
                raise
            ship = {}
        score = (ship.get("score") or {}).get("calibration") if self.score_on == "shipped" else None
        self._score = (ship["score"]["input"], DecisionCalibration.model_validate(score)) if score else None
        if explicit:
            return self
        if not ship:
            raise ValueError(f"no stop thresholds ship for model kind {self.kind!r}; give threshold=, patience= "
                             "and min_fraction= (their error rate is then unmeasured)")  # fmt: skip
        upd: dict[str, float | int] = {}
        if self.patience is None:
            upd["patience"] = int(ship["patience"])
        if self.min_fraction is None:
            upd["min_fraction"] = float(ship["min_fraction"])
        if self.threshold is None:
            pat = int(upd.get("patience", self.patience or 1))
            upd["threshold"] = self._shipped_threshold(ship, pat)
            self._error = self._measured_error(ship, pat)
        for k, v in upd.items():
            object.__setattr__(self, k, v)
        return self

    def _measured_error(self, ship: dict, patience: int) -> float:
        """The bad-stop share measured for this risk and patience: leave-one-source-out (nested) where the
        study measured it (the shipped risk), else the in-sample share of the risk table, interpolated."""
        loso = ship.get("measured", {}).get(f"patience_{patience}", {})
        if loso and math.isclose(self.risk, float(loso["risk"])):
            return float(loso["bad_stops"])
        table = [e for e in ship["thresholds"][str(patience)] if e[1] is not None]
        return float(np.interp(self.risk, [e[0] for e in table], [e[2] for e in table]))

    @property
    def measured(self) -> str:
        """What the error rate is and where it was measured, one phrase (every front end prints this one):
        ``"measured on the locked test (...): 19% of its stops were bad (90%: 8-35%)"``."""
        if not math.isfinite(self._error):
            return "error rate unmeasured (an explicit threshold)"
        m = shipped_policy(self.kind, self.delta).get("measured", {}).get(f"patience_{self.patience}", {})
        ci = m.get("bad_stops_90")
        ci_txt = f" (90% interval {ci[0]:.0%}-{ci[1]:.0%})" if ci else ""
        where = m.get("where", "leave-one-source-out on the development runs")
        exact = m and math.isclose(self.risk, float(m.get("risk", -1)))
        if not exact:
            where = "in sample on the development runs, interpolated to this risk"
        share = f"{self._error:.0%} of its stops were bad"
        if exact and "stops" in m:  # the count: "0% bad" of 3 stops is not "0% bad" of 300
            share = f"{self._error:.0%} of its stops were bad ({m['bad']} of {m['stops']})"
        return f"measured: {share}{ci_txt if exact else ''} ({where})"

    @property
    def error_rate(self) -> float:
        """The measured share of this policy's stops that were bad (the larger of per run and source-weighted;
        NaN for an explicit threshold: unmeasured)."""
        return self._error

    def _shipped_threshold(self, ship: dict, patience: int) -> float:
        if not math.isclose(self.delta_bad, float(ship["delta_bad"])):
            raise ValueError(f"the shipped thresholds were measured for delta_bad={ship['delta_bad']:g}, not "
                             f"{self.delta_bad:g}; give threshold= for another one (its error rate is then "
                             "unmeasured)")  # fmt: skip
        table = ship["thresholds"].get(str(patience))
        if not table:
            raise ValueError(f"no shipped threshold for patience {patience}; measured: {', '.join(ship['thresholds'])}")
        risks = np.array([e[0] for e in table], dtype=float)
        thr = np.array([e[1] if e[1] is not None else np.nan for e in table], dtype=float)
        ok = np.isfinite(thr)
        if not ok.any() or self.risk < risks[ok].min() - 1e-12:
            lo = f"{risks[ok].min():g}" if ok.any() else "none"
            raise ValueError(f"risk {self.risk:g} is below every measured operating point (smallest risk met: {lo}) "
                             f"for patience {patience}")  # fmt: skip
        return float(np.interp(self.risk, risks[ok], thr[ok]))

    def score(self, numbers: dict):
        """The probability the policy thresholds, from a forecast's decision numbers
        (:func:`bayesgrpo.forecast.decision.decision_probabilities`, or the same columns of backtest cases):
        ``p_gain`` itself, or -- when the shipped policy was calibrated to the bad-stop outcome -- its own
        map of the model's raw probability. Numbers or arrays."""
        if self._score is None:
            return numbers["p_gain"]
        col, cal = self._score
        return cal.apply(numbers[col], fraction=numbers["fraction"], **{c: numbers[c] for c in cal.covariates})

    def advise(self, numbers: dict | None, *, status: str = "ok") -> str:
        """:meth:`advice` of one forecast's decision numbers (None: none were computed, ``too early``); a forecast
        whose sampler health is poor (``status`` ``warning``: its chains disagree, its numbers are in doubt) is
        ``uncertain`` -- no advice to act on, in every front end."""
        if status == "warning":
            return "uncertain"
        if numbers is None:
            return "too early"
        return self.advice(float(np.asarray(self.score(numbers))), fraction=float(numbers["fraction"]))

    def advice(self, p_gain: float, *, fraction: float) -> str:
        """The answer for one forecast: ``too early`` before ``min_fraction`` or without a probability,
        ``stop`` when ``p_gain < threshold``, else ``continue``; ``uncertain`` for a stop past the observed
        fractions where the shipped advice was validated (:attr:`validated_until`)."""
        start, threshold = self.min_fraction, self.threshold  # resolved by the validator: never None here
        assert start is not None and threshold is not None
        if not (np.isfinite(p_gain) and np.isfinite(fraction)) or fraction < start:
            return "too early"
        if p_gain >= threshold:
            return "continue"
        # a stop where the error rate was never measured (beyond the validated fractions) is not a stop
        return "uncertain" if fraction > self.validated_until + 1e-9 else "stop"

    @property
    def validated_until(self) -> float:
        """The largest observed fraction at which the shipped advice's error rate was measured (1.0 when the
        shipped policy does not say: measured along whole runs; 1.0 for an explicit threshold: the user's own
        rule, measured nowhere)."""
        if not math.isfinite(self._error):
            return 1.0
        try:
            v = shipped_policy(self.kind, self.delta).get("validated_fractions")
        except ValueError:
            v = None
        return float(v[1]) if v else 1.0

    def monitor(self) -> StopMonitor:
        """A fresh :class:`StopMonitor` (the patience counter of one run)."""
        return StopMonitor(self)

    def describe(self) -> str:
        what = f"P(final >= level + {self.delta:g} x scale)"
        if self._score is not None:  # the shipped score: the model's probability on the policy's own map
            what = (f"P(stopping now loses more than {self.delta_bad:g} of the run's range) (the forecast's {what} "
                    "calibrated to that outcome)")  # fmt: skip
        return (f"stop when {what} < {self.threshold:.3f} at {self.patience} "
                f"consecutive forecast(s) after {self.min_fraction:.0%} of the run (risk {self.risk:g}: at most that "
                f"share of stops lose more than {self.delta_bad:g} of the run's range)")  # fmt: skip


class StopMonitor:
    """The policy applied to one run's successive forecasts: counts consecutive ``stop`` answers.

    ``update(p_gain, fraction=...)`` returns the answer of that forecast and sets :attr:`fired` once the
    count reaches the policy's patience (it stays set). Any other answer resets the count.
    """

    def __init__(self, policy: StopPolicy):
        self.policy = policy
        self.count = 0
        self.fired = False

    def update(self, p_gain: float, *, fraction: float) -> str:
        a = self.policy.advice(p_gain, fraction=fraction)
        self.count = self.count + 1 if a == "stop" else 0
        if self.count >= (self.policy.patience or 1):
            self.fired = True
        return a

    def observe(self, numbers: dict) -> str:
        """:meth:`update` from a forecast's decision numbers (:meth:`StopPolicy.score`)."""
        return self.update(float(np.asarray(self.policy.score(numbers))), fraction=float(numbers["fraction"]))

    def state(self) -> dict:
        return {"count": self.count, "fired": self.fired}

    def restore(self, state: dict) -> None:
        self.count, self.fired = int(state.get("count", 0)), bool(state.get("fired", False))


def add_advice(table: pd.DataFrame, policy: StopPolicy | None = None, *, numbers: dict) -> pd.DataFrame:
    """The forecast table with ``advice``, ``advice_error_rate`` (the share of the policy's stops measured to
    be bad, on rows whose advice is ``stop``) and ``advice_score`` (the number the advice thresholds) columns
    (a new frame; the input is not changed).

    The one function every front end calls. ``numbers`` maps run id -> that forecast's decision numbers
    (:func:`bayesgrpo.forecast.decision.decision_probabilities`). A forecast row (``status`` ``ok`` or
    ``warning``) without numbers is ``too early``; a ``warning`` row (poor sampler health: its numbers are in
    doubt) is ``uncertain``; a row that is no forecast (``complete``, ``error``, ``interrupted``) gets no advice
    (empty).
    """
    policy = policy or StopPolicy()
    out = table.copy()
    status = out["status"] if "status" in out else pd.Series("ok", index=out.index)
    forecast = status.isin(["ok", "warning"]).to_numpy()
    out["advice"] = [policy.advise(numbers.get(r), status=s) if good else ""
                     for r, good, s in zip(out["run_id"], forecast, status, strict=True)]  # fmt: skip
    out["advice_error_rate"] = np.where(out["advice"] == "stop", policy.error_rate, np.nan)
    # the number the advice thresholds (the policy's score: p_gain, or its own map of it)
    out["advice_score"] = [float(np.asarray(policy.score(numbers[r]))) if good and r in numbers else np.nan
                           for r, good in zip(out["run_id"], forecast, strict=True)]  # fmt: skip
    return out


def policy_from_options(kind: str, *, risk: float, delta: float) -> StopPolicy | None:
    """The stop policy of the ``--risk`` / ``--delta`` options for model kind ``kind`` (every front end's one
    check): :class:`~bayesgrpo.errors.OptionError` naming the option for a value outside what was measured;
    None for a kind whose stop advice was never measured."""
    from pydantic import ValidationError

    from bayesgrpo.errors import OptionError
    from bayesgrpo.forecast.decision import measured_deltas

    if not 0.0 < risk < 1.0:
        raise OptionError(f"--risk must lie in (0, 1), got {risk:g}")
    if not delta > 0.0:
        raise OptionError(f"--delta must be > 0, got {delta:g}")
    deltas = measured_deltas(kind)
    if not deltas:
        return None
    if not any(abs(delta - d) < 1e-12 for d in deltas):
        raise OptionError(f"--delta {delta:g}: p_gain's recalibration and the stop advice were measured for delta "
                          f"{', '.join(f'{d:g}' for d in sorted(deltas))} only; choose one of them")  # fmt: skip
    try:
        return StopPolicy(risk=risk, delta=delta, kind=kind)
    except ValidationError as e:  # the policy's own check of the risk against the measured operating points
        raise OptionError(
            f"--risk {risk:g}: {e.errors()[0].get('ctx', {}).get('error') or e.errors()[0]['msg']}"
        ) from None


def fit_decision_numbers(fit, policy: StopPolicy) -> dict:
    """Run id -> the decision numbers of each forecast run of ``fit`` at the policy's delta
    (:meth:`~bayesgrpo.forecast.FittedForecast.decision_numbers`: the fit's own p_gain map, the numbers its
    table's ``p_gain`` was computed from)."""
    return {rid: fit.decision_numbers(rid, delta=policy.delta) for rid in fit.forecast_ids}


def advise_fit(table: pd.DataFrame, fit, policy: StopPolicy | None = None) -> tuple[pd.DataFrame, dict]:
    """:func:`add_advice` for a fitted forecast: the table with ``advice`` and ``advice_error_rate``, and the
    decision numbers it was judged on (run id -> :func:`fit_decision_numbers`). ``fit`` None (no run could be
    forecast): every row ``too early``."""
    policy = policy or StopPolicy()
    numbers = fit_decision_numbers(fit, policy) if fit is not None else {}
    return add_advice(table, policy, numbers=numbers), numbers


def sweep_stop_table(runs: list[dict], *, interval: float = 0.9, cost_per_hour: float | None = None
                     ) -> tuple[pd.DataFrame, dict]:  # fmt: skip
    """Which runs of a sweep to stop now, what that saves and what it may cost.

    ``runs``: one dict per run with ``run_id``, ``advice``, ``last_step``, ``horizon``, ``level`` (the current
    level), ``scale`` and ``final_draws`` (the forecast's final-reward draws), and optionally ``steps_per_hour``
    (then the summary says the hours stopping now saves, and with ``cost_per_hour`` their cost). Per run: the remaining steps
    and, for a run advised to stop, the reward lost by stopping now, ``final - level`` (its posterior mean
    and central ``interval``; negative: the forecast expects the run to lose reward by going on).

    Returns
    -------
    (DataFrame, dict)
        One row per run (``run_id, advice, remaining_steps, lost_mean, lost_lo, lost_hi``, in run units)
        and the sweep's summary: runs stopped, ``share_of_remaining_steps_saved`` (steps of the stopped runs
        over the remaining steps of all runs), ``lost_scale_mean`` / ``lost_scale_lo`` / ``lost_scale_hi``
        (the mean over stopped runs of the reward lost in units of each run's scale, with its interval:
        runs may log rewards in different units).
    """
    lo_q, hi_q = (1.0 - interval) / 2.0, (1.0 + interval) / 2.0
    rows, norm = [], []
    rng = np.random.default_rng(0)
    n = min((len(r["final_draws"]) for r in runs), default=0)
    for r in runs:
        rem = max(0, int(r["horizon"]) - int(r["last_step"]))
        row = dict(run_id=r["run_id"], advice=r["advice"], remaining_steps=rem, lost_mean=np.nan, lost_lo=np.nan,
                   lost_hi=np.nan)  # fmt: skip
        if r["advice"] == "stop":
            x = np.asarray(r["final_draws"], dtype=float) - float(r["level"])
            row.update(
                lost_mean=float(x.mean()), lost_lo=float(np.quantile(x, lo_q)), lost_hi=float(np.quantile(x, hi_q))
            )
            if n:  # independent runs: a random subset of each run's draws, summed draw by draw
                norm.append(rng.choice(x, size=n, replace=False) / float(r["scale"]))
        rows.append(row)
    table = pd.DataFrame(rows, columns=["run_id", "advice", "remaining_steps", "lost_mean", "lost_lo", "lost_hi"])
    total = float(table["remaining_steps"].sum())
    stopped = table["advice"] == "stop"
    saved = float(table.loc[stopped, "remaining_steps"].sum() / total) if total else 0.0
    summary: dict = dict(runs=int(len(table)), stopped=int(stopped.sum()), share_of_remaining_steps_saved=saved)
    rate = {r["run_id"]: r.get("steps_per_hour") for r in runs}
    if stopped.any() and all(rate[r] for r in table.loc[stopped, "run_id"]):  # the hours are the stopped runs' steps
        hours = float(sum(n / rate[r] for r, n in zip(table.loc[stopped, "run_id"], table.loc[stopped, "remaining_steps"],
                                                       strict=True)))  # fmt: skip
        summary.update(hours_saved=hours, cost_saved=hours * cost_per_hour if cost_per_hour is not None else None)
    if norm:
        m = np.mean(norm, axis=0)
        summary.update(lost_scale_mean=float(m.mean()), lost_scale_lo=float(np.quantile(m, lo_q)),
                       lost_scale_hi=float(np.quantile(m, hi_q)))  # fmt: skip
    return table, summary
