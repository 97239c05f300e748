"""The forecasting verb: ``Forecaster(kind).fit(runs) -> FittedForecast`` (:mod:`bayesgrpo.forecast.fitted`:
table / paths / predict to any horizon / inference data / save; figures: :mod:`bayesgrpo.plots`).

The posterior of each run's parameters comes from PyMC (NUTS through nutpie); everything after that
is exact numpy on the posterior draws (:class:`~bayesgrpo.forecast.fitted.FittedForecast`). Quantities:

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
import logging
import time

import numpy as np

from bayesgrpo.conventions import DEFAULT_FINAL_WINDOW, DEFAULT_KIND
from bayesgrpo.errors import ForecastError, Interrupted
from bayesgrpo.forecast.calibration import Calibration
from bayesgrpo.forecast.config import AUTO, HEALTH_VARS, STAT_VARS, STORED_VARS, TABLE_COLUMNS, ForecastConfig
from bayesgrpo.forecast.decision import DEFAULT_DELTA, DecisionCalibration
from bayesgrpo.forecast.fitted import FittedForecast
from bayesgrpo.forecast.outlook import Outlook
from bayesgrpo.forecast.shape import ShapeConfig, compiled_kind, kind_weights, mix_posteriors, run_evidence
from bayesgrpo.inference import sampling
from bayesgrpo.inference.sampling import SamplerConfig
from bayesgrpo.models.arrays import SPREAD_PARAMS, ModelArrays, RunArrays, RunInfo, prepare_arrays
from bayesgrpo.models.kinds import get_kind
from bayesgrpo.models.prior import PopulationPrior
from bayesgrpo.physics.stopping import DEFAULT_STOP_FRACTION
from bayesgrpo.plan import NEXT, Plans, plan_runs
from bayesgrpo.schema import RunSet

__all__ = ["SamplerConfig", "ForecastConfig", "Forecaster", "FittedForecast", "TABLE_COLUMNS", "AUTO"]

log = logging.getLogger("bayesgrpo")


class Forecaster:
    """Forecast GRPO reward curves with a physics-based Bayesian state-space model.

    Parameters
    ----------
    kind : str
        A model kind of :data:`bayesgrpo.models.kinds.MODEL_KINDS` (``bayesgrpo models``):
        ``oscillator`` (default) is the damped-oscillator recursion of physics.md section 2;
        ``degeneracy`` / ``logistic`` its degeneracy-aware extensions; ``saturation`` the overdamped
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
    delta : float
        The table's ``p_gain`` = P(final reward >= current level + delta x scale) (:mod:`bayesgrpo.forecast.decision`).
    decision : DecisionCalibration or bool
        The recalibration map of ``p_gain``: ``True`` (default) the packaged one of the kind, ``False`` none.
    shape : ShapeConfig, optional
        ``kind="auto"``: the kinds each run's shape is chosen among by its evidence and the prior over
        kinds (:mod:`bayesgrpo.forecast.shape`; default :class:`ShapeConfig`).
    priors : dict, optional
        ``kind="auto"``: a population prior per kind (default: the packaged ones).
    outlook : Outlook or bool
        The between-source outlook (:mod:`bayesgrpo.forecast.outlook`): ``True`` (default) the packaged one
        for ``kind="auto"`` and none for a single kind, ``False`` none, or an outlook.
    sampler : SamplerConfig, optional
    channels : sequence of str
        Spread channels observed with the reward (``reward_std``, ``frac_reward_zero_std``), kinds with a
        degeneracy state only (:mod:`bayesgrpo.models.spread`): a run that logs one is fitted with the joint
        likelihood (one compiled model whatever it logs); a run that logs none forecasts exactly as without.

    Examples
    --------
    >>> from bayesgrpo import Forecaster, read_runs                         # doctest: +SKIP
    >>> from bayesgrpo.resources import example_meta, example_run         # doctest: +SKIP
    >>> runs = read_runs(example_run(), meta=example_meta())              # doctest: +SKIP
    >>> fit = Forecaster().fit(runs.truncate(until_step=150))             # doctest: +SKIP
    >>> fit.table()[["run_id", "kind", "final_q10", "final_q50", "final_q90"]]  # doctest: +SKIP
    >>> fit.table(horizon=800)                     # the same fit, another horizon  # doctest: +SKIP
    """

    def __init__(
        self,
        kind: str = DEFAULT_KIND,
        *,
        final_window: float = DEFAULT_FINAL_WINDOW,
        stop_fraction: float = DEFAULT_STOP_FRACTION,
        hierarchical: bool = False,
        prior: PopulationPrior | None = None,
        calibration: Calibration | bool | None = True,
        delta: float = DEFAULT_DELTA,
        decision: DecisionCalibration | bool = True,
        shape: ShapeConfig | None = None,
        priors: dict | None = None,
        outlook: Outlook | bool = True,
        sampler: SamplerConfig | None = None,
        channels=(),
    ):
        kw = dict(kind=kind, final_window=final_window, stop_fraction=stop_fraction, hierarchical=hierarchical,
                  channels=tuple(channels), delta=delta)  # fmt: skip
        if prior is not None:
            kw["prior"] = prior
        for name, value, cls in (
            ("calibration", calibration, Calibration),
            ("decision", decision, DecisionCalibration),
        ):
            if value is True:
                kw[name] = None  # -> the packaged one
            elif isinstance(value, cls):
                kw[name] = value
        if outlook is not True:  # False: none (the identity); True: the packaged one for kind 'auto'
            kw["outlook"] = outlook if isinstance(outlook, Outlook) else Outlook()
        if shape is not None:
            kw["shape"] = shape
        if priors:
            kw["priors"] = dict(priors)
        self.config = ForecastConfig(**kw)
        self.sampler = sampler or SamplerConfig()

    def fit(self, runs: RunSet, *, horizon=None, context: RunSet | None = None, progress=None) -> FittedForecast:
        """Fit the posterior of every run in ``runs`` (optionally pooled with complete ``context`` runs).

        Parameters
        ----------
        runs : RunSet
            Observed prefixes to forecast.
        horizon : int or dict, optional
            Step to forecast to (one for all, or per run id); default: metadata ``max_steps``
            (:func:`bayesgrpo.plan.plan_runs`). A fit can later be predicted to any other horizon
            (:meth:`FittedForecast.predict`).
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
            A run cannot be forecast (its plan's reason: too few points, no horizon, ...; names the run).
        """
        plans = plan_runs(runs, horizon=horizon, final_window=self.config.final_window).require()
        return self.fit_plans(plans, context=context, progress=progress)

    def fit_plans(self, plans: Plans, *, context: RunSet | None = None, progress=None) -> FittedForecast:
        """Fit runs already planned (:func:`bayesgrpo.plan.plan_runs`; ``forecast_batch`` and the live
        worker plan theirs first): the posterior of ``plans.observed``, every plan ok (:meth:`fit`)."""
        cfg = self.config
        auto = cfg.kind == AUTO
        kind = get_kind(cfg.kinds[0])
        if auto and cfg.hierarchical:
            raise ForecastError("kind 'auto' chooses each run's shape alone; a hierarchical (joint) fit needs one kind")
        runs, all_runs, plan_map = plans.require().observed, plans.observed, dict(plans.plans)
        if context is not None:
            clash = set(runs.run_ids) & set(context.run_ids)
            if clash:
                raise ForecastError(f"run(s) {sorted(clash)[:3]} are both forecast and given as --context")
        if context is not None and cfg.hierarchical:
            # the joint model: context runs fitted with the forecast runs in one hierarchical graph
            all_runs = runs.concat(context)
            plan_map.update(plan_runs(context, horizon=NEXT, final_window=cfg.final_window).require().plans)
        arrays, infos = prepare_arrays(all_runs, plans=plan_map, prior=cfg.prior, channels=cfg.channels)
        if kind.degeneracy and not auto:
            lagged = [i.run_id for i in infos if i.refresh_interval > 1]
            if lagged:
                raise ForecastError(f"run {lagged[0]!r} has a refresh interval > 1; the {kind.name} kind models lag-free "
                                    "runs only (use --kind oscillator for it)")  # fmt: skip
        log.info("population prior %s; calibration %s; kind %s", cfg.prior.identity, cfg.calibration.identity, cfg.kind)
        run_priors: dict = {}  # kind -> run -> its prior pooled with the context runs
        if context is not None and not cfg.hierarchical and not auto:
            run_priors[kind.name] = self._context_priors(arrays, context, kind.name)
        acc: dict = {"posts": [], "stats": [], "health": {}, "seconds": {}, "weights": {}}
        try:
            self._sample(arrays, infos, all_runs, context, run_priors, progress, acc)
        except KeyboardInterrupt as e:  # Ctrl-C: the runs sampled so far are a fit, handed on with the interrupt
            done = [r for p in acc["posts"] for r in p["run"].to_numpy().tolist()]
            if cfg.hierarchical or not done:
                raise Interrupted(partial=None) from e
            sub = arrays.subset([list(arrays.run_ids).index(r) for r in done])
            raise Interrupted(partial=self._assemble(all_runs.select(done), runs, infos, sub, acc, run_priors)) from e
        return self._assemble(all_runs, runs, infos, arrays, acc, run_priors)

    def _assemble(self, all_runs, runs, infos, arrays: ModelArrays, acc: dict, run_priors: dict) -> FittedForecast:
        """The fit of the runs of ``arrays`` (all of them, or those sampled before a Ctrl-C)."""
        import xarray as xr

        keep = list(arrays.run_ids)
        posts, stats = acc["posts"], acc["stats"]
        posterior = xr.concat(
            [p.drop_vars([v for v in p.data_vars if "run" not in p[v].dims]) for p in posts], dim="run"
        ).sel(run=keep)
        hierarchical = self.config.hierarchical
        hyper = posts[0][[v for v in posts[0].data_vars if "run" not in posts[0][v].dims]] if hierarchical else None
        st = stats[0] if hierarchical else xr.concat(stats, dim="run").sel(run=keep)
        ctx_ids = {r: p.identity for per_kind in run_priors.values() for r, p in per_kind.items() if r in set(keep)}
        return FittedForecast(
            config=self.config, sampler=self.sampler, runs=all_runs, infos={i.run_id: i for i in infos if i.run_id in keep},
            arrays=RunArrays.of(arrays), posterior=posterior, hyper=hyper,
            health={r: acc["health"][r] for r in keep}, seconds={r: acc["seconds"][r] for r in keep},
            forecast_ids=[r for r in runs.run_ids if r in set(keep)],
            context_priors=ctx_ids, sample_stats=st,
            shape_weights={r: w for r, w in acc["weights"].items() if r in set(keep)},
        )  # fmt: skip

    def _sample(self, arrays: ModelArrays, infos, all_runs, context, run_priors: dict, progress, acc: dict) -> None:
        """NUTS over the runs of ``arrays``, appending posterior, sample stats, health, seconds (and, kind
        'auto', the shape weights) to ``acc``.

        Hierarchical: one joint graph; otherwise each run alone (runs are independent given the
        population prior), all through one compiled model per kind whose data are swapped per run.
        """
        cfg, hierarchical = self.config, self.config.hierarchical
        kind = get_kind(cfg.kinds[0])
        n = len(arrays.run_ids)
        batches = [np.arange(n)] if hierarchical else [np.array([j]) for j in range(n)]
        posts, stats, health, seconds = acc["posts"], acc["stats"], acc["health"], acc["seconds"]
        for done, b in enumerate(batches, start=1):
            sub = arrays.subset(b)
            t0 = time.perf_counter()
            if cfg.kind == AUTO:
                ctx = (lambda k: self._context_priors(arrays, context, k)) if context is not None else None
                post, st, h, acc["weights"][sub.run_ids[0]] = self._fit_shape(sub, infos[int(b[0])], all_runs, ctx,
                                                                               run_priors)  # fmt: skip
            else:
                prior_b = run_priors.get(kind.name, {}).get(sub.run_ids[0], cfg.prior) if len(b) == 1 else cfg.prior
                post, st, h = self._sample_kind(kind, sub, cfg.prior, prior_b, hierarchical)
            dt = time.perf_counter() - t0
            posts.append(post)
            st = st[[v for v in STAT_VARS if v in st.data_vars]]
            stats.append(st if hierarchical else st.expand_dims(run=list(sub.run_ids), axis=-1))
            for rid in sub.run_ids:
                health[rid] = h[rid]
                seconds[rid] = dt / len(b)
            if progress is not None:
                progress(done, len(batches))

    def _sample_kind(self, kind, sub: ModelArrays, prior: PopulationPrior, prior_b: PopulationPrior,
                     hierarchical: bool):  # fmt: skip
        """NUTS of one batch with one kind: ``(posterior of the stored variables, sample stats, health per run)``.

        With spread channels configured, a degeneracy kind whose runs log one is fitted by the spread graph;
        every other fit by the reward-only graph (exactly as without channels), its spread parameters NaN.
        A closed-form kind (:attr:`~bayesgrpo.models.kinds.ModelKind.closed_form`) draws its posterior exactly."""
        if kind.closed_form:
            return self._closed_form(kind, sub)
        spread = bool(self.config.channels) and kind.degeneracy and sub.has_channels
        compiled = compiled_kind(kind, sub, prior, hierarchical=hierarchical, backend=self.sampler.backend,
                                 spread=spread)  # fmt: skip
        need = kind.required_data + (("channels",) if spread else ())
        seed = sampling.batch_seed(self.sampler.seed, sub.run_ids)
        idata = sampling.nuts(compiled, data=sub.data(prior_b), sampler=self.sampler, required=need, seed=seed)
        post, st, h = self._read(idata, sub)
        if not hierarchical and sampling.needs_retry(h[sub.run_ids[0]], self.sampler):
            # chains that disagree or diverged: once more, longer and with a smaller step; the first are dropped
            again = self.sampler.retried()
            why = ", ".join(sampling.health_problems(h[sub.run_ids[0]], r_hat=sampling.RETRY_R_HAT, ess=0.0))
            log.info("run %s: %s; sampled again (%d draws per chain, target_accept %g)", sub.run_ids[0], why,
                     again.draws, again.target_accept)  # fmt: skip
            # another seed: other starting points and another stream than the chains that disagreed
            idata = sampling.nuts(compiled, data=sub.data(prior_b), sampler=again, required=need,
                                  seed=sampling.retry_seed(seed))  # fmt: skip
            post, st, h = self._read(idata, sub, thin_to=self.sampler.draws)  # health of the draws kept
        if self.config.channels and not spread:  # the same variables for every run of the fit (NaN: fitted without)
            post = post.assign(dict.fromkeys(SPREAD_PARAMS, post["r_star"] * np.nan))
        if "family" in post.dims:
            post = post.assign_coords(family=list(sub.families))
        return post[[v for v in post.data_vars if v in STORED_VARS or "run" not in post[v].dims]], st, h

    def _closed_form(self, kind, sub: ModelArrays):
        """The exact posterior of a closed-form kind (one run): ``(posterior, sample stats, health)`` shaped as a
        sampled kind's (no divergences, R-hat 1: independent draws)."""
        import xarray as xr

        from bayesgrpo.models import stationary
        from bayesgrpo.models.arrays import SIGMA_M_FLOOR

        if len(sub.run_ids) != 1:
            raise ForecastError(f"the {kind.name} kind forecasts each run alone; a hierarchical (joint) fit needs "
                                "a sampled kind")  # fmt: skip
        C, D = self.sampler.chains, self.sampler.draws
        seed = sampling.batch_seed(self.sampler.seed, sub.run_ids)
        p = stationary.posterior(sub.y[:, 0], sub.mask[:, 0], chains=C, draws=D, seed=seed, noise_floor=SIGMA_M_FLOOR)
        coords = {"chain": np.arange(C), "draw": np.arange(D), "run": list(sub.run_ids)}
        post = xr.Dataset({k: (("chain", "draw", "run"), v[..., None]) for k, v in p.items()}, coords=coords)
        if self.config.channels:
            post = post.assign(dict.fromkeys(SPREAD_PARAMS, post["r_star"] * np.nan))
        st = xr.Dataset({"diverging": (("chain", "draw"), np.zeros((C, D), dtype=bool))},
                        coords={"chain": coords["chain"], "draw": coords["draw"]})  # fmt: skip
        h = {sub.run_ids[0]: {"r_hat_max": 1.0, "ess_min": float(C * D), "divergences": 0}}
        return post[[v for v in post.data_vars if v in STORED_VARS]], st, h

    @staticmethod
    def _read(idata, sub: ModelArrays, thin_to: int | None = None):
        """``(posterior, sample stats, health per run)`` of one NUTS call over the runs of ``sub``, thinned to
        ``thin_to`` draws per chain when given (:func:`bayesgrpo.inference.sampling.thinned`)."""
        post = sampling.posterior_dataset(idata).assign_coords(run=list(sub.run_ids))
        st = sampling.posterior_dataset(idata, "sample_stats")
        if thin_to is not None:
            post, st = sampling.thinned(post, thin_to), sampling.thinned(st, thin_to)
        return post, st, sampling.health(post, st, var_names=HEALTH_VARS)

    def _fit_shape(self, sub: ModelArrays, info: RunInfo, runs: RunSet, context, run_priors: dict):
        """Kind 'auto', one run: the kinds' weights (prior over kinds x block evidence), NUTS of every kind
        kept, their draws mixed (:mod:`bayesgrpo.forecast.shape`). Returns ``(posterior, sample stats of the
        heaviest kind, health, weights)``."""
        from bayesgrpo.forecast.features import prefix_features

        cfg, shape, rid = self.config, self.config.shape, sub.run_ids[0]
        assert shape is not None  # kind 'auto' always has one (ForecastConfig)
        feats = prefix_features(runs.run(rid), fraction=float(sub.fraction[0]), reward_min=info.reward_min,
                                reward_max=info.reward_max)  # fmt: skip
        allowed = [k for k in shape.kinds if not (get_kind(k).degeneracy and info.refresh_interval > 1)]
        priors = {k: cfg.kind_prior(k) for k in allowed}
        arrs = {k: self._arrays_for(sub, priors[k]) for k in allowed}
        evidence = {}
        if shape.evidence and len(allowed) > 1:
            evidence = {k: run_evidence(get_kind(k), arrs[k], priors[k], split=shape.split, seed=self.sampler.seed,
                                        backend=self.sampler.backend) for k in allowed}  # fmt: skip
        weights = kind_weights(feats, evidence, shape, allowed=allowed)
        posts, stats, healths = {}, {}, []
        for k in weights:
            if context is not None and k not in run_priors and not get_kind(k).closed_form:
                run_priors[k] = context(k)
            prior_b = run_priors.get(k, {}).get(rid, priors[k])
            posts[k], stats[k], h = self._sample_kind(get_kind(k), arrs[k], priors[k], prior_b, False)
            healths.append(h[rid])
        params = [v for v in STORED_VARS if any(v in p for p in posts.values())]
        post = mix_posteriors(posts, weights, shape.kinds, params=params)
        h = {"r_hat_max": max(x["r_hat_max"] for x in healths), "ess_min": min(x["ess_min"] for x in healths),
             "divergences": int(sum(x["divergences"] for x in healths))}  # fmt: skip
        log.info("run %s: shape weights %s (evidence %s)", rid, weights, {k: round(v, 2) for k, v in evidence.items()})
        return post, stats[max(weights, key=lambda k: weights[k])], {rid: h}, weights

    @staticmethod
    def _arrays_for(sub: ModelArrays, prior: PopulationPrior) -> ModelArrays:
        """A run's arrays under another kind's prior (only the momentum centre of unknown beta1 depends on it)."""
        if np.all(sub.mu_known > 0):
            return sub
        return dataclasses.replace(sub, mu_mean=np.where(sub.mu_known > 0, sub.mu_mean, prior.mu_default))

    #: observed fractions at which context runs are refitted (a run's fraction is rounded to the grid)
    CONTEXT_GRID = 0.05

    def _context_priors(self, arrays: ModelArrays, context: RunSet, kind: str) -> dict:
        """Per forecast run, the population prior of ``kind`` pooled with the complete ``context`` runs
        (:func:`bayesgrpo.models.prior.context_prior`): each context run is fitted once per observed
        fraction (rounded to :attr:`CONTEXT_GRID`) in the units a forecast at that fraction uses."""
        from bayesgrpo.forecast.population import fit_run_effects
        from bayesgrpo.models.prior import context_prior

        fits, out = {}, {}
        for rid, f in zip(arrays.run_ids, arrays.fraction, strict=True):
            fr = float(np.clip(round(float(f) / self.CONTEXT_GRID) * self.CONTEXT_GRID, self.CONTEXT_GRID, 0.9))
            if fr not in fits:
                smp = SamplerConfig(draws=300, tune=300, chains=self.sampler.chains, seed=self.sampler.seed)
                fits[fr] = fit_run_effects(context, fraction=fr, kind=kind, sampler=smp)
            if fits[fr]:
                out[rid] = context_prior(self.config.kind_prior(kind), fits[fr], fraction=float(f),
                                         name=f"context-{len(fits[fr])}-runs")  # fmt: skip
        return out
