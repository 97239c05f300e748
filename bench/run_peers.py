"""Peers' backtest on every development source (``bench/devdata.py::load_all``; independent of bayesgrpo; run
once, resumable).

.venv/bin/python bench/run_peers.py     # ledger: bench/results/forecast_runs/dev/peers/cases.csv
"""

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from devdata import load_all  # noqa: E402

from bayesgrpo.evaluation.backtest import backtest  # noqa: E402

CUTOFFS = (0.1, 0.2, 0.3, 0.5)
PEERS = ("last_value", "exponential", "scalerl", "pow3", "domhan_fast")
N_BOOT = 40
PEER_KW = {p: {"n_boot": N_BOOT} for p in ("exponential", "scalerl", "pow3")}
OUT = ROOT / "bench" / "results" / "forecast_runs" / "dev" / "peers"

if __name__ == "__main__":
    rs = load_all()
    t0 = time.time()

    def progress(done, total, msg):
        if done % 25 == 0 or done == total:
            print(f"[{time.time() - t0:6.0f}s] {done}/{total} {msg}", flush=True)

    backtest(
        rs,
        cutoffs=CUTOFFS,
        peers=PEERS,
        include_bayes=False,
        out_dir=OUT,
        progress=progress,
        peer_kwargs=PEER_KW,
    )
    print("done", flush=True)
