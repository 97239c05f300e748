"""Forecasts on the TRL testbed: a trainer whose every setting is known, as one more source of the benchmark.

    .venv/bin/python bench/forecast_trl.py --peers           # the peers on the TRL runs (resumable)
    .venv/bin/python bench/forecast_trl.py                   # bayesgrpo, every config (resumable)
    .venv/bin/python bench/forecast_trl.py --report-only     # rebuild bench/results/forecast_trl.md

Run time (2026-12-05, a 2-core machine shared with other jobs): ``--peers`` 5 min; the bayesgrpo configs 5 min
each (oscillator) and 9-10 min each (degeneracy), ~1-4 s per NUTS forecast. Restricted to seed 0 of every cell
(43 runs x 4 cutoffs) to keep the CPU modest.

Protocol
--------
The protocol of ``bench/forecast_benchmark.py`` (cutoffs 0.1/0.2/0.3/0.5 of each run's step span, the
final reward = mean logged reward over the last 10% of the run, errors and CRPS divided by the run's
robust reward range) on the runs of ``data/trl-testbed`` (seed 0 of every cell: one run per setting),
read from their ``trainer_state.json.gz`` by the package's own TRL reader. The TRL testbed is one
source: its forecasts use the package's shipped population prior and calibration layer, which were
fitted on the development sources and the numpy testbed and never saw a TRL-testbed run, so every number
here is leave-this-source-out; the numbers of the other sources (``bench/results/forecast.md``) are
untouched. The noise-free expected reward of the sampling policy (exact, from the pass rates) gives the
true stop step (``reward_expected``).
Metadata ablation: the same cases forecast with the run's physics settings in the metadata
(``beta1`` -> the momentum prior, ``refresh_interval`` -> the lag pattern, ``group_size``,
``learning_rate``, ``params_b``, ``batch_size``) and without them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import trl_data as TD  # noqa: E402
from forecast_benchmark import goal_lines, pit_table  # noqa: E402
from run_peers import PEER_KW, PEERS  # noqa: E402

from bayesgrpo.evaluation.backtest import backtest  # noqa: E402
from bayesgrpo.evaluation.report import markdown_table  # noqa: E402
from bayesgrpo.evaluation.scoring import summarize  # noqa: E402
from bayesgrpo.inference.sampling import SamplerConfig  # noqa: E402

CUTOFFS = (0.1, 0.2, 0.3, 0.5)
RES = ROOT / "bench" / "results"
WORK = RES / "forecast_runs" / "trl"
CMD = ".venv/bin/python bench/forecast_trl.py"
CONFIGS = {
    "oscillator": dict(kind="oscillator", meta=True, doc="the oscillator, shipped prior + calibration, with metadata"),
    "oscillator_nometa": dict(kind="oscillator", meta=False, doc="the same without the physics metadata"),
    "degeneracy": dict(kind="degeneracy", meta=True, doc="the degeneracy-aware oscillator, with metadata"),
    "degeneracy_nometa": dict(kind="degeneracy", meta=False, doc="the same without the physics metadata"),
}
SETTING = {  # sweep group -> the setting it varies (for the per-setting table)
    "base": "base",
    "lr": "learning rate",
    "beta1": "adam_beta1",
    "beta1_lr": "beta1 x lr",
    "G": "num_generations G",
    "refresh": "steps_per_generation (clip)",
    "refresh_noclip": "steps_per_generation (no clip)",
    "iterations": "num_iterations",
    "kl": "beta (KL)",
    "drgrpo": "Dr.GRPO x G",
    "size": "model width",
    "difficulty": "task difficulty",
}


def selected() -> list[str]:
    """The benchmark's runs: seed 0 of every cell of the sweep (one run per setting; CPU time)."""
    m = TD.load_meta()
    return [r for r in TD.available() if m.loc[r, "seed"] == 0]


