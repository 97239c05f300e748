"""Backtests of the stop decision on each method's forecasts, against an oracle (issue 18).

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
source weighing the same; :func:`operating_curve` sweeps the threshold; :func:`risk_thresholds` reads
off the largest threshold whose bad-stop share met each risk (how the shipped thresholds are chosen);
:func:`reliability` and :func:`prob_scores` check the probabilities themselves.
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
    "threshold_cases",
    "policy_backtest",
    "summarize_stops",
    "operating_curve",
    "risk_thresholds",
    "risk_index",
    "checkpoint_sequences",
    "sweep",
    "reliability",
    "prob_scores",
    "case_scale",
    "quantile_prob_at_least",
    "stop_rule_backtest",
    "policy_characteristic",
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


def threshold_cases(dec: pd.DataFrame, draws: dict, ks=(-0.1, 0.1, 0.25)) -> pd.DataFrame:
    """P(final >= level + k x scale) and its outcome for several ``k`` (the reliability of "P(final >=
    target)" at targets below and above the current level): long format, one row per case x k."""
    out = []
    for r in dec.itertuples(index=False):
        x = draws.get(f"{r.run_id}|{r.cutoff:g}|{r.method}")
        if x is None:
            continue
        for k in ks:
            t = gain_threshold(r.level, r.scale, k)
            out.append(dict(run_id=r.run_id, source=r.source, method=r.method, cutoff=r.cutoff, fraction=r.fraction,
                            k=float(k), p_raw=prob_at_least(x, t), event=float(r.truth >= t)))  # fmt: skip
    return pd.DataFrame(out)


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


def checkpoint_sequences(dec: pd.DataFrame, p: str, cutoffs=None) -> dict:
    """Per run x method, the checkpoint sequences on one grid (arrays ``(sequences, checkpoints)``):
    probability ``p``, fraction ``f``, steps ``saved`` and ``gain`` if stopped there (NaN where the method
    has no forecast), and per sequence its ``source``, ``method``, ``run_id`` and source weight ``w_src``
    (1 / the runs of its source and method). :func:`sweep` evaluates a policy on them."""
    d = dec if cutoffs is None else dec[dec["cutoff"].round(6).isin([round(c, 6) for c in cutoffs])]
    grid = np.array(sorted(d["cutoff"].unique()))
    rid, meth = d["run_id"].to_numpy(), d["method"].to_numpy()
    keys, row = np.unique(np.char.add(np.char.add(rid.astype(str), "\x00"), meth.astype(str)), return_inverse=True)
    S, C = keys.size, grid.size
    mats = {n: np.full((S, C), np.nan) for n in ("p", "f", "saved", "gain")}
    col = np.searchsorted(grid, d["cutoff"].to_numpy())
    mats["p"][row, col] = d[p].to_numpy(float)
    mats["f"][row, col] = d["fraction"].to_numpy(float)
    mats["saved"][row, col] = ((d["horizon"] - d["observed_until"]) / np.maximum(1, d["horizon"] - d["s0"])).to_numpy()
    mats["gain"][row, col] = d["gain"].to_numpy(float)
    first = np.unique(row, return_index=True)[1]
    for n, v in (("source", d["source"].to_numpy()), ("method", meth), ("run_id", rid)):
        mats[n] = v[first]
    pair = np.char.add(np.char.add(mats["method"].astype(str), "\x00"), mats["source"].astype(str))
    _, inv, cnt = np.unique(pair, return_inverse=True, return_counts=True)
    mats["w_src"] = 1.0 / cnt[inv]
    return mats


def _fire_level(p, f, *, patience: int, min_fraction: float) -> np.ndarray:
    """Per sequence and checkpoint, the largest probability among the last ``patience`` checkpoints (inf
    where one is missing or too early): the policy with threshold t fires at the first checkpoint whose
    level is below t -- the exact patience recursion of :class:`~bayesgrpo.decisions.stop.StopMonitor`."""
    v = np.where(np.isfinite(p) & np.isfinite(f) & (f >= min_fraction), p, np.inf)
    out = v.copy()
    for k in range(1, patience):
        sh = np.full_like(v, np.inf)
        sh[:, k:] = v[:, :-k]
        out = np.maximum(out, sh)
    return out


