"""Fan chart of one run's forecast."""

from __future__ import annotations

import textwrap

import numpy as np

from bayesgrpo.conventions import HEADLINE, INTERVALS, interval_bounds, interval_label
from bayesgrpo.forecast.paths import stop_quantile
from bayesgrpo.plan import final_window_threshold
from bayesgrpo.schema import REWARD, STEP

__all__ = ["fan_chart", "BAND_COLOR"]

BAND_COLOR = "#1f6fb4"
#: at most this many later logged points are drawn (every k-th, plus their rolling median)
TRUTH_POINTS = 400


def _draw_truth(ax, t) -> None:
    """The later logged points behind the bands (zorder below theirs), thinned to :data:`TRUTH_POINTS`
    with their rolling median: a long run never hides the forecast."""
    k = max(1, int(np.ceil(len(t) / TRUTH_POINTS)))
    ax.plot(t[STEP].to_numpy()[::k], t[REWARD].to_numpy()[::k], ".", color="0.7", ms=2.0, zorder=0.5,
            label="logged later (truth)" + (f", every {k}th point" if k > 1 else ""))  # fmt: skip
    if len(t) > TRUTH_POINTS:
        med = t[REWARD].rolling(2 * k + 1, center=True, min_periods=1).median().to_numpy()[::k]
        ax.plot(t[STEP].to_numpy()[::k], med, color="0.45", lw=1.0, zorder=0.6,
                label="logged later, rolling median")  # fmt: skip


def fan_chart(fit, run_id: str, *, ax=None, bands=INTERVALS, truth=None):
    """Fan chart: observed points, predictive median and central bands, final-reward interval, stop step.

    The bands start at the last observation from the filtered state there (the current level is
    uncertain too), the median is the latent (noise-free) reward; the red diamond at the horizon is
    the final reward's median and 80% interval. The predicted stop step is drawn only when it lies
    after the last observation (earlier: a note says so).

    Parameters
    ----------
    fit : FittedForecast
    run_id : str
    ax : matplotlib Axes, optional
        Draw into this Axes (its figure is returned); default: a new Figure.
    bands : tuple of float
        Central interval masses of the logged-reward predictive distribution.
    truth : pandas.DataFrame, optional
        The run's later logged points (``step``, ``reward``), drawn in light grey behind the bands for
        backtests: at most :data:`TRUTH_POINTS` of them (every k-th) and, when thinned, their rolling median.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.figure import Figure

    if ax is None:
        fig = Figure(figsize=(8.5, 5.0), layout="constrained")
        ax = fig.subplots()
    else:
        fig = ax.figure
    info = fit.infos[run_id]
    obs = fit.runs.run(run_id)
    pdraws = fit.paths(run_id)
    steps = np.concatenate([[info.last_step], pdraws.steps])
    now = pdraws.latent_now
    for k, b in enumerate(sorted(bands, reverse=True)):
        lo_q, hi_q = interval_bounds(b)
        lo = np.r_[np.quantile(now, lo_q), np.quantile(pdraws.observed, lo_q, axis=0)]
        hi = np.r_[np.quantile(now, hi_q), np.quantile(pdraws.observed, hi_q, axis=0)]
        ax.fill_between(steps, lo, hi, color=BAND_COLOR, alpha=0.16 + 0.12 * k, lw=0,
                        label=f"{interval_label(b)} predictive interval")  # fmt: skip
    med = np.r_[np.median(now), np.median(pdraws.latent, axis=0)]
    ax.plot(steps, med, color=BAND_COLOR, lw=2, label="median latent reward")
    ax.plot(obs[STEP], obs[REWARD], ".", color="black", ms=3, label=f"observed ({len(obs)} points)")
    if truth is not None:
        _draw_truth(ax, truth.loc[truth[STEP] > info.last_step])
    win_lo = final_window_threshold(s0=info.s0, horizon=info.horizon, final_window=fit.config.final_window)
    fin = fit.final_draws(run_id)
    q = np.quantile(fin, [interval_bounds(HEADLINE)[0], 0.5, interval_bounds(HEADLINE)[1]])
    ax.errorbar([info.horizon], [q[1]], yerr=[[q[1] - q[0]], [q[2] - q[1]]], fmt="D", color="#c0392b", capsize=4,
                label=f"final reward {q[1]:.3g} ({interval_label(HEADLINE)}: {q[0]:.3g} to {q[2]:.3g})")  # fmt: skip
    ax.axvspan(win_lo, info.horizon, color="#c0392b", alpha=0.06, lw=0)
    ax.axvline(info.last_step, color="0.3", ls=":", lw=1)
    ax.text(info.last_step, 1.0, " forecast from here", transform=ax.get_xaxis_transform(), va="top", fontsize=8,
            color="0.3")  # fmt: skip
    reached = pdraws.stop_reached
    note = ""
    if reached.mean() >= 0.5:
        s50 = stop_quantile(pdraws, 0.5)
        if s50 > info.last_step:
            ax.axvline(s50, color="#27ae60", ls="--", lw=1.2, label=f"predicted stop step {s50:.0f}")
        else:
            note = f"; settled by step {s50:.0f} (already past)"
    else:
        note = f"; stop step beyond the horizon (P = {1 - reached.mean():.2f})"
    ax.axvline(info.horizon, color="black", lw=1)
    ax.set_xlim(info.s0, info.horizon + 0.03 * (info.horizon - info.s0))
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("training reward")
    title = textwrap.fill(str(run_id), 90)
    ax.set_title(f"{title}\nkind {fit.config.kind}{note}", fontsize=9.5, loc="left")
    ax.grid(alpha=0.25)
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    if isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine):
        fig.legend(loc="outside lower center", ncol=3, fontsize=7.5, frameon=False)
    else:
        ax.legend(loc="best", fontsize=7.5, framealpha=0.85)
    return fig
