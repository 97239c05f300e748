"""Backtests of the stop decision on each method's forecasts, against an oracle (issue 18); what
``bayesgrpo backtest`` reports of the shipped stop policy on a user's own complete runs
(:func:`policy_characteristic`).

From backtest cases at successive checkpoints of complete runs (:func:`bayesgrpo.evaluation.backtest.backtest`
with many cutoffs), :func:`decision_cases` computes, per run x checkpoint x method, what the decision
rests on and what happened:

* ``level`` -- the current level at the checkpoint (:func:`bayesgrpo.series.current_level` of the prefix);
  ``scale`` -- the forecast's normalising scale of the prefix (:attr:`~bayesgrpo.models.arrays.RunInfo.scale`);
* ``p_gain_raw`` -- the method's P(final >= level + delta x scale), from its final-reward draws (or,
  for ledgers without draws, its quantiles linearly interpolated);
* ``p_improve_raw`` -- P(final >= best so far + improve_delta x scale), ``best so far`` the best mean of
  5 consecutive logged rewards (:func:`bayesgrpo.series.best_window_mean`): the probability
  ``ImprovementStop`` thresholds;
* ``event`` -- the final reward did reach ``level + delta x scale``; ``gain`` -- ``(final - level) /
  range`` (``range`` = the complete run's robust range); ``bad`` -- ``gain > delta_bad``: stopping here
  would have been a bad stop;
* the covariates a recalibration map may use (:func:`bayesgrpo.forecast.decision.decision_covariates`:
  ``level_se``, ``trend``, ``logit_plateaued``).

:func:`policy_backtest` runs a :class:`~bayesgrpo.decisions.stop.StopPolicy` through each run's
checkpoints in order, as it would run live (patience included), and scores where it stopped:

* ``steps_saved`` -- share of the remaining span ``(H - stop) / (H - s0)`` (0 if never stopped);
* ``reward_lost`` -- ``max(0, final - level at the stop) / range``; a **bad stop** loses more than
  ``delta_bad`` (0.1) of the range.

The **oracle** knows the outcome: it stops at the first checkpoint whose true remaining gain
``final - level`` is below ``delta x range``. :func:`summarize_stops` aggregates per run or with each
source weighing the same. How the shipped thresholds were chosen (the operating curve as the threshold
moves, the risk thresholds read off it, the reliability of the probabilities and its noise floor) is
research that only the stop study runs: ``bench/stop_rule.py``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from bayesgrpo.conventions import QUANTILES
from bayesgrpo.decisions.stop import DEFAULT_DELTA_BAD, StopPolicy
from bayesgrpo.forecast.decision import DEFAULT_DELTA, decision_covariates, gain_threshold, prob_at_least
from bayesgrpo.schema import REWARD, STEP, RunSet
from bayesgrpo.series import best_window_mean, current_level

__all__ = [
    "decision_cases",
    "policy_backtest",
    "summarize_stops",
    "policy_characteristic",
    "case_scale",
    "quantile_prob_at_least",
    "ORACLE",
]

ORACLE = "oracle"
IMPROVE_WINDOW = 5  # ImprovementStop's "best so far": the best mean of 5 consecutive logged rewards
_QCOLS = [f"q{round(q * 100):02d}" for q in QUANTILES]


def quantile_prob_at_least(row, threshold: float) -> float:
    """P(X >= threshold) from a case's quantiles ``q05..q95`` (linear between them, flat tails)."""
    q = np.array([row[c] for c in _QCOLS], dtype=float)
    if not np.all(np.isfinite(q)):
        return float("nan")
    levels = np.array(QUANTILES)
    q = np.maximum.accumulate(q)
    if threshold <= q[0]:
        return float(1.0 - levels[0] * (threshold >= q[0]))
    if threshold >= q[-1]:
        return float(1.0 - levels[-1]) if threshold == q[-1] else 0.0
    return float(1.0 - np.interp(threshold, q, levels))


