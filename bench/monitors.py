"""Early warnings beside the run monitors GRPO users install (issue 32): bayesgrpo's ``diagnose`` and its
forecast's own probabilities against ``rlwatch`` and ``rldoctor`` at their defaults, on every development
run cut at 20 / 30 / 50% of its steps.

    nice -n 10 .venv/bin/python -m bench.monitors          # resumable: the cases already forecast are kept
    .venv/bin/python -m bench.monitors --report-only       # rescore the ledgers and rewrite the report

Writes ``bench/results/monitors.md`` and ``monitors.json`` (with the exact versions of both monitors) and
the ledgers ``bench/results/monitors/forecasts.csv`` (one row per case: what the live worker reports at
the cut) and ``signals.csv`` (every alert and check of the two monitors). A rerun forecasts only the cases
missing from the ledger (new runs, e.g. ``data/grpo-collected`` when it appears) and replays the monitors
on the runs they have not seen.

**Runs.** Every development source (``bench/yardstick/data.py``: ``../shared/data/grpo-{public,extra,more}``
read by path, and ``data/grpo-collected`` of this checkout when present), at most :data:`MAX_RUNS` runs per
source (spread in file order), both yardstick splits. Sources weigh the same in every source-weighted
number.

**Cases and truth.** Each run cut at :data:`CUTS` of its step span (the plans of
:func:`bayesgrpo.evaluation.backtest.backtest`: ``plan_runs(until_fraction=c)``, horizon = the run's last
logged step; cases a plan refuses -- too few points -- are left out for every method). From the complete
run: ``final`` = the mean logged reward of its final window, ``range`` = its 5-95% reward range
(:func:`bayesgrpo.evaluation.scoring.run_truth`); ``level`` = the current level at the cut
(:func:`bayesgrpo.series.current_level`, the level a stop decision compares with). Events:

* *decline*: ``final < level - 0.1 range``;
* *collapse*: ``final < level - 0.3 range`` (the same reading as decline, a drop three times as deep);
* *plateau*: ``final - level < 0.05 range`` (less than 0.05 of the range still to gain);
* *degenerate*: ``frac_reward_zero_std`` stays above 0.8 after the cut (its rolling mean over 10% of the
  remaining rows, at least 3) and no gain (``final - level < 0.05 range``); only runs that log the share.

**Methods** (each case sees the same prefix):

* ``forecast``: ``Forecaster("oscillator")`` (:data:`KIND`: the kind whose alert rates this ships; packaged prior, calibration, hazard and
  interval layers, p_gain map) through ``forecast_batch`` with ``SamplerConfig(draws=500, tune=500)`` (fewer
  draws than the default 1000, for CPU), read by the live worker's own ``summarize_fit`` (what the callback
  and ``watch`` report): P(decline) = ``p_decline`` = P(final < level - 0.1 scale); P(collapse) the same at
  0.3 scale (``scale``: the forecast's normalising scale, the range logged so far); plateau and degenerate:
  ``1 - p_gain``. Alarm: P at or above an alarm level chosen leave-one-source-out (decline, collapse: the
  level of :data:`ALARM_LEVELS` with the largest source-weighted F1 on the other sources' cases of every cut;
  the level chosen on every source ships as the live decline alert's level), the shipped stop policy's
  ``advice == "stop"`` (plateau, degenerate). Alarm step: the cut.
* ``diagnose``: the live worker's flags (``diagnose_runs`` on the prefix with the forecast's draws); score
  the severity (none 0 .. critical 3) of the mode named for the event (decline, collapse:
  ``dynamical_instability``; degenerate: ``advantage_degeneracy``; plateau: any mode); alarm >= warning.
* ``rlwatch`` 0.5.1, ``rldoctor`` 0.2.0 (``bench/monitor_peers.py``: their TRL callbacks at their defaults on
  the same logged rows): score the highest severity they reached by the cut, alarm an alert they sent by the
  cut, alarm step its step. Two readings each: *any* detector, or the detectors named for the event
  (rlwatch: ``reward_mean_drift`` downward for decline/collapse, ``advantage_variance`` / ``entropy_collapse``
  for degenerate; rldoctor: ``plateau`` for decline/collapse/plateau, ``advantage_collapse`` for degenerate);
  the table shows their **better** reading (by source-weighted AUROC) at each cut.
  The *best monitor* of an event and cut: the larger AUROC among the monitors whose alarms caught a true case.

**Metrics** per event and cut, source-weighted (each source the same weight) and per case: AUROC of the
score; precision of each alarm and its recall; bayesgrpo's precision at the recall of the best monitor
(the monitor of larger AUROC); lead time of the alarms of true cases (decline, collapse: steps from the
alarm to the onset, the first step after the cut from which the rolling mean stays below the event's
threshold -- the final window's start when it never stays; plateau, degenerate: the steps left to the end
of the run when the alarm comes, what stopping then saves); false alarms per 1,000 steps of runs where the
event happens at no cut, counted up to the 50% cut (a monitor: the alerts it sent; bayesgrpo: the alarms
that switch on over its three checks, as the live alerts fire once per change).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from bench import monitor_peers
from bench.yardstick import data

ROOT = data.ROOT
RESULTS = ROOT / "bench" / "results"
LEDGER = RESULTS / "monitors"
CUTS = (0.2, 0.3, 0.5)
MAX_RUNS = 8
DRAWS, TUNE = 500, 500
KIND = "oscillator"  # the kind whose alerts this measures and ships (resources/alerts_oscillator.json)
EVENTS = ("decline", "collapse", "plateau", "degenerate")
DROP = {"decline": 0.1, "collapse": 0.3}
PLATEAU_GAIN = 0.05
DEGEN_SHARE = 0.8
#: the P(decline) / P(collapse) alarm levels tried; the level is chosen leave-one-source-out (:func:`alarm_levels`)
ALARM_LEVELS = (0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6)
METHODS = ("forecast", "diagnose", "rlwatch", "rldoctor")
MONITORS = ("rlwatch", "rldoctor")
SEV = {"none": 0, "watch": 1, "warning": 2, "critical": 3}
#: the detectors (modes) named for each event; None: no detector is about it (only the "any" reading)
NAMED = {
    "diagnose": {"decline": {"dynamical_instability"}, "collapse": {"dynamical_instability"}, "plateau": None,
                 "degenerate": {"advantage_degeneracy"}},
    "rlwatch": {"decline": {"reward_mean_drift:down"}, "collapse": {"reward_mean_drift:down"}, "plateau": None,
                "degenerate": {"advantage_variance", "entropy_collapse"}},
    "rldoctor": {"decline": {"plateau"}, "collapse": {"plateau"}, "plateau": {"plateau"},
                 "degenerate": {"advantage_collapse"}},
}  # fmt: skip
TARGETS = dict(auroc_decline_30=0.75, precision_ratio=1.5)


# ----------------------------------------------------------------------------- data and truth
def load_runs(max_runs: int = MAX_RUNS):
    """The development runs (``../shared/data`` of this checkout's parent, else ``$BAYESGRPO_SHARED_DATA`` or
    ``/work/shared/data``: a worktree sits one level deeper than the main checkout)."""
    if not (data.SHARED / "grpo-public" / "runs.csv").is_file():
        data.SHARED = Path(os.environ.get("BAYESGRPO_SHARED_DATA", "/work/shared/data"))
    return data.load(max_runs=max_runs)


def _onset(steps, y, after: float, thr: float, fallback: float) -> float:
    """The first step after ``after`` from which the rolling mean stays below ``thr`` (else ``fallback``)."""
    k = max(3, int(round(0.1 * y.size)))
    roll = pd.Series(y).rolling(k, center=True, min_periods=1).mean().to_numpy()
    above = np.flatnonzero((roll >= thr) | (steps <= after))
    j = above[-1] + 1 if above.size else 0
    return float(steps[j]) if j < steps.size else float(fallback)


def _degenerate(df: pd.DataFrame, after: float) -> float:
    """1.0 when ``frac_reward_zero_std`` stays above 0.8 after the cut, 0.0 when not, NaN when not logged."""
    if "frac_reward_zero_std" not in df.columns:
        return np.nan
    z = df.loc[df["step"] > after, "frac_reward_zero_std"].to_numpy(float)
    z = z[np.isfinite(z)]
    if z.size < 3:
        return np.nan
    k = max(3, int(round(0.1 * z.size)))
    roll = pd.Series(z).rolling(k, min_periods=1).mean().to_numpy()[k - 1 :]
    return float(np.all(roll > DEGEN_SHARE))


def truth_cases(runs) -> pd.DataFrame:
    """One row per case (run x cut) with its facts, events and onsets (module docstring)."""
    from bayesgrpo.series import current_level
    from bench.yardstick.cases import build

    rows = []
    for c in build(runs, cutoffs=CUTS):
        df = runs.run(c.run_id)
        s, y = df["step"].to_numpy(float), df["reward"].to_numpy(float)
        ok = np.isfinite(y)
        s, y = s[ok], y[ok]
        level = current_level(c.rewards)
        cut = c.observed_until
        win = c.s0 + 0.9 * (c.horizon - c.s0)
        r = dict(key=c.key, run_id=c.run_id, source=c.source, cut=c.cutoff, cut_step=cut, s0=c.s0,
                 horizon=c.horizon, final=c.truth, range=c.range, level=level)  # fmt: skip
        for e, d in DROP.items():
            thr = level - d * c.range
            r[e] = float(c.truth < thr)
            r[f"{e}_onset"] = _onset(s, y, cut, thr, win)
        no_gain = c.truth - level < PLATEAU_GAIN * c.range
        r["plateau"] = float(no_gain)
        deg = _degenerate(df, cut)
        r["degenerate"] = deg if not np.isfinite(deg) else float(bool(deg) and no_gain)
        rows.append(r)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- ledgers
def _read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path) if path.is_file() and path.stat().st_size > 1 else pd.DataFrame()


def _append(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, mode="a", header=not path.is_file(), index=False)


def forecast_cases(runs, cases: pd.DataFrame, *, draws: int, tune: int) -> pd.DataFrame:
    """The live worker's numbers at every case (ledger ``forecasts.csv``; only missing cases are forecast)."""
    from bayesgrpo.decisions.stop import DEFAULT_RISK
    from bayesgrpo.forecast import Forecaster, SamplerConfig
    from bayesgrpo.forecast.batch import forecast_batch
    from bayesgrpo.forecast.decision import decline_threshold, prob_at_least
    from bayesgrpo.integrations._serve import summarize_fit

    path = LEDGER / "forecasts.csv"
    have = _read(path)
    done = set(have["key"]) if len(have) else set()
    if len(have) and not ((have["draws"] == draws) & (have["tune"] == tune)).all():
        raise SystemExit(f"{path} holds forecasts of other sampler settings; move it away to start afresh")
    fc = Forecaster(KIND, sampler=SamplerConfig(draws=draws, tune=tune, seed=0))
    t0 = time.time()
    for (src, cut), g in cases.groupby(["source", "cut"], sort=True):
        todo = [r for r in g["run_id"] if f"{r}|{cut:g}" not in done]
        if not todo:
            continue
        hz = dict(zip(g["run_id"], g["horizon"].astype(int), strict=True))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = forecast_batch(runs.select(todo), forecaster=fc, horizon={r: hz[r] for r in todo},
                                 until_fraction=float(cut))  # fmt: skip
        rows = []
        for rid in res.fit.forecast_ids if res.fit is not None else []:
            t1 = time.perf_counter()
            out = summarize_fit(res.fit, rid, policy={"risk": DEFAULT_RISK}, diagnose=True)
            nums = res.fit.decision_numbers(rid, delta=res.fit.config.delta)
            fin = res.fit.final_draws(rid)
            p_col = 1.0 - prob_at_least(fin, decline_threshold(nums["level"], nums["scale"], DROP["collapse"]))
            rows.append(dict(key=f"{rid}|{cut:g}", run_id=rid, cut=cut, observed_until=out["observed_until"],
                             p_decline=out["p_decline"], p_collapse=p_col, p_gain=out["p_gain"], advice=out["advice"],
                             status=out["status"], seconds=time.perf_counter() - t1, draws=draws, tune=tune,
                             **{f"flag_{m}": SEV[s] for m, s in out["flags"].items()}))  # fmt: skip
        _append(path, rows)
        print(f"[{time.time() - t0:6.0f}s] forecasts {src} @ {cut:g}: {len(rows)}/{len(todo)}", flush=True)
    return _read(path)