def runset(meta: bool):
    """The selected TRL runs with the exact expected reward of their sampling policy as ``reward_expected``."""
    rs = TD.load_runset(selected(), with_physics_meta=meta)
    data = rs.data.copy()
    exp = []
    for rid, g in data.groupby("run_id", sort=False):
        R = TD.latent(rid)["reward_current"].to_numpy()
        K = int(TD.load_meta().loc[rid, "refresh_interval"])
        s = g["step"].to_numpy()
        gen = ((s - 1) // K) * K  # the policy version that generated the batch logged at step s
        exp.append(pd.Series(R[np.clip(gen, 0, len(R) - 1)], index=g.index))
    data["reward_expected"] = pd.concat(exp)
    from bayesgrpo.schema import RunSet

    return RunSet.from_frames(data, rs.meta.reset_index())


def _progress(name: str, every: int = 20):
    t0 = time.time()

    def progress(done, total, msg):
        if done % every == 0 or done == total:
            print(f"[{time.time() - t0:6.0f}s] {name}: {done}/{total} {msg}", flush=True)

    return progress


def run_config(name: str, sampler: SamplerConfig) -> None:
    cfg = CONFIGS[name]
    rs = runset(cfg["meta"])
    progress = _progress(name)

    backtest(
        rs,
        cutoffs=CUTOFFS,
        kind=cfg["kind"],
        peers=(),
        sampler=sampler,
        out_dir=WORK / name,
        make_figures=False,
        progress=progress,
        source_col="source_repo",
    )


def run_peers() -> None:
    rs = runset(True)
    progress = _progress("peers", every=25)

    backtest(
        rs,
        cutoffs=CUTOFFS,
        peers=PEERS,
        include_bayes=False,
        out_dir=WORK / "peers",
        progress=progress,
        peer_kwargs=PEER_KW,
        make_figures=False,
        source_col="source_repo",
    )


def load_cases(name: str) -> pd.DataFrame:
    p = WORK / name / "cases.csv"
    if not p.exists():
        return pd.DataFrame()
    df = pd.read_csv(p)
    if name != "peers":
        df["method"] = f"bayesgrpo[{name}]"
    return df


def paired(cases: pd.DataFrame, a: str, b: str, col: str = "ncrps", n_boot: int = 2000) -> dict:
    """Mean of (a - b) over the cases both scored, with a bootstrap CI over runs."""
    x = cases[cases["method"] == a].set_index(["run_id", "cutoff"])[col]
    y = cases[cases["method"] == b].set_index(["run_id", "cutoff"])[col]
    d = (x - y).dropna()
    runs = d.index.get_level_values(0).unique()
    rng = np.random.default_rng(0)
    by_run = d.groupby(level=0).mean()
    boots = [by_run.loc[rng.choice(runs, len(runs))].mean() for _ in range(n_boot)]
    return {
        "mean": float(d.mean()),
        "ci95": [float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))],
        "cases": int(len(d)),
        "share_a_better": float((d < 0).mean()),
    }


def per_setting(cases: pd.DataFrame, meta: pd.DataFrame, methods: list[str]) -> list[str]:
    ok = cases[cases["ok"].astype(bool)].copy()
    ok["setting"] = ok["run_id"].map(meta["sweep"]).map(SETTING)
    t = ok.pivot_table(index="setting", columns="method", values="ncrps", aggfunc="mean")
    c = ok.pivot_table(index="setting", columns="method", values="cover80", aggfunc="mean")
    n = ok.groupby("setting")["run_id"].nunique()
    nm = ok.pivot_table(index="setting", columns="method", values="run_id", aggfunc="nunique")

    def cell(s, m, v):
        if pd.isna(v):
            return "-"
        return v + ("" if nm.loc[s, m] == n[s] else f" ({int(nm.loc[s, m])} of {int(n[s])} runs)")

    peers = [m for m in t.columns if not str(m).startswith("bayesgrpo")]
    lines = [
        "| setting | runs | "
        + " | ".join(methods)
        + " | best peer | "
        + " | ".join(f"cov80 {m}" for m in methods)
        + " |",
        "|---|---|" + "---|" * (2 * len(methods) + 1),
    ]
    for s in t.index:
        bp = t.loc[s, peers].idxmin()
        lines.append(
            f"| {s} | {int(n[s])} | "
            + " | ".join(cell(s, m, f"{t.loc[s, m]:.3f}" if pd.notna(t.loc[s, m]) else None) for m in methods)
            + f" | {bp} {t.loc[s, bp]:.3f} | "
            + " | ".join(f"{c.loc[s, m]:.0%}" if pd.notna(c.loc[s, m]) else "-" for m in methods)
            + " |"
        )
    return lines


