"""Helpers shared by the importers: number parsing, metric-name mapping, errors, run ids."""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.errors import DataWarning, LogFormatError
from bayesgrpo.schema import EVAL_PREFIX, REWARD, REWARD_FN_PREFIX, RUN, SOURCE_FILE, SOURCE_LINE, STEP

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
# Channel (bayesgrpo.schema.CHANNELS) -> source keys, in priority order: THE table of key names, used by
# every importer and by the live integrations. The first key present in a run's columns is renamed to
# the channel; the other keys are kept under their own names. A key whose quantity has another
# definition than the channel's goes to the channel of that definition (schema module docstring).
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
    "reward_std": (
        "reward_std",  # TRL <= 0.26 with scale_rewards="group" (its default), Unsloth; TRL >= 0.27: batch std
        "group_reward_std",  # OpenRLHF (each sample's group std, averaged)
    ),
    "reward_std_batch": (
        "rollout/reward_std",  # OpenRLHF (all rewards of the rollout)
        "critic/score/std",  # verl forks
        "std_reward",  # from-scratch loops (np.std of the step's rewards)
        "reward/std",
    ),
    "frac_reward_zero_std": ("frac_reward_zero_std", "frac_zero_reward_std"),  # 2nd: an older TRL spelling
    "kl": (
        "kl",  # TRL (only when beta != 0), OpenRLHF
        "actor/kl_loss",  # verl, use_kl_loss
        "actor/reward_kl_penalty",  # verl, KL in the reward
        "critic/kl",  # old verl
        "kl_div",
        "KL_ref",  # MiniMind
        "kl_ref",
    ),
    "approx_kl": ("actor/ppo_kl", "ppo_kl", "approx_kl"),  # old -> updated policy (PPO step size), not the reference
    "entropy": ("entropy", "actor/entropy", "actor/entropy_loss", "policy_entropy"),  # 3rd: old verl's name
    "completion_length": (
        "completions/mean_length",  # TRL >= 0.17
        "completion_length",  # TRL <= 0.16, Unsloth legacy key
        "response_length/mean",  # verl
        "rollout/response_length_mean",  # OpenRLHF
        "response_length",  # OpenRLHF
        "Avg Len",  # MiniMind
    ),
    "frac_truncated": (
        "completions/clipped_ratio",  # TRL >= 0.17 (completions cut at max_completion_length)
        "response_length/clip_ratio",  # verl
        "rollout/truncated_rate",  # OpenRLHF
    ),
    "clip_ratio": (
        "clip_ratio/region_mean",  # TRL >= 0.17: low or high clipped (its low_/high_ parts keep their names)
        "clip_ratio",  # TRL 0.16
        "actor/pg_clipfrac",  # verl
        "ppo_clip_ratio",  # OpenRLHF
    ),
}
# TRL writes the legacy key next to the new one (Unsloth); it duplicates the chosen one -> drop.
_DROP_IF_SHADOWED = {"completion_length": ("completion_length",)}
#: what the bare TRL key ``reward_std`` measures: "group" (TRL <= 0.26) or "batch" (TRL >= 0.27)
REWARD_STD_DEFINITIONS = ("group", "batch")
_TRL_STD_KEY = "reward_std"

_REWARD_FN = re.compile(r"^rewards/(?P<fn>[^/]+)(?:/mean)?$")
_EVAL_PREFIXES = (("eval_", ""), ("eval/", ""), ("val-core/", ""), ("val-aux/", "aux/"), ("val/", ""))
#: logging prefix of the HF Trainer and OpenRLHF in W&B and TensorBoard (``train/reward`` -> ``reward``)
_TRAIN_PREFIX = "train/"


def strip_train_prefix(key: str) -> str:
    """A W&B / TensorBoard key without the trainers' ``train/`` logging prefix (``train/kl`` -> ``kl``)."""
    return key[len(_TRAIN_PREFIX) :] if key.startswith(_TRAIN_PREFIX) and len(key) > len(_TRAIN_PREFIX) else key


