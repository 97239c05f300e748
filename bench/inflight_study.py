"""How to spend two cores on many runs' NUTS: one run at a time on two threads (its two chains in parallel),
or several runs in flight on one thread each; writes bench/results/inflight.md and inflight.json.

    .venv/bin/python bench/inflight_study.py [--runs N] [--draws D --tune T]

Sampling only (``bayesgrpo.inference.nuts_core``, the compiled oscillator model from the disk cache, each
run's data swapped in): N development runs at 30% of their steps, in one process, timed end to end
(wall clock and CPU of the process). The draws of a run do not depend on the arrangement (its seed
only; checked here), so every arrangement gives the same forecasts: the choice is throughput only.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
OUT = ROOT / "bench" / "results"
CMD = ".venv/bin/python bench/inflight_study.py"
#: (label, runs in flight, threads per run)
MODES = (("one run at a time, 2 threads", 1, 2), ("one run at a time, 1 thread", 1, 1),
         ("2 runs in flight, 1 thread each", 2, 1), ("2 runs in flight, 2 threads each", 2, 2),
         ("3 runs in flight, 1 thread each", 3, 1))  # fmt: skip


def prepare(n_runs: int):
    from devdata import load_dev

    from bayesgrpo.forecast.batch import resolve_horizons, truncate_runs
    from bayesgrpo.inference import sampling
    from bayesgrpo.models.arrays import prepare_arrays
    from bayesgrpo.models.kinds import default_prior, get_kind

    dev = load_dev()
    ids = list(dev.run_ids)[:: max(1, len(dev) // n_runs)][:n_runs]
    obs = truncate_runs(dev.select(ids), until_fraction=0.3)
    prior = default_prior("oscillator")
    arr, _ = prepare_arrays(obs, horizon=resolve_horizons(dev, obs), prior=prior)
    kind = get_kind("oscillator")
    sub0 = arr.subset([0])
    template = dataclasses.replace(sub0, mu_mean=np.full(1, prior.mu_default))
    c = sampling.compile_model(kind.graph_key(sub0, prior, False),
                               functools.partial(kind.build, template, prior=prior, hierarchical=False))  # fmt: skip
    known = {v.name for v in c.shared_var_keys}
    models = []
    for j in range(len(ids)):
        sub = arr.subset([j])
        models.append((c.with_data(**{k: v for k, v in sub.data(prior).items() if k in known}),
                       sampling.batch_seed(0, sub.run_ids)))  # fmt: skip
    return models


def run_mode(models, inflight: int, cores: int, sampler) -> dict:
    from bayesgrpo.inference import nuts_core

    kw = dict(draws=sampler.draws, tune=sampler.tune, chains=sampler.chains, target_accept=sampler.target_accept,
              adaptation="low_rank")  # fmt: skip
    c0, t0 = time.process_time(), time.perf_counter()
    pending: deque = deque()
    out = []
    for cm, seed in models:
        pending.append(nuts_core.start(cm, cores=cores, seed=seed, **kw))
        if len(pending) >= inflight:
            out.append(pending.popleft().wait())
    while pending:
        out.append(pending.popleft().wait())
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall_s": wall, "cpu_s": cpu, "runs_per_s": len(models) / wall, "draws": out}


def main() -> None:
    from bayesgrpo.inference.sampling import SamplerConfig

    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=24)
    ap.add_argument("--draws", type=int, default=SamplerConfig().draws)
    ap.add_argument("--tune", type=int, default=SamplerConfig().tune)
    args = ap.parse_args()
    sampler = SamplerConfig(draws=args.draws, tune=args.tune)
    models = prepare(args.runs)
    run_mode(models[:2], 1, 2, sampler)  # warm-up (first call)
    rows, ref = [], None
    for label, inflight, cores in MODES:
        r = run_mode(models, inflight, cores, sampler)
        draws = r.pop("draws")
        if ref is None:
            ref = draws
        same = all(
            np.array_equal(a.posterior["r_star"], b.posterior["r_star"]) for a, b in zip(ref, draws, strict=True)
        )
        rows.append({"mode": label, "inflight": inflight, "cores": cores, **r, "same_draws": same})
        print(rows[-1], flush=True)
    res = {"load": os.getloadavg()[0], "runs": len(models), "sampler": sampler.model_dump(), "rows": rows}
    (OUT / "inflight.json").write_text(json.dumps(res, indent=1))
    base = rows[0]["runs_per_s"]
    md = ["# Two cores, many runs: threads per run vs runs in flight", "",
          f"Regenerate: `{CMD} --runs {len(models)} --draws {sampler.draws} --tune {sampler.tune}`. "
          + __doc__.split("\n\n")[2].replace("\n", " "), "",
          f"Load average {res['load']:.2f} at the end (wall clock on a shared machine). {len(models)} runs, "
          f"{sampler.chains} chains x ({sampler.tune} tune + {sampler.draws} draws).", "",
          "| arrangement | wall (s) | CPU (s) | runs / s | vs one run at a time on 2 threads | same draws |",
          "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        md.append(f"| {r['mode']} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['runs_per_s']:.2f} | "
                  f"{r['runs_per_s'] / base:.2f}x | {r['same_draws']} |")  # fmt: skip
    (OUT / "inflight.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
