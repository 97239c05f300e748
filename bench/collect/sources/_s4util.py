"""Helpers for scout4's source modules (not a source: the builder skips modules whose name starts with ``_``).

:func:`wandb_history` reads the history rows of a W&B run file (``run-<id>.wandb``, the transaction log an
offline or online run writes next to ``files/``) without the ``wandb`` package: the file is a LevelDB-style log
(a 7-byte header ``:W&B`` + magic 0xBEE1 + version, then 32 KiB blocks of records, each with a 7-byte header
``crc32 (4) | length (2) | type (1)``, type 1 full, 2 first, 3 middle, 4 last); every record is a protobuf
``wandb_internal.Record`` whose field 2 is a ``HistoryRecord`` (field 1: repeated ``HistoryItem`` with ``key`` =
field 1, ``nested_key`` = field 2, ``value_json`` = field 16; field 2: ``HistoryStep`` with ``num`` = field 1).
Only the values are decoded (JSON numbers); nothing is written.
"""

from __future__ import annotations

import json
import struct

_BLOCK = 32768
_HDR = 7


def _records(data: bytes) -> list[bytes]:
    if data[:4] != b":W&B":
        raise ValueError("not a W&B run file")
    out, pos, buf = [], _HDR, b""
    while pos + _HDR <= len(data):
        left = _BLOCK - (pos % _BLOCK)
        if left < _HDR:  # block trailer padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + _HDR])
        if kind == 0 and length == 0:  # zero padding up to the block end
            pos += left
            continue
        payload = data[pos + _HDR : pos + _HDR + length]
        pos += _HDR + length
        if kind == 1:
            out.append(payload)
        elif kind == 2:
            buf = payload
        elif kind == 3:
            buf += payload
        elif kind == 4:
            out.append(buf + payload)
            buf = b""
        else:
            raise ValueError(f"bad record type {kind} at {pos}")
    return out


def _varint(b: bytes, i: int) -> tuple[int, int]:
    shift = val = 0
    while True:
        c = b[i]
        i += 1
        val |= (c & 0x7F) << shift
        if not c & 0x80:
            return val, i
        shift += 7


def _fields(b: bytes) -> list[tuple[int, int, object]]:
    """(field number, wire type, value) of a protobuf message: varints as int, length-delimited as bytes."""
    out, i = [], 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 1:
            v, i = b[i : i + 8], i + 8
        elif wt == 2:
            n, i = _varint(b, i)
            v, i = b[i : i + n], i + n
        elif wt == 5:
            v, i = b[i : i + 4], i + 4
        else:
            raise ValueError(f"wire type {wt}")
        out.append((num, wt, v))
    return out


def wandb_history(data: bytes) -> list[dict]:
    """The history rows of a ``.wandb`` run file, in file order: {key: value} with the numeric values only
    (``_step`` included when logged); ``_hstep`` is the HistoryRecord's own step number when present."""
    rows = []
    for rec in _records(data):
        for num, wt, val in _fields(rec):
            if num != 2 or wt != 2:
                continue
            row: dict = {}
            for hnum, hwt, hval in _fields(val):
                if hnum == 1 and hwt == 2:
                    key, nested, vjson = None, [], None
                    for inum, iwt, ival in _fields(hval):
                        if inum == 1 and iwt == 2:
                            key = ival.decode()
                        elif inum == 2 and iwt == 2:
                            nested.append(ival.decode())
                        elif inum == 16 and iwt == 2:
                            vjson = ival.decode()
                    name = key if key is not None else "/".join(nested)
                    try:
                        v = json.loads(vjson) if vjson is not None else None
                    except json.JSONDecodeError:
                        v = None
                    if isinstance(v, (int, float)) and not isinstance(v, bool):
                        row[name] = v
                elif hnum == 2 and hwt == 2:
                    for snum, swt, sval in _fields(hval):
                        if snum == 1 and swt == 0:
                            row["_hstep"] = sval
            if row:
                rows.append(row)
    return rows


def wandb_run_name(data: bytes) -> str | None:
    """The display name of a ``.wandb`` run file (``Record.run`` = field 17, ``RunRecord.display_name`` = 8)."""
    for rec in _records(data):
        for num, wt, val in _fields(rec):
            if num == 17 and wt == 2:
                for rnum, rwt, rval in _fields(val):
                    if rnum == 8 and rwt == 2:
                        return rval.decode()
    return None
