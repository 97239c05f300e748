"""A fitted forecast: :class:`FittedForecast` (tables, paths, any horizon, inference data, save/load) over
the :class:`~bayesgrpo.models.arrays.RunArrays` of its fit (each run on its own grid).

Everything here is exact numpy on the posterior draws: the Kalman filter (:mod:`bayesgrpo.models.kalman`)
gives each draw's filtered state at the last observation, latent paths are propagated forward with
process noise, and logged-reward paths add measurement noise (:meth:`FittedForecast.paths`).
"""

from __future__ import annotations

import dataclasses
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from bayesgrpo.conventions import QUANTILES, SUMMARY_QUANTILES, quantile_column
from bayesgrpo.errors import ForecastError
from bayesgrpo.forecast import artefact
from bayesgrpo.forecast.config import FINAL_COLUMNS, TABLE_COLUMNS, ForecastConfig
from bayesgrpo.forecast.paths import PathDraws, stop_quantile
from bayesgrpo.forecast.shape import KIND_CODE, weights_label
from bayesgrpo.inference import sampling
from bayesgrpo.inference.sampling import SamplerConfig
from bayesgrpo.models.arrays import SPREAD_PARAMS, RunArrays, RunInfo
from bayesgrpo.models.kinds import get_kind
from bayesgrpo.physics.stability import is_stable, is_underdamped
from bayesgrpo.plan import MAX_STORED_STEPS, horizon_error
from bayesgrpo.schema import REWARD, STEP, RunSet

__all__ = ["FittedForecast", "RunArrays", "PATH_CACHE_RUNS"]

#: paths of at most this many runs are kept in memory at once (recomputed exactly on demand)
PATH_CACHE_RUNS = 16


def _thin(n: int, limit: int = MAX_STORED_STEPS) -> np.ndarray:
    """Indices of at most ``limit`` of ``n`` future steps, evenly spread, always the last one."""
    if n <= limit:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, limit)).astype(int))


def _to_ends(observed, latent, latent_now, idx, end, go):
    """The paths of draws ``idx`` replaced by lines in time from the latent level now to their final reward
    ``end`` (``go``: the share of the time to go at each stored step); the logged paths keep their noise."""
    if idx.size:
        new = latent_now[idx, None] + (end - latent_now[idx])[:, None] * go[None, :]
        observed[idx] += new - latent[idx]
        latent[idx] = new
    return observed, latent


def _draws(post, rid: str, name: str) -> np.ndarray:
    return post[name].sel(run=rid).to_numpy().reshape(-1)