def sweep(m: dict, thresholds, *, patience: int, min_fraction: float, delta_bad: float = DEFAULT_DELTA_BAD) -> dict:
    """The policy at every threshold at once on :func:`checkpoint_sequences`: per method, arrays over the
    thresholds of ``stopped, steps_saved, bad_stops, reward_lost`` per run and source-weighted (suffix
    ``_w``), and ``n_stops`` (runs stopped)."""
    lev = _fire_level(m["p"], m["f"], patience=patience, min_fraction=min_fraction)
    first_ok = np.minimum.accumulate(lev, axis=1)  # non-increasing: fired by checkpoint j iff first_ok[j] < t
    t = np.asarray(list(thresholds), dtype=float)
    S, C = first_ok.shape
    j = (first_ok[:, :, None] >= t[None, None, :]).sum(axis=1)  # (S, T): the checkpoint it fires at (C: never)
    stopped = j < C
    jj = np.minimum(j, C - 1)
    at = np.arange(S)[:, None]
    saved = np.where(stopped, m["saved"][at, jj], 0.0)
    lost = np.where(stopped, np.maximum(0.0, m["gain"][at, jj]), 0.0)
    bad = stopped & (lost > delta_bad)
    out = {}
    for meth in np.unique(m["method"]):
        k = m["method"] == meth
        r = {"threshold": t, "runs": int(k.sum()), "n_stops": stopped[k].sum(axis=0)}
        for sfx, w in (("", np.ones(k.sum())), ("_w", m["w_src"][k])):
            w = w[:, None]
            n_st = (w * stopped[k]).sum(axis=0)
            r["stopped" + sfx] = n_st / w.sum()
            r["steps_saved" + sfx] = (w * saved[k]).sum(axis=0) / w.sum()
            r["bad_stops" + sfx] = np.where(n_st > 0, (w * bad[k]).sum(axis=0) / np.maximum(n_st, 1e-300), 0.0)
            r["reward_lost" + sfx] = (w * lost[k]).sum(axis=0) / w.sum()
        out[meth] = r
    return out


def operating_curve(dec: pd.DataFrame, thresholds, *, patience: int, min_fraction: float, p: str = "p_gain",
                    delta_bad: float = DEFAULT_DELTA_BAD, cutoffs=None) -> pd.DataFrame:  # fmt: skip
    """The policy's operating characteristic as its threshold moves: one row per threshold x method x
    weighting (``per run`` / ``source-weighted``) with ``stopped, steps_saved, bad_stops, reward_lost``
    (the numbers :func:`summarize_stops` gives for :func:`policy_backtest`, for every threshold at once)."""
    res = sweep(checkpoint_sequences(dec, p, cutoffs), thresholds, patience=patience, min_fraction=min_fraction,
                delta_bad=delta_bad)  # fmt: skip
    rows = []
    for meth, r in res.items():
        for sfx, label in (("", "per run"), ("_w", "source-weighted")):
            rows.append(pd.DataFrame(dict(method=meth, runs=r["runs"], stopped=r["stopped" + sfx],
                                          steps_saved=r["steps_saved" + sfx], bad_stops=r["bad_stops" + sfx],
                                          reward_lost=r["reward_lost" + sfx], threshold=r["threshold"],
                                          n_stops=r["n_stops"], weighting=label)))  # fmt: skip
    return pd.concat(rows, ignore_index=True)


def risk_index(r: dict, risk: float, *, min_stops: int = 5) -> int | None:
    """Index of the largest threshold of one method's :func:`sweep` whose bad-stop share is at most
    ``risk`` both per run and source-weighted, as it is for every smaller threshold with at least
    ``min_stops`` stops (fewer say little); None when no threshold qualifies."""
    worst = np.maximum(r["bad_stops"], r["bad_stops_w"])
    supported = r["n_stops"] >= min_stops
    ok = (worst <= risk + 1e-12) | ~supported
    run = np.cumprod(ok).astype(bool) & supported
    return int(np.flatnonzero(run)[-1]) if run.any() else None


