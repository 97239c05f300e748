"""A minimal reader of a committed W&B run file (``wandb/run-*/run-<id>.wandb``), without the wandb package.

Not a source (the builder skips modules whose name starts with ``_``). Some repositories commit their
``wandb/`` directory; its ``run-<id>.wandb`` is W&B's own datastore: a 7-byte header (``:W&B``, magic,
version), then LevelDB-log framing (32 KiB blocks; each chunk has a 4-byte CRC, 2-byte length and 1-byte
type: full / first / middle / last) around serialized ``wandb_internal.Record`` protobufs. A history
row is ``Record.history`` (field 2), a ``HistoryRecord`` whose ``item`` (field 1) entries are
``HistoryItem``s with the key in ``key`` (1) or ``nested_key`` (2, joined with ``/``) and the value as
JSON text in ``value_json`` (16). The CRCs are not checked (git already guarantees the bytes).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator

import pandas as pd

_BLOCK = 32768


def _records(data: bytes) -> Iterator[bytes]:
    if data[:4] != b":W&B":
        raise ValueError("not a W&B datastore file")
    pos, buf = 7, b""
    while pos + 7 <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < 7:  # block trailer
            pos += left
            continue
        _crc, length, typ = struct.unpack("<IHB", data[pos : pos + 7])
        if typ == 0 and length == 0:  # zero padding to the block end
            pos += left
            continue
        frag = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if typ == 1:
            yield frag
        elif typ == 2:
            buf = frag
        elif typ == 3:
            buf += frag
        elif typ == 4:
            yield buf + frag
            buf = b""


def _varint(b: bytes, i: int) -> tuple[int, int]:
    r = s = 0
    while True:
        x = b[i]
        i += 1
        r |= (x & 0x7F) << s
        s += 7
        if not x & 0x80:
            return r, i


def _fields(b: bytes) -> list[tuple[int, int, object]]:
    i, out = 0, []
    while i < len(b):
        key, i = _varint(b, i)
        f, w = key >> 3, key & 7
        if w == 0:
            v, i = _varint(b, i)
        elif w == 2:
            n, i = _varint(b, i)
            v = b[i : i + n]
            i += n
        elif w == 1:
            v, i = b[i : i + 8], i + 8
        elif w == 5:
            v, i = b[i : i + 4], i + 4
        else:
            raise ValueError(f"protobuf wire type {w}")
        out.append((f, w, v))
    return out


def history(data: bytes) -> list[dict]:
    """Every history row of the run file, in write order, as ``{key: value}`` (values JSON-decoded)."""
    rows = []
    for rec in _records(data):
        for f, w, v in _fields(rec):
            if f != 2 or w != 2:
                continue
            row = {}
            for f2, w2, item in _fields(v):
                if f2 != 1 or w2 != 2:
                    continue
                parts = _fields(item)
                key = [p.decode() for f3, w3, p in parts if f3 in (1, 2) and w3 == 2]
                val = [p for f3, w3, p in parts if f3 == 16 and w3 == 2]
                if key and val:
                    row["/".join(key)] = json.loads(val[0])
            rows.append(row)
    return rows


def scalar_table(data: bytes) -> pd.DataFrame:
    """The history rows as a table of their scalar (int / float) values only."""
    rows = [
        {k: v for k, v in r.items() if isinstance(v, int | float) and not isinstance(v, bool)} for r in history(data)
    ]
    return pd.DataFrame(rows)
