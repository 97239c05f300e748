"""Stop-advice figures: reliability diagrams of decision probabilities and the stop policy's operating
curves (steps saved against the bad-stop rate and against the reward lost), for the stop study
(``bench/stop_report.py``; no command of the package draws them, so they left ``bayesgrpo/plots/``).

Every function builds a ``matplotlib.figure.Figure`` (no pyplot state, no backend switch).
"""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pandas as pd

from bayesgrpo.evaluation.stop_rule import ORACLE
from bench.stop_rule import reliability

__all__ = ["reliability_figure", "operating_figure"]

_CYCLE = ["#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def _color(method: str, k: int) -> str:
    if method.startswith("bayesgrpo"):
        return "#1f6fb4" if ":raw" not in method else "#7fb3e0"
    return _CYCLE[k % len(_CYCLE)]


def reliability_figure(panels: dict, *, title: str, bins: int = 10, band: float = 0.07, min_n: int = 30):
    """One reliability diagram per panel: ``{label: (p, y)}`` -> observed frequency per bin of ``p`` against
    the mean probability, the diagonal and a +-``band`` corridor; bins with fewer than ``min_n`` cases are
    drawn hollow; the case count per bin underneath."""
    from matplotlib.figure import Figure

    n = len(panels)
    ncol = min(4, n)
    nrow = math.ceil(n / ncol)
    fig = Figure(figsize=(3.1 * ncol, 3.3 * nrow + 0.5), layout="constrained")
    axes = fig.subplots(nrow, ncol, squeeze=False)
    for ax, (label, (p, y)) in zip(axes.ravel(), panels.items(), strict=False):
        t = reliability(p, y, bins=bins)
        x = np.linspace(0, 1, 2)
        ax.fill_between(x, x - band, x + band, color="0.9", lw=0)
        ax.plot(x, x, color="0.5", lw=0.8)
        if len(t):
            full = t["n"] >= min_n
            ax.plot(t["mean_p"], t["observed"], color="#1f6fb4", lw=1)
            ax.scatter(t.loc[full, "mean_p"], t.loc[full, "observed"], color="#1f6fb4", s=22, zorder=3)
            ax.scatter(t.loc[~full, "mean_p"], t.loc[~full, "observed"], facecolor="white", edgecolor="#1f6fb4",
                       s=22, zorder=3)  # fmt: skip
            worst = t.loc[full, "gap"].abs().max() if full.any() else float("nan")
            for r in t.itertuples():
                ax.text(r.mean_p, -0.085, str(r.n), fontsize=6, ha="center", va="top", color="0.35")
            label = f"{label}\nworst gap {worst:.2f} (bins >= {min_n})"
        ax.set_title(label, fontsize=8)
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.13, 1.02)
        ax.set_xlabel("forecast probability", fontsize=7)
        ax.set_ylabel("observed frequency", fontsize=7)
        ax.tick_params(labelsize=7)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    # wrapped to the figure's width (about 12 characters per inch at 9 pt): a long title is never cut off
    fig.suptitle(textwrap.fill(title, width=max(30, int(12 * fig.get_figwidth()))), fontsize=9)
    return fig


def operating_figure(curves: pd.DataFrame, *, points: pd.DataFrame, oracle: pd.DataFrame, title: str, risk: float):
    """Operating curves: steps saved against the bad-stop rate (left) and against the mean reward lost
    (right), per run (top) and source-weighted (bottom).

    ``curves`` -- :func:`~bench.stop_rule.operating_curve` rows (the threshold swept) per
    method; ``points`` -- the leave-one-source-out operating point of each method at ``risk`` (columns
    ``method, weighting, steps_saved, bad_stops, reward_lost``; bayesgrpo's is the shipped point, a star);
    ``oracle`` -- the oracle's summary per weighting.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 8), layout="constrained")
    axes = fig.subplots(2, 2)
    methods = sorted(curves["method"].unique(), key=lambda m: (not m.startswith("bayesgrpo"), m))
    colors = {m: _color(m, k) for k, m in enumerate(methods)}
    for i, w in enumerate(("per run", "source-weighted")):
        for j, x in enumerate(("bad_stops", "reward_lost")):
            ax = axes[i, j]
            for m in methods:
                c = curves[(curves["method"] == m) & (curves["weighting"] == w)].sort_values("threshold")
                c = c[c["stopped"] > 0]
                lw = 2.0 if m.startswith("bayesgrpo") else 1.0
                ax.plot(c[x], c["steps_saved"], color=colors[m], lw=lw, label=m)
                pt = points[(points["method"] == m) & (points["weighting"] == w)]
                if len(pt):
                    star = m == "bayesgrpo"
                    ax.scatter(pt[x], pt["steps_saved"], marker="*" if star else "o", s=160 if star else 30,
                               color=colors[m], edgecolor="black", zorder=4, lw=0.6)  # fmt: skip
            o = oracle[oracle["weighting"] == w]
            ax.scatter(o[x], o["steps_saved"], marker="D", color="black", s=40, zorder=5, label=ORACLE)
            if x == "bad_stops":
                ax.axvline(risk, color="0.5", ls="--", lw=0.8)
                ax.set_xlabel("share of stops that are bad (lose > delta_bad of the range)", fontsize=8)
            else:
                ax.set_xlabel("mean reward lost per run (share of the run's range)", fontsize=8)
            ax.set_ylabel("mean share of steps saved", fontsize=8)
            ax.set_title(w, fontsize=9)
            ax.set_xlim(left=0)
            ax.set_ylim(bottom=0)
            ax.tick_params(labelsize=7)
    axes[0, 0].legend(fontsize=7, loc="upper left")
    fig.suptitle(title, fontsize=10)
    return fig
