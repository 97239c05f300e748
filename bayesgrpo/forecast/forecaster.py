"""Forecasting verbs: ``Forecaster(...).fit(runs) -> FittedForecast`` -> table / paths / plot / save.

The posterior of each run's parameters comes from PyMC (NUTS through nutpie); everything after that
is exact numpy on the posterior draws: the Kalman filter (:mod:`bayesgrpo.models.kalman`) gives each draw's
filtered state at the last observation, latent paths are propagated forward with process noise, and
logged-reward paths add measurement noise. Quantities:

* **final reward** — the mean of the logged reward over the logged steps of the final window
  ``(s0 + (1 - w)(H - s0), H]`` (``w = final_window``, default 0.1) at the run's logging interval;
  already-logged points of the window enter as observed; the measurement noise of the average is
  included.
* **stop step** — the first step at which the *mean* trajectory (deterministic recursion from R0)
  has realised ``stop_fraction`` (default 95%) of its gain from R0 to the plateau; draws that never
  get there by the horizon are censored at the horizon (``p_stop_before_horizon`` is the share that
  does).

Speed: the likelihood is a compiled Kalman-filter Op with an exact gradient
(:mod:`bayesgrpo.models.kalman_op`); the model is compiled once per process by nutpie (numba) and each run's
data are swapped in with ``with_data`` (numbers in ``bench/results/speed.md``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import time
import warnings
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bayesgrpo.conventions import DEFAULT_FINAL_WINDOW, QUANTILES, quantile_column
from bayesgrpo.errors import ArtefactError, ForecastError, Interrupted, SamplerWarning
from bayesgrpo.forecast.calibration import Calibration, identity_calibration, leave_anchor
from bayesgrpo.forecast.paths import PathDraws
from bayesgrpo.inference import sampling
from bayesgrpo.inference.sampling import SamplerConfig
from bayesgrpo.models.arrays import RunInfo, prepare_arrays
from bayesgrpo.models.kinds import DATA_VARS, MODEL_KINDS, ModelArrays, get_kind
from bayesgrpo.models.prior import PopulationPrior
from bayesgrpo.physics.dynamics import is_stable, is_underdamped
from bayesgrpo.physics.stopping import DEFAULT_STOP_FRACTION
from bayesgrpo.schema import REWARD, STEP, RunSet

__all__ = ["SamplerConfig", "ForecastConfig", "Forecaster", "FittedForecast", "TABLE_COLUMNS", "PathDraws",
           "ARTEFACT_SCHEMA", "RunArrays", "STORED_VARS"]  # fmt: skip

log = logging.getLogger("bayesgrpo")

#: version of the saved-forecast format (:meth:`FittedForecast.save`); checked on load
ARTEFACT_SCHEMA = "bayesgrpo.forecast/2"
_READABLE_SCHEMAS = ("bayesgrpo.forecast/1", ARTEFACT_SCHEMA)

_FINAL_Q = [quantile_column("final", q) for q in QUANTILES]
TABLE_COLUMNS = [
    "run_id", "model", "observed_until", "n_obs", "horizon",
    "final_mean", *_FINAL_Q,
    "stop_q05", "stop_q50", "stop_q95", "p_stop_before_horizon",
    "plateau_q05", "plateau_q50", "plateau_q95",
    "p_underdamped", "p_unstable", "r_hat_max", "ess_min", "divergences", "seconds",
]  # fmt: skip
HEALTH_VARS = ("r0", "r_star", "tau", "sigma_m", "wander")
#: per-run posterior variables a fit keeps (what forecasts and health need; the non-centred z_* of
#: the sampler are dropped: 8 of 13 variables, a third less memory per run)
#: (every kind's forecast parameters, from the registry, plus the health variables)
STORED_VARS = tuple(dict.fromkeys([v for k in MODEL_KINDS.values() for v in k.param_names] + list(HEALTH_VARS)))
#: paths of at most this many runs are kept in memory at once (recomputed exactly on demand)
PATH_CACHE_RUNS = 16


class ForecastConfig(BaseModel):
    """What the user declared: model kind, prior, forecast definitions."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field("oscillator", description="a model kind of bayesgrpo.models.kinds.MODEL_KINDS")
    final_window: float = Field(DEFAULT_FINAL_WINDOW, gt=0.0, le=1.0)
    stop_fraction: float = Field(DEFAULT_STOP_FRACTION, gt=0.0, lt=1.0)
    hierarchical: bool = False
    prior: PopulationPrior = Field(description="the population prior (default: the packaged prior of the kind)")
    calibration: Calibration = Field(
        default_factory=identity_calibration,
        description="calibration layer of the final-reward draws (default: the packaged one of the kind)",
    )

    @model_validator(mode="before")
    @classmethod
    def _default_prior(cls, data):
        if isinstance(data, dict):
            kind = data.get("model", "oscillator")
            if data.get("prior") is None:
                data = {**data, "prior": PopulationPrior.default(kind)}
            if data.get("calibration") is None and "calibration" in data:
                data = {**data, "calibration": Calibration.default(kind)}
        return data

    @field_validator("model")
    @classmethod
    def _known_kind(cls, v: str) -> str:
        get_kind(v)  # ValueError naming the choices
        return v


