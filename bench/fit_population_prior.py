"""Fit the population priors shipped in bayesgrpo/resources (and the per-run table the benchmark's
leave-one-source-out priors are computed from).

    .venv/bin/python bench/fit_population_prior.py            # ~15-25 min on 2 cores (resumable)
    .venv/bin/python bench/fit_population_prior.py --report   # rebuild the priors from the table
    .venv/bin/python bench/fit_population_prior.py --spread   # the spread channel's nu and headroom (resumable)

What it does
------------
A forecast normalises a run by its *prefix* (:mod:`bayesgrpo.models.arrays`). For each complete
development run and each observed fraction c in {0.1, 0.2, 0.3, 0.5}, this script fits each model
kind to the WHOLE run (broad priors) in the units a forecast at fraction c would use, and records
the posterior medians of the per-run quantities the prior describes: ``gain = r_star - r0``,
``log(tau - 1)`` (steps), ``log(wander / sigma_m)``, ``log(r0 - L)`` (the floor distance, degeneracy
kinds, floor unknown), ``logit(lam / LAM_MAX)`` (the heterogeneity, logistic kind), and the deviations of
``r0`` and ``log sigma_m`` from their data estimates.
:func:`bayesgrpo.models.prior.fit_population` turns the table into a prior (every source weighs the
same; by fraction); ``bench/forecast_benchmark.py`` calls it with ``exclude_source=`` for honest
leave-one-source-out priors.

The spread channel (``--spread``, :mod:`bayesgrpo.models.spread`): every run that logs ``reward_std`` or
``frac_reward_zero_std`` (at most 3 per source, spread evenly, grpo-more included; 6 of the testbed runs;
2 x 200 draws) is fitted once with the channels (the degeneracy kind with the shipped degeneracy
population as the prior of the reward's parameters and broad priors on nu and the headroom, the run's
first 300 logged points, in the units of fraction 0.5: ``nu`` and the headroom are unitless per-run
constants) and the posterior
medians of ``log nu`` and ``log headroom`` (bounds unknown) go to
``bench/results/population_prior_spread_runs.csv``; their population (each source the same weight) is
added to ``population_prior_degeneracy.json`` (:func:`bayesgrpo.models.prior.with_spread_population`; its
other numbers unchanged) and to ``bench/results/population_prior.md``. The benchmark's LOSO priors of the
spread configurations leave the held-out source out of this table too.

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

from devdata import SELECTION, batch_std_as_such, load_dev  # noqa: E402

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
    dev = load_dev()  # the sets these priors were fitted on (grpo-public, grpo-extra)
    src = dev.meta["source_repo"].astype(str)
    keep = [r for s_ in src.unique() for r in _spread(list(src.index[src == s_]), MAX_PER_SOURCE)]
    dev = dev.select(keep)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tb = read_runs(ROOT / "data" / "testbed" / "runs.csv.gz", meta=ROOT / "data" / "testbed" / "meta.csv.gz")
    tb_ids = testbed_ids(tb)
    tb = tb.select(tb_ids)
    cols = ["reward"]
    data = pd.concat([dev.data[["run_id", "step", *cols]], tb.data[["run_id", "step", *cols]]], ignore_index=True)
    meta = pd.concat([dev.meta[["beta1", "params_b"]], tb.meta[["beta1", "params_b"]]]).reset_index()
    runs = RunSet.from_frames(data, meta)
    source = pd.concat([src.loc[keep], pd.Series("testbed", index=tb_ids)])
    return runs, source


def testbed_ids(tb: RunSet) -> list:
    """One seed (s0) of every sweep cell, without refresh sweeps beyond stability, spread to 16 runs."""
    m = tb.meta
    return _spread([r for r in tb.run_ids if r.endswith("-s0") and not str(m.loc[r, "sweep"]).startswith("refresh")],
                   2 * MAX_PER_SOURCE)  # fmt: skip


SPREAD_TABLE = ROOT / "bench" / "results" / "population_prior_spread_runs.csv"
SPREAD_CHANNELS = ("reward_std", "frac_reward_zero_std")
SPREAD_FRACTION = 0.5
SPREAD_MAX_POINTS = 300  # a run's first 300 logged points: nu and the headroom are per-run constants (CPU time)
SPREAD_PER_SOURCE = 3  # sources weigh the same; 3 runs give a source's mean (CPU time on 2 shared cores)
SPREAD_SAMPLER = SamplerConfig(draws=200, tune=200, seed=0)  # posterior medians of two per-run constants


def load_spread_sets() -> tuple[RunSet, pd.Series]:
    """The runs that log a spread channel (at most 3 per source, every development set) and 6 of the testbed's
    (its ``batch_size`` is prompts per step: ``prompts_per_step``), with the channel columns and metadata."""
    dev = batch_std_as_such(load_dev(more=True))
    chans = [c for c in SPREAD_CHANNELS if c in dev.data.columns]
    logged = dev.data.groupby("run_id")[chans].count().sum(axis=1)
    src = dev.meta["source_repo"].astype(str)
    keep = [r for s_ in src.unique() for r in _spread([x for x in src.index[src == s_] if logged.get(x, 0) > 0],
                                                     SPREAD_PER_SOURCE)]  # fmt: skip
    dev = dev.select(keep)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tb = read_runs(ROOT / "data" / "testbed" / "runs.csv.gz", meta=ROOT / "data" / "testbed" / "meta.csv.gz")
    tb_ids = _spread(testbed_ids(tb), 2 * SPREAD_PER_SOURCE)
    tb = tb.select(tb_ids)
    cols = ["run_id", "step", "reward", *SPREAD_CHANNELS]
    data = pd.concat([d.reindex(columns=cols) for d in (dev.data, tb.data)], ignore_index=True)
    mcols = ["beta1", "params_b", "group_size", "batch_size", "prompts_per_step"]
    tbm = tb.meta.assign(prompts_per_step=tb.meta["batch_size"])
    meta = pd.concat([dev.meta.reindex(columns=mcols), tbm.reindex(columns=mcols)]).reset_index()
    data = data[data.groupby("run_id").cumcount() < SPREAD_MAX_POINTS]
    runs = RunSet.from_frames(data, meta)
    return runs, pd.concat([src.loc[keep], pd.Series("testbed", index=tb_ids)])


def spread_fit_prior():
    """The hyperparameters of the spread fits: the shipped degeneracy population for the reward's parameters
    (with broad priors on every parameter the spread adds a ridge -- near the floor E[reward_std] ~ D c(nu) u,
    the headroom cancels and nu trades against the floor distance D: r_hat > 1.5 in 7 of 19 such fits, 2% of
    the reward-only ones), broad priors on log nu and log headroom (N(0, 2))."""
    from bayesgrpo.models.kinds import default_prior
    from bayesgrpo.models.prior import PopulationPrior

    base = default_prior("degeneracy")
    wide = dict(log_nu_mu=0.0, log_nu_sd=2.0, log_headroom_mu=0.0, log_headroom_sd=2.0)
    return PopulationPrior(**{**base.model_dump(), **wide, "name": "spread-fits"})


def fit_spread(sampler=SPREAD_SAMPLER) -> pd.DataFrame:
    """Per-run fits with the spread channels (resumable ledger :data:`SPREAD_TABLE`)."""
    from bayesgrpo.forecast.population import fit_run_effects

    runs, source = load_spread_sets()
    df = pd.read_csv(SPREAD_TABLE) if SPREAD_TABLE.exists() else pd.DataFrame()
    done = set(df["run_id"]) if len(df) else set()
    t0 = time.time()
    for rid in runs.run_ids:
        if rid in done:
            continue
        rows = fit_run_effects(runs.select([rid]), fraction=SPREAD_FRACTION, kind="degeneracy", sampler=sampler,
                               source=source, channels=SPREAD_CHANNELS, prior=spread_fit_prior())  # fmt: skip
        for r in rows:
            r["kind"] = "degeneracy+spread"
        df = pd.concat([df, pd.DataFrame(rows)], ignore_index=True)
        df.to_csv(SPREAD_TABLE, index=False)
        what = f"log nu {rows[0]['log_nu']:.3f}" if rows else "skipped"
        print(f"spread fit {rid} ({source[rid]}): {what} ({time.time() - t0:.0f} s)", flush=True)
    return df


def ship_spread(df: pd.DataFrame) -> None:
    """Add the spread population to the shipped degeneracy prior and the results page."""
    from bayesgrpo.models.prior import PopulationPrior, with_spread_population

    path = ROOT / "bayesgrpo" / "resources" / "population_prior_degeneracy.json"
    base = PopulationPrior.load(path)
    prior = with_spread_population(base, df, name=base.name)
    prior.save(path)
    by = df.groupby("source")[["log_nu", "log_headroom"]].median().round(3)
    md = ROOT / "bench" / "results" / "population_prior.md"
    text = md.read_text().split("\n## Spread channel")[0] if md.exists() else ""
    text += (
        "\n## Spread channel (`--spread`)\n\n"
        f"{len(df)} runs from {df['source'].nunique()} sources fitted with the channels (degeneracy kind, whole "
        f"run); population (each source the same weight): log nu {prior.log_nu_mu:.3f} +- {prior.log_nu_sd:.3f}, "
        f"log headroom {prior.log_headroom_mu:.3f} +- {prior.log_headroom_sd:.3f} (bounds unknown). Per source "
        f"(median):\n\n```\n{by.to_string()}\n```\n"
    )
    md.write_text(text)
    print(
        prior.identity, {k: getattr(prior, k) for k in ("log_nu_mu", "log_nu_sd", "log_headroom_mu", "log_headroom_sd")}
    )


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
    ap.add_argument("--spread", action="store_true", help="only the spread channel's per-run fits and population")
    args = ap.parse_args()
    if args.spread:
        ship_spread(fit_spread())
        return
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
