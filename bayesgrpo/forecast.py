"""Forecasting verbs: ``Forecaster(...).fit(runs) -> FittedForecast`` -> table / paths / plot / save.

The posterior of each run's parameters comes from PyMC (NUTS through nutpie); everything after that
is exact numpy on the posterior draws: the Kalman filter (:mod:`bayesgrpo.kalman`) gives each draw's
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
(:mod:`bayesgrpo.kalman_op`); the model is compiled once per process by nutpie (numba) and each run's
data are swapped in with ``with_data`` (numbers in ``bench/results/speed.md``).
"""

from __future__ import annotations

import json
import logging
import time
import warnings
import zlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from bayesgrpo.decisions import PathDraws
from bayesgrpo.errors import ForecastError, SamplerWarning
from bayesgrpo.kalman import filter_numpy, filter_refresh_numpy, propagate_numpy, propagate_refresh_numpy
from bayesgrpo.models import MODEL_KINDS, ModelArrays, build_model
from bayesgrpo.population import PopulationPrior
from bayesgrpo.prepare import RunInfo, prepare_arrays
from bayesgrpo.schema import REWARD, STEP, RunSet

__all__ = ["SamplerConfig", "ForecastConfig", "Forecaster", "FittedForecast", "TABLE_COLUMNS", "PathDraws"]

log = logging.getLogger("bayesgrpo")

TABLE_COLUMNS = [
    "run_id", "model", "observed_until", "n_obs", "horizon",
    "final_mean", "final_q05", "final_q10", "final_q25", "final_q50", "final_q75", "final_q90", "final_q95",
    "stop_q05", "stop_q50", "stop_q95", "p_stop_before_horizon",
    "plateau_q05", "plateau_q50", "plateau_q95",
    "p_underdamped", "p_unstable", "r_hat_max", "ess_min", "divergences", "seconds",
]  # fmt: skip
HEALTH_VARS = ("r0", "r_star", "tau", "sigma_m", "wander")
PAD_RUN = "__pad__"


class SamplerConfig(BaseModel):
    """NUTS settings (nutpie through ``pm.sample``); kept apart from the model configuration."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    draws: int = Field(1000, ge=10)
    tune: int = Field(800, ge=10)
    chains: int = Field(2, ge=1)
    target_accept: float = Field(0.95, gt=0.5, lt=1.0)
    low_rank_mass_matrix: bool = Field(
        True, description="adapt a low-rank mass matrix (captures the plateau-timescale correlation)"
    )
    backend: str = Field(
        "numba", pattern="^(jax|numba)$",
        description="backend nutpie compiles the model to; only numba runs the compiled Kalman likelihood Op",
    )  # fmt: skip
    seed: int = 0


class ForecastConfig(BaseModel):
    """What the user declared: model kind, prior, forecast definitions."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field("oscillator", pattern="^(" + "|".join(MODEL_KINDS) + ")$")
    final_window: float = Field(0.1, gt=0.0, le=1.0)
    stop_fraction: float = Field(0.95, gt=0.0, lt=1.0)
    hierarchical: bool = False
    prior: PopulationPrior = Field(default_factory=PopulationPrior.default)


