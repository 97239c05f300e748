"""Fit the population priors shipped in bayesgrpo/resources (and the per-run table the benchmark's
leave-one-source-out priors are computed from).

    .venv/bin/python bench/fit_population_prior.py            # ~15-25 min on 2 cores (resumable)
    .venv/bin/python bench/fit_population_prior.py --report   # rebuild the priors from the table

What it does
------------
A forecast normalises a run by its *prefix* (:mod:`bayesgrpo.models.arrays`). For each complete
development run and each observed fraction c in {0.1, 0.2, 0.3, 0.5}, this script fits each model
kind to the WHOLE run (broad priors) in the units a forecast at fraction c would use, and records
the posterior medians of the per-run quantities the prior describes: ``gain = r_star - r0``,
``log(tau - 1)`` (steps), ``log(wander / sigma_m)``, ``log(r0 - L)`` (the floor distance, degeneracy
kinds, floor unknown), ``logit(lam / LAM_MAX)`` (the heterogeneity, logistic kind), and the deviations of ``r0`` and ``log sigma_m`` from their data estimates.
:func:`bayesgrpo.models.prior.fit_population` turns the table into a prior (every source weighs the
same; by fraction); ``bench/forecast_benchmark.py`` calls it with ``exclude_source=`` for honest
leave-one-source-out priors.

Runs: ../shared/data/grpo-public and grpo-extra (read by path, not copied; at most 8 runs per source,
spread evenly) and 16 testbed runs (one source). Outputs: ``bench/results/population_prior_runs.csv``,
``bayesgrpo/resources/population_prior.json`` (oscillator; shared by the linear kinds),
``bayesgrpo/resources/population_prior_{degeneracy,logistic}.json`` and ``bench/results/population_prior.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from devdata import SELECTION, load_dev  # noqa: E402

from bayesgrpo.forecast.population import BROAD_PRIOR, fit_run_effects  # noqa: E402
from bayesgrpo.inference.sampling import SamplerConfig  # noqa: E402
from bayesgrpo.io import read_runs  # noqa: E402
from bayesgrpo.models.prior import fit_population  # noqa: E402
from bayesgrpo.schema import RunSet  # noqa: E402

CUTOFFS = (0.1, 0.2, 0.3, 0.5)
KINDS = ("oscillator", "degeneracy")  # default; --kinds adds "logistic" (its per-run fits take > 2 h on 2 cores)
MAX_PER_SOURCE = 8  # sources weigh equally, so more runs of one source add cost, not information about others
BROAD = BROAD_PRIOR
SAMPLER = SamplerConfig(draws=300, tune=300, seed=0)
TABLE = ROOT / "bench" / "results" / "population_prior_runs.csv"
CMD = ".venv/bin/python bench/fit_population_prior.py"


def _spread(ids, k):
    if len(ids) <= k:
        return list(ids)
    idx = np.linspace(0, len(ids) - 1, k).round().astype(int)
    return [ids[i] for i in idx]


def load_sets() -> tuple[RunSet, pd.Series]:
    dev = load_dev()
    src = dev.meta["source_repo"].astype(str)
    keep = [r for s_ in src.unique() for r in _spread(list(src.index[src == s_]), MAX_PER_SOURCE)]
    dev = dev.select(keep)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tb = read_runs(ROOT / "data" / "testbed" / "runs.csv.gz", meta=ROOT / "data" / "testbed" / "meta.csv.gz")
    m = tb.meta
    # one seed (s0) of every sweep cell, without refresh sweeps beyond stability
    tb_ids = _spread([r for r in tb.run_ids if r.endswith("-s0") and not str(m.loc[r, "sweep"]).startswith("refresh")],
                     2 * MAX_PER_SOURCE)  # fmt: skip
    tb = tb.select(tb_ids)
    cols = ["reward"]
    data = pd.concat([dev.data[["run_id", "step", *cols]], tb.data[["run_id", "step", *cols]]], ignore_index=True)
    meta = pd.concat([dev.meta[["beta1", "params_b"]], tb.meta[["beta1", "params_b"]]]).reset_index()
    runs = RunSet.from_frames(data, meta)
    source = pd.concat([src.loc[keep], pd.Series("testbed", index=tb_ids)])
    return runs, source


def fit_rows(runs: RunSet, source: pd.Series, done: set, kinds=KINDS):
    t0 = time.time()
    for kind_name in kinds:
        for c in CUTOFFS:
            todo = [r for r in runs.run_ids if (r, c, kind_name) not in done]
            if not todo:
                continue
            rows = fit_run_effects(runs.select(todo), fraction=c, kind=kind_name, sampler=SAMPLER, source=source)
            print(f"{kind_name} @ {c}: {len(rows)} runs fitted ({time.time() - t0:.0f} s)", flush=True)
            yield rows


def build_priors(df: pd.DataFrame, stamp: str, kinds=KINDS) -> dict:
    out = {}
    for kind in kinds:
        g = df[df["kind"] == kind]
        if g.empty:
            continue
        out[kind] = fit_population(g, name=f"population-{kind}-{stamp}", base=BROAD,
                                   provenance={"command": CMD, "data": f"{SELECTION}; + 16 testbed runs",
                                               "kind": kind, "date": stamp})  # fmt: skip
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--report", action="store_true", help="only rebuild the priors from the existing table")
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated model kinds (default: %(default)s)")
    args = ap.parse_args()
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    df = pd.read_csv(TABLE) if TABLE.exists() else pd.DataFrame()
    if not args.report:
        runs, source = load_sets()
        done = {(r.run_id, float(r.cutoff), r.kind) for r in df.itertuples()} if len(df) else set()
        for rows in fit_rows(runs, source, done, kinds):
            df = pd.concat([df, pd.DataFrame(rows)], ignore_index=True)
            df.to_csv(TABLE, index=False)
    stamp = time.strftime("%Y-%m-%d")
    priors = build_priors(df, stamp, kinds)
    for kind, prior in priors.items():  # the kinds with their own prior (the linear kinds share the oscillator's)
        name = "population_prior.json" if kind == "oscillator" else f"population_prior_{kind}.json"
        prior.save(ROOT / "bayesgrpo" / "resources" / name)
    by_src = df.groupby(["kind", "source"])[["gain", "log_tau", "log_wander"]].median().round(3)
    md = ["# Population priors (default priors of a forecast without --context)", "", f"Regenerate: `{CMD}`", "",
          f"{df['run_id'].nunique()} runs from {df['source'].nunique()} sources, {len(df)} fits "
          f"(kinds {', '.join(priors)}; observed fractions {', '.join(map(str, CUTOFFS))}).", ""]  # fmt: skip
    for k, p in priors.items():
        md += [f"## {k}", "", "```json", p.model_dump_json(indent=2), "```", ""]
    md += ["Per source (median of per-run posterior medians):", "", "```", by_src.to_string(), "```"]
    (ROOT / "bench" / "results" / "population_prior.md").write_text("\n".join(md) + "\n")
    print({k: p.identity for k, p in priors.items()})


if __name__ == "__main__":
    main()
