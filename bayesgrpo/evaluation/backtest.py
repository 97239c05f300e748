"""Backtests: forecast truncated complete runs and score the forecasts against what was logged later.

``backtest(runs, cutoffs=(0.1, 0.2, 0.3, 0.5))`` truncates every complete run at each cutoff (a
fraction of its own step span, as :meth:`RunSet.truncate`), forecasts the *final reward* to the run's
own last step with bayesgrpo (one :meth:`Forecaster.fit` call per cutoff and chunk of runs, so the
compiled model is reused) and with the peers of :mod:`bayesgrpo.evaluation.peers` on the identical prefix and
horizon, and scores each forecast against the truth.

Definitions
-----------
* **truth** -- the full run's final reward: the mean logged reward over ``(s0 + 0.9 (H - s0), H]``
  (:func:`bayesgrpo.evaluation.metrics.final_reward`, ``final_window = 0.1``), ``H`` = the run's last step.
* **normalised** errors, CRPS and widths are divided by the run's 5-95% reward range over the whole
  run (:func:`bayesgrpo.evaluation.metrics.reward_range`), so runs on different reward scales pool.
* **coverage** of the central 50/80/90% intervals of the forecast draws; **PIT** = rank of the truth
  among the draws (randomised for ties).
* **stop step** (bayesgrpo only) -- when the run has a noise-free expected-reward column
  (``reward_expected``, the testbed), the true stop step is the first step at which that curve has
  realised 95% of its gain from its start to its final-window mean; the error is reported in steps
  and as a share of the span ``H - s0``. Elsewhere a **plateau-reached** check: the run truly
  plateaued when the mean of its last 10% of points differs from the mean of the 10% before by less
  than 5% of its reward range; bayesgrpo predicts it when ``p_stop_before_horizon >= 0.5``.
* a case is **skipped** (counted with a reason, not scored) when the prefix has fewer than
  ``min_points`` (5) logged points or nothing is left to forecast.

Outputs (``out_dir``): ``cases.csv`` (one row per run x cutoff x method, the resume ledger),
``skipped.csv``, ``summary.csv``, ``summary.json``, ``summary.md`` and figures
``calibration.png``, ``error_vs_cutoff.png``, ``crps_vs_cutoff.png``, ``examples.png``.
With ``resume=True`` cases already in ``cases.csv`` are not recomputed (safe to interrupt).
"""

from __future__ import annotations

import json
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pandas as pd

from bayesgrpo.evaluation.metrics import crps_sample, final_reward, final_window_mask, pit, reward_range
from bayesgrpo.schema import REWARD, STEP, RunSet

__all__ = [
    "backtest",
    "BacktestResult",
    "score_draws",
    "true_stop_step",
    "plateau_reached",
    "summarize",
    "PEER_ALIASES",
    "DEFAULT_PEERS",
    "CASE_COLUMNS",
]

#: names accepted for peers -> registry name in :mod:`bayesgrpo.evaluation.peers`
PEER_ALIASES = {"exponential": "sat_exp", "exp": "sat_exp", "scalerl": "scalerl_sigmoid", "lcpfn": "lc_pfn"}
DEFAULT_PEERS = ("last_value", "exponential", "scalerl", "pow3", "domhan")
LEVELS = (0.5, 0.8, 0.9)
QUANTS = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)
BAYES = "bayesgrpo"
BAYES_CTX = "bayesgrpo_ctx"
KEY = ["run_id", "cutoff", "method"]

CASE_COLUMNS = [
    "run_id", "source", "cutoff", "method", "ok", "message", "n_obs", "observed_until", "s0", "horizon",
    "truth", "range", "median", "mean", *[f"q{int(q * 100):02d}" for q in QUANTS],
    "abs_err", "nae", "crps", "ncrps", "pit",
    *[f"cover{int(l * 100)}" for l in LEVELS], *[f"width{int(l * 100)}" for l in LEVELS],
    *[f"nwidth{int(l * 100)}" for l in LEVELS],
    "stop_true", "stop_pred", "stop_err", "stop_nerr", "plateau_true", "plateau_pred", "p_stop_before_horizon",
    "seconds", "r_hat_max", "ess_min", "divergences", "n_context",
]  # fmt: skip

Progress = Callable[[int, int, str], None]


# ============================================================================ scoring primitives
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
    out.update({f"q{int(p * 100):02d}": float(v) for p, v in zip(QUANTS, q)})
    out["abs_err"] = abs(med - truth)
    out["nae"] = out["abs_err"] / scale
    out["crps"] = float(crps_sample(x, truth))
    out["ncrps"] = out["crps"] / scale
    out["pit"] = float(pit(x, truth, seed=0))
    for lev in LEVELS:
        lo, hi = np.quantile(x, [(1 - lev) / 2, (1 + lev) / 2])
        k = int(lev * 100)
        out[f"cover{k}"] = float(lo <= truth <= hi)
        out[f"width{k}"] = float(hi - lo)
        out[f"nwidth{k}"] = float(hi - lo) / scale
    return out


