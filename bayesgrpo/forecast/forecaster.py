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
import functools
import logging
import time

import numpy as np

from bayesgrpo.conventions import DEFAULT_FINAL_WINDOW
from bayesgrpo.errors import ForecastError, Interrupted
from bayesgrpo.forecast.calibration import Calibration
from bayesgrpo.forecast.config import HEALTH_VARS, STAT_VARS, STORED_VARS, TABLE_COLUMNS, ForecastConfig
from bayesgrpo.forecast.fitted import FittedForecast, RunArrays
from bayesgrpo.inference import sampling
from bayesgrpo.inference.sampling import SamplerConfig
from bayesgrpo.models.arrays import ModelArrays, prepare_arrays
from bayesgrpo.models.kinds import get_kind
from bayesgrpo.models.prior import PopulationPrior
from bayesgrpo.physics.stopping import DEFAULT_STOP_FRACTION
from bayesgrpo.plan import NEXT, Plans, plan_runs
from bayesgrpo.schema import RunSet

__all__ = ["SamplerConfig", "ForecastConfig", "Forecaster", "FittedForecast", "TABLE_COLUMNS"]

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
    sampler : SamplerConfig, optional

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
        kind: str = "oscillator",
        *,
        final_window: float = DEFAULT_FINAL_WINDOW,
        stop_fraction: float = DEFAULT_STOP_FRACTION,
        hierarchical: bool = False,
        prior: PopulationPrior | None = None,
        calibration: Calibration | bool | None = True,
        sampler: SamplerConfig | None = None,
    ):
        kw = dict(kind=kind, final_window=final_window, stop_fraction=stop_fraction, hierarchical=hierarchical)
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
        kind = get_kind(cfg.kind)
        runs, all_runs, plan_map = plans.require().observed, plans.observed, dict(plans.plans)
        if context is not None:
            clash = set(runs.run_ids) & set(context.run_ids)
            if clash:
                raise ForecastError(f"run(s) {sorted(clash)[:3]} are both forecast and given as --context")
        if context is not None and cfg.hierarchical:
            # the joint model: context runs fitted with the forecast runs in one hierarchical graph
            all_runs = runs.concat(context)
            plan_map.update(plan_runs(context, horizon=NEXT, final_window=cfg.final_window).require().plans)
        arrays, infos = prepare_arrays(all_runs, plans=plan_map, prior=cfg.prior)
        if kind.degeneracy:
            lagged = [i.run_id for i in infos if i.refresh_interval > 1]
            if lagged:
                raise ForecastError(f"run {lagged[0]!r} has a refresh interval > 1; the {kind.name} kind models lag-free "
                                    "runs only (use --kind oscillator for it)")  # fmt: skip
        log.info("population prior %s; calibration %s; kind %s", cfg.prior.identity, cfg.calibration.identity, cfg.kind)
        run_priors = self._context_priors(arrays, context) if context is not None and not cfg.hierarchical else {}
        acc: dict = {"posts": [], "stats": [], "health": {}, "seconds": {}}
        try:
            self._sample(arrays, run_priors, progress, acc)
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
        return FittedForecast(
            config=self.config, sampler=self.sampler, runs=all_runs, infos={i.run_id: i for i in infos if i.run_id in keep},
            arrays=RunArrays.of(arrays), posterior=posterior, hyper=hyper,
            health={r: acc["health"][r] for r in keep}, seconds={r: acc["seconds"][r] for r in keep},
            forecast_ids=[r for r in runs.run_ids if r in set(keep)],
            context_priors={r: p.identity for r, p in run_priors.items() if r in set(keep)}, sample_stats=st,
        )  # fmt: skip

    def _sample(self, arrays: ModelArrays, run_priors: dict, progress, acc: dict) -> None:
        """NUTS over the runs of ``arrays``, appending posterior, sample stats, health and seconds to ``acc``.

        Hierarchical: one joint graph; otherwise each run alone (runs are independent given the
        population prior), all through one compiled model whose data are swapped per run.
        """
        cfg, kind, hierarchical = self.config, get_kind(self.config.kind), self.config.hierarchical
        n = len(arrays.run_ids)
        batches = [np.arange(n)] if hierarchical else [np.array([j]) for j in range(n)]
        posts, stats, health, seconds = acc["posts"], acc["stats"], acc["health"], acc["seconds"]
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
            st = sampling.posterior_dataset(idata, "sample_stats")
            h = sampling.health(post, st, var_names=HEALTH_VARS)
            dt = time.perf_counter() - t0
            posts.append(post[[v for v in post.data_vars if v in STORED_VARS or "run" not in post[v].dims]])
            st = st[[v for v in STAT_VARS if v in st.data_vars]]
            stats.append(st if hierarchical else st.expand_dims(run=list(sub.run_ids), axis=-1))
            for rid in sub.run_ids:
                health[rid] = h[rid]
                seconds[rid] = dt / len(b)
            if progress is not None:
                progress(done, len(batches))

    #: observed fractions at which context runs are refitted (a run's fraction is rounded to the grid)
    CONTEXT_GRID = 0.05

    def _context_priors(self, arrays: ModelArrays, context: RunSet) -> dict:
        """Per forecast run, the population prior pooled with the complete ``context`` runs
        (:func:`bayesgrpo.models.prior.context_prior`): each context run is fitted once per observed
        fraction (rounded to :attr:`CONTEXT_GRID`) in the units a forecast at that fraction uses."""
        from bayesgrpo.forecast.population import fit_run_effects
        from bayesgrpo.models.prior import context_prior

        fits, out = {}, {}
        for rid, f in zip(arrays.run_ids, arrays.fraction, strict=True):
            fr = float(np.clip(round(float(f) / self.CONTEXT_GRID) * self.CONTEXT_GRID, self.CONTEXT_GRID, 0.9))
            if fr not in fits:
                smp = SamplerConfig(draws=300, tune=300, chains=self.sampler.chains, seed=self.sampler.seed)
                fits[fr] = fit_run_effects(context, fraction=fr, kind=self.config.kind, sampler=smp)
            if fits[fr]:
                out[rid] = context_prior(self.config.prior, fits[fr], fraction=float(f),
                                         name=f"context-{len(fits[fr])}-runs")  # fmt: skip
        return out
