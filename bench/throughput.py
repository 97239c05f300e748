"""Batch throughput of ``bayesgrpo forecast`` against an earlier tree, in one run on this machine; writes
bench/results/throughput.md and throughput.json.

    .venv/bin/python bench/throughput.py [--base REV]     # ~6 min on a quiet machine; REV default 072832e

The 100 runs of grpo-public at 30% of their steps, the shipped settings (default sampler, kind, prior,
calibration, stop advice), by the CLI in fresh processes with the disk cache warm (a first call per tree
fills it and is not timed): serial twice and ``--workers 2`` once, per tree. Each tree is a ``git
worktree`` of its revision run with this checkout's virtual environment (``PYTHONPATH`` = the tree), so
the trees differ only in their code. Tables: serial and ``--workers 2`` of the same tree compared on every
column but ``seconds``; the trees' tables compared on the quantiles (Monte-Carlo noise: another kernel's
rounding changes the chains).

Wall clock on this shared 2-core machine depends on the load (recorded at the start and the end); CPU
time (user + system of the child, every thread) much less so.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results"
PY = sys.executable
PUBLIC = ROOT.parent / "shared" / "data" / "grpo-public"
CMD = ".venv/bin/python bench/throughput.py"
ENTRY = "import sys; from bayesgrpo.cli import app; sys.argv[0] = 'bayesgrpo'; app()"
BASE = "072832e"  # main before the adjoint kernel and the cached decision numbers (issue 20)
ARGS = ["forecast", str(PUBLIC / "runs.csv"), "--meta", str(PUBLIC / "meta.csv"), "--until-fraction", "0.3"]


def timed(tree: Path, argv: list[str]) -> dict:
    """Wall clock and CPU seconds of one CLI process of ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([PY, "-c", ENTRY, *argv], env=env, capture_output=True, text=True, cwd=tree)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{tree}: {' '.join(argv[:2])} failed:\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu}


def measure(tree: Path, tmp: Path, label: str, extra: tuple[str, ...] = (), workers: bool = True) -> dict:
    timed(tree, [*ARGS, "--run", "teaching_an_llm_to_reason__grpo_training__a12f55c", "--out", str(tmp / "w.csv")])
    res: dict = {}
    for i in (1, 2):
        res[f"serial_{i}"] = timed(tree, [*ARGS, *extra, "--out", str(tmp / f"{label}_serial_{i}.csv")])
        print(label, f"serial {i}", res[f"serial_{i}"], flush=True)
    tab = pd.read_csv(tmp / f"{label}_serial_1.csv")
    res["n_runs"] = len(tab)
    res["statuses"] = tab["status"].value_counts().to_dict()
    if not workers:
        return res
    res["workers2"] = timed(tree, [*ARGS, "--workers", "2", "--out", str(tmp / f"{label}_workers2.csv")])
    print(label, "workers 2", res["workers2"], flush=True)
    a, b = (pd.read_csv(tmp / f"{label}_{x}.csv").drop(columns="seconds") for x in ("serial_1", "workers2"))
    res["serial_equals_workers2"] = bool(a.equals(b))
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default=BASE)
    args = ap.parse_args()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    tmp = Path(tempfile.mkdtemp(prefix="bayesgrpo-throughput-"))
    base_tree = tmp / "base"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(base_tree), args.base], check=True)
    try:
        res = {"load": [os.getloadavg()[0]], "base": args.base, "head": head.stdout.strip(), "trees": {}}
        res["trees"]["base"] = measure(base_tree, tmp, "base")
        res["trees"]["head"] = measure(ROOT, tmp, "head")
        # the sampler retry (issue 17) against none: the runs it sampled again are the rows that differ
        res["trees"]["head --no-retry"] = measure(ROOT, tmp, "noretry", ("--no-retry",), workers=False)
        res["load"].append(os.getloadavg()[0])
        h, n = (pd.read_csv(tmp / f"{x}_serial_1.csv").set_index("run_id") for x in ("head", "noretry"))
        a, b = h["final_q50"], n.loc[h.index, "final_q50"]
        res["retried_runs"] = int(((a != b) & ~(a.isna() & b.isna())).sum())  # NaN rows (errors) are equal
        a, b = (pd.read_csv(tmp / f"{x}_serial_1.csv") for x in ("base", "head"))
        q = [c for c in a.columns if c.startswith("final_q")]
        d = (a[q] - b[q]).abs()
        res["quantile_abs_diff"] = {"median": float(d.stack().median()), "max": float(d.to_numpy().max())}
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_tree)], check=False)
        shutil.rmtree(tmp, ignore_errors=True)
    (OUT / "throughput.json").write_text(json.dumps(res, indent=1) + "\n")
    (OUT / "throughput.md").write_text(report(res))
    print(report(res))


