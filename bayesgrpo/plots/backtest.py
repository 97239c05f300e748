"""Backtest figures: calibration (PIT histograms + coverage), error / CRPS vs cutoff, example fan charts.

Every function builds ``matplotlib.figure.Figure`` objects (no pyplot state, no backend switch).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.conventions import CI_PROB, DEFAULT_FINAL_WINDOW, HEADLINE, QUANTILES, interval_bounds, interval_label
from bayesgrpo.conventions import INTERVALS as LEVELS
from bayesgrpo.evaluation.backtest import example_path, load_example
from bayesgrpo.evaluation.methods import BAYES, BAYES_CTX
from bayesgrpo.evaluation.metrics import final_reward
from bayesgrpo.io.output import save_figure
from bayesgrpo.schema import REWARD, STEP, RunSet

__all__ = ["plot_all", "plot_examples"]


def _colors(methods):
    base = {BAYES: "#1f6fb4", BAYES_CTX: "#0b3d6b"}
    # tab10 without its blue (reserved for bayesgrpo)
    cyc = ["#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
    out, k = {}, 0
    for m in methods:
        if m in base:
            out[m] = base[m]
        else:
            out[m] = cyc[k % len(cyc)]
            k += 1
    return out


def _ordered_methods(cases):
    ms = list(dict.fromkeys(cases["method"]))
    return sorted(ms, key=lambda m: ({BAYES: 0, BAYES_CTX: 1}.get(m, 2), m))


def plot_all(cases: pd.DataFrame, out: Path, *, runs=None, example_runs=None, prefix: str = "") -> list[Path]:
    """Calibration (PIT + coverage), error vs cutoff, CRPS vs cutoff, example fan charts."""
    from matplotlib.figure import Figure

    figs: list = []
    ok = cases[cases["ok"].astype(bool)]
    if ok.empty:
        return figs
    methods = _ordered_methods(ok)
    col = _colors(methods)
    cutoffs = sorted(ok["cutoff"].unique())

    # calibration: PIT histograms (pooled over cutoffs) + coverage vs nominal
    n = len(methods)
    ncol = min(4, n)
    nrow = math.ceil(n / ncol)
    fig = Figure(figsize=(3.2 * ncol + 4.2, 2.6 * nrow + 0.6), layout="constrained")
    gs = fig.add_gridspec(nrow, ncol + 1, width_ratios=[1] * ncol + [1.35])
    bins = np.linspace(0, 1, 11)
    for i, m in enumerate(methods):
        ax = fig.add_subplot(gs[i // ncol, i % ncol])
        p = ok.loc[ok["method"] == m, "pit"].dropna()
        ax.hist(p, bins=bins.tolist(), color=col[m], alpha=0.85, density=True)
        ax.axhline(1, color="k", lw=0.8, ls="--")
        ax.set_title(f"{m} (n={len(p)})", fontsize=9)
        ax.set_xlim(0, 1)
        ax.set_xlabel("PIT", fontsize=8)
        ax.tick_params(labelsize=7)
    ax = fig.add_subplot(gs[:, ncol])
    nom = np.array(LEVELS)
    ax.plot([0.4, 1], [0.4, 1], color="k", lw=0.8, ls="--", label="ideal")
    for m in methods:
        g = ok[ok["method"] == m]
        cov = [g[f"cover{round(lv * 100)}"].mean() for lv in LEVELS]
        ax.plot(nom, cov, "o-", color=col[m], label=m, lw=2 if m.startswith(BAYES) else 1.2)
    ax.axhspan(0.75, 0.85, xmin=(0.8 - 0.4) / 0.6 - 0.02, xmax=(0.8 - 0.4) / 0.6 + 0.02, color="0.8")
    ax.set_xlim(0.4, 1)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("nominal central-interval mass")
    ax.set_ylabel("empirical coverage (all cutoffs)")
    ax.set_title("coverage vs nominal", fontsize=10)
    ax.legend(fontsize=7.5, loc="lower right")
    ax.grid(alpha=0.3)
    fig.suptitle("Calibration: PIT histograms (flat = calibrated; U = too narrow; hump = too wide)", fontsize=10)
    p = out / f"{prefix}calibration.png"
    figs.append(save_figure(fig, p))

    # error and CRPS vs cutoff
    for metric, fname, ylab, agg in (
        ("nae", "error_vs_cutoff.png", "median normalised |median - truth|", "median"),
        ("ncrps", "crps_vs_cutoff.png", "mean normalised CRPS", "mean"),
    ):
        fig = Figure(figsize=(7, 4.3), layout="constrained")
        ax = fig.subplots()
        for m in methods:
            g = ok[ok["method"] == m].groupby("cutoff")[metric].agg(agg)
            ax.plot(g.index, g.values, "o-", color=col[m], label=m, lw=2.4 if m.startswith(BAYES) else 1.3)
        ax.set_xticks(cutoffs)
        ax.set_xlabel("cutoff (observed fraction of the run)")
        ax.set_ylabel(ylab + " (÷ 5–95% reward range)")
        ax.set_yscale("log")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
        p = out / f"{prefix}{fname}"
        figs.append(save_figure(fig, p))

    # examples
    if runs is not None and example_runs:
        p = plot_examples(out, runs, example_runs, cutoffs, path=out / f"{prefix}examples.png", colors=col)
        if p is not None:
            figs.append(p)
    return figs


def plot_examples(out: Path, runs: RunSet, example_runs, cutoffs, *, path: Path, colors=None, cutoff=None):
    """Grid of example fan charts (bayesgrpo bands + peers' 80% final intervals + truth in grey)."""
    from matplotlib.figure import Figure

    ex_dir = out / "examples"
    c = cutoff if cutoff is not None else (0.3 if 0.3 in cutoffs else cutoffs[len(cutoffs) // 2])
    items = [(r, load_example(example_path(ex_dir, r, c))) for r in example_runs]
    items = [(r, d) for r, d in items if d]
    if not items:
        return None
    ncol = min(3, len(items))
    nrow = math.ceil(len(items) / ncol)
    fig = Figure(figsize=(5.4 * ncol, 3.6 * nrow), layout="constrained")
    axes = fig.subplots(nrow, ncol, squeeze=False)
    for ax in axes.ravel()[len(items) :]:
        ax.set_visible(False)
    for ax, (r, d) in zip(axes.ravel(), items, strict=False):  # spare axes stay empty
        df = runs.run(r)
        key = BAYES if "steps" in d.get(BAYES, {}) else (BAYES_CTX if "steps" in d.get(BAYES_CTX, {}) else None)
        last = d[key]["last_step"] if key else None
        if last is None:
            s0, H = df[STEP].iloc[0], df[STEP].iloc[-1]
            last = s0 + c * (H - s0)
        obs = df[df[STEP] <= last]
        later = df[df[STEP] > last]
        ax.plot(later[STEP], later[REWARD], ".", color="0.65", ms=2.5, label="logged later (truth)")
        ax.plot(obs[STEP], obs[REWARD], ".", color="black", ms=3, label="observed")
        H = int(df[STEP].iloc[-1])
        if key:
            b = d[key]
            st, q = np.array(b["steps"]), np.array(b["q"])
            lv = list(b.get("levels", QUANTILES))
            if st.size:
                for mass, alpha in ((CI_PROB, 0.18), (HEADLINE, 0.25)):
                    lo, hi = (lv.index(x) for x in interval_bounds(mass))
                    ax.fill_between(st, q[lo], q[hi], color="#1f6fb4", alpha=alpha, lw=0,
                                    label=f"bayesgrpo {interval_label(mass)}")  # fmt: skip
                ax.plot(st, b["latent_median"], color="#1f6fb4", lw=1.6, label="bayesgrpo median (latent)")
        truth = final_reward(df[STEP], df[REWARD], final_window=DEFAULT_FINAL_WINDOW)
        # final-reward intervals at the horizon, offset per method
        meths = [m for m in d if m in (BAYES, BAYES_CTX)] + sorted(m for m in d if m not in (BAYES, BAYES_CTX))
        span = H - df[STEP].iloc[0]
        for k, m in enumerate(meths):
            fq = d[m]["final_q"]  # at its "levels" (files written before they were stored: 5, 10, 50, 90, 95%)
            lv = list(d[m].get("levels", (0.05, 0.1, 0.5, 0.9, 0.95)))
            f_lo, f_hi = (fq[lv.index(x)] for x in interval_bounds(HEADLINE))
            f_med = fq[lv.index(0.5)]
            x = H + span * (0.03 + 0.025 * k)
            cc = (colors or {}).get(m, f"C{k}")
            ax.errorbar(
                [x],
                [f_med],
                yerr=[[f_med - f_lo], [f_hi - f_med]],
                fmt="o",
                ms=3.5,
                color=cc,
                capsize=2,
                lw=1.4,
                label=f"{m} final {interval_label(HEADLINE)}",
            )
        ax.axhline(truth, color="#c0392b", lw=1, ls="--", label="true final reward")
        ax.axvline(last, color="0.3", ls=":", lw=1)
        ax.set_xlim(df[STEP].iloc[0], H + span * (0.06 + 0.025 * len(meths)))
        ax.set_title(f"{r[:48]} @ {c:g}", fontsize=8.5, loc="left")
        ax.tick_params(labelsize=7.5)
        ax.grid(alpha=0.25)
    _h, _lab = axes.ravel()[0].get_legend_handles_labels()
    allh: dict = {}
    for ax in axes.ravel()[: len(items)]:
        for hh, ll in zip(*ax.get_legend_handles_labels(), strict=True):
            allh.setdefault(ll, hh)
    fig.legend(list(allh.values()), list(allh.keys()), loc="outside lower center", ncol=min(6, len(allh)), fontsize=7.5)
    fig.suptitle(
        f"Example backtests at cutoff {c:g}: bands = bayesgrpo predictive logged reward; bars right of the horizon = each method's 80% interval of the final reward",
        fontsize=9,
    )
    return save_figure(fig, path, dpi=105)
