"""verl logs: console logger lines and the file logger's JSONL.

Console: one line per step, ``step:<int> - key:value - key:value ...`` (separator ``" - "``,
key/value split at the first ``:``), possibly prefixed by ANSI colour codes and a Ray prefix
``(TaskRunner pid=NNN)`` / ``(main_task pid=NNN)``. Values are full-precision reprs (current verl,
also ``np.float64(0.1)``) or 3-decimal numbers (old verl); non-numeric values are skipped.
``Total training steps: N`` (printed at each start) is the run's ``max_steps``.
Validation metrics inside the step line (``val-core/<src>/<key>/mean@N``, ``val/test_score/<src>``)
become ``eval/<...>``. ``critic/score/mean`` (else ``critic/rewards/mean``) -> ``reward``.

JSONL (``trainer.logger=['file']``): ``{"step": N, "data": {metric: value, ...}}`` per line
(orjson: NaN -> ``null``; a newer variant adds ``elapsed_seconds``).
"""

from __future__ import annotations

import re
from pathlib import Path

from bayesgrpo.io._common import fmt_error, last_line_index, num, single_run_frame, unparsable_line
from bayesgrpo.io._text import finished_lines, json_lines, read_text
from bayesgrpo.schema import SOURCE_LINE, STEP

__all__ = ["read_verl_console", "read_verl_jsonl"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_STEP_LINE = re.compile(r"(?:^|[\s)\]])step:(\d+) - (.*)$")
_KEY = re.compile(r"^[A-Za-z0-9_@.\-/\[\]]+$")
_TOTAL_STEPS = re.compile(r"Total training steps: (\d+)")  # verl's RayPPOTrainer prints it at the start


def read_verl_console(path: Path):
    """Read the ``step:N - key:value - ...`` lines of a verl console log (see module docstring).

    A metric line cut off at the end of the file (run killed while printing) is dropped with a
    :class:`~bayesgrpo.errors.DataWarning`; a malformed metric line elsewhere raises.
    """
    path = Path(path)
    # 'key:0.5' may be 'key:0.55' a moment later: a metric line waits for its line break
    text = finished_lines(read_text(path), path, what="metric line", complete=lambda ln: "step:" not in ln)
    lines = text.split("\n")
    recs = []
    last_idx = last_line_index(lines)
    for i, raw in enumerate(lines):
        if "step:" not in raw:
            continue
        ln = _ANSI.sub("", raw).rstrip("\r")
        m = _STEP_LINE.search(ln)
        if not m:
            continue
        rec = {STEP: int(m.group(1)), SOURCE_LINE: i + 1}
        bad = None
        for part in m.group(2).split(" - "):
            key, sep, val = part.partition(":")
            key = key.strip()
            if not sep or not _KEY.match(key):
                bad = part
                break
            v = num(val.strip())
            if isinstance(v, float) or key in ("critic/score/mean", "critic/rewards/mean"):
                rec[key] = v
        if bad is not None:
            unparsable_line(path, i, last_idx, f"malformed verl metric field {bad[:60]!r}; expected 'key:value' "
                            "fields separated by ' - '")  # fmt: skip
            continue
        recs.append(rec)
    totals = _TOTAL_STEPS.findall(text)  # the trainer's planned length (the last start's, for a resumed run)
    return single_run_frame(
        recs, path, empty="no verl metric line ('step:N - key:value - ...') found; expected verl console logger output",
        **({"max_steps": int(totals[-1])} if totals and int(totals[-1]) > 0 else {}),
    )  # fmt: skip


def read_verl_jsonl(path: Path):
    """Read a verl file-logger JSONL (``{"step": N, "data": {...}}`` per line); an incomplete last line
    (a run cut off, or still being written) is dropped with a DataWarning."""
    path = Path(path)
    recs = []
    for i, obj in json_lines(read_text(path), path, '{"step": N, "data": {...}} per line'):
        if not isinstance(obj, dict) or "step" not in obj or not isinstance(obj.get("data"), dict):
            raise fmt_error(path, f"line {i}", 'expected a record {"step": N, "data": {...}}')
        st = num(obj["step"])
        if not isinstance(st, float) or st != st:
            raise fmt_error(path, f"line {i}", f"step {obj['step']!r} is not a number")
        rec = {k: v for k, v in obj["data"].items() if not isinstance(v, (dict, list))}
        if "elapsed_seconds" in obj:
            rec["elapsed_seconds"] = obj["elapsed_seconds"]
        rec[STEP] = int(st)
        rec[SOURCE_LINE] = i
        recs.append(rec)
    return single_run_frame(recs, path, empty="empty file; expected verl file-logger JSON lines")
