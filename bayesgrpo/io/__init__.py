"""Importers for real GRPO training-log formats -> :class:`bayesgrpo.schema.RunSet`.

>>> from bayesgrpo.io import read_runs, read_many, detect_format, FORMATS
>>> rs = read_runs("outputs/checkpoint-250/trainer_state.json")      # doctest: +SKIP
>>> rs = read_runs("runs.csv", meta="meta.csv")                       # doctest: +SKIP
>>> rs = read_many(["a/trainer_state.json", "b.log"])                 # doctest: +SKIP

Every importer

* maps the source's metric names onto the schema's channels (:data:`bayesgrpo.schema.CHANNELS`:
  ``reward_std``, ``reward_std_batch``, ``frac_reward_zero_std``, ``kl``, ``approx_kl``, ``entropy``,
  ``completion_length``, ``frac_truncated``, ``clip_ratio``; ``reward_fn/<name>``, ``eval/<name>``)
  through the one table :data:`bayesgrpo.io._common.ALIASES`, and keeps every other numeric metric
  under its original name; the source key used for each schema column is recorded, for the runs that
  log it, in the metadata column ``<name>_key`` (e.g. ``reward_key``);
* records ``source_file`` and, where the format has lines/records, ``source_line`` (1-based);
* only reads its input (files are opened read-only and never written);
* raises :class:`~bayesgrpo.errors.LogFormatError` naming the file, the line/record and what was
  expected when the input cannot be read, and refuses runs without a usable reward series;
* resolves steps logged twice (resumed runs) by keeping the later record (``on_duplicate="last"``,
  with a :class:`~bayesgrpo.errors.DataWarning` naming the steps).

See :data:`FORMATS` and :func:`detect_format` for the supported formats.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.errors import DataValidationError, DataWarning, LogFormatError, OptionError
from bayesgrpo.io._common import (
    fmt_error,
    is_bad_number,
    map_metric_columns,
    numeric_columns,
    reward_std_definition,
)
from bayesgrpo.io.trl import hf_trainer_state
from bayesgrpo.schema import REWARD, RUN, SOURCE_FILE, SOURCE_LINE, STEP, RunSet

__all__ = ["FORMATS", "REGISTRY", "LogFormat", "read_runs", "read_many", "detect_format", "load_meta"]


@dataclass(frozen=True)
class LogFormat:
    """One supported log format: its reader, what detects it and, for plain-text logs, the pattern that does.

    Adding an importer is one edit: a reader module in this package and one :class:`LogFormat`
    entry in :data:`REGISTRY` (formats detected by file suffix also get a rule in :func:`detect_format`).
    """

    name: str
    reader: str  # "module:function" inside bayesgrpo.io
    description: str
    detects: str  # what detect_format recognises it by (``bayesgrpo formats``)
    sniff: re.Pattern | None = None  # content pattern of plain-text logs (tried in registry order)


REGISTRY: dict[str, LogFormat] = {
    f.name: f
    for f in (
        LogFormat("long", "long:read_long", "long CSV / Parquet in the bayesgrpo schema (run_id, step, reward, ...)",
                  ".csv/.tsv(.gz) with run_id, step, reward columns; .parquet"),
        LogFormat("trainer_state", "trl:read_trainer_state", "Hugging Face / TRL trainer_state.json (log_history)",
                  '.json with "log_history"; a Hugging Face output folder (newest checkpoint-*/trainer_state.json)'),
        LogFormat("unsloth_notebook", "trl:read_notebook", "executed .ipynb with the Trainer's HTML progress table",
                  ".ipynb"),
        LogFormat(
            "openrlhf_console",
            "openrlhf:read_openrlhf_console",
            "OpenRLHF trainer lines 'Global step N: {'reward': ..., ...}'",
            "text with 'Global step N: {...}' lines",
            re.compile(r"Global step \d+: \{"),
        ),
        LogFormat(
            "verl_console",
            "verl:read_verl_console",
            "verl console logger lines 'step:N - key:value - ...'",
            "text with 'step:N - key:value' lines",
            re.compile(r"step:\d+ - [^\s:]+:"),
        ),
        LogFormat(
            "trl_console",
            "trl:read_trl_console",
            "TRL / HF Trainer stdout: printed dicts {'loss': ..., 'reward': ...}",
            "text with printed dicts {'loss': ... or {'reward': ...",
            re.compile(r"\{'(loss|train_runtime|eval_[A-Za-z_]+|reward)'\s*:"),
        ),
        LogFormat("verl_jsonl", "verl:read_verl_jsonl", 'verl file logger {"step": N, "data": {...}} per line',
                  '.jsonl whose first record is {"step": ..., "data": {...}}'),
        LogFormat("wandb_csv", "wandb:read_wandb_csv", "W&B panel CSV export, '<run> - <metric>' columns",
                  ".csv with '<run> - <metric>' columns"),
        LogFormat("tensorboard", "tensorboard:read_tensorboard",
                  "TensorBoard event files or a folder of them (via tbparse)",
                  "a file named *tfevents*, or a folder holding them"),
        LogFormat("metrics_csv", "scratch:read_metrics_csv",
                  "generic per-step metrics CSV of from-scratch GRPO loops", "any other .csv/.tsv"),
        LogFormat("metrics_jsonl", "scratch:read_metrics_jsonl",
                  "generic per-step metrics JSONL of from-scratch GRPO loops", "any other .jsonl/.ndjson"),
        LogFormat(
            "minimind_log",
            "scratch:read_minimind_log",
            "MiniMind-style lines 'Epoch:[e/E](i/N), Reward: x, ...'",
            "text with 'Epoch:[e/E](i/N)' lines",
            re.compile(r"Epoch:?\s*\[\d+/\d+\]\s*\(\d+/\d+\)"),
        ),
    )
}  # fmt: skip
#: Format names accepted by ``read_runs(..., format=...)`` and returned by :func:`detect_format`.
FORMATS: tuple[str, ...] = tuple(REGISTRY)

_SNIFF_BYTES = 256 * 1024


def _reader(fmt: str):
    import importlib

    module, func = REGISTRY[fmt].reader.split(":")
    return getattr(importlib.import_module(f"bayesgrpo.io.{module}"), func)


# ----------------------------------------------------------------------------- detection
def _head(path: Path, n: int = _SNIFF_BYTES) -> str:
    from bayesgrpo.io._text import read_bytes

    return read_bytes(path, n, warn=False).decode("utf-8", errors="replace").removeprefix("\ufeff")


def _csv_header(path: Path) -> list[str]:
    """The header of a delimited table (its delimiter sniffed, comment lines skipped: io._text)."""
    from bayesgrpo.io._text import logical_suffix, sniff_table

    return sniff_table(_head(path, 64 * 1024), "\t" if logical_suffix(path) == ".tsv" else ",")[2]


def detect_format(path) -> str:
    """Name of the log format of ``path`` (one of :data:`FORMATS`).

    Rules, in order: a directory holding ``checkpoint-*/trainer_state.json`` or ``trainer_state.json``
    (a Hugging Face output folder) -> ``trainer_state``; a directory holding ``*tfevents*`` files, or a
    file whose name contains ``tfevents`` -> ``tensorboard``; ``.ipynb`` -> ``unsloth_notebook``; ``.parquet`` ->
    ``long``;
    ``.json`` with a ``"log_history"`` key -> ``trainer_state``; ``.jsonl`` whose first record is
    ``{"step": ..., "data": {...}}`` -> ``verl_jsonl``, other ``.jsonl`` -> ``metrics_jsonl``;
    ``.csv``/``.tsv`` with columns ``run_id, step, reward`` -> ``long``, with a
    ``"<run> - <metric>"`` column -> ``wandb_csv``, otherwise ``metrics_csv``; any other text
    file is sniffed (first 256 KB, then the whole file): ``Global step N: {...}`` lines ->
    ``openrlhf_console``, ``step:N - key:value`` lines -> ``verl_console``, printed dicts ``{'loss': ...`` -> ``trl_console``,
    ``Epoch:[e/E](i/N)`` lines -> ``minimind_log``.

    Raises
    ------
    LogFormatError
        The file does not exist or matches no known format.
    """
    p = Path(path)
    if not p.exists():
        raise LogFormatError(f"{p}: no such file or directory")
    if p.is_dir():
        if hf_trainer_state(p) is not None:
            return "trainer_state"
        if any("tfevents" in f.name for f in p.rglob("*") if f.is_file()):
            return "tensorboard"
        raise LogFormatError(
            f"{p}: is a directory without a trainer_state.json (checkpoint-*/) or TensorBoard event files; pass a "
            "log file, a Hugging Face output folder or a folder of events.out.tfevents.* files"
        )
    name = p.name.lower()
    if "tfevents" in name:
        return "tensorboard"
    from bayesgrpo.io._text import logical_suffix

    suf = logical_suffix(p)  # runs.csv.gz is read as a CSV
    if suf == ".ipynb":
        return "unsloth_notebook"
    if suf in (".parquet", ".pq"):
        return "long"
    if suf == ".json":
        head = _head(p)
        if '"log_history"' in head or '"log_history"' in _head(p, 1 << 30):
            return "trainer_state"
        raise LogFormatError(
            f'{p}: JSON file without a "log_history" key; expected a Hugging Face/TRL '
            "trainer_state.json (name another layout with --format NAME; see bayesgrpo formats)"
        )
    if suf == ".jsonl" or suf == ".ndjson":
        for line in _head(p).splitlines():
            if line.strip():
                try:
                    rec = json.loads(line)
                except ValueError:
                    break
                if isinstance(rec, dict) and "step" in rec and isinstance(rec.get("data"), dict):
                    return "verl_jsonl"
                break
        return "metrics_jsonl"
    if suf in (".csv", ".tsv"):
        header = _csv_header(p)
        if {RUN, STEP, REWARD} <= set(header):
            return "long"
        if any(" - " in h for h in header[1:]):
            return "wandb_csv"
        return "metrics_csv"
    for text in (_head(p), None):
        if text is None:
            if p.stat().st_size <= _SNIFF_BYTES:
                break
            text = _head(p, 1 << 31)
        for f in REGISTRY.values():
            if f.sniff is not None and f.sniff.search(text):
                return f.name
    raise LogFormatError(
        f"{p}: unrecognised log format; expected one of {', '.join(FORMATS)} (detected from the "
        "extension and content). Name it with --format NAME (format= in Python) if the file is one of them."
    )


# ----------------------------------------------------------------------------- metadata
def load_meta(meta) -> pd.DataFrame | None:
    """A metadata file (CSV / JSON / Parquet), frame or dict as a checked frame (:func:`_check_meta_rows`:
    messages name the file); None for None."""
    return _load_meta(meta)


def _load_meta(meta) -> pd.DataFrame | None:
    if meta is None:
        return None
    if isinstance(meta, pd.DataFrame):
        m = meta.copy()
    elif isinstance(meta, dict):
        m = pd.DataFrame([meta])
    else:
        mp = Path(meta)
        if not mp.exists():
            raise LogFormatError(f"{mp}: metadata file not found")
        if mp.suffix.lower() == ".json":
            try:
                obj = json.loads(mp.read_text(encoding="utf-8"))
            except ValueError as e:
                raise fmt_error(
                    mp,
                    f"line {getattr(e, 'lineno', '?')}",
                    f"not valid JSON ({e}); expected a metadata object or list of objects",
                ) from None
            if isinstance(obj, dict) and all(isinstance(v, dict) for v in obj.values()) and obj:
                m = pd.DataFrame.from_dict(obj, orient="index").rename_axis(RUN).reset_index()
            elif isinstance(obj, dict):
                m = pd.DataFrame([obj])
            else:
                m = pd.DataFrame(obj)
        elif mp.suffix.lower() in (".parquet", ".pq"):
            m = pd.read_parquet(mp)
        else:
            import io

            from bayesgrpo.io._text import read_table

            t = read_table(mp, log=False)  # the delimiter sniffed, comments skipped, Latin-1 if not UTF-8 (io._text)
            try:
                m = pd.read_csv(io.StringIO(t.text), sep=t.delimiter)
            except Exception as e:  # noqa: BLE001 - pandas raises many types
                raise fmt_error(mp, None, f"cannot read metadata CSV ({e})") from None
    if RUN not in m.columns and m.index.name == RUN:
        m = m.reset_index()
    path = meta if isinstance(meta, (str, os.PathLike)) else None
    return _check_meta_rows(m, path)


def _check_meta_rows(m: pd.DataFrame, path) -> pd.DataFrame:
    """The user's metadata, checked where it was read (messages name the metadata file, not the log):
    a run_id column (or a single row that applies to every run), no row with an empty id, and numeric
    cells that are finite numbers in range (else missing, with a warning naming run, column, value)."""
    from bayesgrpo.schema import META_FIELDS, check_meta_values

    name = str(path) if path is not None else "(frame)"
    suffix = Path(path).suffix.lower() if path is not None else ""
    if RUN not in m.columns:
        cols = ", ".join(map(str, m.columns))
        if len(m) > 1:
            raise LogFormatError(f"{name}: metadata without a run_id column ({cols}) has {len(m)} rows; add a "
                                 "run_id column naming each row's run (a single row without it applies to every "
                                 "run)")  # fmt: skip
        if path is not None:
            known = [c for c in m.columns if c in META_FIELDS]
            warnings.warn(f"metadata {name} has no run_id column; its one row ({', '.join(map(str, known)) or cols}) "
                          "applies to every run", DataWarning, stacklevel=4)  # fmt: skip
    else:
        empty = m[RUN].isna() | (m[RUN].astype(str).str.strip() == "")
        for i in m.index[empty]:
            where = f"line {i + 2}" if suffix in (".csv", ".tsv", "") else f"record {i + 1}"
            warnings.warn(f"metadata {name}: {where} has an empty run_id; ignored", DataWarning, stacklevel=4)
        m = m.loc[~empty]
    return check_meta_values(m, f" {name}", stacklevel=5)


def _merge_meta(found: pd.DataFrame | None, user: pd.DataFrame | None, runs: list[str]) -> pd.DataFrame | None:
    """Importer metadata overridden by user metadata (matching run ids; a run-less user row applies to all)."""
    if user is not None and RUN not in user.columns:
        if len(user) != 1:
            raise LogFormatError("metadata without a run_id column must have exactly one row (applied to every run)")
        user = pd.concat([user] * len(runs), ignore_index=True).assign(**{RUN: runs})
    if found is None or len(found) == 0:
        return user
    f = found.copy()
    f[RUN] = f[RUN].astype(str)
    f = f.drop_duplicates(RUN, keep="last").set_index(RUN)
    if user is None:
        return f.reset_index()
    u = user.copy()
    u[RUN] = u[RUN].astype(str)
    u = u.set_index(RUN)
    return u.combine_first(f).reset_index()


# ----------------------------------------------------------------------------- finishing
def _check_reward(data: pd.DataFrame, path) -> None:
    """Refuse non-numeric or entirely missing rewards with a LogFormatError naming file + line."""
    if REWARD not in data.columns:
        raise LogFormatError(f"{path}: no reward series found; expected a reward metric")
    col = data[REWARD]
    if col.dtype.kind not in "fiub":
        bad = [i for i, v in col.items() if is_bad_number(v)]
        if bad:
            i = bad[0]
            line = data.loc[i, SOURCE_LINE] if SOURCE_LINE in data.columns else None
            where = f"line {int(line)}" if line is not None and pd.notna(line) else f"record {i + 1}"
            raise fmt_error(
                path,
                where,
                f"reward value {col[i]!r} is not a number (run {data.loc[i, RUN]!r}); "
                f"{len(bad)} such record(s). Expected a numeric reward.",
            )
    vals = pd.to_numeric(col, errors="coerce")
    for rid, g in vals.groupby(data[RUN], sort=False):
        if not np.isfinite(g.to_numpy(dtype=float)).any():
            raise LogFormatError(
                f"{path}: run {rid!r} has no finite reward value ({len(g)} record(s), all missing/NaN); "
                "expected a numeric reward series"
            )


def _finish(
    data: pd.DataFrame, meta: pd.DataFrame | None, path, *, run_id, user_meta, on_duplicate, used=None, parts=False
) -> RunSet:
    data = data.copy()
    data[RUN] = data[RUN].astype(str)
    if parts:
        # parts of one resumed run: order by step, later part last among equal steps (stable)
        pos = {r: k for k, r in enumerate(pd.unique(data[RUN]))}
        data = (
            data.assign(_p=data[RUN].map(pos), _s=pd.to_numeric(data[STEP], errors="coerce"))
            .sort_values(["_p", "_s"], kind="stable")
            .drop(columns=["_p", "_s"])
            .reset_index(drop=True)
        )
    runs = list(pd.unique(data[RUN]))
    mapping = {}
    if run_id is not None:
        if len(runs) == 1:
            mapping = {runs[0]: str(run_id)}
        else:
            mapping = {r: f"{run_id}/{r}" for r in runs}
        data[RUN] = data[RUN].map(mapping)
        if meta is not None and RUN in meta.columns:
            meta = meta.assign(**{RUN: meta[RUN].astype(str).map(lambda r: mapping.get(r, r))})
        runs = [mapping[r] for r in runs]
    _check_reward(data, path)
    if used:
        meta = meta.copy() if meta is not None else pd.DataFrame({RUN: runs})
        for k, by_run in used.items():  # the source key of each channel, for the runs that log it
            by_run = {mapping.get(r, r): v for r, v in by_run.items()}
            meta[f"{k}_key"] = [by_run.get(r) for r in meta[RUN].astype(str)]
    meta = _merge_meta(meta, _load_meta(user_meta), runs)
    if meta is not None and "source_file" not in meta.columns:
        meta = meta.assign(source_file=str(path))
    return RunSet.from_frames(data, meta, source=str(path), on_duplicate=on_duplicate)


def _reward_source(data: pd.DataFrame, reward_key: str, path) -> str:
    """The logged column ``--reward-key`` names: a key as logged, or the name the tables show it under
    (``reward_fn/acc`` for ``rewards/acc/mean``, W&B's ``train/reward`` for ``reward``); else a one-line
    error listing the keys it accepts."""
    from bayesgrpo.io._common import canonical_name, strip_train_prefix

    keys = [str(c) for c in data.columns if c not in (RUN, STEP, SOURCE_FILE, SOURCE_LINE)]
    if reward_key in keys:
        return reward_key
    for k in keys:
        if reward_key in (canonical_name(k), strip_train_prefix(k)) or k == strip_train_prefix(reward_key):
            return k
    shown = ", ".join(keys[:12]) + (" ..." if len(keys) > 12 else "")
    raise OptionError(f"--reward-key {reward_key!r} is not one of the logged keys of {path} ({shown})")


def _map_and_finish(data, meta, path, **kw) -> RunSet:
    reward_key = kw.pop("reward_key", None)
    reward_std = kw.pop("reward_std", None) or reward_std_definition(meta)  # the caller's, else the log's own
    data = numeric_columns(data)
    if reward_key:
        reward_key = _reward_source(data, reward_key, path)
    data, used = map_metric_columns(data, reward_key=reward_key, reward_std=reward_std)
    if REWARD not in data.columns:
        raw = [c for c in data.columns if c not in (RUN, STEP, SOURCE_FILE, SOURCE_LINE)]
        raise LogFormatError(
            f"{path}: no reward series found (logged keys: {', '.join(map(str, raw[:12]))}); expected a reward metric "
            "such as 'reward', 'critic/score/mean', 'mean_reward', or name it with --reward-key KEY "
            "(reward_key= in Python)"
        )
    return _finish(data, meta, path, used=used, **kw)


# ----------------------------------------------------------------------------- API
def read_runs(
    path, *, format: str | None = None, meta=None, run_id: str | None = None, on_duplicate: str = "last", **options
) -> RunSet:
    """Read one training log (or one run split over several files) into a :class:`RunSet`.

    Parameters
    ----------
    path : str or Path or sequence of them
        A log file, a Hugging Face / TRL output folder (its newest ``checkpoint-*/trainer_state.json``
        or its own ``trainer_state.json``, whichever reaches further: :func:`~bayesgrpo.io.trl.hf_trainer_state`;
        the run is named after the folder), a folder of TensorBoard event files, or a list of files of the **same run**
        (e.g. the parts of a resumed run), read in the given order (TensorBoard parts are ordered
        by wall time) so that later records win on overlapping steps.
    format : str, optional
        One of :data:`FORMATS`; detected with :func:`detect_format` when omitted.
    meta : str, Path, DataFrame or dict, optional
        Metadata CSV/JSON/Parquet file or frame (column ``run_id``; a single row without it applies
        to every run). Overrides the metadata found in the log (``max_steps``, ...).
    run_id : str, optional
        Run id to use. For a file holding several runs (W&B export, long CSV) it becomes a prefix:
        ``"<run_id>/<original id>"``. Default: derived from the file name.
    on_duplicate : {"last", "first", "error"}
        Steps logged twice (resumed runs): keep the later (default) or earlier record, with a
        :class:`~bayesgrpo.errors.DataWarning` naming the steps, or raise.
    **options
        Format-specific: ``reward_key`` (source metric to use as reward, all formats);
        ``reward_std`` (``"group"`` or ``"batch"``: what the TRL key ``reward_std`` measures -- the mean
        within-group std of TRL <= 0.26 or the batch std of TRL >= 0.27; default: the former unless a run
        proves the latter, see :mod:`bayesgrpo.schema`);
        ``logging_steps`` (``trl_console``: step interval when no step is printed);
        ``x`` (``wandb_csv``: per-run metric used as step instead of the first column, e.g. ``"_step"``).

    Raises
    ------
    LogFormatError
        Unreadable input (names the file, line/record and what was expected), or no usable
        reward series.
    """
    if isinstance(path, (list, tuple)):
        return _read_parts(
            [Path(p) for p in path], format=format, meta=meta, run_id=run_id, on_duplicate=on_duplicate, **options
        )
    p = Path(path)
    ts = hf_trainer_state(p) if format in (None, "trainer_state") else None
    if ts is not None:  # a Hugging Face / TRL output folder: its furthest trainer_state.json, one run named after it
        return read_runs(ts, format="trainer_state", meta=meta, run_id=run_id or p.resolve().name,
                         on_duplicate=on_duplicate, **options)  # fmt: skip
    fmt = format or detect_format(p)
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; use one of {FORMATS}")
    if not p.exists():
        raise LogFormatError(f"{p}: no such file or directory")
    reward_key = options.pop("reward_key", None)
    reward_std = _reward_std_option(options)
    data, found_meta = _reader(fmt)(p, **options)
    return _map_and_finish(
        data,
        found_meta,
        p,
        run_id=run_id,
        user_meta=meta,
        on_duplicate=on_duplicate,
        reward_key=reward_key,
        reward_std=reward_std,
        parts=p.is_dir(),
    )


def _reward_std_option(options: dict) -> str | None:
    from bayesgrpo.io._common import REWARD_STD_DEFINITIONS

    v = options.pop("reward_std", None)
    if v not in (None, *REWARD_STD_DEFINITIONS):
        raise ValueError(f"reward_std must be one of {REWARD_STD_DEFINITIONS} or None, got {v!r}")
    return v


def _read_parts(paths: list[Path], *, format, meta, run_id, on_duplicate, **options) -> RunSet:
    if not paths:
        raise ValueError("read_runs got an empty list of paths")
    fmts = {format or detect_format(p) for p in paths}
    if len(fmts) != 1:
        raise LogFormatError(
            f"the parts of one run must share a format; got {sorted(fmts)} for {[str(p) for p in paths]}"
        )
    fmt = fmts.pop()
    reward_key = options.pop("reward_key", None)
    reward_std = _reward_std_option(options)
    if fmt == "tensorboard":  # one reader for all the event files of the run
        from bayesgrpo.io.tensorboard import read_tensorboard

        data, found = read_tensorboard(paths, **options)
    else:
        frames, metas = [], []
        rid = run_id or _reader_default_id(paths[0])
        for p in paths:
            d, m = _reader(fmt)(p, **options)
            d = d.assign(**{RUN: rid if d[RUN].nunique() == 1 else d[RUN]})
            frames.append(d)
            if m is not None:
                metas.append(m.assign(**{RUN: rid}) if len(m) == 1 else m)
        data = pd.concat(frames, ignore_index=True)
        found = pd.concat(metas, ignore_index=True) if metas else None
        run_id = None  # the parts carry it
    return _map_and_finish(data, found, _parts_source(paths), run_id=run_id, user_meta=meta, on_duplicate=on_duplicate,
                           reward_key=reward_key, reward_std=reward_std, parts=True)  # fmt: skip


def _parts_source(paths: list[Path]) -> str:
    return str(paths[0]) if len(paths) == 1 else f"{paths[0]} (+{len(paths) - 1} more part file(s))"


def _reader_default_id(p: Path) -> str:
    from bayesgrpo.io._common import default_run_id

    return default_run_id(p)


def read_many(
    paths, *, format: str | None = None, meta=None, on_duplicate: str = "last", errors: str = "raise", **options
) -> RunSet:
    """Read several logs (each as :func:`read_runs`) into one :class:`RunSet` with unique run ids.

    Clashing run ids get a ``#2``, ``#3``, ... suffix (with a :class:`DataWarning`). ``meta`` is
    applied after concatenation (so it can describe runs of every file). ``errors="warn"``: a file
    that cannot be read is left out with a DataWarning carrying its one-line error, and the others are
    read (an option error, or no readable file at all, still raises).
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if errors not in ("raise", "warn"):
        raise ValueError(f"errors must be 'raise' or 'warn', got {errors!r}")
    sets, kept, failed = [], [], []
    for p in paths:
        try:
            sets.append(read_runs(p, format=format, on_duplicate=on_duplicate, **options))
            kept.append(p)
        except OptionError:
            raise
        except (LogFormatError, DataValidationError) as e:
            if errors == "raise":
                raise
            failed.append(e)
            warnings.warn(f"{e} -- this file is left out; the others are read", DataWarning, stacklevel=2)
    if failed and not sets:
        raise failed[0]
    paths = kept
    if not sets:
        raise ValueError("read_many got no paths")
    datas, metas, seen = [], [], set()
    for s, p in zip(sets, paths, strict=True):
        mapping = {}
        for r in s.run_ids:
            new, k = r, 1
            while new in seen:
                k += 1
                new = f"{r}#{k}"
            if new != r:
                warnings.warn(f"run id {r!r} of {p} already used; renamed to {new!r}", DataWarning, stacklevel=2)
            mapping[r] = new
            seen.add(new)
        datas.append(s.data.assign(**{RUN: s.data[RUN].map(mapping)}))
        metas.append(s.meta.rename(index=mapping))
    data = pd.concat(datas, ignore_index=True)
    m = pd.concat(metas)
    m.index.name = RUN
    m = m.reset_index()
    user = _load_meta(meta)
    if user is not None:
        m = _merge_meta(m, user, list(pd.unique(data[RUN])))
    return RunSet.from_frames(data, m, source=", ".join(str(p) for p in paths), on_duplicate="error")
