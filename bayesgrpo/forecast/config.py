"""What a forecast is: the user's declaration (:class:`ForecastConfig`), its identity, and the contract
of what a fit reports (:data:`TABLE_COLUMNS`) and keeps (:data:`STORED_VARS`, :data:`STAT_VARS`).

The **identity** of a forecast model (:func:`model_identity`) is the SHA-256 of the kind, the
population prior's identity, the calibration layer's identity and the forecast definitions (final
window, stop fraction, pooling): two fits with the same identity were made by the same model, whatever
the sampler settings. Every saved forecast records it, and :meth:`FittedForecast.load
<bayesgrpo.forecast.FittedForecast.load>` checks it (as pymc-marketing's model builder does).
"""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bayesgrpo.conventions import DEFAULT_FINAL_WINDOW, QUANTILES, SUMMARY_QUANTILES, quantile_column
from bayesgrpo.forecast.calibration import Calibration, identity_calibration
from bayesgrpo.models.kinds import MODEL_KINDS, default_prior, get_kind
from bayesgrpo.models.prior import PopulationPrior
from bayesgrpo.physics.stopping import DEFAULT_STOP_FRACTION
from bayesgrpo.plan import FinalWindow

__all__ = ["ForecastConfig", "model_identity", "TABLE_COLUMNS", "FINAL_COLUMNS", "STORED_VARS", "HEALTH_VARS",
           "STAT_VARS"]  # fmt: skip

#: the final reward's quantile columns of the table
FINAL_COLUMNS = [quantile_column("final", q) for q in QUANTILES]
#: the columns of a forecast table (``kind``: the statistical model kind; the LLM is metadata ``model``)
TABLE_COLUMNS = [
    "run_id", "kind", "observed_until", "n_obs", "horizon",
    "final_mean", *FINAL_COLUMNS,
    *[quantile_column("stop", q) for q in SUMMARY_QUANTILES], "p_stop_before_horizon",
    *[quantile_column("plateau", q) for q in SUMMARY_QUANTILES],
    "p_underdamped", "p_unstable", "r_hat_max", "ess_min", "divergences", "seconds",
]  # fmt: skip
#: the posterior variables sampler health is read on
HEALTH_VARS = ("r0", "r_star", "tau", "sigma_m", "wander")
#: per-run posterior variables a fit keeps: every kind's forecast parameters (from the registry) and
#: the health variables; the non-centred ``z_*`` the sampler moves in are not kept (8 of 13 variables,
#: a third less memory per run: a fleet of 1,000 runs holds 1,000 posteriors)
STORED_VARS = tuple(dict.fromkeys([v for k in MODEL_KINDS.values() for v in k.param_names] + list(HEALTH_VARS)))
#: per-draw sampler statistics a fit keeps (ArviZ's diagnostics read them: divergences, BFMI, tree depth)
STAT_VARS = ("diverging", "energy", "energy_error", "step_size", "n_steps", "depth", "maxdepth_reached", "logp",
             "mean_tree_accept")  # fmt: skip


class ForecastConfig(BaseModel):
    """What the user declared: the model kind, its prior and calibration layer, the forecast definitions."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str = Field("oscillator", description="a model kind of bayesgrpo.models.kinds.MODEL_KINDS")
    final_window: FinalWindow = DEFAULT_FINAL_WINDOW
    stop_fraction: float = Field(DEFAULT_STOP_FRACTION, gt=0.0, lt=1.0)
    hierarchical: bool = False
    prior: PopulationPrior = Field(description="the population prior (default: the packaged prior of the kind)")
    calibration: Calibration = Field(
        default_factory=identity_calibration,
        description="calibration layer of the final-reward draws (default: the packaged one of the kind)",
    )

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data):
        if isinstance(data, dict):
            if "model" in data and "kind" not in data:  # configurations saved by bayesgrpo 0.1 named the kind "model"
                data = {("kind" if k == "model" else k): v for k, v in data.items()}
            kind = data.get("kind", "oscillator")
            if data.get("prior") is None:
                data = {**data, "prior": default_prior(kind)}
            if data.get("calibration") is None and "calibration" in data:
                data = {**data, "calibration": Calibration.default(kind)}
        return data

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, v: str) -> str:
        get_kind(v)  # ValueError naming the choices
        return v

    @property
    def identity(self) -> str:
        """This model's identity (:func:`model_identity`)."""
        return model_identity(self)


def model_identity(config: ForecastConfig) -> str:
    """``sha256:<16 hex>`` of the kind, the prior's and the calibration's identities and the definitions."""
    d = {"kind": config.kind, "prior": config.prior.identity, "calibration": config.calibration.identity,
         "final_window": config.final_window, "stop_fraction": config.stop_fraction,
         "hierarchical": config.hierarchical}  # fmt: skip
    return "sha256:" + hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]
