"""Validate the failure-mode diagnostics (bayesgrpo.diagnose) on real and testbed runs.

Data
----
* Real: ``/work/shared/data/grpo-public`` (100 runs; or ``$GRPO_PUBLIC``). Labels: a run is a
  **collapse** when, by the simple rule below (checked by eye against the 10-bin profiles of every
  run), its reward is 0/1-scaled, some 10%-block mean reaches >= 0.5, and the mean of its last 25%
  of points is < 0.1 (the reward went to ~0 and stayed). The rule is deliberately different from the
  detector (block means and a fixed absolute level vs the detector's rolling mean, range-relative
  drop and noise z-test). No real run carries labels for the other three modes, so for those we
  report alarm rates only.
* Testbed failures: ``data/testbed/failures`` (labelled by ``failure_mode``; ``none`` = controls).
* Testbed sweeps: ``data/testbed`` -- ``g_*``, ``lr_*``, ``momentum`` sweeps are treated as nominally
  healthy; the ``refresh*`` sweeps deliberately cross the refresh-interval threshold (physics.md
  section 4), so they are reported separately (no labels).

Detection = severity >= ``warning`` for the labelled mode (``critical`` for real collapses, which
are the instability detector's "collapse toward the floor"). False alarm = severity >= ``warning``
(or ``critical`` where stated) on a run not labelled with that mode.

Writes ``bench/results/diagnostics.md`` / ``.json`` and example figures
``bench/results/figures/diag_*.png``. Runtime: ~0.5-1.5 min on one core (mostly the 237 testbed sweep runs).

Usage: ``python bench/diagnostics_validation.py``
"""

from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.decisions.budget import budget_table
from bayesgrpo.diagnose.failure_modes import MODES, SEVERITIES, diagnose_runs
from bayesgrpo.io import read_runs
from bayesgrpo.plots.diagnosis import plot_diagnosis
from bayesgrpo.schema import RunSet

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results"
FIG = OUT / "figures"
REAL = Path(os.environ.get("GRPO_PUBLIC", "/work/shared/data/grpo-public"))
TESTBED = ROOT / "data" / "testbed"
RANK = {s: i for i, s in enumerate(SEVERITIES)}
HEALTHY_SWEEPS = ("g_bandit", "g_bandit_grpo", "g_ctx", "lr_bandit", "lr_ctx", "momentum")
REFRESH_SWEEPS = ("refresh", "refresh_grpo", "refresh_is")


