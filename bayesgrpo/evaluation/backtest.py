"""Backtests: forecast truncated complete runs and score the forecasts against what was logged later.

``backtest(runs, cutoffs=(0.1, 0.2, 0.3, 0.5), methods=("bayesgrpo", "last_value", ...))`` truncates
every complete run at each cutoff (a fraction of its own step span, as :meth:`RunSet.truncate`),
hands the cases of each cutoff to every method of :mod:`bayesgrpo.evaluation.methods` (one forecaster
protocol: bayesgrpo and every peer implement ``forecast_many``), and scores each forecast
(:mod:`bayesgrpo.evaluation.scoring`) against the truth.

* A case is **skipped** (counted with a reason, not scored) when its plan says it cannot be forecast
  (:func:`bayesgrpo.plan.plan_runs`: fewer than ``min_points`` logged points, nothing left to forecast)
  or the run has no finite reward in its final window.
* Warnings raised while a method forecasts a case (sampler health, repaired data) are recorded in the
  case's ``warnings`` column -- never hidden.
* Outputs (``out_dir``): ``cases.csv`` (one row per run x cutoff x method; the resume ledger),
  ``skipped.csv``, ``summary.csv/json/md`` (:mod:`bayesgrpo.evaluation.report`) and the fan data of a
  few example runs (figures of a result: :func:`bayesgrpo.plots.backtest.plot_all`). With ``resume=True``
  cases already in ``cases.csv`` are not recomputed (safe to interrupt: a Ctrl-C writes the cases that
  finished, never the one in flight, and raises :class:`~bayesgrpo.errors.Interrupted`).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.conventions import DEFAULT_FINAL_WINDOW, DEFAULT_KIND, QUANTILES
from bayesgrpo.errors import Interrupted
from bayesgrpo.evaluation.methods import BAYES, BAYES_CTX, DEFAULT_PEERS, Case, get_method, resolve_methods
from bayesgrpo.evaluation.scoring import (
    CASE_COLUMNS,
    plateau_reached,
    run_truth,
    score_draws,
    sources,
    summarize,
    summarize_weighted,
    true_stop_step,
)
from bayesgrpo.io.output import atomic_path, safe_file_stem, write_table, write_text
from bayesgrpo.plan import MIN_POINTS, plan_runs
from bayesgrpo.schema import REWARD, STEP, RunSet

__all__ = ["backtest", "BacktestResult", "BAYES", "BAYES_CTX", "DEFAULT_PEERS", "OUTPUT_FILES"]

#: the files a backtest writes into its ``out_dir`` (and the folder ``examples/``)
OUTPUT_FILES = ("cases.csv", "skipped.csv", "summary.csv", "summary.json", "summary.md", "draws.npz",
                "calibration.png", "error_vs_cutoff.png", "crps_vs_cutoff.png", "examples.png")  # fmt: skip

Progress = Callable[[int, int, str], None]
_MAX_WARNINGS_CHARS = 400


@dataclass
class BacktestResult:
    """Cases, skipped cases and aggregates of a backtest.

    Attributes
    ----------
    cases : DataFrame (:data:`~bayesgrpo.evaluation.scoring.CASE_COLUMNS`), one row per run x cutoff x method
    skipped : DataFrame ``run_id, source, cutoff, reason``
    summary : DataFrame, one row per cutoff x method (:func:`~bayesgrpo.evaluation.scoring.summarize`)
    summary_by_source : DataFrame, the same per source as well
    summary_weighted : DataFrame, source-weighted (each source counts equally)
    out_dir : Path or None
    example_runs : list of run ids whose fan data are in ``out_dir/examples``
    """

    cases: pd.DataFrame
    skipped: pd.DataFrame
    summary: pd.DataFrame
    summary_by_source: pd.DataFrame
    summary_weighted: pd.DataFrame
    out_dir: Path | None = None
    example_runs: list = field(default_factory=list)

    def table(self, weighted: bool = False) -> pd.DataFrame:
        return self.summary_weighted if weighted else self.summary


def _facts(runs: RunSet, final_window: float) -> dict:
    out = {}
    for r in runs.run_ids:
        df = runs.run(r)
        truth, rng_, s0, H = run_truth(df, final_window)
        has_expected = "reward_expected" in df.columns and df["reward_expected"].notna().sum() > 10
        st = (
            true_stop_step(df[STEP], df["reward_expected"], final_window=final_window) if has_expected else float("nan")
        )
        out[r] = dict(truth=truth, range=rng_, s0=s0, H=H, stop_true=st, has_expected=has_expected,
                      plateau_true=float("nan") if has_expected else plateau_reached(df[REWARD]), df=df)  # fmt: skip
    return out


def _plan(runs: RunSet, facts: dict, cutoffs, src: dict, min_points: int):
    """Per cutoff: the plans of the runs' prefixes (:func:`bayesgrpo.plan.plan_runs`, each run forecast
    to its own last step) and the run ids that can be scored; the others are skipped with the reason."""
    plans: dict = {}
    ok: dict = {}
    skipped: list = []
    horizon = {r: facts[r]["H"] for r in runs.run_ids}
    for c in cutoffs:
        plans[c] = plan_runs(runs, until_fraction=c, horizon=horizon, min_points=min_points)
        ok[c] = []
        for r in runs.run_ids:
            reason = plans[c][r].error
            if reason is None and not np.isfinite(facts[r]["truth"]):
                reason = "no finite reward in the final window"
            if reason is None:
                ok[c].append(r)
            else:
                skipped.append(dict(run_id=r, source=src[r], cutoff=c, reason=reason))
    return plans, ok, skipped


def backtest(
    runs: RunSet,
    *,
    cutoffs: Iterable[float] = (0.1, 0.2, 0.3, 0.5),
    kind: str = DEFAULT_KIND,
    context: RunSet | None = None,
    peers: Iterable[str] | str | None = DEFAULT_PEERS,
    final_window: float = DEFAULT_FINAL_WINDOW,
    sampler=None,
    prior=None,
    calibration=True,
    out_dir=None,
    resume: bool = True,
    progress: Progress | None = None,
    include_single: bool = True,
    include_bayes: bool = True,
    max_context: int = 6,
    source_col: str | None = None,
    min_points: int = MIN_POINTS,
    n_draws: int = 1000,
    seed: int = 0,
    methods: dict | None = None,
    example_runs: Iterable[str] | None = None,
    peer_kwargs: dict | None = None,
    save_draws: int = 0,
    executor=None,
) -> BacktestResult:
    """Backtest bayesgrpo (and peers) on complete runs truncated at each cutoff.

    Parameters
    ----------
    runs : RunSet
        Complete runs (each run's last logged step is its horizon).
    cutoffs : floats in (0, 1)
        Fractions of each run's step span that are observed.
    kind : str
        bayesgrpo's model kind.
    context : RunSet, optional
        Complete runs pooled with each forecast run ("with context", method ``bayesgrpo_ctx``): up to
        ``max_context`` *other* runs of ``context`` from the same source (never itself). With
        ``include_single`` the single-run ``bayesgrpo`` is scored as well; ``include_bayes=False``
        scores the peers only.
    peers : names, "all" or "none"
        Peers (:mod:`bayesgrpo.evaluation.peers`; aliases ``exponential``, ``scalerl``).
    final_window : float
    sampler, prior : optional
        bayesgrpo's sampler configuration and population prior (default: the packaged prior).
    calibration : Calibration or bool
        bayesgrpo's calibration layer (default: the packaged one; ``False`` for none -- benchmarks
        on the development runs, which the packaged layer was fitted on, fit their own leave-source-out).
    out_dir : path, optional
        Where ``cases.csv`` (the resume ledger), summaries and figures are written.
    resume : bool
        Skip cases already in ``out_dir/cases.csv``.
    progress : callable, optional
        ``progress(done, total, message)`` after each forecast unit.
    source_col : str, optional
        Metadata column naming the source (default: ``source_repo``, else ``sweep``/``family``/``dataset``).
    min_points : int
    methods : dict, optional
        ``{name: method}`` overriding the registry's methods (tests pass fakes implementing the protocol).
    example_runs : run ids, optional
        Runs whose fan data are stored in ``out_dir/examples`` for the examples figure
        (:func:`bayesgrpo.plots.backtest.plot_all`; default: up to 6 spread over sources).
    peer_kwargs : dict, optional
        ``{peer name: {setting: value}}`` for :func:`~bayesgrpo.evaluation.methods.get_method`.
    save_draws : int
        Also keep up to this many final-reward draws per case in ``out_dir/draws.npz`` (for fitting
        and checking calibration layers offline); 0 keeps none.
    executor : Executor, optional
        Where bayesgrpo's fits run (:mod:`bayesgrpo.inference.executor`; default: this process).
        Peers run in this process.

    Returns
    -------
    BacktestResult
    """
    cutoffs = tuple(float(c) for c in cutoffs)
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    src = sources(runs, source_col)
    ctx_src = sources(context, source_col) if context is not None else {}
    names = ([BAYES] if (context is None or include_single) else []) + ([BAYES_CTX] if context is not None else [])
    names = (names if include_bayes else []) + [p for p in resolve_methods(peers) if p not in names]
    bayes_kw = dict(kind=kind, sampler=sampler, prior=prior, calibration=calibration, final_window=final_window,
                    executor=executor)  # fmt: skip
    impl = {n: (methods or {}).get(n) or get_method(n, **(bayes_kw if n in (BAYES, BAYES_CTX) else
                                                          (peer_kwargs or {}).get(n, {}))) for n in names}  # fmt: skip
    ledger = _Ledger(out, resume=resume, save_draws=save_draws)
    facts = _facts(runs, final_window)
    plans, plan, skipped = _plan(runs, facts, cutoffs, src, min_points)
    total = sum(len(v) for v in plan.values()) * len(names)
    n_done = sum(1 for c, ids in plan.items() for r in ids for m in names if ledger.has(r, c, m))
    example_runs = list(example_runs) if example_runs is not None else _pick_examples(plan, src)
    ex_dir = out / "examples" if out is not None else None
    if progress is not None:
        progress(n_done, total, "resumed" if n_done else "starting")
    for c in cutoffs:
        for name in names:
            todo = [r for r in plan[c] if not ledger.has(r, c, name)]
            method = impl[name]
            step = max(1, getattr(method, "chunk", 20) if not getattr(method, "uses_context", False) else 1)
            for k in range(0, len(todo), step):
                part = todo[k : k + step]
                cases = [_case(r, plans[c], facts[r], runs, context, ctx_src, src, max_context, name) for r in part]
                results, msgs, stopped = _forecast_part(method, cases, final_window=final_window, n_draws=n_draws,
                                                        seed=[seed, int(round(c * 1000)), k])  # fmt: skip
                for case, res in zip(cases[: len(results)], results, strict=True):
                    ledger.add(_row(case, c, name, facts[case.run_id], src[case.run_id], res, msgs), res)
                    if ex_dir is not None and case.run_id in example_runs and res.ok:
                        _save_example(ex_dir, case.run_id, c, name, res)
                ledger.flush()
                if stopped is not None:
                    n = len(ledger.rows)
                    raise Interrupted(f"interrupted; {n} case(s) in the ledger", partial=n) from stopped
                n_done += len(part)
                if progress is not None:
                    progress(n_done, total, f"{name} @ {c:g}")
    return _result(ledger.rows, runs, names, cutoffs, skipped, out, example_runs)


def _forecast_part(method, cases, **kw):
    """``(results, warnings as one line, the Ctrl-C or None)`` of one chunk of cases: after a Ctrl-C the
    results of the cases that finished (they enter the ledger, no other)."""
    stopped = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            results = method.forecast_many(cases, **kw)
        except KeyboardInterrupt as e:
            results, stopped = list(getattr(e, "partial", None) or []), e
    return results, "; ".join(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught)), stopped


class _Ledger:
    """The rows scored so far (``out_dir/cases.csv``, the resume state) and the kept draws (``draws.npz``)."""

    def __init__(self, out: Path | None, *, resume: bool, save_draws: int):
        self.out, self.save_draws = out, int(save_draws)
        self.rows: list[dict] = []
        if out is not None and resume and (out / "cases.csv").exists():
            self.rows = pd.read_csv(out / "cases.csv").to_dict("records")
        self.done = {(str(r["run_id"]), round(float(r["cutoff"]), 6), str(r["method"])) for r in self.rows}
        self.kept: dict = {}
        if self.save_draws and out is not None and (out / "draws.npz").exists() and resume:
            with np.load(out / "draws.npz") as z:
                self.kept.update({k: z[k] for k in z.files})

    def has(self, run_id: str, cutoff: float, method: str) -> bool:
        return (run_id, round(cutoff, 6), method) in self.done

    def add(self, row: dict, res) -> None:
        self.rows.append(row)
        if self.save_draws and self.out is not None and res.ok:
            x = np.sort(np.asarray(res.final_draws, dtype=float))
            idx = np.linspace(0, x.size - 1, min(self.save_draws, x.size)).round().astype(int)
            self.kept[f"{row['run_id']}|{row['cutoff']:g}|{row['method']}"] = x[idx].astype(np.float32)

    def flush(self) -> None:
        if self.out is None:
            return
        if self.save_draws and self.kept:
            with atomic_path(self.out / "draws.npz") as tmp, open(tmp, "wb") as fh:
                np.savez_compressed(fh, **self.kept)
        rows = pd.DataFrame(self.rows, columns=CASE_COLUMNS) if self.rows else pd.DataFrame(columns=CASE_COLUMNS)
        write_table(rows, self.out / "cases.csv")


def _result(rows, runs, names, cutoffs, skipped, out, example_runs) -> BacktestResult:
    cases_df = pd.DataFrame(rows, columns=CASE_COLUMNS)
    cases_df = cases_df[
        cases_df["method"].isin(names) & cases_df["cutoff"].round(6).isin([round(c, 6) for c in cutoffs])
    ]
    cases_df = cases_df[cases_df["run_id"].isin(runs.run_ids)].reset_index(drop=True)
    res = BacktestResult(
        cases=cases_df, skipped=pd.DataFrame(skipped, columns=["run_id", "source", "cutoff", "reason"]),
        summary=summarize(cases_df), summary_by_source=summarize(cases_df, by=("source", "cutoff", "method")),
        summary_weighted=summarize_weighted(cases_df), out_dir=out, example_runs=list(example_runs),
    )  # fmt: skip
    if out is not None:
        from bayesgrpo.evaluation.report import write_outputs

        write_outputs(res)
    return res


def _case(r, plans, f, runs, context, ctx_src, src, max_context, name) -> Case:
    df = f["df"]
    pre = plans.observed.run(r)
    fut = df.loc[df[STEP] > plans[r].last_step, STEP].to_numpy()
    ctx = None
    if name == BAYES_CTX and context is not None:
        pool = [q for q in context.run_ids if q != r and ctx_src.get(q) == src[r]][:max_context]
        ctx = context.select(pool) if pool else None
    return Case(run_id=r, prefix=pre.drop(columns=["run_id"], errors="ignore"), future_steps=fut,
                horizon=int(f["H"]), meta=runs.meta.loc[r], context=ctx)  # fmt: skip


def _row(case: Case, c, name, f, source, res, msgs) -> dict:
    pre = case.prefix
    row = dict(run_id=case.run_id, source=source, cutoff=c, method=name, n_obs=int(len(pre)),
               observed_until=int(pre[STEP].iloc[-1]), s0=f["s0"], horizon=f["H"], truth=f["truth"], range=f["range"],
               stop_true=f["stop_true"], plateau_true=f["plateau_true"], seconds=float(res.seconds),
               warnings=msgs[:_MAX_WARNINGS_CHARS] if msgs else "")  # fmt: skip
    info = res.info or {}
    for k in (
        "r_hat_max",
        "ess_min",
        "divergences",
        "p_stop_before_horizon",
        "n_context",
        "scale",
        "level",
        "p_plateaued",
    ):
        if k in info:
            row[k] = info[k]
    if not res.ok:
        row.update(ok=False, message=res.message)
        return row
    psb = info.get("p_stop_before_horizon")
    if f["has_expected"] and "stop_q50" in info:
        sp = float(info["stop_q50"])
        row["stop_pred"] = sp
        if np.isfinite(row["stop_true"]) and np.isfinite(sp):
            row["stop_err"] = sp - row["stop_true"]
            row["stop_nerr"] = row["stop_err"] / max(1.0, f["H"] - f["s0"])
    elif psb is not None and np.isfinite(psb):
        row["plateau_pred"] = float(psb >= 0.5)
    try:
        row.update(score_draws(res.final_draws, row["truth"], row["range"]))
        row["ok"] = True
        row["message"] = ""
    except ValueError as exc:
        row.update(ok=False, message=f"{type(exc).__name__}: {exc}")
    return row


def _pick_examples(plan: dict, src: dict, n: int = 6) -> list[str]:
    """Up to ``n`` runs forecast at every cutoff, spread over sources (round-robin)."""
    common = None
    for ids in plan.values():
        common = set(ids) if common is None else common & set(ids)
    common = common or set()
    by_src: dict[str, list[str]] = {}
    for r in [r for r in src if r in common]:
        by_src.setdefault(src[r], []).append(r)
    picks: list = []
    while len(picks) < n and any(by_src.values()):
        for s in list(by_src):
            if by_src[s] and len(picks) < n:
                lst = by_src[s]
                picks.append(lst.pop(len(lst) // 2))
    return picks


# ============================================================================ example fan data
def example_path(ex_dir: Path, r: str, c: float) -> Path:
    return ex_dir / f"{safe_file_stem(r)}__{c:g}.json"


def load_example(p: Path) -> dict:
    return json.loads(p.read_text()) if p.exists() else {}


def _save_example(ex_dir: Path, r: str, c: float, name: str, res) -> None:
    p = example_path(ex_dir, r, c)
    d = load_example(p)
    entry = {"levels": list(QUANTILES), "final_q": np.quantile(res.final_draws, QUANTILES).tolist()}
    fit = (res.info or {}).get("fit")
    if fit is not None and hasattr(fit, "paths"):
        pdr = fit.paths(r)
        entry.update(
            steps=pdr.steps.tolist(),
            q=np.quantile(pdr.observed, QUANTILES, axis=0).tolist(),
            latent_median=np.median(pdr.latent, axis=0).tolist(),
            last_step=int(pdr.last_step),
        )
    d[name] = entry
    write_text(p, json.dumps(d))
