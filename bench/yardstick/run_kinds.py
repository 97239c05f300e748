"""bayesgrpo's model kinds on every yardstick case, each run's population prior fitted on the *selection*
sources other than its own (never on a locked-test source).

    .venv/bin/python -m bench.yardstick.run_kinds --stage fits                 # per-run fits of selection runs
    .venv/bin/python -m bench.yardstick.run_kinds --stage kinds --kind oscillator   # ledgers (resumable)

The per-run fits (:func:`bayesgrpo.forecast.population.fit_run_effects`, broad priors, whole run, in the units
of each cutoff's prefix) of the yardstick's selection runs go to ``bench/results/yardstick/population_runs.csv``
(fits of the same runs already in ``bench/results/population_prior_runs.csv`` are taken from there: the same
deterministic computation); the testbed's rows are kept as one more prior source (it is no yardstick source).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.evaluation.backtest import backtest
from bayesgrpo.forecast.population import fit_run_effects
from bayesgrpo.inference.sampling import SamplerConfig
from bayesgrpo.models.kinds import default_prior
from bayesgrpo.models.prior import PopulationPrior, fit_population
from bench.yardstick import data, store

ROOT = data.ROOT
TABLE = ROOT / "bench" / "results" / "yardstick" / "population_runs.csv"
OLD_TABLE = ROOT / "bench" / "results" / "population_prior_runs.csv"
FIT_KINDS = ("oscillator", "degeneracy")
FIT_SAMPLER = SamplerConfig(draws=300, tune=300, seed=0)


def fits() -> pd.DataFrame:
    rs = data.load(split="selection")
    src = rs.meta["source_repo"].astype(str)
    old = pd.read_csv(OLD_TABLE)
    df = pd.read_csv(TABLE) if TABLE.exists() else old[old["source"] == "testbed"].copy()
    have = {(r.run_id, round(float(r.cutoff), 3), r.kind) for r in df.itertuples()}
    reuse = old[[(r.run_id, round(float(r.cutoff), 3), r.kind) not in have and r.run_id in set(rs.run_ids)
                 for r in old.itertuples()]]  # fmt: skip
    df = pd.concat([df, reuse], ignore_index=True)
    have |= {(r.run_id, round(float(r.cutoff), 3), r.kind) for r in reuse.itertuples()}
    df.to_csv(TABLE, index=False)
    t0 = time.time()
    for kind in FIT_KINDS:
        for c in data.CUTOFFS:
            todo = [r for r in rs.run_ids if (r, round(c, 3), kind) not in have]
            for k in range(0, len(todo), 8):
                part = todo[k : k + 8]
                rows = fit_run_effects(
                    rs.select(part), fraction=c, kind=kind, sampler=FIT_SAMPLER, source=src.to_dict()
                )
                df = pd.concat([df, pd.DataFrame(rows)], ignore_index=True)
                df.to_csv(TABLE, index=False)
                print(f"[{time.time() - t0:6.0f}s] fits {kind} @ {c}: {k + len(part)}/{len(todo)}", flush=True)
    return df


def prior_for(table: pd.DataFrame, kind: str, source: str) -> PopulationPrior:
    """The population prior of a run of ``source``: fitted on the selection sources other than it (and the
    testbed), every source weighing the same (:func:`bayesgrpo.models.prior.fit_population`)."""
    from bayesgrpo.models.kinds import prior_kind as which

    pk = which(kind, lambda k: bool((table["kind"] == k).any()))
    rows = table[(table["kind"] == pk)]
    rows = rows[
        rows["source"].map(lambda s: s == "testbed" or data.split_of(s) == "selection") & (rows["source"] != source)
    ]
    return fit_population(rows, name=f"yardstick-{pk}-{store.slug(source)}", base=default_prior(kind))


def kinds(kind: str, sampler: SamplerConfig, only=None) -> None:
    table = pd.read_csv(TABLE)
    rs = data.load()
    src = rs.meta["source_repo"].astype(str)
    t0 = time.time()
    for s in sorted(src.unique()):
        if (only and s not in only) or store.done(kind, s):
            continue
        ids = [r for r in rs.run_ids if src[r] == s]
        prior = prior_for(table, kind, s)
        with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = backtest(rs.select(ids), cutoffs=data.CUTOFFS, kind=kind, peers=(), sampler=sampler, prior=prior,
                           calibration=False, out_dir=Path(d), save_draws=store.N_DRAWS, n_draws=store.N_DRAWS)  # fmt: skip
            with np.load(Path(d) / "draws.npz") as z:
                draws = {"|".join(k.split("|")[:2]): z[k] for k in z.files}
        facts = res.cases[["run_id", "source", "cutoff", "ok", "message", "observed_until", "seconds", "r_hat_max",
                           "ess_min", "divergences", "p_stop_before_horizon", "p_plateaued", "scale", "level"]].copy()  # fmt: skip
        facts.insert(0, "key", [f"{r}|{c:g}" for r, c in zip(facts["run_id"], facts["cutoff"], strict=True)])
        store.write(kind, s, draws, facts)
        print(f"[{time.time() - t0:6.0f}s] {kind}: {s} ({len(ids)} runs, {len(draws)} cases)", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--stage", choices=("fits", "kinds"), required=True)
    ap.add_argument("--kind", action="append")
    ap.add_argument("--source", action="append")
    a = ap.parse_args(argv)
    if a.stage == "fits":
        fits()
    else:
        for k in a.kind or ["oscillator", "degeneracy"]:
            kinds(k, SamplerConfig(seed=0), a.source)


if __name__ == "__main__":
    main()
