"""The outlook layer: what runs of other sources did from where this run is now.

A run's own posterior knows the run; it does not know what it has not yet shown. At 10% of a run a 0/1
score flat at its floor may still take off, a small model trained from scratch may still decline -- and
on sources never seen, forecasts from the run alone covered 61% where they said 80%. The outlook is the
between-source answer to "where do runs go from here": the change from the current level to the final
reward, in units of the run's scale,

    z = (final - level) / scale,

as it happened on the development sources' runs cut at the same observed fraction (each source
weighing the same). A forecast is the mixture

    (1 - w(f)) p_run(final | prefix)  +  w(f) p_outlook(level + z scale | f),

a share ``w(f)`` of the draws ending where the population's changes put them (a linear pool: the
run's own draws stay as they are, the tails get the changes a run of a new source can make). ``level``
is :func:`bayesgrpo.series.current_level`, ``scale`` the forecast's normalising scale
(:attr:`bayesgrpo.models.arrays.RunInfo.scale`). Beyond the last fraction of the grid the changes shrink
with the share of the run left, ``(1 - f) / (1 - f_last)``.

Paths: the draws of the outlook go linearly in time from the latent level now to their final reward
(the time to go, :meth:`~bayesgrpo.models.arrays.RunInfo.time_to_go`), so the fan chart, the final
reward and every decision read the same draws.

The packaged outlook (``resources/outlook.json``: the quantiles of ``z`` and the weights per fraction)
is fitted on the yardstick's *selection* sources, its weights chosen leave-one-source-out there
(``bench/yardstick/study.py``), and judged on the locked test (``bench/results/yardstick.md``).
"""

from __future__ import annotations

import zlib

import numpy as np
from pydantic import ConfigDict, Field, model_validator

from bayesgrpo.conventions import content_identity
from bayesgrpo.io.jsonfile import JsonFile

__all__ = ["Outlook", "outlook_draws"]


class Outlook(JsonFile):
    """The outlook of the module docstring: per observed fraction of ``grid``, the mixture weight and the
    quantiles of the change ``z`` (at evenly spaced levels). ``grid`` empty: no outlook (identity)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    grid: tuple[float, ...] = ()
    weight: tuple[float, ...] = ()
    quantiles: tuple[tuple[float, ...], ...] = ()
    provenance: dict = Field(default_factory=dict)

    @model_validator(mode="after")
    def _shapes(self):
        if not (len(self.grid) == len(self.weight) == len(self.quantiles)):
            raise ValueError("outlook: grid, weight and quantiles need one entry per fraction each")
        if list(self.grid) != sorted(self.grid) or any(not 0.0 < g < 1.0 for g in self.grid):
            raise ValueError("outlook: the grid is increasing observed fractions in (0, 1)")
        if any(not 0.0 <= w <= 1.0 for w in self.weight):
            raise ValueError("outlook: weights lie in [0, 1]")
        for q in self.quantiles:
            if len(q) < 2 or list(q) != sorted(q):
                raise ValueError("outlook: each row of quantiles is non-decreasing, at least 2 values")
        return self

    @property
    def is_identity(self) -> bool:
        return not self.grid or max(self.weight) == 0.0

    @property
    def identity(self) -> str:
        return content_identity("outlook", self.model_dump(exclude={"provenance"}))

    def at(self, fraction: float) -> tuple[float, np.ndarray]:
        """``(w, quantiles of z)`` at an observed fraction (linear between grid points; constant before the
        grid; after it the last weight and the changes shrunk by the share of the run left)."""
        g = np.asarray(self.grid)
        Q = np.asarray(self.quantiles, dtype=float)
        f = float(np.clip(fraction, 0.0, 1.0))
        w = float(np.interp(f, g, self.weight))
        if f >= g[-1]:
            return w, Q[-1] * (1.0 - f) / (1.0 - g[-1])
        j = int(np.clip(np.searchsorted(g, f) - 1, 0, g.size - 1))
        k = min(j + 1, g.size - 1)
        t = 0.0 if k == j else float(np.clip((f - g[j]) / (g[k] - g[j]), 0.0, 1.0))
        return w, (1.0 - t) * Q[j] + t * Q[k]

    @classmethod
    def default(cls) -> Outlook:
        """The packaged outlook (``resources/outlook.json``), else none."""
        return cls.packaged("outlook.json") or cls()


def outlook_draws(outlook: Outlook, n: int, *, fraction: float, level: float, scale: float, run_id: str,
                  seed: int = 0, bounds: tuple[float, float] = (-np.inf, np.inf)) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Which of ``n`` draws follow the outlook, and their final rewards: ``(indices, ends)``. The indices are
    a seeded choice by run id (the same for the paths and the final reward of a run); the ends are evenly
    spaced quantiles of ``level + z scale`` (no Monte Carlo noise in the tails).

    A known reward bound saturates the change towards it: a change ``d`` towards a bound at distance ``h``
    ends at ``h (1 - exp(-d / h))`` from the level (linear for small changes, never at or past the bound), so
    a run near its ceiling is not forecast to end exactly at it (clipping would put a share of the draws on
    the bound itself: a median of a perfect score)."""
    if outlook.is_identity or n == 0:
        return np.empty(0, dtype=np.int64), np.empty(0)
    w, q = outlook.at(fraction)
    m = int(round(w * n))
    if m == 0:
        return np.empty(0, dtype=np.int64), np.empty(0)
    rng = np.random.default_rng([seed, zlib.crc32(run_id.encode()), 11])
    idx = np.sort(rng.choice(n, size=m, replace=False))
    levels = (np.arange(m) + 0.5) / m
    z = np.interp(levels, np.linspace(0.0, 1.0, q.size), q)
    d = rng.permutation(z) * scale
    for side, bound in ((d > 0, bounds[1]), (d < 0, bounds[0])):
        h = abs(bound - level)
        if np.isfinite(h) and h > 0:
            d[side] = np.sign(d[side]) * h * -np.expm1(-np.abs(d[side]) / h)
        elif np.isfinite(h):  # the level is on the bound: no change past it
            d[side] = 0.0
    return idx, level + d
