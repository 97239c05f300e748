"""Decision probabilities of a forecast, and the map that recalibrates them where decisions act.

The numbers a stop decision rests on, per run, from the forecast of its final reward:

* ``p_gain`` = P(final reward >= level + delta x scale): is a gain worth the remaining steps still to
  come? ``level`` is the run's **current level** (:func:`bayesgrpo.series.current_level`: the mean of
  the last 10% of the logged points, at least 3), ``scale`` the forecast's normalising scale
  (:attr:`bayesgrpo.models.arrays.RunInfo.scale`: the range of the rewards logged so far, at least a
  quarter of known reward bounds), ``delta`` 0.05 by default;
* ``p_target`` = P(final reward >= target);
* ``p_decline`` = P(final reward < level - 0.1 x scale): will the run end clearly below where it is now
  (the live alerts' decline warning, issue 32; the model's own probability, not recalibrated);
* ``p_plateaued`` = P(the latent reward has already realised ``stop_fraction`` (95%) of its gain from R0
  to the plateau) -- the physical "already plateaued" (the stop step's definition,
  :mod:`bayesgrpo.physics.stopping`, applied to the state now).

Intervals calibrated on average are not calibrated where a stop rule acts (issue 18: when the model
says "little more to gain", large gains followed far more often than it said). A
:class:`DecisionCalibration` maps the model's own probability of an event "final >= t" to the frequency
observed on held-out sources, as a function of that probability and the observed fraction of the run:

* ``platt``     ``logit p' = a + b logit p + c f`` (Platt 1999, with the fraction as a covariate);
* ``beta``      ``logit p' = a + b1 ln p - b2 ln(1 - p) + c f`` (beta calibration, Kull et al. 2017);
* ``isotonic``  a non-decreasing step function of ``p`` per band of observed fractions (pool-adjacent-
  violators, :func:`scipy.optimize.isotonic_regression`), linear between block centres;
* ``identity``  no change.

Which one ships, and on which events it is fitted, is measured leave-one-source-out by
``bench/stop_study.py`` on a backtest at every 5% of every development run; the shipped map is package
data (``bayesgrpo/resources/decision_<kind>.json``) with its provenance, like the interval layer of
:mod:`bayesgrpo.forecast.calibration`. Cases weigh half per case and half per source. The package only
applies a map: fitting one (``bench/fit_layers.py::fit_decision_calibration``) is the bench's.
"""

from __future__ import annotations

import functools
import json
from typing import Literal

import numpy as np
from pydantic import ConfigDict, Field, model_validator

from bayesgrpo.conventions import DEFAULT_DELTA, content_identity
from bayesgrpo.io.jsonfile import JsonFile
from bayesgrpo.schema import REWARD
from bayesgrpo.series import best_window_mean, current_level, level_points, noise_sd

__all__ = [
    "DEFAULT_DELTA",
    "DecisionCalibration",
    "prob_at_least",
    "gain_threshold",
    "decline_threshold",
    "DECLINE_DROP",
    "p_plateaued",
    "decision_probabilities",
    "decision_covariates",
    "COVARIATES",
    "CALIBRATION_METHODS",
    "shipped_decision",
    "measured_deltas",
]

#: recalibration methods (module docstring)
CALIBRATION_METHODS = ("identity", "platt", "beta", "isotonic")
#: a decline: the final reward ends more than this share of the run's scale below its current level
DECLINE_DROP = 0.1
_EPS = 1e-3  # probabilities are clipped to [eps, 1 - eps] before logits (0 and 1 from a finite set of draws)


def prob_at_least(draws, threshold: float) -> float:
    """P(X >= threshold): the share of the finite draws at or above it (NaN for no finite draw)."""
    x = np.asarray(draws, dtype=float).ravel()
    x = x[np.isfinite(x)]
    return float(np.mean(x >= threshold)) if x.size else float("nan")


def gain_threshold(level: float, scale: float, delta: float = DEFAULT_DELTA) -> float:
    """The final reward that counts as a gain worth continuing for: ``level + delta x scale``."""
    return float(level) + float(delta) * float(scale)


def decline_threshold(level: float, scale: float, drop: float = DECLINE_DROP) -> float:
    """The final reward below which the run has declined: ``level - drop x scale``."""
    return float(level) - float(drop) * float(scale)


