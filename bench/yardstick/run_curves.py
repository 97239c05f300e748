"""Curve families on every yardstick case: each family's final-reward draws, BIC and block score.

.venv/bin/python -m bench.yardstick.run_curves            # resumable per source
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from bayesgrpo.evaluation.peer_base import _problem
from bench.yardstick import cases as C
from bench.yardstick import curves, data, store

METHOD = "curves"


def run_source(cs: list[C.Case]) -> tuple[dict, pd.DataFrame]:
    draws, rows = {}, []
    for i, c in enumerate(cs):
        rng = np.random.default_rng([7, i, int(c.cutoff * 1000)])
        t0 = time.perf_counter()
        try:
            p = _problem(c.steps, c.rewards, c.future, 0.1, 2)
            ff = curves.forecast_families(p, store.N_DRAWS, rng)
        except ValueError as e:
            rows.append(dict(key=c.key, source=c.source, family="*", ok=False, message=str(e)))
            continue
        sec = time.perf_counter() - t0
        for name, f in ff.items():
            if f.ok:
                draws[f"{name}|{c.key}"] = f.draws
            rows.append(dict(key=c.key, source=c.source, family=name, ok=f.ok, bic=f.bic, block=f.block,
                             message=f.message, seconds=sec))  # fmt: skip
    return draws, pd.DataFrame(rows)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", action="append")
    a = ap.parse_args(argv)
    rs = data.load(sources=a.source)
    allc = C.build(rs)
    t0 = time.time()
    for src in sorted({c.source for c in allc}):
        if store.done(METHOD, src):
            continue
        d, f = run_source([c for c in allc if c.source == src])
        store.write(METHOD, src, d, f)
        print(f"[{time.time() - t0:6.0f}s] {src}: {f['key'].nunique()} cases", flush=True)


if __name__ == "__main__":
    main()
