"""What the report shows, assembled from a forecast (numbers and short texts; no HTML here).

:func:`assemble` turns a :class:`~bayesgrpo.forecast.batch.BatchResult` (or one
:class:`~bayesgrpo.forecast.FittedForecast`) into a :class:`ReportData`: one :class:`RunReport` per
requested run -- error rows included -- with its forecast table row, P(target), stop advice, failure
flags with their evidence, sampler health, and the numbers of its figures (observed curve, fan,
budget curve, logged channels); plus a comparison of the forecast final rewards by metadata groups
(``by``) and the provenance of the page.

The stop advice has one slot (:data:`ADVICE_COLUMN`, :data:`ADVICE_ERROR_COLUMN`): when the forecast
table carries the stop policy's advice (``bayesgrpo.decisions``), the report shows it with its
measured error rate; otherwise it shows the budget's recommendation
(:func:`bayesgrpo.decisions.budget.recommend_stop`), which has no measured error rate
(:data:`ADVICE_SOURCE_BUDGET` says so on the page).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import math
import platform
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.conventions import CI_PROB, HEADLINE, INTERVALS, interval_bounds
from bayesgrpo.diagnose import MODES, SEVERITIES, diagnose_runs, resolve_ceilings
from bayesgrpo.plan import final_window_threshold
from bayesgrpo.report.svg import thin_indices
from bayesgrpo.schema import CHANNELS, REWARD, STEP, RunSet, is_channel

__all__ = ["ReportData", "RunReport", "assemble", "KIND_COLUMN", "ADVICE_COLUMN", "ADVICE_ERROR_COLUMN",
           "ADVICE_SOURCE_BUDGET", "ADVICE_SOURCE_POLICY", "POLICY_STOP", "file_digests", "health_rule", "stops_now"]  # fmt: skip

#: the forecast table's model-kind column (``model`` is the LLM of the metadata)
KIND_COLUMN = "kind"
#: the stop policy's advice and its measured error rate, when ``bayesgrpo.decisions`` adds them to the table
ADVICE_COLUMN = "advice"
ADVICE_ERROR_COLUMN = "advice_error_rate"
#: the stop policy's word for "stop now" in :data:`ADVICE_COLUMN` (``bayesgrpo.decisions.stop``)
POLICY_STOP = "stop"
#: what the page says about the advice when the table carries no stop policy
ADVICE_SOURCE_BUDGET = (
    "Stop advice here is the budget's recommendation (bayesgrpo.decisions.budget.recommend_stop): without a cost "
    "per step it is the forecast's median stop step (the mean trajectory within 5% of its gain from the plateau), "
    "with --cost-per-step / --value-per-reward the step of largest expected utility. Its error rate has not been "
    "measured: the stop policy with a measured bad-stop rate (bayesgrpo.decisions, issue 18) fills this column "
    "when the forecast table carries it; the backtest of today's P(gain) stop rule is in bench/results/forecast.md "
    "('Stop or continue?')."
)
#: what the page says when the table carries the stop policy's advice
ADVICE_SOURCE_POLICY = (
    "Stop advice and its error rate: the stop policy of bayesgrpo.decisions, as the forecast table carries them "
    "(columns advice and advice_error_rate)."
)
#: a figure's observed points, fan steps and budget rows are thinned to at most these many
MAX_POINTS, MAX_FAN_STEPS, MAX_BUDGET_ROWS = 400, 120, 120
_RANK = {s: i for i, s in enumerate(SEVERITIES)}


@dataclass
class RunReport:
    """One run of the report (an error row has ``status == "error"`` and no curves or budget)."""

    index: int
    run_id: str
    status: str
    error: str
    row: dict
    groups: dict = field(default_factory=dict)
    p_target: float | None = None
    advice: dict | None = None
    findings: list = field(default_factory=list)
    worst: str = "none"
    health: list = field(default_factory=list)
    curves: dict | None = None
    budget: dict | None = None
    channels: dict = field(default_factory=dict)

    @property
    def anchor(self) -> str:
        """The HTML id of the run's detail section (never derived from the run id)."""
        return f"run-{self.index + 1}"


