"""PyMC models of GRPO reward curves (the backend: PyMC graphs built from prepared arrays).

All models work in per-run normalised units (see :mod:`bayesgrpo.prepare`) and share one
likelihood: the exact Kalman filter of recursion (1) with each run's refresh-interval lag pattern
(:func:`bayesgrpo.kalman_op.kalman_refresh_loglik`, a compiled Op with an exact gradient; K = 1 is
the lag-free case). The refresh interval is data, so one compiled model serves every run.

``oscillator``
    The mean-field damped oscillator of physics.md section 2: per run a plateau ``r_star``, an initial
    reward ``r0``, a timescale ``tau`` (the overdamped-limit time c/k, in units of the run's horizon
    span), a momentum ``mu`` (Beta prior centred on the logged ``beta1``, else on Adam's 0.9), and
    stiffness ``a = (1 - mu) / tau_steps``. Process noise ``sigma_p`` is parameterised through the
    stationary sd of the latent around the plateau; measurement noise ``sigma_m`` is centred on a
    robust estimate from the run's first differences.
``saturation``
    The overdamped limit (paper B's single exponential): the same model with ``mu = 0``, for which (1)
    is an AR(1) that relaxes as ``exp(-n/tau)``.

Population hyperparameters (``gain``, ``log_tau``, ``log_wander``, ...) either come from a shipped
population prior (:mod:`bayesgrpo.population`) as fixed numbers, or are learned jointly when
``hierarchical=True`` (non-centred per-run effects around family means).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["MODEL_KINDS", "build_model", "ModelArrays"]

MODEL_KINDS = ("oscillator", "saturation", "scaling")


@dataclass(frozen=True)
class ModelArrays:
    """Arrays the PyMC graph is built from (all in normalised units).

    ``y``, ``mask`` are (T, R) on the unit-step grid; per-run vectors are (R,): ``refresh`` (refresh
    interval K >= 1, int: lag d_n = n mod K in the transition out of grid step n), ``span`` (horizon - first step, in steps), ``noise`` (robust measurement-noise estimate),
    ``mu_mean`` (momentum prior mean) and ``mu_known`` (1 where beta1 was logged), ``family_idx``,
    ``log_size`` (log params_b relative to the reference size, 0 where unknown), ``r0_obs`` (mean of the
    first observed points).
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


