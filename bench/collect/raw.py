"""The raw bytes of a file committed to a public repository, at a commit.

Collected runs are parsed by a script from the file as committed upstream; the file itself is never
committed here. It is read from the local snapshot the ``fetch`` tool brings
(``/work/.mirror/<owner>+<name>/``, a bare git directory: ``git show COMMIT:PATH``), or from a cache of
files saved by hand (``$BAYESGRPO_COLLECT_CACHE``, default ``/work/.cache/bayesgrpo-collect``, laid out
as ``<owner>+<name>/<commit>/<path>``). Every read file's sha256 is recorded in the collected metadata
(``source_sha256``), so a rebuild proves it parsed the same bytes.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import subprocess
from functools import cache
from pathlib import Path

MIRROR = Path(os.environ.get("BAYESGRPO_MIRROR", "/work/.mirror"))
CACHE = Path(os.environ.get("BAYESGRPO_COLLECT_CACHE", "/work/.cache/bayesgrpo-collect"))

#: sha256 of every file read in this process: (repo, commit, path) -> hex digest
READ: dict[tuple[str, str, str], str] = {}


class RawMissing(FileNotFoundError):
    """The file is neither in a fetched snapshot nor in the cache."""


@cache
def git_dir(repo: str) -> Path | None:
    """The git directory of the fetched snapshot of ``repo`` (``owner/name``), if any."""
    root = MIRROR / repo.replace("/", "+")
    if not root.is_dir():
        return None
    for cand in [root, *sorted(p.parent for p in root.rglob("HEAD"))]:
        if (cand / "objects").is_dir() and (cand / "HEAD").is_file():
            return cand
    return None


def read(repo: str, commit: str, path: str) -> bytes:
    """The bytes of ``path`` at ``commit`` of ``repo``; a ``.gz`` file is returned decompressed."""
    cached = CACHE / repo.replace("/", "+") / commit / path
    if cached.is_file():
        data = cached.read_bytes()
    else:
        gd = git_dir(repo)
        if gd is None:
            raise RawMissing(f"{repo}@{commit[:10]}:{path}: fetch the repository (fetch tool) or save it to {cached}")
        out = subprocess.run(["git", f"--git-dir={gd}", "show", f"{commit}:{path}"], capture_output=True, check=False)
        if out.returncode != 0:
            raise RawMissing(f"{repo}@{commit[:10]}:{path}: {out.stderr.decode(errors='replace').strip()}")
        data = out.stdout
    READ[(repo, commit, path)] = hashlib.sha256(data).hexdigest()
    return gzip.decompress(data) if path.endswith(".gz") else data


def text(repo: str, commit: str, path: str) -> str:
    """:func:`read` decoded as UTF-8 (undecodable bytes replaced)."""
    return read(repo, commit, path).decode("utf-8", errors="replace")


def ls(repo: str, commit: str, under: str = "") -> list[str]:
    """Every file path of the snapshot at ``commit`` below ``under`` (needs the fetched snapshot)."""
    gd = git_dir(repo)
    if gd is None:
        raise RawMissing(f"{repo}: not fetched")
    args = ["git", f"--git-dir={gd}", "ls-tree", "-r", "--name-only", commit]
    if under:
        args.append(under)
    return subprocess.run(args, capture_output=True, check=True, text=True).stdout.splitlines()
