"""Forest plot of a comparison's posterior contrasts: one panel per quantity (each has its own units)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesgrpo.conventions import CI_PROB, interval_label

__all__ = ["forest_plot"]

_COLORS = {"plateau": "C0", "log_tau": "C1", "log_stiffness": "C4", "log_noise_temp": "C2", "alpha": "C3",
           "g_exponent_b": "C5"}  # fmt: skip
_UNITS = {
    "plateau": "plateau difference (normalised reward)",
    "log_tau": "log timescale ratio",
    "log_stiffness": "log stiffness ratio",
    "log_noise_temp": "log noise-temperature ratio",
    "alpha": "curvature-scaling exponent alpha",
    "g_exponent_b": "noise-temperature G exponent b",
}


def _label(r) -> str:
    lb = f" vs {r.level_b}" if isinstance(r.level_b, str) and r.level_b else ""
    return f"[{r.factor}] {r.level_a}{lb}"


def forest_plot(result, *, quantities=None, ax=None):
    """Posterior mean and central interval of every contrast, one panel per quantity.

    Parameters
    ----------
    result : bayesgrpo.compare.CompareResult
    quantities : list of str, optional
        Quantities to show (default: all in the contrast table).
    ax : ignored when several quantities are shown (kept for a single-quantity panel)

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.figure import Figure

    df = result.contrasts
    if quantities is not None:
        df = df.loc[df["quantity"].isin(quantities)]
    qs = list(dict.fromkeys(df["quantity"]))
    heights = [max(1, int((df["quantity"] == q).sum())) for q in qs]
    if ax is not None and len(qs) == 1:
        fig, axes = ax.figure, [ax]
    else:
        fig = Figure(figsize=(9.5, 0.34 * sum(heights) + 0.9 * len(qs) + 0.8), layout="constrained")
        axes = np.atleast_1d(fig.subplots(len(qs), 1, gridspec_kw={"height_ratios": heights} if qs else None))
    for axq, q in zip(axes, qs, strict=True):
        sub = df.loc[df["quantity"] == q].reset_index(drop=True)
        yy = np.arange(len(sub))[::-1]
        c = _COLORS.get(q, "k")
        for i, r in sub.iterrows():
            axq.plot([r["ci_low"], r["ci_high"]], [yy[i]] * 2, color=c, lw=2.2, solid_capstyle="butt")
            axq.plot(r["mean"], yy[i], "o", color=c, ms=5)
            if pd.notna(r["predicted"]):
                axq.plot(r["predicted"], yy[i], "|", color="k", ms=14, mew=1.6)
        axq.set_yticks(yy, [_label(r) for r in sub.itertuples()], fontsize=8)
        axq.set_ylim(-0.7, len(sub) - 0.3)
        axq.axvline(0.0, color="0.6", lw=0.8, ls="--")
        axq.set_xlabel(_UNITS.get(q, q), fontsize=8.5)
        axq.grid(alpha=0.25, axis="x")
        axq.tick_params(axis="x", labelsize=8)
    fig.suptitle(
        f"compare ({result.primary} model, by {', '.join(result.by)}): posterior mean and "
        f"{interval_label(CI_PROB)} interval; | = physics prediction",
        fontsize=9.5,
    )
    return fig