@dataclass
class ReportData:
    """Everything :mod:`bayesgrpo.report.html` renders."""

    runs: list
    title: str
    target: float | None
    cost_per_step: float | None
    value_per_reward: float | None
    by: tuple
    comparison: dict | None
    compare_result: object | None
    provenance: dict
    advice_source: str
    health_rule: str


def _as_batch(result, full: RunSet | None):
    """(table, errors, observed runs, full runs or None, fit or None) of a BatchResult or a FittedForecast."""
    from bayesgrpo.forecast import FittedForecast

    if isinstance(result, FittedForecast):
        table = result.table().assign(status="ok", error="")
        return table, {}, result.runs, full, result
    if hasattr(result, "table") and hasattr(result, "fit"):
        observed = getattr(result, "observed", None)
        if observed is None:  # a BatchResult made before it carried what the forecast saw
            observed = result.fit.runs if result.fit is not None else result.full
        return result.table, dict(result.errors), observed, result.full if result.truncated else full, result.fit
    raise TypeError(
        f"write_report needs a BatchResult (forecast_batch) or a FittedForecast, got {type(result).__name__}"
    )


def _curves(fit, rid: str, truth: pd.DataFrame | None) -> dict:
    """Observed points, the fan (predictive quantiles from the last observation), the final interval, stop step."""
    info = fit.infos[rid]
    obs = fit.runs.run(rid)
    pd_ = fit.paths(rid)
    keep = thin_indices(pd_.steps.size, MAX_FAN_STEPS)
    steps = np.r_[info.last_step, pd_.steps[keep]]
    bands = {}
    for mass in INTERVALS:
        lo_q, hi_q = interval_bounds(mass)
        lo = np.r_[np.quantile(pd_.latent_now, lo_q), np.quantile(pd_.observed[:, keep], lo_q, axis=0)]
        hi = np.r_[np.quantile(pd_.latent_now, hi_q), np.quantile(pd_.observed[:, keep], hi_q, axis=0)]
        bands[mass] = (lo, hi)
    median = np.r_[np.median(pd_.latent_now), np.median(pd_.latent[:, keep], axis=0)]
    fin = fit.final_draws(rid)
    lo_h, hi_h = interval_bounds(HEADLINE)
    i_obs = thin_indices(len(obs), MAX_POINTS)
    out = {
        "obs_step": obs[STEP].to_numpy(float)[i_obs], "obs": obs[REWARD].to_numpy(float)[i_obs],
        "fan_step": steps.astype(float), "bands": bands, "median": median,
        "final": tuple(float(v) for v in np.quantile(fin, [lo_h, 0.5, hi_h])),
        "last_step": int(info.last_step), "horizon": int(info.horizon),
        "window_start": final_window_threshold(s0=info.s0, horizon=info.horizon, final_window=fit.config.final_window),
    }  # fmt: skip
    settled = pd_.stop_reached.mean() >= 0.5  # the fan chart's rule: a stop step only when most draws settle
    out["stop"] = float(np.quantile(pd_.stop_step, 0.5, method="inverted_cdf")) if settled else None
    if truth is not None:
        t = truth.loc[truth[STEP] > info.last_step]
        i_t = thin_indices(len(t), MAX_POINTS)
        out["truth_step"], out["truth"] = t[STEP].to_numpy(float)[i_t], t[REWARD].to_numpy(float)[i_t]
    return out


