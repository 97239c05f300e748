"""Forecasting a run with its finished siblings: the outlook of the run's own source (issue 31 "with history",
issue 29 "a run whose siblings are known borrows from them"), measured on the selection sources.

    nice .venv/bin/python -m bench.yardstick.siblings     # writes bench/results/yardstick/siblings.md (+ json)

The default's outlook is the between-source distribution of the change ``z = (final - level) / scale`` from the
observed fraction ``f`` (:mod:`bayesgrpo.forecast.outlook`). When finished runs of the same source (a sweep) are
known, their own changes from ``f`` say more about this run than other labs' runs do. A hierarchical reading: a
source's changes scatter around a source mean; with ``n`` siblings the source's distribution is the mixture

    p(z | siblings) = k / (k + n) p_population(z) + n / (k + n) (1/n) sum_j N(z; z_j, h^2),

``h`` a kernel width (the siblings' scatter, at least ``h_min``), and the outlook's weight rises from ``w(f)`` to
``w_sib`` (the siblings speak for the run's future at least as much as the between-source changes do). ``k``,
``w_sib``, ``h_min`` are chosen here on the selection sources' multi-run sources, each run forecast with the other
runs of its source finished (leave-one-run-out) and the population fitted without the source; the kinds' draws
are the ledgers' (per-run fits). The locked test is not read.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.forecast.outlook import Outlook
from bench.yardstick import score, study

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "bench" / "results" / "yardstick"
KS = (1.0, 2.0, 4.0)
W_SIB = (None, 0.5, 0.7, 0.9)  # None: the default's w(f)
H_MIN = (0.05, 0.1, 0.2)
LEVELS = np.r_[0.0, (np.arange(study.LEVELS_Z) + 0.5) / study.LEVELS_Z, 1.0]


def sibling_quantiles(q_pop: np.ndarray, z_sib: np.ndarray, k: float, h_min: float, n: int = 4000) -> np.ndarray:
    """Quantiles (at :data:`LEVELS`) of the mixture of the module docstring, from ``n`` evenly spaced draws."""
    m = len(z_sib)
    a = k / (k + m)
    n_pop = int(round(a * n))
    u = (np.arange(n_pop) + 0.5) / max(n_pop, 1)
    pop = np.interp(u, np.linspace(0.0, 1.0, q_pop.size), q_pop)
    h = max(float(np.std(z_sib, ddof=1)) if m > 1 else 0.0, h_min)
    per = (n - n_pop) // m
    grid = np.sqrt(2.0) * h * _erfinv_grid(per)
    sib = (z_sib[:, None] + grid[None, :]).ravel()
    return np.quantile(np.r_[pop, sib], LEVELS)


def _erfinv_grid(n: int) -> np.ndarray:
    from scipy.special import erfinv

    return erfinv(2.0 * (np.arange(n) + 0.5) / n - 1.0)


def with_siblings(draws: dict, cf: pd.DataFrame, weights: dict, k: float, w_sib, h_min: float) -> dict:
    """Each case of a multi-run source with the outlook of its siblings (other runs, same source and cutoff)."""
    out = {}
    for s, g_src in cf.groupby("source"):
        pop = study.fit_outlook(cf[cf["source"] != s], weights)
        for r in g_src.itertuples():
            x = draws.get(r.key)
            sib = g_src[(g_src["cutoff"] == r.cutoff) & (g_src["run_id"] != r.run_id)]
            if x is None or sib.empty:
                continue
            w, q = pop.at(r.cutoff)
            qs = sibling_quantiles(q, sib["z"].to_numpy(float), k, h_min)
            ww = w if w_sib is None else max(w, w_sib)
            ol = Outlook(grid=(float(r.cutoff),), weight=(float(ww),), quantiles=(tuple(np.maximum.accumulate(qs)),))
            out.update(study.apply_outlook(ol, {r.key: x}, g_src.loc[[r.Index]]))
    return out


def main() -> None:
    cf, M, E, peers = study.load("selection")
    n_runs = cf.groupby("source")["run_id"].nunique()
    cf = cf[cf["source"].isin(n_runs.index[n_runs >= 2])].copy()
    auto, _ = study.compose_auto(M, E, cf["key"], study.shape_config())
    ol = json.loads((ROOT / "bayesgrpo" / "resources" / "outlook.json").read_text())
    weights = dict(zip(ol["grid"], ol["weight"], strict=True))
    meth = {"default (population outlook)": study.loso_outlook(auto, cf, weights), "auto (no outlook)": auto}
    for k, w_sib, h in itertools.product(KS, W_SIB, H_MIN):
        meth[f"siblings k={k:g} w={'w(f)' if w_sib is None else w_sib} h_min={h:g}"] = with_siblings(
            auto, cf, weights, k, w_sib, h
        )
    ours = list(meth)
    T = score.summarize(score.score({**meth, **{p: M[p] for p in peers}}, cf), ours, peers)
    base = T[T["method"] == ours[0]].set_index("cutoff")["crps_sw"]
    T["vs_default"] = T["crps_sw"] / T["cutoff"].map(base)
    cand = T[~T["method"].isin(ours[:2])]
    # the choice: the best mean ratio to the default over 0.1-0.3 with every cutoff's cov80 sw in 0.72-0.88
    ok = cand.groupby("method").filter(lambda g: g["cov80_sw"].between(0.72, 0.88).all())
    pick = (ok if len(ok) else cand).groupby("method")["vs_default"].mean().idxmin()
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    show = T[T["method"].isin([*ours[:2], pick])]
    top = cand.groupby("method")["vs_default"].mean().sort_values().head(8)
    md = [
        "# A run with its finished siblings: the outlook of its own source (selection sources)",
        "",
        f"Generated by `nice .venv/bin/python -m bench.yardstick.siblings` ({stamp}); see the module docstring. "
        f"{cf['source'].nunique()} multi-run selection sources, {len(cf)} cases; each run forecast with the other "
        "runs of its source finished; the population outlook fitted without the source. The locked test is not read.",
        "",
        f"Chosen (best mean nCRPS ratio to the default at all cutoffs, 80% coverage sw within 0.72-0.88): **{pick}**",
        "",
        score.markdown(show),
        "",
        "nCRPS sw / the default's, per cutoff:",
        "",
        "| method | " + " | ".join(f"{c:g}" for c in sorted(T["cutoff"].unique())) + " |",
        "|---|" + "---|" * T["cutoff"].nunique(),
    ]
    for m, g in show.groupby("method", sort=False):
        md.append(f"| {m} | " + " | ".join(f"{v:.2f}" for v in g.sort_values("cutoff")["vs_default"]) + " |")
    md += ["", "The eight best variants (mean ratio to the default over the cutoffs): "
           + "; ".join(f"{m}: {v:.3f}" for m, v in top.items()) + ".", "",
           "Reading: the siblings' own changes buy 2-3% of CRPS at 0.1-0.3 (coverage 0.78-0.81), far from the 15% "
           "of issue 31's target; a larger outlook weight when siblings exist is worse. Runs of one sweep scatter in "
           "units of their scale about as much as runs of different labs do. Not shipped."]  # fmt: skip
    (OUT / "siblings.md").write_text("\n".join(md) + "\n")
    T.to_csv(OUT / "siblings_scores.csv", index=False)
    (OUT / "siblings.json").write_text(json.dumps(dict(chosen=pick), indent=1) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
