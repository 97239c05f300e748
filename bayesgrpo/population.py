"""The population prior: hyperparameters of the per-run effects, learned from complete runs.

A forecaster that sees 20 noisy points lives on its priors, so the default prior for a new run is
the population distribution of run parameters fitted on complete runs (the real development runs
and the testbed), shipped as a small JSON file of numbers in ``models/population_prior.json`` with its
provenance and the command that refits it (``python bench/fit_population_prior.py``).

All quantities are in the normalised units of :mod:`bayesgrpo.prepare`:
``gain = r_star - r0`` in units of the run's reward scale, ``log_tau = log(tau / span)`` with span the
forecast horizon minus the first step, ``log_wander = log(latent stationary sd / measurement sd)``.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["PopulationPrior", "default_prior_path"]


def default_prior_path() -> Path:
    """``$BAYESGRPO_PRIOR`` if set, else ``models/population_prior.json`` of the source tree."""
    import os

    env = os.environ.get("BAYESGRPO_PRIOR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1] / "models" / "population_prior.json"


class PopulationPrior(BaseModel):
    """Hyperparameters of the per-run effects (normalised units; see module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gain_mu: float = Field(0.3, description="mean plateau gain r_star - r0 (reward-scale units)")
    gain_sd: float = Field(0.8, gt=0)
    log_tau_mu: float = Field(-1.6, description="mean log(tau / horizon span)")
    log_tau_sd: float = Field(1.2, gt=0)
    log_wander_mu: float = Field(-1.0, description="mean log(latent stationary sd / measurement sd)")
    log_wander_sd: float = Field(1.0, gt=0)
    r0_sd: float = Field(0.5, gt=0, description="sd of r0 around the mean of the first observed points")
    log_noise_sd: float = Field(0.5, gt=0, description="sd of log measurement noise around its robust estimate")
    mu_default: float = Field(0.9, gt=0, lt=1, description="momentum prior mean when beta1 is not logged (Adam)")
    mu_conc: float = Field(10.0, gt=0, description="Beta concentration of the momentum prior when beta1 is unknown")
    mu_conc_known: float = Field(200.0, gt=0, description="Beta concentration when beta1 is logged")
    alpha_mu: float = Field(0.3, description="curvature-scaling exponent prior mean (paper B: ~0.3)")
    alpha_sd: float = Field(0.3, gt=0)
    provenance: dict = Field(default_factory=dict)

    @classmethod
    def default(cls) -> "PopulationPrior":
        """The shipped prior (:func:`default_prior_path`), else the built-in defaults."""
        p = default_prior_path()
        if p.exists():
            return cls.load(p)
        return cls()

    @classmethod
    def load(cls, path) -> "PopulationPrior":
        return cls.model_validate(json.loads(Path(path).read_text()))

    def save(self, path) -> None:
        Path(path).write_text(self.model_dump_json(indent=2) + "\n")
