"""Reading a log's text, one rule for every importer: its bytes (gzip, also a gzip stream still being
written), its decoding (UTF-8, else Latin-1, said), the last line of a log still being written, and
delimited tables (the delimiter sniffed from the header, ``#`` comment lines, what was read said).

A log read while the trainer writes it ends in the middle of a line. A line whose end cannot be told
from its content (``runA,300,0.`` may be ``0.75`` a moment later) waits for its line break: it is
dropped with a :class:`~bayesgrpo.errors.DataWarning` (:func:`finished_lines`). Self-delimiting records
(a JSON object, a printed dict, a CSV line whose last field is closed by a quote) are read as soon as
they are whole.
"""

from __future__ import annotations

import csv
import json
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path

from bayesgrpo.errors import DataWarning
from bayesgrpo.io._common import fmt_error

__all__ = ["read_bytes", "read_text", "logical_suffix", "finished_lines", "json_lines", "Table", "read_table",
           "sniff_table"]  # fmt: skip

_BOM = b"\xef\xbb\xbf"


def logical_suffix(path: Path) -> str:
    """Lower-case suffix ignoring a trailing ``.gz`` (``runs.csv.gz`` -> ``.csv``)."""
    name = Path(path).name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    return Path(name).suffix


def read_bytes(path: Path, limit: int | None = None, *, warn: bool = True) -> bytes:
    """The file's bytes (at most ``limit``), a ``.gz`` file decompressed.

    A gzip stream that ends early (the file is still being written, or was cut) gives the bytes it
    holds, with a :class:`DataWarning` when ``warn``; bytes that are not gzip data are a one-line
    :class:`~bayesgrpo.errors.LogFormatError`.
    """
    path = Path(path)
    if not str(path).lower().endswith(".gz"):
        with open(path, "rb") as fh:
            return fh.read() if limit is None else fh.read(limit)
    data, size = path.read_bytes(), 0
    out: list[bytes] = []
    while data:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = d.decompress(data, 0 if limit is None else max(limit - size, 1))
        except zlib.error as e:
            if out:  # trailing garbage after a whole member, as gzip.open ignores it
                break
            raise fmt_error(path, None, f"not a readable gzip file ({e}); expected gzip-compressed text") from None
        out.append(chunk)
        size += len(chunk)
        if limit is not None and size >= limit:
            break
        if not d.eof:
            if warn:
                warnings.warn(f"{path}: the gzip stream ends early (still being written, or cut); read the "
                              f"{size:,} bytes it holds", DataWarning, stacklevel=3)  # fmt: skip
            break
        data = d.unused_data.lstrip(b"\0")
    raw = b"".join(out)
    return raw if limit is None else raw[:limit]


def decode(raw: bytes, path) -> str:
    """UTF-8 text of ``raw`` (a BOM dropped); bytes that are not UTF-8 make it Latin-1, with a warning
    naming the line. A character cut at the very end (a file being written) is left out."""
    if raw.startswith(_BOM):
        raw = raw[len(_BOM) :]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.end == len(raw) and e.reason == "unexpected end of data":  # the file ends inside a character
            return raw[: e.start].decode("utf-8", errors="replace")
        line = raw.count(b"\n", 0, e.start) + 1
        warnings.warn(f"{path}, line {line}: not UTF-8 (byte 0x{raw[e.start]:02x}); read the file as Latin-1",
                      DataWarning, stacklevel=3)  # fmt: skip
        return raw.decode("latin-1")


def read_text(path: Path) -> str:
    """Whole file as text (:func:`read_bytes`, :func:`decode`); ``\\r\\n`` kept as is."""
    return decode(read_bytes(path), path)


def finished_lines(text: str, path, *, what: str = "line", complete=None) -> str:
    """``text`` without a last line that has no line break yet (a log still being written, or cut),
    with a DataWarning naming it; ``complete(line)`` True keeps such a line (a self-delimiting record)."""
    if not text or text.endswith("\n"):
        return text
    cut = text.rfind("\n") + 1
    last = text[cut:]
    if not last.strip() or (complete is not None and complete(last.rstrip("\r"))):
        return text
    line = text.count("\n") + 1
    warnings.warn(f"{path}, line {line}: last {what} has no line break yet (still being written, or cut?); "
                  "dropped it", DataWarning, stacklevel=3)  # fmt: skip
    return text[:cut]


