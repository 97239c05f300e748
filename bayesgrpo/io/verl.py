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

__all__ = ["read_verl_console", "read_verl_jsonl", "verl_config_meta"]

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


def _at(config, path: str):
    """``config["a"]["b"]...`` for ``path`` ``"a.b..."`` (None where any level is missing)."""
    cur = config
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _positive(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def verl_config_meta(config: dict | None) -> dict:
    """Run metadata (schema :data:`~bayesgrpo.schema.META_FIELDS`) from a verl trainer configuration (the dict
    verl's ``Tracking`` receives: ``OmegaConf.to_container(config, resolve=True)``).

    ``max_steps``: ``trainer.total_training_steps``, else the total verl's trainer writes into the actor's
    optimiser configuration (``actor_rollout_ref.actor.optim.total_training_steps``) before training; ``group_size``:
    ``actor_rollout_ref.rollout.n``; ``learning_rate``, ``beta1``: the actor's optimiser; ``batch_size``: the
    completions of one step (``data.train_batch_size`` prompts x ``n``); ``algorithm``: ``algorithm.adv_estimator``.
    A logged verl step is one generation (refresh interval 1).

    Examples
    --------
    >>> verl_config_meta({"trainer": {"total_training_steps": 300}, "data": {"train_batch_size": 64},
    ...                   "actor_rollout_ref": {"rollout": {"n": 8}, "actor": {"optim": {"lr": 1e-6}}},
    ...                   "algorithm": {"adv_estimator": "grpo"}})
    {'max_steps': 300, 'group_size': 8, 'learning_rate': 1e-06, 'batch_size': 512, 'algorithm': 'grpo'}
    """
    out: dict = {}
    if not isinstance(config, dict):
        return out
    ms = _positive(_at(config, "trainer.total_training_steps")) or _positive(
        _at(config, "actor_rollout_ref.actor.optim.total_training_steps")
    )
    if ms is not None:
        out["max_steps"] = int(ms)
    n = _positive(_at(config, "actor_rollout_ref.rollout.n"))
    if n is not None:
        out["group_size"] = int(n)
    lr = _positive(_at(config, "actor_rollout_ref.actor.optim.lr"))
    if lr is not None:
        out["learning_rate"] = lr
    betas = _at(config, "actor_rollout_ref.actor.optim.betas")
    if isinstance(betas, (list, tuple)) and betas and isinstance(betas[0], (int, float)) and 0 <= betas[0] < 1:
        out["beta1"] = float(betas[0])
    bs = _positive(_at(config, "data.train_batch_size"))
    if bs is not None:
        out["batch_size"] = int(bs) * out.get("group_size", 1)
    alg = _at(config, "algorithm.adv_estimator")
    if isinstance(alg, str) and alg:
        out["algorithm"] = alg
    return out
