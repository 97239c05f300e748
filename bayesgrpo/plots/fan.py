"""Plots. Every function returns a ``matplotlib.figure.Figure``."""

from __future__ import annotations

import numpy as np

from bayesgrpo.schema import REWARD, STEP

__all__ = ["fan_chart"]

BAND_COLOR = "#1f6fb4"


def fan_chart(fit, run_id: str, *, ax=None, bands=(0.5, 0.8, 0.95), truth=None):
    """Fan chart: observed points, predictive median, 50/80/95% bands, horizon, predicted stop step.

    Parameters
    ----------
    fit : FittedForecast
    run_id : str
    ax : matplotlib Axes, optional
    bands : tuple of float
        Central interval probabilities of the logged-reward predictive distribution.
    truth : pandas.DataFrame, optional
        The run's later logged points (``step``, ``reward``), drawn in grey for backtests.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
    else:
        fig = ax.figure
    info = fit.infos[run_id]
    obs = fit.runs.run(run_id)
    pdraws = fit.paths(run_id)
    steps = np.concatenate([[info.last_step], pdraws.steps])
    last_obs = obs[REWARD].iloc[-max(1, len(obs) // 20) :].mean()
    for k, b in enumerate(sorted(bands, reverse=True)):
        lo = np.quantile(pdraws.observed, (1 - b) / 2, axis=0)
        hi = np.quantile(pdraws.observed, 1 - (1 - b) / 2, axis=0)
        ax.fill_between(
            steps, np.r_[last_obs, lo], np.r_[last_obs, hi], color=BAND_COLOR, alpha=0.18 + 0.12 * k, lw=0,
            label=f"{b:.0%} predictive interval",
        )  # fmt: skip
    med = np.median(pdraws.latent, axis=0)
    ax.plot(steps, np.r_[last_obs, med], color=BAND_COLOR, lw=2, label="median latent reward")
    ax.plot(obs[STEP], obs[REWARD], ".", color="black", ms=3, label=f"observed ({len(obs)} points)")
    if truth is not None:
        t = truth.loc[truth[STEP] > info.last_step]
        ax.plot(t[STEP], t[REWARD], ".", color="0.6", ms=2.5, label="logged later (truth)")
    win_lo = info.s0 + (1 - fit.config.final_window) * (info.horizon - info.s0)
    fin = fit.final_draws(run_id)
    q = np.quantile(fin, [0.1, 0.5, 0.9])
    ax.errorbar(
        [info.horizon], [q[1]], yerr=[[q[1] - q[0]], [q[2] - q[1]]], fmt="D", color="#c0392b", capsize=4,
        label=f"final reward {q[1]:.3g} (80%: {q[0]:.3g}–{q[2]:.3g})",
    )  # fmt: skip
    ax.axvspan(win_lo, info.horizon, color="#c0392b", alpha=0.06, lw=0)
    ax.axvline(info.last_step, color="0.3", ls=":", lw=1)
    ax.text(info.last_step, 1.0, " forecast from here", transform=ax.get_xaxis_transform(), va="top", fontsize=8, color="0.3")
    stop, reached = fit.stop_draws(run_id)
    if reached.mean() >= 0.5:
        s50 = float(np.median(stop))
        ax.axvline(s50, color="#27ae60", ls="--", lw=1.2, label=f"predicted stop step ~{s50:.0f} (95% of gain)")
    ax.axvline(info.horizon, color="black", lw=1)
    ax.set_xlim(info.s0, info.horizon + 0.03 * (info.horizon - info.s0))
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("training reward")
    ax.set_title(f"{run_id}  [{fit.config.model}]", fontsize=10, loc="left")
    ax.legend(fontsize=7.5, loc="best", framealpha=0.85)
    ax.grid(alpha=0.25)
    return fig
