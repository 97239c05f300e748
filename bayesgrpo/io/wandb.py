"""Weights & Biases panel CSV export ("Export -> CSV").

Header: the x-axis column first (``Step`` or a custom axis such as ``train/global_step``), then
``"<run name> - <metric>"`` columns (split at the **last** ``" - "``; run names may contain it),
usually with ``__MIN``/``__MAX`` companions, which are ignored. Runs of different lengths leave
empty cells. One RunSet run per W&B run. Metric names lose a leading ``train/`` (TRL/OpenRLHF
logging prefix), so ``train/reward`` -> ``reward``; ``eval/<m>`` stays ``eval/<m>``.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd

from bayesgrpo.io._common import fmt_error, num, records_frame, strip_train_prefix
from bayesgrpo.io._text import read_table
from bayesgrpo.schema import RUN, SOURCE_LINE, STEP

__all__ = ["read_wandb_csv"]


def read_wandb_csv(path: Path, *, x: str | None = None):
    """Read a W&B CSV export; ``x`` names a per-run metric to use as step instead of column 1
    (e.g. ``x="_step"``). ``source_line`` is the CSV line (header = 1)."""
    path = Path(path)
    t = read_table(path)  # W&B quotes every field: its last line is whole without a line break
    rows = list(csv.reader(io.StringIO(t.text, newline=""), delimiter=t.delimiter))
    if t.header_line < 0:
        raise fmt_error(path, "line 1", "empty file; expected a W&B CSV export header '<x axis>,<run> - <metric>,...'")
    rows = rows[t.header_line :]  # line i + 1 + header_line below
    header = rows[0]
    runs: dict[str, dict[str, int]] = {}
    for j, h in enumerate(header[1:], start=1):
        if " - " not in h:
            raise fmt_error(
                path, "line 1", f"column {j + 1} {h!r} is not '<run name> - <metric>'; expected a W&B panel CSV export"
            )
        run, _, metric = h.rpartition(" - ")
        if metric.endswith(("__MIN", "__MAX")):
            continue
        runs.setdefault(run, {})[metric] = j
    if not runs:
        raise fmt_error(path, "line 1", "no '<run> - <metric>' columns; expected a W&B panel CSV export")
    if x is not None:
        missing = [r for r, ms in runs.items() if x not in ms]
        if missing:
            raise fmt_error(path, "line 1", f"x axis metric {x!r} missing for run(s) {missing[:3]}")
    recs = []
    for i, row in enumerate(rows[1:], start=t.header_line + 2):
        if not row:
            continue
        if len(row) != len(header):
            raise fmt_error(path, f"line {i}", f"{len(row)} fields, expected {len(header)} (one per header column)")
        for run, ms in runs.items():
            vals = {m: row[j] for m, j in ms.items() if m != x}
            if all(not v.strip() for v in vals.values()):
                continue
            sx = row[ms[x]] if x is not None else row[0]
            st = num(sx)
            if not isinstance(st, float) or st != st:
                raise fmt_error(
                    path,
                    f"line {i}",
                    f"x axis value {sx!r} (column {x or header[0]!r}) is not a number; expected a step",
                )
            if st != int(st):
                raise fmt_error(
                    path,
                    f"line {i}",
                    f"x axis value {sx!r} (column {x or header[0]!r}) is not an integer step; export with a step x axis or pass x='_step'",
                )
            rec: dict[str, object] = {strip_train_prefix(m): v for m, v in vals.items()}
            rec[RUN] = run
            rec[STEP] = int(st)
            rec[SOURCE_LINE] = i
            recs.append(rec)
    if not recs:
        raise fmt_error(path, None, "no data rows; expected one row per x-axis value")
    df = records_frame(recs, path)
    meta = pd.DataFrame({RUN: list(runs), "x_axis": x or header[0]})
    return df, meta