def canonical_name(key: str) -> str | None:
    """Name a *non-aliased* metric key takes in the schema (reward functions, eval metrics)."""
    m = _REWARD_FN.match(key)
    if m and m.group("fn") not in ("mean", "std", "min", "max"):
        return f"{REWARD_FN_PREFIX}{m.group('fn')}"
    for pre, sub in _EVAL_PREFIXES:
        if key.startswith(pre) and len(key) > len(pre):
            return f"{EVAL_PREFIX}{sub}{key[len(pre) :]}"
    return None


def trl_reward_std_definition(version: str | None, scale_rewards=None) -> str | None:
    """What TRL's ``reward_std`` key measures for a TRL ``version`` and its ``scale_rewards`` setting.

    TRL <= 0.26 logs the mean of the within-group stds (``"group"``; the batch std with
    ``scale_rewards="batch"``), TRL >= 0.27 the std of the whole batch (``"batch"``), as read from
    ``trl/trainer/grpo_trainer.py`` at v0.26.2 (``std_rewards.mean()``) and v0.27.0 (``rewards.std()``).
    None when that cannot be told (no version; TRL <= 0.26 with ``scale_rewards`` unknown).

    >>> [trl_reward_std_definition(v, s) for v, s in (("0.26.2", "group"), ("1.16.0", None), ("0.24", "batch"))]
    ['group', 'batch', 'batch']
    >>> trl_reward_std_definition("0.26.2") is None and trl_reward_std_definition(None, "group") is None
    True
    """
    m = re.match(r"^\s*v?(\d+)\.(\d+)", str(version or ""))
    if m is None:
        return None
    if (int(m.group(1)), int(m.group(2))) >= (0, 27):
        return "batch"
    if scale_rewards is None:
        return None
    return "batch" if str(scale_rewards) == "batch" else "group"


def reward_std_definition(meta) -> str | None:
    """:func:`trl_reward_std_definition` of a run's metadata (``trl_version``, ``scale_rewards``), if it has them.

    ``meta`` is a mapping (one run) or a DataFrame of runs that share one trainer (one log file).
    """
    if meta is None:
        return None
    if isinstance(meta, pd.DataFrame):
        vals = {c: meta[c].dropna().unique() for c in ("trl_version", "scale_rewards") if c in meta.columns}
        if any(len(v) > 1 for v in vals.values()):
            return None
        meta = {c: v[0] for c, v in vals.items() if len(v)}
    return trl_reward_std_definition(meta.get("trl_version"), meta.get("scale_rewards"))


def reward_std_is_batch(run: pd.DataFrame) -> bool:
    """True when one run's ``reward_std`` column cannot be a mean of within-group stds.

    The proof: at a step where every group's G rewards are equal (``frac_reward_zero_std`` = 1, also
    over a logging window), each within-group std is 0, so their mean is 0; a logged spread above 0 there
    is the std of the pooled batch (different prompts, different constant rewards). Runs without such a
    step prove nothing either way and return False.
    """
    if "reward_std" not in run.columns or "frac_reward_zero_std" not in run.columns:
        return False
    f = pd.to_numeric(run["frac_reward_zero_std"], errors="coerce").to_numpy(dtype=float)
    s = pd.to_numeric(run["reward_std"], errors="coerce").to_numpy(dtype=float)
    ok = np.isfinite(f) & np.isfinite(s) & (f >= 1.0 - 1e-9)
    return bool(np.any(s[ok] > 1e-6))


def _aliases(reward_key: str | None, reward_std: str | None) -> dict[str, tuple[str, ...]]:
    if reward_std not in (None, *REWARD_STD_DEFINITIONS):
        raise ValueError(f"reward_std must be one of {REWARD_STD_DEFINITIONS} or None, got {reward_std!r}")
    table = dict(ALIASES)
    if reward_key:
        table[REWARD] = (reward_key,)
    if reward_std == "batch":  # the TRL key holds a batch std
        table["reward_std"] = tuple(k for k in ALIASES["reward_std"] if k != _TRL_STD_KEY)
        table["reward_std_batch"] = (_TRL_STD_KEY, *ALIASES["reward_std_batch"])
    return table


