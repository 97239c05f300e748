"""The development runs every benchmark uses, read by path from ../shared (never copied here).

``load_dev()`` returns all runs of ``grpo-public`` and ``grpo-extra`` except a fixed sample of the
78-run research repository (every 4th run, in file order: 20 runs), for CPU time on 2 cores;
``load_dev(more=True)`` adds every run of ``grpo-more`` (18 runs, 8 more sources). The metadata column
``source_repo`` names each run's source; leave-one-source-out uses it.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd

from bayesgrpo.io import read_runs
from bayesgrpo.schema import RunSet

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
FOLDERS = ("grpo-public", "grpo-extra")
MORE = ("grpo-more",)
BIG_SOURCE = "Sunshine535/nips-grpo-dynamics"
BIG_EVERY = 4
SELECTION = (
    f"all runs of grpo-public and grpo-extra except the 78-run repository {BIG_SOURCE}, of which every "
    f"{BIG_EVERY}th run in file order is kept (20 runs) for CPU time"
)
SELECTION_MORE = SELECTION + ", plus every run of grpo-more"


def load_dev(*, every: int = BIG_EVERY, more: bool = False) -> RunSet:
    datas, metas = [], []
    for f in FOLDERS + (MORE if more else ()):
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
    where = "../shared/data/grpo-{public,extra" + (",more}" if more else "}")
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
    import numpy as np

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
