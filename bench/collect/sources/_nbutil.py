"""Helpers for the notebook sources (not a source: the builder skips modules whose name starts with ``_``).

An executed Unsloth / TRL notebook can hold several Trainer progress tables (an SFT warm-up before
GRPO, a second ``trainer.train()``); bayesgrpo's notebook reader refuses a notebook in which one of them
has no reward column. :func:`grpo_tables` keeps only the outputs of the cells whose table has a
``reward`` column, then reads the notebook with bayesgrpo's own reader.
"""

from __future__ import annotations

import json
import re

import pandas as pd

from bench.collect.parse import via_reader

_TH = re.compile(r"<th[^>]*>\s*reward\s*</th>")


def _html(out: dict) -> str:
    h = (out.get("data") or {}).get("text/html", "")
    return "".join(h) if isinstance(h, list) else str(h)


def reward_cells(text: str) -> list[int]:
    """Indices of the cells whose output has a Trainer table with a ``reward`` column."""
    nb = json.loads(text)
    return [i for i, c in enumerate(nb["cells"]) if any(_TH.search(_html(o)) for o in c.get("outputs", []) or [])]


def grpo_tables(text: str, *, run_id: str, cells: list[int] | None = None) -> pd.DataFrame:
    """The GRPO progress table(s) of an executed notebook (only ``cells``, default every cell with a reward
    column): one run ``run_id`` for one table, ``run_id + '_' + <reader id>`` for several."""
    nb = json.loads(text)
    keep = set(reward_cells(text) if cells is None else cells)
    for i, c in enumerate(nb["cells"]):
        if c.get("cell_type") == "code" and i not in keep:
            c["outputs"] = []
    return via_reader(json.dumps(nb), suffix=".ipynb", run_id=run_id)


def log_records(records: list[dict], *, run_id: str) -> pd.DataFrame:
    """Trainer log records (dicts of TRL keys with a ``step``, parsed from a printed log) read through bayesgrpo's
    ``trainer_state`` reader, so that TRL keys map to the schema's channels as for a ``trainer_state.json``."""
    return via_reader(json.dumps({"log_history": records}), suffix="_trainer_state.json", run_id=run_id,
                      fmt="trainer_state")


def notebook_stream(text: str, cell: int) -> str:
    """The concatenated stdout/stderr stream text of one notebook cell."""
    nb = json.loads(text)
    return "".join("".join(o.get("text", "")) if isinstance(o.get("text"), list) else str(o.get("text", ""))
                   for o in nb["cells"][cell].get("outputs", []) or [] if o.get("output_type") == "stream")