def p_plateaued(paths, stop_fraction: float) -> float:
    """P(the latent reward now has realised ``stop_fraction`` of its gain from R0 to the plateau).

    ``paths`` is a :class:`~bayesgrpo.forecast.paths.PathDraws` with ``latent_now``; a draw with no gain
    to realise (plateau = start) counts as plateaued. NaN when ``latent_now`` is unknown.
    """
    if paths.latent_now is None:
        return float("nan")
    gain = np.asarray(paths.r_star, dtype=float) - np.asarray(paths.r0, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(np.abs(gain) > 1e-12, (np.asarray(paths.latent_now) - paths.r0) / gain, 1.0)
    return float(np.mean(frac >= stop_fraction))


#: covariates a recalibration map may use besides the probability and the observed fraction
COVARIATES = ("level_se", "trend", "logit_plateaued")


def decision_covariates(rewards, *, scale: float, p_plateaued: float = float("nan")) -> dict:
    """What a forecast knows besides its probability, from the logged prefix (one definition for the live
    forecast and the backtest):

    * ``level_se`` -- the standard error of the current level in units of the scale (the noise sd of
      :func:`bayesgrpo.series.noise_sd` over the square root of the points the level averages): how much
      of a "gain" noise alone makes;
    * ``trend`` -- the t statistic of the least-squares slope over the last third of the prefix (at least
      5 points; 0 with fewer), clipped to +-10: is the run still climbing?
    * ``logit_plateaued`` -- the logit of ``p_plateaued`` (clipped to [0.001, 0.999]).
    """
    y = np.asarray(rewards, dtype=float)
    y = y[np.isfinite(y)]
    se = noise_sd(y) / np.sqrt(level_points(y.size)) / scale if y.size and scale > 0 else float("nan")
    t: float = 0.0
    tail = y[-max(5, int(np.ceil(y.size / 3))) :]
    if tail.size >= 5 and y.size >= 5:
        x = np.arange(tail.size, dtype=float) - (tail.size - 1) / 2.0
        b = float(x @ (tail - tail.mean()) / (x @ x))
        resid = tail - tail.mean() - b * x
        s2 = float(resid @ resid) / (tail.size - 2)
        t = float(b / np.sqrt(s2 / (x @ x))) if s2 > 0 else (0.0 if b == 0 else float(np.sign(b)) * 10.0)
    return dict(level_se=float(se), trend=float(np.clip(t, -10.0, 10.0)), logit_plateaued=float(_logit(p_plateaued)))


def _logit(p) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=float), _EPS, 1.0 - _EPS)
    return np.log(p) - np.log1p(-p)


def _sigmoid(z) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z, dtype=float)))


def _design(method: str, p, fraction, extra=()) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=float), _EPS, 1.0 - _EPS)
    f = np.broadcast_to(np.asarray(fraction, dtype=float), p.shape)
    cols = [np.ones_like(p), _logit(p)] if method == "platt" else [np.ones_like(p), np.log(p), -np.log1p(-p)]
    cols += [f, *(np.broadcast_to(np.asarray(x, dtype=float), p.shape) for x in extra)]
    return np.column_stack(cols)