def monitor_cases(runs) -> pd.DataFrame:
    """Both monitors over every run (ledger ``signals.csv``; runs already replayed are kept)."""
    path = LEDGER / "signals.csv"
    seen_path = LEDGER / "signals_runs.csv"
    seen = set(_read(seen_path).get("run_id", pd.Series(dtype=str)))
    todo = [r for r in runs.run_ids if r not in seen]
    if todo:
        sig = monitor_peers.monitor_signals(runs, todo)
        _append(path, sig.to_dict("records"))
        _append(seen_path, [{"run_id": r} for r in todo])
        print(f"monitors replayed on {len(todo)} run(s)", flush=True)
    return _read(path) if path.is_file() else pd.DataFrame(columns=monitor_peers.COLUMNS)


# ----------------------------------------------------------------------------- scores per method
def _monitor_scores(cases: pd.DataFrame, sig: pd.DataFrame, m: str, event: str, named) -> pd.DataFrame:
    s = sig[sig["monitor"] == m]
    if named is not None:
        s = s[s["detector"].isin(named)]
    by = dict(list(s.groupby("run_id")))
    rows = []
    for c in cases.itertuples():
        g = by.get(c.run_id)
        g = g[g["step"] <= c.cut_step] if g is not None else None
        score = float(g["severity"].max()) if g is not None and len(g) else 0.0
        al = g[g["announced"].astype(bool) & (g["severity"] >= 2)] if g is not None else None
        alarm = al is not None and len(al) > 0
        rows.append((score, alarm, float(al["step"].min()) if alarm else np.nan))
    return pd.DataFrame(rows, columns=["score", "alarm", "alarm_step"], index=cases.index)


