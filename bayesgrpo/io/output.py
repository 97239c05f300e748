"""Writing results: tables by suffix, atomically, with output paths checked before any work is done.

* :func:`check_output_file` / :func:`check_output_dir` / :func:`check_output_names` -- validate an
  output path up front (the CLI calls them before reading or sampling, so a bad ``--out`` never
  costs a fit), and the files a verb will write into its folder (none may be a folder already);
* :func:`atomic_path` -- write to a temporary file beside the target and rename it into place, so a
* :func:`check_output_file` / :func:`check_output_dir` / :func:`check_output_names` -- validate an
  output path up front (the CLI calls them before reading or sampling, so a bad ``--out`` never
  costs a fit), and the files a verb will write into its folder (none may be a folder already);
* :func:`atomic_path` -- write to a temporary file beside the target and rename it into place, so a
  failure (or a Ctrl-C) never leaves a half-written file (the one atomic writer: every file the
  package writes goes through it; the file gets the permissions the user's umask gives a new file);
* :func:`write_table` -- a DataFrame as CSV, JSON (records) or Parquet, chosen by the suffix;
  any other suffix is refused; :func:`write_text`, :func:`save_figure` -- text and figures, atomically;
* :func:`safe_file_stem` / :func:`file_stems` -- a unique, safe, short file name for a run id
  (figures per run).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import tempfile
import unicodedata
from pathlib import Path

import pandas as pd

from bayesgrpo.errors import OutputError

__all__ = ["TABLE_SUFFIXES", "check_output_file", "check_output_dir", "check_output_names", "atomic_path",
           "write_table", "write_text", "save_figure", "safe_file_stem", "file_stems"]  # fmt: skip

#: suffix -> format of :func:`write_table`
TABLE_SUFFIXES = {".csv": "csv", ".json": "json", ".parquet": "parquet"}
_MAX_STEM = 80
_MAX_STEM_BYTES = 200  # file names are at most 255 bytes; room for suffixes such as _diagnosis.png


def _writable_dir(d: Path, what: str) -> None:
    """``d`` is a folder that exists and takes new files, or can be created under one that does.

    Tried for real (a temporary file is created and removed): permission bits do not tell, e.g. for
    root or in ``/proc``.
    """
    probe = d
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise OutputError(f"{what}: {probe} is a file, not a folder")
    try:
        with tempfile.TemporaryFile(dir=probe, prefix=".bayesgrpo-probe-"):
            pass
    except OSError as e:
        raise OutputError(f"{what}: cannot write into {probe} ({e.strerror or type(e).__name__})") from None


def check_output_file(path, *, option: str = "--out", suffixes=TABLE_SUFFIXES) -> Path:
    """Validate a table output path before any work: known suffix, not a folder, writable parent.

    Raises :class:`~bayesgrpo.errors.OutputError` with a one-line message naming the option.
    """
    p = Path(path)
    if p.suffix.lower() not in suffixes:
        raise OutputError(
            f"{option} {p}: unknown table format {p.suffix or '(no suffix)'!r}; use one of {', '.join(suffixes)}"
        )
    if p.exists() and p.is_dir():
        raise OutputError(f"{option} {p}: is a folder; give a file name such as {p / ('table' + next(iter(suffixes)))}")
    _writable_dir(p.parent if str(p.parent) else Path("."), f"{option} {p}")
    return p


def check_output_dir(path, *, option: str = "--plot") -> Path:
    """Validate a folder for figures / reports before any work (may not exist yet; never a file)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise OutputError(f"{option} {p}: is a file; give a folder")
    _writable_dir(p, f"{option} {p}")
    return p


def check_output_names(folder, names, *, option: str = "--out-dir") -> None:
    """Before any work: none of the files a verb will write into ``folder`` is a folder already.

    Raises :class:`~bayesgrpo.errors.OutputError` naming the option, the folder and the file.
    """
    d = Path(folder)
    for name in names:
        p = d / name
        if p.is_dir():
            raise OutputError(f"{option} {d}: {name} is a folder where the output file {name} goes; "
                              "move it away or give another --out-dir")  # fmt: skip


def file_stems(run_ids) -> dict:
    """``{run_id: safe_file_stem}`` for every run, unique among them (the names figures are written under)."""
    taken: set[str] = set()
    return {rid: safe_file_stem(rid, taken) for rid in run_ids}


@contextlib.contextmanager
def atomic_path(path, *, durable: bool = False):
    """Yield a temporary path beside ``path``; on success rename it to ``path``, on failure delete it.

    ``durable``: flush the file to disk before the rename (a cache entry that must survive a crash).

    The temporary file is created with the mode every other file gets (``0o666`` less the umask; not
    ``mkstemp``'s 0600), so the file in place has the permissions a plain write would give it.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = p.parent / f".{p.name}.{secrets.token_hex(6)}.tmp"
        try:
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            break
        except FileExistsError:  # pragma: no cover - 48 random bits
            continue
    try:
        yield Path(tmp)
        if durable:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_table(df: pd.DataFrame, path) -> Path:
    """Write ``df`` in the format its suffix names (:data:`TABLE_SUFFIXES`), atomically."""
    p = check_output_file(path)
    fmt = TABLE_SUFFIXES[p.suffix.lower()]
    with atomic_path(p) as tmp:
        if fmt == "csv":
            df.to_csv(tmp, index=False)
        elif fmt == "json":
            df.to_json(tmp, orient="records", indent=2)
        else:
            df.to_parquet(tmp, index=False)
    return p


def write_text(path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    p = Path(path)
    with atomic_path(p) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return p


def save_figure(fig, path, *, dpi: int = 110) -> Path:
    """Save a matplotlib figure atomically, in the format its suffix names (default PNG)."""
    p = Path(path)
    with atomic_path(p) as tmp:
        fig.savefig(tmp, dpi=dpi, format=p.suffix.lstrip(".").lower() or "png")
    return p


def safe_file_stem(run_id: str, taken: set[str] | None = None) -> str:
    """A file-name stem for a run id: letters and digits of any script, ``.``, ``-`` and ``_`` only
    (``模型-运行`` stays ``模型-运行``; a path separator or a space becomes ``_``), never hidden, at most
    80 characters and 200 UTF-8 bytes, and unique within ``taken`` (distinct ids that map to the same
    characters get a short hash).

    ``taken`` (if given) is updated with the returned stem.
    """
    text = unicodedata.normalize("NFC", str(run_id))
    s = re.sub(r"[^\w.-]+", "_", text).strip("._") or "run"
    digest = hashlib.sha1(str(run_id).encode()).hexdigest()[:8]
    if len(s) > _MAX_STEM or len(s.encode()) > _MAX_STEM_BYTES:
        s = s[: _MAX_STEM - 9]
        while len(s.encode()) > _MAX_STEM_BYTES - 9:
            s = s[:-1]
        s = f"{s}-{digest}"
    if taken is not None:
        if s in taken:
            s = f"{s[: _MAX_STEM - 9]}-{digest}"
        taken.add(s)
    return s
