"""Checks of the spread channel's physics (physics.md section 10) on any run: the testbed and the TRL
trainer, which know every prompt's pass rate, and logged runs, which know the reward and its channels.

* :func:`exact_channels` -- the expected logged ``frac_reward_zero_std`` and ``reward_std`` of a step from
  the prompts' exact pass rates (no Beta assumption), and the mean and variance of the pass rates;
* :func:`beta_nu` -- the Beta concentration of a set of pass rates (method of moments);
* :func:`fit_nu` -- ONE ``nu`` for a whole run: the Beta-binomial expectation of a logged channel
  (:func:`bayesgrpo.models.spread.spread_expectations`) fitted to its series by weighted least squares;
* :func:`growth_law` -- the local growth of the reward against a proxy (``1 - frac_zero_std``,
  ``reward_std**2``, ...): rank correlation and the share of the growth a proportional law explains.

Used by ``bench/spread_validation.py`` (research: no command or forecast of the package uses them, so they
left ``bayesgrpo/models/``); callable on a TRL trainer's log as well (pure numpy).
"""

from __future__ import annotations

import numpy as np

from bayesgrpo.models.spread import group_sds, spread_expectations

__all__ = ["exact_channels", "beta_nu", "fit_nu", "growth_law", "segment_means"]


def exact_channels(p, G: int) -> dict:
    """Expected step statistics of G completions per prompt, prompts drawn uniformly from those of ``p``.

    ``p``: pass rates, the prompts on the last axis. Returns ``frac_reward_zero_std`` (mean of
    ``p^G + (1 - p)^G``), ``reward_std`` (mean of ``sum_k Binom(k; G, p) s_k``), ``variance`` (mean of
    ``p (1 - p)``), ``mean`` and ``var`` (of the pass rates).
    """
    from scipy.stats import binom

    p = np.asarray(p, dtype=float)
    k = np.arange(G + 1)
    pk = binom.pmf(k, G, p[..., None])  # (..., P, G + 1)
    return {
        "frac_reward_zero_std": (p**G + (1.0 - p) ** G).mean(-1),
        "reward_std": (pk * group_sds(G)).sum(-1).mean(-1),
        "variance": (p * (1.0 - p)).mean(-1),
        "mean": p.mean(-1),
        "var": p.var(-1),
    }


def beta_nu(p) -> np.ndarray:
    """Concentration ``nu = m (1 - m) / var - 1`` of pass rates ``p`` (prompts on the last axis); NaN where
    the variance is 0 or not below ``m (1 - m)``."""
    p = np.asarray(p, dtype=float)
    m, v = p.mean(-1), p.var(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        nu = m * (1.0 - m) / v - 1.0
    return np.where((v > 0) & (nu > 0), nu, np.nan)


def fit_nu(m, logged, G: int, *, channel: str = "frac_reward_zero_std", groups=1.0, grid=None) -> float:
    """One ``nu`` for a run: minimise ``sum_t (logged_t - E[channel | m_t, nu, G])^2 / Var_t`` over ``nu``.

    ``m``: the run's mean pass rate per step (exact, or the smoothed reward of a 0/1 run), ``logged`` the
    channel's series, ``groups`` the groups behind a logged value (scalar or per step). ``Var_t`` is the
    Beta-binomial sampling variance at the fitted value (iterated once). Returns ``nu``.
    """
    m, y = np.asarray(m, dtype=float), np.asarray(logged, dtype=float)
    ok = np.isfinite(m) & np.isfinite(y)
    m, y = m[ok], y[ok]
    grid = np.geomspace(0.02, 500.0, 121) if grid is None else np.asarray(grid, dtype=float)
    groups = np.broadcast_to(np.asarray(groups, dtype=float), ok.shape)[ok]

    def loss(nu, w):
        e = spread_expectations(m, nu, G)
        return float((w * (y - e[channel]) ** 2).sum())

    w = np.ones_like(m)
    best = grid[int(np.argmin([loss(v, w) for v in grid]))]
    for _ in range(2):  # weights from the sampling variance at the current fit, then refine on a finer grid
        e = spread_expectations(m, best, G)
        var = e["frac_reward_zero_std"] * (1 - e["frac_reward_zero_std"]) if channel == "frac_reward_zero_std" else \
            e["reward_std_sd"] ** 2  # fmt: skip
        w = groups / np.maximum(var, 1e-6)
        fine = best * np.geomspace(0.7, 1.43, 41)
        best = fine[int(np.argmin([loss(v, w) for v in fine]))]
    return float(best)


def segment_means(steps, values, segments: int) -> np.ndarray:
    """Means of ``values`` over ``segments`` equal spans of the run's steps (NaN where a span has none)."""
    st = np.asarray(steps, dtype=float)
    v = np.asarray(values, dtype=float)
    edges = np.linspace(st[0], st[-1] + 1e-9, segments + 1)
    idx = np.clip(np.searchsorted(edges, st, side="right") - 1, 0, segments - 1)
    out = np.full(segments, np.nan)
    for k in range(segments):
        sel = (idx == k) & np.isfinite(v)
        if sel.any():
            out[k] = v[sel].mean()
    return out


def growth_law(steps, reward, proxy, *, segments: int = 10, rising_only: bool = False) -> dict:
    """Local growth of the reward against a proxy of the learning signal, over ``segments`` spans of the run.

    The growth of span k is ``(R_{k+1} - R_{k-1}) / 2`` (span means of the reward), the proxy its span mean.
    Returns the Spearman correlation ``rho``, ``r2`` -- the share of the growth's variance the proportional
    law ``growth = c * proxy`` (least squares, through 0) explains (negative: worse than a constant) -- the
    fitted ``c`` and the number of spans. ``rising_only``: only spans before the reward's maximum span.
    """
    from scipy.stats import spearmanr

    R = segment_means(steps, reward, segments)
    X = segment_means(steps, proxy, segments)
    g = np.full(segments, np.nan)
    g[1:-1] = (R[2:] - R[:-2]) / 2.0
    ok = np.isfinite(g) & np.isfinite(X)
    if rising_only and np.isfinite(R).any():
        ok &= np.arange(segments) < int(np.nanargmax(R))
    if ok.sum() < 4:
        return {"rho": np.nan, "r2": np.nan, "c": np.nan, "n": int(ok.sum())}
    g, X = g[ok], X[ok]
    c = float((g * X).sum() / max((X * X).sum(), 1e-300))
    ss = float(((g - g.mean()) ** 2).sum())
    r2 = 1.0 - float(((g - c * X) ** 2).sum()) / ss if ss > 0 else np.nan
    rho = float(spearmanr(g, X).statistic) if np.ptp(X) > 0 and np.ptp(g) > 0 else np.nan
    return {"rho": rho, "r2": r2, "c": c, "n": int(ok.sum())}
