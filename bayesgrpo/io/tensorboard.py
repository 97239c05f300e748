"""TensorBoard event files (``events.out.tfevents.*``) through the optional ``tbparse`` package.

Scalars written by the HF Trainer's ``TensorBoardCallback`` have tags ``train/<key>`` (TRL keys,
e.g. ``train/reward``, ``train/rewards/<fn>``, ``train/kl``) and ``eval/<key>``; OpenRLHF writes
``train/<key>`` too. The ``train/`` prefix is removed before the usual key mapping. A resumed run
writes a new event file whose steps overlap the previous one: pass all files (a folder or a list)
and they are read in wall-time order, so the later file wins on overlapping steps.

**Several runs in one folder.** Each folder holding event files is one run -- except the folders the
HF Trainer makes for each (re)start of one run (``runs/<Mon DD_HH-MM-SS>_<host>/``), which are parts of
the run of their parent folder. So ``logs/a/`` and ``logs/b/`` are two runs (``logs/a``, ``logs/b``),
while ``out/runs/Feb18_08-06-13_host/`` and ``out/runs/Feb19_09-17-34_host/`` are two parts of one.
Within one run's folder(s), a file (in wall-time order) that starts again at or before the first step
of the run being read is another run (``<id>#2``, with a warning): a resumed part starts later.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bayesgrpo.errors import DataWarning, LogFormatError
from bayesgrpo.io._common import default_run_id, fmt_error, strip_train_prefix
from bayesgrpo.schema import RUN, SOURCE_FILE, STEP

__all__ = ["read_tensorboard"]


def _event_files(path) -> list[Path]:
    if isinstance(path, (list, tuple)):
        out = []
        for p in path:
            out.extend(_event_files(p))
        return out
    p = Path(path)
    if p.is_dir():
        return sorted(f for f in p.rglob("*") if f.is_file() and "tfevents" in f.name)
    return [p]


_HF_START = re.compile(r"^[A-Z][a-z]{2}\d{2}_\d{2}-\d{2}-\d{2}_.+$")


def _run_folder(f: Path) -> Path:
    """The folder that names the run of event file ``f`` (see module docstring)."""
    d = f.parent
    return d.parent if _HF_START.match(d.name) else d


def read_tensorboard(path: Path | Sequence[Path]):
    """Read scalar summaries of one run (one event file, a folder of them, or a list of files)."""
    try:
        from tbparse import SummaryReader
    except ImportError:
        raise LogFormatError(
            f"{path}: reading TensorBoard event files needs the optional package tbparse; "
            "install it with: pip install bayesgrpo[tensorboard]"
        ) from None
    files = _event_files(path)
    if not files:
        raise LogFormatError(f"{path}: no TensorBoard event files (events.out.tfevents.*) found")
    parts = []
    for f in files:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # tbparse uses deprecated pandas/tensorboard APIs
                s = SummaryReader(str(f), extra_columns={"wall_time"}).scalars
        except Exception as e:  # noqa: BLE001 - tbparse/tensorboard raise many types
            raise fmt_error(
                f, None, f"cannot read TensorBoard event file ({type(e).__name__}: {e}); expected TFRecord event data"
            ) from None
        if len(s):
            parts.append((float(s["wall_time"].min()), f, s))
    if not parts:
        names = ", ".join(f.name for f in files[:3])
        raise LogFormatError(
            f"{names if len(files) > 1 else files[0]}: no scalar summaries in the TensorBoard event file(s) "
            "(text-only?); expected scalars such as train/reward"
        )
    parts.sort(key=lambda t: t[0])
    root = Path(path) if isinstance(path, Path | str) else Path(".")  # a list of files has no root
    single = not isinstance(path, Path | str) or root.is_file()
    groups: dict[Path, list] = {}
    for t in parts:
        groups.setdefault(Path(".") if single else _run_folder(t[1]), []).append(t)
    if not single and len(groups) == 1:
        groups = {root: next(iter(groups.values()))}
    frames, metas = [], []
    for key, all_items in groups.items():
        if single:
            rid0 = default_run_id(files[0])
        elif key == root or len(groups) == 1:
            rid0 = root.name
        else:
            rel = key.relative_to(root) if key != root else Path(root.name)
            rid0 = f"{root.name}/{rel.as_posix()}"
        runs = _runs_of(all_items)
        if len(runs) > 1:
            warnings.warn(f"{key if not single else files[0].parent}: its event files hold {len(runs)} runs (a file that "
                          "starts again at the first step is another run, not a resumed part); read as "
                          f"{', '.join(repr(_nth(rid0, k)) for k in range(len(runs)))}", DataWarning,
                          stacklevel=3)  # fmt: skip
        for k, items in enumerate(runs):
            rid = _nth(rid0, k)
            frames.extend(_wide(items, rid))
            metas.append({RUN: rid, "n_event_files": len(items)})
    data = pd.concat(frames, ignore_index=True)
    data[STEP] = data[STEP].astype("int64")
    return data, pd.DataFrame(metas)


def _nth(rid: str, k: int) -> str:
    return rid if k == 0 else f"{rid}#{k + 1}"


def _runs_of(items: list) -> list[list]:
    """The event files of one folder (in wall-time order) split into runs: a file whose first step is
    not after the first step of the run being read starts another run (a resumed part starts later)."""
    runs: list[list] = []
    for t in items:
        first = int(t[2]["step"].min())
        if not runs or first <= int(runs[-1][0][2]["step"].min()):
            runs.append([t])
        else:
            runs[-1].append(t)
    return runs


def _wide(items: list, rid: str) -> list[pd.DataFrame]:
    """One wide frame (a row per step) per event file of run ``rid``."""
    frames = []
    for _, f, s in items:
        s = s.sort_values("wall_time", kind="stable").drop_duplicates(["step", "tag"], keep="last")
        wide = s.pivot(index="step", columns="tag", values="value").sort_index()
        wide.columns = [strip_train_prefix(str(c)) for c in wide.columns]
        wide = wide.reset_index().rename(columns={"step": STEP})
        wide[SOURCE_FILE] = str(f)
        wide[RUN] = rid
        frames.append(wide)
    return frames
