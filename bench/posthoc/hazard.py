"""Leaving the regime: a hazard whose rate depends on what the prefix shows (decline and collapse).

The physics models describe a run that stays in its regime; real runs also leave it -- a rise that
peaks and declines, a collapse to the floor (physics.md sections 7, 9 and 10). No prefix times such an
event, but a population of complete runs prices it: a **proportional hazard** of leaving, per unit of
the run still to go, whose rate rises with the precursors of :mod:`bayesgrpo.forecast.features`
(KL growing, entropy falling, length running away, the zero-spread share rising while the reward
falls; where nothing else is logged, the reward's own signs: past its peak, falling recently)::

    rate(x) = exp(b0 + b . z(x)),        z = (x - centre) / spread (the training cases' robust scale)
    P(leave before the horizon | x) = 1 - exp(-rate(x) * to_go),   to_go = 1 - observed fraction

-- a discrete-time survival model with the complementary log-log link (Prentice & Gloeckler 1978),
fitted by penalised maximum likelihood on complete runs truncated at the backtest cutoffs, every
source weighing the same (:func:`fit_hazard`). A run that leaves ends between the reward's floor and
its current level (:func:`~bench.fit_layers.leave_anchor`), at the share ``v`` of the way
up from the floor where ``v`` follows the Beta distribution of where the training runs that left ended.

A forecast mixes: a share ``P(leave | x)`` of its draws (a fixed subset, the same for the final reward
and its paths) is replaced by draws of the leaving outcome (:meth:`Hazard.apply`). With every
coefficient 0 this is the constant hazard measured before, which raised CRPS
(``bench/results/calibration_study.md``); the rate here is at its baseline where no input fires and
widens the forecast only where one does.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from bayesgrpo.conventions import content_identity

__all__ = ["Hazard", "fit_hazard", "left_regime", "FALL", "HAZARD_SEED", "P_MAX"]

#: a run "left its regime" after a cutoff when its final reward lies this share of its reward range
#: below its level at the cutoff (the decline/collapse event the hazard is fitted to)
FALL = 0.3
#: the share of draws that leave never exceeds this (a hazard is a tail, not the forecast)
P_MAX = 0.5
HAZARD_SEED = 20_261_201


class Hazard(BaseModel):
    """A fitted hazard of leaving the regime (module docstring); frozen, saved as package data."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    features: tuple[str, ...] = ()
    centre: tuple[float, ...] = ()
    spread: tuple[float, ...] = ()
    coef: tuple[float, ...] = ()
    intercept: float | None = None  # None: no hazard, nothing ever leaves
    outcome: tuple[float, float] = (1.0, 1.0)  # Beta(a, b) of where a leaving run ends, floor -> level
    name: str = "none"
    provenance: dict = Field(default_factory=dict)

    @model_validator(mode="after")
    def _lengths(self):
        n = len(self.features)
        if not (len(self.centre) == len(self.spread) == len(self.coef) == n):
            raise ValueError(f"hazard {self.name!r}: features, centre, spread and coef need one value each")
        if any(s <= 0 for s in self.spread):
            raise ValueError(f"hazard {self.name!r}: spreads must be positive")
        if min(self.outcome) <= 0:
            raise ValueError(f"hazard {self.name!r}: the outcome's Beta parameters must be positive")
        return self

    @property
    def identity(self) -> str:
        return content_identity(self.name, self.model_dump(exclude={"provenance"}))

    @property
    def active(self) -> bool:
        """False for the identity (no hazard): nothing leaves, the draws are not read."""
        return self.intercept is not None

    def rate(self, feats: dict) -> float:
        """The hazard's rate per unit of the run still to go for the features ``feats``."""
        if self.intercept is None:
            return 0.0
        z = [(float(feats.get(f, 0.0)) - c) / s
             for f, c, s in zip(self.features, self.centre, self.spread, strict=True)]  # fmt: skip
        return float(math.exp(min(self.intercept + float(np.dot(self.coef, z)), 5.0)))

    def p_leave(self, feats: dict, *, to_go: float | None = None) -> float:
        """P(the run leaves before the horizon): ``1 - exp(-rate to_go)`` (``to_go`` defaults to
        ``1 - feats["fraction"]``), at most :data:`P_MAX`."""
        go = (1.0 - float(feats.get("fraction", 0.0))) if to_go is None else float(to_go)
        return float(min(P_MAX, 1.0 - math.exp(-self.rate(feats) * max(0.0, go))))

    def leaving(self, n: int, p: float, *, level: float, floor: float) -> tuple[np.ndarray, np.ndarray]:
        """``(indices, end values)`` of the draws that leave: a fixed subset of ``round(p n)`` of ``n``
        draws, ending at evenly spaced quantiles of the outcome's Beta between ``floor`` and ``level``."""
        k = int(round(p * n))
        if k == 0 or not (np.isfinite(level) and np.isfinite(floor)):
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        idx, v = _leaving_draws(n, k, *self.outcome)
        lo = min(float(floor), float(level))
        return idx, lo + (float(level) - lo) * v

    def apply(self, draws, feats: dict, *, level: float, floor: float) -> np.ndarray:
        """Final-reward draws with the share :meth:`p_leave` replaced by the leaving outcome (a copy)."""
        x = np.array(draws, dtype=float, copy=True)
        idx, end = self.leaving(x.size, self.p_leave(feats), level=level, floor=floor)
        x[idx] = end
        return x

    def save(self, path) -> None:
        from bayesgrpo.io.output import atomic_path

        with atomic_path(path) as tmp:
            Path(tmp).write_text(self.model_dump_json(indent=2) + "\n")

    @classmethod
    def load(cls, path) -> Hazard:
        p = path if hasattr(path, "read_text") else Path(path)
        return cls.model_validate(json.loads(p.read_text()))

    @classmethod
    def default(cls) -> Hazard:
        """The packaged hazard (``resources/hazard.json``), else none."""
        from importlib.resources import files

        res = files("bayesgrpo.resources").joinpath("hazard.json")
        return cls.load(res) if res.is_file() else cls()