class Forecaster:
    """Forecast GRPO reward curves with a physics-based Bayesian state-space model.

    Parameters
    ----------
    model : {"oscillator", "saturation", "scaling"}
        ``oscillator`` (default) is the damped-oscillator recursion of physics.md section 2;
        ``saturation`` its overdamped single-exponential limit (paper B); ``scaling`` the oscillator
        with the timescale's curvature-scaling exponent over model size (needs ``params_b``).
    final_window, stop_fraction : float
        Definitions of the final reward and the stop step (module docstring).
    hierarchical : bool
        Learn the population hyperparameters from the runs given (partial pooling by family).
        Switched on automatically when ``context`` runs are passed to :meth:`fit`.
    prior : PopulationPrior, optional
        Population prior (default: the shipped one, ``models/population_prior.json``).
    sampler : SamplerConfig, optional

    Examples
    --------
    >>> from bayesgrpo import Forecaster, read_runs                         # doctest: +SKIP
    >>> runs = read_runs("data/examples/example_run.csv")                 # doctest: +SKIP
    >>> fit = Forecaster().fit(runs.truncate(fraction=0.3), horizon=300)  # doctest: +SKIP
    >>> fit.table()[["run_id", "final_q10", "final_q50", "final_q90"]]    # doctest: +SKIP
    """

    def __init__(
        self,
        model: str = "oscillator",
        *,
        final_window: float = 0.1,
        stop_fraction: float = 0.95,
        hierarchical: bool = False,
        prior: PopulationPrior | None = None,
        sampler: SamplerConfig | None = None,
    ):
        kw = dict(model=model, final_window=final_window, stop_fraction=stop_fraction, hierarchical=hierarchical)
        if prior is not None:
            kw["prior"] = prior
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
            Complete runs of related models; fitted jointly in one hierarchical graph, so their
            information reaches ``runs`` through the family/population hyperparameters.
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
        hierarchical = cfg.hierarchical or context is not None
        all_runs = runs
        hz = horizon
        if context is not None:
            clash = set(runs.run_ids) & set(context.run_ids)
            if clash:
                raise ForecastError(f"run(s) {sorted(clash)[:3]} are both forecast and given as --context")
            all_runs = runs.concat(context)
            ctx_h = {r: int(context.run(r)[STEP].iloc[-1]) + 1 for r in context.run_ids}
            if isinstance(horizon, dict):
                hz = {**horizon, **ctx_h}
            else:
                hz = {**{r: horizon for r in runs.run_ids}, **ctx_h}
        arrays, infos = prepare_arrays(all_runs, horizon=hz, prior=cfg.prior)
        # hierarchical: one joint graph; otherwise each run alone (runs are independent given the
        # population prior), all through one compiled model whose data are swapped per run
        batches = [np.arange(len(infos))] if hierarchical else [np.array([j]) for j in range(len(infos))]
        posts, health, seconds = [], {}, {}
        for done, b in enumerate(batches, start=1):
            sub = _subset(arrays, b)
            t0 = time.perf_counter()
            post, h = _sample(sub, kind=cfg.model, prior=cfg.prior, hierarchical=hierarchical, sampler=self.sampler)
            dt = time.perf_counter() - t0
            posts.append(post.drop_sel(run=PAD_RUN) if PAD_RUN in sub.run_ids else post)
            for rid in sub.run_ids:
                if rid != PAD_RUN:
                    health[rid] = h[rid]
                    seconds[rid] = dt / len(b)
            if progress is not None:
                progress(done, len(batches))
        import xarray as xr

        posterior = xr.concat([p.drop_vars([v for v in p.data_vars if "run" not in p[v].dims]) for p in posts], dim="run")
        posterior = posterior.sel(run=[r for r in arrays.run_ids])
        hyper = posts[0][[v for v in posts[0].data_vars if "run" not in posts[0][v].dims]] if hierarchical else None
        keep = list(runs.run_ids)
        return FittedForecast(
            config=cfg,
            sampler=self.sampler,
            runs=all_runs,
            infos={i.run_id: i for i in infos},
            arrays=arrays,
            posterior=posterior,
            hyper=hyper,
            health=health,
            seconds=seconds,
            forecast_ids=keep,
        )


def _subset(arr: ModelArrays, idx) -> ModelArrays:
    idx = np.asarray(idx)
    T = int(max(np.nonzero(arr.mask[:, j])[0].max() for j in idx)) + 1
    fields = dict(
        y=arr.y[:T, idx], mask=arr.mask[:T, idx], refresh=arr.refresh[idx],
        span=arr.span[idx], noise=arr.noise[idx], mu_mean=arr.mu_mean[idx], mu_known=arr.mu_known[idx],
        family_idx=arr.family_idx[idx], log_size=arr.log_size[idx], r0_obs=arr.r0_obs[idx],
        run_ids=tuple(arr.run_ids[j] for j in idx), families=arr.families,
    )  # fmt: skip
    if len(idx) == 1:
        # Pad a batch of one run with a fully masked dummy run (it only contributes its prior; the
        # kernels skip it). The scan filter needed this (a static run axis of length 1 broke its
        # inner types); the compiled Ops do not (a one-run model compiled and sampled in a check),
        # but dropping the pad changes every forecast's sampler stream, so it stays for now.
        pad = {k: np.concatenate([v, v[..., :1] if v.ndim == 1 else v[:, :1]], axis=1 if v.ndim > 1 else 0)
               for k, v in fields.items() if isinstance(v, np.ndarray)}  # fmt: skip
        pad["mask"][:, 1] = 0.0
        pad["y"][:, 1] = 0.0
        fields.update(pad)
        fields["run_ids"] = fields["run_ids"] + (PAD_RUN,)
    return ModelArrays(**fields)


