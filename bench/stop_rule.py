"""The stop study's research on the stop policy's backtest (``bench/stop_report.py``, ``bench/stop_study.py``,
``bench/forecast_benchmark.py``): what chose the shipped thresholds and judged the probabilities, and which
no command of the package runs (the backtest itself, :mod:`bayesgrpo.evaluation.stop_rule`, stays there:
``bayesgrpo backtest`` scores the shipped policy with it).

* :func:`checkpoint_sequences` / :func:`sweep` / :func:`operating_curve` -- the policy at every threshold at
  once (the exact patience recursion of :class:`~bayesgrpo.decisions.stop.StopMonitor`), per run and
  source-weighted;
* :func:`risk_index` / :func:`risk_thresholds` -- the largest threshold whose bad-stop share met each risk
  (how the shipped thresholds are chosen);
* :func:`reliability`, :func:`reliability_worst_gap`, :func:`reliability_noise_floor` and
  :func:`prob_scores` -- the probabilities themselves: reliability tables, what the +-0.07 check can tell
  on correlated checkpoints, Brier and log scores;
* :func:`threshold_cases` -- P(final >= level + k x scale) for several ``k``;
* :func:`stop_rule_backtest` -- the forecast benchmark's plain rule on uncalibrated probabilities.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesgrpo.decisions.stop import DEFAULT_DELTA_BAD, StopPolicy
from bayesgrpo.evaluation.stop_rule import decision_cases, policy_backtest
from bayesgrpo.forecast.decision import gain_threshold, prob_at_least
from bayesgrpo.schema import RunSet

__all__ = [
    "threshold_cases",
    "checkpoint_sequences",
    "sweep",
    "operating_curve",
    "risk_index",
    "risk_thresholds",
    "reliability",
    "reliability_worst_gap",
    "reliability_noise_floor",
    "prob_scores",
    "stop_rule_backtest",
]


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
    (the numbers :func:`~bayesgrpo.evaluation.stop_rule.summarize_stops` gives for :func:`~bayesgrpo.evaluation.stop_rule.policy_backtest`, for every threshold at once)."""
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
    from scipy.special import ndtri

    u = rng.standard_normal((n_sim, n_groups))[:, inv]
    z = np.sqrt(rho) * u + np.sqrt(1.0 - rho) * rng.standard_normal((n_sim, p.size))
    return (z < ndtri(np.clip(p, 1e-12, 1 - 1e-12))).astype(float)


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
