"""Forecasts on the TRL testbed: a trainer whose every setting is known, as one more source of the benchmark.

    .venv/bin/python bench/forecast_trl.py --peers           # the peers on the TRL runs (resumable)
    .venv/bin/python bench/forecast_trl.py                   # bayesgrpo, every config (resumable)
    .venv/bin/python bench/forecast_trl.py --report-only     # rebuild bench/results/forecast_trl.md

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
    "oscillator": dict(model="oscillator", meta=True, doc="the oscillator, shipped prior + calibration, with metadata"),
    "oscillator_nometa": dict(model="oscillator", meta=False, doc="the same without the physics metadata"),
    "degeneracy": dict(model="degeneracy", meta=True, doc="the degeneracy-aware oscillator, with metadata"),
    "degeneracy_nometa": dict(model="degeneracy", meta=False, doc="the same without the physics metadata"),
}
SETTING = {  # sweep group -> the setting it varies (for the per-setting table)
    "base": "base (6 seeds)",
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
        model=cfg["model"],
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
            + " | ".join(f"{t.loc[s, m]:.3f}" for m in methods)
            + f" | {bp} {t.loc[s, bp]:.3f} | "
            + " | ".join(f"{c.loc[s, m]:.0%}" for m in methods)
            + " |"
        )
    return lines


def report() -> None:
    meta = TD.load_meta()
    parts = [load_cases("peers")] + [load_cases(n) for n in CONFIGS]
    cases = pd.concat([p for p in parts if len(p)], ignore_index=True)
    cases = cases[cases["cutoff"].round(6).isin(CUTOFFS) & cases["run_id"].isin(selected())]
    n_runs_all = cases["run_id"].nunique()
    okc = cases[cases["ok"].astype(bool)]
    key = okc.groupby(["run_id", "cutoff"])["method"].nunique()
    full = key[key == cases["method"].nunique()].index
    scored = cases.set_index(["run_id", "cutoff"]).loc[full].reset_index()
    S = summarize(scored)
    bay = [f"bayesgrpo[{n}]" for n in CONFIGS if f"bayesgrpo[{n}]" in set(scored["method"])]
    md = [
        "# Forecasts on the TRL testbed (real GRPOTrainer runs, every setting known)",
        "",
        f"Regenerate: `{CMD} --peers && {CMD}` (resumable; `--report-only` rebuilds this page). Generated "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        "**Protocol.** " + __doc__.split("Protocol\n--------\n")[1].split("\n\n")[0].replace("\n", " "),
        "",
        f"**Runs.** {n_runs_all} runs of `data/trl-testbed` (seed 0 of every cell of the sweep), {len(full)} run x "
        "cutoff cases scored by every method "
        f"({len(cases.groupby(['run_id', 'cutoff'])) - len(full)} cases dropped where some method could not forecast: "
        "runs with a refresh interval of 32-128 log a reward only once per generation, 4-13 points in 400 steps).",
        "",
        "**Configurations.** " + "; ".join(f"`bayesgrpo[{n}]`: {c['doc']}" for n, c in CONFIGS.items()) + ". "
        f"Sampler: nutpie, {SamplerConfig().chains} chains x {SamplerConfig().draws} draws / {SamplerConfig().tune} "
        "tune. "
        "Peers as in `bench/forecast_benchmark.py`.",
        "",
        "## Per cutoff",
        "",
        markdown_table(S),
        "",
    ]
    js = {"summary": S.to_dict("records"), "goals": {}, "metadata_ablation": {}}
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
        "Paired on the same cases: mean nCRPS with the physics metadata minus without (negative = the metadata helps), "
        "95% bootstrap interval over runs.",
        "",
        "| kind | cutoff | cases | mean delta nCRPS | 95% CI | share of cases better with metadata |",
        "|---|---|---|---|---|---|",
    ]
    for kind in ("oscillator", "degeneracy"):
        a, b = f"bayesgrpo[{kind}]", f"bayesgrpo[{kind}_nometa]"
        if a not in bay or b not in bay:
            continue
        for c in (*CUTOFFS, None):
            sub = scored if c is None else scored[np.isclose(scored["cutoff"], c)]
            p = paired(sub, a, b)
            js["metadata_ablation"][f"{kind}@{'all' if c is None else c}"] = p
            md.append(
                f"| {kind} | {'all' if c is None else c} | {p['cases']} | {p['mean']:+.4f} | [{p['ci95'][0]:+.4f}, "
                f"{p['ci95'][1]:+.4f}] | {p['share_a_better']:.0%} |"
            )
        # where the lag pattern matters most: runs with a refresh interval
        lag = scored[scored["run_id"].map(meta["refresh_interval"]) > 1]
        if len(lag):
            p = paired(lag, a, b)
            js["metadata_ablation"][f"{kind}@refresh>1"] = p
            md.append(
                f"| {kind} | runs with K > 1 | {p['cases']} | {p['mean']:+.4f} | [{p['ci95'][0]:+.4f}, "
                f"{p['ci95'][1]:+.4f}] | "
                f"{p['share_a_better']:.0%} |"
            )
    md += [
        "",
        "## Per setting (mean nCRPS over the cutoffs; cov80 = share of cases inside the 80% interval)",
        "",
        *per_setting(scored, meta, bay),
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