def risk_thresholds(curve: pd.DataFrame, risks, *, method: str, min_stops: int = 5) -> list[tuple[float, float]]:
    """``[(risk, threshold)]`` from an :func:`operating_curve`: per risk the threshold of :func:`risk_index`
    (NaN when none qualifies). Thresholds never decrease with the risk."""
    c = curve[curve["method"] == method]
    a = c[c["weighting"] == "per run"].sort_values("threshold")
    b = c[c["weighting"] == "source-weighted"].sort_values("threshold")
    r = {"bad_stops": a["bad_stops"].to_numpy(), "bad_stops_w": b["bad_stops"].to_numpy(),
         "n_stops": np.round(a["stopped"].to_numpy() * a["runs"].to_numpy())}  # fmt: skip
    t = a["threshold"].to_numpy()
    out, prev = [], float("nan")
    for risk in sorted(risks):
        i = risk_index(r, risk, min_stops=min_stops)
        if i is not None:
            prev = t[i] if not np.isfinite(prev) else max(prev, float(t[i]))
        out.append((float(risk), float(prev)))
    return out


def _bin_of(p: np.ndarray, bins: int) -> np.ndarray:
    """The equal-width bin of each probability (1.0 in the last bin)."""
    return np.minimum((p * bins).astype(int), bins - 1)


def reliability(p, y, *, bins: int = 10, weights=None) -> pd.DataFrame:
    """Reliability table: per equal-width bin of ``p``, the number of cases, the mean probability, the
    observed frequency (weighted by ``weights``) and the gap ``observed - mean_p``."""
    p, y = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    w = np.ones_like(p) if weights is None else np.asarray(weights, dtype=float)
    ok = np.isfinite(p) & np.isfinite(y)
    b = _bin_of(p[ok], bins)
    rows = []
    for k in range(bins):
        m = b == k
        if not m.any():
            continue
        pm = float(np.average(p[ok][m], weights=w[ok][m]))
        obs = float(np.average(y[ok][m], weights=w[ok][m]))
        rows.append(dict(bin=k, lo=k / bins, hi=(k + 1) / bins, n=int(m.sum()), mean_p=pm, observed=obs, gap=obs - pm))
    return pd.DataFrame(rows)


def reliability_worst_gap(p, y, *, min_n: int = 30, bins: int = 10) -> float:
    """The largest ``|observed - mean_p|`` over the bins of :func:`reliability` with at least ``min_n``
    cases (NaN when no bin has)."""
    t = reliability(p, y, bins=bins)
    t = t[t["n"] >= min_n]
    return float(t["gap"].abs().max()) if len(t) else float("nan")


def _calibrated_outcomes(p: np.ndarray, inv: np.ndarray, n_groups: int, rho: float, rng, n_sim: int) -> np.ndarray:
    """``n_sim`` draws of outcomes that are perfectly calibrated to ``p`` (``P(y = 1) = p`` exactly) and
    correlated within a run: a Gaussian copula with latent correlation ``rho`` between the checkpoints of
    one run (``inv``: each case's run index)."""
    from bayesgrpo.inference.diagnostics import norm_ppf

    u = rng.standard_normal((n_sim, n_groups))[:, inv]
    z = np.sqrt(rho) * u + np.sqrt(1.0 - rho) * rng.standard_normal((n_sim, p.size))
    return (z < norm_ppf(np.clip(p, 1e-12, 1 - 1e-12))).astype(float)


def _within_run_correlation(r: np.ndarray, inv: np.ndarray) -> float:
    """Pooled correlation of the residuals ``r`` between two cases of one run."""
    s = np.bincount(inv, weights=r)
    s2 = np.bincount(inv, weights=r * r)
    n = np.bincount(inv)
    den = float(((n * n - n) * (s2 / np.maximum(n, 1))).sum())
    return float(((s * s - s2).sum()) / den) if den > 0 else 0.0


def _dependence(p: np.ndarray, y: np.ndarray, inv: np.ndarray, bins: int = 10) -> float:
    """Within-run correlation of the outcomes around their bin's observed frequency (``y`` minus the
    frequency of its bin of ``p``): a miscalibration shared by a whole bin is not counted as dependence."""
    b = _bin_of(p, bins)
    freq = np.bincount(b, weights=y, minlength=bins) / np.maximum(np.bincount(b, minlength=bins), 1)
    return _within_run_correlation(y - freq[b], inv)


