"""Run a grid of testbed configurations (optionally in parallel processes)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from pathlib import Path

import pandas as pd

from bayesgrpo.testbed.config import SweepConfig, TrainerConfig, load_sweep_config
from bayesgrpo.testbed.grpo import run

__all__ = ["sweep", "run_one", "write_runs"]


def _single_thread():
    """Limit BLAS to one thread (the tiny matrices here run many times slower with more)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover
        return nullcontext()
    return threadpool_limits(1)


def run_one(item: tuple[str, TrainerConfig, dict]) -> tuple[pd.DataFrame, dict, float]:
    run_id, cfg, labels = item
    t0 = time.perf_counter()
    with _single_thread():
        df, meta = run(cfg)
    df.insert(0, "run_id", run_id)
    meta = {"run_id": run_id, **meta, **labels}
    return df, meta, time.perf_counter() - t0


def sweep(
    config: SweepConfig | str | Path,
    *,
    jobs: int = 1,
    progress: Callable[[int, int, str, float], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run every configuration of a sweep; return ``(data, meta)`` in the schema format.

    ``data``: long table (``run_id``, ``step``, ``reward``, ...); ``meta``: one row per run with a
    ``run_id`` column (``RunSet.from_frames(data, meta)`` accepts both). Results do not depend on
    ``jobs`` (each run is seeded by its own configuration).
    """
    if not isinstance(config, SweepConfig):
        config = load_sweep_config(config)
    items = config.expand()
    frames: list[pd.DataFrame | None] = [None] * len(items)
    metas: list[dict | None] = [None] * len(items)
    if jobs <= 1:
        for k, item in enumerate(items):
            df, meta, dt = run_one(item)
            frames[k], metas[k] = df, meta
            if progress:
                progress(k + 1, len(items), item[0], dt)
    else:
        with ProcessPoolExecutor(max_workers=jobs) as ex:
            futs = {ex.submit(run_one, item): k for k, item in enumerate(items)}
            for done, fut in enumerate(_as_completed(futs), start=1):
                k = futs[fut]
                df, meta, dt = fut.result()
                frames[k], metas[k] = df, meta
                if progress:
                    progress(done, len(items), items[k][0], dt)
    data = pd.concat(frames, ignore_index=True)
    meta = pd.DataFrame(metas)
    return data, meta


def _as_completed(futs):
    from concurrent.futures import as_completed

    return as_completed(futs)


def write_runs(data: pd.DataFrame, meta: pd.DataFrame, out: str | Path, *, gzip: bool = False) -> tuple[Path, Path]:
    """Write ``runs.csv`` and ``meta.csv`` (``.csv.gz`` with ``gzip``) to ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ext = ".csv.gz" if gzip else ".csv"
    p_runs, p_meta = out / f"runs{ext}", out / f"meta{ext}"
    kw = {"compression": {"method": "gzip", "mtime": 0}} if gzip else {}
    data.to_csv(p_runs, index=False, float_format="%.9g", **kw)
    meta.to_csv(p_meta, index=False, **kw)
    return p_runs, p_meta
