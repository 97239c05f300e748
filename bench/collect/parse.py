"""Parsers shared by the source modules: upstream text -> long table (``run_id, step, reward`` + channels).

They use bayesgrpo's own importers where one exists (one key table: ``bayesgrpo.io._common.ALIASES``), so
that a collected run reads as the same file would read through ``bayesgrpo forecast``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd

from bayesgrpo.io import read_runs


def via_reader(text: str | bytes, *, suffix: str, run_id: str, fmt: str | None = None, **kw) -> pd.DataFrame:
    """The runs bayesgrpo's reader finds in ``text`` (written to a temporary file named ``*suffix``), as a long
    table whose ``run_id`` is ``run_id`` (one run) or ``run_id + '_' + <reader's id>`` (several)."""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / f"upstream{suffix}"
        p.write_bytes(text.encode() if isinstance(text, str) else text)
        rs = read_runs(p, format=fmt, **kw) if fmt else read_runs(p, **kw)
    df = rs.data.drop(columns=[c for c in ("source_file", "source_line") if c in rs.data.columns])
    ids = list(dict.fromkeys(df["run_id"]))
    df["run_id"] = df["run_id"].map({r: run_id if len(ids) == 1 else f"{run_id}_{r}" for r in ids})
    return df.reset_index(drop=True)


def trainer_state(text: str, *, run_id: str) -> pd.DataFrame:
    """A TRL / HF ``trainer_state.json`` (its ``log_history``)."""
    return via_reader(text, suffix="_trainer_state.json", run_id=run_id, fmt="trainer_state")


def notebook_table(text: str, *, run_id: str) -> pd.DataFrame:
    """An executed Unsloth / TRL notebook (its printed training-progress table)."""
    return via_reader(text, suffix=".ipynb", run_id=run_id)
