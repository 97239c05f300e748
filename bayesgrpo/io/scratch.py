"""Metric logs of from-scratch GRPO loops: per-step CSV, JSONL, and MiniMind-style text lines.

There is no shared schema; the step comes from the first column named ``step``,
``global_step``, ``train/global_step``, ``training/global_step``, ``iteration``, ``iter``,
``Step`` or ``_step``, and the reward from the aliases in :data:`bayesgrpo.io._common.ALIASES`
(``reward``, ``mean_reward``, ``reward_mean``, ``avg_reward``, ..., ``success_rate``), or
``reward_key=...``. Records without a reward (e.g. an eval-only baseline record) are dropped
with a :class:`~bayesgrpo.errors.DataWarning` by the schema validation; records that merge train
and eval keys keep both.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pandas as pd

from bayesgrpo.io._common import default_run_id, fmt_error, num, records_frame, single_run_frame
from bayesgrpo.io._text import finished_lines, json_lines, read_table, read_text
from bayesgrpo.schema import RUN, SOURCE_LINE, STEP

__all__ = ["read_metrics_csv", "read_metrics_jsonl", "read_minimind_log", "STEP_KEYS"]

STEP_KEYS = ("step", "global_step", "train/global_step", "training/global_step", "iteration", "iter", "Step", "_step")


def _step_key(keys, path, where) -> str:
    k = next((s for s in STEP_KEYS if s in keys), None)
    if k is None:
        raise fmt_error(
            path, where, f"no step column; expected one of {', '.join(STEP_KEYS)} (found {list(keys)[:10]})"
        )
    return k


def _step_value(v, key, path, where) -> int:
    st = num(v)
    if not isinstance(st, float) or st != st or st != int(st):
        raise fmt_error(path, where, f"{key} {v!r} is not an integer step")
    return int(st)


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}/"))
        elif not isinstance(v, list):
            out[f"{prefix}{k}"] = v
    return out


def read_metrics_csv(path: Path):
    """Per-step metrics CSV (any columns; CRLF and quoting handled; empty cells -> NaN).

    The delimiter is the header's, ``#`` lines are comments, and a last line without its line break (a
    run cut off, or a file still being written) waits, with a DataWarning
    (:func:`bayesgrpo.io._text.read_table`); a short row elsewhere raises. A ``run_id`` column names
    each row's run (several runs in one file); otherwise the file holds one run.
    """
    path = Path(path)
    t = read_table(path)
    rows = list(csv.reader(io.StringIO(t.text, newline=""), delimiter=t.delimiter))
    if t.header_line < 0:
        raise fmt_error(path, "line 1", "empty file; expected a header line of metric names")
    header, h = t.header, t.header_line + 1
    sk = _step_key(header, path, f"line {h}")
    recs = []
    for i, row in enumerate(rows[h:], start=h + 1):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise fmt_error(path, f"line {i}", f"{len(row)} fields, expected {len(header)} (one per header column)")
        rec: dict[str, object] = dict(zip(header, row, strict=True))
        st = _step_value(rec.pop(sk), sk, path, f"line {i}")
        rec[STEP] = st
        rec[SOURCE_LINE] = i
        recs.append(rec)
    if RUN not in header:
        return single_run_frame(recs, path, empty="no data rows; expected one row per step", step_key=sk)
    if not recs:
        raise fmt_error(path, None, "no data rows; expected one row per step")
    df = records_frame(recs, path)
    empty = df[RUN].astype(str).str.strip() == ""
    df.loc[empty, RUN] = default_run_id(path)
    return df, pd.DataFrame({RUN: pd.unique(df[RUN]), "step_key": sk})


def read_metrics_jsonl(path: Path):
    """One JSON object per line (nested objects flattened with ``/``; ``null`` -> NaN).

    An incomplete last line (run killed while writing) is dropped with a DataWarning; an invalid
    line elsewhere raises.
    """
    path = Path(path)
    recs, sk = [], None
    for line, obj in json_lines(read_text(path), path, "one JSON object of metrics per line"):
        where = f"line {line}"
        if not isinstance(obj, dict):
            raise fmt_error(path, where, f"record is a JSON {type(obj).__name__}; expected an object of metrics")
        rec = _flatten(obj)
        sk = sk or _step_key(rec.keys(), path, where)
        if sk not in rec:
            raise fmt_error(path, where, f"record has no {sk!r}; expected every record to carry the step")
        rec[STEP] = _step_value(rec.pop(sk), sk, path, where)
        rec[SOURCE_LINE] = line
        recs.append(rec)
    return single_run_frame(recs, path, empty="empty file; expected JSON lines of metrics", step_key=sk)


_MM_LINE = re.compile(r"Epoch:?\s*\[(\d+)/(\d+)\]\s*\((\d+)/(\d+)\)\s*,?\s*(.*)$")


def read_minimind_log(path: Path):
    """MiniMind-style text lines ``Epoch:[e/E](i/N), Reward: 0.38, KL_ref: 0.0004, ...``.

    Step = ``(e - 1) * N + i``; fields ``Key: value`` separated by ``,``; keys kept as printed
    (``Reward`` -> reward, ``KL_ref`` -> kl, ``Avg Len`` -> completion_length).
    """
    path = Path(path)
    # 'Reward: 0.3' may be '0.38' a moment later: a metric line waits for its line break
    text = finished_lines(read_text(path), path, what="metric line", complete=lambda ln: not _MM_LINE.search(ln))
    recs = []
    for i, raw in enumerate(text.split("\n"), start=1):
        m = _MM_LINE.search(raw.rstrip("\r"))
        if not m:
            continue
        e, n_epochs, it, n = (int(m.group(k)) for k in range(1, 5))
        max_steps = n_epochs * n
        rec: dict[str, object] = {STEP: (e - 1) * n + it, SOURCE_LINE: i}
        for part in m.group(5).split(","):
            if not part.strip():
                continue
            key, sep, val = part.partition(":")
            if not sep or not key.strip():
                raise fmt_error(path, f"line {i}", f"field {part.strip()[:40]!r} is not 'Key: value'")
            rec[key.strip()] = val.strip()
        recs.append(rec)
    return single_run_frame(recs, path, empty="no 'Epoch:[e/E](i/N), Key: value, ...' line found", max_steps=max_steps)
