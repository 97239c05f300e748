"""The package's peers on every yardstick case: last value and the bootstrapped least-squares curves.

.venv/bin/python -m bench.yardstick.run_peers            # resumable per source
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from bayesgrpo.evaluation.peers import get_peer
from bench.yardstick import cases as C
from bench.yardstick import data, store

METHOD = "peers"
PEERS = {"last_value": {}, "exponential": {"n_boot": 40}, "scalerl": {"n_boot": 40}, "pow3": {"n_boot": 40}}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", action="append")
    a = ap.parse_args(argv)
    allc = C.build(data.load(sources=a.source))
    peers = {n: get_peer(n, **kw) for n, kw in PEERS.items()}
    t0 = time.time()
    for src in sorted({c.source for c in allc}):
        if store.done(METHOD, src):
            continue
        draws, rows = {}, []
        for i, c in enumerate(x for x in allc if x.source == src):
            for n, p in peers.items():
                r = p.forecast(c.steps, c.rewards, future_steps=c.future, n_draws=store.N_DRAWS, seed=[11, i])
                if r.ok:
                    draws[f"{n}|{c.key}"] = r.final_draws
                rows.append(dict(key=c.key, source=c.source, peer=n, ok=r.ok, message=r.message, seconds=r.seconds))
        store.write(METHOD, src, draws, pd.DataFrame(rows))
        print(f"[{time.time() - t0:6.0f}s] {src}", flush=True)


if __name__ == "__main__":
    main()
