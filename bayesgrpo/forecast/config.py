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

from bayesgrpo.conventions import (
    AUTO_KIND,
    DEFAULT_FINAL_WINDOW,
    DEFAULT_KIND,
    QUANTILES,
    SUMMARY_QUANTILES,
    quantile_column,
)
from bayesgrpo.forecast.calibration import Calibration, identity_calibration
from bayesgrpo.forecast.decision import DEFAULT_DELTA, DecisionCalibration
from bayesgrpo.forecast.outlook import Outlook
from bayesgrpo.forecast.shape import ShapeConfig
from bayesgrpo.models.arrays import SPREAD_CHANNELS, SPREAD_PARAMS
from bayesgrpo.models.kinds import MODEL_KINDS, default_prior, get_kind
from bayesgrpo.models.prior import PopulationPrior
from bayesgrpo.physics.stopping import DEFAULT_STOP_FRACTION
from bayesgrpo.plan import FinalWindow

__all__ = ["ForecastConfig", "model_identity", "TABLE_COLUMNS", "FINAL_COLUMNS", "STORED_VARS", "HEALTH_VARS",
           "STAT_VARS", "AUTO"]  # fmt: skip

#: the kind whose shape is chosen per run among the kinds (:mod:`bayesgrpo.forecast.shape`)
AUTO = AUTO_KIND

#: the final reward's quantile columns of the table
FINAL_COLUMNS = [quantile_column("final", q) for q in QUANTILES]
#: the columns of a forecast table (``kind``: the statistical model kind; the LLM is metadata ``model``)
TABLE_COLUMNS = [
    "run_id", "kind", "observed_until", "n_obs", "horizon",
    "final_mean", *FINAL_COLUMNS, "p_gain",
    *[quantile_column("stop", q) for q in SUMMARY_QUANTILES], "p_stop_before_horizon",
    *[quantile_column("plateau", q) for q in SUMMARY_QUANTILES],
    "p_underdamped", "p_unstable", "r_hat_max", "ess_min", "divergences", "seconds",
]  # fmt: skip
#: the posterior variables sampler health is read on
HEALTH_VARS = ("r0", "r_star", "tau", "sigma_m", "wander")
#: per-run posterior variables a fit keeps: every kind's forecast parameters (from the registry) and
#: the health variables; the non-centred ``z_*`` the sampler moves in are not kept (8 of 13 variables,
#: a third less memory per run: a fleet of 1,000 runs holds 1,000 posteriors)
#: (with the spread channel's per-run parameters)
STORED_VARS = tuple(
    dict.fromkeys([v for k in MODEL_KINDS.values() for v in k.param_names] + list(SPREAD_PARAMS) + list(HEALTH_VARS))
)
#: per-draw sampler statistics a fit keeps (ArviZ's diagnostics read them: divergences, BFMI, tree depth)
STAT_VARS = ("diverging", "energy", "energy_error", "step_size", "n_steps", "depth", "maxdepth_reached", "logp",
             "mean_tree_accept")  # fmt: skip


