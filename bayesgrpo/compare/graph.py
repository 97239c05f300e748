"""Compare model families and group sizes with one hierarchical fit over complete runs (issue 6).

``compare_runs(runs, by=("family", "group_size"))`` fits one joint PyMC model to complete reward
curves (no forecasting) and turns the posterior into the tests of physics.md section 8:

* prediction 3 / 8 — G-invariance of the plateau R* and the timescale tau: posterior contrasts
  between group-size levels (they should cover 0);
* prediction 4 — the noise temperature: process-noise variance ``sigma_p^2 = T_family * G^-b``,
  with ``b`` free (prior N(1, 1), predicted 1) or fixed at 1;
* prediction 9 — curvature scaling ``log tau = ... + alpha * log(N / N_ref)`` (kind ``scaling``);
* model comparison of ``oscillator`` / ``saturation`` / ``scaling`` by PSIS-LOO with one
  pointwise log-likelihood per RUN (leave-one-run-out).

The model (per run j, family f = level of ``by[0]``, other factors k = ``by[1:]``)::

    R*_j      = Rfam[f] + sum_k dR_k[level_kj] + gamma (r0obs_j - mean) + s_R z_Rj
    log tau_j = Tfam[f] + sum_k dT_k[level_kj] (+ alpha log(N_j/N_ref))  + s_T z_Tj   (tau in steps)
    mu_j      ~ Beta around the logged beta1 (oscillator, scaling); 0 (saturation)
    a_j       = (1 - mu_j) / tau_j                                                   (stiffness)
    log sigma_p,j^2 = logT[f] - b log(G_j / G_ref) + s_Q z_Qj                        (noise temperature)
    sigma_m,j = noise_j exp(s_M z_Mj);  r0_j = r0obs_j + s_0 z_0j   (s_M, s_0: the population prior's scales)

with family means themselves pooled around global centres with FIXED family-level scales
(``Rfam = R_c + 0.5 zf``, ``Tfam = T_c + 1.0 zf``, ``logT = Q_c + 2.0 zf``: with a handful of
families a learned scale is unidentified and makes a funnel), the run-level scatter of the log
process-noise variance fixed at ``s_Q = 0.5`` (the process noise of one run is often barely identified
next to the measurement noise; a learned ``s_Q`` gave a funnel and tree-depth saturation) and learned
``s_R, s_T`` (HalfNormal); non-centred throughout,
reference coding of the factor effects (first level = 0; contrasts do not depend on the coding) and
the exact Kalman likelihood of recursion (1) (:func:`bayesgrpo.models.kalman_op.kalman_ar2_loglik`, lag 0).

**Scales.** Plateau and noise contrasts only mean something when the runs share a reward scale.
``scale="auto"`` (default) normalises per ``source_repo`` when the metadata has that column
(grpo-public: each source logs one reward definition), else with one shared location/scale when every
reward lies in [0, 1] (the testbed), else per run. A group's units are not a forecast's: ``z = (reward
- loc) / scale`` with ``loc`` the median of its runs' start levels and ``scale`` the robust 5-95% range
of its pooled rewards (:func:`bayesgrpo.series.robust_range`, the scale scores are pooled on), so
that runs of one source share one unit; a run alone in its group keeps the forecast's normalisation
(:func:`bayesgrpo.models.arrays.normalisation`: its start level and full prefix range). With per-run
scales R* is in units of each run's own reward range and the noise temperature in units of its
squared range.

**Leave-one-run-out.** The pointwise log-likelihood of run j is the Kalman log-likelihood of its
whole curve given its own posterior parameters (computed in numpy with
:func:`bayesgrpo.models.kalman.filter_numpy`). PSIS-LOO on it approximates leaving a run out *with its
run-level parameters still conditioned on it*; since those are informed mostly by the run itself the
Pareto k values are often high — they are reported, and a high k means the LOO estimate of that run is
unreliable, not that the model is wrong.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayesgrpo.errors import SamplerWarning
from bayesgrpo.inference import sampling
from bayesgrpo.models.arrays import prepare_arrays
from bayesgrpo.models.kalman import filter_numpy
from bayesgrpo.models.kinds import MODEL_KINDS, default_prior
from bayesgrpo.models.prior import PopulationPrior
from bayesgrpo.plan import NEXT, is_unit_interval, truncate
from bayesgrpo.schema import REWARD, RUN, RunSet
from bayesgrpo.series import robust_range

log = logging.getLogger("bayesgrpo")

__all__ = ["CompareArrays", "build_compare_model", "prepare_compare", "pointwise_loglik", "COMPARE_KINDS",
           "CONTRAST_COLUMNS", "RUN_VARS", "HEALTH_VARS"]  # fmt: skip

# the registry's linear kinds (their flags map onto the comparison graph; the EKF kind is forecast-only)
COMPARE_KINDS = tuple(
    k for k, v in MODEL_KINDS.items() if not (v.degeneracy or v.closed_form)
)  # the hierarchical graphs
CONTRAST_COLUMNS = [
    "quantity", "factor", "level_a", "level_b", "mean", "sd", "ci_low", "ci_high",
    "p_gt_0", "predicted", "covers_predicted", "kind",
]  # fmt: skip
RUN_VARS = ("r0", "r_star", "tau", "mu", "a", "sigma_p", "sigma_m")
HEALTH_VARS = ("r_star", "tau", "sigma_p", "sigma_m", "r0")
FAMILY_SD = {"r_star": 0.5, "log_tau": 1.0, "log_temp": 2.0}  # prior sd of family means around the global centre
RUN_LOG_TEMP_SD = 0.5  # sd of a run's log process-noise variance around its family / G law


# --------------------------------------------------------------------------------------- data
@dataclass(frozen=True)
class CompareArrays:
    """Arrays of the comparison model (normalised units; (T, R) grids, (R,) per-run vectors)."""

    y: np.ndarray
    mask: np.ndarray
    r0_obs: np.ndarray
    noise: np.ndarray
    mu_mean: np.ndarray
    mu_known: np.ndarray
    log_g: np.ndarray  # log(G / G_ref); 0 where unknown
    group_size: np.ndarray
    log_size: np.ndarray  # log(N / N_ref); 0 where unknown
    family_idx: np.ndarray
    factor_idx: dict  # factor name -> (R,) int codes
    levels: dict  # factor name (incl. the family factor) -> list of level labels
    family_factor: str
    n_steps: np.ndarray  # grid length per run
    run_ids: tuple
    loc: np.ndarray
    scale: np.ndarray
    scale_groups: tuple
    g_ref: float
    lagged_runs: tuple = ()


def _level_labels(values: pd.Series) -> list[str]:
    vals = values.astype(object).where(values.notna(), "unknown")
    uniq = list(dict.fromkeys(vals))
    known = [u for u in uniq if u != "unknown"]
    with contextlib.suppress(TypeError, ValueError):
        known = sorted(known, key=lambda v: float(v))  # numbers in their order (2, 4, 8), not the log's
    return [_fmt_level(u) for u in known] + (["unknown"] if len(known) < len(uniq) else [])


def _fmt_level(v) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _scale_groups(runs: RunSet, scale: str) -> list[str]:
    meta = runs.meta
    if scale == "auto":
        if "source_repo" in meta.columns and meta["source_repo"].notna().all():
            scale = "source_repo"
        else:
            scale = "shared" if is_unit_interval(runs.data[REWARD]) else "run"
    if scale == "run":
        return list(runs.run_ids)
    if scale == "shared":
        return ["all"] * len(runs)
    if scale not in meta.columns:
        raise ValueError(f"scale={scale!r}: not 'auto', 'run', 'shared' or a metadata column {list(meta.columns)[:12]}")
    return [str(v) for v in meta[scale].astype(object).where(meta[scale].notna(), "unknown")]


def prepare_compare(
    runs: RunSet, *, by=("family", "group_size"), scale: str = "auto", max_steps: int | None = None
) -> CompareArrays:
    """Normalise complete runs onto the unit-step grid and code the grouping factors."""
    if max_steps is not None:
        runs = truncate(runs, until_step=int(max_steps))
    by = tuple(by)
    if not by:
        raise ValueError("by must name at least the family column, e.g. ('family', 'group_size')")
    meta = runs.meta
    for col in by:
        if col not in meta.columns:
            raise ValueError(f"by={by}: metadata has no column {col!r}; columns: {list(meta.columns)}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arr, infos = prepare_arrays(runs, horizon=NEXT)  # complete curves: no future is forecast
    R = len(infos)
    loc_run = np.array([i.loc for i in infos])
    sc_run = np.array([i.scale for i in infos])
    groups = _scale_groups(runs, scale)
    loc = loc_run.copy()
    sc = sc_run.copy()
    for gname in dict.fromkeys(groups):
        idx = [j for j, g in enumerate(groups) if g == gname]
        if len(idx) == 1:
            continue
        r = runs.data.loc[runs.data[RUN].isin([infos[j].run_id for j in idx]), REWARD].to_numpy(dtype=float)
        loc[idx] = float(np.median(loc_run[idx]))
        sc[idx] = robust_range(r)
    # re-express the prepared (per-run normalised) arrays in the group's units
    f = sc_run / sc
    y = np.where(arr.mask > 0, (arr.y * sc_run + loc_run - loc) / sc, 0.0)
    r0_obs = (arr.r0_obs * sc_run + loc_run - loc) / sc
    noise = np.maximum(arr.noise * f, 1e-4)
    fam_col = by[0]
    levels = {c: _level_labels(meta[c]) for c in by}
    codes = {
        c: np.array([levels[c].index(_fmt_level(v if pd.notna(v) else "unknown")) for v in meta[c].astype(object)])
        for c in by
    }
    G = (
        pd.to_numeric(meta["group_size"], errors="coerce").to_numpy(dtype=float)
        if "group_size" in meta
        else np.full(R, np.nan)
    )
    okG = np.isfinite(G) & (G > 0)
    g_ref = float(np.exp(np.mean(np.log(G[okG])))) if okG.any() else 1.0
    log_g = np.where(okG, np.log(np.where(okG, G, 1.0) / g_ref), 0.0)
    n_steps = np.array([i.last_step - i.s0 + 1 for i in infos])
    lagged = tuple(i.run_id for i in infos if i.refresh_interval > 1)
    if lagged:
        warnings.warn(
            f"{len(lagged)} run(s) have refresh_interval > 1 (e.g. {lagged[0]!r}); the comparison model uses the "
            "lag-free recursion (d = 0), so their stiffness absorbs the lag.",
            SamplerWarning,
            stacklevel=2,
        )
    return CompareArrays(
        y=y, mask=arr.mask.copy(), r0_obs=r0_obs, noise=noise, mu_mean=arr.mu_mean, mu_known=arr.mu_known,
        log_g=log_g, group_size=G, log_size=arr.log_size, family_idx=codes[fam_col],
        factor_idx={c: codes[c] for c in by[1:]}, levels=levels, family_factor=fam_col, n_steps=n_steps,
        run_ids=tuple(i.run_id for i in infos), loc=loc, scale=sc, scale_groups=tuple(groups), g_ref=g_ref,
        lagged_runs=lagged,
    )  # fmt: skip


# -------------------------------------------------------------------------------------- model
def build_compare_model(
    arr: CompareArrays, *, kind: str = "oscillator", free_g_exponent: bool = True, prior: PopulationPrior | None = None
):
    """The hierarchical comparison model (module docstring) as a ``pymc.Model`` with dims everywhere.

    The per-run building blocks (start level, momentum, stiffness, measurement noise, likelihood) are
    the forecasting models' (:mod:`bayesgrpo.models.components`) with the population prior's scales;
    the family / factor structure is the comparison's own.
    """
    import pymc as pm
    import pytensor.tensor as pt

    from bayesgrpo.models import components as C
    from bayesgrpo.models.kinds import get_kind

    spec = get_kind(kind)
    prior = prior or default_prior()
    T, R = arr.y.shape
    fam = arr.family_factor
    coords = {"run": list(arr.run_ids), "family": list(arr.levels[fam]), "step_grid": np.arange(T)}
    for c in arr.factor_idx:
        coords[f"{c}_level"] = list(arr.levels[c])
        coords[f"{c}_effect"] = list(arr.levels[c][1:])
    span = arr.n_steps.astype(float)
    log_tau_c = float(np.log(0.2 * np.median(span)))
    late = np.array(
        [np.mean(arr.y[np.nonzero(arr.mask[:, j])[0][-max(3, int(0.2 * arr.mask[:, j].sum())) :], j]) for j in range(R)]
    )
    r_c = float(np.median(late))
    log_q_c = float(np.log(np.median(arr.noise) ** 2) - 5.0)
    r0c = arr.r0_obs - arr.r0_obs.mean()
    with pm.Model(coords=coords) as model:
        y = pm.Data("y", arr.y, dims=("step_grid", "run"))
        mask = pm.Data("mask", arr.mask, dims=("step_grid", "run"))
        fidx = arr.family_idx
        # ---- family-level means (non-centred around pooled centres)
        # (family-level scales are fixed: with a handful of families a learned scale is unidentified and
        # makes a funnel; the family means themselves are free and strongly informed by the runs)
        z_r_fam = pm.Normal("z_r_star_family", 0.0, 1.0, dims="family")
        r_glob = pm.Normal("r_star_global", r_c, 1.0)
        r_fam = pm.Deterministic("r_star_family", r_glob + FAMILY_SD["r_star"] * z_r_fam, dims="family")
        z_t_fam = pm.Normal("z_log_tau_family", 0.0, 1.0, dims="family")
        t_glob = pm.Normal("log_tau_global", log_tau_c, 1.5)
        t_fam = pm.Deterministic("log_tau_family", t_glob + FAMILY_SD["log_tau"] * z_t_fam, dims="family")
        z_q_fam = pm.Normal("z_log_temp_family", 0.0, 1.0, dims="family")
        q_glob = pm.Normal("log_temp_global", log_q_c, 3.0)
        q_fam = pm.Deterministic("log_temp_family", q_glob + FAMILY_SD["log_temp"] * z_q_fam, dims="family")
        # ---- factor effects (reference coding: first level = 0)
        r_eff = t_eff = 0.0
        for c, codes in arr.factor_idx.items():
            if len(arr.levels[c]) < 2:
                continue
            zr = pm.Normal(f"z_r_star_{c}", 0.0, 1.0, dims=f"{c}_effect")
            zt = pm.Normal(f"z_log_tau_{c}", 0.0, 1.0, dims=f"{c}_effect")
            er = pm.Deterministic(f"r_star_{c}", pt.concatenate([pt.zeros(1), 0.5 * zr]), dims=f"{c}_level")
            et = pm.Deterministic(f"log_tau_{c}", pt.concatenate([pt.zeros(1), 1.0 * zt]), dims=f"{c}_level")
            r_eff = r_eff + er[codes]
            t_eff = t_eff + et[codes]
        gamma = pm.Normal("r_star_r0_slope", 0.5, 0.5)
        # ---- per-run effects (non-centred)
        s_r = pm.HalfNormal("r_star_run_sd", 0.5)
        s_t = pm.HalfNormal("log_tau_run_sd", 0.5)
        s_q = RUN_LOG_TEMP_SD  # fixed: the process noise of one run is often barely identified (funnel otherwise)
        z_r = pm.Normal("z_r_star", 0.0, 1.0, dims="run")
        z_t = pm.Normal("z_log_tau", 0.0, 1.0, dims="run")
        z_q = pm.Normal("z_log_temp", 0.0, 1.0, dims="run")
        log_tau = t_fam[fidx] + t_eff + s_t * z_t
        if spec.size_scaling:
            alpha = pm.Normal("alpha", prior.alpha_mu, prior.alpha_sd)  # curvature-scaling exponent (paper B: ~0.3)
            log_tau = log_tau + alpha * arr.log_size
        if free_g_exponent:
            b = pm.Normal("b", 1.0, 1.0)  # noise-temperature exponent, predicted 1
        else:
            b = pm.Deterministic("b", pt.as_tensor_variable(1.0))
        r0 = C.start_level(arr.r0_obs, prior.r0_sd)
        r_star = pm.Deterministic("r_star", r_fam[fidx] + r_eff + gamma * r0c + s_r * z_r, dims="run")
        tau = pm.Deterministic("tau", 1.0 + pt.exp(log_tau), dims="run")
        mu = C.momentum(arr.mu_mean, arr.mu_known, free=spec.free_momentum, like=pt.zeros(R),
                        conc_unknown=prior.mu_conc, conc_known=prior.mu_conc_known)  # fmt: skip
        a = C.stiffness(mu, tau)
        log_q = q_fam[fidx] - b * arr.log_g + s_q * z_q
        sigma_p = pm.Deterministic("sigma_p", pt.exp(0.5 * log_q), dims="run")
        sigma_m = C.measurement_noise(arr.noise, prior.log_noise_sd)
        C.reward_likelihood(y, mask, refresh=np.ones(R, dtype="int64"), r0=r0, r_star=r_star, a=a, mu=mu,
                            sigma_p=sigma_p, sigma_m=sigma_m)  # fmt: skip
    return model


def pointwise_loglik(arr: CompareArrays, posterior) -> np.ndarray:
    """Log-likelihood of each run's whole curve per posterior draw: array (chain, draw, run).

    Computed with the numpy Kalman filter (:func:`bayesgrpo.models.kalman.filter_numpy`), vectorised over
    draws, on each run's own grid (padding excluded).
    """
    post = sampling.as_dataset(posterior)
    C, S = post.sizes["chain"], post.sizes["draw"]
    out = np.empty((C, S, len(arr.run_ids)))
    for j, rid in enumerate(arr.run_ids):
        p = {k: post[k].sel(run=rid).to_numpy().reshape(-1) for k in RUN_VARS if k != "tau"}
        T = int(arr.n_steps[j])
        ll, _, _ = filter_numpy(arr.y[:T, j][:, None], arr.mask[:T, j][:, None], **p)
        out[:, :, j] = ll.reshape(C, S)
    return out