def run_truth(df: pd.DataFrame, final_window: float = 0.1) -> tuple[float, float, int, int]:
    """(final reward, 5-95% reward range, s0, H) of a complete run's rows."""
    s = df[STEP].to_numpy(dtype=float)
    r = df[REWARD].to_numpy(dtype=float)
    s0, H = int(s.min()), int(s.max())
    return final_reward(s, r, s0=s0, horizon=H, final_window=final_window), reward_range(r), s0, H


def true_stop_step(steps, expected, *, stop_fraction: float = 0.95, final_window: float = 0.1,
                   min_gain: float = 1e-3) -> float:
    """First step at which a noise-free reward curve has realised ``stop_fraction`` of its gain.

    Gain = mean over the final window minus the value at the first step. Returns NaN when the
    absolute gain is below ``min_gain`` (relative to the curve's range; nothing to realise) or the
    curve has no finite values. Works for falling curves too (gain < 0).
    """
    s = np.asarray(steps, dtype=float)
    e = np.asarray(expected, dtype=float)
    ok = np.isfinite(s) & np.isfinite(e)
    s, e = s[ok], e[ok]
    if s.size < 2:
        return float("nan")
    r0 = e[0]
    win = final_window_mask(s, s0=s[0], horizon=s[-1], final_window=final_window)
    plateau = float(e[win].mean()) if win.any() else float(e[-1])
    gain = plateau - r0
    rng_ = float(np.ptp(e)) or 1.0
    if abs(gain) < min_gain * max(rng_, abs(plateau), 1e-12):
        return float("nan")
    realised = (e - r0) / gain
    hit = np.flatnonzero(realised >= stop_fraction)
    return float(s[hit[0]]) if hit.size else float("nan")


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
    return bool(abs(a.mean() - b.mean()) < max(tol * reward_range(r), 2.0 * se))


def _source_col(meta: pd.DataFrame) -> str | None:
    for c in ("source_repo", "sweep", "family", "dataset"):
        if c in meta.columns and meta[c].notna().any():
            return c
    return None


def _sources(runs: RunSet, source_col: str | None) -> dict:
    col = source_col or _source_col(runs.meta)
    if col is None or col not in runs.meta.columns:
        return {r: "all" for r in runs.run_ids}
    return {r: (str(v) if pd.notna(v) else "unknown") for r, v in runs.meta[col].items()}


def _peer_name(name: str) -> str:
    return PEER_ALIASES.get(name, name)


def resolve_peers(spec) -> tuple[str, ...]:
    """``"all"`` / ``"none"`` / comma list / iterable -> peer names (aliases kept for display)."""
    if spec is None:
        return ()
    if isinstance(spec, str):
        s = spec.strip().lower()
        if s in ("none", ""):
            return ()
        if s == "all":
            return (*DEFAULT_PEERS, "lc_pfn")
        spec = [p.strip() for p in spec.split(",") if p.strip()]
    return tuple(spec)


# ============================================================================ result
@dataclass
class BacktestResult:
    """Cases, skipped cases and aggregates of a backtest.

    Attributes
    ----------
    cases : DataFrame (:data:`CASE_COLUMNS`), one row per run x cutoff x method
    skipped : DataFrame ``run_id, source, cutoff, reason``
    summary : DataFrame, one row per cutoff x method (:func:`summarize`)
    summary_by_source : DataFrame, the same per source as well
    summary_weighted : DataFrame, source-weighted (each source counts equally)
    out_dir : Path or None
    """

    cases: pd.DataFrame
    skipped: pd.DataFrame
    summary: pd.DataFrame
    summary_by_source: pd.DataFrame
    summary_weighted: pd.DataFrame
    out_dir: Path | None = None
    figures: list = field(default_factory=list)

    def table(self, weighted: bool = False) -> pd.DataFrame:
        return self.summary_weighted if weighted else self.summary


# ============================================================================ aggregation
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
        k = int(lev * 100)
        d[f"cover{k}"] = float(ok[f"cover{k}"].mean()) if len(ok) else float("nan")
        d[f"mean_nwidth{k}"] = float(ok[f"nwidth{k}"].mean()) if len(ok) else float("nan")
    d["sec_per_forecast"] = float(g["seconds"].mean()) if len(g) else float("nan")
    st = ok["stop_nerr"].dropna() if "stop_nerr" in ok else pd.Series(dtype=float)
    d["n_stop"] = int(len(st))
    d["median_stop_nerr"] = float(st.abs().median()) if len(st) else float("nan")
    pl = ok[["plateau_true", "plateau_pred"]].dropna() if "plateau_true" in ok else pd.DataFrame()
    d["n_plateau"] = int(len(pl))
    d["plateau_acc"] = float((pl["plateau_true"].astype(bool) == pl["plateau_pred"].astype(bool)).mean()) if len(pl) else float("nan")
    return d


