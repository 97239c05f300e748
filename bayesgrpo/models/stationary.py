"""The stationary kind: a run at its fixed point, in closed form.

A noisy flat run has nothing left to gain: its plateau is the level it wanders around. Where the
oscillator of recursion (1) sits at its fixed point (gain ``R* - R0 = 0``) with no momentum, the
deviation from the plateau is an AR(1) process, ``x_{n+1} = (1 - a) x_n + e_n``. This kind is that
limit with the plateau estimated from the whole prefix (the persistence model of the learning-curve
literature), so its posterior needs no sampler:

* ``c`` (``r0 = r_star``) -- flat prior on the level, Gaussian noise: ``c | y ~ N(ybar, s^2 / n)``
  (the exact conjugate posterior at the plug-in noise ``s``, the residual s.d.);
* ``rho = 1 - a`` -- the lag-1 autocorrelation of the residuals, in ``[0, RHO_MAX]``;
* the noise split between the AR(1) latent (``sigma_p``) and the logged point (``sigma_m``, a
  :data:`MEASUREMENT_SHARE` of ``s``) so that a logged point's variance is ``s^2``.

Its **block evidence** ``log p(y_later | y_first)`` is that of the same model fitted to the first part:
Gaussian, residual variance plus the level's posterior variance, summed over the later points (one
definition with the kinds' evidence of :func:`bayesgrpo.forecast.shape.run_evidence`, in the run's
normalised units). Why not PyMC: the posterior is known exactly; the spike-and-slab alternative (the
oscillator graph with its gain pinned at 0, sampled by NUTS) was measured on the yardstick and lost --
its plateau is pinned to the *start* level, not the level the run wanders around
(``bench/results/yardstick.md``).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["posterior", "block_evidence", "RHO_MAX", "MEASUREMENT_SHARE"]

#: the largest residual autocorrelation used (a slower wander is a trend, which the other kinds model)
RHO_MAX = 0.95
#: the share of a logged point's s.d. that is measurement noise (the rest is the AR(1) latent)
MEASUREMENT_SHARE = 0.05
_LOG2PI = math.log(2.0 * math.pi)


def _observed(y, mask) -> np.ndarray:
    y = np.asarray(y, dtype=float)
    return y[np.asarray(mask, dtype=bool) & np.isfinite(y)]


def _level(y: np.ndarray) -> tuple[float, float, float]:
    """``(mean, residual s.d., lag-1 autocorrelation)`` of the observed points (s.d. with n - 1)."""
    n = y.size
    c = float(y.mean())
    r = y - c
    s = math.sqrt(float(r @ r) / max(n - 1, 1))
    rho = float(r[1:] @ r[:-1] / (r @ r)) if n > 2 and float(r @ r) > 0 else 0.0
    return c, s, float(np.clip(rho, 0.0, RHO_MAX))


def posterior(y, mask, *, chains: int, draws: int, seed, noise_floor: float = 0.0) -> dict[str, np.ndarray]:
    """Posterior draws ``(chains, draws)`` of the kind's forecast parameters (normalised units, as the sampled
    kinds give them): ``r0 = r_star = c``, ``a = 1 - rho``, ``mu = 0``, ``tau = 1 / a``, ``sigma_p``,
    ``sigma_m``, ``wander``. ``noise_floor``: the smallest residual s.d. (the arrays' noise floor)."""
    yo = _observed(y, mask)
    if yo.size < 3:
        raise ValueError(f"the stationary kind needs at least 3 observed points, got {yo.size}")
    c, s, rho = _level(yo)
    s = max(s, noise_floor, 1e-9)
    rng = np.random.default_rng(seed)
    level = c + s / math.sqrt(yo.size) * rng.standard_normal((chains, draws))
    full = np.ones((chains, draws))
    sm = MEASUREMENT_SHARE * s
    sp = math.sqrt(max(s * s - sm * sm, 0.0) * (1.0 - rho * rho))
    a = 1.0 - rho
    return {
        "r0": level, "r_star": level.copy(), "a": a * full, "mu": 0.0 * full, "tau": full / a,
        "sigma_p": sp * full, "sigma_m": sm * full, "wander": s * full,
    }  # fmt: skip


def block_evidence(y, mask, *, split: float = 0.5) -> float:
    """``log p(y_later | y_first)`` (module docstring): the first ``round(split n)`` observed points fit the
    level, the later ones are scored; NaN when either part is too short (fewer than 3 first points)."""
    yo = _observed(y, mask)
    n = yo.size
    m = max(1, int(round(split * n)))
    if m < 3 or m >= n:
        return float("nan")
    c, s, _ = _level(yo[:m])
    var = max(s * s * (1.0 + 1.0 / m), 1e-12)
    later = yo[m:]
    return float(np.sum(-0.5 * (_LOG2PI + math.log(var) + (later - c) ** 2 / var)))
