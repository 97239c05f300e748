"""Do known reward bounds keep the plateau and the latent paths inside them, and at what cost? (issue 19, item 4)

The forecast benchmark's cases (``bench/results/forecast_runs/dev/oscillator``) where bayesgrpo's
final-reward draws reached the top of [0, 1] (q95 >= 0.98: the plateau or the latent paths went above
the bound and only the clipped logged draws stayed inside) are re-forecast -- every cutoff of those
runs, the benchmark's protocol (leave-one-source-out prior, the default sampler, no calibration
layer) -- with the code of a given source tree, so the same cases can be forecast before and after
the change. Per case: the scores, the plateau's 95% quantile and the largest latent-path median.

    nice -n 10 python bench/bounds_check.py --label after              # this tree
    cd <a checkout of main> && nice -n 10 python <this tree>/bench/bounds_check.py --label before --tree .
    python bench/bounds_check.py --report                              # bench/results/bounds_check.md

Resumable: a (label, run, cutoff) already in the label's ledger is not recomputed.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parents[1]
OUT = HERE / "bench" / "results" / "bounds_runs"
CUTOFFS = (0.1, 0.2, 0.3, 0.5)


def affected(ledger_root: Path) -> pd.DataFrame:
    parts = [pd.read_csv(p) for p in glob.glob(str(ledger_root / "*" / "cases.csv"))]
    d = pd.concat(parts, ignore_index=True)
    d = d[d["ok"].astype(bool)]
    return d[(d["q95"] >= 0.98) & (d["q95"] <= 1.0)]


def run(label: str, tree: Path) -> None:
    sys.path.insert(0, str(tree))
    sys.path.insert(0, str(tree / "bench"))
    import forecast_benchmark as FB
    from devdata import load_dev

    from bayesgrpo import Forecaster
    from bayesgrpo.evaluation.scoring import run_truth, score_draws
    from bayesgrpo.schema import STEP

    hit = affected(HERE / "bench" / "results" / "forecast_runs" / "dev" / "oscillator")
    runs = load_dev()
    table = pd.read_csv(FB.PRIOR_TABLE)
    ledger = OUT / f"{label}.csv"
    rows = pd.read_csv(ledger).to_dict("records") if ledger.exists() else []
    done = {(r["run_id"], round(r["cutoff"], 6)) for r in rows}
    t0 = time.time()
    for rid in sorted(hit["run_id"].unique()):
        src = str(runs.meta.loc[rid, "source_repo"])
        prior = FB.loso_prior(table, "oscillator", src)
        df = runs.run(rid)
        truth, rng, s0, H = run_truth(df, 0.1)
        for c in CUTOFFS:
            if (rid, round(c, 6)) in done:
                continue
            pre = runs.select([rid]).truncate(until_step=int(s0 + c * (H - s0)))
            if len(pre.run(rid)) < 5 or int(pre.run(rid)[STEP].iloc[-1]) >= H:
                continue
            fit = Forecaster("oscillator", prior=prior, calibration=False, sampler=FB.DEFAULT_SAMPLER).fit(
                pre, horizon=H
            )
            t = fit.table().iloc[0]
            pdr = fit.paths(rid)
            row = {"run_id": rid, "source": src, "cutoff": c, "truth": truth, "plateau_q95": float(t.plateau_q95),
                   "latent_median_max": float(np.median(pdr.latent, axis=0).max()),
                   "r_hat_max": float(t.r_hat_max), **score_draws(fit.final_draws(rid), truth, rng)}  # fmt: skip
            rows.append(row)
            pd.DataFrame(rows).to_csv(ledger, index=False)
            print(f"[{time.time() - t0:6.0f}s] {label} {rid} @ {c:g}: plateau_q95 {row['plateau_q95']:.3f}, "
                  f"median {row['median']:.3f} (truth {truth:.3f}), ncrps {row['ncrps']:.3f}", flush=True)  # fmt: skip


def report() -> None:
    a, b = pd.read_csv(OUT / "before.csv"), pd.read_csv(OUT / "after.csv")
    m = a.merge(b, on=["run_id", "cutoff"], suffixes=("_before", "_after"))
    hit = affected(HERE / "bench" / "results" / "forecast_runs" / "dev" / "oscillator")
    key = set(zip(hit["run_id"], hit["cutoff"].round(6), strict=True))
    m["hit"] = [(r, round(c, 6)) in key for r, c in zip(m["run_id"], m["cutoff"], strict=True)]
    lines = ["# Known bounds kept by the plateau and the latent paths (issue 19, item 4)", "",
             "Regenerate: `bench/bounds_check.py` (its docstring: `--label before` from a checkout of main, "
             "`--label after` from this tree, then `--report`). The cases of the forecast benchmark (oscillator, "
             "leave-one-source-out prior, no calibration layer, default sampler) whose final-reward draws reached "
             f"the top of [0, 1], re-forecast at every cutoff of their runs: {m['run_id'].nunique()} runs, "
             f"{len(m)} cases ({int(m['hit'].sum())} of them the ones that reached the bound). Same cases, same "
             "sampler seeds; measured on the shared 2-core machine.", "",
             "| cases | n | plateau q95 > 1 (before / after) | latent median > 1 | median final = 1.0 | mean nCRPS | "
             "cover80 | median nAE |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, g in (("all re-forecast", m), ("reached the bound", m[m["hit"]]), ("the others", m[~m["hit"]])):
        if not len(g):
            continue
        f = lambda col, fn, g=g: f"{fn(g[col + '_before']):.3f} / {fn(g[col + '_after']):.3f}"  # noqa: E731
        lines.append(
            f"| {name} | {len(g)} | {(g.plateau_q95_before > 1).mean():.0%} / {(g.plateau_q95_after > 1).mean():.0%} | "
            f"{(g.latent_median_max_before > 1).mean():.0%} / {(g.latent_median_max_after > 1).mean():.0%} | "
            f"{(g.median_before >= 0.9999).mean():.0%} / {(g.median_after >= 0.9999).mean():.0%} | "
            f"{f('ncrps', np.mean)} | {f('cover80', np.mean)} | {f('nae', np.median)} |"
        )
    lines += ["", "Per source (mean nCRPS before / after):", ""]
    for s, g in m.groupby("source_before"):
        lines.append(f"- {s}: {len(g)} cases, {g.ncrps_before.mean():.3f} / {g.ncrps_after.mean():.3f}")
    (HERE / "bench" / "results" / "bounds_check.md").write_text("\n".join(lines) + "\n")
    (HERE / "bench" / "results" / "bounds_check.json").write_text(
        json.dumps(m.to_dict("records"), indent=1, default=str)
    )
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", choices=("before", "after"))
    ap.add_argument("--tree", type=Path, default=HERE, help="source tree whose bayesgrpo forecasts (default: this one)")
    ap.add_argument("--report", action="store_true")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.report:
        report()
    else:
        run(args.label, args.tree.resolve())


if __name__ == "__main__":
    main()
