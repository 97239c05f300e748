"""Diagnosis figure: reward with the onset of each failure mode, plus one panel per logged metric."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesgrpo.diagnose.common import MODES, _is_unit, _present, _rolling_median, _window, degenerate_share
from bayesgrpo.diagnose.failure_modes import _ceiling_for, diagnose_run

__all__ = ["plot_diagnosis"]

_SEV_COLOR = {"watch": "#d4a017", "warning": "#e66100", "critical": "#c00000"}
_PANELS = ("reward_std", "frac_reward_zero_std", "entropy", "kl", "completion_length")


def plot_diagnosis(runs, run_id: str, diagnosis: pd.DataFrame | None = None, *, ceiling=None, posteriors=None):
    """Per-run figure: reward (rolling median, onset markers per mode) plus one panel per logged metric.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.figure import Figure

    df = runs.run(run_id) if hasattr(runs, "run") else runs
    if diagnosis is None:
        g = runs.meta.loc[run_id, "group_size"] if "group_size" in runs.meta.columns else None
        diagnosis = pd.DataFrame(
            [
                f.to_row()
                for f in diagnose_run(
                    df,
                    run_id=run_id,
                    group_size=g,
                    draws=(posteriors or {}).get(run_id),
                    ceiling=_ceiling_for(ceiling, runs.meta, run_id),
                )
            ]
        )
    diag = diagnosis[diagnosis["run_id"] == run_id]
    panels = [c for c in _PANELS if _present(df, c)]
    panels += [c for c in df.columns if c.startswith("eval/") and df[c].notna().sum() >= 3]
    nrow = 1 + len(panels)
    fig = Figure(figsize=(9, 2.6 + 1.6 * len(panels)), layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrow, 1, sharex=True, gridspec_kw={"height_ratios": [2.2] + [1] * len(panels)}))
    step, y = df["step"].to_numpy(), df["reward"].to_numpy(float)
    ax = axes[0]
    ax.plot(step, y, ".", ms=3, color="0.55", label="reward")
    ax.plot(step, _rolling_median(y, _window(y.size)), color="C0", lw=1.8, label="rolling median")
    for _, r in diag.iterrows():
        sev = str(r["severity"])
        if sev == "none" or pd.isna(r["onset_step"]):
            continue
        ax.axvline(
            int(r["onset_step"]),
            color=_SEV_COLOR[sev],
            ls=["--", "-.", ":", "-"][MODES.index(r["mode"])],
            lw=1.6,
            label=f"{r['mode']} ({sev}) @ {int(r['onset_step'])}",
        )
    top = _ceiling_for(ceiling, getattr(runs, "meta", None), run_id)
    if top is not None and np.isfinite(top):
        ax.axhline(float(top), color="0.25", ls="--", lw=1.1, label=f"verifiable ceiling {float(top):g}")
    ax.set_ylabel("reward")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7.5, loc="best", framealpha=0.9)
    lines = [f"{m}: {s}" for m, s in zip(diag["mode"], diag["severity"].astype(str), strict=True)]
    ax.set_title(f"{run_id}\n" + " | ".join(lines), fontsize=8.5)
    g = runs.meta.loc[run_id, "group_size"] if hasattr(runs, "meta") and "group_size" in runs.meta.columns else None
    for ax, col in zip(axes[1:], panels, strict=True):
        sub = df[["step", col]].dropna()
        ax.plot(sub["step"], sub[col], ".-" if col.startswith("eval/") else "-", lw=1, ms=3, color="C1")
        if col == "frac_reward_zero_std" and g is not None and pd.notna(g) and _is_unit(y, ceiling):
            ax.plot(
                step,
                degenerate_share(_rolling_median(y, _window(y.size)), g),
                color="k",
                lw=1,
                ls="--",
                label=f"p^G+(1-p)^G, G={int(g)}",
            )
            ax.legend(fontsize=7.5)
        ax.set_ylabel(col.replace("frac_reward_zero_std", "zero-std share"), fontsize=8)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("optimizer step")
    return fig