def reliability_noise_floor(
    p, y, run_id, *, band: float = 0.07, min_n: int = 30, n_sim: int = 400, seed: int = 0
) -> dict:
    """What the reliability check (every bin of :func:`reliability` with ``min_n`` cases within ``band``)
    can tell on these cases: how often a forecaster that is *exactly* calibrated at the same
    probabilities ``p`` would pass it, and its median worst gap.

    Outcomes of checkpoints of one run are not independent (they share the run's final reward). Their
    dependence is measured on ``y``: the within-run correlation of the outcomes around their bin's
    observed frequency (:func:`_dependence`); the latent correlation ``rho`` of a Gaussian copula is the
    value on a grid whose calibrated outcomes reproduce it. A forecaster whose errors differ from run to
    run (not only from bin to bin) still raises it, so the floor at ``rho`` is an upper estimate of the
    check's noise and the one at ``rho = 0`` (independent cases) a lower one; both are returned.

    Returns ``residual_correlation``, ``rho``, ``observed_worst_gap`` (of ``p`` against ``y``; NaN when no
    bin has ``min_n`` cases), ``pass_rate`` and ``median_worst_gap`` of calibrated outcomes at ``rho``,
    ``p_value`` (Monte-Carlo, ``(1 + #{gap >= observed}) / (1 + n_sim)``: small means ``p`` is
    miscalibrated beyond the noise; NaN without an observed gap), and ``pass_rate_independent`` /
    ``median_worst_gap_independent`` (``rho = 0``).
    """
    p, y = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(p) & np.isfinite(y)
    p, y = p[ok], y[ok]
    observed = reliability_worst_gap(p, y, min_n=min_n)
    if not np.isfinite(observed):  # no bin of min_n cases (the bins depend on p only): nothing to tell
        keys = ("residual_correlation", "rho", "observed_worst_gap", "pass_rate", "median_worst_gap", "p_value",
                "pass_rate_independent", "median_worst_gap_independent")  # fmt: skip
        return dict.fromkeys(keys, float("nan"))
    _, inv = np.unique(np.asarray(run_id)[ok], return_inverse=True)
    k = int(inv.max()) + 1
    rng = np.random.default_rng(seed)
    target = _dependence(p, y, inv)
    grid = np.linspace(0.0, 0.95, 20)
    sims = [np.mean([_dependence(p, o, inv) for o in _calibrated_outcomes(p, inv, k, g, rng, 20)]) for g in grid]
    rho = (
        float(np.interp(target, sims, grid))
        if np.all(np.diff(sims) > 0)
        else float(grid[np.argmin(np.abs(np.subtract(sims, target)))])
    )

    def floor(r: float) -> np.ndarray:
        return np.array(
            [reliability_worst_gap(p, o, min_n=min_n) for o in _calibrated_outcomes(p, inv, k, r, rng, n_sim)]
        )

    gaps, gaps0 = floor(rho), floor(0.0)
    p_value = float((1 + np.sum(gaps >= observed)) / (1 + n_sim))
    return dict(
        residual_correlation=target,
        rho=rho,
        observed_worst_gap=observed,
        pass_rate=float(np.mean(gaps <= band)),
        median_worst_gap=float(np.nanmedian(gaps)),
        p_value=p_value,
        pass_rate_independent=float(np.mean(gaps0 <= band)),
        median_worst_gap_independent=float(np.nanmedian(gaps0)),
    )


def prob_scores(p, y, *, weights=None, eps: float = 1e-3) -> dict:
    """Brier score and log score (mean negative log-likelihood; probabilities clipped to [eps, 1 - eps])."""
    p, y = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(p) & np.isfinite(y)
    w = np.ones(ok.sum()) if weights is None else np.asarray(weights, dtype=float)[ok]
    p, y = p[ok], y[ok]
    pc = np.clip(p, eps, 1 - eps)
    return dict(n=int(ok.sum()), brier=float(np.average((p - y) ** 2, weights=w)),
                log=float(np.average(-(y * np.log(pc) + (1 - y) * np.log1p(-pc)), weights=w)))  # fmt: skip


def stop_rule_backtest(
    cases: pd.DataFrame, runs: RunSet, *, delta: float = 0.05, epsilon: float = 0.2, bad: float = 0.1
) -> pd.DataFrame:
    """Today's plain rule on uncalibrated probabilities: stop at the first checkpoint where P(final >=
    level + delta x scale) < epsilon (patience 1, from the first checkpoint); one row per run x method."""
    dec = decision_cases(cases, runs, delta=delta, delta_bad=bad)
    pol = StopPolicy(threshold=epsilon, patience=1, min_fraction=0.0, delta=delta, delta_bad=bad)
    return policy_backtest(dec, pol, p="p_gain_raw")


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