def summarize(cases: pd.DataFrame, by=("cutoff", "method")) -> pd.DataFrame:
    """Aggregates per group: failure rate, median/mean normalised abs error, mean normalised CRPS,
    50/80/90% coverage and mean normalised widths, seconds per forecast, stop-step / plateau checks."""
    if cases.empty:
        return pd.DataFrame()
    rows = []
    for key, g in cases.groupby(list(by), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key)), **_agg(g)})
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


# ============================================================================ the backtest
def backtest(
    runs: RunSet,
    *,
    cutoffs: Iterable[float] = (0.1, 0.2, 0.3, 0.5),
    model: str = "oscillator",
    context: RunSet | None = None,
    peers: Iterable[str] | str | None = DEFAULT_PEERS,
    final_window: float = 0.1,
    sampler=None,
    out_dir=None,
    resume: bool = True,
    progress: Progress | None = None,
    include_single: bool = True,
    max_context: int = 6,
    source_col: str | None = None,
    min_points: int = 5,
    chunk: int = 20,
    n_draws: int = 1000,
    seed: int = 0,
    forecaster_factory: Callable | None = None,
    example_runs: Iterable[str] | None = None,
    make_figures: bool = True,
    peer_kwargs: dict | None = None,
) -> BacktestResult:
    """Backtest bayesgrpo (and peers) on complete runs truncated at each cutoff.

    Parameters
    ----------
    runs : RunSet
        Complete runs (each run's last logged step is its horizon).
    cutoffs : floats in (0, 1)
        Fractions of each run's step span that are observed.
    model : str
        Forecaster model kind.
    context : RunSet, optional
        Complete runs used as hierarchical context ("with context", method ``bayesgrpo_ctx``): each
        forecast run is fitted jointly with up to ``max_context`` *other* runs of ``context`` from the
        same source (``source_col``; never itself). Runs with no such run fall back to no context
        (``n_context = 0``). With ``include_single`` the single-run ``bayesgrpo`` is scored as well.
    peers : names or "all"/"none"
        Peers from :mod:`bayesgrpo.evaluation.peers` (aliases ``exponential`` -> ``sat_exp``, ``scalerl`` ->
        ``scalerl_sigmoid``).
    final_window : float
        Final-window share defining the target.
    sampler : SamplerConfig, optional
    out_dir : path, optional
        Where ``cases.csv``, summaries and figures are written (``cases.csv`` is the resume ledger).
    resume : bool
        Skip cases already in ``out_dir/cases.csv``.
    progress : callable, optional
        ``progress(done, total, message)`` after each forecast unit.
    source_col : str, optional
        Metadata column naming the source (default: ``source_repo``, else ``sweep``/``family``/``dataset``).
    min_points : int
        Prefixes with fewer logged points are skipped (reason recorded).
    chunk : int
        Runs per ``fit`` call (the compiled model is reused across calls; smaller chunks lose less
        work on interruption).
    forecaster_factory : callable, optional
        ``factory(hierarchical: bool) -> object with .fit(runs, horizon=..., context=...)``; default
        builds :class:`bayesgrpo.forecast.Forecaster` (tests pass a fake).
    example_runs : run ids, optional
        Runs whose fan data are stored for the examples figure (default: up to 6 spread over sources).
    peer_kwargs : dict, optional
        ``{peer name: {setting: value}}`` passed to :func:`bayesgrpo.evaluation.peers.get_peer`
        (e.g. ``{"pow3": {"n_boot": 40}}``).

    Returns
    -------
    BacktestResult
    """
    cutoffs = tuple(float(c) for c in cutoffs)
    peer_names = tuple(p for p in resolve_peers(peers))
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    src = _sources(runs, source_col)
    ctx_src = _sources(context, source_col) if context is not None else {}

    if forecaster_factory is None:
        from bayesgrpo.forecast.forecaster import Forecaster, SamplerConfig

        smp = sampler or SamplerConfig(seed=seed)

        def forecaster_factory(hierarchical: bool):
            return Forecaster(model, final_window=final_window, hierarchical=hierarchical, sampler=smp)

    # ---------------------------------------------------------------- ledger
    done_rows: list[dict] = []
    if out is not None and resume and (out / "cases.csv").exists():
        prev = pd.read_csv(out / "cases.csv")
        done_rows = prev.to_dict("records")
    done = {(str(r["run_id"]), round(float(r["cutoff"]), 6), str(r["method"])) for r in done_rows}
    rows = list(done_rows)

    def flush():
        if out is None:
            return
        df = pd.DataFrame(rows, columns=CASE_COLUMNS) if rows else pd.DataFrame(columns=CASE_COLUMNS)
        tmp = out / "cases.csv.tmp"
        df.to_csv(tmp, index=False)
        tmp.replace(out / "cases.csv")

    # ---------------------------------------------------------------- per-run facts
    full = {r: runs.run(r) for r in runs.run_ids}
    facts = {}
    for r, df in full.items():
        truth, rng_, s0, H = run_truth(df, final_window)
        st = float("nan")
        if "reward_expected" in df.columns and df["reward_expected"].notna().sum() > 10:
            st = true_stop_step(df[STEP], df["reward_expected"], final_window=final_window)
        has_expected = "reward_expected" in df.columns and df["reward_expected"].notna().sum() > 10
        facts[r] = dict(truth=truth, range=rng_, s0=s0, H=H, stop_true=st, has_expected=has_expected,
                        plateau_true=float("nan") if has_expected else plateau_reached(df[REWARD]))

    # ---------------------------------------------------------------- plan
    methods = []
    if context is None or include_single:
        methods.append(BAYES)
    if context is not None:
        methods.append(BAYES_CTX)
    methods += list(peer_names)
    plan: dict[float, list[str]] = {}
    skipped = []
    for c in cutoffs:
        ok_ids = []
        for r, df in full.items():
            f = facts[r]
            cut = f["s0"] + c * (f["H"] - f["s0"])
            pre = df.loc[df[STEP] <= cut]
            if len(pre) < min_points:
                skipped.append(dict(run_id=r, source=src[r], cutoff=c, reason=f"only {len(pre)} logged point(s) before the cutoff (< {min_points})"))
            elif int(pre[STEP].iloc[-1]) >= f["H"]:
                skipped.append(dict(run_id=r, source=src[r], cutoff=c, reason="nothing left to forecast"))
            elif not np.isfinite(f["truth"]):
                skipped.append(dict(run_id=r, source=src[r], cutoff=c, reason="no finite reward in the final window"))
            else:
                ok_ids.append(r)
        plan[c] = ok_ids
    total = sum(len(v) for v in plan.values()) * len(methods)
    n_done = sum(1 for c, ids in plan.items() for r in ids for m in methods if (r, round(c, 6), m) in done)
    if example_runs is None:
        example_runs = _pick_examples(plan, src)
    example_runs = list(example_runs)
    ex_dir = out / "examples" if out is not None else None

    def tick(msg: str, k: int = 1):
        nonlocal n_done
        n_done += k
        if progress is not None:
            progress(n_done, total, msg)

    if progress is not None:
        progress(n_done, total, "resumed" if n_done else "starting")

    def base_row(r, c, method, pre):
        f = facts[r]
        return dict(run_id=r, source=src[r], cutoff=c, method=method, n_obs=int(len(pre)),
                    observed_until=int(pre[STEP].iloc[-1]), s0=f["s0"], horizon=f["H"], truth=f["truth"],
                    range=f["range"], stop_true=f["stop_true"], plateau_true=f["plateau_true"])

    def scored(row, draws):
        try:
            row.update(score_draws(draws, row["truth"], row["range"]))
            row["ok"] = True
            row.setdefault("message", "")
        except Exception as exc:  # noqa: BLE001
            row["ok"] = False
            row["message"] = f"{type(exc).__name__}: {exc}"
        return row

    # ---------------------------------------------------------------- loop
    for c in cutoffs:
        ids = plan[c]
        trunc = runs.select(ids).truncate(fraction=c) if ids else None
        # --- bayesgrpo single run
        if BAYES in methods:
            todo = [r for r in ids if (r, round(c, 6), BAYES) not in done]
            for k in range(0, len(todo), chunk):
                part = todo[k : k + chunk]
                rows += _bayes_rows(part, trunc, facts, c, BAYES, forecaster_factory, base_row, scored,
                                    example_runs, ex_dir, full, context=None)
                flush()
                tick(f"{BAYES} @ {c:g}", len(part))
        # --- bayesgrpo with context (one joint fit per forecast run)
        if BAYES_CTX in methods:
            todo = [r for r in ids if (r, round(c, 6), BAYES_CTX) not in done]
            for r in todo:
                pool = [q for q in context.run_ids if q != r and ctx_src.get(q) == src[r]][:max_context]
                ctx = context.select(pool) if pool else None
                rows += _bayes_rows([r], trunc, facts, c, BAYES_CTX, forecaster_factory, base_row, scored,
                                    example_runs, ex_dir, full, context=ctx)
                flush()
                tick(f"{BAYES_CTX} @ {c:g}")
        # --- peers
        for pname in peer_names:
            todo = [r for r in ids if (r, round(c, 6), pname) not in done]
            if not todo:
                continue
            from bayesgrpo.evaluation.peers import get_peer

            try:
                peer = get_peer(_peer_name(pname), **(peer_kwargs or {}).get(pname, {}))
                err = None
            except Exception as exc:  # noqa: BLE001
                peer, err = None, f"{type(exc).__name__}: {exc}"
            for i, r in enumerate(todo):
                pre = trunc.run(r)
                row = base_row(r, c, pname, pre)
                if peer is None:
                    row.update(ok=False, message=err, seconds=0.0)
                else:
                    fut = full[r].loc[full[r][STEP] > row["observed_until"], STEP].to_numpy()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        pf = peer.forecast(pre[STEP].to_numpy(), pre[REWARD].to_numpy(), future_steps=fut,
                                           final_window=final_window, n_draws=n_draws,
                                           seed=[seed, int(c * 1000), i])
                    row["seconds"] = float(pf.seconds)
                    if pf.ok:
                        scored(row, pf.final_draws)
                    else:
                        row.update(ok=False, message=pf.message)
                    if ex_dir is not None and r in example_runs and pf.ok:
                        _save_example_peer(ex_dir, r, c, pname, pf.final_draws)
                rows.append(row)
                if (i + 1) % 10 == 0:
                    flush()
                tick(f"{pname} @ {c:g}")
            flush()

    cases = pd.DataFrame(rows, columns=CASE_COLUMNS)
    cases = cases[cases["method"].isin(methods) & cases["cutoff"].round(6).isin([round(c, 6) for c in cutoffs])]
    cases = cases[cases["run_id"].isin(runs.run_ids)].reset_index(drop=True)
    skipped_df = pd.DataFrame(skipped, columns=["run_id", "source", "cutoff", "reason"])
    res = BacktestResult(
        cases=cases,
        skipped=skipped_df,
        summary=summarize(cases),
        summary_by_source=summarize(cases, by=("source", "cutoff", "method")),
        summary_weighted=summarize_weighted(cases),
        out_dir=out,
    )
    if out is not None:
        write_outputs(res, runs=runs, make_figures=make_figures, example_runs=example_runs)
    return res


