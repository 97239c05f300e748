"""The figures of a comparison: :func:`levels_plot`, the answer per factor level (what ``bayesgrpo compare`` draws),
and :func:`forest_plot`, every posterior contrast, one panel per quantity (each has its own units)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesgrpo.conventions import CI_PROB, HEADLINE, interval_label

__all__ = ["forest_plot", "levels_plot"]

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


_LEVEL_PANELS = (("plateau", "plateau (comparison's reward units)", False),
                 ("timescale", "timescale tau (steps, log scale)", True),
                 ("noise", "process noise sigma_p (log scale)", True))  # fmt: skip


def levels_plot(result):
    """The answer per factor level (:meth:`~bayesgrpo.compare.CompareResult.levels`): plateau, timescale and noise
    of each level -- posterior median and headline (80%) interval of the mean over its runs -- one row per level, the levels of
    each factor together, P(best) of the plateau in the row's label; the G exponent b and, fitted, alpha in the
    title. One row per level, not per pair: it stays readable with many levels (the pairwise contrasts are
    :func:`forest_plot` and the ``--out`` table)."""
    from matplotlib.figure import Figure

    lv = result.levels()
    if lv.empty:
        raise ValueError("no factor has two levels with runs: nothing to compare (see CompareResult.caveats())")
    n = len(lv)
    fig = Figure(figsize=(11.0, 0.32 * n + 1.6), layout="constrained")
    axes = fig.subplots(1, 3, sharey=True)
    yy = np.arange(n)[::-1].astype(float)
    factors = list(dict.fromkeys(lv["factor"]))
    colors = {f: f"C{i % 10}" for i, f in enumerate(factors)}
    for ax, (q, label, logx) in zip(axes, _LEVEL_PANELS, strict=True):
        for y, r in zip(yy, lv.itertuples(), strict=True):
            c = colors[r.factor]
            ax.plot([getattr(r, f"{q}_lo"), getattr(r, f"{q}_hi")], [y, y], color=c, lw=2.2, solid_capstyle="butt")
            ax.plot(getattr(r, q), y, "o", color=c, ms=5)
        if logx:
            ax.set_xscale("log")
        ax.set_xlabel(label, fontsize=8.5)
        ax.grid(alpha=0.25, axis="x")
        ax.tick_params(axis="x", labelsize=8)
        for y in yy[np.flatnonzero(lv["factor"].to_numpy()[1:] != lv["factor"].to_numpy()[:-1]) + 1] + 0.5:
            ax.axhline(y, color="0.7", lw=0.8)  # a line between the factors
    labels = [f"{r.factor} = {_short(r.level)}  ({r.runs} run{'s' * (r.runs != 1)}"
              + ("" if pd.isna(r.p_best) else f", P(best) {r.p_best:.2f}") + ")" for r in lv.itertuples()]  # fmt: skip
    axes[0].set_yticks(yy, labels, fontsize=8)
    axes[0].set_ylim(-0.7, n - 0.3)
    fig.suptitle(f"compare ({result.primary} model, by {', '.join(result.by)}): per level, posterior median and "
                 f"{interval_label(HEADLINE)} interval of the mean over its runs" + _physics_line(result), fontsize=9.5)  # fmt: skip
    return fig


def _short(level, width: int = 40) -> str:
    s = str(level)
    return s if len(s) <= width else s[: width - 1] + "…"


def _physics_line(result) -> str:
    """The G exponent b (and alpha, when fitted) of the contrast table, for a title."""
    c = result.contrasts
    out = []
    for q, name, pred in (("g_exponent_b", "b", " (physics: 1)"), ("alpha", "alpha", "")):
        r = c.loc[c["quantity"] == q]
        if len(r):
            r = r.iloc[0]
            out.append(
                f"{name} = {r['mean']:.2f} ({interval_label(CI_PROB)}: {r['ci_low']:.2f} to {r['ci_high']:.2f}){pred}"
            )
    return ("\nnoise temperature ~ G^-b, timescale ~ size^alpha: " + "; ".join(out)) if out else ""