def build_model(arr: ModelArrays, *, kind: str = "oscillator", prior=None, hierarchical: bool = False):
    """Build the PyMC model for a batch of runs.

    Parameters
    ----------
    arr : ModelArrays
        Prepared arrays (see :func:`bayesgrpo.prepare.prepare_arrays`).
    kind : {"oscillator", "saturation", "scaling"}
    prior : bayesgrpo.population.PopulationPrior, optional
        Fixed population hyperparameters (default: the shipped population prior).
    hierarchical : bool
        Learn the population means/sds across the runs given (partial pooling by family), with the
        shipped prior as hyperprior.

    Returns
    -------
    pymc.Model
    """
    import pymc as pm
    import pytensor.tensor as pt

    from bayesgrpo.kalman_op import kalman_refresh_loglik
    from bayesgrpo.population import PopulationPrior

    if kind not in MODEL_KINDS:
        raise ValueError(f"unknown model kind {kind!r}; choose one of {MODEL_KINDS}")
    prior = prior or PopulationPrior.default()
    T, R = arr.y.shape
    coords = {"run": list(arr.run_ids), "family": list(arr.families), "step_grid": np.arange(T)}
    with pm.Model(coords=coords) as model:
        y = pm.Data("y", arr.y, dims=("step_grid", "run"), shape=(None, None))
        mask = pm.Data("mask", arr.mask, dims=("step_grid", "run"), shape=(None, None))
        refresh = pm.Data("refresh", np.asarray(arr.refresh, dtype="int64"), dims="run", shape=(None,))
        span = pm.Data("span", arr.span, dims="run", shape=(None,))
        noise = pm.Data("noise", arr.noise, dims="run", shape=(None,))
        r0_obs = pm.Data("r0_obs", arr.r0_obs, dims="run", shape=(None,))
        fam = pm.Data("family_idx", arr.family_idx.astype("int64"), dims="run", shape=(None,))
        log_size = pm.Data("log_size", arr.log_size, dims="run", shape=(None,))

        if hierarchical:
            gain_mu = pm.Normal("gain_mu", prior.gain_mu, prior.gain_sd / 2, dims="family")
            gain_sd = pm.HalfNormal("gain_sd", prior.gain_sd)
            log_tau_mu = pm.Normal("log_tau_mu", prior.log_tau_mu, prior.log_tau_sd / 2, dims="family")
            log_tau_sd = pm.HalfNormal("log_tau_sd", prior.log_tau_sd)
            wander_mu = pm.Normal("log_wander_mu", prior.log_wander_mu, prior.log_wander_sd / 2, dims="family")
            wander_sd = pm.HalfNormal("log_wander_sd", prior.log_wander_sd)
            g_mu, g_sd = gain_mu[fam], gain_sd
            t_mu, t_sd = log_tau_mu[fam], log_tau_sd
            w_mu, w_sd = wander_mu[fam], wander_sd
        else:
            g_mu, g_sd = prior.gain_mu, prior.gain_sd
            t_mu, t_sd = prior.log_tau_mu, prior.log_tau_sd
            w_mu, w_sd = prior.log_wander_mu, prior.log_wander_sd
        if kind == "scaling":
            alpha = pm.Normal("alpha", prior.alpha_mu, prior.alpha_sd)  # curvature-scaling exponent
            t_mu = t_mu + alpha * log_size

        # non-centred per-run effects
        z_r0 = pm.Normal("z_r0", 0.0, 1.0, dims="run")
        z_gain = pm.Normal("z_gain", 0.0, 1.0, dims="run")
        z_tau = pm.Normal("z_tau", 0.0, 1.0, dims="run")
        z_wander = pm.Normal("z_wander", 0.0, 1.0, dims="run")
        z_noise = pm.Normal("z_noise", 0.0, 1.0, dims="run")
        r0 = pm.Deterministic("r0", r0_obs + prior.r0_sd * z_r0, dims="run")
        r_star = pm.Deterministic("r_star", r0 + g_mu + g_sd * z_gain, dims="run")
        tau = pm.Deterministic("tau", 1.0 + span * pt.exp(t_mu + t_sd * z_tau), dims="run")  # steps, >= 1
        if kind == "oscillator":
            mu_mean = pm.Data("mu_mean", arr.mu_mean, dims="run", shape=(None,))
            mu_known = pm.Data("mu_known", arr.mu_known, dims="run", shape=(None,))
            conc = pt.switch(mu_known > 0, prior.mu_conc_known, prior.mu_conc)
            mu = pm.Beta("mu", alpha=mu_mean * conc, beta=(1.0 - mu_mean) * conc, dims="run")
        else:
            mu = pm.Deterministic("mu", pt.zeros_like(span), dims="run")
        a = pm.Deterministic("a", (1.0 - mu) / tau, dims="run")
        sigma_m = pm.Deterministic("sigma_m", noise * pt.exp(prior.log_noise_sd * z_noise), dims="run")
        wander = pm.Deterministic("wander", sigma_m * pt.exp(w_mu + w_sd * z_wander), dims="run")
        # stationary latent variance of the exact AR(2), d = 0 (physics.md section 5), inverted:
        stat_factor = (1.0 + mu) / ((1.0 - mu) * a * (2.0 * (1.0 + mu) - a))
        sigma_p = pm.Deterministic("sigma_p", wander / pt.sqrt(stat_factor), dims="run")
        ll = kalman_refresh_loglik(y, mask, refresh, r0=r0, r_star=r_star, a=a, mu=mu, sigma_p=sigma_p, sigma_m=sigma_m)
        pm.Potential("reward", ll.sum())
    return model
