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

import itertools
import logging
import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayesgrpo.conventions import CI_PROB, interval_bounds
from bayesgrpo.errors import SamplerWarning
from bayesgrpo.inference import sampling
from bayesgrpo.inference.sampling import SamplerConfig
from bayesgrpo.models.arrays import prepare_arrays
from bayesgrpo.models.kalman import filter_numpy
from bayesgrpo.models.kinds import MODEL_KINDS, default_prior
from bayesgrpo.models.prior import PopulationPrior
from bayesgrpo.plan import NEXT, is_unit_interval, truncate
from bayesgrpo.schema import REWARD, RUN, RunSet
from bayesgrpo.series import robust_range

__all__ = ["compare_runs", "CompareResult", "CompareArrays", "build_compare_model", "prepare_compare",
           "pointwise_loglik", "CONTRAST_COLUMNS", "COMPARE_KINDS"]  # fmt: skip

log = logging.getLogger("bayesgrpo")

# the registry's linear kinds (their flags map onto the comparison graph; the EKF kind is forecast-only)
COMPARE_KINDS = tuple(k for k, v in MODEL_KINDS.items() if not v.degeneracy)
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
    try:
        uniq = sorted(uniq, key=lambda v: float(v))
    except (TypeError, ValueError):
        pass
    return [_fmt_level(u) for u in uniq]


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


def _ds(node):
    return node.to_dataset() if hasattr(node, "to_dataset") else node


def pointwise_loglik(arr: CompareArrays, posterior) -> np.ndarray:
    """Log-likelihood of each run's whole curve per posterior draw: array (chain, draw, run).

    Computed with the numpy Kalman filter (:func:`bayesgrpo.models.kalman.filter_numpy`), vectorised over
    draws, on each run's own grid (padding excluded).
    """
    post = _ds(posterior)
    C, S = post.sizes["chain"], post.sizes["draw"]
    out = np.empty((C, S, len(arr.run_ids)))
    for j, rid in enumerate(arr.run_ids):
        p = {k: post[k].sel(run=rid).to_numpy().reshape(-1) for k in RUN_VARS if k != "tau"}
        T = int(arr.n_steps[j])
        ll, _, _ = filter_numpy(arr.y[:T, j][:, None], arr.mask[:T, j][:, None], **p)
        out[:, :, j] = ll.reshape(C, S)
    return out


