"""The population prior: hyperparameters of the per-run effects, learned from complete runs.

A forecaster that sees 20 noisy points lives on its priors, so the default prior for a new run is
the population distribution of run parameters fitted on complete development runs, shipped as a
small JSON file inside the package (``bayesgrpo/resources/population_prior.json``, read with
:mod:`importlib.resources`, so an installed wheel uses exactly the numbers of the source tree) with
its provenance and the command that refits it (``python bench/fit_population_prior.py``).

There is no silent fallback: :func:`bayesgrpo.models.kinds.default_prior` (the kind's packaged prior)
raises :class:`~bayesgrpo.errors.PriorError` when the packaged file is missing or invalid. Every fitted artefact records the prior's
:attr:`~PopulationPrior.identity` (name and SHA-256 of its canonical JSON).

All quantities are in the normalised units of :mod:`bayesgrpo.models.arrays` (see there).
"""

from __future__ import annotations

import hashlib
import json
from typing import ClassVar

import numpy as np
from pydantic import ConfigDict, Field, model_validator

from bayesgrpo.errors import PriorError
from bayesgrpo.io.jsonfile import JsonFile
from bayesgrpo.models.arrays import ADAM_BETA1

__all__ = ["PopulationPrior", "PRIOR_RESOURCE", "VECTOR_FIELDS", "prior_resource", "fit_population", "context_prior",
           "SPREAD_FIELDS", "with_spread_population"]  # fmt: skip

#: hyperparameters that enter the compiled graph as per-run data (so one compile serves every prior,
#: e.g. the leave-one-source-out priors of a benchmark, and every observed fraction)
VECTOR_FIELDS = (
    "gain_mu",
    "gain_sd",
    "log_tau_mu",
    "log_tau_sd",
    "log_wander_mu",
    "log_wander_sd",
    "r0_sd",
    "log_noise_sd",
    "mu_conc",
    "mu_conc_known",
    "log_delta_mu",
    "log_delta_sd",
    "lam_logit_mu",
    "lam_logit_sd",
    "log_nu_mu",
    "log_nu_sd",
    "log_headroom_mu",
    "log_headroom_sd",
)

#: file name of the packaged population prior inside ``bayesgrpo/resources``
PRIOR_RESOURCE = "population_prior.json"


def prior_resource(kind: str = "oscillator"):
    """The packaged prior file of ``kind`` in ``bayesgrpo/resources`` (an :mod:`importlib.resources`
    traversable; it may not exist: :func:`bayesgrpo.models.kinds.default_prior` picks the one a kind uses)."""
    from importlib.resources import files

    return files("bayesgrpo.resources").joinpath(
        PRIOR_RESOURCE if kind == "oscillator" else f"population_prior_{kind}.json"
    )