class DecisionCalibration(JsonFile):
    """A recalibration map of event probabilities (module docstring). Frozen, serialisable.

    Attributes
    ----------
    method : {"identity", "platt", "beta", "isotonic"}
    coef : tuple of float
        ``platt``: ``(a, b, c)``; ``beta``: ``(a, b1, b2, c)`` (module docstring), then one coefficient
        per extra covariate.
    covariates : tuple of str
        Extra covariates (beyond the probability and the observed fraction) entering the logit linearly
        (``platt`` and ``beta`` only; :func:`decision_covariates` computes them).
    bands : tuple of float
        ``isotonic``: edges of the observed-fraction bands (``len(bands) - 1`` step functions).
    knots_p, knots_y : tuple of tuples
        ``isotonic``: per band, the block centres of the fitted step function and its values.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: Literal["identity", "platt", "beta", "isotonic"] = "identity"
    coef: tuple[float, ...] = ()
    covariates: tuple[str, ...] = ()
    bands: tuple[float, ...] = ()
    knots_p: tuple[tuple[float, ...], ...] = ()
    knots_y: tuple[tuple[float, ...], ...] = ()
    name: str = "identity"
    provenance: dict = Field(default_factory=dict)

    @model_validator(mode="after")
    def _shape(self):
        need = {"platt": 3, "beta": 4}.get(self.method)
        if self.covariates and need is None:
            raise ValueError(f"decision calibration {self.name!r}: {self.method} takes no extra covariates")
        if need is not None:
            need += len(self.covariates)
        if need is not None and len(self.coef) != need:
            raise ValueError(f"decision calibration {self.name!r}: {self.method} needs {need} coefficients")
        if self.method == "isotonic":
            n = len(self.bands) - 1
            if n < 1 or len(self.knots_p) != n or len(self.knots_y) != n:
                raise ValueError(f"decision calibration {self.name!r}: isotonic needs one step function per band")
            if any(len(a) != len(b) or not a for a, b in zip(self.knots_p, self.knots_y, strict=True)):
                raise ValueError(f"decision calibration {self.name!r}: knots_p and knots_y differ in length")
        return self

    @property
    def identity(self) -> str:
        return content_identity(self.name, self.model_dump(exclude={"provenance"}))

    def apply(self, p, *, fraction, **covariates) -> np.ndarray:
        """Recalibrated probabilities (same shape as ``p``; NaN where ``p`` or a covariate is NaN).
        ``fraction``: the observed fraction of the run, and each of :attr:`covariates` by name (numbers
        or one per probability)."""
        p = np.asarray(p, dtype=float)
        missing = [c for c in self.covariates if c not in covariates]
        if missing:
            raise ValueError(f"decision calibration {self.name!r} needs covariate(s) {', '.join(missing)}")
        out = np.full(p.shape, np.nan)
        f = np.broadcast_to(np.asarray(fraction, dtype=float), p.shape)
        extra = [np.broadcast_to(np.asarray(covariates[c], dtype=float), p.shape) for c in self.covariates]
        ok = np.isfinite(p) & np.isfinite(f)
        for x in extra:
            ok &= np.isfinite(x)
        if not ok.any():
            return out
        f = f[ok]
        if self.method == "identity":
            out[ok] = p[ok]
        elif self.method == "isotonic":
            band = np.clip(np.searchsorted(self.bands, f, side="right") - 1, 0, len(self.knots_p) - 1)
            v = np.empty(f.shape)
            for b in range(len(self.knots_p)):
                m = band == b
                v[m] = np.interp(p[ok][m], self.knots_p[b], self.knots_y[b])
            out[ok] = v
        else:
            out[ok] = _sigmoid(_design(self.method, p[ok], f, [x[ok] for x in extra]) @ np.asarray(self.coef))
        return out

    @classmethod
    def default(cls, kind: str = "oscillator", delta: float = DEFAULT_DELTA) -> DecisionCalibration:
        """The packaged p_gain map of ``kind`` at ``delta`` (:func:`shipped_decision`), else the identity
        when the kind ships none.

        Raises
        ------
        ValueError
            The kind ships maps, but none for this delta (the message names the measured ones).
        """
        entry = shipped_decision(kind, delta)
        return cls() if entry is None else cls.model_validate(entry["calibration"])


def _delta_key(delta: float) -> str:
    return f"{float(delta):g}"


@functools.lru_cache(maxsize=8)
def _shipped(kind: str) -> dict | None:
    from importlib.resources import files

    res = files("bayesgrpo.resources").joinpath(f"decision_{kind}.json")
    return json.loads(res.read_text()) if res.is_file() else None


def shipped_decision(kind: str = "oscillator", delta: float = DEFAULT_DELTA) -> dict | None:
    """The packaged decision data of ``kind`` at ``delta`` (``bayesgrpo/resources/decision_<kind>.json``,
    written by ``bench/stop_study.py``): ``calibration`` (the p_gain map), ``policy`` (the stop policy's
    score, patience, start and thresholds per risk) and ``measured`` (its leave-one-source-out error
    rates). None when the kind ships none.

    Raises
    ------
    ValueError
        The kind ships data, but not for this delta.
    """
    data = _shipped(kind)
    if data is None:
        return None
    entry = data["deltas"].get(_delta_key(delta))
    if entry is None:
        raise ValueError(f"delta {delta:g}: the stop advice of the {kind} kind was measured for delta "
                         f"{', '.join(data['deltas'])} only; choose one of them")  # fmt: skip
    return {**entry, "provenance": data.get("provenance", {})}


def measured_deltas(kind: str = "oscillator") -> tuple[float, ...]:
    """The deltas whose p_gain map and stop thresholds ship for ``kind`` (empty when none do)."""
    data = _shipped(kind)
    return tuple(float(d) for d in data["deltas"]) if data else ()


def decision_probabilities(
    fit, run_id: str, *, delta: float = DEFAULT_DELTA, target: float | None = None, calibration=None
) -> dict:
    """The decision numbers of one forecast run (module docstring), in the run's units.

    Returns ``level, scale, fraction, gain_threshold, p_gain_raw, p_gain, p_plateaued``, ``best`` (the best
    mean of 5 consecutive logged rewards), ``p_improve_raw`` = P(final >= best), ``p_decline`` = P(final <
    :func:`decline_threshold`) (not recalibrated), and the covariates
    of :func:`decision_covariates`; with a ``target`` also ``p_target_raw, p_target``. ``calibration``
    (default: the fit's configured map) recalibrates ``p_gain`` and ``p_target``.
    """
    info = fit.infos[run_id]
    cal = calibration if calibration is not None else fit.config.decision
    fin = np.asarray(fit.final_draws(run_id), dtype=float)
    rewards = fit.runs.run(run_id)[REWARD].to_numpy(dtype=float)
    level = current_level(rewards)
    frac = float(fit.arrays.run(run_id).fraction[0])
    pp = p_plateaued(fit.paths(run_id), fit.config.stop_fraction)
    cov = decision_covariates(rewards, scale=float(info.scale), p_plateaued=pp)
    thr = gain_threshold(level, info.scale, delta)
    raw = prob_at_least(fin, thr)
    best = best_window_mean(rewards, 5)
    need = {c: cov[c] for c in cal.covariates}
    out = dict(level=level, scale=float(info.scale), fraction=frac, gain_threshold=thr, p_gain_raw=raw,
               p_gain=float(cal.apply(raw, fraction=frac, **need)[()]), p_plateaued=pp, best=best,
               p_improve_raw=prob_at_least(fin, best), p_decline=1.0 - prob_at_least(fin, decline_threshold(level, info.scale)),
               **cov)  # fmt: skip
    if target is not None:
        rt = prob_at_least(fin, float(target))
        out.update(p_target_raw=rt, p_target=float(cal.apply(rt, fraction=frac, **need)[()]))
    return out