def case_scale(runs: RunSet, run_id: str, until: int, horizon: int) -> float:
    """The normalising scale a forecast of the prefix up to ``until`` uses (``RunInfo.scale``, run units)."""
    from bayesgrpo.models.arrays import prepare_arrays

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant prefixes warn; their scale is what is wanted
        _, infos = prepare_arrays(runs.select([run_id]).truncate(until_step=int(until)), horizon=int(horizon))
    return float(infos[0].scale)


def decision_cases(
    cases: pd.DataFrame,
    runs: RunSet,
    *,
    draws: dict | None = None,
    delta: float = DEFAULT_DELTA,
    delta_bad: float = DEFAULT_DELTA_BAD,
    improve_delta: float = 0.0,
) -> pd.DataFrame:
    """One row per scored case (run x checkpoint x method) with the decision's inputs and outcome
    (module docstring). ``draws``: ``{"run|cutoff|method": final-reward draws}`` (a backtest's
    ``draws.npz``); cases without draws use their quantiles."""
    ok = cases[cases["ok"].astype(bool)].copy()
    prefix: dict = {}
    rows = []
    for r in ok.itertuples(index=False):
        key = (r.run_id, int(r.observed_until))
        if key not in prefix:
            df = runs.run(r.run_id)
            y = df.loc[df[STEP] <= r.observed_until, REWARD].to_numpy(float)
            sc = getattr(r, "scale", np.nan)
            if not np.isfinite(sc):
                sc = case_scale(runs, r.run_id, r.observed_until, r.horizon)
            prefix[key] = (current_level(y), float(sc), y, best_window_mean(y, IMPROVE_WINDOW))
        level, scale, y, best = prefix[key]
        pp = float(getattr(r, "p_plateaued", np.nan))
        cov = decision_covariates(y, scale=scale, p_plateaued=pp)
        thr = gain_threshold(level, scale, delta)
        x = None if draws is None else draws.get(f"{r.run_id}|{r.cutoff:g}|{r.method}")
        qrow = r._asdict() if x is None else None

        def at_least(t, x=x, qrow=qrow):
            return prob_at_least(x, t) if x is not None else quantile_prob_at_least(qrow, t)

        p = at_least(thr)
        gain = (r.truth - level) / r.range
        rows.append(dict(run_id=r.run_id, source=r.source, method=r.method, cutoff=float(r.cutoff),
                         observed_until=int(r.observed_until), s0=int(r.s0), horizon=int(r.horizon),
                         fraction=(r.observed_until - r.s0) / max(1, r.horizon - r.s0), truth=float(r.truth),
                         range=float(r.range), level=level, scale=scale, p_gain_raw=p, event=float(r.truth >= thr),
                         p_improve_raw=at_least(best + improve_delta * scale),
                         gain=gain, bad=float(gain > delta_bad), p_plateaued=pp,
                         **cov))  # fmt: skip
    return pd.DataFrame(rows)


def _stop_row(first, m, stop) -> dict:
    if stop is None:
        return dict(run_id=first.run_id, source=first.source, method=m, stopped=False, stop_cutoff=np.nan,
                    steps_saved=0.0, reward_lost=0.0, bad_stop=False)  # fmt: skip
    lost = max(0.0, float(stop.gain))
    return dict(run_id=first.run_id, source=first.source, method=m, stopped=True, stop_cutoff=float(stop.cutoff),
                steps_saved=(stop.horizon - stop.observed_until) / max(1, stop.horizon - stop.s0), reward_lost=lost,
                bad_stop=lost > first.delta_bad)  # fmt: skip