def _budget(fit, rid: str, *, target, costs: dict, value_per_reward):
    """The budget curve (thinned, the recommended row kept) and the recommendation, or None. ``costs``: the cost
    keywords of ``budget_table`` (``steps_per_hour`` a number or run id -> number)."""
    from bayesgrpo.decisions.budget import budget_table

    info = fit.infos[rid]
    sph = costs.get("steps_per_hour")
    kw = {**costs, "steps_per_hour": sph.get(rid) if isinstance(sph, dict) else sph}
    tab = budget_table(fit.paths(rid), target=target, value_per_reward=value_per_reward, max_steps=info.horizon, **kw)
    rec = tab.attrs["recommendation"]
    keep = set(thin_indices(len(tab), MAX_BUDGET_ROWS).tolist()) | set(np.flatnonzero(tab["recommended"].to_numpy()))
    t = tab.iloc[sorted(keep)]
    cols = [c for c in ("step", "expected_reward", "reward_q05", "reward_q95", "p_settled", "p_target",
                        "expected_utility") if c in t.columns]  # fmt: skip
    return {"table": {c: t[c].to_numpy(float) for c in cols}, "rec": rec}


def _advice_from_budget(rec, row) -> dict:
    """The budget's recommendation as advice: stop now / stop at a step / continue, and what it saves."""
    horizon = int(row["horizon"])
    if rec.step <= rec.last_step:
        text = "stop now"
    elif rec.step >= horizon:
        text = f"continue to {horizon}"
    else:
        text = f"stop at {rec.step}"
    return {"text": text, "step": int(rec.step), "rule": rec.rule, "steps_saved": rec.steps_saved,
            "fraction_saved": rec.fraction_saved, "error_rate": None, "source": "budget",
            "notes": list(rec.notes), "stop_now": text == "stop now"}  # fmt: skip


def stops_now(advice: dict | None) -> bool:
    """Whether a run's advice says stop now -- the stop policy's ``stop`` or the budget's ``stop now``: the one
    rule by which the page's table, its filter and its "At a glance" count the runs to stop."""
    return advice is not None and bool(advice.get("stop_now"))


def _advice(row, rec) -> dict | None:
    """The stop policy's advice when the table carries it (:data:`ADVICE_COLUMN`), else the budget's."""
    v = row.get(ADVICE_COLUMN)
    if v is not None and not (isinstance(v, float) and math.isnan(v)):
        err = row.get(ADVICE_ERROR_COLUMN)
        err = float(err) if err is not None and pd.notna(err) else None
        out: dict = {"text": str(v), "step": None, "rule": "stop policy (bayesgrpo.decisions)", "steps_saved": None,
                     "fraction_saved": None, "error_rate": err, "source": "policy", "notes": [],
                     "stop_now": str(v) == POLICY_STOP}  # fmt: skip
        seen, horizon = row.get("observed_until"), row.get("horizon")
        if out["stop_now"] and pd.notna(seen) and pd.notna(horizon):  # stopping now saves the remaining steps
            out |= {"step": int(seen), "steps_saved": max(int(horizon) - int(seen), 0), "fraction_saved": 1.0}
        return out
    return _advice_from_budget(rec, row) if rec is not None else None


#: at most this many logged channels are drawn per run (reward first, then the schema's order)
MAX_CHANNELS = 8


def _channels(df: pd.DataFrame) -> dict:
    """The run's logged channels (:data:`bayesgrpo.schema.CHANNELS`, then ``reward_fn/*`` and ``eval/*``; reward
    first), thinned: name -> (steps, values); at most :data:`MAX_CHANNELS` with 3 or more finite values."""
    names = [REWARD, *[c for c in CHANNELS if c in df.columns]]
    names += sorted(c for c in df.columns if is_channel(str(c)) and c not in CHANNELS)
    out = {}
    for c in names:
        v = pd.to_numeric(df[c], errors="coerce").to_numpy(float)
        ok = np.isfinite(v)
        if ok.sum() < 3:
            continue
        s, v = df[STEP].to_numpy(float)[ok], v[ok]
        i = thin_indices(len(v), MAX_POINTS)
        out[str(c)] = (s[i], v[i])
        if len(out) == MAX_CHANNELS:
            break
    return out


