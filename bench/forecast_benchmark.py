"""Forecast benchmark on the development runs: bayesgrpo (leave-one-source-out priors) vs the peers.

    .venv/bin/python bench/run_peers.py                          # the peers, once (~20 min; resumable)
    .venv/bin/python bench/fit_population_prior.py               # the per-run fits the LOSO priors come from
    .venv/bin/python bench/forecast_benchmark.py                 # bayesgrpo, every config (resumable)
    .venv/bin/python bench/forecast_benchmark.py --config NAME   # one configuration
    .venv/bin/python bench/forecast_benchmark.py --report-only   # rebuild bench/results/forecast.md

Protocol
--------
Every development run (``bench/devdata.py``: grpo-public + grpo-extra, a fixed sample of the 78-run
repository) is truncated at 10/20/30/50% of its step span; each method forecasts the final reward
(mean logged reward over the last 10% of the run) with the run's own last step as the horizon and is
scored against the logged truth (errors, CRPS and widths divided by the run's robust reward range).
bayesgrpo's population prior for a run of source S is refitted WITHOUT S (leave-one-source-out:
:func:`bayesgrpo.models.prior.fit_population` with ``exclude_source=S`` on the per-run fits of
``bench/fit_population_prior.py``), so no number below uses a prior that saw the run's source.
Aggregates are per case and source-weighted (each source counts the same). Ledgers (resume state):
``bench/results/forecast_runs/dev/<config>/cases.csv``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from devdata import SELECTION, load_dev  # noqa: E402

from bayesgrpo.evaluation.backtest import backtest  # noqa: E402
from bayesgrpo.evaluation.report import markdown_table  # noqa: E402
from bayesgrpo.evaluation.scoring import CASE_COLUMNS, summarize, summarize_weighted  # noqa: E402
from bayesgrpo.inference.sampling import SamplerConfig  # noqa: E402
from bayesgrpo.models.prior import PopulationPrior, fit_population  # noqa: E402

CUTOFFS = (0.1, 0.2, 0.3, 0.5)
RES = ROOT / "bench" / "results"
WORK = RES / "forecast_runs" / "dev"
PRIOR_TABLE = RES / "population_prior_runs.csv"
CMD = ".venv/bin/python bench/forecast_benchmark.py"

#: bayesgrpo configurations: name -> (model kind, description)
CONFIGS = {
    "oscillator": dict(kind="oscillator", doc="the linear oscillator (recursion (1))"),
    "degeneracy": dict(kind="degeneracy", doc="the degeneracy-aware oscillator (state-dependent stiffness, EKF)"),
    "logistic": dict(
        kind="logistic",
        doc="degeneracy + heterogeneous prompt difficulty (the generalised logistic, EKF; "
        "the degeneracy kind's LOSO priors, lam at its default prior)",
    ),
    "oscillator_ctx": dict(
        kind="oscillator",
        context=True,
        doc="the oscillator pooled with up to 8 OTHER complete runs of the run's source (leave-run-out)",
    ),
}
CTX_MAX = 8
DEFAULT_SAMPLER = SamplerConfig()


def slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s)


def loso_prior(table: pd.DataFrame, kind: str, source: str) -> PopulationPrior:
    # the kind's own per-run fits; else (logistic without them) the degeneracy kind's, as default_prior
    from bayesgrpo.models.kinds import default_prior
    from bayesgrpo.models.kinds import prior_kind as which

    prior_kind = which(kind, lambda k: bool((table["kind"] == k).any()))
    rows = table[table["kind"] == prior_kind]
    base = default_prior(kind)
    return fit_population(rows, exclude_source=source, name=f"loso-{prior_kind}-{slug(source)}", base=base)


def run_config(name: str, runs, sampler: SamplerConfig, only_sources=None) -> None:
    cfg = CONFIGS[name]
    table = pd.read_csv(PRIOR_TABLE)
    src = runs.meta["source_repo"].astype(str)
    t0 = time.time()
    for s in sorted(src.unique()):
        if only_sources and s not in only_sources:
            continue
        ids = [r for r in runs.run_ids if src[r] == s]
        if cfg.get("context") and len(ids) < 2:
            continue
        prior = loso_prior(table, cfg["kind"], s)
        out = WORK / name / slug(s)
        rs = runs.select(ids)
        ctx = dict(context=rs, include_single=False, max_context=CTX_MAX) if cfg.get("context") else {}
        backtest(rs, cutoffs=CUTOFFS, kind=cfg["kind"], peers=(), sampler=sampler, prior=prior, calibration=False,
                 out_dir=out, save_draws=400, **ctx)  # fmt: skip
        print(f"[{time.time() - t0:6.0f}s] {name}: {s} ({len(ids)} runs) done", flush=True)


def load_cases(name: str) -> pd.DataFrame:
    parts = [pd.read_csv(p) for p in sorted((WORK / name).glob("*/cases.csv"))]
    if not parts:
        return pd.DataFrame(columns=CASE_COLUMNS)
    df = pd.concat(parts, ignore_index=True)
    df["orig_method"] = df["method"]
    df["method"] = f"bayesgrpo[{name}]"
    return df


def load_draws(name: str) -> dict:
    out = {}
    for p in sorted((WORK / name).glob("*/draws.npz")):
        with np.load(p) as z:
            out.update({k: z[k] for k in z.files})
    return out


def calibrated_cases(name: str, cases: pd.DataFrame) -> pd.DataFrame:
    """Leave-one-source-out calibration: for each source, the layer as shipped (the variant
    ``bench/calibration_study.py`` chose for this configuration; ``widen`` before it has run) fitted on
    every OTHER source's backtest cases of this configuration is applied to its cases' draws, which
    are then re-scored."""
    import calibration_study as CS

    from bayesgrpo.evaluation.scoring import score_draws

    study = RES / "calibration_study.json"
    shipped = json.loads(study.read_text()).get(name, {}).get("shipped", "widen") if study.exists() else "widen"
    if shipped == "none":
        return pd.DataFrame()
    b, draws = CS.ledger(name, load_dev())
    rows, layers = [], {}
    for s in sorted(b["source"].unique()):
        tr = np.flatnonzero(b["source"].to_numpy() != s)
        cal = CS.fit_variant(b.iloc[tr], [draws[i] for i in tr], CS.VARIANTS[shipped], f"loso-{slug(s)}")
        layers[s] = cal.model_dump(exclude={"provenance"})
        for i in np.flatnonzero(b["source"].to_numpy() == s):
            r = b.iloc[i]
            x = CS.apply_layer(cal, draws[i], fraction=r.cutoff, level=r.level, floor=r.floor, scale=r.scale)
            row = {k: r[k] for k in ("run_id", "source", "cutoff", "n_obs", "observed_until", "s0", "horizon",
                                     "truth", "range", "seconds", "r_hat_max", "ess_min", "divergences")}  # fmt: skip
            row.update(score_draws(x, r.truth, r["range"]), method=f"bayesgrpo[{name}+cal]", ok=True, message="")
            rows.append(row)
    (WORK / name / "loso_calibration.json").write_text(json.dumps({"variant": shipped, "layers": layers}, indent=1))
    return pd.DataFrame(rows)


def goal_lines(S: pd.DataFrame, method: str) -> tuple[list[str], dict]:
    lines, res = [], {}
    peers = [m for m in S["method"].unique() if not str(m).startswith("bayesgrpo")]
    for c, g in S.groupby("cutoff"):
        g = g.set_index("method")
        if method not in g.index:
            continue
        b = g.loc[method]
        pr = g.loc[[p for p in peers if p in g.index]]
        best_c, best_cm = pr["mean_ncrps"].min(), pr["mean_ncrps"].idxmin()
        best_e, best_em = pr["median_nae"].min(), pr["median_nae"].idxmin()
        ok = {
            "cov80": 0.75 <= b["cover80"] <= 0.85, "cov50": 0.42 <= b["cover50"] <= 0.58,
            "crps_below_all": b["mean_ncrps"] < best_c,
            "crps_085": (b["mean_ncrps"] <= 0.85 * best_c) if c <= 0.3 else None,
            "median_err": b["median_nae"] <= best_e,
        }  # fmt: skip
        res[f"{c:g}"] = ok
        mark = lambda v: "–" if v is None else ("met" if v else "**not met**")  # noqa: E731
        lines.append(
            f"- cutoff {c:g}: cov80 {b['cover80']:.0%} ({mark(ok['cov80'])}), cov50 {b['cover50']:.0%} ({mark(ok['cov50'])}); "
            f"CRPS {b['mean_ncrps']:.3f} vs best peer {best_cm} {best_c:.3f} (below: {mark(ok['crps_below_all'])}; "
            f"<= 0.85x: {mark(ok['crps_085'])}); median nAE {b['median_nae']:.3f} vs best peer {best_em} {best_e:.3f} "
            f"({mark(ok['median_err'])})"
        )
    return lines, res


def per_source(cases: pd.DataFrame) -> str:
    ok = cases[cases["ok"].astype(bool)]
    t = ok.pivot_table(index="source", columns="method", values="ncrps", aggfunc="mean")
    cov = ok.pivot_table(index="source", columns="method", values="cover80", aggfunc="mean")
    n = ok.groupby("source")["run_id"].nunique()
    methods = sorted(t.columns, key=lambda m: (not str(m).startswith("bayesgrpo"), m))
    head = "| source | runs | " + " | ".join(methods) + " | bayesgrpo cov80 |"
    lines = [head, "|---|---|" + "---|" * (len(methods) + 1)]
    bm = [m for m in methods if str(m).startswith("bayesgrpo")]
    for s in t.index:
        vals = t.loc[s, methods]
        best = vals.min()
        cells = [(f"**{v:.3f}**" if v == best else f"{v:.3f}") if np.isfinite(v) else "–" for v in vals]
        c80 = cov.loc[s, bm[0]] if bm and bm[0] in cov.columns else np.nan
        lines.append(f"| {s} | {int(n.get(s, 0))} | " + " | ".join(cells) + f" | {c80:.0%} |")
    return "\n".join(lines) + "\n"


def pit_table(cases: pd.DataFrame, method: str) -> str:
    b = cases[(cases["method"] == method) & cases["ok"].astype(bool)]
    bins = np.linspace(0, 1, 6)
    lines = [
        "| cutoff | " + " | ".join(f"{bins[i]:.1f}-{bins[i + 1]:.1f}" for i in range(5)) + " |",
        "|---|" + "---|" * 5,
    ]
    for c, g in b.groupby("cutoff"):
        h, _ = np.histogram(g["pit"].dropna(), bins=bins)
        lines.append(f"| {c:g} | " + " | ".join(f"{v / max(1, h.sum()):.2f}" for v in h) + " |")
    return "\n".join(lines) + "\n(a calibrated forecast puts 0.20 of the cases in each fifth)\n"


def stop_section(cases: pd.DataFrame) -> list[str]:
    from bayesgrpo.evaluation.stop_rule import stop_rule_backtest, summarize_stops

    runs = load_dev()
    stops = stop_rule_backtest(cases, runs, delta=0.05, epsilon=0.2)
    out = ["## Stop or continue? The stop rule on every method's forecasts", "",
           "Rule (`bayesgrpo.evaluation.stop_rule`): at the checkpoints 0.1/0.2/0.3/0.5 of each run, stop at the first "
           "where P(final reward >= current level + 0.05 x scale) < 0.2; a bad stop loses more than 0.1 of the run's "
           "range. The oracle knows the outcome. Target: >= 20% of steps saved with <= 15% bad stops.", ""]  # fmt: skip
    for weighted in (False, True):
        t = summarize_stops(stops, weighted=weighted)
        out += [f"{'Source-weighted' if weighted else 'Per run'}:", "", "| method | runs | stopped | steps saved | bad stops | reward lost |",
                "|---|---|---|---|---|---|"]  # fmt: skip
        for r in t.sort_values("method").itertuples():
            out.append(
                f"| {r.method} | {r.runs} | {r.stopped:.0%} | {r.steps_saved:.0%} | {r.bad_stops:.0%} | {r.reward_lost:.3f} |"
            )
        out.append("")
    stops.to_csv(RES / "forecast_stops.csv", index=False)
    # the trade-off: how many steps each method's forecasts save, and at what share of bad stops, as the
    # rule's threshold epsilon moves (same delta, checkpoints and runs)
    out += [
        "Trade-off as the rule's threshold moves (steps saved / bad stops, per run; the oracle saves "
        f"{summarize_stops(stops).set_index('method').loc['oracle', 'steps_saved']:.0%} with no bad stop):",
        "",
    ]
    eps_grid = (0.1, 0.2, 0.3, 0.4, 0.5)
    sweeps = {
        e: summarize_stops(stop_rule_backtest(cases, runs, delta=0.05, epsilon=e)).set_index("method") for e in eps_grid
    }
    methods = [m for m in sorted(sweeps[0.2].index) if m != "oracle"]
    out += ["| method | " + " | ".join(f"eps {e:g}" for e in eps_grid) + " |", "|---|" + "---|" * len(eps_grid)]
    for m in methods:
        out.append(f"| {m} | " + " | ".join(f"{sweeps[e].loc[m, 'steps_saved']:.0%} / {sweeps[e].loc[m, 'bad_stops']:.0%}"
                                            for e in eps_grid) + " |")  # fmt: skip
    out.append("")
    return out


def context_section(plain: str, ctx: str) -> list[str]:
    a, b = load_cases(plain), load_cases(ctx)
    if a.empty or b.empty:
        return []
    both = pd.concat([a, b], ignore_index=True)
    key = both.groupby(["run_id", "cutoff"])["method"].nunique()
    keep = key[key == 2].index
    both = both.set_index(["run_id", "cutoff"]).loc[keep].reset_index()
    S, W = summarize(both), summarize_weighted(both)
    secs = b["seconds"].describe()
    nctx = b["n_context"].describe()
    return ["## Pooling with context (leave-run-out within source)", "",
            f"Runs of the multi-run sources, each forecast with up to {CTX_MAX} other complete runs of its source as "
            f"`--context` (empirical-Bayes pooling of the LOSO population prior; {nctx['mean']:.1f} context runs on "
            f"average), against the same forecasts without context, on the same {len(keep)} run x cutoff cases. "
            f"Seconds per forecast with context (fits of the context runs included): median {secs['50%']:.1f}, "
            f"max {secs['max']:.1f}.", "", "Per case:", "", markdown_table(S), "", "Source-weighted:", "",
            markdown_table(W, extra_cols=("n_sources",)), ""]  # fmt: skip


def report(configs) -> None:
    ctx_configs = [n for n in configs if CONFIGS[n].get("context")]
    configs = [n for n in configs if not CONFIGS[n].get("context")]
    peers = pd.read_csv(WORK / "peers" / "cases.csv")
    allc = [peers] + [load_cases(n) for n in configs]
    cases = pd.concat([c for c in allc if len(c)], ignore_index=True)
    cal = [calibrated_cases(n, cases) for n in configs if load_draws(n)]
    cases = pd.concat([cases, *[c for c in cal if len(c)]], ignore_index=True)
    cases = cases[cases["cutoff"].round(6).isin(CUTOFFS)]
    # compare on the cases every method scored
    key = cases.groupby(["run_id", "cutoff"])["method"].nunique()
    full = key[key == cases["method"].nunique()].index
    cases = cases.set_index(["run_id", "cutoff"]).loc[full].reset_index()
    S = summarize(cases)
    W = summarize_weighted(cases)
    md = ["# Forecast benchmark: bayesgrpo vs peers on the development runs", "",
          f"Regenerate: `.venv/bin/python bench/run_peers.py && .venv/bin/python bench/fit_population_prior.py && {CMD}` "
          f"(resumable; `--report-only` rebuilds this page). Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.", "",
          f"**Runs.** {SELECTION}: {cases['run_id'].nunique()} runs from {cases['source'].nunique()} sources, "
          f"cutoffs {', '.join(map(str, CUTOFFS))}; {len(full)} run x cutoff cases scored by every method.", "",
          "**Protocol.** " + (__doc__.split("Protocol\n--------\n")[1].split("\n\n")[0].replace("\n", " ")), "",
          "**bayesgrpo configurations.** " + "; ".join(f"`bayesgrpo[{n}]`: {CONFIGS[n]['doc']}" for n in configs) + "; "
          "`+cal`: with the calibration layer as shipped (`bayesgrpo.forecast.calibration`; the variant chosen in "
          "`bench/results/calibration_study.md`) fitted leave-one-source-out on the other sources' backtest cases of "
          "the same configuration. "
          f"Sampler: nutpie, {DEFAULT_SAMPLER.chains} chains x {DEFAULT_SAMPLER.draws} draws / {DEFAULT_SAMPLER.tune} tune.", "",
          "**Peers** (`bayesgrpo.evaluation.peers`, identical prefix and horizon): `last_value`, `exponential`, "
          "`scalerl`, `pow3` (bounded least squares, 40 bootstrap refits), `domhan_fast` (Domhan et al.'s 11-family "
          "ensemble in PyMC, 2 x 150 draws). LC-PFN cannot run offline (its weights are downloaded at run time).", "",
          "## Per cutoff (every case counts equally)", "", markdown_table(S), "",
          "## Source-weighted (each source counts equally)", "", markdown_table(W, extra_cols=("n_sources",)), ""]  # fmt: skip
    js = {"summary": S.to_dict("records"), "summary_weighted": W.to_dict("records"), "goals": {}}
    for m in sorted(x for x in set(cases["method"]) if str(x).startswith("bayesgrpo")):
        gl, gr = goal_lines(S, m)
        wl, wr = goal_lines(W, m)
        js["goals"][m] = {"per_case": gr, "source_weighted": wr}
        md += [f"## Targets: {m}", "", "Per case:", "", *gl, "", "Source-weighted:", "", *wl, "",
               f"PIT histogram per cutoff ({m}):", "", pit_table(cases, m), ""]  # fmt: skip
        b = cases[(cases["method"] == m) & cases["ok"].astype(bool)]
        md += [f"Sampler health ({m}, {len(b)} forecasts): r_hat > 1.01 in {(b['r_hat_max'] > 1.01).mean():.0%}, "
               f"any divergence in {(b['divergences'] > 0).mean():.0%}; {b['seconds'].mean():.2f} s per forecast "
               "(compile included, amortised).", ""]  # fmt: skip
    md += stop_section(cases)
    for n in ctx_configs:
        md += context_section("oscillator", n)
    md += ["## Per source: mean nCRPS over all cutoffs (best per row in bold)", "", per_source(cases)]
    (RES / "forecast.md").write_text("\n".join(md) + "\n")
    (RES / "forecast.json").write_text(json.dumps(js, indent=1, default=str))
    cases.to_csv(RES / "forecast_cases.csv.gz", index=False)
    print((RES / "forecast.md").read_text()[:6000])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", action="append", help="configuration(s) to run (default: all)")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--source", action="append", help="only these sources (development)")
    ap.add_argument("--draws", type=int, default=DEFAULT_SAMPLER.draws)
    ap.add_argument("--tune", type=int, default=DEFAULT_SAMPLER.tune)
    args = ap.parse_args()
    configs = args.config or list(CONFIGS)
    if not args.report_only:
        runs = load_dev()
        for n in configs:
            run_config(n, runs, SamplerConfig(draws=args.draws, tune=args.tune, seed=0), only_sources=args.source)
    report(configs)


if __name__ == "__main__":
    main()
