"""The run data model: one long table of per-step metrics plus one table of per-run metadata.

Schema
------
``data`` (long, one row per logged point):

=========================  ==========================================================
column                     meaning
=========================  ==========================================================
``run_id`` (str)           run identifier, unique within a :class:`RunSet`
``step`` (int)             optimizer step of the logged point (strictly increasing per run)
``reward`` (float)         batch-mean training reward logged at that step
channels (float)           the quantities of :data:`CHANNELS`, each under one name, optional
``reward_fn/<name>``       mean reward of one reward function (TRL ``rewards/<name>/mean``), optional
``eval/<name>``            evaluation metrics (NaN where not evaluated), optional
anything else              unmapped metrics are kept under their original names
=========================  ==========================================================

Channels
--------
Every quantity a trainer logs besides the reward has one name here (:data:`CHANNELS`, with its
definition) and is mapped onto it once, by the importers' table
:data:`bayesgrpo.io._common.ALIASES` (which names each trainer's key). A trainer that logs a
quantity under another *definition* feeds a separate channel, never the same name:

* ``reward_std`` is the mean over the step's groups of the within-group (sample, ddof = 1) standard
  deviation of the G rewards of one prompt -- TRL <= 0.26 ``reward_std`` (``scale_rewards="group"``,
  its default), OpenRLHF ``group_reward_std``. ``reward_std_batch`` is the standard deviation of all
  rewards of the step pooled -- TRL >= 0.27 logs *this* under the key ``reward_std`` (as does TRL <=
  0.26 with ``scale_rewards="batch"``), OpenRLHF ``rollout/reward_std``, verl forks'
  ``critic/score/std``, and the ``std_reward`` of from-scratch loops. A log file does not say its TRL
  version: its ``reward_std`` key is read as ``reward_std`` unless the run itself proves it is a batch
  std (:func:`bayesgrpo.io._common.reward_std_is_batch`) or the caller says so
  (``read_runs(..., reward_std="batch")``; the live callback knows the TRL version). For 0/1 rewards the
  batch std is a function of the mean reward alone (``sqrt(u (1 - u))``) and carries nothing about the
  spread of prompt difficulty that ``reward_std`` measures.
* ``kl`` is the KL divergence from the *reference* policy (TRL ``kl``, verl ``actor/kl_loss`` /
  ``actor/reward_kl_penalty``, OpenRLHF ``kl``); ``approx_kl`` is the KL between the policy that
  generated the batch and the updated one, PPO's step size (verl ``actor/ppo_kl``).
* ``clip_ratio`` is the share of completion tokens whose importance ratio was clipped on either side
  (TRL >= 0.17 logs it as ``clip_ratio/region_mean`` next to its low/high parts, which stay under their
  own names; TRL 0.16 ``clip_ratio``; verl ``actor/pg_clipfrac``; OpenRLHF ``ppo_clip_ratio``).
  ``frac_truncated`` is a different quantity: the share of completions cut at the length limit (TRL
  ``completions/clipped_ratio``, verl ``response_length/clip_ratio``, OpenRLHF ``rollout/truncated_rate``).

:meth:`RunSet.channels` says which channels a run has; :meth:`RunSet.channel_counts` counts their points.

``meta`` (one row per run, index ``run_id``): :data:`META_FIELDS` (all optional; missing stays
missing as NaN / None) plus any free-form extra columns; importers record the source key of every
channel they mapped as ``<channel>_key`` (e.g. ``reward_std_key``).

A RunSet is always in the runs' own units; the models' per-run normalisation (and its exact inverse)
is :func:`bayesgrpo.models.arrays.normalisation`, the per-run facts of a forecast (truncation,
horizon, interval, bounds) are its plan (:mod:`bayesgrpo.plan`).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayesgrpo.errors import DataValidationError, DataWarning

__all__ = [
    "RUN",
    "STEP",
    "REWARD",
    "OPTIONAL_METRICS",
    "CHANNELS",
    "CHANNEL_LABELS",
    "REWARD_FN_PREFIX",
    "EVAL_PREFIX",
    "is_channel",
    "META_FIELDS",
    "NUMERIC_META",
    "check_meta_values",
    "meta_value_problem",
    "RunSet",
]

RUN = "run_id"
STEP = "step"
REWARD = "reward"
SOURCE_FILE = "source_file"
SOURCE_LINE = "source_line"  # 1-based line/record in the source file, when known
#: The channels besides the reward, each a quantity with one name and one definition (module docstring).
CHANNELS: dict[str, str] = {
    "reward_std": "mean over the step's groups of the within-group standard deviation (ddof = 1) of the G rewards",
    "reward_std_batch": "standard deviation of all rewards of the step's batch, every group pooled",
    "frac_reward_zero_std": "share of the step's groups whose G rewards are all equal",
    "kl": "KL divergence of the policy from the reference policy (mean per-token estimate)",
    "approx_kl": "KL divergence between the policy that generated the batch and the updated policy",
    "entropy": "mean per-token entropy of the policy over its completions",
    "completion_length": "mean completion length (tokens)",
    "frac_truncated": "share of completions cut at the maximum completion length",
    "clip_ratio": "share of completion tokens whose importance ratio was clipped (either side)",
}
#: prefixes of the per-reward-function means and of the evaluation metrics (channel families)
REWARD_FN_PREFIX = "reward_fn/"
EVAL_PREFIX = "eval/"
#: short labels of the channels (``summary`` prints ``std,zero,kl,fn2,eval3``); families count their members
CHANNEL_LABELS: dict[str, str] = {
    "reward_std": "std", "reward_std_batch": "bstd", "frac_reward_zero_std": "zero", "kl": "kl",
    "approx_kl": "akl", "entropy": "ent", "completion_length": "len", "frac_truncated": "trunc",
    "clip_ratio": "clip", REWARD_FN_PREFIX: "fn", EVAL_PREFIX: "eval",
}  # fmt: skip
OPTIONAL_METRICS = tuple(CHANNELS)


def is_channel(name: str) -> bool:
    """True for a channel name: one of :data:`CHANNELS`, ``reward_fn/<name>`` or ``eval/<name>``."""
    return name in CHANNELS or (
        isinstance(name, str)
        and any(name.startswith(p) and len(name) > len(p) for p in (REWARD_FN_PREFIX, EVAL_PREFIX))
    )


#: the run metadata fields, each with its kind (``num``: a number, else text)
_META_KINDS = {
    "model": "text", "family": "text", "params_b": "num", "group_size": "num", "learning_rate": "num",
    "beta1": "num", "refresh_interval": "num", "batch_size": "num", "max_steps": "num", "dataset": "text",
    "algorithm": "text", "reward_min": "num", "reward_max": "num", "source_file": "text",
}  # fmt: skip
META_FIELDS = tuple(_META_KINDS)
NUMERIC_META = tuple(f for f, kind in _META_KINDS.items() if kind == "num")
_BOOKKEEPING = (SOURCE_FILE, SOURCE_LINE)
# lower bound and whether it is exclusive, per numeric metadata field (values outside are missing)
_META_RANGES = {"params_b": (0.0, True), "group_size": (1.0, False), "learning_rate": (0.0, True),
                "beta1": (0.0, False), "refresh_interval": (1.0, False), "batch_size": (1.0, False),
                "max_steps": (1.0, False)}  # fmt: skip


def meta_value_problem(field: str, value) -> str | None:
    """Why ``value`` cannot be metadata ``field`` (None: it can). Numeric fields must be finite
    numbers within :data:`_META_RANGES`; ``beta1`` a momentum in [0, 1)."""
    if field not in NUMERIC_META or value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "not a number"
    if not np.isfinite(v):
        return None if np.isnan(v) else "not a finite number"
    lo, lo_open = _META_RANGES.get(field, (None, False))
    if lo is not None and ((v <= lo) if lo_open else (v < lo)):
        return f"outside its range ({'>' if lo_open else '>='} {lo:g})"
    if field == "beta1" and v >= 1.0:
        return "not a momentum in [0, 1)"
    return None


def check_meta_values(meta: pd.DataFrame, where: str, *, stacklevel: int = 3) -> pd.DataFrame:
    """A copy of ``meta`` (index: run ids, or a ``run_id`` column) whose numeric fields are floats, each
    value :func:`meta_value_problem` refuses made missing with a :class:`DataWarning` naming ``where``
    (the metadata file), the run, the column and the value."""
    out = meta.copy()
    ids = out[RUN] if RUN in out.columns else pd.Series(out.index if out.index.name == RUN else "(every run)",
                                                        index=out.index)  # fmt: skip
    for f in [f for f in NUMERIC_META if f in out.columns]:
        why = {i: meta_value_problem(f, v) for i, v in out[f].items()}
        for i, w in why.items():
            if w is not None:
                v = out.loc[i, f]
                shown = f"{v!r}" if isinstance(v, str) else f"{float(v):g}"
                warnings.warn(f"metadata{where}: run {ids[i]!r}, column {f!r} is {shown}, {w}; treated as missing",
                              DataWarning, stacklevel=stacklevel)  # fmt: skip
        out[f] = pd.to_numeric(out[f].where([w is None for w in why.values()]), errors="coerce").astype(float)
    return out


def _where(df: pd.DataFrame, idx, source: str | None) -> str:
    """Human-readable location of row ``idx`` of ``df`` (file, run, line or row)."""
    row = df.loc[idx]
    parts = []
    src = row.get(SOURCE_FILE) if SOURCE_FILE in df.columns else None
    src = src if isinstance(src, str) else source
    if src:
        parts.append(f"file {src}")
    if RUN in df.columns:
        parts.append(f"run {row[RUN]!r}")
    if SOURCE_LINE in df.columns and pd.notna(row.get(SOURCE_LINE)):
        parts.append(f"line {int(row[SOURCE_LINE])}")
    else:
        parts.append(f"row {idx}")
    return ", ".join(parts)


@dataclass(frozen=True)
class RunSet:
    """A validated, sorted set of GRPO runs (long data + per-run metadata).

    Construct with :meth:`RunSet.from_frames` (validates and never modifies its inputs).

    Attributes
    ----------
    data : pandas.DataFrame
        Long table sorted by ``run_id`` then ``step``; columns as in the module docstring.
    meta : pandas.DataFrame
        One row per run, indexed by ``run_id`` (same runs as ``data``, in order of first appearance).
    source : str or None
        Where the set was read from (used in messages).
    """

    data: pd.DataFrame
    meta: pd.DataFrame
    source: str | None = None
    _checked: bool = field(default=False, repr=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_frames(
        cls,
        data: pd.DataFrame,
        meta: pd.DataFrame | None = None,
        *,
        source: str | None = None,
        on_duplicate: str = "error",
        min_points: int = 1,
    ) -> RunSet:
        """Validate and sort a long table (and optional metadata) into a :class:`RunSet`.

        Parameters
        ----------
        data : pandas.DataFrame
            Long table with at least ``run_id``, ``step``, ``reward``. Not modified.
        meta : pandas.DataFrame, optional
            Per-run metadata with a ``run_id`` column or index. Rows for runs not in ``data`` are
            dropped with a :class:`~bayesgrpo.errors.DataWarning`; runs without a row get NaN.
        source : str, optional
            File the data came from, used in messages.
        on_duplicate : {"error", "last", "first"}
            What to do when a run logs the same step twice (e.g. a resumed run). ``"error"`` raises;
            ``"last"``/``"first"`` keep one occurrence and warn, naming the run and the steps.
        min_points : int
            Runs with fewer finite reward points raise :class:`DataValidationError`.

        Raises
        ------
        DataValidationError
            Missing columns, non-numeric or infinite values, duplicate steps (with
            ``on_duplicate="error"``), too few points. The message names file, run and row.

        Warns
        -----
        DataWarning
            NaN rewards dropped, unsorted steps sorted, duplicates resolved, metadata rows dropped.
        """
        if not isinstance(data, pd.DataFrame):
            raise DataValidationError(f"expected a pandas DataFrame of run data, got {type(data).__name__}")
        where_src = f" in {source}" if source else ""
        missing = [c for c in (RUN, STEP, REWARD) if c not in data.columns]
        if missing:
            raise DataValidationError(
                f"run data{where_src} lack the required column(s) {missing}; found columns "
                f"{list(data.columns)[:20]}. The long format needs run_id, step, reward "
                "(rename your columns or use an importer: bayesgrpo.io.read_runs)."
            )
        if len(data) == 0:
            raise DataValidationError(f"run data{where_src} contain no rows")
        df = _numeric(data, source)
        df = _drop_missing_rewards(df, source)
        df = _sorted_unique(df, source, on_duplicate)
        counts = df.groupby(RUN, sort=False).size()
        few = counts[counts < min_points]
        if len(few):
            raise DataValidationError(
                f"run {few.index[0]!r}{where_src} has {int(few.iloc[0])} usable reward point(s); at least "
                f"{min_points} are needed"
            )
        meta_df = cls._build_meta(meta, list(counts.index), source)
        return cls(data=df, meta=meta_df, source=source, _checked=True)

    @staticmethod
    def _build_meta(meta, runs: list[str], source) -> pd.DataFrame:
        base = pd.DataFrame(index=pd.Index(runs, name=RUN))
        if meta is None:
            out = base
        else:
            m = meta.copy()
            if RUN in m.columns:
                m[RUN] = m[RUN].astype(str)
                if m[RUN].duplicated().any():
                    d = m.loc[m[RUN].duplicated(), RUN].iloc[0]
                    raise DataValidationError(f"metadata lists run {d!r} more than once")
                m = m.set_index(RUN)
            else:
                m.index = m.index.astype(str)
                m.index.name = RUN
            extra = [r for r in m.index if r not in set(runs)]
            if extra:
                warnings.warn(
                    f"metadata{' for ' + source if source else ''} has {len(extra)} run(s) with no data, "
                    f"ignored: {extra[:5]}",
                    DataWarning,
                    stacklevel=3,
                )
            out = base.join(m, how="left")
        for f in META_FIELDS:
            if f not in out.columns:
                out[f] = np.nan if f in NUMERIC_META else None
        out = check_meta_values(out, f" ({source})" if source else "", stacklevel=4)
        where = f" ({source})" if source else ""
        if {"reward_min", "reward_max"} <= set(out.columns):
            bad = out["reward_min"].notna() & out["reward_max"].notna() & (out["reward_min"] >= out["reward_max"])
            for r in bad[bad].index:
                raise DataValidationError(
                    f"metadata{where}: run {r!r} has reward_min {out.loc[r, 'reward_min']:g} >= reward_max "
                    f"{out.loc[r, 'reward_max']:g}"
                )
        return out

    # ------------------------------------------------------------------ access
    @property
    def run_ids(self) -> list[str]:
        return list(self.meta.index)

    def __len__(self) -> int:
        return len(self.meta)

    def __iter__(self):
        return iter(self.run_ids)

    def run(self, run_id: str) -> pd.DataFrame:
        """Rows of one run (a copy), sorted by step."""
        if run_id not in self.meta.index:
            raise KeyError(f"no run {run_id!r}; runs are {self.run_ids[:10]}{' ...' if len(self) > 10 else ''}")
        return self.data.loc[self.data[RUN] == run_id].reset_index(drop=True)

    def select(self, run_ids: Iterable[str]) -> RunSet:
        ids = list(run_ids)
        unknown = [r for r in ids if r not in self.meta.index]
        if unknown:
            raise KeyError(f"unknown run(s) {unknown[:5]}; available: {self.run_ids[:10]}")
        data = self.data.loc[self.data[RUN].isin(ids)]
        pos = {r: k for k, r in enumerate(ids)}
        data = data.assign(_p=data[RUN].map(pos)).sort_values(["_p", STEP], kind="stable").drop(columns="_p")
        return RunSet(data.reset_index(drop=True), self.meta.loc[ids].copy(), self.source, True)

    def truncate(self, *, fraction: float | None = None, until_step: int | None = None) -> RunSet:
        """Keep each run's first ``fraction`` of its step span (or steps <= ``until_step``)."""
        parts = []
        for _, g in self.data.groupby(RUN, sort=False):
            if fraction is not None:
                s0, s1 = g[STEP].iloc[0], g[STEP].iloc[-1]
                cut = s0 + fraction * (s1 - s0)
            else:
                cut = until_step
            parts.append(g.loc[g[STEP] <= cut])
        return RunSet(pd.concat(parts, ignore_index=True), self.meta.copy(), self.source, True)

    def with_meta_defaults(self, **values) -> RunSet:
        """A new set whose metadata fields take ``values`` where a run has none (inputs untouched)."""
        meta = self.meta.copy()
        for k, v in values.items():
            if k not in meta.columns:
                meta[k] = v
            else:
                meta[k] = meta[k].where(meta[k].notna(), v)
        return RunSet(self.data, meta, self.source, True)

    @property
    def metrics(self) -> list[str]:
        return [c for c in self.data.columns if c not in (RUN, STEP, *_BOOKKEEPING)]

    def channel_counts(self) -> pd.DataFrame:
        """Finite points of every channel, per run.

        Returns
        -------
        pandas.DataFrame
            Index ``run_id`` (every run, in order), one integer column per channel any run logs
            (:data:`CHANNELS` in their order, then ``reward_fn/<name>`` and ``eval/<name>`` in order of
            appearance); 0 where a run does not log it.
        """
        cols = self._channel_columns()
        counts = self._finite(self.data, cols).groupby(self.data[RUN], sort=False).sum()
        counts = counts.reindex(self.run_ids, fill_value=0)
        counts.index.name = RUN
        return counts.astype(np.int64)

    def _channel_columns(self) -> list[str]:
        cols = [c for c in CHANNELS if c in self.data.columns]
        for pre in (REWARD_FN_PREFIX, EVAL_PREFIX):
            cols += [c for c in self.data.columns if c not in cols and c.startswith(pre) and is_channel(c)]
        return cols

    @staticmethod
    def _finite(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
        return pd.DataFrame(
            {c: np.isfinite(pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=float)) for c in cols}, index=df.index
        )

    def channels(self, run_id: str) -> tuple[str, ...]:
        """The channels run ``run_id`` logs (at least one finite value), in the order of :meth:`channel_counts`.

        Raises
        ------
        KeyError
            No such run.

        Examples
        --------
        >>> import pandas as pd
        >>> rs = RunSet.from_frames(pd.DataFrame({"run_id": "a", "step": [1, 2], "reward": [0.1, 0.2],
        ...                                       "kl": [0.0, 0.01], "entropy": float("nan")}))
        >>> rs.channels("a")
        ('kl',)
        """
        if run_id not in self.meta.index:
            raise KeyError(f"no run {run_id!r}; runs are {self.run_ids[:10]}{' ...' if len(self) > 10 else ''}")
        cols = self._channel_columns()
        rows = self.data.loc[self.data[RUN] == run_id]
        has = self._finite(rows, cols).any()
        return tuple(c for c in cols if has[c])

    def concat(self, other: RunSet) -> RunSet:
        clash = set(self.run_ids) & set(other.run_ids)
        if clash:
            raise DataValidationError(f"run ids occur in both sets: {sorted(clash)[:5]}")
        data = pd.concat([self.data, other.data], ignore_index=True)
        meta = pd.concat([self.meta, other.meta])
        return RunSet(data, meta, self.source, True)

    # ------------------------------------------------------------------ reports
    def summary(self) -> pd.DataFrame:
        """One row per run: points, first/last step, reward range, channels, other metrics and metadata
        present (``channels`` and ``metrics`` are comma-separated names; the logging interval a forecast
        uses is the run's plan's: :func:`bayesgrpo.plan.logging_interval`)."""
        g = self.data.groupby(RUN, sort=False)
        out = pd.DataFrame(
            {
                "points": g.size(),
                "first_step": g[STEP].min(),
                "last_step": g[STEP].max(),
                "reward_min": g[REWARD].min(),
                "reward_max": g[REWARD].max(),
                "reward_last10": g[REWARD].apply(lambda r: float(r.iloc[-max(1, len(r) // 10) :].mean())),
            }
        ).reindex(self.run_ids)
        counts = self.channel_counts()
        out["channels"] = [",".join(c for c, n in counts.loc[r].items() if n > 0) for r in out.index]
        other = [m for m in self.metrics if m != REWARD and m not in counts.columns]
        present = self.data[other].notna().groupby(self.data[RUN], sort=False).any().reindex(self.run_ids)
        out["metrics"] = [",".join(m for m in other if present.loc[r, m]) for r in out.index]
        fields = [f for f in META_FIELDS if f != SOURCE_FILE]
        out["metadata"] = [",".join(f for f in fields if _present(self.meta.loc[r, f])) for r in out.index]
        return out

    # ------------------------------------------------------------------ xarray
    def to_xarray(self):
        """Convert to an ``xarray.Dataset`` with dims ``(run, step)``; ragged runs padded with NaN.

        Metadata become coordinates on ``run``. :meth:`from_xarray` inverts it without loss.
        """
        import xarray as xr

        metric_cols = [c for c in self.data.columns if c not in (RUN, STEP)]
        wide = self.data.set_index([RUN, STEP])[metric_cols]
        ds = xr.Dataset.from_dataframe(wide)
        ds = ds.rename({RUN: "run"}).reindex(run=self.run_ids)
        meta = self.meta.copy()
        for c in meta.columns:
            vals = meta[c]
            if vals.dtype == object:
                vals = vals.astype("object").where(vals.notna(), None).astype(str).where(vals.notna(), "")
            ds = ds.assign_coords({f"meta_{c}": ("run", vals.to_numpy())})
        ds.attrs["bayesgrpo_schema"] = "runset/1"
        ds.attrs["meta_object_columns"] = ",".join(c for c in meta.columns if meta[c].dtype == object)
        if self.source:
            ds.attrs["source"] = self.source
        return ds

    @classmethod
    def from_xarray(cls, ds) -> RunSet:
        """Inverse of :meth:`to_xarray` (padding rows, where ``reward`` is NaN, are dropped)."""
        obj_cols = [c for c in ds.attrs.get("meta_object_columns", "").split(",") if c]
        meta_coords = [c for c in ds.coords if str(c).startswith("meta_")]
        meta = pd.DataFrame(
            {c[5:]: ds[c].to_numpy() for c in meta_coords}, index=pd.Index(ds["run"].to_numpy().astype(str), name=RUN)
        )
        for c in obj_cols:
            meta[c] = meta[c].astype(object).where(meta[c] != "", None)
        df = ds.drop_vars(meta_coords).to_dataframe().reset_index().rename(columns={"run": RUN})
        df = df.loc[df[REWARD].notna()]
        for c in df.columns:
            if c in (SOURCE_FILE,) and df[c].dtype == object:
                continue
        df[STEP] = df[STEP].astype(np.int64)
        return cls.from_frames(df.reset_index(drop=True), meta.reset_index(), source=ds.attrs.get("source"))


def _present(v) -> bool:
    if v is None:
        return False
    if isinstance(v, float) and np.isnan(v):
        return False
    return not (isinstance(v, str) and v == "")


def _numeric(data: pd.DataFrame, source: str | None) -> pd.DataFrame:
    """A copy with string run ids, integer steps and numeric metrics (one-line errors naming the row)."""
    df = data.copy()
    df[RUN] = df[RUN].astype(str)
    step = pd.to_numeric(df[STEP], errors="coerce")  # numeric, finite, integer-valued
    bad = step.isna() | ~np.isfinite(step.to_numpy(dtype=float, na_value=np.nan))
    if bad.any():
        i = bad[bad].index[0]
        raise DataValidationError(
            f"step {data.loc[i, STEP]!r} is not a finite number ({_where(df, i, source)}); "
            f"{int(bad.sum())} such row(s). Steps must be integers."
        )
    if (step != np.round(step)).any():
        i = step[step != np.round(step)].index[0]
        raise DataValidationError(
            f"step {float(step[i]):g} is not an integer ({_where(df, i, source)}). Steps must be "
            "optimizer step counts; convert fractional epochs to steps first."
        )
    df[STEP] = step.astype(np.int64)
    for col in df.columns:  # reward and every other metric: numeric
        if col in (RUN, STEP, SOURCE_FILE) or df[col].dtype.kind in "fiub":
            continue
        conv = pd.to_numeric(df[col], errors="coerce")
        newly_nan = conv.isna() & df[col].notna()
        if newly_nan.any():
            i = newly_nan[newly_nan].index[0]
            if col == REWARD:
                raise DataValidationError(
                    f"reward {data.loc[i, col]!r} is not a number ({_where(df, i, source)}); "
                    f"{int(newly_nan.sum())} such row(s)."
                )
            continue  # a non-numeric free-form column (e.g. a tag) or line number is kept as it is
        df[col] = conv.astype(float)
    return df


def _drop_missing_rewards(df: pd.DataFrame, source: str | None) -> pd.DataFrame:
    """Drop rows whose reward is NaN (missing) or infinite (a diverged reward is no point of the curve),
    with a warning naming the first row and the runs; the runs' other rows go on."""
    rew = df[REWARD].to_numpy(dtype=float)
    keep = np.ones(len(df), bool)
    for bad, what in ((np.isnan(rew), "a missing (NaN)"), (np.isinf(rew), "an infinite")):
        if not bad.any():
            continue
        idx = df.index[bad]
        runs = sorted(set(df.loc[idx, RUN]))
        warnings.warn(f"dropped {int(bad.sum())} row(s) with {what} reward{f' in {source}' if source else ''}, first "
                      f"at {_where(df, idx[0], source)}; runs affected: {runs[:5]}{' ...' if len(runs) > 5 else ''}",
                      DataWarning, stacklevel=4)  # fmt: skip
        keep &= ~bad
    return df if keep.all() else df.loc[keep]


def _sorted_unique(df: pd.DataFrame, source: str | None, on_duplicate: str) -> pd.DataFrame:
    """Runs in order of first appearance, steps sorted within a run (warned), one row per step."""
    where_src = f" in {source}" if source else ""
    pos = {r: k for k, r in enumerate(pd.unique(df[RUN]))}
    for rid, g in df.groupby(RUN, sort=False):
        s = g[STEP].to_numpy()
        if len(s) > 1 and np.any(np.diff(s) < 0):
            k = int(np.argmax(np.diff(s) < 0)) + 1
            warnings.warn(
                f"steps of run {rid!r}{where_src} are not sorted (step {s[k]} follows {s[k - 1]} "
                f"at {_where(df, g.index[k], source)}); sorted them.",
                DataWarning,
                stacklevel=4,
            )
    df = df.assign(_run_pos=df[RUN].map(pos), _orig=np.arange(len(df)))
    df = df.sort_values(["_run_pos", STEP, "_orig"], kind="stable")
    dup = df.duplicated([RUN, STEP], keep=False)
    if dup.any():
        first = df.index[dup.to_numpy()][0]
        rid = df.loc[first, RUN]
        steps = sorted(set(df.loc[dup & (df[RUN] == rid), STEP]))
        msg = (
            f"run {rid!r}{where_src} logs step(s) {steps[:8]}{' ...' if len(steps) > 8 else ''} more "
            f"than once (first at {_where(df, first, source)}); {int(dup.sum())} rows involved"
        )
        if on_duplicate == "error":
            raise DataValidationError(
                msg + ". A resumed run? Pass on_duplicate='last' (keep the later log) or clean the file."
            )
        if on_duplicate not in ("last", "first"):
            raise ValueError(f"on_duplicate must be 'error', 'last' or 'first', got {on_duplicate!r}")
        warnings.warn(msg + f"; kept the {on_duplicate} occurrence of each.", DataWarning, stacklevel=4)
        df = df.drop_duplicates([RUN, STEP], keep=on_duplicate)
    return df.drop(columns=["_run_pos", "_orig"]).reset_index(drop=True)