def health_rule(fit=None) -> str:
    """When the sampler health of a run is poor: the rule of the forecast table's ``warning`` status
    (:meth:`FittedForecast.health_status`, :data:`~bayesgrpo.inference.sampling.STATUS_HEALTH`), the word the
    CLI's table shows; with a ``fit`` its thresholds for that fit's draws and chains."""
    from bayesgrpo.inference.sampling import STATUS_HEALTH as t

    if fit is None:
        return (f"warning (the forecast table's status) when r_hat > {t['r_hat']:g} + {t['r_hat_per_draw']:g} / draws "
                f"per chain, ESS < {t['ess']:g} (or {100 * t['ess_share']:.0f}% of the draws when fewer), or divergent "
                f"transitions in more than {100 * t['divergent_share']:g}% of the draws; else ok.")  # fmt: skip
    from bayesgrpo.inference.sampling import status_thresholds

    n, th = fit.sampler.draws * fit.sampler.chains, status_thresholds(fit.sampler)
    return (f"warning (the forecast table's status) when r_hat > {th['r_hat']:.3g}, ESS < {th['ess']:.0f} or more than "
            f"{th['max_divergences']:.0f} divergent transitions ({100 * t['divergent_share']:g}% of {n} draws); "
            f"else ok.")  # fmt: skip


def _health_notes(fit) -> dict:
    """run id -> the reason of a ``warning`` status (:meth:`FittedForecast.health_status`, the rule the CLI's
    table shows), or no note when the status is ``ok``."""
    if fit is None:
        return {}
    out: dict = {}
    for rid in fit.forecast_ids:
        status, reason = fit.health_status(rid)
        out[rid] = [reason] if status != "ok" else []
    return out


def assemble(
    result,
    *,
    target: float | None = None,
    cost_per_step: float | None = None,
    value_per_reward: float | None = None,
    by=(),
    ceiling: float | None = None,
    full: RunSet | None = None,
    comparison=None,
    title: str | None = None,
    command: str | None = None,
    data_files=None,
    costs: dict | None = None,
) -> ReportData:
    """Assemble the report of a forecast (see :func:`bayesgrpo.report.write_report` for the parameters)."""
    costs = {"cost_per_step": cost_per_step, **(costs or {})}
    cost_per_step = costs.get("cost_per_step")
    table, errors, observed, full, fit = _as_batch(result, full)
    by = tuple(by or ())
    meta = observed.meta if observed is not None else pd.DataFrame()
    missing = [c for c in by if c not in meta.columns]
    if missing:
        from bayesgrpo.errors import OptionError

        raise OptionError(
            f"--by {missing[0]!r}: no run has this metadata column; columns: {', '.join(map(str, meta.columns))}"
        )
    health = _health_notes(fit)
    runs = []
    for i, row in enumerate(table.to_dict("records")):
        rid = str(row["run_id"])
        status, error = _report_status(row)
        rr = RunReport(index=i, run_id=rid, status=status, error=error, row=row,
                       groups={c: _level(meta, rid, c) for c in by})  # fmt: skip
        post = None
        if fit is not None and rid in fit.infos:
            truth = full.run(rid) if full is not None and rid in full.run_ids else None
            rr.curves = _curves(fit, rid, truth)
            b = _budget(fit, rid, target=target, costs=costs, value_per_reward=value_per_reward)
            rr.budget = b
            rr.advice = _advice(row, b["rec"])
            if target is not None:
                rr.p_target = float(np.mean(fit.final_draws(rid) >= float(target)))
            rr.health = health.get(rid, [])
            post = fit.paths(rid)
        if rid in observed.run_ids:
            rr.channels = _channels(observed.run(rid))
            _attach_findings(rr, observed, post, ceiling)
        runs.append(rr)
    cmp = _group_comparison(fit, runs, by, full if full is not None else observed) if by and fit is not None else None
    prov = provenance(fit, observed=observed, command=command, data_files=data_files, errors=errors, target=target,
                      cost_per_step=cost_per_step, value_per_reward=value_per_reward, costs=costs)  # fmt: skip
    name = title or f"bayesgrpo report: {len(runs)} run{'s' if len(runs) != 1 else ''}"
    policy = any(r.advice is not None and r.advice["source"] == "policy" for r in runs)
    return ReportData(runs=runs, title=name, target=target, cost_per_step=cost_per_step,
                      value_per_reward=value_per_reward, by=by, comparison=cmp, compare_result=comparison,
                      provenance=prov, advice_source=ADVICE_SOURCE_POLICY if policy else ADVICE_SOURCE_BUDGET,
                      health_rule=health_rule(fit))  # fmt: skip


