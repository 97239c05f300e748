"""The development sources of the yardstick and their split.

Sources: every run of ``../shared/data/grpo-{public,extra,more}`` (read by path, never copied) and of
``data/grpo-collected`` (collected for this project, ``bench/collect``); a source is a public repository
(``source_repo``). The numpy testbed is not a source here (it is not a public log).

**Split, once, by a seeded rule** (:func:`split_of`): a source is in the *locked test* when the first 12 hex
digits of ``sha256(SEED + ":" + source)`` read as a fraction fall below :data:`TEST_SHARE`; else it is a
*selection* source. The rule depends on the source's name alone, so a source added later falls on the side
the rule gives it and no earlier assignment moves. Selection sources serve every choice (leave-one-source-out
among them); the locked test only reports a design (``bench/yardstick/score.py`` counts the looks).

**Runs per source**: at most :data:`MAX_RUNS`, spread evenly in file order (sources weigh the same in every
headline number, so more runs of one source add CPU, not information about others).
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.io import read_runs
from bayesgrpo.schema import RunSet

ROOT = Path(__file__).resolve().parents[2]
SHARED = next(
    (p / "data" for p in (Path(os.environ.get("BAYESGRPO_SHARED", ROOT.parent / "shared")), Path("/work/shared"))
     if (p / "data").is_dir()),
    ROOT.parent / "shared" / "data",
)  # fmt: skip
SHARED_SETS = ("grpo-public", "grpo-extra", "grpo-more")
COLLECTED = ROOT / "data" / "grpo-collected"
SEED = "bayesgrpo-yardstick-2026-12-06"
TEST_SHARE = 0.4
MAX_RUNS = 6
CUTOFFS = (0.1, 0.2, 0.3, 0.5)
RULE = (
    f"a source is in the locked test iff int(sha256('{SEED}:' + source_repo)[:12], 16) / 16**12 < {TEST_SHARE}; "
    f"at most {MAX_RUNS} runs per source, spread evenly in file order"
)


def split_of(source: str) -> str:
    """``"test"`` or ``"selection"`` for a source (its ``source_repo``), by the seeded rule."""
    h = int(hashlib.sha256(f"{SEED}:{source}".encode()).hexdigest()[:12], 16) / 16**12
    return "test" if h < TEST_SHARE else "selection"


def _spread(ids: list[str], k: int) -> list[str]:
    if len(ids) <= k:
        return list(ids)
    return [ids[i] for i in np.linspace(0, len(ids) - 1, k).round().astype(int)]


def _read(folder: Path, name: str) -> RunSet:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # documented NaN rows of a few runs are dropped
        rs = read_runs(folder / "runs.csv", meta=folder / "meta.csv", format="long")
    return RunSet.from_frames(rs.data, rs.meta.assign(dev_folder=name).reset_index(), source=str(folder))


def load(*, split: str | None = None, max_runs: int = MAX_RUNS, sources: list[str] | None = None) -> RunSet:
    """The yardstick's runs (``split``: ``"selection"``, ``"test"`` or both), with ``source_repo``, ``split`` and
    ``dev_folder`` in the metadata."""
    sets = [(SHARED / s, s) for s in SHARED_SETS if (SHARED / s / "runs.csv").is_file()]
    if (COLLECTED / "runs.csv").is_file():
        sets.append((COLLECTED, "grpo-collected"))
    datas, metas = [], []
    for folder, name in sets:
        rs = _read(folder, name)
        datas.append(rs.data)
        metas.append(rs.meta)
    data = pd.concat(datas, ignore_index=True)
    meta = pd.concat(metas)
    meta["source_repo"] = meta["source_repo"].astype(str)
    meta["split"] = meta["source_repo"].map(split_of)
    keep = []
    for src, g in meta.groupby("source_repo", sort=True):
        if split is not None and split_of(src) != split:
            continue
        if sources is not None and src not in sources:
            continue
        keep += _spread(list(g.index), max_runs)
    meta = meta.loc[keep]
    data = data[data["run_id"].isin(keep)]
    return RunSet.from_frames(data, meta.reset_index(), source="yardstick")


def table() -> pd.DataFrame:
    """One row per source: its split, runs kept, runs available, dev folder."""
    rs = load(max_runs=10**6)
    m = rs.meta
    t = m.groupby("source_repo").agg(split=("split", "first"), runs=("split", "size"), folder=("dev_folder", "first"))
    t["kept"] = t["runs"].clip(upper=MAX_RUNS)
    return t