def findings(S_w: pd.DataFrame, scored_w: pd.DataFrame, scored: pd.DataFrame, abl: dict, meta) -> list[str]:
    """The headline, written from the numbers below it."""
    osc, peers = "bayesgrpo[oscillator]", [m for m in S_w["method"].unique() if not m.startswith("bayesgrpo")]
    rows, ratio = [], {}
    for c in CUTOFFS:
        sc = S_w[np.isclose(S_w["cutoff"], c)].set_index("method")
        bp = sc.loc[peers, "mean_ncrps"].idxmin()
        ratio[c] = sc.loc[osc, "mean_ncrps"] / sc.loc[bp, "mean_ncrps"]
        rows.append(
            f"{c:g}: {sc.loc[osc, 'mean_ncrps']:.3f} (without metadata "
            f"{sc.loc['bayesgrpo[oscillator_nometa]', 'mean_ncrps']:.3f}) vs "
            f"{bp} {sc.loc[bp, 'mean_ncrps']:.3f}"
        )
    o = scored_w[(scored_w["method"] == osc) & scored_w["ok"].astype(bool)]
    cov = S_w[S_w["method"] == osc]["cover80"]
    dg = summarize(scored[scored["method"] == "bayesgrpo[degeneracy]"]) if len(scored) else pd.DataFrame()
    dcov = dg["cover80"] if len(dg) else pd.Series([np.nan])
    pj = RES / "physics_trl.json"
    t10 = json.loads(pj.read_text())["predictions"]["slow_start"]["t10_median"] if pj.exists() else float("nan")
    a_all, d_all = abl.get("oscillator@all"), abl.get("degeneracy@all")
    out = [
        "## Findings",
        "",
        "- **Accuracy.** Mean nCRPS (lower is better) of `bayesgrpo[oscillator]` against the best peer on all runs, "
        "by cutoff: "
        + "; ".join(rows)
        + ". Ratio to the best peer: "
        + ", ".join(f"{ratio[c]:.2f} at {c:g}" for c in CUTOFFS)
        + ": the package's forecasts lead early in a run and are level with the best curve fit by half the run.",
        f"- **Calibration fails on this trainer.** 80% coverage of the oscillator {cov.min():.0%}-{cov.max():.0%} "
        f"over the cutoffs (nominal 80%); the truth lies above the forecast's 90% quantile in "
        f"{(o['pit'] > 0.9).mean():.0%} of the cases (median PIT {o['pit'].median():.2f}): the forecasts "
        "under-predict the final reward. These runs are S-curves whose rise starts after a long flat start "
        f"(`bench/results/physics_trl.md`, prediction 8.1: a median {t10:.0f} of 400 steps to 10% of the gain), and "
        "forecasts made with the shipped prior and calibration layer (fitted on other sources) put their plateau "
        "too low. "
        f"The degeneracy kind, built for such starts, does not fix it here (80% coverage {dcov.min():.0%}-"
        f"{dcov.max():.0%} over the cutoffs on the lag-free runs).",
    ]
    if a_all:
        out.append(
            f"- **Metadata-informed priors.** Giving the oscillator the physics settings (beta1 -> momentum prior, "
            f"refresh interval -> lag pattern, G, lr, size, batch) makes it *worse*: nCRPS {a_all['mean']:+.3f} "
            f"(95% CI {a_all['ci95'][0]:+.3f} to {a_all['ci95'][1]:+.3f}; better with metadata in "
            f"{a_all['share_a_better']:.0%} of {a_all['cases']} cases)"
            + (
                f"; for the degeneracy kind they make no difference ({d_all['mean']:+.4f}, CI "
                f"{d_all['ci95'][0]:+.4f} to {d_all['ci95'][1]:+.4f})"
                if d_all
                else ""
            )
            + ". On a trainer whose every setting is known they are not worth their keep as built. A likely reason, "
            "not isolated here: Adam at beta1 0.9 does not act as a heavy ball with mu = beta1 (physics_trl.md, 8.7 "
            "and 8.2), so the momentum prior the metadata switches on may add inertia the runs do not have."
        )
    ok = scored_w[(scored_w["method"] == osc) & scored_w["ok"].astype(bool)].copy()
    ok["setting"] = ok["run_id"].map(meta["sweep"]).map(SETTING)
    by = ok.groupby("setting")["ncrps"].mean().sort_values()
    pe = scored_w[scored_w["method"].isin(peers) & scored_w["ok"].astype(bool)].copy()
    pe["setting"] = pe["run_id"].map(meta["sweep"]).map(SETTING)
    best_peer = pe.groupby(["setting", "method"])["ncrps"].mean().groupby(level=0).min()
    n_win = int((by < best_peer.reindex(by.index)).sum())
    out.append(
        "- **Per setting** (oscillator, mean nCRPS over the cutoffs; one run per setting value, so these are "
        "descriptive): easiest "
        + ", ".join(f"{k} {v:.2f}" for k, v in by.head(2).items())
        + "; hardest "
        + ", ".join(f"{k} {v:.2f}" for k, v in by.tail(2).items())
        + f". It has a lower mean nCRPS than the best peer of the group in {n_win} of {len(by)} setting groups "
        "(table below)."
    )
    return out + [""]