def _report_status(row: dict) -> tuple[str, str]:
    """The page's two states of a run from a batch status (``bayesgrpo.forecast.batch.STATUSES``):
    forecast (``ok``; a ``warning`` -- poor sampler health -- is forecast too, its health notes say
    why) or not (``error``: an error, an interrupted run, or a complete one whose observed final
    reward the text gives)."""
    status, error = str(row.get("status") or "ok"), str(row.get("error") or "")
    if status in ("ok", "warning"):
        return "ok", ""
    if status == "complete":
        return "error", f"complete: logged up to its horizon; final reward {float(row['final_q50']):.4g} observed"
    if status == "interrupted":
        return "error", "interrupted (Ctrl-C) before its forecast finished"
    return status, error


def _level(meta: pd.DataFrame, rid: str, col: str) -> str:
    if rid not in meta.index:
        return "unknown"
    v = meta.loc[rid, col]
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
        return "unknown"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _attach_findings(r: RunReport, observed: RunSet, post, ceiling) -> None:
    """The run's failure-mode findings (every mode, with evidence; worst first) from what the forecast saw,
    with its posterior draws when it was forecast (``diagnose_runs``, as the live integrations call it)."""
    one = observed.select([r.run_id])
    ceil = resolve_ceilings(one, ceiling)  # its warning (a run not on the --ceiling's scale) reaches the user
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = diagnose_runs(one, posteriors={r.run_id: post} if post is not None else None, ceiling=ceil)
    r.findings = [
        {"mode": str(f["mode"]), "severity": str(f["severity"]),
         "onset_step": None if pd.isna(f["onset_step"]) else int(f["onset_step"]),
         "evidence": str(f["evidence"]), "missing": str(f["missing"] or ""), "assessed": bool(f["assessed"])}
        for f in res.to_dict("records")
    ]  # fmt: skip
    r.findings.sort(key=lambda f: (-_RANK[f["severity"]], MODES.index(f["mode"])))
    r.worst = r.findings[0]["severity"] if r.findings else "none"