def _pick_examples(plan: dict, src: dict, n: int = 6) -> list[str]:
    """Up to ``n`` runs forecast at every cutoff, spread over sources (round-robin)."""
    common = None
    for ids in plan.values():
        common = set(ids) if common is None else common & set(ids)
    common = common or set()
    by_src: dict[str, list[str]] = {}
    order = [r for r in src if r in common]
    for r in order:
        by_src.setdefault(src[r], []).append(r)
    picks = []
    while len(picks) < n and any(by_src.values()):
        for s in list(by_src):
            if by_src[s] and len(picks) < n:
                lst = by_src[s]
                picks.append(lst.pop(len(lst) // 2))
    return picks


def _bayes_rows(part, trunc, facts, c, method, factory, base_row, scored, example_runs, ex_dir, full, context):
    """Fit ``part`` in one call (falling back to one run at a time if the joint call fails)."""
    rows = []
    sub = trunc.select(part)
    horizon = {r: int(facts[r]["H"]) for r in part}
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = factory(context is not None).fit(sub, horizon=horizon, context=context)
        fits = {r: fit for r in part}
        wall = {r: (time.perf_counter() - t0) / len(part) for r in part}
        errs = {}
    except Exception as exc:  # noqa: BLE001
        fits, wall, errs = {}, {}, {}
        if len(part) == 1:
            errs[part[0]] = f"{type(exc).__name__}: {exc}"
            wall[part[0]] = time.perf_counter() - t0
        else:
            for r in part:
                t1 = time.perf_counter()
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        fits[r] = factory(context is not None).fit(trunc.select([r]), horizon={r: horizon[r]}, context=context)
                except Exception as exc2:  # noqa: BLE001
                    errs[r] = f"{type(exc2).__name__}: {exc2}"
                wall[r] = time.perf_counter() - t1
    tables = {}
    for r in part:
        pre = trunc.run(r)
        row = base_row(r, c, method, pre)
        row["seconds"] = wall.get(r, float("nan"))
        row["n_context"] = 0 if context is None else len(context)
        if r in errs:
            row.update(ok=False, message=errs[r])
            rows.append(row)
            continue
        fit = fits[r]
        try:
            if id(fit) not in tables:
                tables[id(fit)] = fit.table().set_index("run_id")
            t = tables[id(fit)].loc[r]
            draws = fit.final_draws(r)
            row.update(r_hat_max=float(t.get("r_hat_max", np.nan)), ess_min=float(t.get("ess_min", np.nan)),
                       divergences=float(t.get("divergences", np.nan)))
            psb = float(t.get("p_stop_before_horizon", np.nan))
            row["p_stop_before_horizon"] = psb
            if facts[r]["has_expected"]:
                sp = float(t.get("stop_q50", np.nan))
                row["stop_pred"] = sp
                if np.isfinite(row["stop_true"]) and np.isfinite(sp):
                    row["stop_err"] = sp - row["stop_true"]
                    row["stop_nerr"] = row["stop_err"] / max(1.0, facts[r]["H"] - facts[r]["s0"])
            elif np.isfinite(psb):
                row["plateau_pred"] = float(psb >= 0.5)
            scored(row, draws)
            if ex_dir is not None and r in example_runs:
                _save_example_bayes(ex_dir, r, c, method, fit, draws)
        except Exception as exc:  # noqa: BLE001
            row.update(ok=False, message=f"{type(exc).__name__}: {exc}")
        rows.append(row)
    return rows


# ============================================================================ example fan data
def _ex_path(ex_dir: Path, r: str, c: float) -> Path:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in r)
    return ex_dir / f"{safe}__{c:g}.json"


def _ex_load(p: Path) -> dict:
    return json.loads(p.read_text()) if p.exists() else {}


def _ex_save(p: Path, d: dict):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(d))


