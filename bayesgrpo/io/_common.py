"""Helpers shared by the importers: number parsing, metric-name mapping, errors, run ids."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.errors import LogFormatError
from bayesgrpo.schema import REWARD, RUN, SOURCE_FILE, SOURCE_LINE, STEP

# ----------------------------------------------------------------------------- numbers
_MISSING_STR = {"", "nan", "-nan", "none", "null", "no log", "n/a", "na"}
_NP_WRAPPER = re.compile(r"^(?:np\.|numpy\.)?(?:float|int)\d*\((.*)\)$")


def num(v):
    """Convert one logged value to ``float``.

    Accepts numbers, numeric strings (transformers 5 prints ``'0.2221'``), ``np.float64(0.1)``
    reprs (verl with NumPy 2), ``nan``/``inf`` spellings, ``None``/``null``/``No Log``/empty
    (-> NaN) and booleans. Anything else is returned unchanged (a string), so callers can decide
    whether a non-numeric value is an error (the reward) or a free-form tag (kept as it is).
    """
    if v is None:
        return math.nan
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    if isinstance(v, str):
        s = v.strip()
        if s.lower() in _MISSING_STR:
            return math.nan
        m = _NP_WRAPPER.match(s)
        if m:
            s = m.group(1).strip()
        try:
            return float(s)  # handles inf, -inf, Infinity, 1e-05, ...
        except ValueError:
            return v
    return v


def is_bad_number(v) -> bool:
    """True when ``num(v)`` could not make a number of ``v``."""
    return not isinstance(num(v), float)


# ----------------------------------------------------------------------------- metric names
# Canonical schema metric -> source names, in priority order. The first name present in a run's
# columns is renamed to the canonical name; the other aliases are kept under their own names.
ALIASES: dict[str, tuple[str, ...]] = {
    REWARD: (
        "reward",  # TRL (all versions), OpenRLHF train/reward
        "critic/score/mean",  # verl sequence score
        "critic/rewards/mean",  # verl (after in-reward KL penalty)
        "rollout/reward_mean",  # OpenRLHF
        "mean_reward",  # from-scratch loops (AxiomForgeAI)
        "reward_mean",
        "avg_reward",
        "rewards/mean",
        "Reward",  # MiniMind text lines
        "success_rate",  # from-scratch loops whose reward is a 0/1 success (KardeniaPoyu)
    ),
    "reward_std": ("reward_std", "rollout/reward_std", "std_reward", "reward/std", "reward_std_mean"),
    "kl": ("kl", "actor/kl_loss", "actor/reward_kl_penalty", "critic/kl", "kl_div", "KL_ref", "kl_ref"),
    "entropy": ("entropy", "actor/entropy", "actor/entropy_loss", "policy_entropy"),
    "completion_length": (
        "completions/mean_length",  # TRL >= 0.17
        "completion_length",  # TRL <= 0.16, Unsloth legacy key
        "response_length/mean",  # verl
        "rollout/response_length_mean",  # OpenRLHF
        "response_length",  # OpenRLHF
        "Avg Len",  # MiniMind
    ),
    "frac_reward_zero_std": ("frac_reward_zero_std", "frac_zero_reward_std"),  # 2nd: an older TRL spelling
}
# TRL writes the legacy key next to the new one (Unsloth); it duplicates the chosen one -> drop.
_DROP_IF_SHADOWED = {"completion_length": ("completion_length",)}

_REWARD_FN = re.compile(r"^rewards/(?P<fn>[^/]+)(?:/mean)?$")
_EVAL_PREFIXES = (("eval_", ""), ("eval/", ""), ("val-core/", ""), ("val-aux/", "aux/"), ("val/", ""))


def canonical_name(key: str) -> str | None:
    """Name a *non-aliased* metric key takes in the schema (reward functions, eval metrics)."""
    m = _REWARD_FN.match(key)
    if m and m.group("fn") not in ("mean", "std", "min", "max"):
        return f"reward_fn/{m.group('fn')}"
    for pre, sub in _EVAL_PREFIXES:
        if key.startswith(pre) and len(key) > len(pre):
            return f"eval/{sub}{key[len(pre) :]}"
    return None


def map_metric_columns(df: pd.DataFrame, *, reward_key: str | None = None) -> tuple[pd.DataFrame, dict[str, str]]:
    """Rename source metric columns of ``df`` onto the schema (see :data:`ALIASES`).

    Returns the renamed frame and the mapping ``{schema name: source name}`` that was applied.
    ``reward_key`` forces the source column used as ``reward``.
    """
    protected = {RUN, STEP, SOURCE_FILE, SOURCE_LINE}
    cols = [c for c in df.columns if c not in protected]
    rename: dict[str, str] = {}
    used: dict[str, str] = {}
    drop: list[str] = []
    for canon, names in ALIASES.items():
        cands = (reward_key,) if (canon == REWARD and reward_key) else names
        src = next((n for n in cands if n in cols), None)
        if src is None:
            continue
        used[canon] = src
        if src != canon:
            if canon in cols:
                # a column already carries the canonical name but is not the chosen source
                if canon in _DROP_IF_SHADOWED.get(canon, ()):
                    drop.append(canon)
                else:
                    rename[canon] = f"{canon}_orig"
            rename[src] = canon
    for c in cols:
        if c in rename or c in drop:
            continue
        new = canonical_name(c)
        if new and new not in cols and new not in rename.values():
            rename[c] = new
    out = df.drop(columns=drop).rename(columns=rename)
    return out, used


# ----------------------------------------------------------------------------- errors / ids
def fmt_error(path, where: str | None, what: str) -> LogFormatError:
    """A one-line :class:`LogFormatError`: ``<file>[, <where>]: <what>``."""
    loc = f"{path}" + (f", {where}" if where else "")
    return LogFormatError(f"{loc}: {' '.join(str(what).split())}")


def line_of(text: str, pos: int) -> int:
    """1-based line number of character offset ``pos`` in ``text`` (lines split at ``\\n``)."""
    return text.count("\n", 0, pos) + 1


_GENERIC_STEMS = {
    "trainer_state",
    "metrics",
    "log",
    "logs",
    "train",
    "training",
    "output",
    "stdout",
    "runs",
    "events",
    "verl_demo",
    "reward",
}
_SUFFIXES = (".jsonl", ".json", ".csv", ".tsv", ".log", ".txt", ".out", ".ipynb", ".parquet", ".pq")


def default_run_id(path: Path) -> str:
    """Run id from a file name: the name without its extension, or the folder name when generic."""
    path = Path(path)
    name = path.name
    if "tfevents" in name:
        return path.parent.name or name
    if name.lower().endswith(".gz"):  # trainer_state.json.gz is named like trainer_state.json
        name = name[:-3]
    for suf in _SUFFIXES:
        if name.lower().endswith(suf):
            name = name[: -len(suf)]
            break
    if name.lower() in _GENERIC_STEMS and path.parent.name:
        parent = path.parent
        if re.fullmatch(r"checkpoint-\d+", parent.name) and parent.parent.name:
            return f"{parent.parent.name}/{parent.name}"
        return parent.name
    return name


def open_binary(path: Path):
    """Open a file for reading bytes, transparently decompressing ``.gz``."""
    if str(path).lower().endswith(".gz"):
        import gzip

        return gzip.open(path, "rb")
    return open(path, "rb")


def logical_suffix(path: Path) -> str:
    """Lower-case suffix ignoring a trailing ``.gz`` (``runs.csv.gz`` -> ``.csv``)."""
    name = Path(path).name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    return Path(name).suffix


def read_text(path: Path) -> str:
    """Whole file as text (UTF-8, undecodable bytes replaced); ``\\r\\n`` kept as is."""
    with open_binary(path) as fh:
        raw = fh.read()
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    return raw.decode("utf-8", errors="replace")


def single_run_frame(records: list[dict], path: Path, *, empty: str, **meta) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(data, meta) of a file holding one run; ``empty`` says what was expected when there is no record."""
    if not records:
        raise fmt_error(path, None, empty)
    rid = default_run_id(path)
    df = records_frame(records, path)
    df[RUN] = rid
    return df, pd.DataFrame([{RUN: rid, **meta}])


def records_frame(records: list[dict], path: Path) -> pd.DataFrame:
    """DataFrame from parsed records (each has run_id/step/source_line + metrics)."""
    df = pd.DataFrame.from_records(records)
    df[SOURCE_FILE] = str(path)
    return df


def numeric_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Apply :func:`num` to every metric column; columns that stay partly non-numeric are kept."""
    out = df.copy()
    for c in out.columns:
        if c in (RUN, SOURCE_FILE):
            continue
        if out[c].dtype.kind in "fiub":
            continue
        vals = [num(v) for v in out[c].tolist()]
        if all(isinstance(v, float) for v in vals):
            out[c] = np.asarray(vals, dtype=float)
        else:
            out[c] = pd.Series(vals, index=out.index, dtype=object)
    return out