def _f1(score, y, w, level: float) -> float:
    p, r = precision_recall(np.asarray(score) >= level, y, w)
    return 2 * p * r / (p + r) if np.isfinite(p) and np.isfinite(r) and p + r > 0 else 0.0


def alarm_levels(cases: pd.DataFrame, fc: pd.DataFrame, event: str) -> tuple[dict, float]:
    """The P(event) alarm level of each source, chosen on the *other* sources (the level of largest
    source-weighted F1 over their cases of every cut, ties to the higher level), and the level chosen on all."""
    col = {"decline": "p_decline", "collapse": "p_collapse"}[event]
    g = cases[cases[event].notna()].merge(fc[["key", col]], on="key")

    def choose(d: pd.DataFrame) -> float:
        w = source_weights(d["source"])
        return max(ALARM_LEVELS, key=lambda lv: (_f1(d[col], d[event], w, lv), lv))

    return {s: choose(g[g["source"] != s]) for s in g["source"].unique()}, choose(g)


def _own_scores(cases: pd.DataFrame, fc: pd.DataFrame, m: str, event: str, levels=None) -> pd.DataFrame:
    f = fc.set_index("key").reindex(cases["key"])
    if m == "forecast":
        score = {"decline": f["p_decline"], "collapse": f["p_collapse"]}.get(event, 1.0 - f["p_gain"])
        if event in DROP:  # the level chosen without the case's own source
            alarm = score.to_numpy(float) >= cases["source"].map(levels).to_numpy(float)
        else:
            alarm = f["advice"].eq("stop")
    else:
        named = NAMED["diagnose"][event]
        cols = [c for c in f.columns if c.startswith("flag_") and (named is None or c[5:] in named)]
        score = f[cols].max(axis=1)
        alarm = score >= SEV["warning"]
    out = pd.DataFrame({"score": score.to_numpy(float), "alarm": np.asarray(alarm, bool)}, index=cases.index)
    out["alarm_step"] = np.where(out["alarm"], cases["cut_step"], np.nan)
    return out


def score_table(cases: pd.DataFrame, fc: pd.DataFrame, sig: pd.DataFrame) -> pd.DataFrame:
    """Long table: one row per case x event x method x reading (``score``, ``alarm``, ``alarm_step``)."""
    parts = []
    levels = {e: alarm_levels(cases, fc, e)[0] for e in DROP}
    for e in EVENTS:
        ce = cases[cases[e].notna()]
        for m in METHODS:
            readings = (
                ["named", "any"] if m in MONITORS and NAMED[m][e] is not None else ["any" if m in MONITORS else "own"]
            )
            for rd in readings:
                if m in MONITORS:
                    sc = _monitor_scores(ce, sig, m, e, NAMED[m][e] if rd == "named" else None)
                else:
                    sc = _own_scores(ce, fc, m, e, levels.get(e))
                base = ce[["key", "run_id", "source", "cut", "cut_step", "s0", "horizon"]].assign(
                    onset=ce[f"{e}_onset"] if e in DROP else ce["horizon"], event=e, method=m, reading=rd, y=ce[e]
                )
                parts.append(pd.concat([base, sc], axis=1))
    st = pd.concat(parts, ignore_index=True)
    return st.astype({"score": float, "alarm": bool, "alarm_step": float, "y": float})


