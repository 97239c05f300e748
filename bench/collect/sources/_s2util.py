"""Small parsing helpers shared by scout2's source modules (W&B CSV exports, verl step lines, key mapping).

Not a source (the builder skips modules whose name starts with ``_``). Every function parses upstream text
that the caller read through :mod:`bench.collect.raw`.
"""

from __future__ import annotations

import csv
import io
import re

import numpy as np
import pandas as pd

from bayesgrpo.io._common import map_metric_columns, num, strip_train_prefix


def to_schema(df: pd.DataFrame) -> pd.DataFrame:
    """Long rows (``run_id, step`` + source keys) renamed onto bayesgrpo's channels (its own alias table);
    W&B/TensorBoard ``train/`` prefixes are dropped first. Non-numeric columns are dropped."""
    df = df.rename(columns={c: strip_train_prefix(c) for c in df.columns if c not in ("run_id", "step")})
    keep = ["run_id", "step"] + [
        c for c in df.columns if c not in ("run_id", "step") and pd.api.types.is_numeric_dtype(df[c])
    ]
    out, _used = map_metric_columns(df[keep])
    return out.sort_values(["run_id", "step"]).reset_index(drop=True)


def wandb_csv(text: str, *, skip_internal: bool = True) -> dict[str, pd.DataFrame]:
    """A W&B panel CSV export -> {run name: frame(step, <metric>...)}; ``__MIN``/``__MAX`` columns and the
    internal ``_step`` counter are dropped; header cells are split at the last ``' - '``."""
    rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    head, body = rows[0], [r for r in rows[1:] if r]
    xcol = head[0]
    out: dict[str, dict[str, list]] = {}
    x = [num(r[0]) for r in body]
    for j, h in enumerate(head[1:], start=1):
        if h.endswith("__MIN") or h.endswith("__MAX") or " - " not in h:
            continue
        run, _, metric = h.rpartition(" - ")
        if skip_internal and metric.startswith("_"):
            continue
        vals = [num(r[j]) if j < len(r) else np.nan for r in body]
        out.setdefault(run, {})[metric] = vals
    frames = {}
    for run, cols in out.items():
        df = pd.DataFrame({"step": x, **cols})
        df = df.apply(pd.to_numeric, errors="coerce")
        mcols = [c for c in df.columns if c != "step"]
        df = df.dropna(subset=mcols, how="all").dropna(subset=["step"])
        df.attrs["x"] = xcol
        frames[run] = df.reset_index(drop=True)
    return frames


_VERL_LINE = re.compile(r"step:(\d+) - (.*)")


def verl_steps(text: str, maxlen: int | None = None) -> pd.DataFrame:
    """verl console ``step:N - key:value - ...`` lines -> wide frame (``step`` + keys, source names).

    ANSI codes and Ray prefixes are stripped; values that are not numbers are skipped; a later line for
    the same step updates the earlier one (validation-only ``step:0`` lines merge with nothing else).
    ``maxlen``: the capture cut lines at this many characters (W&B's ``output.log`` keeps 4096); the last
    field of a line that long may be cut mid-number and is dropped, as is everything after the cut."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    recs: dict[int, dict] = {}
    for line in text.replace("\r", "\n").splitlines():
        i = line.find("step:")
        while i > 0 and not _VERL_LINE.match(line[i:]):
            i = line.find("step:", i + 1)
        if i < 0:
            continue
        m = _VERL_LINE.match(line[i:])
        if not m:
            continue
        step = int(m.group(1))
        rec = recs.setdefault(step, {})
        parts = m.group(2).split(" - ")
        if maxlen is not None and len(line) >= maxlen:
            parts = parts[:-1]
        for part in parts:
            k, sep, v = part.partition(":")
            if not sep:
                continue
            v = num(v.strip())
            if isinstance(v, float):
                rec[k.strip()] = v
    df = pd.DataFrame([{"step": s, **r} for s, r in sorted(recs.items())])
    return df


def verl_train(text: str, run_id: str, reward_key: str = "critic/score/mean", maxlen: int | None = None) -> pd.DataFrame:
    """:func:`verl_steps` keeping the steps that hold a training reward, mapped onto the schema."""
    df = verl_steps(text, maxlen)
    if reward_key not in df.columns:
        return pd.DataFrame(columns=["run_id", "step", "reward"])
    df = df[df[reward_key].notna()].copy()
    if reward_key != "critic/score/mean":
        df = df.rename(columns={reward_key: "reward"})
    df.insert(0, "run_id", run_id)
    return to_schema(df)