def collapse_label(df: pd.DataFrame) -> bool:
    """The documented labelling rule for a real collapse (see module docstring)."""
    y = df["reward"].to_numpy(float)
    y = y[np.isfinite(y)]
    if y.size < 10 or y.min() < -1e-9 or y.max() > 1 + 1e-9:
        return False
    blocks = [b.mean() for b in np.array_split(y, 10)]
    tail = y[-max(2, y.size // 4) :].mean()
    return max(blocks) >= 0.5 and tail < 0.1


def ge(sev, level):
    return RANK[str(sev)] >= RANK[level]


def short(rid: str) -> str:
    return rid.replace("nips-grpo-dynamics__", "nips:")


def read_csv_runs(folder: Path) -> RunSet | None:
    runs, meta = folder / "runs.csv.gz", folder / "meta.csv.gz"
    if not runs.exists():
        runs, meta = folder / "runs.csv", folder / "meta.csv"
    if not runs.exists():
        return None
    return RunSet.from_frames(pd.read_csv(runs), pd.read_csv(meta) if meta.exists() else None, source=str(runs))


def severity_table(diag: pd.DataFrame) -> pd.DataFrame:
    t = pd.crosstab(diag["mode"], diag["severity"].astype(str))
    return t.reindex(index=list(MODES), columns=list(SEVERITIES), fill_value=0)


def md_table(df: pd.DataFrame, index=True) -> str:
    d = df.reset_index() if index else df
    cols = [str(c) for c in d.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in d.iterrows():
        lines.append("| " + " | ".join(str(v) for v in r.to_numpy()) + " |")
    return "\n".join(lines)


def budget_example(
    real: RunSet, rid: str = "teaching_an_llm_to_reason__grpo_training__a12f55c", upto: int = 120, cost: float = 2e-3
) -> dict:
    """Stop recommendation for a real run truncated at ``upto`` from stand-in exponential draws."""
    from scipy.optimize import curve_fit

    from bayesgrpo.decisions.budget import exponential_draws
    from bayesgrpo.plots.budget import plot_budget

    df = real.run(rid)
    obs = df[df["step"] <= upto]
    t, y = obs["step"].to_numpy(float), obs["reward"].to_numpy(float)
    f = lambda t, r0, rs, tau: rs - (rs - r0) * np.exp(-t / tau)  # noqa: E731
    p, cov = curve_fit(f, t, y, p0=[y[:5].mean(), y[-10:].mean(), 30.0], maxfev=20000)
    rng = np.random.default_rng(0)
    th = rng.multivariate_normal(p, cov, 400)
    th = th[th[:, 2] > 1]
    sigma = float(np.std(y - f(t, *p)))
    max_steps = int(df["step"].max())
    d = exponential_draws(
        rid,
        r0=th[:, 0],
        r_star=th[:, 1],
        tau=th[:, 2],
        last_step=upto,
        horizon=max_steps - upto,
        sigma_m=sigma,
        units="sum of reward functions",
    )
    table = budget_table(d, cost_per_step=cost, max_steps=max_steps, target=float(np.quantile(y, 0.95)))
    rec = table.attrs["recommendation"]
    fig = plot_budget(d, table, history=df[["step", "reward"]])
    fig.savefig(FIG / "diag_budget_example.png", dpi=100)
    r_all = df["reward"].to_numpy(float)
    st = df["step"].to_numpy()
    j = int(np.argmin(np.abs(st - rec.step)))
    return {
        "run_id": rid,
        "last_step": upto,
        "max_steps": max_steps,
        "cost_per_step": cost,
        "recommended_step": rec.step,
        "summary": rec.summary(),
        "realised_at_rec": float(r_all[max(0, j - 5) : j + 5].mean()),
        "realised_at_end": float(r_all[-10:].mean()),
    }


def main() -> dict:
    warnings.simplefilter("ignore")
    FIG.mkdir(parents=True, exist_ok=True)
    res: dict = {}
    md = [
        "# Failure-mode diagnostics: validation",
        "",
        "Generated by `bench/diagnostics_validation.py` (bayesgrpo.diagnose). Severity scale "
        "none < watch < warning < critical.",
        "",
    ]

    # ------------------------------------------------------------------ real runs
    t0 = time.perf_counter()
    real = read_runs(REAL / "runs.csv", meta=REAL / "meta.csv")
    diag = diagnose_runs(real)
    t_real = time.perf_counter() - t0
    labels = {rid: collapse_label(df) for rid, df in real.data.groupby("run_id", sort=False)}
    inst = diag[diag["mode"] == "dynamical_instability"].set_index("run_id")
    pos = [r for r, v in labels.items() if v]
    neg = [r for r, v in labels.items() if not v]
    det = [r for r in pos if ge(inst.loc[r, "severity"], "critical")]
    det_w = [r for r in pos if ge(inst.loc[r, "severity"], "warning")]
    fa_crit = [r for r in neg if ge(inst.loc[r, "severity"], "critical")]
    fa_warn = [r for r in neg if ge(inst.loc[r, "severity"], "warning")]
    onsets = {short(r): (None if pd.isna(inst.loc[r, "onset_step"]) else int(inst.loc[r, "onset_step"])) for r in pos}
    any_warn = diag[diag["severity"].astype(str).isin(["warning", "critical"])].groupby("mode")["run_id"].nunique()
    missing = diag.assign(m=diag["missing"].str.split(", ")).explode("m")
    missing = missing[missing["m"].fillna("") != ""].groupby(["mode", "m"])["run_id"].nunique()
    res["real"] = {
        "n_runs": len(labels),
        "n_collapse_labelled": len(pos),
        "collapse_runs": [short(r) for r in pos],
        "detected_critical": len(det),
        "detected_warning_or_worse": len(det_w),
        "detection_rate_critical": len(det) / max(len(pos), 1),
        "false_alarms_critical": [short(r) for r in fa_crit],
        "false_alarm_rate_critical": len(fa_crit) / max(len(neg), 1),
        "warning_or_worse_on_unlabelled": [short(r) for r in fa_warn],
        "warning_rate_on_unlabelled": len(fa_warn) / max(len(neg), 1),
        "onset_steps": onsets,
        "severity_counts": severity_table(diag).to_dict(),
        "runs_with_warning_or_worse_by_mode": any_warn.to_dict(),
        "missing_metric_counts": {f"{m}: {k}": int(v) for (m, k), v in missing.items()},
        "seconds": round(t_real, 2),
    }
    md += [
        "## Real runs (grpo-public, 100 runs)",
        "",
        "Collapse label rule: 0/1 reward, some 10%-block mean >= 0.5 and last-25% mean < 0.1 (matches "
        f"the by-eye reading of every run's 10-block profile). {len(pos)} runs labelled collapse, all from "
        "the nips-grpo-dynamics repository.",
        "",
        f"* **Collapse detection** (dynamical_instability = critical, 'collapse toward the floor'): "
        f"**{len(det)}/{len(pos)}** (warning or worse: {len(det_w)}/{len(pos)}).",
        f"* **False alarms, critical**, on the {len(neg)} unlabelled runs: **{len(fa_crit)}** "
        f"({', '.join(short(r) for r in fa_crit) or 'none'}).",
        f"* Warning or worse on unlabelled runs: {len(fa_warn)}/{len(neg)} -- lasting regressions (the reward "
        "lost a large part of its gain and did not recover; not collapses to ~0) and sustained oscillation: "
        + ", ".join(short(r) for r in fa_warn)
        + ".",
        "* Onset steps of the detected collapses: " + ", ".join(f"{k}: {v}" for k, v in onsets.items()) + ".",
        f"* diagnose_runs on 100 runs: {t_real:.1f} s.",
        "",
        "Severity counts (runs) per mode:",
        "",
        md_table(severity_table(diag)),
        "",
        "No real run logs `frac_reward_zero_std`, `entropy` or `eval/*` (the degeneracy verdicts use "
        "`reward_std` against the binomial expectation for the group size; concentration uses "
        "`reward_std`/`kl`; hacking only completion length). Missing-metric counts (runs):",
        "",
        md_table(pd.DataFrame({"runs": missing}).rename_axis(["mode", "missing"])),
        "",
    ]
    for rid in pos[:1] + ["nips-grpo-dynamics__rho0.70_seed44_step_logs__0d19349"]:
        if rid in labels:
            fig = plot_diagnosis(real, rid, diag)
            fig.savefig(FIG / f"diag_real_{short(rid).replace(':', '_')}.png", dpi=90)

    # ------------------------------------------------------------------ testbed failures
    fails = read_csv_runs(TESTBED / "failures")
    if fails is not None and "failure_mode" in fails.meta.columns:
        t0 = time.perf_counter()
        dfl = diagnose_runs(fails)
        t_f = time.perf_counter() - t0
        lab = fails.meta["failure_mode"].astype(str)
        piv = dfl.pivot(index="run_id", columns="mode", values="severity").astype(str)[list(MODES)]
        piv.insert(0, "label", lab.reindex(piv.index))
        rows = {}
        for mode in MODES:
            ids = lab[lab == mode].index
            if len(ids) == 0:
                continue
            sev = piv.loc[ids, mode]
            top = [RANK[piv.loc[r, mode]] >= max(RANK[piv.loc[r, m]] for m in MODES) for r in ids]
            rows[mode] = {
                "runs": len(ids),
                "detected_warning_or_worse": int(sum(ge(s, "warning") for s in sev)),
                "critical": int(sum(ge(s, "critical") for s in sev)),
                "labelled_mode_is_top_severity": int(sum(top)),
            }
        ctrl = lab[lab == "none"].index
        ctrl_fa = {r: [m for m in MODES if ge(piv.loc[r, m], "warning")] for r in ctrl}
        # cross-mode alarms on labelled failure runs
        cross = {}
        for r in piv.index:
            if lab[r] == "none":
                continue
            others = [m for m in MODES if m != lab[r] and ge(piv.loc[r, m], "warning")]
            if others:
                cross[r] = others
        res["testbed_failures"] = {
            "per_mode": rows,
            "controls": len(ctrl),
            "control_false_alarms_warning": {r: v for r, v in ctrl_fa.items() if v},
            "other_mode_alarms_on_failure_runs": cross,
            "table": piv.reset_index().to_dict(orient="records"),
            "seconds": round(t_f, 2),
        }
        md += [
            "## Testbed failure runs (labelled by `failure_mode`)",
            "",
            md_table(pd.DataFrame(rows).T.rename_axis("mode")),
            "",
            f"Controls (`failure_mode = none`): {len(ctrl)} runs, alarms >= warning: "
            f"{sum(bool(v) for v in ctrl_fa.values())} ({ {r: v for r, v in ctrl_fa.items() if v} or 'none' }).",
            "",
            "Other-mode alarms (>= warning) on failure runs (co-occurring signatures): "
            + (", ".join(f"{r}: {'/'.join(v)}" for r, v in cross.items()) or "none")
            + ".",
            "",
            "Per-run severities:",
            "",
            md_table(piv.rename_axis("run_id")),
            "",
        ]
        for rid in ("hacking-000-s0", "concentration-000-s0", "degeneracy-000-s0", "instability-001-s0"):
            if rid in piv.index:
                fig = plot_diagnosis(fails, rid, dfl)
                fig.savefig(FIG / f"diag_testbed_{rid}.png", dpi=90)
    else:
        md += ["## Testbed failure runs", "", "data/testbed/failures not present: skipped.", ""]

    # ------------------------------------------------------------------ testbed sweeps
    sweep = read_csv_runs(TESTBED)
    if sweep is not None and "sweep" in sweep.meta.columns:
        t0 = time.perf_counter()
        dsw = diagnose_runs(sweep)
        t_s = time.perf_counter() - t0
        sw = sweep.meta["sweep"].astype(str)
        dsw["sweep"] = dsw["run_id"].map(sw)
        healthy = dsw[dsw["sweep"].isin(HEALTHY_SWEEPS)]
        n_h = healthy["run_id"].nunique()
        fa = healthy[healthy["severity"].astype(str).isin(["warning", "critical"])]
        fa_by_mode = fa.groupby("mode")["run_id"].nunique().reindex(list(MODES), fill_value=0)
        fa_runs = fa["run_id"].nunique()
        ref = dsw[dsw["sweep"].isin(REFRESH_SWEEPS) & (dsw["mode"] == "dynamical_instability")].copy()
        ref["K"] = ref["run_id"].map(sweep.meta["refresh_interval"])
        ref["lr"] = ref["run_id"].map(sweep.meta["learning_rate"])
        ref["alarm"] = ref["severity"].astype(str).isin(["warning", "critical"])
        by_k = ref.groupby(["sweep", "K"])["alarm"].agg(["sum", "count"]).reset_index()
        res["testbed_sweeps"] = {
            "healthy_sweeps": list(HEALTHY_SWEEPS),
            "healthy_runs": n_h,
            "healthy_runs_with_warning_or_worse": int(fa_runs),
            "healthy_false_alarms_by_mode": fa_by_mode.to_dict(),
            "healthy_severity_counts": severity_table(healthy).to_dict(),
            "refresh_instability_alarms_by_K": by_k.to_dict(orient="records"),
            "seconds": round(t_s, 2),
        }
        md += [
            "## Testbed sweeps",
            "",
            f"Nominally healthy sweeps ({', '.join(HEALTHY_SWEEPS)}): {n_h} runs; runs with any mode >= warning: "
            f"**{fa_runs}** ({fa_runs / max(n_h, 1):.0%}). By mode:",
            "",
            md_table(pd.DataFrame({"runs >= warning": fa_by_mode}).rename_axis("mode")),
            "",
            "Severity counts on the healthy sweeps:",
            "",
            md_table(severity_table(healthy)),
            "",
            "Refresh sweeps (cross the refresh threshold on purpose; unlabelled): runs with "
            "dynamical_instability >= warning / runs, by refresh interval K:",
            "",
        ]
        for name, g in by_k.groupby("sweep"):
            md.append(
                f"* {name}: "
                + ", ".join(
                    f"K={int(k)}: {int(a)}/{int(c)}" for k, a, c in zip(g["K"], g["sum"], g["count"], strict=True)
                )
            )
        md.append("")

    # ------------------------------------------------------------------ budget example (decisions)
    try:
        res["budget_example"] = budget_example(real)
        b = res["budget_example"]
        md += [
            "## Budget / stop example (bayesgrpo.decisions)",
            "",
            f"Run `{b['run_id']}` observed to step {b['last_step']} (of {b['max_steps']}); stand-in posterior = "
            "least-squares fit of the overdamped law R* - (R* - R0) exp(-t/tau) with parameter draws from its "
            "covariance (the real forecaster replaces this). Decision with value 1 per reward unit and cost "
            f"{b['cost_per_step']:g} per step: **{b['summary']}**.",
            "",
            f"Realised: mean reward over the 10 points around the recommended step {b['realised_at_rec']:.3g}, "
            f"over the last 10 points {b['realised_at_end']:.3g}.",
            "",
            "Figure: `figures/diag_budget_example.png`.",
            "",
        ]
    except Exception as exc:  # noqa: BLE001  # pragma: no cover - the example must not break the validation
        md += ["## Budget example", "", f"skipped: {exc!r}", ""]

    md += [
        "## Reading the numbers",
        "",
        f"* Real collapses: {len(det)}/{len(pos)} caught as critical by the change-point rule, "
        f"{len(fa_crit)} critical false alarm(s) on {len(neg)} unlabelled runs; the warnings on unlabelled "
        "real runs are lasting regressions (e.g. nips gate runs that rose to ~0.75 and fell back to ~0.4) "
        "or sustained large swings of noisy notebook runs, reported as such rather than as collapses.",
        "* The degeneracy verdicts on the nips G=2/3 runs are real: with G=2 at least half of the groups are "
        "degenerate at any p, and the reward_std implies ~80% zero-advantage groups (predicted p^G+(1-p)^G "
        "~0.5), flat, so 'warning' (high) rather than 'critical' (high and rising).",
        "* Without posterior draws, dynamical instability is judged from the reward/eval series alone; "
        "testbed instability runs (refresh interval past K*) mostly show a fast rise, overshoot and bounded "
        "ringing in the logged reward, which the series-only rules catch only partly. Passing the "
        "forecaster's PathDraws adds P(c <= 0) and P(spectral radius >= 1) (exercised in tests).",
        "",
    ]
    (OUT / "diagnostics.md").write_text("\n".join(md))
    (OUT / "diagnostics.json").write_text(json.dumps(res, indent=2, default=str))
    return res


if __name__ == "__main__":
    r = main()
    print(
        json.dumps(
            {
                k: {kk: vv for kk, vv in v.items() if kk not in ("table", "severity_counts", "healthy_severity_counts")}
                for k, v in r.items()
            },
            indent=1,
            default=str,
        )[:6000]
    )
