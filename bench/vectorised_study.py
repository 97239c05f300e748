"""Several runs' independent posteriors in one NUTS call, against one call per run; writes
bench/results/vectorised.md and vectorised.json.

    .venv/bin/python bench/vectorised_study.py        # compiles one model per group size once (~1-3 min each)

The oscillator's non-hierarchical graph over R runs is R independent posteriors side by side (no
shared parameter): one NUTS call samples them jointly, each gradient evaluation covering all R runs
(the graph's fixed cost is paid once per evaluation instead of R times), but one step size and one
trajectory length serve every run, so the hardest run sets the pace for all. Measured on groups of R
development runs at 30% of their steps (the default prior, the default sampler settings of this tree):
gradient evaluations, sampling wall/CPU seconds, the minimum bulk ESS per run of the health variables,
and the ESS per second of CPU, joint vs one call per run (the same runs, the same draws per chain).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
OUT = ROOT / "bench" / "results"
CMD = ".venv/bin/python bench/vectorised_study.py"
GROUPS = (4, 8)
N_GROUPS = 3


def _health_ess(post: dict, j: int) -> float:
    from bayesgrpo.forecast.forecaster import HEALTH_VARS
    from bayesgrpo.inference.diagnostics import ess_bulk

    vals = [float(ess_bulk(post[v][:, :, j : j + 1])[0]) for v in HEALTH_VARS if np.std(post[v][:, :, j]) > 0]
    return min(vals) if vals else float("nan")


def run_group(arr, prior, kind, sampler, key) -> dict:
    from bayesgrpo.inference import nuts_core, sampling

    R = len(arr.run_ids)
    template = dataclasses.replace(arr, mu_mean=np.full(R, prior.mu_default))
    c = sampling.compile_model(key, functools.partial(kind.build, template, prior=prior, hierarchical=False))
    known = {v.name for v in c.shared_var_keys}
    cm = c.with_data(**{k: v for k, v in arr.data(prior).items() if k in known})
    c0, t0 = time.process_time(), time.perf_counter()
    d = nuts_core.start(cm, draws=sampler.draws, tune=sampler.tune, chains=sampler.chains, cores=2,
                         seed=sampler.seed + R, target_accept=sampler.target_accept).wait()  # fmt: skip
    return {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "n_grad": d.n_grad,
            "ess_min": [_health_ess(d.posterior, j) for j in range(R)], "divergences": d.divergences}  # fmt: skip


def main() -> None:
    from devdata import load_dev

    from bayesgrpo.forecast.batch import resolve_horizons, truncate_runs
    from bayesgrpo.inference.sampling import SamplerConfig
    from bayesgrpo.models.arrays import prepare_arrays
    from bayesgrpo.models.kinds import default_prior, get_kind

    dev = load_dev()
    kind = get_kind("oscillator")
    prior = default_prior("oscillator")
    sampler = SamplerConfig()
    ids = list(dev.run_ids)[:: max(1, len(dev) // (max(GROUPS) * N_GROUPS))]
    rows = []
    for R in GROUPS:
        for g in range(N_GROUPS):
            group = ids[g * R : (g + 1) * R]
            if len(group) < R:
                break
            obs = truncate_runs(dev.select(group), until_fraction=0.3)
            arr, _ = prepare_arrays(obs, horizon=resolve_horizons(dev, obs), prior=prior)
            joint = run_group(arr, prior, kind, sampler, ("vectorised-study", "oscillator", R))
            single = [run_group(arr.subset([j]), prior, kind, sampler, kind.graph_key(arr.subset([j]), prior, False))
                      for j in range(R)]  # fmt: skip
            keys = ("wall_s", "cpu_s", "n_grad", "divergences")
            row = {
                "R": R,
                "group": g,
                "runs": group,
                "joint": joint,
                "single": {k: [s[k] for s in single] for k in keys},
            }
            row["single"]["ess_min"] = [s["ess_min"][0] for s in single]
            rows.append(row)
            print(json.dumps(row), flush=True)
    res = {"load": os.getloadavg()[0], "sampler": sampler.model_dump(), "rows": rows}
    (OUT / "vectorised.json").write_text(json.dumps(res, indent=1))
    md = ["# Several runs in one NUTS call vs one call per run", "", f"Regenerate: `{CMD}`. "
          + __doc__.split("\n\n")[2].replace("\n", " "), "", f"Load average {res['load']:.2f}; sampler "
          f"{sampler.chains} chains x ({sampler.tune} tune + {sampler.draws} draws).", "",
          "| runs per call | group | gradient evals: joint / sum of one call per run | CPU s: joint / sum | "
          "median over runs of the min ESS: joint / single | ESS per CPU s per run (median): joint / single |",
          "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        j, s = r["joint"], r["single"]
        ej, es = float(np.median(j["ess_min"])), float(np.median(s["ess_min"]))
        per_j = float(np.median(np.asarray(j["ess_min"]) * r["R"] / j["cpu_s"]))
        per_s = float(np.median(np.asarray(s["ess_min"]) / np.asarray(s["cpu_s"])))
        md.append(f"| {r['R']} | {r['group']} | {j['n_grad']:,} / {sum(s['n_grad']):,} | {j['cpu_s']:.2f} / "
                  f"{sum(s['cpu_s']):.2f} | {ej:.0f} / {es:.0f} | {per_j:.0f} / {per_s:.0f} |")  # fmt: skip
    (OUT / "vectorised.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
