"""Sampler diagnostics on numpy arrays: rank-normalised split R-hat and bulk ESS (Vehtari et al. 2021).

Why not ArviZ here: importing ``arviz`` loads xarray, scipy and matplotlib (about 2.5 s of a warm
forecast's start, ``bench/results/imports.md``), and a forecast needs two numbers per variable. These
are the definitions ``arviz.rhat`` (``method="rank"``) and ``arviz.ess`` (``method="bulk"``) compute,
step for step (``arviz_stats/base/diagnostics.py``): split chains in halves, rank-normalise (Blom's
offset 3/8, average ranks for ties), the classic R-hat of the normal scores and of the folded draws
``|x - median|`` (R-hat is the larger), and the ESS of the normal scores from FFT autocovariances with
Geyer's initial monotone sequence. ``tests/test_diagnostics.py`` checks both against ArviZ on the
same draws. Inputs are arrays ``(chain, draw, *shape)``; outputs have ``shape``.

Reference: A. Vehtari, A. Gelman, D. Simpson, B. Carpenter, P.-C. Bürkner (2021), "Rank-normalization,
folding, and localization: an improved R-hat for assessing convergence of MCMC", Bayesian Analysis.
"""

from __future__ import annotations

import numpy as np

__all__ = ["rhat", "ess_bulk", "norm_ppf", "run_health"]

# Wichura's algorithm AS 241 (PPND16): the inverse normal CDF to about 1e-16 relative, vectorised
# (the coefficients of Python's statistics.NormalDist.inv_cdf, which implements the same algorithm)
# fmt: off
_A = (3.3871328727963666080e0, 1.3314166789178437745e2, 1.9715909503065514427e3, 1.3731693765509461125e4,
      4.5921953931549871457e4, 6.7265770927008700853e4, 3.3430575583588128105e4, 2.5090809287301226727e3)
_B = (1.0, 4.2313330701600911252e1, 6.8718700749205790830e2, 5.3941960214247511077e3, 2.1213794301586595867e4,
      3.9307895800092710610e4, 2.8729085735721942674e4, 5.2264952788528545610e3)
_C = (1.42343711074968357734e0, 4.63033784615654529590e0, 5.76949722146069140550e0, 3.64784832476320460504e0,
      1.27045825245236838258e0, 2.41780725177450611770e-1, 2.27238449892691845833e-2, 7.74545014278341407640e-4)
_D = (1.0, 2.05319162663775882187e0, 1.67638483018380384940e0, 6.89767334985100004550e-1, 1.48103976427480074590e-1,
      1.51986665636164571966e-2, 5.47593808499534494600e-4, 1.05075007164441684324e-9)
_E = (6.65790464350110377720e0, 5.46378491116411436990e0, 1.78482653991729133580e0, 2.96560571828504891230e-1,
      2.65321895265761230930e-2, 1.24266094738807843860e-3, 2.71155556874348757815e-5, 2.01033439929228813265e-7)
_F = (1.0, 5.99832206555887937690e-1, 1.36929880922735805310e-1, 1.48753612908506148525e-2, 7.86869131145613259100e-4,
      1.84631831751005468180e-5, 1.42151175831644588870e-7, 2.04426310338993978564e-15)
# fmt: on


def _poly(c, x):
    out = np.full_like(x, c[-1])
    for coef in c[-2::-1]:
        out = out * x + coef
    return out


def norm_ppf(p) -> np.ndarray:
    """Inverse of the standard normal CDF (Wichura's AS 241), elementwise; 0 and 1 map to -inf and inf."""
    p = np.asarray(p, dtype=float)
    q = p - 0.5
    out = np.empty_like(p)
    central = np.abs(q) <= 0.425
    r = 0.180625 - q[central] ** 2
    out[central] = q[central] * _poly(_A, r) / _poly(_B, r)
    tail = ~central
    rt = np.where(q[tail] > 0.0, 1.0 - p[tail], p[tail])
    with np.errstate(divide="ignore", invalid="ignore"):
        rt = np.sqrt(-np.log(rt))
    near = rt <= 5.0
    with np.errstate(invalid="ignore"):
        x = np.where(near, _poly(_C, rt - 1.6) / _poly(_D, rt - 1.6), _poly(_E, rt - 5.0) / _poly(_F, rt - 5.0))
    x = np.where(np.isinf(rt), np.inf, x)  # p = 0 or 1
    out[tail] = np.where(q[tail] < 0.0, -x, x)
    return out


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
    return norm_ppf((rank - 0.375) / (rank.size + 0.25)).reshape(x.shape)


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