# ----------------------------------------------------------------------------------- results
@dataclass
class CompareResult:
    """Posterior comparison of families / group sizes (see :func:`compare_runs`).

    Attributes
    ----------
    contrasts : DataFrame
        Tidy table (:data:`CONTRAST_COLUMNS`) of the primary model's posterior contrasts between
        families and between factor levels (plateau, log timescale, log stiffness, log noise temperature),
        plus ``alpha`` and the G-exponent ``b``; 90% equal-tailed intervals (``ci_prob=0.9``).
    loo : DataFrame
        PSIS-LOO (leave-one-run-out) comparison of the fitted model kinds (``az.compare``) with Pareto-k counts.
    pareto_k : DataFrame
        Pareto k per run and model kind.
    tau_by_size : DataFrame
        Posterior of the run-averaged timescale per (family, model size).
    health : DataFrame
        Sampler health per model kind: max r_hat, min bulk/tail ESS, divergences, seconds.
    fits : dict
        model kind -> DataTree (posterior, sample_stats, log_likelihood with dims (chain, draw, run)).
    primary : str
        Model kind the contrasts come from.
    """

    contrasts: pd.DataFrame
    loo: pd.DataFrame
    pareto_k: pd.DataFrame
    tau_by_size: pd.DataFrame
    health: pd.DataFrame
    fits: dict
    arrays: CompareArrays
    primary: str
    by: tuple
    free_g_exponent: bool
    loo_objects: dict = field(default_factory=dict, repr=False)

    def caveats(self) -> list[str]:
        """What a reader must know before trusting the result (one sentence each)."""
        out = []
        n = len(self.arrays.run_ids)
        if n == 1:
            out.append("compare: only one run, so every contrast is its prior; compare needs several runs")
        fam_levels = self.arrays.levels[self.arrays.family_factor]
        if len(fam_levels) == 1:
            out.append(
                f"compare: every run is in {self.arrays.family_factor} {fam_levels[0]!r} "
                f"(no {self.arrays.family_factor!r} metadata?), so there are no family contrasts"
            )
        for c, lv in self.arrays.levels.items():
            if c != self.arrays.family_factor and len(lv) == 1:
                out.append(f"compare: every run has {c} = {lv[0]}, so there is no {c} contrast")
        if len(self.pareto_k):
            ks = self.pareto_k.drop(columns=["run_id"])
            bad = {m: int((ks[m] > 1).sum()) for m in ks.columns if (ks[m] > 1).any()}
            if bad:
                txt = ", ".join(f"{m}: {k} of {len(ks)} runs" for m, k in bad.items())
                out.append(
                    f"compare: PSIS-LOO rests on Pareto k > 1 for {txt}; the LOO ranking and weights are unreliable"
                )
        return out

    def g_exponent(self) -> dict:
        """The noise-temperature exponent b of the primary fit (mean, sd, 90% interval, P(b>0))."""
        row = self.contrasts.loc[self.contrasts["quantity"] == "g_exponent_b"]
        return row.iloc[0].to_dict() if len(row) else {}

    def summary_markdown(self) -> str:
        """Markdown report: b vs 1, contrasts, tau by size, LOO with Pareto k, sampler health."""
        lines = [f"# bayesgrpo compare — {len(self.arrays.run_ids)} runs, by {', '.join(self.by)}", ""]
        b = self.g_exponent()
        if b:
            kind = "free (prior N(1, 1))" if self.free_g_exponent else "fixed at 1"
            lines += [
                f"- noise-temperature G-exponent b ({kind}): **{b['mean']:.2f}** (90% interval {b['ci_low']:.2f} to {b['ci_high']:.2f}); "
                f"predicted 1 -> {'covered' if b['covers_predicted'] else 'NOT covered'}",
            ]
        al = self.contrasts.loc[self.contrasts["quantity"] == "alpha"]
        if len(al):
            a = al.iloc[0]
            lines.append(
                f"- curvature-scaling exponent alpha (tau ~ N^alpha): {a['mean']:.2f} (90% {a['ci_low']:.2f} to {a['ci_high']:.2f}), P(alpha>0) = {a['p_gt_0']:.2f}"
            )
        lines.append(
            f"- reward scales: {len(set(self.arrays.scale_groups))} normalisation group(s); primary model for contrasts: `{self.primary}`"
        )
        lines += ["", "## Contrasts (90% equal-tailed intervals)", "", _md(self.contrasts.drop(columns=["kind"]))]
        if len(self.tau_by_size):
            lines += ["", "## Timescale vs model size", "", _md(self.tau_by_size)]
        lines += ["", "## PSIS-LOO, leave-one-run-out", "", _md(self.loo)]
        lines += ["", "## Sampler health", "", _md(self.health)]
        return "\n".join(lines) + "\n"