def _save_example_bayes(ex_dir, r, c, method, fit, draws):
    try:
        p = _ex_path(ex_dir, r, c)
        d = _ex_load(p)
        pdr = fit.paths(r)
        qs = np.quantile(pdr.observed, [0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95], axis=0)
        d[method] = {
            "steps": pdr.steps.tolist(),
            "q": qs.tolist(),
            "latent_median": np.median(pdr.latent, axis=0).tolist(),
            "final_q": np.quantile(draws, [0.05, 0.1, 0.5, 0.9, 0.95]).tolist(),
            "last_step": int(pdr.last_step),
        }
        _ex_save(p, d)
    except Exception:  # noqa: BLE001 - figures are best-effort
        pass


def _save_example_peer(ex_dir, r, c, name, draws):
    p = _ex_path(ex_dir, r, c)
    d = _ex_load(p)
    d[name] = {"final_q": np.quantile(draws, [0.05, 0.1, 0.5, 0.9, 0.95]).tolist()}
    _ex_save(p, d)


# ============================================================================ outputs
_FMT = {"median_nae": "{:.3f}", "mean_ncrps": "{:.3f}", "cover50": "{:.0%}", "cover80": "{:.0%}",
        "cover90": "{:.0%}", "mean_nwidth80": "{:.3f}", "sec_per_forecast": "{:.2f}", "failure_rate": "{:.0%}"}
