"""How the outlook's weights are chosen, and whether its changes should depend on the run's regime: measured on
the selection sources only (the locked test is not read here).

    nice .venv/bin/python -m bench.yardstick.outlook_variants     # writes bench/results/yardstick/outlook_variants.md

Every variant is scored *nested*: each selection source is forecast with the outlook fitted and its weights
chosen on the other selection sources alone (an inner leave-one-source-out for the weights), so that the
choice of the weights is as held out as the outlook itself -- the plain leave-one-source-out of
:mod:`bench.yardstick.study` chooses the weights on every source it then reports.

Variants (rules for the weight per cutoff, on the inner leave-one-source-out scores):

* ``cov>=0.80, w<=0.5`` -- the study's rule: the smallest weight of 0, 0.05, ..., 0.5 whose 80% coverage
  (source-weighted) reaches 0.80, else the best coverage;
* ``cov>=0.80, w<=0.9`` -- the same on a grid up to 0.9;
* ``min CRPS given cov>=0.80`` -- the lowest CRPS among the weights with coverage >= 0.80 (grid up to 0.9);
* ``... by regime`` -- the changes ``z`` fitted apart for runs at their floor (the shape prior's ``at_floor``)
  and the others, where each has cases of at least :data:`MIN_REGIME_SOURCES` sources at every cutoff.

Outcome: the rule stays (no variant moves 0.1); by regime is better at 0.2 here but lost on the locked test at
look 4 (``bench/results/yardstick/look4.md``), so it stays here (:func:`fit_regime_outlook`), out of the package.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.forecast.features import prefix_features
from bayesgrpo.forecast.outlook import Outlook
from bench.yardstick import cases as C
from bench.yardstick import data as D
from bench.yardstick import score, study

OUT = Path(study.OUT)
GRID_HI = tuple(np.round(np.arange(0.0, 0.91, 0.05), 2))
GRID_LO = tuple(w for w in GRID_HI if w <= 0.5)


MIN_REGIME_SOURCES = 5  # a regime's own changes need cases of this many sources at every cutoff


def at_floor_flags(split: str) -> dict[str, float]:
    """``case key -> at_floor`` of the prefix, as the forecaster computes it (the run's declared bounds, else
    those :func:`bayesgrpo.plan.reward_bounds` infers)."""
    rs = D.load(split=split)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for c in C.build(rs):
            m = rs.meta.loc[c.run_id]
            f = prefix_features(c.prefix, fraction=c.cutoff, reward_min=float(m.get("reward_min", np.nan)),
                                reward_max=float(m.get("reward_max", np.nan)))  # fmt: skip
            out[c.key] = f["at_floor"]
    return out


def fit_regime_outlook(cf: pd.DataFrame, weights: dict[float, float]) -> dict[float, Outlook]:
    """One outlook per regime, ``at_floor`` 1 or 0 at the cut (``cf["at_floor"]``), each falling back to all
    cases' where too few sources have it (:data:`MIN_REGIME_SOURCES` at every cutoff)."""
    pooled = study.fit_outlook(cf, weights)
    out = {}
    for flag in (0.0, 1.0):
        sub = cf[cf["at_floor"] == flag]
        n = sub.groupby("cutoff")["source"].nunique()
        ok = len(n) == cf["cutoff"].nunique() and (n >= MIN_REGIME_SOURCES).all()
        out[flag] = study.fit_outlook(sub, weights) if ok else pooled
    return out


def apply(draws: dict, train: pd.DataFrame, test: pd.DataFrame, weights: dict, regime: bool) -> dict:
    """The outlook fitted on ``train`` applied to ``test`` (per regime: each case with its regime's outlook)."""
    if not regime:
        return study.apply_outlook(study.fit_outlook(train, weights), draws, test)
    ols = fit_regime_outlook(train, weights)
    out = {}
    for flag, g in test.groupby("at_floor"):
        out.update(study.apply_outlook(ols[float(flag)], draws, g))
    return out


def loso_scores(draws: dict, cf: pd.DataFrame, grid, regime: bool) -> pd.DataFrame:
    """Per weight and cutoff, leave-one-source-out CRPS / coverage (source-weighted) on ``cf``."""
    rows = []
    for w in grid:
        ws = dict.fromkeys(cf["cutoff"].unique(), float(w))
        got = {}
        for s in cf["source"].unique():
            got.update(apply(draws, cf[cf["source"] != s], cf[cf["source"] == s], ws, regime))
        S = score.score({"x": got}, cf)
        for c, g in S.groupby("cutoff"):
            by = g.groupby("source")
            rows.append(dict(w=w, cutoff=c, crps=by["ncrps"].mean().mean(), cov80=by["cover80"].mean().mean()))
    return pd.DataFrame(rows)