def map_metric_columns(
    df: pd.DataFrame, *, reward_key: str | None = None, reward_std: str | None = None
) -> tuple[pd.DataFrame, dict[str, dict[str, str]]]:
    """Rename source metric columns of ``df`` onto the schema (see :data:`ALIASES`), run by run.

    Each run gets the first key of each channel that it logs (a W&B export may hold a TRL run and an
    OpenRLHF run side by side).

    Parameters
    ----------
    df : pandas.DataFrame
        Long rows (``run_id``, ``step`` and the trainer's keys). Not modified.
    reward_key : str, optional
        The source column used as ``reward``.
    reward_std : {"group", "batch"}, optional
        What TRL's key ``reward_std`` measures (the live callback knows it from the TRL version,
        :func:`trl_reward_std_definition`). None: ``reward_std`` unless a run proves it is a batch std
        (:func:`reward_std_is_batch`); that run's values then go to ``reward_std_batch``.

    Returns
    -------
    (pandas.DataFrame, dict)
        The renamed frame and, per schema name, the source key each run's values came from:
        ``{schema name: {run_id: source name}}`` (runs that do not log it are absent).
    """
    table = _aliases(reward_key, reward_std)
    if RUN not in df.columns or df[RUN].nunique(dropna=False) <= 1:
        rid = str(df[RUN].iloc[0]) if RUN in df.columns and len(df) else ""
        out, used = _map_run(df, table, reward_std)
        return out, {k: {rid: v} for k, v in used.items()}
    if not df.index.is_unique:
        df = df.reset_index(drop=True)
    parts: list[pd.DataFrame] = []
    used_by_run: dict[str, dict[str, str]] = {}
    for rid, g in df.groupby(RUN, sort=False):
        logged = [c for c in g.columns if c in _PROTECTED or g[c].notna().any()]  # a run's own keys only
        out, used = _map_run(g[logged], table, reward_std)
        parts.append(out)
        for k, v in used.items():
            used_by_run.setdefault(k, {})[str(rid)] = v
    return pd.concat(parts).reindex(df.index), used_by_run


_PROTECTED = frozenset({RUN, STEP, SOURCE_FILE, SOURCE_LINE})


def _map_run(df: pd.DataFrame, table: dict, reward_std: str | None) -> tuple[pd.DataFrame, dict[str, str]]:
    """:func:`map_metric_columns` of the rows of one run."""
    cols = [c for c in df.columns if c not in _PROTECTED]
    rename: dict[str, str] = {}
    used: dict[str, str] = {}
    drop: list[str] = []
    for canon, names in table.items():
        src = next((n for n in names if n in cols and n not in rename), None)
        if src is None:
            continue
        used[canon] = src
        if src != canon:
            if canon in cols and canon not in rename:
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
    if (
        reward_std is None
        and used.get("reward_std") == _TRL_STD_KEY
        and "reward_std_batch" not in out.columns
        and reward_std_is_batch(out)
    ):
        out = out.rename(columns={"reward_std": "reward_std_batch"})
        used["reward_std_batch"] = used.pop("reward_std")
    return out, used


# ----------------------------------------------------------------------------- errors / ids
def fmt_error(path, where: str | None, what: str) -> LogFormatError:
    """A one-line :class:`LogFormatError`: ``<file>[, <where>]: <what>``."""
    loc = f"{path}" + (f", {where}" if where else "")
    return LogFormatError(f"{loc}: {' '.join(str(what).split())}")


def last_line_index(lines) -> int:
    """Index of the last non-blank line (-1 for none): the one a run still being written may have cut off."""
    return max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)


def unparsable_line(path, i: int, last_idx: int, what: str) -> None:
    """Metric line ``i`` (0-based) cannot be parsed: the last line (cut off mid-write) is dropped with a
    :class:`~bayesgrpo.errors.DataWarning`; any other is a one-line :class:`LogFormatError` saying ``what``."""
    if i != last_idx:
        raise fmt_error(path, f"line {i + 1}", what) from None
    warnings.warn(f"{path}, line {i + 1}: last metric line is incomplete (run cut off?); dropped it", DataWarning,
                  stacklevel=4)  # fmt: skip


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
