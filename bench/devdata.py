"""The development runs every benchmark uses, read by path from ../shared (never copied here).

``load_dev()`` returns all runs of ``grpo-public``, ``grpo-extra`` and ``grpo-more`` (when present) except a
fixed sample of the 78-run research repository (every 4th run, in file order: 20 runs), for CPU time on 2
cores; ``folders=`` picks the sets (``FOLDERS_BEFORE_MORE``: the two of the benchmarks before grpo-more,
whose cases are the same either way). The metadata column ``source_repo`` names each run's source;
leave-one-source-out uses it, ``dev_folder`` the set.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd

from bayesgrpo.io import read_runs
from bayesgrpo.schema import RunSet

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
FOLDERS_BEFORE_MORE = ("grpo-public", "grpo-extra")
FOLDERS = FOLDERS_BEFORE_MORE + (("grpo-more",) if (SHARED / "grpo-more" / "runs.csv").is_file() else ())
BIG_SOURCE = "Sunshine535/nips-grpo-dynamics"
BIG_EVERY = 4
SELECTION = (
    f"all runs of {', '.join(FOLDERS)} except the 78-run repository {BIG_SOURCE}, of which every "
    f"{BIG_EVERY}th run in file order is kept (20 runs) for CPU time"
)


def load_dev(*, every: int = BIG_EVERY, folders=FOLDERS) -> RunSet:
    datas, metas = [], []
    for f in folders:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the NaN-reward rows of one run are dropped (documented in its README)
            rs = read_runs(SHARED / f / "runs.csv", meta=SHARED / f / "meta.csv")
        datas.append(rs.data)
        metas.append(rs.meta.assign(dev_folder=f))
    data = pd.concat(datas, ignore_index=True)
    meta = pd.concat(metas)
    big = [r for r in meta.index if meta.loc[r, "source_repo"] == BIG_SOURCE]
    keep = [r for r in meta.index if meta.loc[r, "source_repo"] != BIG_SOURCE or r in set(big[::every])]
    meta = meta.loc[keep]
    data = data[data["run_id"].isin(keep)]
    return RunSet.from_frames(data, meta.reset_index(), source=f"../shared/data/{{{','.join(folders)}}}")