class Forecaster:
    """Forecast GRPO reward curves with a physics-based Bayesian state-space model.

    Parameters
    ----------
    model : str
        A kind of :data:`bayesgrpo.models.kinds.MODEL_KINDS`: ``oscillator`` (default) is the
        damped-oscillator recursion of physics.md section 2; ``saturation`` its overdamped
        single-exponential limit (paper B); ``scaling`` the oscillator with the timescale's
        curvature-scaling exponent over model size (needs ``params_b``).
    final_window, stop_fraction : float
        Definitions of the final reward and the stop step (module docstring).
    hierarchical : bool
        Fit all runs (and ``context`` runs) in one joint graph that learns family offsets of the
        population hyperparameters (partial pooling by family). Off by default: ``context`` runs then
        sharpen the prior by empirical-Bayes pooling (cheaper, one compiled model).
    prior : PopulationPrior, optional
        Population prior (default: the packaged one of the kind, ``bayesgrpo/resources``).
    calibration : Calibration or bool
        The calibration layer of the final-reward distribution (:mod:`bayesgrpo.forecast.calibration`):
        ``True`` (default) the packaged layer of the kind, ``False`` none, or a layer.
    sampler : SamplerConfig, optional

    Examples
    --------
    >>> from bayesgrpo import Forecaster, read_runs                         # doctest: +SKIP
    >>> from bayesgrpo.resources import example_meta, example_run         # doctest: +SKIP
    >>> runs = read_runs(example_run(), meta=example_meta())              # doctest: +SKIP
    >>> fit = Forecaster().fit(runs.truncate(until_step=150))             # doctest: +SKIP
    >>> fit.table()[["run_id", "final_q10", "final_q50", "final_q90"]]    # doctest: +SKIP
    """

    def __init__(
        self,
        model: str = "oscillator",
        *,
        final_window: float = DEFAULT_FINAL_WINDOW,
        stop_fraction: float = DEFAULT_STOP_FRACTION,
        hierarchical: bool = False,
        prior: PopulationPrior | None = None,
        calibration: Calibration | bool | None = True,
        sampler: SamplerConfig | None = None,
    ):
        kw = dict(model=model, final_window=final_window, stop_fraction=stop_fraction, hierarchical=hierarchical)
        if prior is not None:
            kw["prior"] = prior
        if calibration is True:
            kw["calibration"] = None  # -> the packaged layer of the kind
        elif isinstance(calibration, Calibration):
            kw["calibration"] = calibration
        self.config = ForecastConfig(**kw)
        self.sampler = sampler or SamplerConfig()

    def fit(self, runs: RunSet, *, horizon=None, context: RunSet | None = None, progress=None) -> FittedForecast:
        """Fit the posterior of every run in ``runs`` (optionally pooled with complete ``context`` runs).

        Parameters
        ----------
        runs : RunSet
            Observed prefixes to forecast.
        horizon : int or dict, optional
            Step to forecast to (one for all, or per run id); default: metadata ``max_steps``.
        context : RunSet, optional
            Complete runs of related models (same source / family). By default each is fitted alone
            once and they sharpen the population prior of the forecast runs (empirical-Bayes pooling,
            :func:`bayesgrpo.models.prior.context_prior`; one compiled model serves it all); with
            ``hierarchical=True`` they are fitted jointly with the forecast runs in one hierarchical graph.
        progress : callable, optional
            Called as ``progress(n_done, n_total)`` after each batch.

        Returns
        -------
        FittedForecast

        Raises
        ------
        ForecastError
            A run has too few points or no horizon (message names the run).
        """
        cfg = self.config
        kind = get_kind(cfg.model)
        hierarchical = cfg.hierarchical
        all_runs = runs
        hz = horizon
        run_priors = {}
        if context is not None:
            clash = set(runs.run_ids) & set(context.run_ids)
            if clash:
                raise ForecastError(f"run(s) {sorted(clash)[:3]} are both forecast and given as --context")
        if context is not None and hierarchical:
            # the joint model: context runs fitted with the forecast runs in one hierarchical graph
            all_runs = runs.concat(context)
            ctx_h = {r: int(context.run(r)[STEP].iloc[-1]) + 1 for r in context.run_ids}
            if isinstance(horizon, dict):
                hz = {**horizon, **ctx_h}
            else:
                hz = {**{r: horizon for r in runs.run_ids}, **ctx_h}
        arrays, infos = prepare_arrays(all_runs, horizon=hz, prior=cfg.prior)
        if kind.degeneracy:
            lagged = [i.run_id for i in infos if i.refresh_interval > 1]
            if lagged:
                raise ForecastError(f"run {lagged[0]!r} has a refresh interval > 1; the {kind.name} kind models lag-free "
                                    "runs only (use --model oscillator for it)")  # fmt: skip
        log.info(
            "population prior %s; calibration %s; model %s", cfg.prior.identity, cfg.calibration.identity, cfg.model
        )
        if context is not None and not hierarchical:
            run_priors = self._context_priors(arrays, context)
        # hierarchical: one joint graph; otherwise each run alone (runs are independent given the
        # population prior), all through one compiled model whose data are swapped per run
        batches = [np.arange(len(infos))] if hierarchical else [np.array([j]) for j in range(len(infos))]
        posts, health, seconds = [], {}, {}
        try:
            self._sample(batches, arrays, kind, run_priors, posts, health, seconds, progress)
        except KeyboardInterrupt as e:  # Ctrl-C: the runs sampled so far are a fit, handed on with the interrupt
            done = [r for p in posts for r in p["run"].to_numpy().tolist()]
            if hierarchical or not done:
                raise Interrupted(partial=None) from e
            fit = self._assemble(all_runs.select(done), runs, infos, arrays, posts, health, seconds, run_priors)
            raise Interrupted(partial=fit) from e
        return self._assemble(all_runs, runs, infos, arrays, posts, health, seconds, run_priors)

    def _sample(self, batches, arrays, kind, run_priors, posts, health, seconds, progress) -> None:
        """Sample every batch of runs (one compiled model, data swapped), appending to ``posts``."""
        cfg = self.config
        hierarchical = cfg.hierarchical
        for done, b in enumerate(batches, start=1):
            sub = arrays.subset(b)
            t0 = time.perf_counter()
            # the graph is built with the population's default momentum centre: a compiled model (and
            # the support point its chains start from) never depends on the run it was first built for
            template = dataclasses.replace(sub, mu_mean=np.full(len(sub.run_ids), cfg.prior.mu_default))
            compiled = sampling.compile_model(
                kind.graph_key(sub, cfg.prior, hierarchical),
                functools.partial(kind.build, template, prior=cfg.prior, hierarchical=hierarchical),
                backend=self.sampler.backend,
            )
            prior_b = run_priors.get(sub.run_ids[0], cfg.prior) if len(b) == 1 else cfg.prior
            idata = sampling.nuts(compiled, data=sub.data(prior_b), sampler=self.sampler, required=kind.required_data,
                                  seed=sampling.batch_seed(self.sampler.seed, sub.run_ids))  # fmt: skip
            post = sampling.posterior_dataset(idata).assign_coords(run=list(sub.run_ids))
            if "family" in post.dims:
                post = post.assign_coords(family=list(sub.families))
            h = sampling.health(post, sampling.posterior_dataset(idata, "sample_stats"), var_names=HEALTH_VARS)
            dt = time.perf_counter() - t0
            posts.append(post[[v for v in post.data_vars if v in STORED_VARS or "run" not in post[v].dims]])
            for rid in sub.run_ids:
                health[rid] = h[rid]
                seconds[rid] = dt / len(b)
            if progress is not None:
                progress(done, len(batches))

    def _assemble(self, all_runs, runs, infos, arrays, posts, health, seconds, run_priors) -> FittedForecast:
        """The fit of the runs of ``all_runs`` (all of them, or those sampled before a Ctrl-C)."""
        import xarray as xr

        cfg = self.config
        keep = list(all_runs.run_ids)
        posterior = xr.concat(
            [p.drop_vars([v for v in p.data_vars if "run" not in p[v].dims]) for p in posts], dim="run"
        )
        posterior = posterior.sel(run=keep)
        hyper = posts[0][[v for v in posts[0].data_vars if "run" not in posts[0][v].dims]] if cfg.hierarchical else None
        idx = [list(arrays.run_ids).index(r) for r in keep]
        return FittedForecast(
            config=cfg, sampler=self.sampler, runs=all_runs, infos={i.run_id: i for i in infos if i.run_id in keep},
            arrays=RunArrays.of(arrays if len(idx) == len(arrays.run_ids) else arrays.subset(idx)),
            posterior=posterior, hyper=hyper, health={r: health[r] for r in keep},
            seconds={r: seconds[r] for r in keep}, forecast_ids=[r for r in runs.run_ids if r in set(keep)],
            context_priors={r: p.identity for r, p in run_priors.items() if r in set(keep)},
        )  # fmt: skip

    #: observed fractions at which context runs are refitted (a run's fraction is rounded to the grid)
    CONTEXT_GRID = 0.05

    def _context_priors(self, arrays: ModelArrays, context: RunSet) -> dict:
        """Per forecast run, the population prior pooled with the complete ``context`` runs
        (:func:`bayesgrpo.models.prior.context_prior`): each context run is fitted once per observed
        fraction (rounded to :attr:`CONTEXT_GRID`) in the units a forecast at that fraction uses."""
        from bayesgrpo.models.prior import context_prior, fit_run_effects

        fits, out = {}, {}
        for rid, f in zip(arrays.run_ids, arrays.fraction):
            fr = float(np.clip(round(float(f) / self.CONTEXT_GRID) * self.CONTEXT_GRID, self.CONTEXT_GRID, 0.9))
            if fr not in fits:
                smp = SamplerConfig(draws=300, tune=300, chains=self.sampler.chains, seed=self.sampler.seed)
                fits[fr] = fit_run_effects(context, fraction=fr, kind=self.config.model, sampler=smp)
            if fits[fr]:
                out[rid] = context_prior(self.config.prior, fits[fr], fraction=float(f),
                                         name=f"context-{len(fits[fr])}-runs")  # fmt: skip
        return out


