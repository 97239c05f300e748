"""OpenRLHF console logs: the ``Global step N: {...}`` lines of its PPO/GRPO trainers.

OpenRLHF's Ray trainers log one line per optimizer step through their ``openrlhf`` logger
(``openrlhf/trainer/ppo_trainer*.py``: ``logger.info(f"✨ Global step {global_step}: {log_status}")``),
formatted as ``INFO 03-05 12:34:56 ppo_trainer.py:123] ✨ Global step 12: {'policy_loss': ..., ...}``
and usually prefixed by Ray with ``(TrainingActor pid=NNN)`` (plus ANSI colour codes, ``\\r``).
The dict is a Python repr: floats, ints, ``None``, bare ``nan``/``inf`` and, from NumPy 2,
``np.float64(x)`` reprs are accepted. Keys are the trainer's status keys (``reward``, ``return``,
``response_length``, ``kl``, ``policy_loss``, ``actor_lr``, ``rollout/reward_mean``, ...) and map
onto the schema through :data:`bayesgrpo.io._common.ALIASES` (``reward`` first, else
``rollout/reward_mean``; ``response_length`` / ``rollout/response_length_mean`` ->
``completion_length``). ``eval_*`` keys become ``eval/<name>``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from bayesgrpo.io._common import last_line_index, num, single_run_frame, unparsable_line
from bayesgrpo.io._text import read_text
from bayesgrpo.schema import SOURCE_LINE, STEP

__all__ = ["read_openrlhf_console", "OPENRLHF_LINE"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: what marks an OpenRLHF metrics line (also used by format detection)
OPENRLHF_LINE = re.compile(r"Global step (\d+): (\{.*)$")
_BARE_NONFINITE = re.compile(r"(:\s*)(-?(?:nan|inf))(?=\s*[,}])")
_WRAPPED = re.compile(r"\b(?:np|numpy)\.\w+\(\s*([^()]*?)\s*\)|\btensor\(\s*([^(),]*?)\s*(?:,[^()]*)?\)")


def _literal(s: str) -> dict:
    s = _WRAPPED.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), s)
    s = _BARE_NONFINITE.sub(r"\1'\2'", s)
    d = ast.literal_eval(s)
    if not isinstance(d, dict) or not all(isinstance(k, str) for k in d):
        raise ValueError("not a dict of metric name -> value")
    return d


def read_openrlhf_console(path: Path):
    """Read the ``Global step N: {...}`` metric lines of an OpenRLHF console log.

    Parameters
    ----------
    path : Path
        Console output of an OpenRLHF PPO/GRPO run (Ray-prefixed lines are fine).

    Returns
    -------
    (data, meta) : tuple of pandas.DataFrame
        One row per metric line (``step`` = the global step, ``source_line`` = 1-based line).

    Raises
    ------
    LogFormatError
        No metric line, or a metric line whose dict cannot be parsed (except the file's last
        line, which is dropped with a :class:`~bayesgrpo.errors.DataWarning` when cut off).

    Examples
    --------
    >>> from bayesgrpo.io import read_runs
    >>> rs = read_runs("openrlhf_train.log")   # doctest: +SKIP
    >>> rs.data[["step", "reward"]].head()     # doctest: +SKIP
    """
    path = Path(path)
    text = read_text(path)
    lines = text.split("\n")
    last_idx = last_line_index(lines)
    recs = []
    for i, raw in enumerate(lines):
        if "Global step" not in raw:
            continue
        ln = _ANSI.sub("", raw).rstrip("\r").rstrip()
        m = OPENRLHF_LINE.search(ln)
        if not m:
            continue
        try:
            d = _literal(m.group(2))
        except (ValueError, SyntaxError) as e:
            unparsable_line(path, i, last_idx, f"cannot parse the metrics dict after 'Global step {m.group(1)}:' "
                            f"({type(e).__name__}); expected a Python dict repr like {{'reward': 0.5, 'kl': 0.01, ...}}")  # fmt: skip
            continue
        rec = {k: num(v) for k, v in d.items() if not isinstance(v, (dict, list, tuple))}
        rec[STEP] = int(m.group(1))
        rec[SOURCE_LINE] = i + 1
        recs.append(rec)
    return single_run_frame(
        recs,
        path,
        empty="no OpenRLHF metric line ('Global step N: {...}') found; expected OpenRLHF trainer console output",
        framework="openrlhf",
    )
