"""Budget figure: expected reward with the recommended stop, and the probabilities behind it."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd

from bayesgrpo.conventions import CI_PROB, interval_bounds
from bayesgrpo.decisions.budget import StopRecommendation, budget_table
from bayesgrpo.forecast.paths import PathDraws

__all__ = ["plot_budget"]


def plot_budget(
    draws: PathDraws,
    table: pd.DataFrame | None = None,
    *,
    history: pd.DataFrame | None = None,
    truth: pd.DataFrame | None = None,
    title: str | None = None,
    **kwargs,
):
    """Two-panel figure: expected reward (90% band) vs step with the recommendation, and P(target).

    Parameters
    ----------
    draws : PathDraws
    table : DataFrame, optional
        Output of :func:`budget_table`; computed from ``kwargs`` when omitted.
    history : DataFrame, optional
        The observed run (columns ``step``, ``reward``) to draw before the forecast.
    truth : DataFrame, optional
        The run's later logged points (a backtest from ``--until-step``), drawn in light grey.
    **kwargs
        Passed to :func:`budget_table` when ``table`` is None.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.figure import Figure

    if table is None:
        table = budget_table(draws, **kwargs)
    rec: StopRecommendation = table.attrs.get("recommendation")
    has_p = "p_target" in table.columns
    fig = Figure(figsize=(9, 7), layout="constrained")
    axes = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [2.2, 1]})
    ax = axes[0]
    units = f" [{draws.units}]" if draws.units else ""
    if history is not None and len(history):
        ax.plot(history["step"], history["reward"], ".", ms=3, color="0.35", label="observed")
    if truth is not None and len(truth):
        later = truth.loc[truth["step"] > draws.last_step]
        ax.plot(later["step"], later["reward"], ".", ms=2.5, color="0.72", label="logged later (truth)")
    oq = np.quantile(draws.observed, interval_bounds(CI_PROB), axis=0)
    ax.fill_between(draws.steps, oq[0], oq[1], color="C0", alpha=0.12, lw=0, label="90% predictive (logged)")
    ax.fill_between(
        table["step"], table["reward_q05"], table["reward_q95"], color="C0", alpha=0.3, lw=0, label="90% latent reward"
    )
    ax.plot(table["step"], table["expected_reward"], color="C0", lw=2, label="E[latent reward]")
    if has_p:
        ax.axhline(table["target"].iloc[0], color="C3", ls=":", lw=1.2, label=f"target {table['target'].iloc[0]:.4g}")
    ax.axvline(draws.last_step, color="0.3", lw=1, ls="-")
    ax.annotate(
        "now",
        (draws.last_step, 1),
        xycoords=("data", "axes fraction"),
        xytext=(3, -12),
        textcoords="offset points",
        fontsize=9,
        color="0.3",
    )
    if rec is not None:
        _recommendation_marks(ax, rec, draws)
    ax.set_ylabel(f"reward{units}")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    if title is None:
        title = draws.run_id
        if rec is not None:
            title += (
                f"\nstop at step {rec.step} ({rec.rule}): E[reward] {rec.expected_reward:.3g}"
                f" (90% {rec.reward_q05:.3g}..{rec.reward_q95:.3g})"
            )
            if rec.steps_saved is not None:
                title += f"; saves {rec.steps_saved} of max_steps {rec.max_steps}"
    # long run ids and recommendations wrap instead of running off the figure
    ax.set_title("\n".join(textwrap.fill(line, 95) for line in title.split("\n")), fontsize=10)

    ax2 = axes[1]
    _probability_panel(ax2, table, has_p)
    if rec is not None:
        ax2.axvline(rec.step, color="C2", lw=2, ls="--")
    ax2.set_xlabel("optimizer step")
    ax2.grid(alpha=0.3)
    ax2.legend(loc="lower right", fontsize=8, framealpha=0.9)
    return fig


def _recommendation_marks(ax, rec: StopRecommendation, draws: PathDraws) -> None:
    """The recommended stop, paper B's 0.8-epoch step and max_steps on the reward panel."""
    ax.axvline(rec.step, color="C2", lw=2, ls="--", label=f"recommended stop: {rec.step}")
    ax.plot([rec.step], [rec.expected_reward], "o", color="C2", ms=7)
    if rec.rule80_step is not None and rec.rule80_status != "already passed":
        ax.axvline(rec.rule80_step, color="C1", lw=1.5, ls="-.", label=f"0.8 epoch (paper B): {rec.rule80_step}")
    if rec.max_steps is not None:
        ax.axvline(
            min(rec.max_steps, int(draws.steps[-1])),
            color="C4",
            lw=1.2,
            ls=":",
            label=f"max_steps {rec.max_steps}" + ("" if rec.max_steps_in_forecast else " (beyond)"),
        )


def _probability_panel(ax2, table: pd.DataFrame, has_p: bool) -> None:
    """P(target by step), P(optimal stop <= step) with a cost, else P(settled by step)."""
    if has_p:
        ax2.plot(table["step"], table["p_target"], color="C3", lw=2, label="P(reached target by step)")
        ax2.set_ylim(-0.03, 1.03)
        ax2.set_ylabel("probability")
    if "cost" in table.columns:
        # the last row also holds the draws whose optimum lies at or beyond the horizon (censored):
        # drawn as a number, not as a jump of the cumulative curve
        cum = np.cumsum(table["p_best"].to_numpy())
        ax2.plot(table["step"].iloc[:-1], cum[:-1], color="C2", lw=1.5, label="P(optimal stop <= step)")
        ax2.text(
            0.99,
            0.04,
            f"P(optimum at or after the horizon) = {table['p_best'].iloc[-1]:.2f}",
            transform=ax2.transAxes,
            ha="right",
            fontsize=8,
            color="C2",
        )
        ax2.set_ylim(-0.03, 1.03)
        ax2.set_ylabel("probability")
    if not has_p and "cost" not in table.columns and "p_settled" in table.columns:
        ax2.plot(table["step"], table["p_settled"], color="C0", lw=2, label="P(mean trajectory settled by step)")
        ax2.set_ylim(-0.03, 1.03)
        ax2.set_ylabel("probability")