TABLE_COLS = ["median_nae", "mean_ncrps", "cover80", "cover50", "cover90", "mean_nwidth80", "sec_per_forecast", "failure_rate"]
TABLE_HEAD = ["median nAE", "mean nCRPS", "cov80", "cov50", "cov90", "width80 (norm.)", "s / forecast", "failures"]


def markdown_table(summary: pd.DataFrame, *, extra_cols=("n_ok",), cutoffs=None) -> str:
    """Per-cutoff markdown table (one row per cutoff x method) of :data:`TABLE_COLS`."""
    if summary is None or summary.empty:
        return "_no cases_\n"
    cols = [c for c in TABLE_COLS if c in summary.columns]
    ex = [c for c in extra_cols if c in summary.columns]
    head = ["cutoff", "method", *[TABLE_HEAD[TABLE_COLS.index(c)] for c in cols], *ex]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, r in summary.sort_values(["cutoff", "method"], key=_method_sort).iterrows():
        if cutoffs is not None and round(r["cutoff"], 6) not in cutoffs:
            continue
        cells = [f"{r['cutoff']:g}", f"**{r['method']}**" if str(r["method"]).startswith(BAYES) else str(r["method"])]
        for c in cols:
            v = r[c]
            cells.append("–" if not np.isfinite(v) else _FMT.get(c, "{:.3g}").format(v))
        for c in ex:
            cells.append(str(int(r[c])) if np.isfinite(r[c]) else "–")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _method_sort(s: pd.Series):
    if s.name == "method":
        order = {BAYES: 0, BAYES_CTX: 1}
        return s.map(lambda m: (order.get(m, 2), m)).map(str)
    return s