_COMPILED: dict = {}


def _compiled_model(arr: ModelArrays, *, kind, prior, hierarchical, backend):
    """nutpie-compiled model for this graph structure, compiled once per process and reused.

    The graph depends on the model kind, the prior constants and (hierarchical only) the numbers of
    runs and families; data, the refresh interval of each run included, enter as ``pm.Data`` and are
    swapped with ``with_data``, so lag-free and lagged runs share one compiled model (the likelihood
    is the compiled refresh-interval Kalman Op, :mod:`bayesgrpo.kalman_op`). Calling nutpie directly
    (not ``pm.sample``) is what makes this reuse possible: ``pm.sample`` compiles anew on every call
    (15-25 s here).
    """
    import nutpie

    if backend != "numba":
        raise ValueError(
            f"backend={backend!r}: the Kalman likelihood is a numba-compiled Op with no JAX implementation; use backend='numba'"
        )
    key = (kind, prior.model_dump_json(), hierarchical)
    if hierarchical:
        key += (arr.y.shape[1], len(arr.families))
    if key not in _COMPILED:
        model = build_model(arr, kind=kind, prior=prior, hierarchical=hierarchical)
        log.info("compiling the %s model (%s backend)", kind, backend)
        _COMPILED[key] = nutpie.compile_pymc_model(model, backend=backend)
    return _COMPILED[key]


def _nuts(compiled, arr: ModelArrays, sampler: SamplerConfig, seed: int):
    """Swap the batch's data into the compiled model and run NUTS; return the posterior DataTree."""
    import nutpie

    names = ("y", "mask", "refresh", "span", "noise", "r0_obs", "family_idx", "log_size", "mu_mean", "mu_known")
    # nutpie's numba models key their shared data by random ids and match ``with_data`` by variable name
    known = {v.name for v in getattr(compiled, "shared_var_keys", ())}
    if not {"y", "mask", "refresh"} <= known:  # never sample a run with another run's data or lag pattern
        raise RuntimeError(f"compiled model lacks the data variables y/mask/refresh (has {sorted(known)})")
    cm = compiled.with_data(**{n: getattr(arr, n) for n in names if n in known})
    extra = {"adaptation": "low_rank"} if sampler.low_rank_mass_matrix else {}
    return nutpie.sample(
        cm, draws=sampler.draws, tune=sampler.tune, chains=sampler.chains, cores=min(sampler.chains, 2),
        target_accept=sampler.target_accept, seed=seed, progress_bar=False, **extra,
    )  # fmt: skip


def _sample(arr: ModelArrays, *, kind, prior, hierarchical, sampler: SamplerConfig):
    """One NUTS run for a batch; returns the posterior Dataset (coords set) and per-run health."""
    import arviz as az

    compiled = _compiled_model(arr, kind=kind, prior=prior, hierarchical=hierarchical, backend=sampler.backend)
    # a per-run seed that does not depend on which other runs are in the call (reproducible forecasts)
    seed = int(np.random.default_rng([sampler.seed, zlib.crc32("\x1f".join(arr.run_ids).encode())]).integers(2**31))
    idata = _nuts(compiled, arr, sampler, seed)
    post = idata["posterior"]
    post = post.to_dataset() if hasattr(post, "to_dataset") else post
    post = post.assign_coords(run=list(arr.run_ids))
    if "family" in post.dims:
        post = post.assign_coords(family=list(arr.families))
    stats = idata["sample_stats"]
    stats = stats.to_dataset() if hasattr(stats, "to_dataset") else stats
    div = int(stats["diverging"].sum()) if "diverging" in stats else 0
    names = [v for v in HEALTH_VARS if v in post]
    rhat = az.rhat(post[names])
    ess = az.ess(post[names])
    health = {}
    for rid in arr.run_ids:
        health[rid] = {
            "r_hat_max": float(max(float(rhat[v].sel(run=rid)) for v in names)),
            "ess_min": float(min(float(ess[v].sel(run=rid)) for v in names)),
            "divergences": div,
        }
    return post, health


def _draws(post, rid: str, name: str) -> np.ndarray:
    return post[name].sel(run=rid).to_numpy().reshape(-1)


