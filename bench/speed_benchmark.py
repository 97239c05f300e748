"""Speed of `bayesgrpo forecast` as a user runs it; writes bench/results/speed.md and speed.json.

    .venv/bin/python bench/speed_benchmark.py

1. Batch: all 100 runs of ../shared/data/grpo-public, each truncated at 30% of its logged steps
   (horizon = its last logged step), in ONE `bayesgrpo forecast` call (model compiled once).
2. Cold start: one run in a fresh process (interpreter start + imports + compile + sampling).
Both are wall-clock times of the CLI subprocess on this machine (2 cores); the load average at the
start is recorded, since other work on the machine slows everything.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "grpo-public"
OUT = ROOT / "bench" / "results"
CLI = str(ROOT / ".venv" / "bin" / "bayesgrpo")


def timed(args, out_csv):
    t0 = time.perf_counter()
    proc = subprocess.run([CLI, *args, "--out", str(out_csv)], capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"bayesgrpo failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return dt, pd.read_csv(out_csv)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    base = [str(SHARED / "runs.csv"), "--meta", str(SHARED / "meta.csv"), "--until-fraction", "0.3"]
    first = pd.read_csv(SHARED / "meta.csv")["run_id"].iloc[3]
    t_cold, _tab1 = timed(["forecast", *base, "--run", first], Path("/tmp/bayesgrpo_speed_one.csv"))
    t_all, tab = timed(["forecast", *base], Path("/tmp/bayesgrpo_speed_all.csv"))
    n = len(tab)
    res = {
        "n_runs": n,
        "batch_wall_s": round(t_all, 1),
        "batch_per_run_s": round(t_all / n, 2),
        "sampling_per_run_s_median": round(float(tab["seconds"].median()), 2),
        "cold_start_one_run_s": round(t_cold, 1),
        "r_hat_max_over_runs": round(float(tab["r_hat_max"].max()), 4),
        "share_r_hat_le_1.01": round(float((tab["r_hat_max"] <= 1.01).mean()), 3),
        "ess_min_median": round(float(tab["ess_min"].median()), 0),
        "runs_with_divergences": int((tab["divergences"] > 0).sum()),
        "load_average_at_start": round(load, 2),
        "cores": os.cpu_count(),
        "command_batch": "bayesgrpo forecast ../shared/data/grpo-public/runs.csv --meta ../shared/data/grpo-public/meta.csv --until-fraction 0.3",
    }
    (OUT / "speed.json").write_text(json.dumps(res, indent=2) + "\n")
    md = [
        "# Forecast speed",
        "",
        "Regenerate: `.venv/bin/python bench/speed_benchmark.py` (wall clock of the CLI, this 2-core machine).",
        "",
        f"Load average when the benchmark started: {res['load_average_at_start']} (other work slows all numbers).",
        "",
        "| measure | value | goal |",
        "|---|---|---|",
        f"| 100 real runs at 30%, one `bayesgrpo forecast` call, wall clock | {res['batch_wall_s']} s | |",
        f"| amortised per run (compile + imports included) | **{res['batch_per_run_s']} s** | <= 2 s |",
        f"| sampling + forecasting per run (median, after the one compile) | {res['sampling_per_run_s_median']} s | |",
        f"| single-run cold start (new process: imports, compile, sampling) | {res['cold_start_one_run_s']} s | |",
        f"| max r_hat over all runs and reported quantities | {res['r_hat_max_over_runs']} | <= 1.01 |",
        f"| share of runs with r_hat <= 1.01 | {res['share_r_hat_le_1.01']:.1%} | |",
        f"| median of per-run minimum ESS | {res['ess_min_median']:.0f} | |",
        f"| runs with any divergent transition | {res['runs_with_divergences']} of {n} | |",
        "",
        "How: the likelihood is a compiled Kalman-filter Op with an exact forward-mode gradient",
        "(`bayesgrpo/kalman_op.py`, ~30 µs per evaluation for 300 steps, against ~2 ms for the same",
        "filter as a PyTensor scan under JAX, whose numba compile took minutes); nutpie compiles the",
        "model once per process and each run's data are swapped in with `with_data`.",
    ]
    (OUT / "speed.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
