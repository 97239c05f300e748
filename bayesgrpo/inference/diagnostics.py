"""Sampler diagnostics on numpy arrays: rank-normalised split R-hat and bulk ESS (Vehtari et al. 2021).

These are the definitions ``arviz_stats.base.array_stats.rhat`` (``method="rank"``) and ``.ess``
(``method="bulk"``) compute, step for step (``arviz_stats/base/diagnostics.py``): split chains in halves,
rank-normalise (Blom's offset 3/8, average ranks for ties; the inverse normal is ``scipy.special.ndtri``,
loaded anyway by the default kind's evidence through ``scipy.optimize``),
the classic R-hat of the normal scores and of the folded draws ``|x - median|`` (R-hat is the larger), and
the ESS of the normal scores from FFT autocovariances with Geyer's initial monotone sequence.
``tests/test_diagnostics.py`` checks both against arviz_stats on the same draws (equal to 1e-15, as fast).
Why not call arviz_stats: importing it (its ``__init__`` loads ``loo``, ``scipy.stats``, ``xarray_einstats``)
costs 1.3 s in a process that already holds numpy, pandas, scipy.special and xarray (2.0 s after
``import bayesgrpo.forecast``; measured on this 2-core machine), against a warm forecast's 2.5 s
(``bench/results/startup.md``) that needs two numbers per variable.
Inputs are arrays ``(chain, draw, *shape)``; outputs have ``shape``.

Reference: A. Vehtari, A. Gelman, D. Simpson, B. Carpenter, P.-C. Bürkner (2021), "Rank-normalization,
folding, and localization: an improved R-hat for assessing convergence of MCMC", Bayesian Analysis.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

__all__ = ["rhat", "ess_bulk", "run_health"]


def _rankdata(a: np.ndarray) -> np.ndarray:
    """1-based ranks of the flattened ``a``, ties given their average rank (``scipy.stats.rankdata``)."""
    a = a.ravel()
    sorter = np.argsort(a, kind="mergesort")
    inv = np.empty(sorter.size, dtype=np.intp)
    inv[sorter] = np.arange(sorter.size)
    s = a[sorter]
    first = np.r_[True, s[1:] != s[:-1]]
    dense = np.cumsum(first)[inv]
    count = np.r_[np.nonzero(first)[0], first.size]
    return 0.5 * (count[dense] + count[dense - 1] + 1)


def _z_scale(x: np.ndarray) -> np.ndarray:
    rank = _rankdata(x)
    return ndtri((rank - 0.375) / (rank.size + 0.25)).reshape(x.shape)


def _split(x: np.ndarray) -> np.ndarray:
    half = x.shape[1] // 2
    return np.vstack((x[:, :half], x[:, x.shape[1] - half :]))


def _rhat_classic(x: np.ndarray) -> float:
    n = x.shape[1]
    between = n * np.var(x.mean(axis=1), ddof=1)
    within = np.mean(np.var(x, axis=1, ddof=1))
    return float(np.sqrt((between / within + n - 1) / n))


def _autocov(x: np.ndarray) -> np.ndarray:
    n = x.shape[1]
    m = 2 * n  # zero padding to at least 2n - 1: linear (not circular) autocovariances
    x = x - x.mean(axis=1, keepdims=True)
    f = np.fft.rfft(x, n=m, axis=1)
    f *= np.conjugate(f)
    return np.fft.irfft(f, n=m, axis=1)[:, :n] / n


def _ess(x: np.ndarray) -> float:
    """ESS of a (chain, draw) array: Geyer's initial monotone sequence (ArviZ's ``_ess``)."""
    if np.max(x) - np.min(x) < np.finfo(float).resolution:
        return float(x.size)
    n_chain, n_draw = x.shape
    acov = _autocov(x)
    mean_var = np.mean(acov[:, 0]) * n_draw / (n_draw - 1.0)
    var_plus = mean_var * (n_draw - 1.0) / n_draw
    if n_chain > 1:
        var_plus += np.var(x.mean(axis=1), ddof=1)
    rho = np.zeros(n_draw)
    rho[0] = rho_even = 1.0
    rho[1] = rho_odd = 1.0 - (mean_var - np.mean(acov[:, 1])) / var_plus
    t = 1
    while t < n_draw - 3 and rho_even + rho_odd > 0.0:
        rho_even = 1.0 - (mean_var - np.mean(acov[:, t + 1])) / var_plus
        rho_odd = 1.0 - (mean_var - np.mean(acov[:, t + 2])) / var_plus
        if rho_even + rho_odd >= 0:
            rho[t + 1] = rho_even
            rho[t + 2] = rho_odd
        t += 2
    max_t = t - 2
    if rho_even > 0:
        rho[max_t + 1] = rho_even
    t = 1
    while t <= max_t - 2:  # monotone: pair sums never increase
        if rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t]:
            rho[t + 1] = rho[t + 2] = (rho[t - 1] + rho[t]) / 2.0
        t += 2
    size = n_chain * n_draw
    tau = -1.0 + 2.0 * np.sum(rho[: max_t + 1]) + np.sum(rho[max_t + 1 : max_t + 2])
    tau = max(tau, 1.0 / np.log10(size))
    return float("nan") if np.isnan(rho).any() else float(size / tau)


def _per_element(fn, draws, min_chains: int) -> np.ndarray:
    x = np.asarray(draws, dtype=float)
    if x.ndim < 2:
        raise ValueError(f"draws must have shape (chain, draw, ...), got {x.shape}")
    flat = x.reshape(x.shape[0], x.shape[1], -1)
    out = np.full(flat.shape[2], np.nan)
    if x.shape[0] >= min_chains and x.shape[1] >= 4:
        for i in range(flat.shape[2]):
            xi = flat[:, :, i]
            if not np.isnan(xi).any():
                out[i] = fn(xi)
    return out.reshape(x.shape[2:])


def _rhat_rank(x: np.ndarray) -> float:
    s = _split(x)
    return max(_rhat_classic(_z_scale(s)), _rhat_classic(_z_scale(np.abs(s - np.median(s)))))


def rhat(draws) -> np.ndarray:
    """Rank-normalised split R-hat (the larger of the bulk and the folded one), as ``arviz.rhat``.

    ``draws`` has shape ``(chain, draw, *shape)``; returns an array of ``shape`` (NaN with fewer than
    2 chains or 4 draws, or where a draw is NaN).
    """
    return _per_element(_rhat_rank, draws, min_chains=2)


def ess_bulk(draws) -> np.ndarray:
    """Bulk effective sample size (ESS of the rank-normalised split chains), as ``arviz.ess``."""
    return _per_element(lambda x: _ess(_z_scale(_split(x))), draws, min_chains=1)


def run_health(posterior: dict, *, var_names, divergences: int = 0, per_run: bool = True):
    """Sampler health from draws ``{name: (chain, draw, run)}`` (or ``(chain, draw, ...)`` with ``per_run=False``).

    Per run (the last axis): ``{"r_hat_max", "ess_min", "divergences"}`` over the variables of
    ``var_names`` present and not constant (zero sd) for that run; NaN when none is left. With
    ``per_run=False`` one dict over every element of every such variable. ``divergences`` (of the NUTS
    call) is reported as is.
    """
    names = [v for v in var_names if v in posterior]
    if not per_run:
        r, e = [], []
        for v in names:
            x = np.asarray(posterior[v], dtype=float)
            x = x.reshape(x.shape[0], x.shape[1], -1)
            keep = np.std(x, axis=(0, 1)) > 0
            r += list(rhat(x[:, :, keep]))
            e += list(ess_bulk(x[:, :, keep]))
        return {"r_hat_max": float(max(r)) if r else float("nan"), "ess_min": float(min(e)) if e else float("nan"),
                "divergences": int(divergences)}  # fmt: skip
    n_runs = max((np.shape(posterior[v])[-1] for v in names), default=0)
    out = []
    for j in range(n_runs):
        r, e = [], []
        for v in names:
            x = np.asarray(posterior[v], dtype=float)[..., j : j + 1]
            if np.std(x) > 0:
                r.append(float(rhat(x)[0]))
                e.append(float(ess_bulk(x)[0]))
        out.append({"r_hat_max": max(r) if r else float("nan"), "ess_min": min(e) if e else float("nan"),
                    "divergences": int(divergences)})  # fmt: skip
    return out