def _group_comparison(fit, runs: list, by: tuple, complete: RunSet) -> dict:
    """Forecast final rewards by metadata group: per level the mean over its runs (80%), pairwise contrasts (90%).

    Draws of different runs come from independent fits, so the draw-wise mean over a level's runs is a
    draw of the level's average final reward. Runs on different reward scales are put on one scale first
    with the normalisation of ``bayesgrpo compare`` (``prepare_compare(scale="auto")``: per
    ``source_repo`` when the metadata has it, one shared scale when every reward lies in [0, 1], else per
    run); with one scale group the numbers stay in the runs' own units.
    """
    from bayesgrpo.compare import prepare_compare

    ids = [r.run_id for r in runs if r.status == "ok" and r.run_id in fit.infos]
    if not ids:
        return {"units": "", "factors": {}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arr = prepare_compare(complete.select(ids), by=by, scale="auto")
    one_scale = len(set(arr.scale_groups)) == 1
    loc = dict(zip(arr.run_ids, np.zeros(len(ids)) if one_scale else arr.loc, strict=True))
    sc = dict(zip(arr.run_ids, np.ones(len(ids)) if one_scale else arr.scale, strict=True))
    draws = {rid: (fit.final_draws(rid) - loc[rid]) / sc[rid] for rid in ids}
    units = ("the runs' own reward units (one shared scale)" if one_scale else
             f"normalised final reward, (reward - median start) / reward range within each of the "
             f"{len(set(arr.scale_groups))} scale groups of `bayesgrpo compare` (scale=auto)")  # fmt: skip
    factors = {}
    lo_h, hi_h = interval_bounds(HEADLINE)
    lo_c, hi_c = interval_bounds(CI_PROB)
    for col in by:
        levels: dict = {}
        for r in runs:
            levels.setdefault(r.groups[col], []).append(r)
        summ, means = [], {}
        for lv, members in levels.items():
            ok = [m.run_id for m in members if m.run_id in draws]
            row = {"level": lv, "runs": len(members), "forecast": len(ok)}
            if ok:
                m = np.mean([draws[x] for x in ok], axis=0)
                means[lv] = m
                row.update(mean=float(m.mean()), lo=float(np.quantile(m, lo_h)), hi=float(np.quantile(m, hi_h)))
                best = max(ok, key=lambda x: float(np.median(draws[x])))
                row["best"] = best
            summ.append(row)
        pairs = []
        for a, b in _pairs(means):
            d = means[a] - means[b]
            pairs.append({"a": a, "b": b, "mean": float(d.mean()), "lo": float(np.quantile(d, lo_c)),
                          "hi": float(np.quantile(d, hi_c)), "p_gt": float(np.mean(d > 0))})  # fmt: skip
        factors[col] = {"levels": summ, "contrasts": pairs}
    return {"units": units, "factors": factors}


#: a factor with more levels than this is contrasted against its best level only (not every pair)
MAX_PAIRWISE_LEVELS = 8


def _pairs(means: dict) -> list:
    """Every pair of levels, or with more than :data:`MAX_PAIRWISE_LEVELS` each level against the best one."""
    names = list(means)
    if len(names) <= MAX_PAIRWISE_LEVELS:
        return [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    best = max(names, key=lambda n: float(np.mean(means[n])))
    return [(best, n) for n in names if n != best]


def file_digests(paths) -> list:
    """``[(path, bytes, sha256)]`` of the given files; a folder contributes every file below it (sorted)."""
    out = []
    seen = set()
    for p in paths or ():
        p = Path(p)
        files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
        for f in files:
            if f in seen or not f.is_file():
                continue
            seen.add(f)
            h = hashlib.sha256()
            with open(f, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            out.append((str(f), f.stat().st_size, h.hexdigest()))
    return out


def _versions() -> dict:
    from importlib import metadata

    from bayesgrpo._version import __version__

    out = {"bayesgrpo": __version__, "python": platform.python_version()}
    for pkg in ("pymc", "nutpie", "numpy", "pandas"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def provenance(fit, *, observed: RunSet | None, command, data_files, errors, target, cost_per_step, value_per_reward,
               costs: dict | None = None):  # fmt: skip
    """Versions, prior and calibration identities, sampler settings, command line, data files with hashes, time."""
    files = data_files
    if files is None and observed is not None and "source_file" in observed.meta.columns:
        files = [f for f in dict.fromkeys(observed.meta["source_file"].dropna().astype(str)) if Path(f).exists()]
    out = {
        "versions": _versions(),
        "time": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "command": command,
        "files": file_digests(files),
        "errors": len(errors),
        "settings": {"target": target, "cost_per_step": cost_per_step, "value_per_reward": value_per_reward},
    }
    for k, v in (costs or {}).items():  # the hourly costs; a steps-per-hour per run came from the logs
        if v is not None and k != "cost_per_step" and v != {}:
            out["settings"][k] = "from each run's logged step times" if isinstance(v, dict) else v
    if fit is not None:
        cfg = fit.config
        out["model"] = {"kind": cfg.kind, "prior": cfg.prior.identity, "calibration": cfg.calibration.identity,
                        "final_window": cfg.final_window, "stop_fraction": cfg.stop_fraction,
                        "sampler": fit.sampler.model_dump()}  # fmt: skip
    return out
