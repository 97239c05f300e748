"""Scoring of backtest cases: the truth of a complete run, scores of a forecast, and aggregates.

Definitions
-----------
* **truth** -- the full run's final reward: the mean logged reward over ``(s0 + 0.9 (H - s0), H]``
  (:func:`bayesgrpo.evaluation.metrics.final_reward`), ``H`` = the run's last step.
* **normalised** errors, CRPS and widths are divided by the run's robust reward range over the whole
  run (:func:`bayesgrpo.series.robust_range`), so runs on different reward scales pool.
* **coverage** of the central intervals :data:`bayesgrpo.conventions.INTERVALS`; **PIT** = rank of
  the truth among the draws (randomised for ties).
* **stop step truth** -- for a noise-free expected-reward curve (the testbed's ``reward_expected``)
  the stop step of :mod:`bayesgrpo.physics.stopping` (the one definition) of that curve, with its
  start and its final-window mean as the plateau; elsewhere a **plateau-reached** check.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from bayesgrpo.conventions import DEFAULT_FINAL_WINDOW, INTERVALS, QUANTILES, interval_bounds
from bayesgrpo.evaluation.metrics import crps_sample, final_reward, pit
from bayesgrpo.physics.stopping import DEFAULT_STOP_FRACTION, settling_index
from bayesgrpo.plan import final_window_mask
from bayesgrpo.schema import REWARD, STEP, RunSet
from bayesgrpo.series import robust_range

__all__ = ["score_draws", "run_truth", "true_stop_step", "plateau_reached", "summarize", "summarize_weighted",
           "CASE_COLUMNS", "LEVELS", "QUANTS", "sources"]  # fmt: skip

LEVELS = INTERVALS
QUANTS = QUANTILES

CASE_COLUMNS = [
    "run_id", "source", "cutoff", "method", "ok", "message", "warnings", "n_obs", "observed_until", "s0", "horizon",
    "truth", "range", "median", "mean", *[f"q{round(q * 100):02d}" for q in QUANTS],
    "abs_err", "nae", "crps", "ncrps", "pit",
    *[f"cover{round(lv * 100)}" for lv in LEVELS], *[f"width{round(lv * 100)}" for lv in LEVELS],
    *[f"nwidth{round(lv * 100)}" for lv in LEVELS],
    "stop_true", "stop_pred", "stop_err", "stop_nerr", "plateau_true", "plateau_pred", "p_stop_before_horizon",
    "seconds", "r_hat_max", "ess_min", "divergences", "n_context", "scale", "level", "p_plateaued",
]  # fmt: skip


def score_draws(draws, truth: float, scale: float) -> dict:
    """Scores of one forecast (draws of the final reward) against the truth.

    Returns median, mean, quantiles ``qNN``, ``abs_err`` (of the median), ``nae`` (÷ ``scale``),
    ``crps`` / ``ncrps``, ``pit`` (deterministic tie-breaking seed), ``coverNN`` (1.0/0.0) and
    ``widthNN`` / ``nwidthNN`` of the central 50/80/90% intervals.
    """
    x = np.asarray(draws, dtype=float).ravel()
    x = x[np.isfinite(x)]
    if x.size == 0:
        raise ValueError("no finite forecast draws")
    q = np.quantile(x, QUANTS)
    med = float(np.median(x))
    out = {"median": med, "mean": float(x.mean())}
    out.update({f"q{round(p * 100):02d}": float(v) for p, v in zip(QUANTS, q, strict=True)})
    out["abs_err"] = abs(med - truth)
    out["nae"] = out["abs_err"] / scale
    out["crps"] = float(crps_sample(x, truth))
    out["ncrps"] = out["crps"] / scale
    out["pit"] = float(pit(x, truth, seed=0))
    for lev in LEVELS:
        lo, hi = np.quantile(x, interval_bounds(lev))
        k = round(lev * 100)
        out[f"cover{k}"] = float(lo <= truth <= hi)
        out[f"width{k}"] = float(hi - lo)
        out[f"nwidth{k}"] = float(hi - lo) / scale
    return out


def run_truth(df: pd.DataFrame, final_window: float = DEFAULT_FINAL_WINDOW) -> tuple[float, float, int, int]:
    """(final reward, 5-95% reward range, s0, H) of a complete run's rows."""
    s = df[STEP].to_numpy(dtype=float)
    r = df[REWARD].to_numpy(dtype=float)
    s0, H = int(s.min()), int(s.max())
    return final_reward(s, r, s0=s0, horizon=H, final_window=final_window), robust_range(r), s0, H


