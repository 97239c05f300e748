"""Backtest of the question users ask: stop or continue? A stop rule applied to each method's forecasts.

The rule (per run, at checkpoints = the backtest's cutoffs, in order): **stop** at the first checkpoint
where

    P(final reward >= current level + delta * scale) < epsilon

``current level`` = mean of the last 10% of the logged points so far (at least 3), ``scale`` = the
run's reward scale known at that moment (the full range of the rewards logged so far, at least a
quarter of a known 0-1 range -- the normalising scale of :mod:`bayesgrpo.models.arrays`); the
probability comes from the method's forecast of the final reward (its quantiles, linearly
interpolated). Scored against what the complete run did:

* ``steps_saved`` -- share of the remaining span ``(H - stop) / (H - s0)`` (0 if never stopped);
* ``reward_lost`` -- (final reward - level at the stop) / the run's reward range, floored at 0;
* a **bad stop** loses more than ``bad`` (0.1) of the range.

The **oracle** knows the outcome: it stops at the first checkpoint whose true remaining gain
``final - level`` is below ``delta * range``. Methods are compared on the same runs and checkpoints.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesgrpo.conventions import QUANTILES
from bayesgrpo.plan import is_unit_interval
from bayesgrpo.schema import REWARD, STEP, RunSet

__all__ = ["stop_rule_backtest", "summarize_stops", "prob_at_least"]

_QCOLS = [f"q{round(q * 100):02d}" for q in QUANTILES]


def prob_at_least(row, threshold: float) -> float:
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


def _level_and_scale(df: pd.DataFrame, upto: int) -> tuple[float, float]:
    pre = df.loc[df[STEP] <= upto, REWARD].to_numpy(float)
    k = max(3, int(np.ceil(0.1 * pre.size)))
    level = float(np.mean(pre[-k:]))
    rng = float(np.ptp(pre))
    if is_unit_interval(pre):
        rng = max(rng, 0.25)
    return level, max(rng, 1e-9)


def stop_rule_backtest(
    cases: pd.DataFrame, runs: RunSet, *, delta: float = 0.05, epsilon: float = 0.2, bad: float = 0.1
) -> pd.DataFrame:
    """Apply the rule (module docstring) to every method of backtest ``cases``; one row per run x method.

    ``cases`` are backtest rows (``run_id, cutoff, method, observed_until, s0, horizon, truth, range``
    and the quantiles); ``runs`` the complete runs. The oracle appears as method ``"oracle"``.
    """
    ok = cases[cases["ok"].astype(bool)]
    out = []
    for rid, g in ok.groupby("run_id"):
        df = runs.run(rid)
        first = g.iloc[0]
        truth, rng_, s0, H = float(first["truth"]), float(first["range"]), int(first["s0"]), int(first["horizon"])
        cuts = sorted(g["cutoff"].unique())
        levels = {}
        for c in cuts:
            upto = int(g.loc[g["cutoff"] == c, "observed_until"].iloc[0])
            levels[c] = (upto, *_level_and_scale(df, upto))
        methods = list(g["method"].unique()) + ["oracle"]
        for m in methods:
            stop_c = None
            for c in cuts:
                upto, level, scale = levels[c]
                if m == "oracle":
                    fire = truth - level < delta * rng_
                else:
                    row = g[(g["method"] == m) & (g["cutoff"] == c)]
                    if row.empty:
                        continue
                    p = prob_at_least(row.iloc[0], level + delta * scale)
                    fire = np.isfinite(p) and p < epsilon
                if fire:
                    stop_c = c
                    break
            if stop_c is None:
                out.append(dict(run_id=rid, source=first["source"], method=m, stopped=False, stop_cutoff=np.nan,
                                steps_saved=0.0, reward_lost=0.0, bad_stop=False))  # fmt: skip
                continue
            upto, level, _ = levels[stop_c]
            lost = max(0.0, (truth - level) / rng_)
            out.append(dict(run_id=rid, source=first["source"], method=m, stopped=True, stop_cutoff=stop_c,
                            steps_saved=(H - upto) / max(1, H - s0), reward_lost=lost, bad_stop=lost > bad))  # fmt: skip
    return pd.DataFrame(out)


def summarize_stops(stops: pd.DataFrame, *, weighted: bool = False) -> pd.DataFrame:
    """Per method: share of runs stopped, mean share of steps saved, share of stops that were bad,
    mean reward lost -- per run, or each source weighing the same (``weighted``)."""
    rows = []
    for m, g in stops.groupby("method"):
        w = (1.0 / g.groupby("source")["run_id"].transform("count")).to_numpy() if weighted else np.ones(len(g))
        st = g["stopped"].to_numpy(bool)
        rows.append(dict(method=m, runs=len(g), stopped=float(np.average(st, weights=w)),
                         steps_saved=float(np.average(g["steps_saved"], weights=w)),
                         bad_stops=float(np.average(g.loc[st, "bad_stop"], weights=w[st])) if st.any() else 0.0,
                         reward_lost=float(np.average(g["reward_lost"], weights=w))))  # fmt: skip
    return pd.DataFrame(rows)