def choose(T: pd.DataFrame, rule: str) -> dict[float, float]:
    out = {}
    for c, g in T.groupby("cutoff"):
        ok = g[g["cov80"] >= 0.80]
        if not len(ok):
            out[float(c)] = float(g.loc[g["cov80"].idxmax(), "w"])
        elif rule == "smallest":
            out[float(c)] = float(ok["w"].min())
        else:
            out[float(c)] = float(ok.loc[ok["crps"].idxmin(), "w"])
    return out


VARIANTS = {
    "cov>=0.80, w<=0.5 (the study's rule)": (GRID_LO, "smallest", False),
    "cov>=0.80, w<=0.9": (GRID_HI, "smallest", False),
    "min CRPS given cov>=0.80, w<=0.9": (GRID_HI, "crps", False),
    "cov>=0.80, w<=0.9, by regime": (GRID_HI, "smallest", True),
    "min CRPS given cov>=0.80, w<=0.9, by regime": (GRID_HI, "crps", True),
}


def nested(draws: dict, cf: pd.DataFrame, grid, rule: str, regime: bool) -> tuple[dict, dict]:
    """Each source forecast with weights chosen (inner LOSO) and the outlook fitted on the other sources."""
    out, chosen = {}, {}
    for s in sorted(cf["source"].unique()):
        train = cf[cf["source"] != s]
        w = choose(loso_scores(draws, train, grid, regime), rule)
        chosen[s] = w
        out.update(apply(draws, train, cf[cf["source"] == s], w, regime))
    return out, chosen


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None, help="run one variant (a substring of its name)")
    ap.add_argument("--report", action="store_true", help="only write the markdown from the saved csv/json")
    a = ap.parse_args(argv)
    if not a.report:
        compute(a.only)
    render()


def compute(only: str | None) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cf, M, E, peers = study.load("selection")
    cf["at_floor"] = cf["key"].map(at_floor_flags("selection")).fillna(0.0)
    base, _ = study.compose_auto(M, E, cf["key"], study.shape_config())
    methods = {"auto (no outlook)": base}
    picks = {}
    for name, (grid, rule, regime) in VARIANTS.items():
        if only and only not in name:
            continue
        methods[name], picks[name] = nested(base, cf, grid, rule, regime)
        print("done", name, flush=True)
    S = score.score({**methods, **{p: M[p] for p in peers}}, cf)
    T = score.summarize(S, list(methods), peers)
    info = dict(date=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"), sources=int(cf["source"].nunique()),
                cases=len(cf), floor_share={f"{c:g}": float(v) for c, v in cf.groupby("cutoff")["at_floor"].mean().items()})  # fmt: skip
    OUT.mkdir(parents=True, exist_ok=True)
    T.to_csv(OUT / "outlook_variants.csv", index=False)
    (OUT / "outlook_variants.json").write_text(json.dumps(dict(info=info, picks=picks), indent=1, default=float) + "\n")


def render() -> None:
    T = pd.read_csv(OUT / "outlook_variants.csv")
    J = json.loads((OUT / "outlook_variants.json").read_text())
    info, picks = J["info"], J["picks"]
    cuts = sorted(info["floor_share"], key=float)
    md = ["# The outlook's weights and regimes, nested leave-one-source-out on the selection sources", "",
          f"Generated by `nice .venv/bin/python -m bench.yardstick.outlook_variants` ({info['date']}; ~50 min; "
          "`--report` rewrites this file from the saved csv/json); "
          f"{info['sources']} selection sources, {info['cases']} cases; the locked test is not read. Each source "
          "is forecast with the outlook fitted *and its weights chosen* on the other sources (module docstring). "
          "Share of cases at their floor per cutoff: "
          + ", ".join(f"{c}: {info['floor_share'][c]:.2f}" for c in cuts) + ".", "",
          score.markdown(T), "", "## Weights chosen (median over the held-out sources; the range)", "",
          "| variant | " + " | ".join(cuts) + " |", "|---|" + "---|" * len(cuts)]  # fmt: skip
    for name, ch in picks.items():
        W = pd.DataFrame(ch).T
        W.columns = [f"{float(c):g}" for c in W.columns]
        md.append(
            f"| {name} | " + " | ".join(f"{W[c].median():g} ({W[c].min():g}-{W[c].max():g})" for c in cuts) + " |"
        )
    (OUT / "outlook_variants.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
