"""What a sparse step axis and a long horizon cost: the limits of ``forecast_batch`` (issue 19, item 3).

The model works on the unit-step grid from a run's first to its last logged step (recursion (1) is
per optimizer step), so a fit costs about the grid's length, however few points are logged on it, and
a forecast propagates every future step. This script measures, with the default sampler:

* **fit** -- one run of 50 logged points spread evenly over grids of 1,000 ... 100,000 steps, forecast
  one logging interval ahead (the posterior's cost);
* **horizon** -- one run of 100 points logged every step, forecast 1,000 ... 1,000,000 steps ahead
  (propagating the draws and their stop steps).

Each cell runs in a fresh process through ``bayesgrpo forecast`` (the disk cache of compiled models
warm), so the times are what a user waits. Results: ``bench/results/grid_cost.md`` / ``.json``.

Regenerate (about 15 minutes on 2 shared cores)::

    nice -n 10 python bench/grid_cost.py            # resumable: cells already in the JSON are kept
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results"
FIT_GRIDS = (1_000, 5_000, 20_000, 50_000, 100_000)
HORIZONS = (1_000, 10_000, 100_000, 300_000, 1_000_000)
TIMEOUT = 900


def _curve(s, span):
    return (
        0.2 + 0.5 * (1 - np.exp(-(s - s[0]) / (0.2 * span))) + 0.02 * np.random.default_rng(0).standard_normal(s.size)
    )


def _cell(kind: str, size: int, tmp: Path) -> dict:
    if kind == "fit":
        s = np.unique(np.linspace(1, size, 50).round().astype(int))
        horizon = int(s[-1] + (s[1] - s[0]))
    else:
        s = np.arange(1, 101)
        horizon = 100 + size
    p = tmp / f"{kind}_{size}.csv"
    pd.DataFrame({"run_id": "r", "step": s, "reward": _curve(s, s[-1] - s[0])}).to_csv(p, index=False)
    out = tmp / f"{kind}_{size}_out.csv"
    cmd = [sys.executable, "-c", "from bayesgrpo.cli import app; app()", "forecast", str(p), "--horizon", str(horizon),
           "--out", str(out)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
        wall = time.perf_counter() - t0
        row = pd.read_csv(out).iloc[0].to_dict() if out.exists() else {}
        return {"kind": kind, "size": size, "wall_s": round(wall, 1), "fit_s": row.get("seconds"),
                "rc": proc.returncode, "status": row.get("status"), "error": row.get("error")}  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"kind": kind, "size": size, "wall_s": None, "rc": None, "status": f"timeout > {TIMEOUT} s"}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    js = OUT / "grid_cost.json"
    cells = json.loads(js.read_text()) if js.exists() else []
    done = {(c["kind"], c["size"]) for c in cells}
    with tempfile.TemporaryDirectory() as d:
        for kind, sizes in (("fit", FIT_GRIDS), ("horizon", HORIZONS)):
            for size in sizes:
                if (kind, size) in done:
                    continue
                c = _cell(kind, size, Path(d))
                print(c, flush=True)
                cells.append(c)
                js.write_text(json.dumps(cells, indent=1))
    load = os.getloadavg()
    md = ["# Cost of the step grid and of the horizon\n",
          "Regenerate: `nice -n 10 python bench/grid_cost.py` (resumable). Wall time of a fresh `bayesgrpo "
          "forecast` process (compiled model from the disk cache), default sampler, on the shared 2-core machine "
          f"(load average {load[0]:.1f} when this page was written, 15-19 while the cells ran: other engineers' "
          "jobs ran too, so times are upper bounds).\n",
          "| measured | grid or steps ahead | wall s | fit s (table) | status |",
          "|---|---:|---:|---:|---|"]  # fmt: skip
    for c in cells:
        what = "fit: 50 points over a grid of" if c["kind"] == "fit" else "horizon: steps ahead of 100 points"
        fit_s = "" if c.get("fit_s") is None or c["fit_s"] != c["fit_s"] else f"{c['fit_s']:.1f}"
        md.append(f"| {what} | {c['size']:,} | {c.get('wall_s')} | {fit_s} | {c.get('status')} |")
    from bayesgrpo.plan import MAX_FUTURE_STEPS, MAX_GRID_STEPS

    md += ["", "Limits chosen from these numbers (`bayesgrpo/forecast/batch.py`): a run whose logged steps span a "
           f"grid of more than {MAX_GRID_STEPS:,} steps, or a horizon more than {MAX_FUTURE_STEPS:,} steps after "
           "the last logged step, is an error row naming the run and the size, within a second and before any sampling "
           "(the development runs span at most 1,000 steps). The times above were taken without those limits.",
           "", "Measured before the limits existed: the cells ran on the code of main at the time (the limits would "
           "have refused the last rows)."]  # fmt: skip
    (OUT / "grid_cost.md").write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
