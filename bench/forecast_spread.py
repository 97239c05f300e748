"""The spread channel measured leave-one-source-out: the degeneracy and logistic kinds with and without it.

    .venv/bin/python bench/fit_population_prior.py --spread                 # the nu / headroom fits (once)
    .venv/bin/python bench/forecast_spread.py                                 # every configuration (resumable)
    .venv/bin/python bench/forecast_spread.py --config degeneracy_spread --source S   # a pilot
    .venv/bin/python bench/forecast_spread.py --report-only                   # bench/results/forecast_spread.md
    .venv/bin/python bench/forecast_spread.py --timing 8                      # seconds, side by side (8 cases)

Protocol: that of ``bench/forecast_benchmark.py`` (its LOSO priors, cutoffs, truth, sampler and ledgers
``bench/results/forecast_runs/dev/<config>/<source>/cases.csv``) on grpo-public + grpo-extra + grpo-more
(``bench/devdata.py``). A spread configuration's prior for source S is the reward-only kind's LOSO prior
with the spread channel's population (``log nu``, ``log headroom``) refitted without S
(:func:`bayesgrpo.models.prior.with_spread_population` on ``bench/results/population_prior_spread_runs.csv``).
The Sunshine535 runs whose ``reward_std`` is a batch std (``devdata.batch_std_as_such``) have no channel.
A case whose prefix logs none of the configuration's channels is fitted by the reward-only graph (the
forecaster's routing; ``tests/test_spread.py`` checks it forecasts bit for bit as without channels), so its
row is the reward-only configuration's, copied, not recomputed; likewise a one-channel ablation's case
whose prefix does not log the other channel is the both-channels configuration's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import forecast_benchmark as FB  # noqa: E402
from devdata import FOLDERS_WITH_MORE, SELECTION_MORE, batch_std_as_such, load_dev  # noqa: E402

from bayesgrpo.evaluation.backtest import backtest  # noqa: E402
from bayesgrpo.evaluation.report import markdown_table  # noqa: E402
from bayesgrpo.evaluation.scoring import summarize, summarize_weighted  # noqa: E402
from bayesgrpo.inference.sampling import SamplerConfig  # noqa: E402

RES = ROOT / "bench" / "results"
SPREAD_TABLE = RES / "population_prior_spread_runs.csv"
BOTH = ("reward_std", "frac_reward_zero_std")
CMD = ".venv/bin/python bench/forecast_spread.py"
#: configuration -> (kind, channels, the reward-only configuration it is compared with)
CONFIGS = {
    "degeneracy": ("degeneracy", (), None),
    "degeneracy_spread": ("degeneracy", BOTH, "degeneracy"),
    "degeneracy_std": ("degeneracy", ("reward_std",), "degeneracy"),
    "degeneracy_fz": ("degeneracy", ("frac_reward_zero_std",), "degeneracy"),
    "logistic": ("logistic", (), None),
    "logistic_spread": ("logistic", BOTH, "logistic"),
}
DOC = {
    "degeneracy": "the degeneracy kind, reward only",
    "degeneracy_spread": "degeneracy with reward_std and frac_reward_zero_std where logged",
    "degeneracy_std": "degeneracy with reward_std only",
    "degeneracy_fz": "degeneracy with frac_reward_zero_std only",
    "logistic": "the logistic kind, reward only",
    "logistic_spread": "logistic with both channels",
}


def prior_for(kind: str, channels, source: str, table: pd.DataFrame, spread_rows: pd.DataFrame | None):
    from bayesgrpo.models.prior import with_spread_population

    prior = FB.loso_prior(table, kind, source)
    if channels:
        prior = with_spread_population(prior, spread_rows, exclude_source=source, name=f"{prior.name}+spread")
    return prior


def has_channel(runs, rid: str, cutoff: float, channels) -> bool:
    """Does the prefix the backtest forecasts at ``cutoff`` log one of ``channels`` (the forecaster's routing)?"""
    from bayesgrpo.models.arrays import prepare_arrays

    df = runs.run(rid)
    s0, H = int(df["step"].iloc[0]), int(df["step"].iloc[-1])
    pre = runs.select([rid]).truncate(until_step=int(np.floor(s0 + cutoff * (H - s0))))
    if len(pre.data) < 5:
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arr, _ = prepare_arrays(pre, horizon=H, channels=channels)
    return arr.has_channels


def seed_from(name: str, other: str, source: str, runs, same) -> int:
    """Copy ``other``'s rows (and draws) of the cases where ``same(run_id, cutoff)`` into ``name``'s ledger:
    cases whose forecast is the same computation in both configurations."""
    src_dir, dst_dir = FB.WORK / other / FB.slug(source), FB.WORK / name / FB.slug(source)
    if not (src_dir / "cases.csv").exists():
        raise SystemExit(f"{other} has no ledger for {source}: run --config {other} --source '{source}' first")
    base_rows = pd.read_csv(src_dir / "cases.csv")
    dst_dir.mkdir(parents=True, exist_ok=True)
    have = pd.read_csv(dst_dir / "cases.csv") if (dst_dir / "cases.csv").exists() else base_rows.iloc[:0]
    done = set(zip(have["run_id"], have["cutoff"].round(6), strict=True))
    copy = [
        i for i, r in base_rows.iterrows() if (r.run_id, round(r.cutoff, 6)) not in done and same(r.run_id, r.cutoff)
    ]
    if not copy:
        return 0
    out = pd.concat([have, base_rows.loc[copy]], ignore_index=True)
    tmp = dst_dir / "cases.csv.tmp"
    out.to_csv(tmp, index=False)
    tmp.replace(dst_dir / "cases.csv")
    if (src_dir / "draws.npz").exists():
        keys = {f"{base_rows.loc[i, 'run_id']}|{base_rows.loc[i, 'cutoff']:g}|bayesgrpo" for i in copy}
        kept = dict(np.load(dst_dir / "draws.npz")) if (dst_dir / "draws.npz").exists() else {}
        with np.load(src_dir / "draws.npz") as z:
            kept.update({k: z[k] for k in z.files if k in keys})
        np.savez_compressed(dst_dir / "draws.tmp.npz", **kept)
        (dst_dir / "draws.tmp.npz").replace(dst_dir / "draws.npz")
    return len(copy)


def seed_from_equivalents(name: str, source: str, runs) -> int:
    """A case forecasts the same in two configurations of one kind when its prefix logs none of the channels
    only one of them observes (the same channel array, graph and seed): copy such rows from the reward-only
    configuration and, for a one-channel ablation, from the both-channels one."""
    kind, channels, base = CONFIGS[name]
    n = seed_from(name, base, source, runs, lambda r, c: not has_channel(runs, r, c, channels))
    full = f"{kind}_spread"
    if set(channels) < set(BOTH) and (FB.WORK / full / FB.slug(source) / "cases.csv").exists():
        extra = tuple(set(BOTH) - set(channels))
        n += seed_from(name, full, source, runs, lambda r, c: not has_channel(runs, r, c, extra))
    return n


def run_config(name: str, runs, sampler: SamplerConfig, only_sources=None) -> None:
    from bayesgrpo.evaluation.methods import BayesGRPOMethod
    from bayesgrpo.forecast import Forecaster

    kind, channels, base = CONFIGS[name]
    table = pd.read_csv(FB.PRIOR_TABLE)
    spread_rows = pd.read_csv(SPREAD_TABLE) if channels else None
    src = runs.meta["source_repo"].astype(str)
    t0 = time.time()
    for s in sorted(src.unique()):
        if only_sources and s not in only_sources:
            continue
        ids = [r for r in runs.run_ids if src[r] == s]
        n_copied = seed_from_equivalents(name, s, runs) if base else 0
        prior = prior_for(kind, channels, s, table, spread_rows)

        def factory(hierarchical, prior=prior):
            return Forecaster(kind, final_window=0.1, hierarchical=hierarchical, sampler=sampler, prior=prior,
                              calibration=False, channels=channels)  # fmt: skip

        method = BayesGRPOMethod(forecaster=factory, chunk=1)
        backtest(runs.select(ids), cutoffs=FB.CUTOFFS, peers=(), methods={"bayesgrpo": method},
                 out_dir=FB.WORK / name / FB.slug(s), make_figures=False, save_draws=400, sampler=sampler, prior=prior,
                 calibration=False)  # fmt: skip
        print(
            f"[{time.time() - t0:6.0f}s] {name}: {s} ({len(ids)} runs; {n_copied} cases copied from {base})", flush=True
        )


# ----------------------------------------------------------------------------- report
def s_curve_runs(runs, *, binary: bool) -> list[str]:
    """Runs flat near their floor for the first 20% of their span, then rising (a rule on the complete run):
    the mean of the first 20% of the steps within 20% of the reward's range from its minimum, the final 10% at
    least 30% of the range above that start; ``binary``: only 0-1 rewards (every reward in [0, 1])."""
    out = []
    for r in runs.run_ids:
        d = runs.run(r)
        y, st = d["reward"].to_numpy(float), d["step"].to_numpy(float)
        if binary and (y.min() < 0 or y.max() > 1):
            continue
        f = (st - st[0]) / max(1.0, st[-1] - st[0])
        start, end, rng = y[f <= 0.2].mean(), y[f >= 0.9].mean(), max(np.ptp(y), 1e-12)
        if start - y.min() <= 0.2 * rng and end - start >= 0.3 * rng:
            out.append(r)
    return out


def load(name: str) -> pd.DataFrame:
    df = FB.load_cases(name)
    return df[df["cutoff"].round(6).isin(FB.CUTOFFS)]


def health(df: pd.DataFrame) -> str:
    ok = df[df["ok"].astype(bool)]
    return (f"{len(ok)} forecasts: r_hat > 1.01 in {(ok['r_hat_max'] > 1.01).mean():.1%}, any divergence in "
            f"{(ok['divergences'] > 0).mean():.1%}; {ok['seconds'].mean():.1f} s per forecast (mean; median "
            f"{ok['seconds'].median():.1f})")  # fmt: skip


def worst_sources(df: pd.DataFrame, n: int = 5) -> pd.DataFrame:
    ok = df[df["ok"].astype(bool)]
    g = ok.groupby("source").agg(cases=("run_id", "size"), cov80=("cover80", "mean"), ncrps=("ncrps", "mean"))
    return g.sort_values(["cov80", "ncrps"], ascending=[True, False]).head(n)


def pair_section(name: str, runs) -> list[str]:
    _kind, channels, base = CONFIGS[name]
    a, b = load(base), load(name)
    if a.empty or b.empty:
        return []
    both = pd.concat([a, b], ignore_index=True)
    key = both.groupby(["run_id", "cutoff"])["method"].nunique()
    keep = key[key == 2].index
    both = both.set_index(["run_id", "cutoff"]).loc[keep].reset_index()
    chan = {(r, c) for r, c in keep if has_channel(runs, r, c, channels)}
    sub = both[[(r, c) in chan for r, c in zip(both["run_id"], both["cutoff"], strict=True)]]
    classes = {"0-1 S-curve runs": set(s_curve_runs(runs, binary=True)),
               "S-curve runs of any reward": set(s_curve_runs(runs, binary=False))}  # fmt: skip
    md = [f"## `{name}` vs `{base}`", "", f"{DOC[name]}. {len(keep)} run x cutoff cases scored by both, "
          f"{len(chan)} of them with the channel in the prefix ({sub['run_id'].nunique()} runs, "
          f"{sub['source'].nunique()} sources); the others are identical by construction.", "",
          "Source-weighted (each source counts the same), all cases:", "", markdown_table(summarize_weighted(both),
          extra_cols=("n_sources",)), "", "Per case, all cases:", "", markdown_table(summarize(both)), "",
          "Per case, only the cases whose prefix logs the channel:", "", markdown_table(summarize(sub)), "",
          "Source-weighted, only those cases:", "", markdown_table(summarize_weighted(sub), extra_cols=("n_sources",)),
          ""]  # fmt: skip
    for label, ids in classes.items():
        sc = both[both["run_id"].isin(ids)]
        n_ch = len({r for r, c in chan if r in ids})
        if len(sc):
            md += [f"{label} ({sc['run_id'].nunique()} runs, {n_ch} of them with the channel; rule in `s_curve_runs`), "
                   "per case:", "", markdown_table(summarize(sc)), ""]  # fmt: skip
    for m, d in (("without", a), ("with", b)):
        w = worst_sources(d[d.set_index(["run_id", "cutoff"]).index.isin(keep)])
        md += [f"Five worst sources by mean cov80 ({m} the channel; mean of their cov80 {w['cov80'].mean():.2f}):", "",
               "| source | cases | cov80 | mean nCRPS |", "|---|---|---|---|",
               *[f"| {s} | {int(r.cases)} | {r.cov80:.0%} | {r.ncrps:.3f} |" for s, r in w.iterrows()], ""]  # fmt: skip
    ch_a = a.set_index(["run_id", "cutoff"]).loc[sorted(chan)].reset_index() if chan else a.iloc[:0]
    ch_b = b.set_index(["run_id", "cutoff"]).loc[sorted(chan)].reset_index() if chan else b.iloc[:0]
    md += [f"Sampler health, the cases with the channel: without {health(ch_a)}; with {health(ch_b)}.", "",
           "Seconds are as logged by each ledger: the reward-only ledgers of grpo-public/extra were computed in "
           "an earlier session, the channel ones during this one, on a 2-core machine shared by ~6 engineers "
           "(load 5-12): compare the time ratio measured side by side in `bench/results/spread_validation.md`.",
           ""]  # fmt: skip
    return md


def ablation_table(configs, runs) -> list[str]:
    """One row per channel configuration: its cases whose prefix logs its channels, with vs without."""
    lines = ["## Ablation: which channel does what", "",
             "Per configuration, the cases whose prefix logs (one of) its channels, scored with and without them "
             "(mean over cases; source-weighted = each source the same weight):", "",
             "| configuration | cases (runs, sources) | nCRPS without -> with | source-weighted nCRPS "
             "| cov80 without -> with | source-weighted cov80 | cases better / worse |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for name in configs:
        _kind, channels, base = CONFIGS[name]
        if base is None:
            continue
        a, b = load(base), load(name)
        if a.empty or b.empty:
            continue
        key = ["run_id", "cutoff"]
        m = a.merge(b, on=key, suffixes=("_a", "_b"))
        m = m[[has_channel(runs, r, c, channels) for r, c in zip(m["run_id"], m["cutoff"], strict=True)]]
        m = m[m["ok_a"].astype(bool) & m["ok_b"].astype(bool)]
        if m.empty:
            continue
        sw = lambda col, m=m: m.groupby("source_a")[col].mean().mean()  # noqa: E731
        better, worse = (
            int((m["ncrps_b"] < m["ncrps_a"] - 1e-12).sum()),
            int((m["ncrps_b"] > m["ncrps_a"] + 1e-12).sum()),
        )
        lines.append(f"| `{name}` | {len(m)} ({m['run_id'].nunique()}, {m['source_a'].nunique()}) | "
                     f"{m['ncrps_a'].mean():.3f} -> {m['ncrps_b'].mean():.3f} | {sw('ncrps_a'):.3f} -> "
                     f"{sw('ncrps_b'):.3f} | "
                     f"{m['cover80_a'].mean():.0%} -> {m['cover80_b'].mean():.0%} | {sw('cover80_a'):.0%} -> "
                     f"{sw('cover80_b'):.0%} | {better} / {worse} |")  # fmt: skip
    return lines + [""]


def report(configs) -> None:
    runs = batch_std_as_such(load_dev(more=True))
    md = ["# The spread channel, leave-one-source-out", "",
          f"Regenerate: `.venv/bin/python bench/fit_population_prior.py --spread && {CMD}` (resumable; `--report-only` "
          f"rebuilds this page). Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.", "",
          f"**Runs.** {SELECTION_MORE} ({', '.join(FOLDERS_WITH_MORE)}): {len(runs.run_ids)} runs from "
          f"{runs.meta['source_repo'].nunique()} sources, cutoffs {', '.join(map(str, FB.CUTOFFS))}.", "",
          "**Protocol.** " + __doc__.split("Protocol: ")[1].replace("\n", " ").strip(), ""]  # fmt: skip
    if TIMING.exists():
        t = pd.read_csv(TIMING).pivot_table(index=["run_id", "cutoff"], columns="channels", values="seconds")
        ratio = t[BOTH[0] + "+" + BOTH[1]] / t["none"]
        md += ["## Time per forecast, side by side", "",
               f"`{CMD} --timing N`: {len(t)} cases (runs that log a channel, one per source), each fitted without and "
               "with the channels back to back (compiled models warm): seconds with / without, median "
               f"{ratio.median():.2f}x, mean {ratio.mean():.2f}x, range {ratio.min():.2f}-{ratio.max():.2f}x; total "
               f"{t.iloc[:, 1].sum() if t.shape[1] > 1 else float('nan'):.0f} s vs {t['none'].sum():.0f} s "
               f"(ratio of totals {t[BOTH[0] + '+' + BOTH[1]].sum() / t['none'].sum():.2f}x).", ""]  # fmt: skip
    md += ablation_table(configs, runs)
    js = {}
    for name in configs:
        if CONFIGS[name][2] is None:
            continue
        sec = pair_section(name, runs)
        md += sec
        b = load(name)
        if len(b):
            js[name] = {"summary_weighted": summarize_weighted(b).to_dict("records"),
                        "summary": summarize(b).to_dict("records")}  # fmt: skip
    (RES / "forecast_spread.md").write_text("\n".join(md) + "\n")
    (RES / "forecast_spread.json").write_text(json.dumps(js, indent=1, default=str))
    print("\n".join(md)[:5000])


TIMING = RES / "forecast_spread_timing.csv"


def timing(n: int, runs) -> pd.DataFrame:
    """Seconds per forecast with and without the channels, side by side: ``n`` cases (runs that log a channel,
    distinct sources, cutoffs 0.3 and 0.5 alternately), each fitted reward-only then with both channels, the
    compiled models warm (one throw-away fit each first). Same LOSO priors as the benchmark."""
    from bayesgrpo.forecast import Forecaster

    table, spread_rows = pd.read_csv(FB.PRIOR_TABLE), pd.read_csv(SPREAD_TABLE)
    src = runs.meta["source_repo"].astype(str)
    picks = []
    for s in sorted(src.unique()):
        ids = [r for r in runs.run_ids if src[r] == s and has_channel(runs, r, 0.5, BOTH)]
        if ids:
            picks.append((ids[0], s, (0.3, 0.5)[len(picks) % 2]))
    rows = []
    for k, (rid, s, c) in enumerate(picks[: n + 1]):
        df = runs.run(rid)
        s0, H = int(df["step"].iloc[0]), int(df["step"].iloc[-1])
        pre = runs.select([rid]).truncate(until_step=int(np.floor(s0 + c * (H - s0))))
        for channels in ((), BOTH):
            prior = prior_for("degeneracy", channels, s, table, spread_rows)
            fc = Forecaster(
                "degeneracy", sampler=SamplerConfig(seed=0), prior=prior, calibration=False, channels=channels
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                fit = fc.fit(pre, horizon=H)
                dt = time.perf_counter() - t0
            if k == 0:
                continue  # warm-up: the compiles
            h = fit.health[rid]
            rows.append(dict(run_id=rid, source=s, cutoff=c, channels="+".join(channels) or "none", seconds=dt,
                             r_hat_max=h["r_hat_max"], divergences=h["divergences"]))  # fmt: skip
            print(rows[-1], flush=True)
    out = pd.DataFrame(rows)
    out.to_csv(TIMING, index=False)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", action="append", choices=list(CONFIGS), help="configuration(s) (default: all)")
    ap.add_argument("--source", action="append", help="only these sources")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--timing", type=int, default=0, help="only time N cases with and without the channels")
    ap.add_argument("--work", type=Path, help="ledger root for a pilot (default: the benchmark's)")
    args = ap.parse_args()
    if args.work:
        FB.WORK = args.work
    if args.timing:
        timing(args.timing, batch_std_as_such(load_dev(more=True)))
        return
    configs = args.config or list(CONFIGS)
    if not args.report_only:
        runs = batch_std_as_such(load_dev(more=True))
        for n in configs:
            run_config(n, runs, SamplerConfig(seed=0), only_sources=args.source)
    report(configs)


if __name__ == "__main__":
    main()