def policy_backtest(
    dec: pd.DataFrame, policy: StopPolicy, *, p: str = "p_gain", cutoffs=None, oracle: bool = True
) -> pd.DataFrame:
    """Run ``policy`` through each run's checkpoints in order (module docstring); one row per run x method
    (plus the oracle): ``stopped, stop_cutoff, steps_saved, reward_lost, bad_stop``.

    ``p`` names the probability column the policy reads; ``cutoffs`` restricts the checkpoints the
    policy sees (e.g. the four of the forecast table's rule). A checkpoint a method could not forecast
    resets the patience count.
    """
    d = dec if cutoffs is None else dec[dec["cutoff"].round(6).isin([round(c, 6) for c in cutoffs])]
    d = d.assign(delta_bad=policy.delta_bad, p_policy=d[p]).sort_values(["run_id", "method", "cutoff"])
    grid = sorted(d["cutoff"].unique())
    out = []
    for _, g in d.groupby("run_id", sort=True):
        first = g.iloc[0]
        for m, gm in g.groupby("method", sort=True):
            mon, stop = policy.monitor(), None
            by_c = dict(zip(gm["cutoff"], gm.itertuples(index=False), strict=True))
            for c in grid:
                r = by_c.get(c)
                if r is None:
                    mon.count = 0
                    continue
                mon.update(r.p_policy, fraction=r.fraction)
                if mon.fired:
                    stop = r
                    break
            out.append(_stop_row(first, m, stop))
        if oracle:
            one = g[g["method"] == g["method"].iloc[0]].sort_values("cutoff")
            hit = one[one["gain"] < policy.delta]
            out.append(_stop_row(first, ORACLE, next(hit.itertuples(index=False)) if len(hit) else None))
    return pd.DataFrame(out)


def summarize_stops(stops: pd.DataFrame, *, weighted: bool = False) -> pd.DataFrame:
    """Per method: share of runs stopped, mean share of steps saved, share of stops that were bad, mean
    reward lost (per run; share of the run's range) -- per run, or each source weighing the same."""
    rows = []
    for m, g in stops.groupby("method"):
        w = (1.0 / g.groupby("source")["run_id"].transform("count")).to_numpy() if weighted else np.ones(len(g))
        st = g["stopped"].to_numpy(bool)
        rows.append(dict(method=m, runs=len(g), stopped=float(np.average(st, weights=w)),
                         steps_saved=float(np.average(g["steps_saved"], weights=w)),
                         bad_stops=float(np.average(g.loc[st, "bad_stop"], weights=w[st])) if st.any() else 0.0,
                         reward_lost=float(np.average(g["reward_lost"], weights=w))))  # fmt: skip
    return pd.DataFrame(rows)


def policy_characteristic(
    cases: pd.DataFrame,
    runs: RunSet,
    policy: StopPolicy,
    *,
    draws: dict | None = None,
    method: str = "bayesgrpo",
    calibration=None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The shipped policy on a user's own completed runs: one method's backtest cases (its checkpoints in
    order), scored by the policy's own score (the shipped maps, as a live forecast computes it) with
    its patience, against the oracle. ``calibration``: the p_gain map (default: the packaged one of the
    policy's kind and delta). Returns ``(stops per run, summary per method and weighting)`` --
    ``stopped, steps_saved, bad_stops, reward_lost`` per run and source-weighted."""
    from bayesgrpo.forecast.decision import DecisionCalibration

    dec = decision_cases(cases[cases["method"] == method], runs, draws=draws, delta=policy.delta,
                         delta_bad=policy.delta_bad)  # fmt: skip
    if dec.empty:
        return pd.DataFrame(), pd.DataFrame()
    cal = calibration if calibration is not None else DecisionCalibration.default(policy.kind, policy.delta)
    cols = {c: dec[c].to_numpy() for c in dec.columns}
    cols["p_gain"] = cal.apply(dec["p_gain_raw"].to_numpy(), fraction=dec["fraction"].to_numpy(),
                               **{c: dec[c].to_numpy() for c in cal.covariates})  # fmt: skip
    dec = dec.assign(p_gain=cols["p_gain"], p_policy=np.asarray(policy.score(cols), dtype=float))
    stops = policy_backtest(dec, policy, p="p_policy")
    summary = pd.concat([summarize_stops(stops, weighted=w).assign(weighting="source-weighted" if w else "per run")
                         for w in (False, True)], ignore_index=True)  # fmt: skip
    return stops, summary