def report() -> None:
    meta = TD.load_meta()
    parts = [load_cases("peers")] + [load_cases(n) for n in CONFIGS]
    cases = pd.concat([p for p in parts if len(p)], ignore_index=True)
    cases = cases[cases["cutoff"].round(6).isin(CUTOFFS) & cases["run_id"].isin(selected())]
    sk = WORK / "peers" / "skipped.csv"
    n_skipped = len(pd.read_csv(sk)) if sk.exists() else 0
    okc = cases[cases["ok"].astype(bool)]

    def common(methods) -> pd.MultiIndex:
        """(run, cutoff) cases every one of ``methods`` forecast."""
        k = okc[okc["method"].isin(methods)].groupby(["run_id", "cutoff"])["method"].nunique()
        return k[k == len(methods)].index

    full = common(list(cases["method"].unique()))
    scored = cases.set_index(["run_id", "cutoff"]).loc[full].reset_index()
    S = summarize(scored)
    bay = [f"bayesgrpo[{n}]" for n in CONFIGS if f"bayesgrpo[{n}]" in set(scored["method"])]
    # the degeneracy kind refuses runs with a refresh interval (by design): the oscillator and the peers on every run
    wide_methods = [m for m in cases["method"].unique() if "degeneracy" not in m]
    wide = common(wide_methods)
    scored_w = cases[cases["method"].isin(wide_methods)].set_index(["run_id", "cutoff"]).loc[wide].reset_index()
    S_w = summarize(scored_w)
    n_lag = scored_w.loc[scored_w["run_id"].map(meta["refresh_interval"]) > 1, "run_id"].nunique()
    md = [
        "# Forecasts on the TRL testbed (real GRPOTrainer runs, every setting known)",
        "",
        f"Regenerate: `{CMD} --peers && {CMD}` (resumable; `--report-only` rebuilds this page from the ledgers "
        "`bench/results/forecast_runs/trl/<config>/cases.csv`). Generated "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; the forecasts were made on 2026-12-05 between 01:26 "
        "and 02:11 UTC on a 2-core machine shared with other jobs.",
        "",
        "**Protocol.** " + __doc__.split("Protocol\n--------\n")[1].split("\n\n")[0].replace("\n", " "),
        "",
        f"**Runs.** {len(selected())} runs of `data/trl-testbed` (seed 0 of every cell of the sweep: one run per "
        "setting, to keep the CPU modest on a shared 2-core machine), x 4 cutoffs = "
        f"{len(selected()) * len(CUTOFFS)} cases. {n_skipped} cases were not forecast by anyone (fewer than 5 "
        "logged points before the cutoff: with a refresh interval K > 1 TRL logs the reward once per generation, "
        f"every K steps). The degeneracy kind refuses runs with a refresh interval K > 1 by design (it models "
        f"lag-free runs only), so two scored sets: **lag-free**, {len(full)} cases in "
        f"{full.get_level_values(0).nunique()} runs forecast by every method; **all runs**, {len(wide)} cases in "
        f"{wide.get_level_values(0).nunique()} runs ({n_lag} with K > 1) forecast by the peers and both oscillator "
        "configurations (a few cases with 5 logged points are beyond some peers).",
        "",
        "**Configurations.** " + "; ".join(f"`bayesgrpo[{n}]`: {c['doc']}" for n, c in CONFIGS.items()) + ". "
        f"Sampler: nutpie, {SamplerConfig().chains} chains x {SamplerConfig().draws} draws / {SamplerConfig().tune} "
        "tune. "
        "Peers as in `bench/forecast_benchmark.py`.",
        "",
        "FINDINGS",
        "## Per cutoff: lag-free runs, every method",
        "",
        markdown_table(S),
        "",
        "## Per cutoff: all runs (K > 1 included), the peers and the oscillator",
        "",
        markdown_table(S_w),
        "",
        "## Goals and calibration (lag-free set)",
        "",
    ]
    findings_at = md.index("FINDINGS")
    md.pop(findings_at)
    js = {"summary": S.to_dict("records"), "summary_all_runs": S_w.to_dict("records"), "goals": {},
          "metadata_ablation": {}}  # fmt: skip
    for m in bay:
        gl, gr = goal_lines(S, m)
        js["goals"][m] = gr
        b = scored[(scored["method"] == m) & scored["ok"].astype(bool)]
        md += [
            f"### {m}",
            "",
            *gl,
            "",
            pit_table(scored, m),
            f"Sampler health: r_hat > 1.01 in {(b['r_hat_max'] > 1.01).mean():.0%}, any divergence in "
            f"{(b['divergences'] > 0).mean():.0%}; {b['seconds'].mean():.2f} s per forecast (a shared, loaded "
            "machine).",
            "",
        ]
    md += [
        "## Are the metadata-informed priors worth their keep?",
        "",
        "Paired on every case both configurations forecast (the oscillator: all runs, K > 1 included; the degeneracy "
        "kind: lag-free runs): mean nCRPS with the physics metadata minus without (negative = the metadata helps), "
        "95% bootstrap interval over runs.",
        "",
        "| kind | cutoff | cases | mean delta nCRPS | 95% CI | share of cases better with metadata |",
        "|---|---|---|---|---|---|",
    ]
    for kind in ("oscillator", "degeneracy"):
        a, b = f"bayesgrpo[{kind}]", f"bayesgrpo[{kind}_nometa]"
        if a not in bay or b not in bay:
            continue
        both = okc[okc["method"].isin([a, b])]
        for c in (*CUTOFFS, None):
            sub = both if c is None else both[np.isclose(both["cutoff"], c)]
            p = paired(sub, a, b)
            js["metadata_ablation"][f"{kind}@{'all' if c is None else c}"] = p
            md.append(
                f"| {kind} | {'all' if c is None else c} | {p['cases']} | {p['mean']:+.4f} | [{p['ci95'][0]:+.4f}, "
                f"{p['ci95'][1]:+.4f}] | {p['share_a_better']:.0%} |"
            )
        # where the lag pattern matters most: runs with a refresh interval
        lag = both[both["run_id"].map(meta["refresh_interval"]) > 1]
        if lag.groupby(["run_id", "cutoff"])["method"].nunique().max() == 2 if len(lag) else False:
            p = paired(lag, a, b)
            js["metadata_ablation"][f"{kind}@refresh>1"] = p
            md.append(
                f"| {kind} | runs with K > 1 | {p['cases']} | {p['mean']:+.4f} | [{p['ci95'][0]:+.4f}, "
                f"{p['ci95'][1]:+.4f}] | "
                f"{p['share_a_better']:.0%} |"
            )
    md[findings_at:findings_at] = findings(S_w, scored_w, scored, js["metadata_ablation"], meta)
    md += [
        "",
        "## Per setting (mean nCRPS over the cutoffs; cov80 = share of cases inside the 80% interval)",
        "",
        "On the all-runs set (the degeneracy kind: its lag-free cases among them, '-' where it refuses the runs).",
        "",
        *per_setting(pd.concat([scored_w, scored[scored["method"].str.contains("degeneracy")]]), meta, bay),
        "",
    ]
    (RES / "forecast_trl.md").write_text("\n".join(md) + "\n")
    (RES / "forecast_trl.json").write_text(json.dumps(js, indent=1, default=str))
    print("\n".join(md)[:5000])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", action="append", help="configuration(s) to run (default: all)")
    ap.add_argument("--peers", action="store_true", help="run the peers (then stop)")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    if args.peers:
        run_peers()
        return
    if not args.report_only:
        for n in args.config or list(CONFIGS):
            run_config(n, SamplerConfig(seed=0))
    report()


if __name__ == "__main__":
    main()
