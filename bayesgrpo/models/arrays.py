"""From a :class:`~bayesgrpo.schema.RunSet` to the arrays a model is built from.

Conventions (one place for all of them):

* **Grid.** Each run lives on the unit-step grid from its first logged step ``s0`` to its last logged
  step; runs are padded to a common length with ``mask = 0`` (padding never enters the likelihood).
* **Reward bounds, horizon, logging interval, planned length**: the run's plan
  (:mod:`bayesgrpo.plan`; a 0-1 reward is inferred when every observed reward lies in [0, 1]: every
  development run whose prefix lay in [0, 1] stayed there -- silently only when the rewards reach
  :data:`bayesgrpo.plan.INFER_MIN_SHARE` of it, not at all below :data:`bayesgrpo.plan.RATE_RESOLUTION`).
* **Normalisation** (:func:`normalisation`). Per run, ``z = (reward - loc) / scale`` with ``loc`` = mean of the first
  ``max(3, 10%)`` observed points (the start level) and ``scale`` = the full range (max - min) of the
  observed rewards -- the rare batches that already reach a high reward show how far the run can
  rise before it rises (measured: the misses of a robust 5-95% range were the late rises of
  bimodal, few-completion rewards) -- but at least :data:`SCALE_FLOOR` of the reward's range
  ``U - L`` when the bounds are known: a flat prefix must not shrink the future to the prefix (a
  run flat at 0.01 of a 0-1 reward may still rise to 0.5). Everything is reported back in
  the run's own units through the exact inverse. A constant observed curve with unknown bounds gets
  the scale :data:`CONSTANT_SCALE` x |level| (x 1 at level 0) and a :class:`DataWarning` saying so.
* **Noise estimate.** :func:`bayesgrpo.series.noise_sd` of the normalised rewards, floored at
  :data:`NOISE_FLOOR` (2% of the scale).
* **Timescale.** The prior of ``tau`` is in optimizer steps: measured on the development runs
  (per-run fits of complete runs, ``bench/fit_population_prior.py``), ``log tau`` in steps spreads
  1.23 across runs, ``log(tau / run length)`` 1.34 -- the planned length carries no information about
  the timescale beyond the steps themselves, so the posterior of a prefix never depends on the
  horizon asked for.
* **Observed fraction.** The population prior is conditional on the share of the planned run
  already observed, ``f = (last - s0) / (planned - s0)`` (in prefix units the gain still to come
  shrinks as more of the rise is seen: fitted ``gain_mu`` 0.91 at f = 0.1, 0.55 at f = 0.5).
  ``planned`` is metadata ``max_steps`` when it lies after the last logged step, else the horizon:
  with ``max_steps`` known, asking for another horizon changes nothing about the posterior, and a
  forecast to an earlier step is the forecast of the planned run read at that step (the calibration
  layer, fitted at the planned end, widens pro rata: :meth:`RunInfo.time_to_go`). An explicit
  horizon that differs from ``max_steps`` is warned about (:func:`bayesgrpo.forecast.batch.forecast_batch`).
* **Model size.** ``log_size = log(params_b / REFERENCE_SIZE_B)``; ``size_known = 0`` where
  ``params_b`` is missing (the scaling kind then gives the run no size effect, with the population's
  size spread added to its timescale prior -- never the reference size).
* **Spread channels** (``channels=``: ``reward_std``, ``frac_reward_zero_std``; :mod:`bayesgrpo.models.spread`).
  The chosen channels' logged values per run, binned on the grid (:func:`bayesgrpo.models.channels.channel_array`),
  with G (metadata ``group_size``, else 8), the groups behind a logged point and the reward's width ``U - L``.
  A channel a run does not log is missing data: every run has the array, empty where nothing is logged.
* **Lag.** Metadata ``refresh_interval`` K > 1 gives the refresh pattern d_n = n mod K (n = grid index
  from ``s0``; :func:`lag_sequence`); else d = 0. The model arrays carry K per run (``refresh``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayesgrpo.errors import DataWarning, ForecastError
from bayesgrpo.plan import Plans, RunPlan, final_window_steps, future_steps, meta_number, plan_runs, run_where
from bayesgrpo.schema import REWARD, RUN, STEP, RunSet
from bayesgrpo.series import noise_sd, start_level

__all__ = ["ModelArrays", "RunArrays", "DATA_VARS", "SPREAD_DATA", "SPREAD_PARAMS", "SPREAD_CHANNELS", "RunInfo", "prepare_arrays",
           "normalisation", "REFERENCE_SIZE_B", "SCALE_FLOOR", "ADAM_BETA1"]  # fmt: skip

REFERENCE_SIZE_B = 4.0  # reference model size (billions) of the curvature-scaling law (median of the dev runs)
LOG_SIZE_SD = 0.8  # spread of log model size across the development runs (for runs of unknown size)
SCALE_FLOOR = 0.25  # the normalising scale is at least this share of a known reward range
CONSTANT_SCALE = 0.1  # scale of a constant curve of unknown bounds, per unit of its |level| (1 at level 0)
ADAM_BETA1 = 0.9  # the momentum prior's centre when beta1 is not logged (Adam's default)


#: names of the ``pm.Data`` variables of every graph (swapped per batch of runs)
DATA_VARS = (
    "y",
    "mask",
    "refresh",
    "span",
    "noise",
    "r0_obs",
    "family_idx",
    "log_size",
    "size_known",
    "mu_mean",
    "mu_known",
    "floor",
    "floor_known",
    "ceil",
    "ceil_known",
    "fraction",
    "channels",
    "group_size",
    "width",
    "width_known",
)
#: the data variables of the spread channel only (absent from the reward-only graphs)
SPREAD_DATA = ("channels", "group_size", "width", "width_known")
#: the per-run parameters a forecast with the spread channel needs besides the kind's
SPREAD_PARAMS = ("nu", "W")


@dataclass(frozen=True)
class ModelArrays:
    """Arrays the PyMC graph is built from (all in normalised units).

    ``y``, ``mask`` are (T, R) on the unit-step grid; per-run vectors are (R,): ``refresh`` (refresh
    interval K >= 1, int: lag d_n = n mod K in the transition out of grid step n), ``span`` (horizon - first
    step, in steps; informational), ``noise`` (robust measurement-noise estimate), ``mu_mean``
    (momentum prior mean) and ``mu_known`` (1 where beta1 was logged), ``family_idx``, ``log_size``
    (log params_b relative to the reference size) and ``size_known``, ``r0_obs`` (mean of the first
    observed points), ``floor`` / ``ceil`` (the reward's lower / upper bound, normalised) and
    ``floor_known`` / ``ceil_known``. The spread channel (:mod:`bayesgrpo.models.spread`): ``channels``
    (C, T, R), ``group_size`` (G), ``width`` (the reward's range U - L, normalised) and ``width_known``.
    """

    y: np.ndarray
    mask: np.ndarray
    refresh: np.ndarray
    span: np.ndarray
    noise: np.ndarray
    mu_mean: np.ndarray
    mu_known: np.ndarray
    family_idx: np.ndarray
    log_size: np.ndarray
    r0_obs: np.ndarray
    run_ids: tuple[str, ...]
    families: tuple[str, ...]
    # None only until __post_init__ fills the default (arrays saved before these fields existed)
    size_known: np.ndarray = None  # type: ignore[assignment]
    floor: np.ndarray = None  # type: ignore[assignment]
    floor_known: np.ndarray = None  # type: ignore[assignment]
    ceil: np.ndarray = None  # type: ignore[assignment]
    ceil_known: np.ndarray = None  # type: ignore[assignment]
    fraction: np.ndarray = None  # type: ignore[assignment] # observed share of the planned span, (last - s0) / (planned - s0)
    channels: np.ndarray = None  # type: ignore[assignment]
    group_size: np.ndarray = None  # type: ignore[assignment]
    width: np.ndarray = None  # type: ignore[assignment]
    width_known: np.ndarray = None  # type: ignore[assignment]

    def __post_init__(self):
        from bayesgrpo.models.channels import DEFAULT_GROUP_SIZE, N_CH

        R = len(self.r0_obs)
        for name, default in (("size_known", 0.0), ("floor", 0.0), ("floor_known", 0.0), ("ceil", 0.0),
                              ("ceil_known", 0.0), ("fraction", 0.3), ("group_size", float(DEFAULT_GROUP_SIZE)),
                              ("width", 1.0), ("width_known", 0.0)):  # fmt: skip
            if getattr(self, name) is None:  # arrays saved before these fields existed
                object.__setattr__(self, name, np.full(R, default))
        if self.channels is None:
            object.__setattr__(self, "channels", np.zeros((N_CH,) + np.shape(self.y)))

    @property
    def has_channels(self) -> bool:
        """Some run of these arrays logs a spread channel (the spread graph is needed)."""
        from bayesgrpo.models.channels import CH_MS, CH_MZ

        return bool(self.channels[CH_MS].any() or self.channels[CH_MZ].any())

    def data(self, prior=None) -> dict:
        """Values of the ``pm.Data`` variables (:data:`DATA_VARS`), with the per-run prior
        hyperparameters ``prior_<name>`` of ``prior`` at each run's observed fraction when given."""
        out = {n: getattr(self, n) for n in DATA_VARS}
        if prior is not None:
            out.update({f"prior_{k}": v for k, v in prior.values_at(self.fraction).items()})
        return out

    def subset(self, idx) -> ModelArrays:
        """The arrays of runs ``idx`` (grid cut to their longest run)."""
        idx = np.asarray(idx)
        T = int(max(np.nonzero(self.mask[:, j])[0].max() for j in idx)) + 1
        fields = {n: getattr(self, n) for n in DATA_VARS}
        out = {}
        for n, v in fields.items():
            out[n] = v[:, :T][:, :, idx] if v.ndim == 3 else v[:T, idx] if v.ndim == 2 else v[idx]
        return ModelArrays(**out, run_ids=tuple(self.run_ids[j] for j in idx), families=self.families)


@dataclass(frozen=True)
class RunInfo:
    """Per-run bookkeeping needed to go back to the run's own steps and units: the run's plan
    (:class:`~bayesgrpo.plan.RunPlan`: steps, horizon, interval, planned length, bounds) and its
    normalisation (``loc``, ``scale``)."""

    run_id: str
    s0: int
    last_step: int
    horizon: int
    interval: int
    loc: float
    scale: float
    n_obs: int
    refresh_interval: int
    model_name: str
    planned: int = 0
    reward_min: float = float("nan")
    reward_max: float = float("nan")
    bounds: str = ""  # "metadata", "inferred" or "" (unknown)

    def time_to_go(self, steps) -> np.ndarray:
        """Share of the planned run's time to go at ``steps``: 0 at the last observation, 1 at the planned
        end (and after it): how much of the calibration layer's widening a forecast at ``steps`` gets."""
        end = self.planned if self.planned > self.last_step else self.horizon
        go = (np.asarray(steps, dtype=float) - self.last_step) / max(1, end - self.last_step)
        return np.clip(go, 0.0, 1.0)

    def future_steps(self) -> np.ndarray:
        """Logged steps after the last observation, up to the horizon, at the run's interval."""
        return future_steps(last_step=self.last_step, horizon=self.horizon, interval=self.interval)

    def final_steps(self, final_window: float) -> np.ndarray:
        """Logged steps of the final window (:func:`bayesgrpo.plan.final_window_steps`)."""
        return final_window_steps(s0=self.s0, horizon=self.horizon, interval=self.interval, final_window=final_window)


NOISE_FLOOR = 0.02  # normalised units: a prior centre below 2% of the reward scale is not credible
SIGMA_M_FLOOR = 0.01  # normalised units: the measurement noise never falls below 1% of the reward scale
NOISE_FEW_POINTS = 0.3  # prior centre of the noise when there are too few differences to estimate it


def _noise_estimate(z: np.ndarray) -> float:
    if len(z) < 3:
        return NOISE_FEW_POINTS
    return float(max(noise_sd(z), NOISE_FLOOR))


def _family(meta_row) -> str:
    for key in ("family", "model"):
        v = meta_row.get(key)
        if isinstance(v, str) and v:
            return v
    return "unknown"


def normalisation(rewards, *, reward_min: float, reward_max: float, where: str = "the run") -> tuple[float, float]:
    """``(loc, scale)`` of a run's normalisation (module docstring): the start level, and the full range
    of the rewards floored at :data:`SCALE_FLOOR` of a known reward range. A constant curve of unknown
    range gets :data:`CONSTANT_SCALE` x |level| (x 1 at level 0) and a :class:`~bayesgrpo.errors.DataWarning`."""
    rn = np.asarray(rewards, dtype=float)
    loc = start_level(rn)
    # the full range of the prefix, not a robust one: the rare batches that already reach a high
    # reward (0/1-like rewards of few completions, a format reward that starts to switch on) are
    # what shows how far the run can rise before the rise
    scale = float(np.ptp(rn)) if np.ptp(rn) > 1e-12 * max(1.0, abs(loc)) else 0.0
    width = reward_max - reward_min if math.isfinite(reward_max) and math.isfinite(reward_min) else float("nan")
    if math.isfinite(width):
        scale = max(scale, SCALE_FLOOR * width)
    elif scale <= 0.0:
        scale = CONSTANT_SCALE * (abs(loc) if abs(loc) > 0 else 1.0)  # 10% of its level: a 1e-12 reward keeps its scale
        warnings.warn(
            f"{where}: the observed reward is constant ({loc:g}) and its range is unknown; the forecast's "
            f"width rests on an assumed scale of {scale:g} (give reward_min/reward_max or --reward-range "
            "for an honest one)",
            DataWarning,
            stacklevel=3,
        )
    return loc, scale


def _run_arrays(plan: RunPlan, s, r, rn, meta, *, where: str):
    """One run's normalised rewards, grid offsets, noise and start level, and its :class:`RunInfo`."""
    loc, scale = normalisation(rn, reward_min=plan.reward_min, reward_max=plan.reward_max, where=where)
    z = (r - loc) / scale
    zn = (np.asarray(rn, dtype=float) - loc) / scale  # the rows the normalisation comes from
    K = meta_number(meta, "refresh_interval")
    _, _, horizon = plan.span()
    info = RunInfo(
        run_id=plan.run_id, s0=int(s[0]), last_step=int(s[-1]), horizon=horizon, interval=plan.interval,
        loc=loc, scale=scale, n_obs=len(s), refresh_interval=int(K) if math.isfinite(K) and K >= 1 else 1,
        model_name=str(meta.get("model")) if isinstance(meta.get("model"), str) else "",
        planned=plan.planned if plan.planned is not None else horizon,
        reward_min=plan.reward_min, reward_max=plan.reward_max, bounds=plan.bounds,
    )  # fmt: skip
    floor = (plan.reward_min - loc) / scale if math.isfinite(plan.reward_min) else np.nan
    ceil = (plan.reward_max - loc) / scale if math.isfinite(plan.reward_max) else np.nan
    return z, s - s[0], _noise_estimate(zn), float(start_level(zn)), (floor, ceil), info


def prepare_arrays(
    runs: RunSet,
    *,
    plans: Plans | Mapping[str, RunPlan] | None = None,
    horizon=None,
    prior=None,
    normalize_with: RunSet | None = None,
    channels=(),
) -> tuple[ModelArrays, list[RunInfo]]:
    """Build model arrays and per-run info for every run of ``runs``.

    Parameters
    ----------
    runs : RunSet
        The observed runs (their logged prefix).
    plans : Plans, optional
        Their plans (:func:`bayesgrpo.plan.plan_runs` of exactly these rows); default: planned here
        with ``horizon``.
    horizon : int, dict or "next", optional
        The horizon of :func:`~bayesgrpo.plan.plan_runs` when no plans are given.
    prior : PopulationPrior, optional
        Where the momentum prior's centre for runs without a logged ``beta1`` comes from
        (``prior.mu_default``; default :data:`ADAM_BETA1`).
    normalize_with : RunSet, optional
        Compute each run's normalisation (loc, scale, noise estimate, inferred bounds) from these rows
        instead (used to fit complete runs in the units a forecast from their prefix would use; see
        :func:`bayesgrpo.forecast.population.fit_run_effects`).
    channels : sequence of str
        Spread channels to read (``reward_std``, ``frac_reward_zero_std``; module docstring); the others
        stay empty.

    Raises
    ------
    ForecastError
        A run that cannot be forecast (its plan's reason: too few points, no horizon, ...).
    """
    unknown = sorted(set(channels) - set(SPREAD_CHANNELS))
    if unknown:
        raise ValueError(f"unknown spread channel(s) {unknown}; choose from {', '.join(SPREAD_CHANNELS)}")
    if plans is None:
        plans = plan_runs(runs, horizon=horizon, bounds_from=normalize_with).require()
    mu_default = ADAM_BETA1 if prior is None else float(prior.mu_default)
    infos: list[RunInfo] = []
    zs: list = []
    offsets: list = []
    noises: list = []
    r0s: list = []
    floors: list = []
    fam_names: list[str] = []
    chans: list[dict] = []
    groups = dict(tuple(runs.data.groupby(RUN, sort=False)))
    for rid in runs.run_ids:
        plan = plans[rid]
        if not plan.ok:
            raise ForecastError(plan.error)
        s = groups[rid][STEP].to_numpy(dtype=np.int64)
        r = groups[rid][REWARD].to_numpy(dtype=float)
        rn = r if normalize_with is None else normalize_with.run(rid)[REWARD].to_numpy(dtype=float)
        where = run_where(runs, rid)
        z, off, noise, r0, floor, info = _run_arrays(plan, s, r, rn, runs.meta.loc[rid], where=where)
        for lst, v in ((zs, z), (offsets, off), (noises, noise), (r0s, r0), (floors, floor), (infos, info)):
            lst.append(v)
        fam_names.append(_family(runs.meta.loc[rid]))
        chans.append(_channel_inputs(groups[rid], runs.meta.loc[rid], channels, where, plan.reward_min,
                                     plan.reward_max, interval=plan.interval))  # fmt: skip
    return _assemble(runs, infos, zs, offsets, noises, r0s, floors, fam_names, mu_default, chans), infos


def _assemble(runs, infos, zs, offsets, noises, r0s, floors, fam_names, mu_default, chans) -> ModelArrays:
    from bayesgrpo.models.channels import channel_array

    T = max(int(o[-1]) + 1 for o in offsets)
    y = np.zeros((T, len(infos)))
    mask = np.zeros((T, len(infos)))
    for j, (z, o) in enumerate(zip(zs, offsets, strict=True)):
        y[o, j] = z
        mask[o, j] = 1.0
    fam_order = list(dict.fromkeys(fam_names))
    beta1 = np.array([meta_number(runs.meta.loc[i.run_id], "beta1") for i in infos])
    size = np.array([meta_number(runs.meta.loc[i.run_id], "params_b") for i in infos])
    size_known = (np.isfinite(size) & (size > 0)).astype(float)
    floor = np.array([f for f, _ in floors], dtype=float)
    ceil = np.array([c for _, c in floors], dtype=float)
    ch = np.stack([channel_array(c["steps"], c["reward"], c["spread"], c["zero_std"], s0=i.s0, T=T,
                                 groups=c["groups"], loc=i.loc, scale=i.scale)
                   for c, i in zip(chans, infos, strict=True)], axis=-1)  # fmt: skip
    width = np.array([c["width"] / i.scale for c, i in zip(chans, infos, strict=True)])
    return ModelArrays(
        y=y, mask=mask,
        refresh=np.array([i.refresh_interval for i in infos], dtype=np.int64),  # lag pattern: lag_sequence
        span=np.array([float(i.horizon - i.s0) for i in infos]), noise=np.array(noises),
        mu_mean=np.where(np.isnan(beta1), mu_default, np.clip(beta1, 0.01, 0.99)),
        mu_known=(~np.isnan(beta1)).astype(float),
        family_idx=np.array([fam_order.index(f) for f in fam_names], dtype=np.int64),
        log_size=np.where(size_known > 0, np.log(np.where(size_known > 0, size, 1.0) / REFERENCE_SIZE_B), 0.0),
        size_known=size_known, r0_obs=np.array(r0s),
        floor=np.where(np.isfinite(floor), floor, 0.0), floor_known=np.isfinite(floor).astype(float),
        ceil=np.where(np.isfinite(ceil), ceil, 0.0), ceil_known=np.isfinite(ceil).astype(float),
        fraction=np.array([(i.last_step - i.s0) / max(1, i.planned - i.s0) for i in infos]),
        channels=ch, group_size=np.array([c["G"] for c in chans], dtype=float),
        width=np.where(np.isfinite(width), width, 1.0), width_known=np.isfinite(width).astype(float),
        run_ids=tuple(i.run_id for i in infos), families=tuple(fam_order),
    )  # fmt: skip


#: the logged columns the spread channel reads (schema names, :mod:`bayesgrpo.schema`)
SPREAD_CHANNELS = ("reward_std", "frac_reward_zero_std")


def _channel_inputs(g, meta, channels, where: str, lo_b: float, hi_b: float, *, interval: int) -> dict:
    """One run's spread-channel inputs (module docstring): the logged values of the chosen channels (NaN where
    not logged or not valid: a negative spread, a share outside [0, 1] -- a :class:`DataWarning` names the
    run), G, the groups behind a logged point and the width ``U - L`` (NaN when a bound is unknown)."""
    from bayesgrpo.models.channels import DEFAULT_GROUP_SIZE

    n = len(g)
    G = meta_number(meta, "group_size")
    G = int(G) if math.isfinite(G) else DEFAULT_GROUP_SIZE
    B, ppp = meta_number(meta, "batch_size"), meta_number(meta, "prompts_per_step")
    per_step = ppp if math.isfinite(ppp) and ppp >= 1 else max(1.0, B / G) if math.isfinite(B) and G >= 1 else 1.0
    out = {"steps": g[STEP].to_numpy(dtype=np.int64), "reward": g[REWARD].to_numpy(dtype=float), "G": max(G, 2),
           "groups": per_step * interval, "width": hi_b - lo_b, "spread": np.full(n, np.nan),
           "zero_std": np.full(n, np.nan)}  # fmt: skip
    if G < 2:  # one completion per prompt: no group spread (e.g. PPO logs)
        return out
    for col, key, lo, hi in (("reward_std", "spread", 0.0, np.inf), ("frac_reward_zero_std", "zero_std", 0.0, 1.0)):
        if col not in channels or col not in g.columns:
            continue
        v = pd.to_numeric(g[col], errors="coerce").to_numpy(dtype=float)
        bad = np.isfinite(v) & ((v < lo) | (v > hi))
        if bad.any():
            warnings.warn(f"{where}: {int(bad.sum())} logged {col} value(s) outside [{lo:g}, {hi:g}] are left out of "
                          "the spread channel", DataWarning, stacklevel=3)  # fmt: skip
        out[key] = np.where(bad, np.nan, v)
    return out


def lag_sequence(info: RunInfo, steps_from_s0: np.ndarray) -> np.ndarray:
    """Lag d used in the transition out of each given grid step (refresh pattern or 0)."""
    if info.refresh_interval <= 1:
        return np.zeros(len(steps_from_s0), dtype=int)
    return np.mod(steps_from_s0, info.refresh_interval).astype(int)


class RunArrays:
    """The model arrays of a fit with each run on its own grid (no padding to the batch's longest run).

    A batch of 1,000 runs of very different lengths held as one ``(T, R)`` grid costs ``T_max x R``;
    here it costs the sum of the runs' own lengths. Reads like :class:`ModelArrays`:
    per-run vectors (``refresh``, ``fraction``, ...) are ``(R,)`` arrays, ``y`` and ``mask`` build the
    padded ``(T, R)`` grid on demand (when a forecast is saved). :meth:`run` gives one run's arrays.

    Parameters
    ----------
    parts : sequence of ModelArrays
        One single-run ``ModelArrays`` per run, each cut to its own grid (``ModelArrays.subset``).
    """

    def __init__(self, parts):
        self.parts = tuple(parts)
        self.run_ids = tuple(p.run_ids[0] for p in self.parts)
        self._index = {r: k for k, r in enumerate(self.run_ids)}
        if len(self._index) != len(self.run_ids):
            raise ForecastError("a run occurs twice in the arrays of a fit")
        self.families = tuple(dict.fromkeys(self._family(p) for p in self.parts))

    @staticmethod
    def _family(p: ModelArrays) -> str:
        return p.families[int(p.family_idx[0])] if len(p.families) else "unknown"

    @classmethod
    def of(cls, arrays) -> RunArrays:
        """Split a batch's ``ModelArrays`` into per-run grids (a ``RunArrays`` is returned as it is)."""
        if isinstance(arrays, RunArrays):
            return arrays
        return cls([arrays.subset([j]) for j in range(len(arrays.run_ids))])

    @classmethod
    def concat(cls, many) -> RunArrays:
        return cls([p for a in many for p in cls.of(a).parts])

    def __len__(self) -> int:
        return len(self.parts)

    def run(self, run_id: str) -> ModelArrays:
        """The arrays of one run: ``y``, ``mask`` of shape ``(T_run, 1)``, vectors of shape ``(1,)``."""
        return self.parts[self._index[run_id]]

    def index(self, run_id: str) -> int:
        return self._index[run_id]

    def __getattr__(self, name):
        if name == "channels":  # (C, T, R), padded like y
            T = max(p.y.shape[0] for p in self.parts)
            out = np.zeros(self.parts[0].channels.shape[:1] + (T, len(self.parts)))
            for j, p in enumerate(self.parts):
                out[:, : p.y.shape[0], j] = p.channels[:, :, 0]
            return out
        if name in DATA_VARS and name not in ("y", "mask"):
            if name == "family_idx":
                pos = {f: k for k, f in enumerate(self.families)}
                return np.array([pos[self._family(p)] for p in self.parts], dtype=np.int64)
            return np.concatenate([np.asarray(getattr(p, name)) for p in self.parts])
        raise AttributeError(name)

    def _grid(self, name: str) -> np.ndarray:
        T = max(p.y.shape[0] for p in self.parts)
        out = np.zeros((T, len(self.parts)))
        for j, p in enumerate(self.parts):
            out[: p.y.shape[0], j] = getattr(p, name)[:, 0]
        return out

    @property
    def y(self) -> np.ndarray:
        return self._grid("y")

    @property
    def mask(self) -> np.ndarray:
        return self._grid("mask")

    @property
    def nbytes(self) -> int:
        return sum(np.asarray(getattr(p, n)).nbytes for p in self.parts for n in DATA_VARS)

    def __getstate__(self):
        return {"parts": self.parts}

    def __setstate__(self, state):
        RunArrays.__init__(self, state["parts"])