# ----------------------------------------------------------------------------- metrics
def source_weights(src) -> np.ndarray:
    """Each source the same total weight, spread evenly over its cases."""
    _, inv, cnt = np.unique(np.asarray(src).astype(str), return_inverse=True, return_counts=True)
    return 1.0 / (cnt.size * cnt[inv]) if cnt.size else np.zeros(0)


def auroc(score, y, w) -> float:
    """P(score of a true case > score of a false case), ties half, weighted pairs."""
    score, y, w = np.asarray(score, float), np.asarray(y, float), np.asarray(w, float)
    pos, neg = y == 1, y == 0
    if not pos.any() or not neg.any():
        return float("nan")
    a, b = score[pos][:, None], score[neg][None, :]
    gt = (a > b) + 0.5 * (a == b)
    ww = w[pos][:, None] * w[neg][None, :]
    return float((ww * gt).sum() / ww.sum())


def precision_recall(alarm, y, w) -> tuple[float, float]:
    alarm, y, w = np.asarray(alarm, bool), np.asarray(y, float), np.asarray(w, float)
    tp, fp, fn = w[alarm & (y == 1)].sum(), w[alarm & (y == 0)].sum(), w[~alarm & (y == 1)].sum()
    prec = tp / (tp + fp) if tp + fp > 0 else float("nan")
    rec = tp / (tp + fn) if tp + fn > 0 else float("nan")
    return float(prec), float(rec)


def precision_at_recall(score, y, w, recall: float) -> float:
    """Precision of the highest threshold on ``score`` whose recall reaches ``recall``."""
    if not np.isfinite(recall) or recall <= 0:
        return float("nan")
    score = np.asarray(score, float)
    for t in np.unique(score[np.isfinite(score)])[::-1]:
        p, r = precision_recall(score >= t, y, w)
        if r >= recall - 1e-9:
            return p
    return float("nan")


def _wmedian(x, w) -> float:
    x, w = np.asarray(x, float), np.asarray(w, float)
    ok = np.isfinite(x)
    if not ok.any():
        return float("nan")
    from bench.fit_layers import weighted_quantile

    return weighted_quantile(x[ok], w[ok], 0.5)


def _lead(g: pd.DataFrame) -> np.ndarray:
    hit = (g["y"] == 1) & g["alarm"]
    return np.where(hit, g["onset"] - g["alarm_step"], np.nan)


def false_alarms(st: pd.DataFrame, sig: pd.DataFrame, cases: pd.DataFrame, event: str, method: str,
                 reading: str) -> tuple[float, float, int]:  # fmt: skip
    """Alarms per 1,000 steps of the runs where ``event`` happens at no cut, up to each run's last cut:
    (source-weighted, pooled, runs)."""
    ce = cases[cases[event].notna()]
    healthy = ce.groupby("run_id")[event].max().pipe(lambda s: s[s == 0].index)
    last = ce[ce["run_id"].isin(healthy)].sort_values("cut").groupby("run_id").last()
    per_run = []
    for rid, c in last.iterrows():
        steps = float(c["cut_step"] - c["s0"])
        if method in MONITORS:
            s = sig[(sig["monitor"] == method) & (sig["run_id"] == rid) & sig["announced"].astype(bool)
                    & (sig["step"] <= c["cut_step"]) & (sig["severity"] >= 2)]  # fmt: skip
            if reading == "named":
                s = s[s["detector"].isin(NAMED[method][event])]
            n = len(s)
        else:
            g = st[(st["run_id"] == rid) & (st["event"] == event) & (st["method"] == method)].sort_values("cut")
            a = g["alarm"].to_numpy(bool)
            n = int(a[0]) + int(np.sum(a[1:] & ~a[:-1])) if a.size else 0
        per_run.append((c["source"], n, steps))
    if not per_run:
        return float("nan"), float("nan"), 0
    df = pd.DataFrame(per_run, columns=["source", "n", "steps"])
    src = df.groupby("source")[["n", "steps"]].sum()
    sw = float((1000 * src["n"] / src["steps"].clip(lower=1)).mean())
    return sw, float(1000 * df["n"].sum() / max(df["steps"].sum(), 1)), len(df)


def _live_alerts(fc: pd.DataFrame, rid: str, level: float) -> list:
    """The alerts bayesgrpo's live integrations would send at this run's cuts (its own rules replayed, the
    decline alarm at ``level``)."""
    from bayesgrpo.integrations.alerts import AlertRules

    names = {v: k for k, v in SEV.items()}
    rules, out = AlertRules(decline=level, run_id=rid), []
    for r in fc[fc["run_id"] == rid].sort_values("cut").to_dict("records"):
        flags = {c[5:]: names[int(r[c])] for c in r if c.startswith("flag_") and np.isfinite(r[c])}
        out += rules.update(dict(ok=True, status="ok", p_decline=r["p_decline"], advice=r["advice"], flags=flags,
                                 observed_until=r["observed_until"]))  # fmt: skip
    return out


