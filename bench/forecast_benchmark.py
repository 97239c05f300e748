"""Forecast benchmark on every development source: bayesgrpo (leave-one-source-out) vs the peers.

    .venv/bin/python bench/run_peers.py                                  # the peers, once (resumable)
    .venv/bin/python bench/fit_population_prior.py                       # the per-run fits of the LOSO priors
    .venv/bin/python bench/forecast_benchmark.py --no-report             # each kind's ledger (resumable)
    .venv/bin/python bench/quality_study.py --stage evidence             # the kinds' evidence per case
    .venv/bin/python bench/quality_study.py                              # the shipped default, composed LOSO
    .venv/bin/python bench/forecast_benchmark.py --report-only           # rebuild bench/results/forecast.md
    .venv/bin/python bench/forecast_figures.py                           # the fan charts of the worst cases

Protocol
--------
Every development run (``bench/devdata.py::load_all``: grpo-public + grpo-extra with a fixed sample of the
78-run repository, grpo-more, 12 runs of the numpy testbed as one source) is truncated at 10/20/30/50% of
its step span; each method forecasts the final reward (mean logged reward over the last 10% of the run)
with the run's own last step as the horizon and is scored against the logged truth (errors, CRPS and
widths divided by the run's robust reward range). bayesgrpo's population prior for a run of source S
is refitted WITHOUT S (leave-one-source-out: :func:`bayesgrpo.models.prior.fit_population` with
``exclude_source=S`` on the per-run fits of ``bench/fit_population_prior.py``), and so are its hazard and
interval layer (``bench/quality_study.py``): no number below uses anything that saw the run's source.
Aggregates are per case and source-weighted (each source counts the same). Ledgers (resume state):
``bench/results/forecast_runs/dev/<config>/<source>/cases.csv`` (+ ``draws.npz``).
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

from devdata import SELECTION_ALL, load_all  # noqa: E402

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


#: the composed forecasters of bench/quality_study.py (its ledger of scored cases) -> their names here
AUTO, TODAY = "bayesgrpo[auto]", "bayesgrpo[today]"


def composed_cases() -> tuple[pd.DataFrame, str]:
    """The cases ``bench/quality_study.py`` scored: the shipped default (its chosen variant, ``bayesgrpo[auto]``),
    today's shipped forecaster (``bayesgrpo[today]``: the oscillator with its additive layer, LOSO) and each
    kind's raw draws, with the case facts the stop rule needs; and the chosen variant's name."""
    q = pd.read_csv(RES / "quality_cases.csv.gz")
    chosen = json.loads((RES / "quality_study.json").read_text())["chosen"]
    names = {"today": TODAY, chosen: AUTO, **{f"kind:{k}": f"bayesgrpo[{k}]" for k in ("oscillator", "degeneracy",
                                                                                         "logistic")}}  # fmt: skip
    q = q[q["method"].isin(names)].assign(orig_method=lambda d: d["method"], method=lambda d: d["method"].map(names))
    facts = pd.read_csv(RES / "quality_features.csv.gz")[
        ["run_id", "cutoff", "observed_until", "s0", "horizon", "n_obs"]
    ]
    q = q.merge(facts, on=["run_id", "cutoff"], how="left")
    return q, chosen


def goal_lines(S: pd.DataFrame, method: str) -> tuple[list[str], dict]:
    """The issue's targets per cutoff: cov80 in 0.75-0.85, cov50 in 0.42-0.58, mean CRPS at most 0.8x the best
    peer's at 0.1-0.3 and below every peer's at 0.5."""
    lines, res = [], {}
    peers = [m for m in S["method"].unique() if not str(m).startswith("bayesgrpo")]
    mark = lambda v: "–" if v is None else ("met" if v else "**not met**")  # noqa: E731
    for c, g in S.groupby("cutoff"):
        g = g.set_index("method")
        if method not in g.index:
            continue
        b = g.loc[method]
        pr = g.loc[[p for p in peers if p in g.index]]
        best_c, best_cm = pr["mean_ncrps"].min(), pr["mean_ncrps"].idxmin()
        ok = {
            "cov80": 0.75 <= b["cover80"] <= 0.85, "cov50": 0.42 <= b["cover50"] <= 0.58,
            "crps_08": bool(b["mean_ncrps"] <= 0.8 * best_c) if c <= 0.3 else None,
            "crps_below_all": bool(b["mean_ncrps"] < best_c) if c >= 0.5 else None,
        }  # fmt: skip
        res[f"{c:g}"] = {**ok, "ratio": float(b["mean_ncrps"] / best_c)}
        crps = f"<= 0.8x: {mark(ok['crps_08'])}" if c <= 0.3 else f"below every peer: {mark(ok['crps_below_all'])}"
        lines.append(f"- cutoff {c:g}: cov80 {b['cover80']:.0%} ({mark(ok['cov80'])}), cov50 {b['cover50']:.0%} "
                     f"({mark(ok['cov50'])}); CRPS {b['mean_ncrps']:.3f} = {b['mean_ncrps'] / best_c:.2f}x the best "
                     f"peer ({best_cm} {best_c:.3f}; {crps})")  # fmt: skip
    return lines, res


def worst_sources(cases: pd.DataFrame, method: str, k: int = 5) -> tuple[list[str], float]:
    """The ``k`` sources with the lowest mean 80% coverage of ``method`` (over all their cases) and their mean."""
    b = cases[(cases["method"] == method) & cases["ok"].astype(bool)]
    g = b.groupby("source").agg(cases=("cover80", "size"), cov80=("cover80", "mean"), cov50=("cover50", "mean"),
                                crps=("ncrps", "mean"), below=("pit", lambda p: (p < 0.1).mean()),
                                above=("pit", lambda p: (p > 0.9).mean()))  # fmt: skip
    w = g.sort_values(["cov80", "crps"], ascending=[True, False]).head(k)
    lines = ["| source | cases | cov80 | cov50 | mean nCRPS | truth below q10 | truth above q90 |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    lines += [f"| {s} | {r.cases} | {r.cov80:.0%} | {r.cov50:.0%} | {r.crps:.3f} | {r.below:.0%} | {r.above:.0%} |"
              for s, r in w.iterrows()]  # fmt: skip
    return lines, float(w["cov80"].mean())


def class_table(cases: pd.DataFrame, methods) -> list[str]:
    """Per class of run (:data:`quality_study.CLASS_RULE`): runs, cases, cov80, cov50, mean nCRPS per method."""
    b = cases[cases["ok"].astype(bool)]
    lines = ["| class | method | runs | cases | cov80 | cov50 | mean nCRPS | truth below q10 | truth above q90 |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    import quality_study as QS

    for cl in QS.CLASSES:
        for m in methods:
            g = b[(b["cls"] == cl) & (b["method"] == m)]
            if g.empty:
                continue
            lines.append(f"| {cl} | {m} | {g['run_id'].nunique()} | {len(g)} | {g['cover80'].mean():.0%} | "
                         f"{g['cover50'].mean():.0%} | {g['ncrps'].mean():.3f} | {(g['pit'] < 0.1).mean():.0%} | "
                         f"{(g['pit'] > 0.9).mean():.0%} |")  # fmt: skip
    return lines


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
    from bayesgrpo.evaluation.stop_rule import summarize_stops
    from bench.stop_rule import stop_rule_backtest

    runs = load_all()
    stops = stop_rule_backtest(cases, runs, delta=0.05, epsilon=0.2)
    out = ["## Stop or continue? The stop rule on every method's forecasts", "",
           "Rule (`bench/stop_rule.py::stop_rule_backtest`): at the checkpoints 0.1/0.2/0.3/0.5 of each run, stop at the first "
           "where P(final reward >= current level + 0.05 x scale) < 0.2; a bad stop loses more than 0.1 of the run's "
           "range. The oracle knows the outcome. Target: >= 20% of steps saved with <= 15% bad stops.", ""]  # fmt: skip
    for weighted in (False, True):
        t = summarize_stops(stops, weighted=weighted)
        out += [
            f"{'Source-weighted' if weighted else 'Per run'}:",
            "",
            "| method | runs | stopped | steps saved | bad stops | reward lost |",
            "|---|---|---|---|---|---|",
        ]
        for r in t.sort_values("method").itertuples():
            out.append(
                f"| {r.method} | {r.runs} | {r.stopped:.0%} | {r.steps_saved:.0%} | {r.bad_stops:.0%} | "
                f"{r.reward_lost:.3f} |"
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
        cells = [f"{sweeps[e].loc[m, 'steps_saved']:.0%} / {sweeps[e].loc[m, 'bad_stops']:.0%}" for e in eps_grid]
        out.append(f"| {m} | " + " | ".join(cells) + " |")
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


def _sampler_line(cases: pd.DataFrame, method: str, base: str) -> tuple[str, dict]:
    b = cases[(cases["method"] == method) & cases["ok"].astype(bool)]
    t = cases[(cases["method"] == base) & cases["ok"].astype(bool)]["seconds"].mean()
    res = {"r_hat": float((b["r_hat_max"] > 1.01).mean()), "divergent": float((b["divergences"] > 0).mean()),
           "seconds": float(b["seconds"].mean()), "seconds_today": float(t)}  # fmt: skip
    mark = lambda ok: "met" if ok else "**not met**"  # noqa: E731
    line = (f"Sampler health and time ({method}, {len(b)} forecasts): r_hat > 1.01 in {res['r_hat']:.1%} (target < "
            f"3%: {mark(res['r_hat'] < 0.03)}), any divergence in {res['divergent']:.1%} (target < 3%: "
            f"{mark(res['divergent'] < 0.03)}); {res['seconds']:.2f} s per forecast against today's {t:.2f} s = "
            f"{res['seconds'] / t:.2f}x (target <= 1.5x: {mark(res['seconds'] <= 1.5 * t)}). Seconds are the "
            "ledgers' wall-clock per fit (compile amortised) plus the evidence's CPU seconds, taken while other "
            "engineers' jobs shared the 2 cores.")  # fmt: skip
    return line, res


def report(configs) -> None:
    import quality_study as QS

    peers = pd.read_csv(WORK / "peers" / "cases.csv")
    comp, chosen = composed_cases()
    cases = pd.concat([peers, comp], ignore_index=True)
    cases = cases[cases["cutoff"].round(6).isin(CUTOFFS)]
    key = cases.groupby(["run_id", "cutoff"])["method"].nunique()
    full = key[key == cases["method"].nunique()].index
    cases = cases.set_index(["run_id", "cutoff"]).loc[full].reset_index()
    cls = comp.drop_duplicates(["run_id"]).set_index("run_id")["cls"]
    cases["cls"] = cases["run_id"].map(cls)
    S, W = summarize(cases), summarize_weighted(cases)
    n_src = cases["source"].nunique()
    md = ["# Forecast benchmark: bayesgrpo vs peers on every development source (leave-one-source-out)", "",
          f"Regenerate: `.venv/bin/python bench/run_peers.py && {CMD} --no-report && .venv/bin/python "
          f"bench/quality_study.py --stage evidence && .venv/bin/python bench/quality_study.py && {CMD} --report-only "
          "&& .venv/bin/python bench/forecast_figures.py` (every step resumable). "
          f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.", "",
          f"**Runs.** {SELECTION_ALL}: {cases['run_id'].nunique()} runs from {n_src} sources, cutoffs "
          f"{', '.join(map(str, CUTOFFS))}; {len(full)} run x cutoff cases scored by every method.", "",
          "**Protocol.** " + (__doc__.split("Protocol\n--------\n")[1].split("\n\n")[0].replace("\n", " ")), "",
          f"**bayesgrpo.** `{AUTO}` is the shipped default, `Forecaster()` = `Forecaster(\"auto\")`: the variant "
          f"`{chosen}` of `bench/results/quality_study.md` -- each run's shape chosen among the kinds by its evidence "
          "and the prior over kinds, the hazard of leaving the regime and the conditioned interval layer, both "
          "fitted without the scored source. "
          f"`{TODAY}` is the forecaster shipped before (the oscillator with its additive calibration layer, fitted "
          "without the scored source); `bayesgrpo[<kind>]` are the kinds' own draws. Sampler: nutpie, "
          f"{DEFAULT_SAMPLER.chains} chains x {DEFAULT_SAMPLER.draws} draws / {DEFAULT_SAMPLER.tune} tune.", "",
          "**Peers** (`bayesgrpo.evaluation.peers`, identical prefix and horizon): `last_value`, `exponential`, "
          "`scalerl`, `pow3` (bounded least squares, 40 bootstrap refits), `domhan_fast` (Domhan et al.'s 11-family "
          "ensemble in PyMC, 2 x 150 draws). LC-PFN cannot run offline (its weights are downloaded at run time).", "",
          "## Source-weighted (the headline: each source counts the same)", "",
          markdown_table(W, extra_cols=("n_sources",)), "",
          "## Per case (every case counts the same)", "", markdown_table(S), ""]  # fmt: skip
    js = {"chosen": chosen, "summary": S.to_dict("records"), "summary_weighted": W.to_dict("records"), "goals": {}}
    for m in (AUTO, TODAY):
        gl, gr = goal_lines(S, m)
        wl, wr = goal_lines(W, m)
        ws, wmean = worst_sources(cases, m)
        hl, hr = _sampler_line(cases, m, TODAY)
        b = cases[(cases["method"] == m) & cases["ok"].astype(bool)]
        cl = {c: float(b.loc[b["cls"] == c, "cover80"].mean()) for c in ("S-curve", "decline/collapse")}
        js["goals"][m] = {"per_case": gr, "source_weighted": wr, "worst5_cov80": wmean, "classes_cov80": cl, **hr}
        md += [f"## Targets: {m}", "", "Source-weighted:", "", *wl, "", "Per case:", "", *gl, "",
               f"The five worst sources (mean 80% coverage over their cases; target: their mean >= 0.5: "
               f"{wmean:.2f}, {'met' if wmean >= 0.5 else '**not met**'}):", "", *ws, "",
               "S-curve and decline/collapse classes, truth inside the 80% interval (target >= 65%): "
               + ", ".join(f"{c} {v:.0%} ({'met' if v >= 0.65 else '**not met**'})" for c, v in cl.items()) + ".", "",
               hl, "", f"PIT histogram per cutoff ({m}):", "", pit_table(cases, m), ""]  # fmt: skip
    md += ["## Per class of run", "", f"Classes by a rule on the complete run: {QS.CLASS_RULE}.", "",
           *class_table(cases, [AUTO, TODAY, "bayesgrpo[oscillator]", "bayesgrpo[degeneracy]", "last_value",
                                "exponential"]), "",
           "## Channels: with and without, each ablated", "",
           "From `bench/results/quality_study.md` section 4: the shipped default with each channel as if it were "
           "not logged (its presence flag and its precursor set to 0 in the hazard and the interval layer, both "
           "refitted leave-one-source-out), and with none. The kinds' own fits read the reward only (the spread "
           "channel of the degeneracy kinds is not in these ledgers).", ""]  # fmt: skip
    q = pd.read_csv(RES / "quality_cases.csv.gz")
    abl = q[q["method"].str.startswith(chosen) & ~q["method"].str.endswith("in-sample")]
    for title, T in (("Source-weighted", summarize_weighted(abl)), ("Per case", summarize(abl))):
        md += [f"{title}:", "", markdown_table(T, extra_cols=()), ""]
    figs = sorted((RES / "figures").glob("forecast_auto_*.png"))
    if figs:
        md += [
            "## Fan charts: the worst case of each class",
            "",
            "`bench/forecast_figures.py`: for each class the case with the highest nCRPS of the shipped default, "
            "forecast by `Forecaster()` itself with priors, hazard and layer fitted without its source:",
            "",
        ]
        md += [f"![{f.stem}](figures/{f.name})" for f in figs]
        judged = RES / "figures" / "forecast_auto_judged.md"
        md += ["", judged.read_text() if judged.exists() else "", ""]
    md += stop_section(cases)
    md += context_section("oscillator", "oscillator_ctx")
    md += ["## Per source: mean nCRPS over all cutoffs (best per row in bold)", "", per_source(cases)]
    (RES / "forecast.md").write_text("\n".join(md) + "\n")
    (RES / "forecast.json").write_text(json.dumps(js, indent=1, default=str))
    cases.to_csv(RES / "forecast_cases.csv.gz", index=False)
    print((RES / "forecast.md").read_text()[:6000])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", action="append", help="configuration(s) to run (default: all)")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--no-report", action="store_true", help="only run the forecasts (fill the ledgers)")
    ap.add_argument("--source", action="append", help="only these sources (development)")
    ap.add_argument("--draws", type=int, default=DEFAULT_SAMPLER.draws)
    ap.add_argument("--tune", type=int, default=DEFAULT_SAMPLER.tune)
    args = ap.parse_args()
    configs = args.config or list(CONFIGS)
    if not args.report_only:
        runs = load_all()
        for n in configs:
            run_config(n, runs, SamplerConfig(draws=args.draws, tune=args.tune, seed=0), only_sources=args.source)
    if not args.no_report:
        report(configs)


if __name__ == "__main__":
    main()