def write_outputs(res: BacktestResult, *, runs: RunSet | None = None, make_figures: bool = True,
                  example_runs=None, title: str = "Backtest") -> None:
    out = res.out_dir
    res.skipped.to_csv(out / "skipped.csv", index=False)
    res.summary.to_csv(out / "summary.csv", index=False)
    js = {
        "n_cases": int(len(res.cases)),
        "n_skipped": int(len(res.skipped)),
        "skipped_reasons": res.skipped.groupby("cutoff").size().rename(lambda c: f"{c:g}").to_dict() if len(res.skipped) else {},
        "summary": res.summary.to_dict("records"),
        "summary_weighted": res.summary_weighted.to_dict("records"),
        "summary_by_source": res.summary_by_source.to_dict("records"),
    }
    (out / "summary.json").write_text(json.dumps(js, indent=1, default=_json_default))
    md = [f"# {title}\n", f"{len(res.cases)} scored cases (run x cutoff x method), {len(res.skipped)} skipped run x cutoff.\n",
          "## Per cutoff x method (every case counts equally)\n", markdown_table(res.summary),
          "\n## Source-weighted (each source counts equally)\n", markdown_table(res.summary_weighted, extra_cols=("n_sources",))]
    if len(res.skipped):
        md.append("\n## Skipped\n")
        for (c, reason), g in res.skipped.groupby(["cutoff", "reason"]):
            md.append(f"- cutoff {c:g}: {len(g)} run(s) — {reason}\n")
    fails = res.cases[~res.cases["ok"].astype(bool)]
    if len(fails):
        md.append("\n## Failures (first message per method)\n")
        for m, g in fails.groupby("method"):
            md.append(f"- {m}: {len(g)} case(s); e.g. `{str(g['message'].iloc[0])[:200]}`\n")
    (out / "summary.md").write_text("".join(md))
    if make_figures and len(res.cases):
        import matplotlib

        matplotlib.use("Agg")
        res.figures = plot_all(res.cases, out, runs=runs, example_runs=example_runs)