def healthy_alarms(cases: pd.DataFrame, fc: pd.DataFrame, sig: pd.DataFrame) -> dict:
    """Every failure alert each tool sends on the runs with no decline, collapse or degenerate event at any cut,
    per 1,000 steps up to each run's last cut: bayesgrpo's live alerts (P(decline) and the flags; its stop
    advice apart: a stop on a healthy run is judged by its bad-stop rate) and every alert of each monitor."""
    bad = cases.groupby("run_id")[["decline", "collapse", "degenerate"]].max().fillna(0).max(axis=1)
    last = cases[cases["run_id"].isin(bad[bad == 0].index)].sort_values("cut").groupby("run_id").last()
    from bayesgrpo.diagnose.common import MODES

    per: dict[str, list] = {m: [] for m in ("bayesgrpo", "bayesgrpo P(decline) only", "bayesgrpo flags only",
                                            *(f"bayesgrpo flag/{mode}" for mode in MODES), "bayesgrpo stop advice",
                                            *MONITORS)}  # fmt: skip
    levels = alarm_levels(cases, fc, "decline")[0]
    for rid, c in last.iterrows():
        steps = float(c["cut_step"] - c["s0"])
        al = _live_alerts(fc, rid, levels[c["source"]])
        per["bayesgrpo"].append((c["source"], sum(a.signal != "advice" and a.level != "INFO" for a in al), steps))
        per["bayesgrpo stop advice"].append((c["source"], sum(a.signal == "advice" for a in al), steps))
        per["bayesgrpo P(decline) only"].append((c["source"], sum(a.signal == "decline" and a.level != "INFO"
                                                                  for a in al), steps))  # fmt: skip
        per["bayesgrpo flags only"].append((c["source"], sum(a.signal.startswith("flag/") for a in al), steps))
        for mode in MODES:  # each flag apart: which of them fire on healthy runs
            per[f"bayesgrpo flag/{mode}"].append((c["source"], sum(a.signal == f"flag/{mode}" for a in al), steps))
        for m in MONITORS:
            s = sig[(sig["monitor"] == m) & (sig["run_id"] == rid) & sig["announced"].astype(bool)
                    & (sig["step"] <= c["cut_step"])]  # fmt: skip
            per[m].append((c["source"], len(s), steps))
    out = {}
    for m, rows in per.items():
        df = pd.DataFrame(rows, columns=["source", "n", "steps"])
        src = df.groupby("source")[["n", "steps"]].sum()
        out[m] = dict(fa_sw=float((1000 * src["n"] / src["steps"].clip(lower=1)).mean()) if len(src) else float("nan"),
                      fa_pc=float(1000 * df["n"].sum() / max(df["steps"].sum(), 1)), runs=len(df),
                      sources=int(df["source"].nunique()), alerts=int(df["n"].sum()))  # fmt: skip
    return out


def metrics(st: pd.DataFrame, sig: pd.DataFrame, cases: pd.DataFrame) -> pd.DataFrame:
    """One row per event x cut x method x reading: cases, AUROC, precision, recall, lead, false alarms."""
    rows = []
    for (e, cut, m, rd), g in st.groupby(["event", "cut", "method", "reading"], sort=False):
        g = g[np.isfinite(g["score"])]
        w = source_weights(g["source"])
        one = np.ones(len(g))
        p_sw, r_sw = precision_recall(g["alarm"], g["y"], w)
        p_pc, r_pc = precision_recall(g["alarm"], g["y"], one)
        lead = _lead(g)
        fa_sw, fa_pc, n_h = false_alarms(st, sig, cases, e, m, rd)
        rows.append(dict(event=e, cut=cut, method=m, reading=rd, cases=len(g), positives=int(g["y"].sum()),
                         sources=g["source"].nunique(), auroc_sw=auroc(g["score"], g["y"], w),
                         auroc_pc=auroc(g["score"], g["y"], one), precision_sw=p_sw, recall_sw=r_sw,
                         precision_pc=p_pc, recall_pc=r_pc, lead_sw=_wmedian(lead, w), lead_pc=_wmedian(lead, one),
                         fa_sw=fa_sw, fa_pc=fa_pc, healthy_runs=n_h))  # fmt: skip
    return pd.DataFrame(rows)


def _better(g: pd.DataFrame) -> pd.Series:
    """A monitor's shown reading at one event and cut: its larger source-weighted AUROC (then recall)."""
    key = g["auroc_sw"].fillna(-1.0) * 10 + g["recall_sw"].fillna(0.0)
    return g.loc[key.idxmax()]


def headline(mt: pd.DataFrame, st: pd.DataFrame) -> pd.DataFrame:
    """Per event x cut, one row per method (the monitors' better reading) with bayesgrpo's precision at the
    recall of the best monitor (the monitor of larger source-weighted AUROC)."""
    rows = []
    for (e, cut), g in mt.groupby(["event", "cut"], sort=False):
        shown = {m: _better(g[g["method"] == m]) for m in METHODS}
        # the best monitor: the larger AUROC among those whose alarms caught a true case (else among all)
        cand = [m for m in MONITORS if shown[m]["recall_sw"] > 0] or list(MONITORS)
        best = max(cand, key=lambda m: (np.nan_to_num(shown[m]["auroc_sw"], nan=-1.0), shown[m]["recall_sw"]))
        for m in METHODS:
            r = shown[m].to_dict()
            r["best_monitor"] = best
            if m not in MONITORS:
                s = st[(st["event"] == e) & (st["cut"] == cut) & (st["method"] == m)]
                s = s[np.isfinite(s["score"])]
                w = source_weights(s["source"])
                r["p_at_best_recall_sw"] = precision_at_recall(s["score"], s["y"], w, shown[best]["recall_sw"])
                r["p_at_best_recall_pc"] = precision_at_recall(
                    s["score"], s["y"], np.ones(len(s)), shown[best]["recall_pc"]
                )
                r["best_precision_sw"], r["best_precision_pc"] = (
                    shown[best]["precision_sw"],
                    shown[best]["precision_pc"],
                )
                r["best_recall_sw"], r["best_recall_pc"] = shown[best]["recall_sw"], shown[best]["recall_pc"]
            rows.append(r)
    return pd.DataFrame(rows)