def json_lines(text: str, path, expected: str):
    """``(1-based line, parsed JSON)`` of each non-blank line of a JSON-lines text. A last line that is not
    valid JSON (a run cut off, or still being written) is dropped with a DataWarning; any other is a
    one-line LogFormatError saying ``expected``."""
    lines = text.split("\n")
    last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    for i, ln in enumerate(lines):
        if not ln.strip():
            continue
        try:
            obj = json.loads(ln)
        except ValueError as e:
            if i == last and i > 0:
                warnings.warn(f"{path}, line {i + 1}: incomplete last JSON line (run cut off, or still being "
                              "written?); dropped it", DataWarning, stacklevel=3)  # fmt: skip
                continue
            raise fmt_error(path, f"line {i + 1}", f"not valid JSON ({e}); expected {expected}") from None
        yield i + 1, obj


# ----------------------------------------------------------------------------- delimited tables
_DELIMITERS = {",": "comma", "\t": "tab", ";": "semicolon", "|": "vertical bar"}


def _fields(line: str, delimiter: str) -> list[str]:
    return next(csv.reader([line], delimiter=delimiter), [])


def _closed(line: str) -> bool:
    """A line whose last field is closed by a quote (every quote paired): whole without its line break."""
    return line.endswith('"') and line.count('"') % 2 == 0


def sniff_table(text: str, default: str) -> tuple[str, int, list[str]]:
    """``(delimiter, index of the header line, header fields)`` of a delimited table's text.

    Lines starting with ``#`` are comments; the header is the first other non-blank line; the
    delimiter is the one of ``, tab ; |`` that splits the header into the most fields (``default`` on
    a tie). (-1, []) for no header.
    """
    for i, ln in enumerate(text.split("\n")):
        s = ln.strip()
        if not s or s.startswith("#"):
            continue
        ln = ln.rstrip("\r")
        best, n = default, len(_fields(ln, default))
        for d in _DELIMITERS:
            k = len(_fields(ln, d))
            if k > n:
                best, n = d, k
        return best, i, [h.strip() for h in _fields(ln, best)]
    return default, -1, []


@dataclass(frozen=True)
class Table:
    """A delimited table's text as its reader parses it: comment lines blanked (line numbers kept), an
    unfinished last line dropped; its delimiter and header."""

    text: str
    delimiter: str
    header_line: int  # 0-based; -1: none
    header: list[str]

    def data_lines(self) -> list[int]:
        """1-based line numbers of the non-blank lines after the header (one per row read by pandas)."""
        return [i + 1 for i, ln in enumerate(self.text.split("\n")) if i > self.header_line and ln.strip()]


def read_table(path: Path, text: str | None = None, *, log: bool = True) -> Table:
    """:class:`Table` of a CSV / TSV file (``.tsv`` defaults to tabs, any other to commas; the header
    decides). What differs from the suffix's convention is said in one DataWarning naming the file.
    ``log`` False (a file nobody appends to: metadata) keeps a last line without its line break."""
    path = Path(path)
    text = read_text(path) if text is None else text
    default = "\t" if logical_suffix(path) == ".tsv" else ","
    delim, h, header = sniff_table(text, default)
    lines = text.split("\n")
    comments = [i for i, ln in enumerate(lines) if ln.lstrip().startswith("#")]
    for i in comments:
        lines[i] = ""
    text = "\n".join(lines)
    said = []
    if delim != default:
        said.append(f"read as {_DELIMITERS[delim]}-separated ({len(header)} columns: {', '.join(header[:6])}"
                    f"{' ...' if len(header) > 6 else ''})")  # fmt: skip
    if comments:
        said.append(f"skipped {len(comments)} comment line(s) starting with '#' (first: line {comments[0] + 1})")
    if said:
        warnings.warn(f"{path}: {'; '.join(said)}", DataWarning, stacklevel=3)
    if log and h >= 0 and text.count("\n") > h:  # a header line and more: the last line may be unfinished
        last = text[text.rfind("\n") + 1 :].rstrip("\r")
        n = len(_fields(last, delim)) if last.strip() else 0
        text = finished_lines(text, path, what=f"line ({n} of {len(header)} fields)",
                              complete=lambda ln: _closed(ln) and n == len(header))  # fmt: skip
    return Table(text, delim, h, header)
