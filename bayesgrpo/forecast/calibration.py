"""A calibration layer on the final-reward draws and paths, learned leave-source-out on backtests of real runs.

The physics model describes a run that stays in its regime; real runs also leave it (a rise that
peaks and declines or collapses, a format reward that switches on late -- physics.md section 9). No
prefix can time such an event, but a population of complete runs can price how often the model's
intervals miss, above and below, at each observed fraction. The layer is split-conformal,
asymmetric and additive (conformalised quantile regression, Romano et al. 2019, on the model's own
quantiles): at observed fraction ``f`` the draws above the median are stretched so that their 90%
point moves up by ``c_up(f) x scale``, those below so that the 10% point moves down by
``c_dn(f) x scale`` (``scale``: the run's normalisation scale, :class:`~bayesgrpo.models.arrays.RunInfo`;
``c`` interpolated on :attr:`Calibration.fraction_grid`). ``c_up`` at a fraction is the weighted 90%
quantile of ``(y - q90) / scale`` over backtest cases of complete runs at that fraction (at least 0),
``c_dn`` that of ``(q10 - y) / scale``: an additive shift widens an interval of (almost) no width (a
flat prefix), which a width ratio cannot. Each case weighs half "per case" and half "per source"
(each source the same), so neither the large sources nor the small ones decide alone. Paths widen
the same way, from nothing at the last observation to all of it at the horizon
(:meth:`Calibration.widen_paths`).

Benchmarks fit the layer without the source they score (leave-one-source-out); the shipped layer
(``bayesgrpo/resources/calibration_<kind>.json``, chosen among the variants of
``bench/calibration_study.py``: width ratios, draws leaving the regime and these additive tails are
studied there, ``bench/calibration_variants.py``) is fitted on every development run and its identity
is recorded in every saved forecast. The package only applies a layer: fitting one
(``bench/fit_layers.py::fit_calibration``) is the bench's.
"""

from __future__ import annotations

import numpy as np
from pydantic import ConfigDict, Field, model_validator

from bayesgrpo.conventions import HEADLINE, content_identity, interval_bounds
from bayesgrpo.io.jsonfile import JsonFile

__all__ = ["Calibration", "identity_calibration"]

#: fields of layers saved before the research variants moved to ``bench/``: read when they change
#: nothing (width ratios of 1, no draw leaving the regime), refused otherwise
_LEGACY_IDENTITY = {"w_up": 1.0, "w_dn": 1.0, "p_leave": None}


class Calibration(JsonFile):
    """Parameters of the layer (module docstring). The default is the identity (no shift)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fraction_grid: tuple[float, ...] = (0.1, 0.2, 0.3, 0.5)
    c_up: tuple[float, ...] = ()  # the 90% point moves up by c_up x the run's scale (empty: none)
    c_dn: tuple[float, ...] = ()  # and the 10% point down by c_dn x scale
    name: str = "identity"
    provenance: dict = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data):
        """Layers written by bayesgrpo 0.1 carry ``w_up``/``w_dn``/``p_leave``; those of the identity are dropped."""
        if not isinstance(data, dict) or not set(_LEGACY_IDENTITY) & set(data):
            return data
        data = dict(data)
        for k, one in _LEGACY_IDENTITY.items():
            v = tuple(data.pop(k, ()) or ())
            if (one is None and v) or (one is not None and any(float(x) != one for x in v)):
                raise ValueError(
                    f"calibration {data.get('name', '?')!r}: {k} = {v} is a research variant this bayesgrpo no longer "
                    "applies (bench/calibration_variants.py); refit the layer"
                )
        return data

    @model_validator(mode="after")
    def _lengths(self):
        n = len(self.fraction_grid)
        if bool(self.c_up) != bool(self.c_dn):
            raise ValueError(f"calibration {self.name!r}: give c_up and c_dn together")
        for name in ("c_up", "c_dn"):
            if getattr(self, name) and len(getattr(self, name)) != n:
                raise ValueError(
                    f"calibration {self.name!r}: {name} has {len(getattr(self, name))} values for {n} fractions"
                )
        if any(v < 0 for v in self.c_up + self.c_dn):
            raise ValueError(f"calibration {self.name!r}: the shifts only widen (c_up, c_dn >= 0)")
        return self

    @property
    def identity(self) -> str:
        return content_identity(self.name, self.model_dump(exclude={"provenance"}))

    @property
    def is_identity(self) -> bool:
        """True when the layer changes no draw."""
        return not any(self.c_up) and not any(self.c_dn)

    def shifts(self, fraction: float) -> tuple[float, float]:
        """``(c_dn, c_up)``: the additive widening of each tail, in units of the run's scale."""
        if not self.c_up:
            return 0.0, 0.0
        return (float(np.interp(fraction, self.fraction_grid, self.c_dn)),
                float(np.interp(fraction, self.fraction_grid, self.c_up)))  # fmt: skip

    def stretch(self, x, *, fraction: float, scale: float, go=1.0, axis=None) -> np.ndarray:
        """Draws with each tail stretched so that its 10% / 90% point moves out by ``c x scale x go``.

        ``go`` (a number, or one per column of ``x`` with ``axis=0``) is the share of the time to go:
        paths widen from nothing at the last observation to all of it at the horizon. A forecast
        whose own interval is narrow (a flat prefix) gains what the population's misses say.
        """
        c_dn, c_up = self.shifts(fraction)
        x = np.asarray(x, dtype=float)
        if (c_dn == 0.0 and c_up == 0.0) or not np.isfinite(scale) or x.size == 0:
            return x
        keep = axis is not None
        lo_q, hi_q = interval_bounds(HEADLINE)
        q_lo, med, q_hi = np.quantile(x, [lo_q, 0.5, hi_q], axis=axis, keepdims=keep)  # one partition, three points
        s_up = np.maximum(q_hi - med, 1e-9 * scale)
        s_dn = np.maximum(med - q_lo, 1e-9 * scale)
        d = x - med
        g = np.asarray(go, dtype=float)
        return med + np.where(d > 0, d * (1.0 + c_up * scale * g / s_up), d * (1.0 + c_dn * scale * g / s_dn))

    def apply(self, draws, *, fraction: float, scale: float = float("nan"), go: float = 1.0) -> np.ndarray:
        """Calibrated final-reward draws (same number and order as ``draws``; run units). ``go`` (default
        1: the planned end, where the layer was fitted) takes that share of the widening, for a forecast
        to an earlier step (:meth:`bayesgrpo.models.arrays.RunInfo.time_to_go`)."""
        return self.stretch(draws, fraction=fraction, scale=scale, go=go)

    def widen_paths(self, paths, *, fraction: float, scale: float, go) -> np.ndarray:
        """Calibrated path draws ``(draws, steps)``: each step's tails widen by the share ``go`` (one per
        step: 0 at the last observation, 1 at the horizon) of the final reward's shifts."""
        return self.stretch(paths, fraction=fraction, scale=scale, go=np.asarray(go, dtype=float)[None, :], axis=0)

    @classmethod
    def default(cls, kind: str = "oscillator") -> Calibration:
        """The packaged layer of ``kind`` (``calibration_<kind>.json``), else the identity."""
        return cls.packaged(f"calibration_{kind}.json") or identity_calibration()


def identity_calibration() -> Calibration:
    """The layer that changes nothing."""
    return Calibration()