def report(res: dict) -> str:
    md = ["# Batch throughput: 100 real runs, shipped settings, before and after", "",
          f"Regenerate: `{CMD}` (the script's docstring says how). Base tree `{res['base']}`, this tree "
          f"`{res['head']}`; load average {res['load'][0]:.2f} at the start, {res['load'][1]:.2f} at the end.", "",
          "| tree | how | wall clock (s) | forecasts / s | CPU (s) |", "|---|---|---|---|---|"]  # fmt: skip
    for name, t in res["trees"].items():
        for how in ("serial_1", "serial_2", "workers2"):
            if how not in t:
                continue
            m = t[how]
            md.append(f"| {name} | {how.replace('_', ' ')} | {m['wall_s']:.1f} | {t['n_runs'] / m['wall_s']:.2f} | "
                      f"{m['cpu_s']:.1f} |")  # fmt: skip
    b, h = res["trees"]["base"], res["trees"]["head"]
    best = {k: min(t["serial_1"]["wall_s"], t["serial_2"]["wall_s"]) for k, t in (("base", b), ("head", h))}
    md += ["", f"Serial, the better of two: **{h['n_runs'] / best['head']:.2f} forecasts/s** (base "
           f"{b['n_runs'] / best['base']:.2f}), {best['base'] / best['head']:.2f}x. `--workers 2` against serial: "
           f"{best['head'] / h['workers2']['wall_s']:.2f}x (base {best['base'] / b['workers2']['wall_s']:.2f}x). "
           f"Serial and `--workers 2` tables identical (every column but `seconds`): base "
           f"{b['serial_equals_workers2']}, this tree {h['serial_equals_workers2']}. Statuses (this tree): "
           f"{h['statuses']}.", "",
           f"The two trees' final-reward quantiles differ by a median {res['quantile_abs_diff']['median']:.4f} "
           f"(max {res['quantile_abs_diff']['max']:.3f}) in run units: the chains differ in rounding, and the runs "
           "this tree samples again (below) are sampled with other settings, so the draws differ by Monte-Carlo "
           "noise; `bench/results/sampling.md` (configs `kernel_ab`, `retry`) compares the scores on the "
           "development benchmark."]  # fmt: skip
    if "head --no-retry" in res["trees"]:
        nr = res["trees"]["head --no-retry"]
        bn = min(nr["serial_1"]["wall_s"], nr["serial_2"]["wall_s"])
        md += ["", f"The sampler retry (the default; a run whose chains disagree or diverged is sampled again, "
               f"`SamplerConfig.retry`): {res['retried_runs']} of the {h['n_runs']} runs were sampled again (their "
               f"table rows differ from `--no-retry`'s); `--no-retry` makes {nr['n_runs'] / bn:.2f} forecasts/s, "
               f"{bn / best['head']:.2f}x the time of the default. Statuses with `--no-retry`: {nr['statuses']}."]  # fmt: skip
    return "\n".join(md) + "\n"


if __name__ == "__main__":
    main()