@dataclass
class FittedForecast:
    """A fitted forecast for a set of runs: tables, paths, plots, save/load.

    Obtained from :meth:`Forecaster.fit` or :meth:`FittedForecast.load`.
    """

    config: ForecastConfig
    sampler: SamplerConfig
    runs: RunSet
    infos: dict
    arrays: ModelArrays
    posterior: object
    hyper: object
    health: dict
    seconds: dict
    forecast_ids: list
    _cache: dict = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------ per-run predictive draws
    def paths(self, run_id: str) -> PathDraws:
        """Posterior predictive draws of the run's future logged steps (its own units)."""
        if run_id in self._cache:
            return self._cache[run_id]
        if run_id not in self.infos:
            raise KeyError(f"no forecast for run {run_id!r}; runs: {self.forecast_ids[:10]}")
        info: RunInfo = self.infos[run_id]
        j = list(self.arrays.run_ids).index(run_id)
        p = {k: _draws(self.posterior, run_id, k) for k in ("r0", "r_star", "a", "mu", "sigma_p", "sigma_m", "tau")}
        T = info.last_step - info.s0 + 1
        y = self.arrays.y[:T, j]
        mask = self.arrays.mask[:T, j].astype(bool)
        pars = dict(r0=p["r0"], r_star=p["r_star"], a=p["a"], mu=p["mu"], sigma_p=p["sigma_p"], sigma_m=p["sigma_m"])
        rng = np.random.default_rng([self.sampler.seed, j, 7])
        n_future = info.horizon - info.last_step
        K = info.refresh_interval
        if K > 1:
            # the 3-state (x_n, x_{n-1}, period anchor) filter: exact, cost independent of K (the
            # K-dimensional state of filter_numpy took minutes for K = 128 and 2000 draws)
            ll, m, P = filter_refresh_numpy(y[:, None], mask[:, None], K=K, **pars)
            x = propagate_refresh_numpy(m, P, n_future, K=K, n_last=T - 1, a=p["a"], mu=p["mu"], sigma_p=p["sigma_p"], rng=rng)
        else:
            ll, m, P = filter_numpy(y[:, None], mask[:, None], **pars)
            x = propagate_numpy(m, P, n_future, a=p["a"], mu=p["mu"], sigma_p=p["sigma_p"], rng=rng)
        fut = info.future_steps()
        idx = fut - info.last_step - 1
        latent_z = x[idx].T + p["r_star"][:, None]  # (draws, n_future_logged)
        obs_z = latent_z + p["sigma_m"][:, None] * rng.standard_normal(latent_z.shape)
        sc, lo = info.scale, info.loc
        out = PathDraws(
            run_id=run_id,
            steps=fut,
            observed=obs_z * sc + lo,
            latent=latent_z * sc + lo,
            r0=p["r0"] * sc + lo,
            r_star=p["r_star"] * sc + lo,
            tau=p["tau"],
            a=p["a"],
            mu=p["mu"],
            sigma_p=p["sigma_p"] * sc,
            sigma_m=p["sigma_m"] * sc,
            last_step=info.last_step,
            horizon=info.horizon - info.last_step,  # PathDraws counts the horizon from last_step
            interval=info.interval,
            latent_now=(m[..., 0] + p["r_star"]) * sc + lo,
            refresh_interval=info.refresh_interval if info.refresh_interval > 1 else None,
        )
        self._cache[run_id] = out
        return out

    def final_draws(self, run_id: str) -> np.ndarray:
        """Draws of the final reward (mean logged reward over the final window), run units."""
        info: RunInfo = self.infos[run_id]
        pd_ = self.paths(run_id)
        win = info.final_steps(self.config.final_window)
        obs = self.runs.run(run_id)
        obs_in = obs.loc[obs[STEP].isin(win[win <= info.last_step]), REWARD].to_numpy()
        fut_mask = np.isin(pd_.steps, win[win > info.last_step])
        n_fut = int(fut_mask.sum())
        n = len(obs_in) + n_fut
        if n == 0:
            raise ForecastError(f"run {run_id!r}: the final window holds no logged step; widen --final-window")
        total = obs_in.sum() + pd_.observed[:, fut_mask].sum(axis=1)
        return total / n

    def stop_draws(self, run_id: str) -> tuple[np.ndarray, np.ndarray]:
        """(stop step per draw, censored at the horizon; reached-before-horizon flag)."""
        info: RunInfo = self.infos[run_id]
        pd_ = self.paths(run_id)
        n_steps = info.horizon - info.s0
        mu, a = pd_.mu, pd_.a
        x_prev = np.ones_like(a)
        x = np.ones_like(a)  # x_n / x_0 (deterministic mean recursion from R0, zero initial velocity)
        stop = np.full(a.shape, float(info.horizon))
        reached = np.zeros(a.shape, dtype=bool)
        thresh = 1.0 - self.config.stop_fraction
        hist = [x.copy()] if info.refresh_interval > 1 else None
        for n in range(n_steps):
            if info.refresh_interval > 1:
                d = n % info.refresh_interval
                x_lag = hist[max(0, len(hist) - 1 - d)]
            else:
                x_lag = x
            x_new = (1 + mu) * x - mu * x_prev - a * x_lag
            x_prev, x = x, x_new
            if hist is not None:
                hist.append(x.copy())
            hit = (~reached) & (np.abs(x) <= thresh) & (x <= thresh)
            stop[hit] = info.s0 + n + 1
            reached |= hit
            if reached.all():
                break
        return stop, reached

    # ------------------------------------------------------------ tables
    def table(self) -> pd.DataFrame:
        """One row per forecast run with the contract columns (:data:`TABLE_COLUMNS`)."""
        rows = []
        for rid in self.forecast_ids:
            info: RunInfo = self.infos[rid]
            fin = self.final_draws(rid)
            stop, reached = self.stop_draws(rid)
            pd_ = self.paths(rid)
            qf = np.quantile(fin, [0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95])
            qs = np.quantile(stop, [0.05, 0.5, 0.95])
            qp = np.quantile(pd_.r_star, [0.05, 0.5, 0.95])
            under = pd_.a > (1.0 - np.sqrt(pd_.mu)) ** 2
            unstable = _unstable(pd_)
            h = self.health[rid]
            rows.append(
                dict(
                    run_id=rid, model=self.config.model, observed_until=info.last_step, n_obs=info.n_obs,
                    horizon=info.horizon, final_mean=float(fin.mean()),
                    final_q05=qf[0], final_q10=qf[1], final_q25=qf[2], final_q50=qf[3], final_q75=qf[4],
                    final_q90=qf[5], final_q95=qf[6],
                    stop_q05=qs[0], stop_q50=qs[1], stop_q95=qs[2], p_stop_before_horizon=float(reached.mean()),
                    plateau_q05=qp[0], plateau_q50=qp[1], plateau_q95=qp[2],
                    p_underdamped=float(under.mean()), p_unstable=float(unstable.mean()),
                    r_hat_max=h["r_hat_max"], ess_min=h["ess_min"], divergences=h["divergences"],
                    seconds=self.seconds.get(rid, np.nan),
                )  # fmt: skip
            )
        return pd.DataFrame(rows, columns=TABLE_COLUMNS)

    def path_quantiles(self, run_id: str, probs=(0.025, 0.1, 0.25, 0.5, 0.75, 0.9, 0.975)) -> pd.DataFrame:
        """Quantiles of the logged reward (``yhat_*``) and the latent mean (``latent_*``) per future step."""
        pd_ = self.paths(run_id)
        out = pd.DataFrame({STEP: pd_.steps})
        for p in probs:
            out[f"yhat_q{p * 100:g}"] = np.quantile(pd_.observed, p, axis=0)
        out["yhat"] = np.median(pd_.observed, axis=0)
        out["latent_mean"] = pd_.latent.mean(axis=0)
        return out

    def warn_health(self, *, r_hat: float = 1.01, ess: float = 200.0) -> list[str]:
        """Emit a :class:`SamplerWarning` per run whose sampler health is poor; return the messages."""
        msgs = []
        for rid in self.forecast_ids:
            h = self.health[rid]
            bad = []
            if h["r_hat_max"] > r_hat:
                bad.append(f"r_hat {h['r_hat_max']:.3f} > {r_hat}")
            if h["ess_min"] < ess:
                bad.append(f"ESS {h['ess_min']:.0f} < {ess:.0f}")
            if h["divergences"] > 0:
                bad.append(f"{h['divergences']} divergent transitions in its batch")
            if bad:
                msg = f"run {rid!r}: sampler health is poor ({'; '.join(bad)}); treat its intervals with care or rerun with more --draws/--tune"
                warnings.warn(msg, SamplerWarning, stacklevel=2)
                msgs.append(msg)
        return msgs

    def plot(self, run_id: str, *, ax=None, bands=(0.5, 0.8, 0.95)):
        """Fan chart of one run. See :func:`bayesgrpo.plots.fan_chart`."""
        from bayesgrpo.plots import fan_chart

        return fan_chart(self, run_id, ax=ax, bands=bands)

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
                "log_size": ("run", arr.log_size), "r0_obs": ("run", arr.r0_obs),
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
        dt.attrs["bayesgrpo_config"] = self.config.model_dump_json()
        dt.attrs["bayesgrpo_sampler"] = self.sampler.model_dump_json()
        dt.attrs["families"] = json.dumps(list(arr.families))
        dt.attrs["forecast_ids"] = json.dumps(self.forecast_ids)
        from bayesgrpo import __version__

        dt.attrs["bayesgrpo_version"] = __version__
        return dt

    def save(self, path) -> None:
        """Write one self-describing netCDF file (needs h5netcdf + h5py)."""
        self.to_datatree().to_netcdf(str(path), engine="h5netcdf")

    @classmethod
    def load(cls, path) -> FittedForecast:
        """Load a file written by :meth:`save`; forecasts from it are identical to the original's."""
        import xarray as xr

        dt = xr.open_datatree(str(path), engine="h5netcdf").load()
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
            )  # fmt: skip
        c = dt["constant_data"].to_dataset()
        run_order = [str(r) for r in c["run"].to_numpy()]
        if "refresh" in c:
            refresh = c["refresh"].to_numpy().astype(np.int64)
        else:  # files written before the refresh Op stored a lag one-hot instead: K from the run info
            refresh = np.array([infos[r].refresh_interval for r in run_order], dtype=np.int64)
        arr = ModelArrays(
            y=c["y"].to_numpy(), mask=c["mask"].to_numpy(), refresh=refresh,
            span=c["span"].to_numpy(), noise=c["noise"].to_numpy(), mu_mean=c["mu_mean"].to_numpy(),
            mu_known=c["mu_known"].to_numpy(), family_idx=c["family_idx"].to_numpy(),
            log_size=c["log_size"].to_numpy(), r0_obs=c["r0_obs"].to_numpy(),
            run_ids=tuple(run_order), families=tuple(json.loads(dt.attrs["families"])),
        )  # fmt: skip
        hd = dt["sampler_health"].to_dataset().to_dataframe()
        health = {str(r): {"r_hat_max": float(v.r_hat_max), "ess_min": float(v.ess_min), "divergences": int(v.divergences)} for r, v in hd.iterrows()}
        seconds = {str(r): float(v.seconds) for r, v in hd.iterrows()}
        hyper = dt["hyperparameters"].to_dataset() if "hyperparameters" in dt.children else None
        return cls(
            config=cfg, sampler=smp, runs=runs, infos=infos, arrays=arr,
            posterior=dt["posterior"].to_dataset(), hyper=hyper, health=health, seconds=seconds,
            forecast_ids=json.loads(dt.attrs["forecast_ids"]),
        )  # fmt: skip