@functools.lru_cache(maxsize=256)
def _leaving_draws(n: int, k: int, a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """The fixed subset of ``k`` of ``n`` draws that leave, and their Beta(a, b) shares of the way up (read-only)."""
    from scipy import stats

    rng = np.random.default_rng(HAZARD_SEED)
    idx = np.sort(rng.choice(n, size=k, replace=False))
    v = stats.beta.ppf((rng.permutation(k) + 0.5) / k, a, b)
    idx.flags.writeable = False
    v.flags.writeable = False
    return idx, v


def left_regime(level, truth, value_range, *, fall: float = FALL) -> np.ndarray:
    """The event: the final reward lies more than ``fall`` of the run's range below the level at the cutoff."""
    return (np.asarray(level, float) - np.asarray(truth, float)) > fall * np.asarray(value_range, float)


def _robust_centre_spread(x: np.ndarray) -> tuple[float, float]:
    c = float(np.median(x))
    s = float(np.quantile(x, 0.9) - np.quantile(x, 0.1))
    return c, (s if s > 1e-9 else max(float(np.std(x)), 1.0))


def fit_hazard(
    X,
    event,
    *,
    features,
    to_go,
    weights=None,
    outcome=None,
    l2: float = 1.0,
    name: str = "hazard",
    provenance=None,
) -> Hazard:
    """Fit the hazard by penalised maximum likelihood (complementary log-log, exposure ``to_go``).

    Parameters
    ----------
    X : array (n, p)
        The features of each case, columns in the order of ``features``.
    event : array of bool (n,)
        Whether the run left its regime after the case's cutoff (:func:`left_regime`).
    features : sequence of str
    to_go : array (n,)
        The share of the run still to go at the cutoff.
    weights : array (n,), optional
        Case weights (e.g. each source the same); normalised to mean 1.
    outcome : array, optional
        Where the runs that left ended, as a share of the way from the floor to the level (0-1); its
        Beta is fitted by moments (default: uniform).
    l2 : float
        Ridge penalty on the standardised coefficients (the intercept is free): few events, many inputs.
    """
    from scipy import optimize

    X = np.atleast_2d(np.asarray(X, dtype=float))
    y = np.asarray(event, dtype=float)
    go = np.maximum(np.asarray(to_go, dtype=float), 1e-6)
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=float)
    w = w / w.mean()
    cs = [_robust_centre_spread(X[:, j]) for j in range(X.shape[1])]
    Z = (X - np.array([c for c, _ in cs])) / np.array([s for _, s in cs]) if X.shape[1] else X

    A = np.column_stack([np.ones(len(y)), Z])
    pen = np.r_[0.0, np.full(Z.shape[1], l2)]

    def nll(b):  # and its exact gradient: d ll / d eta = y lam e^-lam / (1 - e^-lam) - (1 - y) lam
        eta = np.clip(A @ b + np.log(go), -30.0, 5.0)
        lam = np.exp(eta)
        one_m = -np.expm1(-lam)
        ll = y * np.log(one_m + 1e-300) - (1.0 - y) * lam
        dll = y * lam * np.exp(-lam) / np.maximum(one_m, 1e-300) - (1.0 - y) * lam
        return -(w * ll).sum() + 0.5 * float(pen @ b**2), -(A.T @ (w * dll)) + pen * b

    b0 = math.log(max(float((w * y).sum() / (w * go).sum()), 1e-4))
    res = optimize.minimize(nll, np.r_[b0, np.zeros(Z.shape[1])], jac=True, method="L-BFGS-B")
    a_b = (1.0, 1.0)
    if outcome is not None and len(outcome) >= 3:
        v = np.clip(np.asarray(outcome, dtype=float), 0.01, 0.99)
        m, var = float(v.mean()), float(v.var())
        k = m * (1 - m) / var - 1 if var > 0 else 2.0
        a_b = (max(0.2, m * max(k, 0.5)), max(0.2, (1 - m) * max(k, 0.5)))
    prov = dict(provenance or {})
    prov.update(cases=int(len(y)), events=int(y.sum()), l2=l2, method="complementary log-log, exposure 1 - fraction")
    return Hazard(features=tuple(features), centre=tuple(round(c, 6) for c, _ in cs),
                  spread=tuple(round(s, 6) for _, s in cs), coef=tuple(round(float(v), 5) for v in res.x[1:]),
                  intercept=round(float(res.x[0]), 5), outcome=tuple(round(v, 4) for v in a_b), name=name,
                  provenance=prov)  # fmt: skip