#: the live alerts' signals whose error rate the benchmark measures: (event, method, what an alarm is)
ALERT_SIGNALS = {
    "decline": ("decline", "forecast", "P(decline) >= the alarm level chosen without the case's source"),
    "flag/dynamical_instability": ("decline", "diagnose", "dynamical_instability at warning or critical"),
    "flag/advantage_degeneracy": ("degenerate", "diagnose", "advantage_degeneracy at warning or critical"),
}


def alert_rates(st: pd.DataFrame) -> dict:
    """The share of each live alert signal's alarms that were false (the event did not follow), over every
    case of every cut, source-weighted (the larger of that and per case, as the stop policy reports)."""
    out = {}
    for sig, (e, m, what) in ALERT_SIGNALS.items():
        g = st[(st["event"] == e) & (st["method"] == m)]  # diagnose's alarm for e: the mode named for it
        g = g[np.isfinite(g["score"])]
        p_sw, _ = precision_recall(g["alarm"].astype(bool), g["y"], source_weights(g["source"]))
        p_pc, _ = precision_recall(g["alarm"].astype(bool), g["y"], np.ones(len(g)))
        n = int(g["alarm"].astype(bool).sum())
        fs = [1 - p for p in (p_sw, p_pc) if np.isfinite(p)]
        out[sig] = dict(alarm=what, event=e, false_share=max(fs) if fs else None, alarms=n, cases=len(g),
                        sources=int(g["source"].nunique()))  # fmt: skip
    return out


# ----------------------------------------------------------------------------- report
def _f(x, nd: int = 2) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.{nd}f}"


def _pair(r, col: str, nd: int = 2) -> str:
    return f"{_f(r[col + '_sw'], nd)} ({_f(r[col + '_pc'], nd)})"


BOOT = 1000


def auroc_interval(st: pd.DataFrame, *, event: str, cut: float, method: str, reading: str) -> tuple[float, float]:
    """The 90% interval of a source-weighted AUROC over sources drawn with replacement (:data:`BOOT` draws)."""
    g = st[(st["event"] == event) & (st["cut"] == cut) & (st["method"] == method) & (st["reading"] == reading)]
    g = g[np.isfinite(g["score"])]
    by = dict(list(g.groupby("source")))
    names, rng, vals = sorted(by), np.random.default_rng(0), []
    for _ in range(BOOT):
        pick = rng.choice(len(names), size=len(names), replace=True)
        parts = [by[names[i]].assign(_w=1.0 / (len(names) * len(by[names[i]]))) for i in pick]
        d = pd.concat(parts)
        vals.append(auroc(d["score"], d["y"], d["_w"]))
    v = np.asarray(vals)
    v = v[np.isfinite(v)]
    return (float(np.quantile(v, 0.05)), float(np.quantile(v, 0.95))) if v.size else (float("nan"), float("nan"))


def targets(hl: pd.DataFrame, fa: dict, st: pd.DataFrame) -> list[dict]:
    """The issue's targets, each with bayesgrpo's number, the monitors' and by how much it is met or missed (the
    AUROC with its 90% source-bootstrap interval)."""
    out = []
    at = hl[(hl["event"] == "decline") & (hl["cut"] == 0.3)].set_index("method")
    ours, mons = at.loc["forecast", "auroc_sw"], {m: at.loc[m, "auroc_sw"] for m in MONITORS}
    need = max([TARGETS["auroc_decline_30"], *[v for v in mons.values() if np.isfinite(v)]])
    ci = {m: auroc_interval(st, event="decline", cut=0.3, method=m, reading=at.loc[m, "reading"]) for m in METHODS}
    out.append(dict(target="AUROC of decline at 30%, source-weighted: >= 0.75 and above both monitors", ours=ours,
                    theirs=mons, met=bool(ours >= TARGETS["auroc_decline_30"] and all(ours > v for v in mons.values()
                                                                                    if np.isfinite(v))),
                    margin=ours - need, interval=ci))  # fmt: skip
    for e in ("decline", "plateau"):
        for cut in CUTS:
            r = hl[(hl["event"] == e) & (hl["cut"] == cut) & (hl["method"] == "forecast")].iloc[0]
            theirs = r["best_precision_sw"]
            ratio = r["p_at_best_recall_sw"] / theirs if np.isfinite(theirs) and theirs > 0 else float("nan")
            caught = np.isfinite(r["best_recall_sw"]) and r["best_recall_sw"] > 0
            out.append(dict(target=f"{e} at {cut:.0%}: precision at the recall of the best monitor ({r['best_monitor']}, "
                                   f"recall {_f(r['best_recall_sw'])}) >= 1.5 x theirs"
                                   + ("" if caught else " (n/a: no monitor alarm caught a true case)"),
                            ours=r["p_at_best_recall_sw"], theirs={r["best_monitor"]: theirs},
                            met=bool(ratio >= TARGETS["precision_ratio"]) if caught else None,
                            margin=ratio - TARGETS["precision_ratio"], ratio=ratio, recall=r["best_recall_sw"],
                            monitor=r["best_monitor"]))  # fmt: skip
    ours, mons = fa["bayesgrpo"]["fa_sw"], {m: fa[m]["fa_sw"] for m in MONITORS}
    out.append(dict(target="false alarms per 1,000 steps of healthy runs (every failure alert; no decline, collapse or "
                           "degenerate event at any cut) <= the monitors'", ours=ours, theirs=mons,
                    met=bool(all(ours <= v for v in mons.values())), margin=min(mons.values()) - ours))  # fmt: skip
    return out