#: at most this many future steps are stored per path (long horizons are thinned evenly; the final
#: window is accumulated exactly while propagating)
MAX_STORED_STEPS = 2000


def _thin(n: int, limit: int = MAX_STORED_STEPS) -> np.ndarray:
    """Indices of at most ``limit`` of ``n`` future steps, evenly spread, always the last one."""
    if n <= limit:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, limit)).astype(int))


def _draws(post, rid: str, name: str) -> np.ndarray:
    return post[name].sel(run=rid).to_numpy().reshape(-1)


class RunArrays:
    """The model arrays of a fit with each run on its own grid (no padding to the batch's longest run).

    A batch of 1,000 runs of very different lengths held as one ``(T, R)`` grid costs ``T_max x R``;
    here it costs the sum of the runs' own lengths. Reads like :class:`~bayesgrpo.models.kinds.ModelArrays`:
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
        self.__init__(state["parts"])


@dataclass
class FittedForecast:
    """A fitted forecast for a set of runs: tables, paths, plots, save/load.

    Obtained from :meth:`Forecaster.fit` or :meth:`FittedForecast.load`.
    """

    config: ForecastConfig
    sampler: SamplerConfig
    runs: RunSet
    infos: dict
    arrays: RunArrays
    posterior: object
    hyper: object
    health: dict
    seconds: dict
    forecast_ids: list
    context_priors: dict = field(default_factory=dict)
    _cache: OrderedDict = field(default_factory=OrderedDict, repr=False)
    _window: dict = field(default_factory=dict, repr=False)
    _rows: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        self.arrays = RunArrays.of(self.arrays)

    def __getstate__(self):
        # what a worker sends back: no cached paths (they are recomputed exactly on demand)
        state = dict(self.__dict__)
        state["_cache"], state["_window"] = OrderedDict(), {}
        return state

    @classmethod
    def merge(cls, parts) -> FittedForecast:
        """One fit from fits of disjoint sets of runs (e.g. one per worker), in the order given.

        The posterior is concatenated along ``run``; run data, infos, arrays, health, timings and the
        rows :meth:`table` already computed are joined. Fits with hyperparameters (a hierarchical
        joint fit) cannot be merged with others: their runs were not forecast independently.

        Raises
        ------
        ForecastError
            The fits differ in configuration or sampler settings, share a run, or one is hierarchical.
        """
        import xarray as xr

        parts = list(parts)
        if not parts:
            raise ForecastError("nothing to merge: no fit given")
        if len(parts) == 1:
            return parts[0]
        first = parts[0]
        for p in parts[1:]:
            if p.config != first.config or p.sampler != first.sampler:
                raise ForecastError("fits with different model, prior or sampler settings cannot be merged")
        if any(p.hyper is not None for p in parts):
            raise ForecastError("a hierarchical (pooled) fit cannot be merged with other fits")
        ids = [r for p in parts for r in p.forecast_ids]
        if len(set(ids)) != len(ids):
            raise ForecastError("the fits to merge share a run")
        runs = RunSet(pd.concat([p.runs.data for p in parts], ignore_index=True),
                      pd.concat([p.runs.meta for p in parts]), first.runs.source, True)  # fmt: skip
        posterior = xr.concat([p.posterior for p in parts], dim="run", join="override", combine_attrs="drop_conflicts")
        out = cls(
            config=first.config, sampler=first.sampler, runs=runs,
            infos={k: v for p in parts for k, v in p.infos.items()},
            arrays=RunArrays.concat([p.arrays for p in parts]), posterior=posterior, hyper=None,
            health={k: v for p in parts for k, v in p.health.items()},
            seconds={k: v for p in parts for k, v in p.seconds.items()}, forecast_ids=ids,
            context_priors={k: v for p in parts for k, v in p.context_priors.items()},
        )  # fmt: skip
        out._rows.update({k: v for p in parts for k, v in p._rows.items()})
        return out

    # ------------------------------------------------------------ per-run predictive draws
    def _params(self, run_id: str) -> dict:
        return {k: _draws(self.posterior, run_id, k) for k in get_kind(self.config.model).param_names}

    def paths(self, run_id: str) -> PathDraws:
        """Posterior predictive draws of the run's future logged steps (its own units).

        The future starts from each draw's filtered state at the last observation (Kalman filter of
        the observed prefix), is propagated with process noise, and the logged reward adds
        measurement noise. The stop step per draw is the settling step of the mean trajectory
        (:mod:`bayesgrpo.physics.stopping`), in absolute steps, censored at the horizon.
        """
        if run_id in self._cache:
            self._cache.move_to_end(run_id)
            return self._cache[run_id]
        if run_id not in self.infos:
            raise KeyError(f"no forecast for run {run_id!r}; runs: {self.forecast_ids[:10]}")
        info: RunInfo = self.infos[run_id]
        arr = self.arrays.run(run_id)
        p = self._params(run_id)
        T = info.last_step - info.s0 + 1
        y = arr.y[:T, 0]
        mask = arr.mask[:T, 0].astype(bool)
        kind = get_kind(self.config.model)
        K = info.refresh_interval
        # seeded by the run id, not its position: the same numbers whichever runs share the fit
        rng = np.random.default_rng([self.sampler.seed, zlib.crc32(run_id.encode()), 7])
        n_future = info.horizon - info.last_step
        fut = info.future_steps()  # logged future steps
        keep = _thin(fut.size)
        win = info.final_steps(self.config.final_window)
        in_win = np.zeros(n_future, dtype=bool)
        in_win[np.intersect1d(win, fut) - info.last_step - 1] = True
        m, P = kind.filter_last(y, mask, p, K)
        x, win_sum = kind.propagate(m, P, n_future, p, K=K, n_last=T - 1, rng=rng,
                                    store=fut[keep] - info.last_step - 1, accumulate=in_win)  # fmt: skip
        fut = fut[keep]
        latent_z = x.T + p["r_star"][:, None]  # (draws, stored future steps)
        obs_z = latent_z + p["sigma_m"][:, None] * rng.standard_normal(latent_z.shape)
        n_win = int(in_win.sum())
        # the logged future points of the final window: their latent sum plus the measurement noise of n_win points
        self._window[run_id] = (
            (win_sum + n_win * p["r_star"] + np.sqrt(n_win) * p["sigma_m"] * rng.standard_normal(win_sum.shape))
            * info.scale
            + n_win * info.loc,
            n_win,
        )
        sc, lo = info.scale, info.loc
        n_steps = info.horizon - info.s0
        stop, reached = kind.stop(p, n_steps=n_steps, fraction=self.config.stop_fraction, K=K)
        observed = obs_z * sc + lo
        latent_run = latent_z * sc + lo
        cal = self.config.calibration
        latent_now = (m[..., 0] + p["r_star"]) * sc + lo
        if cal.name != "identity":
            # the layer's widening grows with the time to go: none at the last observation, all of it at the horizon
            frac = float(arr.fraction[0])
            tau_go = info.time_to_go(fut)  # pro rata of the planned run: one forecast, read at any step
            w_dn, w_up = cal.widths(frac)
            if (w_dn, w_up) != (1.0, 1.0):  # the width ratios (an additive layer has none)
                for arr_ in (observed, latent_run):
                    med = np.median(arr_, axis=0, keepdims=True)
                    d = arr_ - med
                    arr_[...] = med + d * (1.0 + (np.where(d > 0, w_up, w_dn) - 1.0) * tau_go[None, :])
            if cal.c_up:  # the additive tails, growing with the time to go like the widths
                for arr_ in (observed, latent_run):
                    arr_[...] = cal.stretch(arr_, fraction=frac, scale=sc, go=tau_go[None, :], axis=0)
            # the draws that leave the regime go (linearly in time) from where they are now to where they end
            idx, end = cal.leave(latent_run.shape[0], fraction=frac, **self._leave_anchor(run_id))
            if idx.size:
                new = latent_now[idx, None] + (end - latent_now[idx])[:, None] * tau_go[None, :]
                observed[idx] += new - latent_run[idx]
                latent_run[idx] = new
        r_star = p["r_star"] * sc + lo
        if info.bounds:  # neither a logged reward nor the latent reward (nor its plateau) leaves the reward's range
            lims = (info.reward_min if np.isfinite(info.reward_min) else -np.inf,
                    info.reward_max if np.isfinite(info.reward_max) else np.inf)  # fmt: skip
            observed, latent_run = np.clip(observed, *lims), np.clip(latent_run, *lims)
            latent_now, r_star = np.clip(latent_now, *lims), np.clip(r_star, *lims)
        out = PathDraws(
            run_id=run_id, steps=fut, observed=observed, latent=latent_run,
            r0=p["r0"] * sc + lo, r_star=r_star, tau=p["tau"], a=p["a"], mu=p["mu"],
            sigma_p=p["sigma_p"] * sc, sigma_m=p["sigma_m"] * sc, last_step=info.last_step,
            horizon=info.horizon - info.last_step,  # PathDraws counts the horizon from last_step
            interval=info.interval, latent_now=latent_now,
            refresh_interval=info.refresh_interval if info.refresh_interval > 1 else None,
            stop_step=info.s0 + stop, stop_reached=reached,
        )  # fmt: skip
        self._cache[run_id] = out
        while len(self._cache) > PATH_CACHE_RUNS:  # bounded: a fit of 1,000 runs never holds 1,000 paths
            old, _ = self._cache.popitem(last=False)
            self._window.pop(old, None)
        return out

    def _leave_anchor(self, run_id: str) -> dict:
        """Where a draw that leaves the regime starts and how low it may end (``leave_anchor``); nothing
        when the layer lets no draw leave (the prefix is then not read: this runs for every forecast)."""
        if not self.config.calibration.p_leave:
            return {}
        info: RunInfo = self.infos[run_id]
        level, floor = leave_anchor(self.runs.run(run_id)[REWARD].to_numpy(), info.reward_min)
        return {"level": level, "floor": floor}

    def final_draws(self, run_id: str) -> np.ndarray:
        """Draws of the final reward (mean logged reward over the final window), run units.

        Already-logged points of the window enter as observed; the future logged points of the window
        are accumulated while the paths are propagated (so a long horizon never holds every path).
        """
        info: RunInfo = self.infos[run_id]
        if run_id not in self._window:
            self.paths(run_id)
        fut_sum, n_fut = self._window[run_id]
        win = info.final_steps(self.config.final_window)
        obs = self.runs.run(run_id)
        obs_in = obs.loc[obs[STEP].isin(win[win <= info.last_step]), REWARD].to_numpy()
        n = len(obs_in) + n_fut
        if n == 0:
            raise ForecastError(f"run {run_id!r}: the final window holds no logged step; widen --final-window")
        out = (obs_in.sum() + fut_sum) / n
        frac, go = float(self.arrays.run(run_id).fraction[0]), float(info.time_to_go(info.horizon))
        out = self.config.calibration.apply(out, fraction=frac, scale=info.scale, go=go, **self._leave_anchor(run_id))
        if info.bounds:  # the mean of logged rewards stays inside the reward's range
            out = np.clip(out, info.reward_min if np.isfinite(info.reward_min) else -np.inf,
                          info.reward_max if np.isfinite(info.reward_max) else np.inf)  # fmt: skip
        return out

    def stop_draws(self, run_id: str) -> tuple[np.ndarray, np.ndarray]:
        """(stop step per draw in absolute steps, censored at the horizon; settled-before-horizon flag)."""
        pd_ = self.paths(run_id)
        return pd_.stop_step, pd_.stop_reached

    # ------------------------------------------------------------ tables
    def table(self) -> pd.DataFrame:
        """One row per forecast run with the contract columns (:data:`TABLE_COLUMNS`)."""
        rows = []
        for rid in self.forecast_ids:
            if rid not in self._rows:
                self._rows[rid] = self._row(rid)
            rows.append(self._rows[rid])
        return pd.DataFrame(rows, columns=TABLE_COLUMNS)

    def _row(self, rid: str) -> dict:
        """The table row of one run (cached: a merged fit carries the rows its parts computed)."""
        from bayesgrpo.decisions.budget import stop_quantile

        info: RunInfo = self.infos[rid]
        fin = self.final_draws(rid)
        pd_ = self.paths(rid)
        qf = np.quantile(fin, QUANTILES)
        qp = np.quantile(pd_.r_star, [0.05, 0.5, 0.95])
        h = self.health[rid]
        row = dict(
            run_id=rid, model=self.config.model, observed_until=info.last_step, n_obs=info.n_obs,
            horizon=info.horizon, final_mean=float(fin.mean()),
            **{c: float(v) for c, v in zip(_FINAL_Q, qf)},
            stop_q05=stop_quantile(pd_, 0.05), stop_q50=stop_quantile(pd_, 0.5), stop_q95=stop_quantile(pd_, 0.95),
            p_stop_before_horizon=float(pd_.stop_reached.mean()),
            plateau_q05=qp[0], plateau_q50=qp[1], plateau_q95=qp[2],
            p_underdamped=float(is_underdamped(pd_.a, pd_.mu).mean()),
            p_unstable=float((~is_stable(pd_.a, pd_.mu, refresh_interval=pd_.refresh_interval)).mean()),
            r_hat_max=h["r_hat_max"], ess_min=h["ess_min"], divergences=h["divergences"],
            seconds=self.seconds.get(rid, np.nan),
        )  # fmt: skip
        return row

    def path_quantiles(self, run_id: str, probs=QUANTILES) -> pd.DataFrame:
        """Quantiles of the logged reward (``yhat_qNN``), its median ``yhat`` and the latent mean per future step."""
        pd_ = self.paths(run_id)
        out = pd.DataFrame({STEP: pd_.steps})
        for p in probs:
            out[quantile_column("yhat", p)] = np.quantile(pd_.observed, p, axis=0)
        out["yhat"] = np.median(pd_.observed, axis=0)
        out["latent_mean"] = pd_.latent.mean(axis=0)
        return out

    def health_status(self, run_id: str) -> tuple[str, str]:
        """``("ok", "")``, or ``("warning", reason)`` when the run's sampler health is poor enough to
        doubt its numbers (:data:`~bayesgrpo.inference.sampling.STATUS_HEALTH`)."""
        t = sampling.STATUS_HEALTH
        n = self.sampler.draws * self.sampler.chains
        r_hat = t["r_hat"] + t["r_hat_per_draw"] / self.sampler.draws
        ess = min(t["ess"], t["ess_share"] * n)
        bad = sampling.health_problems(
            self.health[run_id], r_hat=r_hat, ess=ess, max_divergences=t["divergent_share"] * n
        )
        if not bad:
            return "ok", ""
        return "warning", f"sampler health: {'; '.join(bad)}; rerun with more --draws/--tune before trusting it"

    def warn_health(self, *, r_hat: float = 1.01, ess: float = 200.0) -> list[str]:
        """Emit a :class:`SamplerWarning` per run whose sampler health is poor; return the messages."""
        msgs = []
        for rid in self.forecast_ids:
            bad = sampling.health_problems(self.health[rid], r_hat=r_hat, ess=ess)
            if bad:
                msg = f"run {rid!r}: sampler health is poor ({'; '.join(bad)}); treat its intervals with care or rerun with more --draws/--tune"
                warnings.warn(msg, SamplerWarning, stacklevel=2)
                msgs.append(msg)
        return msgs

    def plot(self, run_id: str, *, ax=None, truth=None):
        """Fan chart of one run (:func:`bayesgrpo.plots.fan_chart`); returns the Figure."""
        from bayesgrpo.plots.fan import fan_chart

        return fan_chart(self, run_id, ax=ax, truth=truth)

    # ------------------------------------------------------------ persistence
    def to_datatree(self):
        """A self-describing ``xarray.DataTree``: posterior, fit data, per-run info, config in attrs."""
        import xarray as xr

        runs_ds = self.runs.to_xarray()
        info_df = pd.DataFrame([vars(i) for i in self.infos.values()]).set_index("run_id")
        info_ds = xr.Dataset.from_dataframe(info_df).rename({"run_id": "run"})
        hd = pd.DataFrame(self.health).T
        hd["seconds"] = pd.Series(self.seconds)
        hd.index.name = "run"
        health_ds = xr.Dataset.from_dataframe(hd.astype(float))
        arr = self.arrays
        const = xr.Dataset(
            {
                "y": (("step_grid", "run"), arr.y), "mask": (("step_grid", "run"), arr.mask),
                "refresh": ("run", arr.refresh),
                "span": ("run", arr.span), "noise": ("run", arr.noise), "mu_mean": ("run", arr.mu_mean),
                "mu_known": ("run", arr.mu_known), "family_idx": ("run", arr.family_idx),
                "log_size": ("run", arr.log_size), "r0_obs": ("run", arr.r0_obs), "size_known": ("run", arr.size_known),
                "floor": ("run", arr.floor), "floor_known": ("run", arr.floor_known), "fraction": ("run", arr.fraction),
                "ceil": ("run", arr.ceil), "ceil_known": ("run", arr.ceil_known),
            },
            coords={"run": list(arr.run_ids)},
        )  # fmt: skip
        groups = {
            "posterior": self.posterior,
            "constant_data": const,
            "fit_data": runs_ds,
            "run_info": info_ds,
            "sampler_health": health_ds,
        }
        if self.hyper is not None:
            groups["hyperparameters"] = self.hyper
        dt = xr.DataTree.from_dict(groups)
        dt.attrs["bayesgrpo_schema"] = ARTEFACT_SCHEMA
        dt.attrs["bayesgrpo_config"] = self.config.model_dump_json()
        dt.attrs["bayesgrpo_sampler"] = self.sampler.model_dump_json()
        dt.attrs["population_prior"] = self.config.prior.identity
        dt.attrs["calibration"] = self.config.calibration.identity
        dt.attrs["families"] = json.dumps(list(arr.families))
        dt.attrs["forecast_ids"] = json.dumps(self.forecast_ids)
        from bayesgrpo import __version__

        dt.attrs["bayesgrpo_version"] = __version__
        return dt

    def save(self, path) -> None:
        """Write one self-describing netCDF file (needs h5netcdf + h5py), atomically: a failure leaves
        no partial file behind."""
        from bayesgrpo.io.output import atomic_path

        with atomic_path(path) as tmp:
            self.to_datatree().to_netcdf(str(tmp), engine="h5netcdf")

    @classmethod
    def load(cls, path) -> FittedForecast:
        """Load a file written by :meth:`save`; forecasts from it are identical to the original's.

        Reads the current format (:data:`ARTEFACT_SCHEMA`) and the format of bayesgrpo 0.1 (no
        schema attribute; a test keeps such a file). Raises :class:`~bayesgrpo.errors.ArtefactError`
        for files that are not bayesgrpo forecasts or come from an unknown (newer) format.
        """
        import xarray as xr

        try:
            dt = xr.open_datatree(str(path), engine="h5netcdf").load()
        except (OSError, ValueError) as e:
            raise ArtefactError(f"{path}: not a readable netCDF forecast file ({type(e).__name__}: {e})") from None
        if "bayesgrpo_config" not in dt.attrs:
            raise ArtefactError(f"{path}: not a saved bayesgrpo forecast (no bayesgrpo_config attribute)")
        schema = dt.attrs.get("bayesgrpo_schema", "bayesgrpo.forecast/1")
        if schema not in _READABLE_SCHEMAS:
            raise ArtefactError(
                f"{path}: saved in format {schema!r}, which this bayesgrpo ({_version()}) cannot read "
                f"(it reads {', '.join(_READABLE_SCHEMAS)}); upgrade bayesgrpo or refit"
            )
        cfg = ForecastConfig.model_validate_json(dt.attrs["bayesgrpo_config"])
        smp = SamplerConfig.model_validate_json(dt.attrs["bayesgrpo_sampler"])
        runs = RunSet.from_xarray(dt["fit_data"].to_dataset())
        info_df = dt["run_info"].to_dataset().to_dataframe()
        infos = {}
        for rid, row in info_df.iterrows():
            infos[str(rid)] = RunInfo(
                run_id=str(rid), s0=int(row.s0), last_step=int(row.last_step), horizon=int(row.horizon),
                interval=int(row["interval"]), loc=float(row["loc"]), scale=float(row["scale"]), n_obs=int(row["n_obs"]),
                refresh_interval=int(row.refresh_interval), model_name=str(row.model_name),
                planned=int(row["planned"]) if "planned" in row.index else int(row.horizon),
                reward_min=float(row["reward_min"]) if "reward_min" in row.index else float("nan"),
                reward_max=float(row["reward_max"]) if "reward_max" in row.index else float("nan"),
                bounds=str(row["bounds"]) if "bounds" in row.index and isinstance(row["bounds"], str) else "",
            )  # fmt: skip
        c = dt["constant_data"].to_dataset()
        run_order = [str(r) for r in c["run"].to_numpy()]
        if "refresh" in c:
            refresh = c["refresh"].to_numpy().astype(np.int64)
        else:  # format 1 stored a lag one-hot: K from the run info
            refresh = np.array([infos[r].refresh_interval for r in run_order], dtype=np.int64)
        arr = ModelArrays(
            y=c["y"].to_numpy(), mask=c["mask"].to_numpy(), refresh=refresh,
            span=c["span"].to_numpy(), noise=c["noise"].to_numpy(), mu_mean=c["mu_mean"].to_numpy(),
            mu_known=c["mu_known"].to_numpy(), family_idx=c["family_idx"].to_numpy(),
            log_size=c["log_size"].to_numpy(), r0_obs=c["r0_obs"].to_numpy(),
            **{n: c[n].to_numpy() for n in ("size_known", "floor", "floor_known", "ceil", "ceil_known", "fraction")
               if n in c},
            run_ids=tuple(run_order), families=tuple(json.loads(dt.attrs["families"])),
        )  # fmt: skip
        hd = dt["sampler_health"].to_dataset().to_dataframe()
        health = {
            str(r): {"r_hat_max": float(v.r_hat_max), "ess_min": float(v.ess_min), "divergences": int(v.divergences)}
            for r, v in hd.iterrows()
        }
        seconds = {str(r): float(v.seconds) for r, v in hd.iterrows()}
        hyper = dt["hyperparameters"].to_dataset() if "hyperparameters" in dt.children else None
        return cls(
            config=cfg, sampler=smp, runs=runs, infos=infos, arrays=arr,
            posterior=dt["posterior"].to_dataset(), hyper=hyper, health=health, seconds=seconds,
            forecast_ids=json.loads(dt.attrs["forecast_ids"]),
        )  # fmt: skip


def _version() -> str:
    from bayesgrpo import __version__

    return __version__
