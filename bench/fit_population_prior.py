"""Refit the population prior shipped in bayesgrpo/resources/population_prior.json.

    .venv/bin/python bench/fit_population_prior.py            # ~10 min on 2 cores

What it does
------------
A forecast from a run's first steps normalises the run by its *prefix* (prepare.py). For each
complete development run and each cutoff c in {0.2, 0.3, 0.5}, this script fits the oscillator to the
WHOLE run (broad priors) in the units the forecaster would use at cutoff c, and records the
posterior medians of the per-run quantities the prior describes: gain = r_star - r0, log(tau/span)
and log(wander/sigma_m). The population prior is their weighted mean and sd, where every source
repository weighs the same (the 78 runs of one research repository count as much as any other
source; the testbed counts as one source), so that no single source dominates.

Runs: all of ../shared/data/grpo-public (read by path, not copied) and a stratified sample of the
shipped testbed runs (data/testbed); at most 8 runs per repository (16 from the testbed). Output: bayesgrpo/resources/population_prior.json (+ provenance) and
bench/results/population_prior.md.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bayesgrpo.forecast.forecaster import SamplerConfig, _sample, _subset  # noqa: E402
from bayesgrpo.io import read_runs  # noqa: E402
from bayesgrpo.models.prior import PopulationPrior  # noqa: E402
from bayesgrpo.models.arrays import prepare_arrays  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "grpo-public"
CUTOFFS = (0.2, 0.3, 0.5)
MAX_PER_SOURCE = 8  # sources weigh equally, so more runs of one source add cost, not information about others
BROAD = PopulationPrior(gain_mu=0.3, gain_sd=2.0, log_tau_mu=-1.5, log_tau_sd=2.0, log_wander_mu=-1.0, log_wander_sd=2.0)


def _spread(ids, k):
    if len(ids) <= k:
        return ids
    idx = np.linspace(0, len(ids) - 1, k).round().astype(int)
    return [ids[i] for i in idx]


def load_sets():
    sets = []
    if SHARED.exists():
        pub = read_runs(SHARED / "runs.csv", meta=SHARED / "meta.csv")
        src = pub.meta["source_repo"].astype(str)
        # a deterministic spread of each source's runs (every k-th), at most MAX_PER_SOURCE
        keep = [r for s_ in src.unique() for r in _spread(list(src.index[src == s_]), MAX_PER_SOURCE)]
        pub = pub.select(keep)
        sets.append((pub, src.loc[keep]))
    tb = read_runs(ROOT / "data" / "testbed" / "runs.csv.gz", meta=ROOT / "data" / "testbed" / "meta.csv.gz")
    m = tb.meta
    # stratified: one seed (s0) of every sweep cell, excluding refresh sweeps beyond stability
    keep = [r for r in tb.run_ids if r.endswith("-s0") and not str(m.loc[r, "sweep"]).startswith("refresh")]
    keep = _spread(keep, 2 * MAX_PER_SOURCE)
    tb = tb.select(keep)
    sets.append((tb, pd.Series("testbed", index=tb.meta.index)))
    return sets


def main():
    t0 = time.time()
    rows = []
    sampler = SamplerConfig(draws=300, tune=300, seed=0)
    for runs, source in load_sets():
        for c in CUTOFFS:
            prefix = runs.truncate(fraction=c)
            ok = [r for r in runs.run_ids if len(prefix.run(r)) >= 5]
            horizon = {r: int(runs.run(r)["step"].iloc[-1]) + 1 for r in ok}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                arr, infos = prepare_arrays(runs.select(ok), horizon=horizon, prior=BROAD, normalize_with=prefix.select(ok))
            for j, info in enumerate(infos):
                post, h = _sample(_subset(arr, [j]), kind="oscillator", prior=BROAD, hierarchical=False, sampler=sampler)
                p = post.sel(run=info.run_id)
                span = arr.span[j]
                rows.append(
                    dict(
                        run_id=info.run_id, source=source[info.run_id], cutoff=c,
                        gain=float((p["r_star"] - p["r0"]).median()),
                        log_tau=float(np.log((p["tau"] - 1.0) / span).median()),
                        log_wander=float(np.log(p["wander"] / p["sigma_m"]).median()),
                        r0_dev=float((p["r0"] - arr.r0_obs[j]).median()),
                        log_noise_dev=float(np.log(p["sigma_m"] / arr.noise[j]).median()),
                        r_hat=h[info.run_id]["r_hat_max"],
                    )  # fmt: skip
                )
            print(f"cutoff {c}: {len(infos)} runs fitted ({time.time() - t0:.0f} s)", flush=True)
    df = pd.DataFrame(rows)
    (ROOT / "bench" / "results").mkdir(parents=True, exist_ok=True)
    df.to_csv(ROOT / "bench" / "results" / "population_prior_runs.csv", index=False)
    w = 1.0 / df.groupby("source")["run_id"].transform("count")

    def wstats(col):
        x = df[col].to_numpy()
        mu = float(np.sum(w * x) / np.sum(w))
        sd = float(np.sqrt(np.sum(w * (x - mu) ** 2) / np.sum(w)))
        return mu, sd

    g_mu, g_sd = wstats("gain")
    t_mu, t_sd = wstats("log_tau")
    w_mu, w_sd = wstats("log_wander")
    _, r0_sd = wstats("r0_dev")
    _, n_sd = wstats("log_noise_dev")
    prior = PopulationPrior(
        gain_mu=round(g_mu, 4), gain_sd=round(max(g_sd, 0.1), 4),
        log_tau_mu=round(t_mu, 4), log_tau_sd=round(max(t_sd, 0.3), 4),
        log_wander_mu=round(w_mu, 4), log_wander_sd=round(max(w_sd, 0.3), 4),
        r0_sd=round(max(2 * r0_sd, 0.2), 4), log_noise_sd=round(max(2 * n_sd, 0.2), 4),
        provenance={
            "command": ".venv/bin/python bench/fit_population_prior.py",
            "runs": int(df["run_id"].nunique()), "fits": len(df), "sources": int(df["source"].nunique()),
            "cutoffs": list(CUTOFFS), "weighting": "each source repository weighs the same; testbed = one source",
            "data": "../shared/data/grpo-public (100 real runs) + data/testbed (s0 of each non-refresh sweep cell)",
            "date": time.strftime("%Y-%m-%d"),
        },
    )  # fmt: skip
    prior.save(ROOT / "bayesgrpo" / "resources" / "population_prior.json")
    by_src = df.groupby("source")[["gain", "log_tau", "log_wander"]].agg(["median", "count"]).round(3)
    md = [
        "# Population prior (default prior of a forecast without --context)",
        "",
        "Regenerate: `.venv/bin/python bench/fit_population_prior.py`",
        "",
        f"{df['run_id'].nunique()} runs from {df['source'].nunique()} sources, {len(df)} fits, {time.time() - t0:.0f} s.",
        "",
        "```json",
        prior.model_dump_json(indent=2),
        "```",
        "",
        "Per source (median and count of per-run posterior medians):",
        "",
        "```",
        by_src.to_string(),
        "```",
    ]
    (ROOT / "bench" / "results" / "population_prior.md").write_text("\n".join(md) + "\n")
    print(prior.model_dump_json(indent=2))


if __name__ == "__main__":
    main()