def true_stop_step(
    steps,
    expected,
    *,
    stop_fraction: float = DEFAULT_STOP_FRACTION,
    final_window: float = DEFAULT_FINAL_WINDOW,
    min_gain: float = 1e-3,
) -> float:
    """Stop step of a noise-free reward curve (:mod:`bayesgrpo.physics.stopping`, the one definition).

    The curve's start is its first value and its plateau the mean over the final window; the stop
    step is the first step after which it stays within ``1 - stop_fraction`` of that gain from the
    plateau. NaN when the gain is below ``min_gain`` of the curve's range (nothing to realise), when
    the curve has no finite values, or when it does not settle by its end.
    """
    s = np.asarray(steps, dtype=float)
    e = np.asarray(expected, dtype=float)
    ok = np.isfinite(s) & np.isfinite(e)
    s, e = s[ok], e[ok]
    if s.size < 2:
        return float("nan")
    win = final_window_mask(s, s0=s[0], horizon=s[-1], final_window=final_window)
    plateau = float(e[win].mean()) if win.any() else float(e[-1])
    gain = plateau - e[0]
    rng_ = float(np.ptp(e)) or 1.0
    if abs(gain) < min_gain * max(rng_, abs(plateau), 1e-12):
        return float("nan")
    idx, reached = settling_index((e - plateau) / (e[0] - plateau), fraction=stop_fraction)
    return float(s[int(idx)]) if bool(reached) else float("nan")


def plateau_reached(rewards, *, tol: float = 0.05) -> bool | float:
    """Did a logged run flatten by its end?

    ``|mean(last 10%) - mean(previous 10%)| < max(tol * range, 2 SE of that difference)``.

    NaN with fewer than 20 points.
    """
    r = np.asarray(rewards, dtype=float)
    r = r[np.isfinite(r)]
    n = r.size
    if n < 20:
        return float("nan")
    k = max(2, int(math.ceil(0.1 * n)))
    a, b = r[-k:], r[-2 * k : -k]
    se = math.sqrt(a.var(ddof=1) / k + b.var(ddof=1) / k)
    return bool(abs(a.mean() - b.mean()) < max(tol * robust_range(r), 2.0 * se))


def _source_col(meta: pd.DataFrame) -> str | None:
    for c in ("source_repo", "sweep", "family", "dataset"):
        if c in meta.columns and meta[c].notna().any():
            return c
    return None


def sources(runs: RunSet, source_col: str | None = None) -> dict:
    """run id -> source label (``source_repo``, else ``sweep`` / ``family`` / ``dataset``, else "all")."""
    col = source_col or _source_col(runs.meta)
    if col is None or col not in runs.meta.columns:
        return dict.fromkeys(runs.run_ids, "all")
    return {r: (str(v) if pd.notna(v) else "unknown") for r, v in runs.meta[col].items()}


def _agg(g: pd.DataFrame) -> dict:
    ok = g[g["ok"].astype(bool)]
    d = {
        "n_cases": int(len(g)),
        "n_ok": int(len(ok)),
        "failure_rate": float(1 - len(ok) / len(g)) if len(g) else float("nan"),
        "median_nae": float(ok["nae"].median()) if len(ok) else float("nan"),
        "mean_nae": float(ok["nae"].mean()) if len(ok) else float("nan"),
        "mean_ncrps": float(ok["ncrps"].mean()) if len(ok) else float("nan"),
        "median_ncrps": float(ok["ncrps"].median()) if len(ok) else float("nan"),
    }
    for lev in LEVELS:
        k = round(lev * 100)
        d[f"cover{k}"] = float(ok[f"cover{k}"].mean()) if len(ok) else float("nan")
        d[f"mean_nwidth{k}"] = float(ok[f"nwidth{k}"].mean()) if len(ok) else float("nan")
    d["sec_per_forecast"] = float(g["seconds"].mean()) if len(g) else float("nan")
    st = ok["stop_nerr"].dropna() if "stop_nerr" in ok else pd.Series(dtype=float)
    d["n_stop"] = int(len(st))
    d["median_stop_nerr"] = float(st.abs().median()) if len(st) else float("nan")
    pl = ok[["plateau_true", "plateau_pred"]].dropna() if "plateau_true" in ok else pd.DataFrame()
    d["n_plateau"] = int(len(pl))
    d["plateau_acc"] = (
        float((pl["plateau_true"].astype(bool) == pl["plateau_pred"].astype(bool)).mean()) if len(pl) else float("nan")
    )
    return d


def summarize(cases: pd.DataFrame, by=("cutoff", "method")) -> pd.DataFrame:
    """Aggregates per group: failure rate, median/mean normalised abs error, mean normalised CRPS,
    50/80/90% coverage and mean normalised widths, seconds per forecast, stop-step / plateau checks."""
    if cases.empty:
        return pd.DataFrame()
    rows = []
    for key, g in cases.groupby(list(by), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key, strict=True)), **_agg(g)})
    return pd.DataFrame(rows)


def summarize_weighted(cases: pd.DataFrame) -> pd.DataFrame:
    """Source-weighted aggregates per cutoff x method: each source's aggregate, averaged with equal
    weight per source (medians become the mean of per-source medians)."""
    per = summarize(cases, by=("cutoff", "method", "source"))
    if per.empty:
        return per
    num = [c for c in per.columns if c not in ("cutoff", "method", "source") and not c.startswith("n_")]
    out = per.groupby(["cutoff", "method"])[num].mean().reset_index()
    out["n_sources"] = per.groupby(["cutoff", "method"]).size().to_numpy()
    out["n_cases"] = per.groupby(["cutoff", "method"])["n_cases"].sum().to_numpy()
    return out