class ForecastConfig(BaseModel):
    """What the user declared: the model kind, its prior and calibration layer, the forecast definitions."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str = Field(DEFAULT_KIND, description="a model kind of bayesgrpo.models.kinds.MODEL_KINDS, or 'auto'")
    final_window: FinalWindow = DEFAULT_FINAL_WINDOW
    stop_fraction: float = Field(DEFAULT_STOP_FRACTION, gt=0.0, lt=1.0)
    hierarchical: bool = False
    prior: PopulationPrior = Field(description="the population prior (default: the packaged prior of the kind)")
    calibration: Calibration = Field(
        default_factory=identity_calibration,
        description="calibration layer of the final-reward draws (default: the packaged one of the kind)",
    )
    delta: float = Field(DEFAULT_DELTA, gt=0.0, description="p_gain = P(final >= current level + delta x scale)")
    decision: DecisionCalibration = Field(
        default_factory=DecisionCalibration,
        description="recalibration map of p_gain (default: the packaged one of the kind)",
    )
    shape: ShapeConfig | None = Field(None, description="kind 'auto': the kinds a run's shape is chosen among")
    priors: dict[str, PopulationPrior] = Field(
        default_factory=dict, description="kind 'auto': the population prior of each kind (default: the packaged ones)"
    )
    outlook: Outlook = Field(
        default_factory=Outlook,
        description="the between-source outlook mixed into every forecast (bayesgrpo.forecast.outlook; kind "
        "'auto': the packaged one, fitted on the yardstick's selection sources; a single kind: none)",
    )
    channels: tuple[str, ...] = Field(
        (),
        description="spread channels observed with the reward (reward_std, frac_reward_zero_std; kinds with a "
        "degeneracy state): runs that log one are fitted with them (bayesgrpo.models.spread), the others as without",
    )

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data):
        if isinstance(data, dict):
            if "model" in data and "kind" not in data:  # configurations saved by bayesgrpo 0.1 named the kind "model"
                data = {("kind" if k == "model" else k): v for k, v in data.items()}
            kind = data.get("kind", DEFAULT_KIND)
            if kind == AUTO:
                shape = data.get("shape") or ShapeConfig.default()
                shape = shape if isinstance(shape, ShapeConfig) else ShapeConfig.model_validate(shape)
                priors = dict(data.get("priors") or {})
                priors = {k: priors.get(k) or default_prior(k) for k in shape.kinds}
                data = {**data, "shape": shape, "priors": priors}
                kind = shape.kinds[0]
            if data.get("prior") is None:
                data = {**data, "prior": (data.get("priors") or {}).get(kind) or default_prior(kind)}
            if data.get("calibration") is None and "calibration" in data:
                data = {**data, "calibration": Calibration.default(kind) if data.get("kind") != AUTO
                        else identity_calibration()}  # fmt: skip
            if data.get("outlook") is None and data.get("kind") == AUTO:
                data = {**data, "outlook": Outlook.default()}
            data = _without_retired_layers(data)
            if data.get("decision") is None and "decision" in data:
                # the declared kind's map ('auto' ships its own: the identity its thresholds were chosen on)
                declared = str(data.get("kind", DEFAULT_KIND))
                data = {**data, "decision": DecisionCalibration.default(declared, data.get("delta", DEFAULT_DELTA))}
        return data

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, v: str) -> str:
        if v != AUTO:
            get_kind(v)  # ValueError naming the choices
        return v

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds a forecast of this configuration can use."""
        return self.shape.kinds if self.kind == AUTO and self.shape is not None else (self.kind,)

    def kind_prior(self, kind: str) -> PopulationPrior:
        return self.priors.get(kind, self.prior) if self.kind == AUTO else self.prior

    @model_validator(mode="after")
    def _channels_need_a_degeneracy_state(self):
        bad = [c for c in self.channels if c not in SPREAD_CHANNELS]
        if bad:
            raise ValueError(f"unknown spread channel(s) {bad}; choose from {', '.join(SPREAD_CHANNELS)}")
        if self.channels and not any(get_kind(k).degeneracy for k in self.kinds):
            kinds = ", ".join(k.name for k in MODEL_KINDS.values() if k.degeneracy)
            raise ValueError(f"the spread channels need a kind with a degeneracy state ({kinds}), not {self.kind!r}")
        return self

    @property
    def identity(self) -> str:
        """This model's identity (:func:`model_identity`)."""
        return model_identity(self)


def model_identity(config: ForecastConfig) -> str:
    """``sha256:<16 hex>`` of the kind, the prior's and the calibration's identities and the definitions."""
    d = {"kind": config.kind, "prior": config.prior.identity, "calibration": config.calibration.identity,
         "final_window": config.final_window, "stop_fraction": config.stop_fraction,
         "hierarchical": config.hierarchical}  # fmt: skip
    # what only some forecasts have enters only where it is there (a plain forecast keeps its identity)
    if config.channels:
        d["channels"] = list(config.channels)
    if config.kind == AUTO and config.shape is not None:
        d["shape"] = config.shape.model_dump_json()
        d["priors"] = {k: p.identity for k, p in sorted(config.priors.items())}
    if not config.outlook.is_identity:
        d["outlook"] = config.outlook.identity
    return "sha256:" + hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def _without_retired_layers(data: dict) -> dict:
    """A configuration saved before the hazard and the conditioned interval layer left the package (they ship
    in no default; ``bench/posthoc``): their keys are dropped when they were off (the same forecast), and a
    forecast made with one of them on is refused by name (this package cannot reproduce it)."""
    hz, lay = data.get("hazard"), data.get("intervals")
    if isinstance(hz, dict) and hz.get("intercept") is not None:
        raise ValueError("made with the hazard of leaving the regime, which this version no longer applies")
    if isinstance(lay, dict) and lay.get("shifts"):
        raise ValueError("made with the conditioned interval layer, which this version no longer applies")
    return {k: v for k, v in data.items() if k not in ("hazard", "intervals")}