def _colors(methods):
    base = {BAYES: "#1f6fb4", BAYES_CTX: "#0b3d6b"}
    # tab10 without its blue (reserved for bayesgrpo)
    cyc = ["#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
    out, k = {}, 0
    for m in methods:
        if m in base:
            out[m] = base[m]
        else:
            out[m] = cyc[k % len(cyc)]
            k += 1
    return out


def _ordered_methods(cases):
    ms = list(dict.fromkeys(cases["method"]))
    return sorted(ms, key=lambda m: ({BAYES: 0, BAYES_CTX: 1}.get(m, 2), m))


def plot_all(cases: pd.DataFrame, out: Path, *, runs=None, example_runs=None, prefix: str = "") -> list[Path]:
    """Calibration (PIT + coverage), error vs cutoff, CRPS vs cutoff, example fan charts."""
    import matplotlib.pyplot as plt

    figs = []
    ok = cases[cases["ok"].astype(bool)]
    if ok.empty:
        return figs
    methods = _ordered_methods(ok)
    col = _colors(methods)
    cutoffs = sorted(ok["cutoff"].unique())

    # calibration: PIT histograms (pooled over cutoffs) + coverage vs nominal
    n = len(methods)
    ncol = min(4, n)
    nrow = math.ceil(n / ncol)
    fig = plt.figure(figsize=(3.2 * ncol + 4.2, 2.6 * nrow + 0.6), layout="constrained")
    gs = fig.add_gridspec(nrow, ncol + 1, width_ratios=[1] * ncol + [1.35])
    bins = np.linspace(0, 1, 11)
    for i, m in enumerate(methods):
        ax = fig.add_subplot(gs[i // ncol, i % ncol])
        p = ok.loc[ok["method"] == m, "pit"].dropna()
        ax.hist(p, bins=bins, color=col[m], alpha=0.85, density=True)
        ax.axhline(1, color="k", lw=0.8, ls="--")
        ax.set_title(f"{m} (n={len(p)})", fontsize=9)
        ax.set_xlim(0, 1)
        ax.set_xlabel("PIT", fontsize=8)
        ax.tick_params(labelsize=7)
    ax = fig.add_subplot(gs[:, ncol])
    nom = np.array(LEVELS)
    ax.plot([0.4, 1], [0.4, 1], color="k", lw=0.8, ls="--", label="ideal")
    for m in methods:
        g = ok[ok["method"] == m]
        cov = [g[f"cover{int(l * 100)}"].mean() for l in LEVELS]
        ax.plot(nom, cov, "o-", color=col[m], label=m, lw=2 if m.startswith(BAYES) else 1.2)
    ax.axhspan(0.75, 0.85, xmin=(0.8 - 0.4) / 0.6 - 0.02, xmax=(0.8 - 0.4) / 0.6 + 0.02, color="0.8")
    ax.set_xlim(0.4, 1)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("nominal central-interval mass")
    ax.set_ylabel("empirical coverage (all cutoffs)")
    ax.set_title("coverage vs nominal", fontsize=10)
    ax.legend(fontsize=7.5, loc="lower right")
    ax.grid(alpha=0.3)
    fig.suptitle("Calibration: PIT histograms (flat = calibrated; U = too narrow; hump = too wide)", fontsize=10)
    p = out / f"{prefix}calibration.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    figs.append(p)

    # error and CRPS vs cutoff
    for metric, fname, ylab, agg in (
        ("nae", "error_vs_cutoff.png", "median normalised |median - truth|", "median"),
        ("ncrps", "crps_vs_cutoff.png", "mean normalised CRPS", "mean"),
    ):
        fig, ax = plt.subplots(figsize=(7, 4.3), layout="constrained")
        for m in methods:
            g = ok[ok["method"] == m].groupby("cutoff")[metric].agg(agg)
            ax.plot(g.index, g.values, "o-", color=col[m], label=m, lw=2.4 if m.startswith(BAYES) else 1.3)
        ax.set_xticks(cutoffs)
        ax.set_xlabel("cutoff (observed fraction of the run)")
        ax.set_ylabel(ylab + " (÷ 5–95% reward range)")
        ax.set_yscale("log")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
        p = out / f"{prefix}{fname}"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        figs.append(p)

    # examples
    if runs is not None and example_runs:
        p = plot_examples(out, runs, example_runs, cutoffs, path=out / f"{prefix}examples.png", colors=col)
        if p is not None:
            figs.append(p)
    return figs


def plot_examples(out: Path, runs: RunSet, example_runs, cutoffs, *, path: Path, colors=None, cutoff=None):
    """Grid of example fan charts (bayesgrpo bands + peers' 80% final intervals + truth in grey)."""
    import matplotlib.pyplot as plt

    ex_dir = out / "examples"
    c = cutoff if cutoff is not None else (0.3 if 0.3 in cutoffs else cutoffs[len(cutoffs) // 2])
    items = [(r, _ex_load(_ex_path(ex_dir, r, c))) for r in example_runs]
    items = [(r, d) for r, d in items if d]
    if not items:
        return None
    ncol = min(3, len(items))
    nrow = math.ceil(len(items) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(5.4 * ncol, 3.6 * nrow), layout="constrained", squeeze=False)
    for ax in axes.ravel()[len(items):]:
        ax.set_visible(False)
    for ax, (r, d) in zip(axes.ravel(), items):
        df = runs.run(r)
        key = BAYES if BAYES in d else (BAYES_CTX if BAYES_CTX in d else None)
        last = d[key]["last_step"] if key else None
        if last is None:
            s0, H = df[STEP].iloc[0], df[STEP].iloc[-1]
            last = s0 + c * (H - s0)
        obs = df[df[STEP] <= last]
        later = df[df[STEP] > last]
        ax.plot(later[STEP], later[REWARD], ".", color="0.65", ms=2.5, label="logged later (truth)")
        ax.plot(obs[STEP], obs[REWARD], ".", color="black", ms=3, label="observed")
        H = int(df[STEP].iloc[-1])
        if key:
            b = d[key]
            st, q = np.array(b["steps"]), np.array(b["q"])
            if st.size:
                ax.fill_between(st, q[0], q[6], color="#1f6fb4", alpha=0.18, lw=0, label="bayesgrpo 90%")
                ax.fill_between(st, q[1], q[5], color="#1f6fb4", alpha=0.25, lw=0, label="bayesgrpo 80%")
                ax.plot(st, b["latent_median"], color="#1f6fb4", lw=1.6, label="bayesgrpo median (latent)")
        truth = final_reward(df[STEP], df[REWARD], final_window=0.1)
        # final-reward intervals at the horizon, offset per method
        meths = [m for m in d if m in (BAYES, BAYES_CTX)] + sorted(m for m in d if m not in (BAYES, BAYES_CTX))
        span = H - df[STEP].iloc[0]
        for k, m in enumerate(meths):
            fq = d[m]["final_q"]
            x = H + span * (0.03 + 0.025 * k)
            cc = (colors or {}).get(m, "C%d" % k)
            ax.errorbar([x], [fq[2]], yerr=[[fq[2] - fq[1]], [fq[3] - fq[2]]], fmt="o", ms=3.5, color=cc,
                        capsize=2, lw=1.4, label=f"{m} final 80%")
        ax.axhline(truth, color="#c0392b", lw=1, ls="--", label="true final reward")
        ax.axvline(last, color="0.3", ls=":", lw=1)
        ax.set_xlim(df[STEP].iloc[0], H + span * (0.06 + 0.025 * len(meths)))
        ax.set_title(f"{r[:48]} @ {c:g}", fontsize=8.5, loc="left")
        ax.tick_params(labelsize=7.5)
        ax.grid(alpha=0.25)
    h, lab = axes.ravel()[0].get_legend_handles_labels()
    allh = {}
    for ax in axes.ravel()[: len(items)]:
        for hh, ll in zip(*ax.get_legend_handles_labels()):
            allh.setdefault(ll, hh)
    fig.legend(list(allh.values()), list(allh.keys()), loc="outside lower center", ncol=min(6, len(allh)), fontsize=7.5)
    fig.suptitle(f"Example backtests at cutoff {c:g}: bands = bayesgrpo predictive logged reward; bars right of the horizon = each method's 80% interval of the final reward", fontsize=9)
    fig.savefig(path, dpi=105)
    plt.close(fig)
    return path


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, Path):
        return str(o)
    return str(o)
