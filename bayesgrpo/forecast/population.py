"""Population-prior fitting that samples: per-run fits of complete runs (the rows a population prior
or a context prior is made of).

* :func:`fit_run_effects` -- each complete run fitted alone under broad priors, in the units a forecast
  of its prefix at a given observed fraction uses (``bench/fit_population_prior.py`` aggregates the rows
  with :func:`bayesgrpo.models.prior.fit_population`; :class:`~bayesgrpo.forecast.Forecaster` pools
  ``context`` runs with :func:`bayesgrpo.models.prior.context_prior`).

The aggregation itself (no sampling) stays with the prior in :mod:`bayesgrpo.models.prior`.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

from bayesgrpo.inference import sampling
from bayesgrpo.inference.sampling import SamplerConfig
from bayesgrpo.models.arrays import prepare_arrays
from bayesgrpo.models.kinds import get_kind
from bayesgrpo.models.prior import PopulationPrior
from bayesgrpo.plan import NEXT, plan_runs

__all__ = ["BROAD_PRIOR", "fit_run_effects"]


#: broad hyperparameters for fitting single complete runs (the per-run fits a population prior is made of)
BROAD_PRIOR = PopulationPrior(gain_mu=0.3, gain_sd=2.0, log_tau_mu=4.0, log_tau_sd=2.5, log_wander_mu=-1.0,
                              log_wander_sd=2.0, r0_sd=0.5, log_noise_sd=1.0, log_delta_mu=-1.0, log_delta_sd=2.0,
                              lam_logit_mu=0.0, lam_logit_sd=2.0, log_nu_mu=0.0, log_nu_sd=2.0, log_headroom_mu=0.0,
                              log_headroom_sd=2.0, name="broad")  # fmt: skip


def _logit(p):
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def fit_run_effects(runs, *, fraction: float, kind: str = "oscillator", sampler=None, source=None, seed: int = 0,
                    channels=(), prior: PopulationPrior | None = None):  # fmt: skip
    """Fit each complete run of ``runs`` (broad priors) in the units a forecast at ``fraction`` uses.

    The normalisation of each run comes from its prefix at ``fraction`` (``normalize_with``), the fit
    from the whole run. Returns one row per run with the per-run posterior medians
    :func:`bayesgrpo.models.prior.fit_population` aggregates (``gain, log_tau, log_wander, log_delta, r0_dev,
    log_noise_dev``; with ``channels`` (spread channels, :mod:`bayesgrpo.models.spread`; only runs that log one
    are fitted) also ``log_nu`` and, bounds unknown, ``log_headroom``) and the sampler health. Runs whose
    prefix could not be forecast (fewer than :data:`~bayesgrpo.plan.MIN_POINTS` points before ``fraction``)
    are skipped. ``prior``: the hyperparameters of the fits (default :data:`BROAD_PRIOR`; the spread fits use
    the fitted population for the reward's parameters).
    """
    from bayesgrpo.models.degeneracy import LAM_MAX  # imports PyTensor: only where a fit runs

    sampler = sampler or SamplerConfig(draws=300, tune=300, seed=seed)
    prior = prior or BROAD_PRIOR
    spec = get_kind(kind)
    prefix = plan_runs(runs, until_fraction=fraction)  # the prefix a forecast at this fraction sees
    ok = prefix.ok_ids  # prefixes a forecast could be made from (MIN_POINTS)
    rows: list[dict] = []
    if not ok:
        return rows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant or repaired curves: the fit of one complete run only
        arr, infos = prepare_arrays(runs.select(ok), horizon=NEXT, prior=prior,
                                    normalize_with=prefix.observed.select(ok), channels=channels)  # fmt: skip
    for j, info in enumerate(infos):
        sub = arr.subset([j])
        spread = bool(channels) and sub.has_channels
        if channels and not spread:
            continue
        build = functools.partial(spec.build, sub, prior=prior, spread=spread)
        compiled = sampling.compile_model(spec.graph_key(sub, prior, False, spread=spread), build,
                                          backend=sampler.backend)  # fmt: skip
        need = spec.required_data + (("channels",) if spread else ())
        idata = sampling.nuts(compiled, data=sub.data(prior), sampler=sampler, required=need,
                              seed=sampling.batch_seed(sampler.seed, sub.run_ids))  # fmt: skip
        post = sampling.posterior_dataset(idata).assign_coords(run=[info.run_id])
        h = sampling.health(post, sampling.posterior_dataset(idata, "sample_stats"), var_names=("r_star", "tau", "r0"))
        p = post.isel(run=0)
        rows.append(dict(
            run_id=info.run_id, source=(source or {}).get(info.run_id, "") if isinstance(source, dict) else
            (source[info.run_id] if source is not None else ""), cutoff=float(fraction), kind=kind,
            gain=float((p["r_star"] - p["r0"]).median()),
            log_tau=float(np.log(p["tau"] - 1.0).median()),
            log_wander=float(np.log(p["wander"] / p["sigma_m"]).median()),
            r0_dev=float((p["r0"] - sub.r0_obs[0]).median()),
            log_noise_dev=float(np.log(p["sigma_m"] / sub.noise[0]).median()),
            log_delta=float(np.log(np.maximum(p["r0"] - p["L"], 1e-9)).median())
            if spec.degeneracy and sub.floor_known[0] == 0 else np.nan,
            lam_logit=float(_logit(p["lam"] / LAM_MAX).median()) if spec.heterogeneity else np.nan,
            log_nu=float(np.log(p["nu"]).median()) if spread else np.nan,
            log_headroom=float(np.log(p["headroom"]).median()) if spread and sub.width_known[0] == 0 else np.nan,
            r_hat=h[info.run_id]["r_hat_max"], divergences=h[info.run_id]["divergences"],
        ))  # fmt: skip
    return rows