class PopulationPrior(JsonFile):
    """Hyperparameters of the per-run effects (normalised units; see :mod:`bayesgrpo.models.arrays`).

    Every fitted number must be given (no built-in defaults that could silently stand in for the
    packaged prior); only the optimizer facts have defaults.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    gain_mu: float = Field(description="mean plateau gain r_star - r0 (reward-scale units)")
    gain_sd: float = Field(gt=0)
    log_tau_mu: float = Field(description="mean log(tau - 1), tau in optimizer steps")
    log_tau_sd: float = Field(gt=0)
    log_wander_mu: float = Field(description="mean log(latent stationary sd / measurement sd)")
    log_wander_sd: float = Field(gt=0)
    r0_sd: float = Field(gt=0, description="sd of r0 around the mean of the first observed points")
    log_noise_sd: float = Field(gt=0, description="sd of log measurement noise around its robust estimate")
    mu_default: float = Field(
        ADAM_BETA1, gt=0, lt=1, description="momentum prior mean when beta1 is not logged (Adam's default)"
    )
    mu_conc: float = Field(10.0, gt=0, description="Beta concentration of the momentum prior when beta1 is unknown")
    mu_conc_known: float = Field(200.0, gt=0, description="Beta concentration when beta1 is logged")
    log_delta_mu: float = Field(
        -0.7,
        description="mean log distance (normalised) of the reward floor below the start, when the floor is unknown",
    )
    log_delta_sd: float = Field(1.0, gt=0)
    lam_logit_mu: float = Field(-1.0, description="mean logit(lam / LAM_MAX), the heterogeneity of the logistic kind")
    lam_logit_sd: float = Field(1.0, gt=0)
    log_nu_mu: float = Field(
        0.0, description="mean log nu, the effective Beta concentration of pass rates behind the reward spread"
    )
    log_nu_sd: float = Field(1.5, gt=0)
    log_headroom_mu: float = Field(
        0.0, description="mean log w: the reward's ceiling above the plateau, U = R* + w (R* - L), bounds unknown"
    )
    log_headroom_sd: float = Field(1.5, gt=0)
    alpha_mu: float = Field(0.3, description="curvature-scaling exponent prior mean (paper B: ~0.3)")
    alpha_sd: float = Field(0.3, gt=0)
    fraction_grid: tuple[float, ...] = Field((), description="observed fractions at which by_fraction gives values")
    by_fraction: dict[str, tuple[float, ...]] = Field(
        default_factory=dict,
        description="per-field values at fraction_grid (a run observed to fraction f gets them interpolated in f)",
    )
    name: str = Field("custom", description="short name recorded in every artefact fitted with this prior")
    provenance: dict = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_tables(self):
        for k, v in self.by_fraction.items():
            if k not in VECTOR_FIELDS:
                raise ValueError(f"by_fraction: {k!r} is not a per-run hyperparameter ({', '.join(VECTOR_FIELDS)})")
            if len(v) != len(self.fraction_grid):
                raise ValueError(f"by_fraction[{k!r}] has {len(v)} values for {len(self.fraction_grid)} fractions")
        if list(self.fraction_grid) != sorted(self.fraction_grid):
            raise ValueError("fraction_grid must be increasing")
        return self

    def values_at(self, fraction) -> dict:
        """Per-run hyperparameters (:data:`VECTOR_FIELDS`) for runs observed to ``fraction`` (array).

        Fields with a ``by_fraction`` table are interpolated linearly in the fraction (constant beyond
        the grid); the others are the scalar fields.
        """
        f = np.atleast_1d(np.asarray(fraction, dtype=float))
        out = {}
        for k in VECTOR_FIELDS:
            if k in self.by_fraction and self.fraction_grid:
                out[k] = np.interp(f, self.fraction_grid, self.by_fraction[k])
            else:
                out[k] = np.full(f.shape, float(getattr(self, k)))
        return out

    # ------------------------------------------------------------------ identity
    @property
    def sha256(self) -> str:
        """SHA-256 of the canonical JSON of the numbers (provenance excluded)."""
        d = self.model_dump(exclude={"provenance"})
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()

    @property
    def identity(self) -> str:
        """``name@sha256:<12 hex>`` -- recorded in saved forecasts and printed by ``--verbose``."""
        return f"{self.name}@sha256:{self.sha256[:12]}"

    # ------------------------------------------------------------------ io
    # io: save / load (a missing or invalid file raises PriorError naming it) from JsonFile
    file_label: ClassVar[str] = "population prior"
    file_error: ClassVar[type[Exception]] = PriorError
    file_hint: ClassVar[str] = (". The package data are incomplete (reinstall bayesgrpo) or $BAYESGRPO_PRIOR points "
                                "to a missing file.")  # fmt: skip


# ----------------------------------------------------------------------------- fitting
#: columns of the per-run fit table that :func:`fit_population` aggregates -> prior fields
FIT_COLUMNS = {
    "gain": "gain",
    "log_tau": "log_tau",
    "log_wander": "log_wander",
    "log_delta": "log_delta",
    "lam_logit": "lam_logit",
    "log_nu": "log_nu",
    "log_headroom": "log_headroom",
}
_SD_FLOORS = {"gain": 0.1, "log_tau": 0.3, "log_wander": 0.3, "log_delta": 0.3, "lam_logit": 0.5, "log_nu": 0.3,
              "log_headroom": 0.3}  # fmt: skip


def _wstats(x: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    ok = np.isfinite(x)
    if not ok.any():
        return float("nan"), float("nan")
    x, w = x[ok], w[ok]
    mu = float(np.sum(w * x) / np.sum(w))
    return mu, float(np.sqrt(np.sum(w * (x - mu) ** 2) / np.sum(w)))


def fit_population(
    rows,
    *,
    exclude_source: str | None = None,
    name: str = "population",
    provenance=None,
    base: PopulationPrior | None = None,
) -> PopulationPrior:
    """The population prior from per-run fits of complete runs, every source weighing the same.

    Parameters
    ----------
    rows : DataFrame
        One row per run x observed fraction: ``run_id, source, cutoff`` and the per-run posterior
        medians ``gain, log_tau, log_wander`` (``log_delta`` where the floor was unknown),
        ``r0_dev, log_noise_dev`` -- each in the units a forecast from the run's prefix at that
        fraction uses (``bench/fit_population_prior.py`` writes it).
    exclude_source : str, optional
        Leave this source out (leave-one-source-out priors for honest benchmarks).
    base : PopulationPrior, optional
        Where the non-fitted fields (optimizer facts, alpha) come from.

    Returns
    -------
    PopulationPrior
        Means and sds per observed fraction (``by_fraction``) and their fraction-pooled values as the
        scalar fields. Each source's runs share a total weight of 1 per fraction.
    """
    import pandas as pd

    df = pd.DataFrame(rows)
    if exclude_source is not None:
        df = df[df["source"] != exclude_source]
    if df.empty:
        raise PriorError("fit_population: no per-run fits left to fit a prior to")
    grid = tuple(sorted(float(c) for c in df["cutoff"].unique()))
    kw, tables = {}, {}
    w_all = 1.0 / df.groupby(["source", "cutoff"])["run_id"].transform("count").to_numpy()
    for col in FIT_COLUMNS:
        mu, sd = _wstats(df[col].to_numpy(dtype=float), w_all) if col in df else (float("nan"), float("nan"))
        if not np.isfinite(mu):
            continue
        kw[f"{col}_mu"] = round(mu, 4)
        kw[f"{col}_sd"] = round(max(sd, _SD_FLOORS[col]), 4)
        mus, sds = [], []
        for c in grid:
            g = df[df["cutoff"] == c]
            w = 1.0 / g.groupby("source")["run_id"].transform("count").to_numpy()
            m_, s_ = _wstats(g[col].to_numpy(dtype=float), w)
            mus.append(round(m_ if np.isfinite(m_) else mu, 4))
            sds.append(round(max(s_ if np.isfinite(s_) else sd, _SD_FLOORS[col]), 4))
        tables[f"{col}_mu"], tables[f"{col}_sd"] = tuple(mus), tuple(sds)
    _, r0_sd = _wstats(df["r0_dev"].to_numpy(dtype=float), w_all)
    _, n_sd = _wstats(df["log_noise_dev"].to_numpy(dtype=float), w_all)
    kw["r0_sd"] = round(max(2 * r0_sd, 0.1), 4)
    kw["log_noise_sd"] = round(max(2 * n_sd, 0.2), 4)
    fixed = (
        {}
        if base is None
        else {k: getattr(base, k) for k in ("mu_default", "mu_conc", "mu_conc_known", "alpha_mu", "alpha_sd")}
    )
    prov = dict(provenance or {})
    prov.update(runs=int(df["run_id"].nunique()), sources=int(df["source"].nunique()), fits=int(len(df)),
                excluded_source=exclude_source, weighting="each source weighs the same at each observed fraction")  # fmt: skip
    return PopulationPrior(**kw, **fixed, fraction_grid=grid, by_fraction=tables, name=name, provenance=prov)


#: the population prior's fields of the spread channel (:mod:`bayesgrpo.models.spread`)
SPREAD_FIELDS = ("log_nu_mu", "log_nu_sd", "log_headroom_mu", "log_headroom_sd")


def with_spread_population(prior: PopulationPrior, rows, *, exclude_source: str | None = None,
                           name: str | None = None) -> PopulationPrior:  # fmt: skip
    """``prior`` with the spread channel's hyperparameters (log nu, log headroom) fitted on ``rows``: per-run
    fits made WITH the channels (:func:`fit_run_effects` ``channels=``), every source weighing the same; the
    other fields stay ``prior``'s (their population is the reward-only fits'). Unitless: no fraction tables."""
    fitted = fit_population(rows, exclude_source=exclude_source)
    data = prior.model_dump()
    data.update({k: getattr(fitted, k) for k in SPREAD_FIELDS}, name=name or f"{prior.name}+spread")
    data["provenance"] = {**prior.provenance, "spread": {**fitted.provenance, "fields": list(SPREAD_FIELDS)}}
    return PopulationPrior(**data)


def context_prior(base: PopulationPrior, rows, *, fraction: float, name: str = "context") -> PopulationPrior:
    """The prior of a new run of a source whose complete ``rows`` (per-run fits) are known.

    Normal-normal pooling per hyperparameter: the source mean is estimated from the ``n`` context
    runs with the within-source scatter ``s_w`` (their sd, but at least half the population's), shrunk
    toward the population mean ``m0`` with the population sd ``s0`` as the scatter of source means:
    ``mean = (m0 / s0^2 + n xbar / s_w^2) / (1 / s0^2 + n / s_w^2)``, and a new run of the source has
    ``sd = sqrt(s_w^2 + 1 / (1 / s0^2 + n / s_w^2))``. One context run (scatter unknown: the
    population's) moves the mean halfway to it; many runs of a consistent source nearly all the way.
    """
    import pandas as pd

    df = pd.DataFrame(rows)
    pop = base.values_at([fraction])
    kw = {}
    for col in FIT_COLUMNS:
        m0, s0 = float(pop[f"{col}_mu"][0]), float(pop[f"{col}_sd"][0])
        x = df[col].to_numpy(float) if col in df else np.array([])
        x = x[np.isfinite(x)]
        if x.size == 0:
            kw[f"{col}_mu"], kw[f"{col}_sd"] = m0, s0
            continue
        s_w = max(float(np.std(x, ddof=1)) if x.size > 1 else s0, 0.5 * s0)
        prec = 1.0 / s0**2 + x.size / s_w**2
        kw[f"{col}_mu"] = round((m0 / s0**2 + x.size * float(np.mean(x)) / s_w**2) / prec, 4)
        kw[f"{col}_sd"] = round(float(np.sqrt(s_w**2 + 1.0 / prec)), 4)
    keep = base.model_dump(exclude={"by_fraction", "fraction_grid", "name", "provenance", *kw})
    return PopulationPrior(
        **keep, **kw, name=name, provenance={"base": base.identity, "context_runs": int(len(df)), "fraction": fraction}
    )
