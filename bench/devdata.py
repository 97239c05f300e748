"""The development runs every benchmark uses, read by path from ../shared (never copied here).

``load_dev()`` returns all runs of ``grpo-public`` and ``grpo-extra`` except a fixed sample of the
78-run research repository (every 4th run, in file order: 20 runs), for CPU time on 2 cores;
``load_dev(more=True)`` adds every run of ``grpo-more`` (when present: 18 runs, 8 more sources; the cases of
the two other sets are the same either way); ``folders=`` picks the sets outright. The metadata column
``source_repo`` names each run's source; leave-one-source-out uses it, ``dev_folder`` the set.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.io import read_runs
from bayesgrpo.schema import RunSet

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
FOLDERS = ("grpo-public", "grpo-extra")
#: the two sets of the benchmarks before grpo-more (the population priors were fitted on them)
FOLDERS_BEFORE_MORE = FOLDERS
MORE = ("grpo-more",) if (SHARED / "grpo-more" / "runs.csv").is_file() else ()
FOLDERS_WITH_MORE = FOLDERS + MORE
BIG_SOURCE = "Sunshine535/nips-grpo-dynamics"
BIG_EVERY = 4
SELECTION = (
    f"all runs of {', '.join(FOLDERS)} except the 78-run repository {BIG_SOURCE}, of which every "
    f"{BIG_EVERY}th run in file order is kept (20 runs) for CPU time"
)
SELECTION_MORE = SELECTION + ", plus every run of grpo-more"


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


def load_dev(*, every: int = BIG_EVERY, more: bool = False, folders: tuple[str, ...] | None = None) -> RunSet:
    if folders is None:
        folders = FOLDERS_WITH_MORE if more else FOLDERS
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
    where = "../shared/data/grpo-{" + ",".join(f.removeprefix("grpo-") for f in folders) + "}"
    return RunSet.from_frames(data, meta.reset_index(), source=where)


TESTBED = Path(__file__).resolve().parents[1] / "data" / "testbed"
TESTBED_SOURCE = "testbed"
TESTBED_RUNS = 12
SELECTION_TESTBED = (
    f"{TESTBED_RUNS} runs of the numpy testbed (data/testbed: seed s1 of the cells of every sweep except the "
    "refresh sweeps, spread evenly; one source)"
)


SELECTION_ALL = f"{SELECTION_MORE}, plus {SELECTION_TESTBED}"


def load_testbed(n: int = TESTBED_RUNS) -> RunSet:
    """A fixed sample of the numpy testbed as one more development source (``source_repo`` = ``testbed``):
    seed ``s1`` of the cells of every non-refresh sweep, ``n`` of them spread evenly in file order (the
    population prior's testbed runs are seed ``s0``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tb = read_runs(TESTBED / "runs.csv.gz", meta=TESTBED / "meta.csv.gz")
    m = tb.meta
    ids = [r for r in tb.run_ids if r.endswith("-s1") and not str(m.loc[r, "sweep"]).startswith("refresh")]
    ids = [ids[i] for i in np.linspace(0, len(ids) - 1, n).round().astype(int)]
    keep = ["step", "reward", "reward_std", "frac_reward_zero_std", "entropy", "kl"]
    data = tb.data.loc[tb.data["run_id"].isin(ids), ["run_id", *[c for c in keep if c in tb.data.columns]]]
    meta = m.loc[ids].assign(source_repo=TESTBED_SOURCE, dev_folder="testbed").reset_index()
    return RunSet.from_frames(data, meta, source="data/testbed")


def load_all() -> RunSet:
    """Every development source of the forecast benchmark: :func:`load_dev` with grpo-more, and the testbed."""
    dev = load_dev(more=True)
    return dev.concat(load_testbed())