def write_report(cases, hl, tg, rates, fa, info) -> None:
    from bayesgrpo.io.output import write_text

    L = ["# Early warnings beside the run monitors GRPO users install (issue 32)", "",
         f"Generated by `nice -n 10 .venv/bin/python -m bench.monitors` ({info['date']}). Versions: bayesgrpo "
         f"{info['versions']['bayesgrpo']}, **rlwatch {info['versions']['rlwatch']}**, **rldoctor "
         f"{info['versions']['rldoctor']}** (both at their defaults, through their TRL callbacks). Definitions: the "
         "docstring of `bench/monitors.py`.", "",
         f"**Data**: {info['runs']} development runs of {info['sources']} sources (at most {MAX_RUNS} per source; "
         f"{', '.join(info['folders'])}), each cut at {', '.join(f'{c:.0%}' for c in CUTS)} of its steps: "
         f"{len(cases)} cases. Forecasts: `Forecaster('{KIND}')` through `forecast_batch`, read by the live "
         f"worker's `summarize_fit`, with `SamplerConfig(draws={info['draws']}, tune={info['tune']}, seed=0)` (fewer "
         "draws than the default 1000, for CPU).", "",
         "Numbers: **source-weighted** (every source the same weight), per case in brackets. AUROC of the score; "
         "precision / recall of the alarm; *P@best*: bayesgrpo's precision at the recall of the best monitor (larger "
         "AUROC); lead: median steps from the alarm to the event (plateau, degenerate: steps left when the alarm "
         "comes); FA: alarms per 1,000 steps of runs where the event happens at no cut. Monitors: their better "
         "reading (*any* detector or the detectors *named* for the event), per cut.", "", "## Targets", "",
         "| target | bayesgrpo forecast | monitors | met | margin |", "|---|---|---|---|---|"]  # fmt: skip
    for t in tg:
        th = ", ".join(f"{k} {_f(v)}" for k, v in t["theirs"].items())
        extra = f" (ratio {_f(t['ratio'])})" if "ratio" in t else ""
        if "interval" in t:
            extra += " [90%: {}-{}]".format(*(_f(x) for x in t["interval"]["forecast"]))
            th = ", ".join(f"{k} {_f(v)} [90%: {_f(t['interval'][k][0])}-{_f(t['interval'][k][1])}]"
                           for k, v in t["theirs"].items())  # fmt: skip
        L.append(
            f"| {t['target']} | {_f(t['ours'])}{extra} | {th} | {'n/a' if t['met'] is None else 'yes' if t['met'] else '**no**'} | {_f(t['margin'])} |"
        )
    for e in EVENTS:
        g = hl[hl["event"] == e]
        if not len(g):
            continue
        L += ["", f"## {e}", "", "| cut | method | reading | cases (true) | AUROC | precision | recall | P@best | lead | FA / 1k steps |",
              "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for r in g.sort_values(["cut"]).itertuples():
            d = r._asdict()
            pb = (
                f"{_f(d.get('p_at_best_recall_sw'))} ({_f(d.get('p_at_best_recall_pc'))})"
                if r.method not in MONITORS
                else ""
            )
            L.append(f"| {r.cut:.0%} | {r.method} | {r.reading} | {r.cases} ({r.positives}) | {_pair(d, 'auroc')} | "
                     f"{_pair(d, 'precision')} | {_pair(d, 'recall')} | {pb} | {_pair(d, 'lead', 0)} | {_pair(d, 'fa', 1)} |")  # fmt: skip
    L += ["", "## False alarms on healthy runs, every alert", "",
          "Runs with no decline, collapse or degenerate event at any cut; alerts per 1,000 steps up to the last cut. "
          "bayesgrpo: the alerts its live integrations send (`AlertRules` replayed over the three cuts: P(decline) "
          "crossing its alarm level (chosen without the run's source) and failure flags reaching warning / critical); its stop advice is counted apart (a stop on a "
          "healthy run is right when the run has plateaued: its error is the bad-stop rate). Monitors: every alert "
          "they sent.", "", "| tool | alerts / 1k steps | runs | sources | alerts |", "|---|---|---|---|---|"]  # fmt: skip
    for m, v in fa.items():
        L.append(f"| {m} | {_pair(v, 'fa', 1)} | {v['runs']} | {v['sources']} | {v['alerts']} |")
    L += ["", "## Where a target is missed, and why", "", *_why(tg, hl, fa)]
    L += ["", "## The live alerts' measured error rates", "",
          "Shipped as `bayesgrpo/resources/alerts_oscillator.json` (read by `bayesgrpo.decisions.alerts`); the alert "
          "text quotes them. Share of alarms the event did not follow, every case of every cut, the larger of "
          "source-weighted and per case.", "", "| signal | alarm | event | false share | alarms | cases | sources |",
          "|---|---|---|---|---|---|---|"]  # fmt: skip
    for k, v in rates.items():
        L.append(
            f"| {k} | {v['alarm']} | {v['event']} | {_f(v['false_share'])} | {v['alarms']} | {v['cases']} | {v['sources']} |"
        )
    L += ["", "## Notes", "", *info["notes"]]
    write_text(RESULTS / "monitors.md", "\n".join(L) + "\n")


def _why(tg: list[dict], hl: pd.DataFrame, fa: dict) -> list[str]:
    """The closing note of each missed target, from the numbers measured."""
    out = []
    for t in tg:
        if t["met"] is not False:
            continue
        if "interval" in t:
            lo, hi = t["interval"]["forecast"]
            n = hl[(hl["event"] == "decline") & (hl["cut"] == 0.3) & (hl["method"] == "forecast")].iloc[0]
            at = hl[(hl["event"] == "decline") & (hl["method"] == "forecast")].set_index("cut")["auroc_sw"]
            out.append(f"- *AUROC of decline at 30%*: {_f(t['ours'])}, {_f(-t['margin'])} short of the target, with a "
                       f"90% source-bootstrap interval of {_f(lo)}-{_f(hi)} (it holds 0.75): {int(n['positives'])} true "
                       f"declines of {int(n['cases'])} cases at this cut. It is above both monitors; at 20% and 50% "
                       f"the same probability scores {_f(at[0.2])} and {_f(at[0.5])}.")  # fmt: skip
        elif "ratio" in t:
            b = next(iter(t["theirs"].values()))
            out.append(f"- *{t['target'].split(':')[0]}*: the best monitor, {t['monitor']}, alarms on few cases (recall "
                       f"{_f(t['recall'])}) at precision {_f(b)}; at that recall "
                       f"bayesgrpo's precision is {_f(t['ours'])}, ratio {_f(t['ratio'])}"
                       + (" (1.5 x a precision of 1.00 cannot be reached)" if b >= 1 / 1.5 else "") + ".")  # fmt: skip
        else:
            fl, dec = fa["bayesgrpo flags only"], fa["bayesgrpo P(decline) only"]
            out.append(f"- *False alarms on healthy runs*: {_f(t['ours'], 1)} per 1,000 steps against rldoctor's "
                       f"{_f(fa['rldoctor']['fa_sw'], 1)}; the failure flags (diagnose's warnings, which judge what the prefix already shows, "
                       f"not what follows) give {_f(fl['fa_sw'], 1)} of them, the "
                       f"P(decline) alerts {_f(dec['fa_sw'], 1)}. The issue asks for an alert at every flag reaching "
                       "warning; the alert text quotes each flag's measured false share.")  # fmt: skip
    return out or ["- None."]


def _notes(runs, cases: pd.DataFrame) -> list[str]:
    d = runs.data
    has = {c: int(d.groupby("run_id")[c].apply(lambda x: x.notna().any()).sum()) for c in monitor_peers.TRL_KEYS
           if c in d.columns}  # fmt: skip
    ev = cases.groupby("cut")[list(EVENTS)].sum().astype(int)
    return [
        "- Runs that log each channel a monitor reads: " + ", ".join(f"`{k}` {v}" for k, v in has.items())
        + f" (of {len(runs.run_ids)}). rlwatch's entropy, advantage, loss and gradient-norm detectors and rldoctor's "
        "entropy, clip and gradient checks stay silent without their channels.",
        "- True cases per cut: " + "; ".join(f"{c:.0%}: " + ", ".join(f"{e} {ev.loc[c, e]}" for e in EVENTS) for c in ev.index)
        + ". *degenerate* is defined only on runs logging `frac_reward_zero_std`.",
        "- *collapse* reads the issue's 'below 0.3 of the range' like decline's definition: the final reward more than "
        "0.3 of the run's range below the level at the cut.",
        "- bayesgrpo alarms at the cut (its alarm step is the cut); a monitor's alarm step is that of its first alert "
        "by the cut, so its lead time can only be longer for the same detection.",
        "- The forecast's P(decline) thresholds the forecast's own scale (the range logged so far), the truth the "
        "complete run's 5-95% range.",
    ]  # fmt: skip


def _json_safe(x):
    if isinstance(x, dict):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return None if not np.isfinite(x) else float(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--report-only", action="store_true", help="score the ledgers as they are (no new forecast)")
    ap.add_argument("--max-runs", type=int, default=MAX_RUNS, help="runs per source")
    ap.add_argument("--draws", type=int, default=DRAWS)
    ap.add_argument("--tune", type=int, default=TUNE)
    a = ap.parse_args(argv)
    from bayesgrpo._version import __version__
    from bayesgrpo.io.output import write_text

    runs = load_runs(a.max_runs)
    cases = truth_cases(runs)
    if a.report_only:
        fc, sig = _read(LEDGER / "forecasts.csv"), _read(LEDGER / "signals.csv")
    else:
        fc = forecast_cases(runs, cases, draws=a.draws, tune=a.tune)
        sig = monitor_cases(runs)
    cases = cases[cases["key"].isin(set(fc["key"]))].reset_index(drop=True)  # every method on the same cases
    sig = sig[sig["run_id"].isin(set(cases["run_id"]))]
    st = score_table(cases, fc, sig)
    mt = metrics(st, sig, cases)
    hl = headline(mt, st)
    fa = healthy_alarms(cases, fc, sig)
    tg = targets(hl, fa, st)
    rates = alert_rates(st)
    rates["decline"]["alarm_level"] = alarm_levels(cases, fc, "decline")[1]
    info = dict(date=time.strftime("%Y-%m-%d"), versions={"bayesgrpo": __version__, **monitor_peers.versions()},
                runs=int(cases["run_id"].nunique()), sources=int(cases["source"].nunique()),
                folders=sorted(set(runs.meta["dev_folder"])), draws=a.draws, tune=a.tune, notes=_notes(runs, cases))  # fmt: skip
    write_report(cases, hl, tg, rates, fa, info)
    out = dict(
        info,
        targets=tg,
        headline=hl.to_dict("records"),
        metrics=mt.to_dict("records"),
        alert_rates=rates,
        healthy_alarms=fa,
    )
    write_text(RESULTS / "monitors.json", json.dumps(_json_safe(out), indent=1) + "\n")
    ship = dict(kind=KIND, signals=rates,
                provenance=dict(command="nice -n 10 .venv/bin/python -m bench.monitors", date=info["date"],
                                runs=info["runs"], sources=info["sources"], cases=len(cases), data=info["folders"],
                                sampler={"draws": a.draws, "tune": a.tune},
                                method="every development run cut at 20/30/50% of its steps; truth from the complete run"))  # fmt: skip
    write_text(
        ROOT / "bayesgrpo" / "resources" / "alerts_oscillator.json", json.dumps(_json_safe(ship), indent=1) + "\n"
    )
    print(f"wrote {RESULTS / 'monitors.md'}, monitors.json and bayesgrpo/resources/alerts_oscillator.json")


if __name__ == "__main__":
    main()
