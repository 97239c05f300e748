"""The TRL testbed's runs (``data/trl-testbed``), read the way a user reads them, for the bench scripts.

* :func:`load_meta` -- one row per run (settings under the schema's names, ``sweep``, ``cell``, ``seconds``);
* :func:`latent` -- the exact per-step state of a run (``reward_current`` = R_n of the policy after n updates);
* :func:`pass_rates` -- every prompt's exact pass rate at the checkpoints;
* :func:`load_runset` -- the logged runs as a :class:`~bayesgrpo.schema.RunSet`, read from each run's
  ``trainer_state.json.gz`` by :func:`bayesgrpo.io.read_many` (the package's own TRL reader), with the
  metadata (optionally without the physics settings, to measure what knowing them is worth).
"""

from __future__ import annotations

import warnings
from functools import cache, lru_cache
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "trl-testbed"
SOURCE = "trl-testbed"
#: metadata the forecast's physics reads (momentum prior, lag pattern) and the settings a user knows
PHYSICS_META = ("beta1", "refresh_interval", "group_size", "learning_rate", "params_b", "batch_size")


@lru_cache(maxsize=1)
def load_meta() -> pd.DataFrame:
    p = DATA / "meta.csv.gz"
    if p.exists():
        m = pd.read_csv(p)
    else:  # the sweep is still running: index what is finished
        import sys

        sys.path.insert(0, str(ROOT))
        from bayesgrpo.testbed.trl.sweep import read_index

        m = read_index(DATA)
    return m.set_index("run_id")


def available() -> list[str]:
    """Run ids with a finished run folder, in meta order."""
    return [r for r in load_meta().index if (DATA / "runs" / r / "run.json").exists()]


@cache
def latent(run_id: str) -> pd.DataFrame:
    return pd.read_csv(DATA / "runs" / run_id / "latent.csv.gz")


@cache
def pass_rates(run_id: str) -> pd.DataFrame:
    return pd.read_csv(DATA / "runs" / run_id / "pass_rates.csv.gz")


def state_path(run_id: str) -> Path:
    return DATA / "runs" / run_id / "trainer_state.json.gz"


def load_runset(ids=None, *, with_physics_meta: bool = True):
    """The logged runs (``ids`` or all finished ones) as one RunSet with ``source_repo`` = :data:`SOURCE`."""
    from bayesgrpo.io import read_many

    ids = list(ids) if ids is not None else available()
    meta = load_meta().loc[ids].reset_index()
    meta["source_repo"] = SOURCE
    if not with_physics_meta:
        meta = meta.drop(columns=[c for c in PHYSICS_META if c in meta])
    keep = [
        c
        for c in meta.columns
        if c
        in (
            "run_id",
            "source_repo",
            "sweep",
            "cell",
            "seed",
            "model",
            "family",
            "dataset",
            "algorithm",
            "max_steps",
            *PHYSICS_META,
        )
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_many([state_path(r) for r in ids], meta=meta[keep])
