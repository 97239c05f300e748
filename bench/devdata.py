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

import numpy as np
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


#: runs whose ``reward_std`` column holds a batch std, not the within-group one (README "Channels": the
#: Sunshine535 exp1a console logs, TRL >= 0.26, measured against the raw log; exp2 comes from the same commit
#: and install). :func:`batch_std_as_such` renames their column for the benchmarks of the spread channel.
BATCH_STD_COMMIT = "__cbe351c"


def batch_std_as_such(runs: RunSet) -> RunSet:
    """``runs`` with the ``reward_std`` of the :data:`BATCH_STD_COMMIT` runs of :data:`BIG_SOURCE` moved to
    ``reward_std_batch`` (what they are), so that no within-group spread channel reads them."""
    ids = [r for r in runs.run_ids if r.endswith(BATCH_STD_COMMIT) and runs.meta.loc[r, "source_repo"] == BIG_SOURCE]
    if not ids or "reward_std" not in runs.data.columns:
        return runs
    data = runs.data.copy()
    sel = data["run_id"].isin(ids)
    data["reward_std_batch"] = np.where(sel, data["reward_std"], data.get("reward_std_batch", np.nan))
    data.loc[sel, "reward_std"] = np.nan
    return RunSet.from_frames(data, runs.meta.reset_index(), source=runs.source)


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