@dataclass
class FittedForecast:
    """A fitted forecast for a set of runs: tables, paths, any horizon, ArviZ inference data, save/load.

    Obtained from :meth:`Forecaster.fit <bayesgrpo.forecast.Forecaster.fit>` or :meth:`load`. The
    posterior does not depend on the horizon: :meth:`predict` (or ``table(horizon=...)``) forecasts the
    same fit to any other step without refitting. Figures: :mod:`bayesgrpo.plots` (``fan_chart(fit, run_id)``).
    """

    config: ForecastConfig
    sampler: SamplerConfig
    runs: RunSet
    infos: dict
    arrays: RunArrays
    posterior: Any  # xarray.Dataset
    hyper: object
    health: dict
    seconds: dict
    forecast_ids: list
    context_priors: dict = field(default_factory=dict)
    sample_stats: object = None
    shape_weights: dict = field(default_factory=dict)  # kind 'auto': run -> {kind: weight}
    _cache: OrderedDict = field(default_factory=OrderedDict, repr=False)
    _window: dict = field(default_factory=dict, repr=False)
    _rows: dict = field(default_factory=dict, repr=False)
    _final: dict = field(default_factory=dict, repr=False)
    _decisions: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        self.arrays = RunArrays.of(self.arrays)

    def __getstate__(self):
        # what a worker sends back: no cached paths (they are recomputed exactly on demand)
        state = dict(self.__dict__)
        state["_cache"], state["_window"], state["_final"] = OrderedDict(), {}, {}
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
        stats = None
        if all(p.sample_stats is not None and "run" in p.sample_stats.dims for p in parts):
            stats = xr.concat(
                [p.sample_stats for p in parts], dim="run", join="override", combine_attrs="drop_conflicts"
            )
        out = cls(
            config=first.config, sampler=first.sampler, runs=runs,
            infos={k: v for p in parts for k, v in p.infos.items()},
            arrays=RunArrays.concat([p.arrays for p in parts]), posterior=posterior, hyper=None,
            health={k: v for p in parts for k, v in p.health.items()},
            seconds={k: v for p in parts for k, v in p.seconds.items()}, forecast_ids=ids,
            context_priors={k: v for p in parts for k, v in p.context_priors.items()}, sample_stats=stats,
            shape_weights={k: v for p in parts for k, v in p.shape_weights.items()},
        )  # fmt: skip
        out._rows.update({k: v for p in parts for k, v in p._rows.items()})
        out._decisions.update({k: v for p in parts for k, v in p._decisions.items()})
        return out

    # ------------------------------------------------------------ any horizon
    def predict(self, *, horizon) -> FittedForecast:
        """The same fit forecast to another horizon (one step for all runs, or per run id).

        The posterior, the run data and the planned length the prior was conditioned on are the
        fit's; only the horizon moves, so nothing is sampled again. The paths, the final reward (its
        window is the last share of the new run length) and the stop step's censoring follow it.

        Raises
        ------
        ForecastError
            A horizon not after a run's last logged step, or too far beyond it (names the run).
        """
        hz = {r: (horizon.get(r) if isinstance(horizon, dict) else horizon) for r in self.forecast_ids}
        infos = dict(self.infos)
        for rid, h in hz.items():
            if h is None:
                continue
            info = self.infos[rid]
            err = horizon_error(f"run {rid!r}", int(h), info.last_step, self.sampler.draws * self.sampler.chains,
                                info.interval)  # fmt: skip
            if err:
                raise ForecastError(err)
            infos[rid] = dataclasses.replace(info, horizon=int(h))
        return FittedForecast(
            config=self.config, sampler=self.sampler, runs=self.runs, infos=infos, arrays=self.arrays,
            posterior=self.posterior, hyper=self.hyper, health=self.health, seconds=self.seconds,
            forecast_ids=list(self.forecast_ids), context_priors=dict(self.context_priors),
            sample_stats=self.sample_stats, shape_weights=dict(self.shape_weights),
        )  # fmt: skip

    # ------------------------------------------------------------ per-run predictive draws
    def _params(self, run_id: str) -> dict:
        names = dict.fromkeys(n for k in self.config.kinds for n in get_kind(k).param_names)
        if self.config.channels:
            names.update(dict.fromkeys(SPREAD_PARAMS))
        return {k: _draws(self.posterior, run_id, k) for k in names if k in self.posterior}

    def _channels(self, run_id: str, kind, p: dict) -> dict | None:
        """The run's spread channels for ``kind``'s filter where its draws ``p`` came from the spread graph."""
        if not (self.config.channels and kind.degeneracy and "nu" in p and np.all(np.isfinite(p["nu"]))):
            return None
        arr = self.arrays.run(run_id)
        T = self.infos[run_id].last_step - self.infos[run_id].s0 + 1
        return {"ch": arr.channels[:, :T, 0], "G": int(arr.group_size[0])}

    def _kind_groups(self, run_id: str) -> list:
        """``[(kind, draw indices or None for all)]``: the kinds of the run's draws (one for a single kind)."""
        if KIND_CODE not in self.posterior:
            return [(get_kind(self.config.kinds[0]), None)]
        code = _draws(self.posterior, run_id, KIND_CODE).astype(int)
        present = np.unique(code)
        if present.size == 1:
            return [(get_kind(self.config.kinds[int(present[0])]), None)]
        return [(get_kind(self.config.kinds[int(c)]), np.flatnonzero(code == c)) for c in present]

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
        K = info.refresh_interval
        # seeded by the run id, not its position: the same numbers whichever runs share the fit
        rng = np.random.default_rng([self.sampler.seed, zlib.crc32(run_id.encode()), 7])
        n_future = info.horizon - info.last_step
        fut = info.future_steps()  # logged future steps
        keep = _thin(fut.size)
        win = info.final_steps(self.config.final_window)
        in_win = np.zeros(n_future, dtype=bool)
        in_win[np.intersect1d(win, fut) - info.last_step - 1] = True
        groups = self._kind_groups(run_id)
        m0, x, win_sum, stop, reached = self._propagate(run_id, groups, y, mask, p, K=K, T=T, n_future=n_future, rng=rng,
                                                        store=fut[keep] - info.last_step - 1, accumulate=in_win,
                                                        n_steps=info.horizon - info.s0)  # fmt: skip
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
        observed = obs_z * sc + lo
        latent_run = latent_z * sc + lo
        latent_now = (m0 + p["r_star"]) * sc + lo
        go = info.time_to_go(fut)  # pro rata of the planned run: one forecast, read at any step
        observed, latent_run = self._layers(run_id, observed, latent_run, latent_now, fraction=float(arr.fraction[0]),
                                            go=go)  # fmt: skip
        # neither a logged reward nor the latent reward (nor its plateau) leaves the reward's range
        observed, latent_run, latent_now, r_star = self._clip(run_id, observed, latent_run, latent_now,
                                                              p["r_star"] * sc + lo)  # fmt: skip
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
            self._final.pop(old, None)
        return out

    def final_draws(self, run_id: str) -> np.ndarray:
        """Draws of the final reward (mean logged reward over the final window), run units.

        Already-logged points of the window enter as observed; the future logged points of the window
        are accumulated while the paths are propagated (so a long horizon never holds every path).
        Cached with the run's paths (the table, p_gain and the advice read the same draws).
        """
        if run_id in self._final:  # evicted with the run's paths
            return self._final[run_id]
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
        out, _ = self._layers(run_id, out, fraction=frac, go=go)
        (out,) = self._clip(run_id, out)  # the mean of logged rewards stays inside the reward's range
        out.flags.writeable = False  # shared by every reader of the cache
        self._final[run_id] = out
        return out

    def decision_numbers(self, run_id: str, *, delta: float) -> dict:
        """The run's decision numbers at ``delta`` with the fit's own p_gain map
        (:func:`bayesgrpo.forecast.decision.decision_probabilities`), computed once per fit: the table's
        ``p_gain`` and the stop advice read the same numbers (a copy is returned)."""
        from bayesgrpo.forecast.decision import decision_probabilities

        key = (run_id, float(delta))
        if key not in self._decisions:
            self._decisions[key] = decision_probabilities(self, run_id, delta=delta)
        return dict(self._decisions[key])

    def _propagate(self, run_id, groups, y, mask, p, *, K, T, n_future, rng, store, accumulate, n_steps):
        """Each kind's draws through its own filter, dynamics and stop rule (one kind: all draws at once):
        ``(filtered level offset, stored future states, final-window sums, stop steps, settled)``."""
        fr = self.config.stop_fraction
        if len(groups) == 1:
            kind = groups[0][0]
            m, P = kind.filter_last(y, mask, p, K, channels=self._channels(run_id, kind, p))
            x, win_sum = kind.propagate(m, P, n_future, p, K=K, n_last=T - 1, rng=rng, store=store,
                                        accumulate=accumulate)  # fmt: skip
            stop, reached = kind.stop(p, n_steps=n_steps, fraction=fr, K=K)
            return m[..., 0], x, win_sum, stop, reached
        n = p["r_star"].size
        m0, x, win_sum = np.empty(n), np.empty((store.size, n)), np.empty(n)
        stop, reached = np.empty(n, dtype=np.int64), np.empty(n, dtype=bool)
        for kd, idx in groups:
            q = {k: v[idx] for k, v in p.items()}
            m, P = kd.filter_last(y, mask, q, K, channels=self._channels(run_id, kd, q))
            m0[idx] = m[..., 0]
            x[:, idx], win_sum[idx] = kd.propagate(m, P, n_future, q, K=K, n_last=T - 1, rng=rng, store=store,
                                                   accumulate=accumulate)  # fmt: skip
            stop[idx], reached[idx] = kd.stop(q, n_steps=n_steps, fraction=fr, K=K)
        return m0, x, win_sum, stop, reached

    def _outlook(self, run_id: str, n: int, fraction: float) -> tuple[np.ndarray, np.ndarray]:
        """The draws that follow the between-source outlook and their final rewards
        (:func:`bayesgrpo.forecast.outlook.outlook_draws`; the same for the paths and the final reward)."""
        from bayesgrpo.forecast.outlook import outlook_draws
        from bayesgrpo.series import current_level

        ol = self.config.outlook
        if ol.is_identity:
            return np.empty(0, dtype=np.int64), np.empty(0)
        level, info = current_level(self.runs.run(run_id)[REWARD].to_numpy()), self.infos[run_id]
        return outlook_draws(ol, n, fraction=fraction, level=level, scale=info.scale, run_id=run_id,
                             seed=self.sampler.seed, bounds=(info.reward_min, info.reward_max))  # fmt: skip

    def _layers(self, run_id: str, observed, latent=None, latent_now=None, *, fraction: float, go):
        """THE post-hoc layers of a forecast, in order, on its final-reward draws (``observed`` of shape
        ``(draws,)``, ``go`` a number) or on its paths (``observed`` and ``latent`` of shape ``(draws, steps)``,
        ``go`` per step, ``latent_now`` the latent level now): the kind's calibration layer (its widening grows
        with the time to go), then the outlook of kind 'auto' (the same draws end at the same final reward on
        both roads). The clip to the reward's range follows (:meth:`_clip`)."""
        cal, scale = self.config.calibration, self.infos[run_id].scale
        paths = latent is not None
        if not cal.is_identity:
            if paths:
                observed = cal.widen_paths(observed, fraction=fraction, scale=scale, go=go)
                latent = cal.widen_paths(latent, fraction=fraction, scale=scale, go=go)
            else:
                observed = cal.apply(observed, fraction=fraction, scale=scale, go=go)
        idx, end = self._outlook(run_id, observed.shape[0], fraction)
        if paths:
            return _to_ends(observed, latent, latent_now, idx, end, go)
        if idx.size:
            observed = observed.copy()
            observed[idx] = end
        return observed, None

    def _clip(self, run_id: str, *arrays):
        """THE clip: every array inside the run's known reward range (unchanged without known bounds)."""
        info: RunInfo = self.infos[run_id]
        if not info.bounds:
            return arrays
        lims = (info.reward_min if np.isfinite(info.reward_min) else -np.inf,
                info.reward_max if np.isfinite(info.reward_max) else np.inf)  # fmt: skip
        return tuple(np.clip(a, *lims) for a in arrays)

    def stop_draws(self, run_id: str) -> tuple[np.ndarray, np.ndarray]:
        """(stop step per draw in absolute steps, censored at the horizon; settled-before-horizon flag)."""
        pd_ = self.paths(run_id)
        return pd_.stop_steps()

    # ------------------------------------------------------------ tables
    def table(self, *, horizon=None) -> pd.DataFrame:
        """One row per forecast run with the contract columns (:data:`TABLE_COLUMNS`); with ``horizon``
        the table of :meth:`predict` to that horizon (the fit is not redone)."""
        if horizon is not None:
            return self.predict(horizon=horizon).table()
        rows = []
        for rid in self.forecast_ids:
            if rid not in self._rows:
                self._rows[rid] = self._row(rid)
            rows.append(self._rows[rid])
        return pd.DataFrame(rows, columns=TABLE_COLUMNS)

    def _row(self, rid: str) -> dict:
        """The table row of one run (cached: a merged fit carries the rows its parts computed)."""
        info: RunInfo = self.infos[rid]
        fin = self.final_draws(rid)
        pd_ = self.paths(rid)
        qf = np.quantile(fin, QUANTILES)
        qp = np.quantile(pd_.r_star, SUMMARY_QUANTILES)
        h = self.health[rid]
        row = dict(
            run_id=rid, kind=weights_label(self.shape_weights.get(rid, {self.config.kind: 1.0})),
            observed_until=info.last_step, n_obs=info.n_obs, horizon=info.horizon, final_mean=float(fin.mean()),
            **{c: float(v) for c, v in zip(FINAL_COLUMNS, qf, strict=True)},
            p_gain=self.decision_numbers(rid, delta=self.config.delta)["p_gain"],
            **{quantile_column("stop", q): stop_quantile(pd_, q) for q in SUMMARY_QUANTILES},
            p_stop_before_horizon=float(pd_.stop_steps()[1].mean()),
            **{quantile_column("plateau", q): v for q, v in zip(SUMMARY_QUANTILES, qp, strict=True)},
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
        bad = sampling.health_problems(self.health[run_id], **sampling.status_thresholds(self.sampler))
        if not bad:
            return "ok", ""
        return "warning", f"sampler health: {'; '.join(bad)}; rerun with more --draws/--tune before trusting it"

    # ------------------------------------------------------------ ArviZ and persistence
    def inference_data(self):
        """The fit as ArviZ inference data (an ``xarray.DataTree``: ``posterior``, ``sample_stats``,
        ``observed_data``, ``posterior_predictive``, ``constant_data``; :mod:`bayesgrpo.forecast.artefact`);
        e.g. ``az.summary(fit.inference_data(), var_names=["r_star", "tau"])``."""
        return artefact.to_datatree(self)

    def to_datatree(self):
        """Alias of :meth:`inference_data` (what :meth:`save` writes)."""
        return artefact.to_datatree(self)

    def save(self, path) -> None:
        """Write one self-describing netCDF file (h5netcdf), atomically: a failure leaves
        no partial file behind."""
        artefact.write(self, path)

    @classmethod
    def load(cls, path, *, expected=None) -> FittedForecast:
        """Load a file written by :meth:`save`; forecasts from it are identical to the original's.

        Reads the formats of :data:`~bayesgrpo.forecast.artefact.READABLE_SCHEMAS` (tests keep files of
        formats 1 and 2). ``expected`` (a :class:`~bayesgrpo.forecast.Forecaster` or its
        ``ForecastConfig``): refuse a file saved by a different model (kind, prior, calibration or
        definitions: the model identity).

        Raises
        ------
        ArtefactError
            Not a bayesgrpo forecast, an unknown (newer) format, an identity that does not match the
            file's configuration, or a different model than ``expected``.
        """
        cfg = getattr(expected, "config", expected)
        return cls(**artefact.read(path, expected=cfg))