def _md(df: pd.DataFrame) -> str:
    def f(v):
        if isinstance(v, (float, np.floating)):
            if not np.isfinite(v):
                return ""
            return f"{v:.3g}"
        return str(v)

    cols = list(df.columns)
    out = ["| " + " | ".join(str(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    for r in df.itertuples(index=False):
        out.append("| " + " | ".join(f(v) for v in r) + " |")
    return "\n".join(out)


def _summ(draws: dict, *, predicted: dict | None = None) -> pd.DataFrame:
    """Summarise named draw arrays (chain, draw) with az.summary(ci_prob=0.9)."""
    import arviz as az
    import xarray as xr

    names = list(draws)
    stack = np.stack([draws[k] for k in names], axis=-1)
    ds = xr.Dataset({"c": (("chain", "draw", "contrast"), stack)}, coords={"contrast": np.arange(len(names))})
    s = az.summary(ds, ci_prob=CI_PROB, ci_kind="eti", round_to="none", kind="stats")
    lo = [c for c in s.columns if c.endswith("_lb")][0]
    hi = [c for c in s.columns if c.endswith("_ub")][0]
    res = pd.DataFrame({
        "mean": s["mean"].to_numpy(dtype=float), "sd": s["sd"].to_numpy(dtype=float),
        "ci_low": s[lo].to_numpy(dtype=float), "ci_high": s[hi].to_numpy(dtype=float),
        "p_gt_0": [float(np.mean(draws[k] > 0)) for k in names],
    })  # fmt: skip
    res.index = names
    return res


def _contrasts(arr: CompareArrays, post, kind: str) -> pd.DataFrame:
    """Tidy contrast table of one fit."""
    post = _ds(post)
    rows, draws = [], {}
    fam = arr.family_factor
    fam_levels = arr.levels[fam]
    run_fac = {fam: arr.family_idx, **arr.factor_idx}

    def add(quantity, factor, la, lb, d, pred):
        key = f"{quantity}|{factor}|{la}|{lb}"
        draws[key] = d
        rows.append((key, quantity, factor, la, lb, pred))

    # family-level parameter contrasts
    pars = {"plateau": "r_star_family", "log_tau": "log_tau_family", "log_noise_temp": "log_temp_family"}
    for i, j in itertools.combinations(range(len(fam_levels)), 2):
        for q, v in pars.items():
            d = post[v].isel(family=i).to_numpy() - post[v].isel(family=j).to_numpy()
            add(q, fam, fam_levels[i], fam_levels[j], d, np.nan)
    # factor-level effect contrasts (G: predicted 0 for plateau / timescale, -(log Ga - log Gb) for noise)
    b = post["b"].to_numpy()
    b = np.broadcast_to(b, post["r_star"].isel(run=0).shape)
    for c, levels in ((c, arr.levels[c]) for c in arr.factor_idx):
        if len(levels) < 2:
            continue
        is_g = c == "group_size"
        for i, j in itertools.combinations(range(len(levels)), 2):
            for q, v in (("plateau", f"r_star_{c}"), ("log_tau", f"log_tau_{c}")):
                d = post[v].isel({f"{c}_level": i}).to_numpy() - post[v].isel({f"{c}_level": j}).to_numpy()
                add(q, c, levels[i], levels[j], d, 0.0 if is_g else np.nan)
            if is_g:
                try:
                    lg = math.log(float(levels[i])) - math.log(float(levels[j]))
                except ValueError:
                    continue
                add("log_noise_temp", c, levels[i], levels[j], -b * lg, -lg)
    # stiffness a = (1 - mu)/tau: run-averaged log a per level (includes per-run effects)
    log_a = np.log(post["a"].to_numpy())  # (chain, draw, run)
    for c, codes in run_fac.items():
        levels = arr.levels[c]
        present = [k for k in range(len(levels)) if np.any(codes == k)]
        for i, j in itertools.combinations(present, 2):
            d = log_a[..., codes == i].mean(-1) - log_a[..., codes == j].mean(-1)
            add("log_stiffness", c, levels[i], levels[j], d, 0.0 if c == "group_size" else np.nan)
    if "alpha" in post:
        add("alpha", "log_size", "slope", "", post["alpha"].to_numpy(), np.nan)
    add("g_exponent_b", "group_size", "b", "", np.asarray(b, dtype=float).copy(), 1.0)
    s = _summ(draws)
    out = []
    for key, q, fct, la, lb, pred in rows:
        r = s.loc[key]
        cov = bool(r["ci_low"] <= pred <= r["ci_high"]) if np.isfinite(pred) else None
        out.append([q, fct, la, lb, r["mean"], r["sd"], r["ci_low"], r["ci_high"], r["p_gt_0"], pred, cov, kind])
    df = pd.DataFrame(out, columns=CONTRAST_COLUMNS)
    if (
        not np.isfinite(df.loc[df["quantity"] == "g_exponent_b", "sd"]).all()
        or float(df.loc[df["quantity"] == "g_exponent_b", "sd"].iloc[0]) == 0.0
    ):
        df.loc[df["quantity"] == "g_exponent_b", ["p_gt_0"]] = 1.0
    return df


def _tau_by_size(arr: CompareArrays, post, runs_meta: pd.DataFrame) -> pd.DataFrame:
    post = _ds(post)
    size = pd.to_numeric(
        runs_meta.reindex(list(arr.run_ids)).get("params_b", pd.Series(np.nan, index=list(arr.run_ids))),
        errors="coerce",
    ).to_numpy()
    log_tau = np.log(post["tau"].to_numpy())
    rows = []
    fam_levels = arr.levels[arr.family_factor]
    for f in range(len(fam_levels)):
        for sz in sorted({s for s in size[arr.family_idx == f] if np.isfinite(s)}):
            sel = (arr.family_idx == f) & (size == sz)
            d = np.exp(log_tau[..., sel].mean(-1)).reshape(-1)
            lo, hi = interval_bounds(CI_PROB)
            q = np.quantile(d, [lo, 0.5, hi])
            rows.append([fam_levels[f], float(sz), int(sel.sum()), float(d.mean()), *map(float, q)])
    return pd.DataFrame(rows, columns=["family", "params_b", "n_runs", "tau_mean", "tau_q05", "tau_q50", "tau_q95"])


def _health(idata, kind: str, seconds: float) -> dict:
    import arviz as az

    post = _ds(idata["posterior"])
    names = [
        v
        for v in (*HEALTH_VARS, "b", "alpha", "r_star_family", "log_tau_family", "log_temp_family")
        if v in post and post[v].std() > 0
    ]
    h = sampling.health(post, _ds(idata["sample_stats"]), var_names=names, dim=None)
    et = az.ess(post[names], method="tail")
    return {
        "kind": kind,
        "r_hat_max": h["r_hat_max"],
        "ess_bulk_min": h["ess_min"],
        "ess_tail_min": float(min(float(et[v].min()) for v in names)),
        "divergences": h["divergences"],
        "draws": int(post.sizes["draw"]),
        "chains": int(post.sizes["chain"]),
        "seconds": round(seconds, 1),
    }


def compare_runs(
    runs: RunSet,
    *,
    by=("family", "group_size"),
    kinds=COMPARE_KINDS,
    free_g_exponent: bool = True,
    sampler: SamplerConfig | None = None,
    seed: int = 0,
    scale: str = "auto",
    max_steps: int | None = None,
    primary: str | None = None,
    prior: PopulationPrior | None = None,
) -> CompareResult:
    """Fit the hierarchical comparison model(s) to complete runs and tabulate the physics tests.

    Parameters
    ----------
    runs : RunSet
        Complete runs (every logged point is used; no forecasting).
    by : tuple of str
        Metadata columns: ``by[0]`` is the family (family-level means of plateau, timescale and noise
        temperature), the others get categorical effects on plateau and log timescale
        (``group_size`` additionally enters the noise temperature through ``G^-b``).
    kinds : tuple of {"oscillator", "saturation", "scaling"}
        Model kinds to fit and compare by PSIS-LOO.
    free_g_exponent : bool
        ``b`` free with prior N(1, 1) (test the 1/G law) or fixed at 1.
    sampler : SamplerConfig, optional
        NUTS settings (nutpie, numba backend); ``seed`` overrides ``sampler.seed``.
    scale : str
        ``"auto"``, ``"run"``, ``"shared"`` or a metadata column naming runs that share a reward scale.
    max_steps : int, optional
        Use only steps <= max_steps of each run (speed).
    primary : str, optional
        Model kind the contrast table comes from; default ``scaling`` if fitted and sizes vary, else the first.
    prior : PopulationPrior, optional
        Scales of the per-run building blocks (default: the packaged prior).

    Returns
    -------
    CompareResult
    """
    import arviz as az
    import xarray as xr

    sampler = sampler or SamplerConfig()
    prior = prior or default_prior()
    kinds = tuple(kinds)
    for k in kinds:
        if k not in COMPARE_KINDS:
            raise ValueError(f"unknown model kind {k!r}; choose from {', '.join(COMPARE_KINDS)}")
    by = tuple(by)
    arr = prepare_compare(runs, by=by, scale=scale, max_steps=max_steps)
    fits, health, loos = {}, [], {}
    for i, kind in enumerate(kinds):
        t0 = time.perf_counter()
        # the comparison graph folds the runs into its structure (factor codes), so it is not cached
        compiled = sampling.compile_model(
            None,
            lambda kind=kind: build_compare_model(arr, kind=kind, free_g_exponent=free_g_exponent, prior=prior),
            backend=sampler.backend,
        )
        idata = sampling.nuts(compiled, sampler=sampler, seed=seed + 1000 * i)
        dt = time.perf_counter() - t0
        post = _ds(idata["posterior"]).assign_coords(run=list(arr.run_ids))
        ll = pointwise_loglik(arr, post)
        ll_ds = xr.Dataset(
            {"reward": (("chain", "draw", "run"), ll)},
            coords={"chain": post["chain"], "draw": post["draw"], "run": list(arr.run_ids)},
        )
        tree = _tree(post, _ds(idata["sample_stats"]), ll_ds)
        fits[kind] = tree
        h = _health(idata, kind, dt)
        health.append(h)
        if h["divergences"] > 0 or h["r_hat_max"] > 1.05:
            warnings.warn(
                f"compare [{kind}]: {h['divergences']} divergences, max r_hat {h['r_hat_max']:.3f}",
                SamplerWarning,
                stacklevel=2,
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loos[kind] = az.loo(tree, pointwise=True, var_name="reward")
    if primary is None:
        sizes_vary = len(set(np.round(arr.log_size, 6))) > 1
        primary = "scaling" if ("scaling" in kinds and sizes_vary) else kinds[0]
    contrasts = _contrasts(arr, fits[primary]["posterior"], primary)
    loo_df, k_df = _loo_table(loos, arr)
    tau_size = _tau_by_size(arr, fits[primary]["posterior"], runs.meta)
    return CompareResult(
        contrasts=contrasts, loo=loo_df, pareto_k=k_df, tau_by_size=tau_size, health=pd.DataFrame(health),
        fits=fits, arrays=arr, primary=primary, by=by, free_g_exponent=free_g_exponent, loo_objects=loos,
    )  # fmt: skip


def _tree(post, stats, ll):
    import xarray as xr

    return xr.DataTree.from_dict({"posterior": post, "sample_stats": stats, "log_likelihood": ll})


def _loo_table(loos: dict, arr: CompareArrays) -> tuple[pd.DataFrame, pd.DataFrame]:
    import arviz as az

    kcols = {}
    rows = []
    for kind, lo in loos.items():
        k = np.asarray(lo.pareto_k).reshape(-1)
        kcols[kind] = k
        rows.append({
            "kind": kind, "elpd_loo": float(lo.elpd), "se": float(lo.se), "p_loo": float(lo.p),
            "k_good(<=0.7)": int(np.sum(k <= 0.7)), "k_bad(0.7-1]": int(np.sum((k > 0.7) & (k <= 1))),
            "k_very_bad(>1)": int(np.sum(k > 1)), "k_max": float(np.max(k)) if np.isfinite(k).any() else float("nan"),
        })  # fmt: skip
    df = pd.DataFrame(rows).set_index("kind")
    if len(loos) > 1:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cmp = az.compare(loos, round_to="none")
        for c in ("rank", "dse", "weight"):
            if c in cmp.columns:
                df[c] = pd.to_numeric(cmp[c].reindex(df.index), errors="coerce")
        df["elpd_diff"] = df["elpd_loo"] - df["elpd_loo"].max()
        df = df.sort_values("elpd_loo", ascending=False)
        df["rank"] = np.arange(len(df))
    else:
        df["rank"] = 0
    df = df.reset_index()
    k_df = pd.DataFrame(kcols, index=list(arr.run_ids))
    k_df.index.name = "run_id"
    return df, k_df.reset_index()
