"""The ledgers: per method and source, the final-reward draws of every case (``bench/results/yardstick/ledgers``).

``<method>/<source-slug>.npz`` maps a case key (``run_id|cutoff``; curve families ``family|run_id|cutoff``) to
float32 draws; ``<method>/<source-slug>.csv`` holds the per-case facts a method reports (evidence, sampler
health, seconds). A source's file is written whole, once its cases are done (resume = skip the file).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
LEDGERS = ROOT / "bench" / "results" / "yardstick" / "ledgers"
N_DRAWS = 400


def slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s)


def path(method: str, source: str, suffix: str) -> Path:
    return LEDGERS / method / f"{slug(source)}{suffix}"


def done(method: str, source: str) -> bool:
    return path(method, source, ".npz").is_file()


def write(method: str, source: str, draws: dict[str, np.ndarray], facts: pd.DataFrame) -> None:
    p = path(method, source, ".npz")
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp.npz")
    np.savez_compressed(tmp, **{k: np.asarray(v, np.float32) for k, v in draws.items()})
    facts.to_csv(path(method, source, ".csv"), index=False)
    tmp.replace(p)


def read(method: str, sources=None) -> tuple[dict[str, np.ndarray], pd.DataFrame]:
    draws, facts = {}, []
    for p in sorted((LEDGERS / method).glob("*.npz")):
        if p.name.endswith(".tmp.npz"):
            continue
        with np.load(p) as z:
            draws.update({k: z[k].astype(float) for k in z.files})
        c = p.with_suffix(".csv")
        if c.is_file() and c.stat().st_size > 1:
            facts.append(pd.read_csv(c))
    f = pd.concat(facts, ignore_index=True) if facts else pd.DataFrame()
    if sources is not None and len(f):
        f = f[f["source"].isin(sources)]
    return draws, f
