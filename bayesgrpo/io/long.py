"""Long CSV / Parquet already in the bayesgrpo schema (``run_id, step, reward, ...``)."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

from bayesgrpo.io._common import fmt_error
from bayesgrpo.io._text import read_table
from bayesgrpo.schema import REWARD, RUN, SOURCE_FILE, SOURCE_LINE, STEP

__all__ = ["read_long"]


def read_long(path: Path):
    """Read a long table; ``source_line`` is the CSV line, absent for Parquet. A CSV's delimiter is the
    header's, ``#`` lines are comments, an unfinished last line waits (:func:`bayesgrpo.io._text.read_table`).

    A ``source_file`` column in the file is kept (it names the original log); otherwise this file.
    """
    path = Path(path)
    if path.suffix.lower() in (".parquet", ".pq"):
        try:
            df = pd.read_parquet(path)
        except Exception as e:  # noqa: BLE001
            raise fmt_error(
                path, None, f"cannot read Parquet ({type(e).__name__}: {e}); expected a long table run_id, step, reward"
            ) from None
    else:
        t = read_table(path)
        try:
            df = pd.read_csv(io.StringIO(t.text), sep=t.delimiter, dtype={RUN: str}, keep_default_na=True)
        except pd.errors.ParserError as e:
            raise fmt_error(path, None, f"malformed CSV ({e}); expected a long table run_id, step, reward") from None
        except pd.errors.EmptyDataError:
            raise fmt_error(path, None, "empty file; expected a header line run_id,step,reward,...") from None
        if SOURCE_LINE not in df.columns:
            lines = t.data_lines()
            df[SOURCE_LINE] = lines if len(lines) == len(df) else df.index + t.header_line + 2
    missing = [c for c in (RUN, STEP, REWARD) if c not in df.columns]
    if missing:
        raise fmt_error(
            path,
            "line 1",
            f"missing column(s) {missing}; expected a long table with columns run_id, step, reward (found {list(df.columns)[:12]})",
        )
    if len(df) == 0:
        raise fmt_error(path, None, "no data rows; expected one row per (run_id, step)")
    bad = pd.to_numeric(df[STEP], errors="coerce").isna()
    if bad.any():
        i = bad[bad].index[0]
        where = f"line {int(df.loc[i, SOURCE_LINE])}" if SOURCE_LINE in df.columns else f"row {i + 1}"
        raise fmt_error(path, where, f"step {df.loc[i, STEP]!r} is not a number; expected an integer step")
    if SOURCE_FILE not in df.columns:
        df[SOURCE_FILE] = str(path)
    return df, None
