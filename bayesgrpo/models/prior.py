"""The population prior: hyperparameters of the per-run effects, learned from complete runs.

A forecaster that sees 20 noisy points lives on its priors, so the default prior for a new run is
the population distribution of run parameters fitted on complete development runs, shipped as a
small JSON file inside the package (``bayesgrpo/resources/population_prior.json``, read with
:mod:`importlib.resources`, so an installed wheel uses exactly the numbers of the source tree) with
its provenance and the command that refits it (``python bench/fit_population_prior.py``).

There is no silent fallback: :meth:`PopulationPrior.default` raises :class:`~bayesgrpo.errors.PriorError`
when the packaged file is missing or invalid. Every fitted artefact records the prior's
:attr:`~PopulationPrior.identity` (name and SHA-256 of its canonical JSON).

All quantities are in the normalised units of :mod:`bayesgrpo.models.arrays` (see there).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bayesgrpo.errors import PriorError

__all__ = ["PopulationPrior", "PRIOR_RESOURCE", "default_prior_path"]

#: file name of the packaged population prior inside ``bayesgrpo/resources``
PRIOR_RESOURCE = "population_prior.json"


def default_prior_path():
    """``$BAYESGRPO_PRIOR`` if set, else the packaged ``bayesgrpo/resources/population_prior.json``.

    Returns a :class:`pathlib.Path` or an :mod:`importlib.resources` traversable.
    """
    env = os.environ.get("BAYESGRPO_PRIOR")
    if env:
        return Path(env)
    from importlib.resources import files

    return files("bayesgrpo.resources").joinpath(PRIOR_RESOURCE)


class PopulationPrior(BaseModel):
    """Hyperparameters of the per-run effects (normalised units; see :mod:`bayesgrpo.models.arrays`).

    Every fitted number must be given (no built-in defaults that could silently stand in for the
    packaged prior); only the optimizer facts have defaults.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    gain_mu: float = Field(description="mean plateau gain r_star - r0 (reward-scale units)")
    gain_sd: float = Field(gt=0)
    log_tau_mu: float = Field(description="mean log(tau / horizon span)")
    log_tau_sd: float = Field(gt=0)
    log_wander_mu: float = Field(description="mean log(latent stationary sd / measurement sd)")
    log_wander_sd: float = Field(gt=0)
    r0_sd: float = Field(gt=0, description="sd of r0 around the mean of the first observed points")
    log_noise_sd: float = Field(gt=0, description="sd of log measurement noise around its robust estimate")
    mu_default: float = Field(0.9, gt=0, lt=1, description="momentum prior mean when beta1 is not logged (Adam's default)")
    mu_conc: float = Field(10.0, gt=0, description="Beta concentration of the momentum prior when beta1 is unknown")
    mu_conc_known: float = Field(200.0, gt=0, description="Beta concentration when beta1 is logged")
    log_delta_mu: float = Field(-0.7, description="mean log distance (normalised) of the reward floor below the start, when the floor is unknown")
    log_delta_sd: float = Field(1.0, gt=0)
    alpha_mu: float = Field(0.3, description="curvature-scaling exponent prior mean (paper B: ~0.3)")
    alpha_sd: float = Field(0.3, gt=0)
    name: str = Field("custom", description="short name recorded in every artefact fitted with this prior")
    provenance: dict = Field(default_factory=dict)

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
    @classmethod
    def default(cls) -> PopulationPrior:
        """The packaged prior (or ``$BAYESGRPO_PRIOR``); raises :class:`PriorError` if unreadable."""
        return cls.load(default_prior_path())

    @classmethod
    def load(cls, path) -> PopulationPrior:
        """Read a prior JSON file; a missing or invalid file raises :class:`PriorError` naming it."""
        p = path if hasattr(path, "read_text") else Path(path)
        try:
            text = p.read_text()
        except (FileNotFoundError, OSError) as e:
            raise PriorError(
                f"population prior {p}: cannot be read ({e.__class__.__name__}). The package data are incomplete "
                "(reinstall bayesgrpo) or $BAYESGRPO_PRIOR points to a missing file."
            ) from None
        try:
            return cls.model_validate(json.loads(text))
        except (json.JSONDecodeError, ValidationError) as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise PriorError(f"population prior {p}: not a valid prior file ({first})") from None

    def save(self, path) -> None:
        Path(path).write_text(self.model_dump_json(indent=2) + "\n")