def _unstable(pd_: PathDraws) -> np.ndarray:
    """Per draw: spectral radius of recursion (1) >= 1 (with the run's refresh pattern)."""
    if not pd_.refresh_interval or pd_.refresh_interval <= 1:
        # AR(2) with d = 0 is stable iff |mu| < 1 and 0 < a < 2 (1 + mu)
        return ~((np.abs(pd_.mu) < 1) & (pd_.a > 0) & (pd_.a < 2 * (1 + pd_.mu)))
    # the reduced one-period map of :func:`bayesgrpo.dynamics.monodromy_matrix` (same arithmetic), for
    # all draws at once: a per-draw call took ~2 s for 2000 draws at K = 128
    a = np.asarray(pd_.a, dtype=float)[:, None]
    mu = np.asarray(pd_.mu, dtype=float)[:, None]
    cur = np.zeros((a.shape[0], 2))
    cur[:, 0] = 1.0
    prev = np.zeros_like(cur)
    prev[:, 1] = 1.0
    anchor = cur.copy()
    for _ in range(int(pd_.refresh_interval)):
        cur, prev = (1.0 + mu) * cur - mu * prev - a * anchor, cur
    rho = np.abs(np.linalg.eigvals(np.stack([cur, prev], axis=1))).max(axis=-1)
    return rho >= 1

