"""The choices of the default forecaster, made on the selection sources only (leave-one-source-out), and
the package data they ship.

    nice .venv/bin/python -m bench.yardstick.study            # writes bench/results/yardstick/study.md (+ json)
    nice .venv/bin/python -m bench.yardstick.study --ship     # ... and the package data below

What is chosen, in order (each on the selection sources' cases, the locked test never read):

1. **The kinds' mixture** (kind ``auto``, :mod:`bayesgrpo.forecast.shape`): which kinds, the prior over kinds,
   ``min_weight`` -- composed from the kinds' ledgers with the package's own :func:`kind_weights` and
   :func:`draw_counts`, weighed by the kinds' block evidence (``run_kinds --stage evidence``).
2. **The outlook** (:mod:`bayesgrpo.forecast.outlook`): the source-weighted quantiles of the change
   ``z = (truth - level) / scale`` per cutoff, and per cutoff the smallest weight (0 to 0.9) whose
   leave-one-source-out 80% coverage (source-weighted) reaches 0.80 (the rule measured nested, and the changes
   of runs at their floor fitted apart, which lost at look 4: ``outlook_variants.py``).
3. **A conformal stretch** on top (:class:`bench.yardstick.layers.SideStretch`, each side per level, every
   source the same): measured; it ships only if it improves on 2 (it does not: see the results).
4. **The stop advice**: ``stop`` when ``P(final >= level + 0.05 scale) < threshold`` from ``min_fraction`` on;
   the threshold the largest whose leave-one-source-out bad-stop share (source-weighted) stays within the risk.

``--ship`` writes ``bayesgrpo/resources/shape.json``, ``outlook.json``, ``decision_auto.json`` (thresholds;
its printed error rate is filled in by :mod:`bench.yardstick.final` from the locked test) and the population
priors fitted on the selection sources (``population_prior.json``, ``population_prior_degeneracy.json``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.forecast.outlook import Outlook, outlook_draws
from bayesgrpo.forecast.shape import ShapeConfig, ShapePrior, draw_counts, kind_weights
from bayesgrpo.series import current_level
from bench.yardstick import compose, layers, score, store
from bench.yardstick import data as D

ROOT = Path(__file__).resolve().parents[2]
RES = ROOT / "bayesgrpo" / "resources"
OUT = ROOT / "bench" / "results" / "yardstick"
KINDS = ("oscillator", "stationary", "degeneracy")
LEVELS_Z = 41  # quantiles of z kept per cutoff
W_GRID = tuple(np.round(np.arange(0.0, 0.91, 0.05), 2))
DELTA, DELTA_BAD, RISK = 0.05, 0.1, 0.15
RISKS = (0.1, 0.15, 0.2, 0.25, 0.3)
THR_GRID = tuple(np.round(np.arange(0.0, 0.51, 0.01), 2))
PEERS = ("peer:last_value", "peer:exponential", "peer:scalerl", "peer:pow3", "bic_ensemble")


# ------------------------------------------------------------------------------------------------ cases
def load(split: str):
    """Cases of ``split`` with the package's level and the forecast's scale; methods; the kinds' evidence."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cf, cs, M, _ = compose.load(split, kinds=KINDS)
    lev = {c.key: current_level(c.rewards) for c in cs}
    _, fo = store.read("oscillator")
    sc = fo.set_index("key")["scale"]
    cf = cf[cf["key"].isin(sc.index)].copy()
    cf["level_pkg"] = cf["key"].map(lev)
    cf["scale"] = cf["key"].map(sc)
    cf["z"] = (cf["truth"] - cf["level_pkg"]) / cf["scale"]
    ev = {}
    for k in KINDS:
        _, f = store.read(f"{k}_evidence")
        ev[k] = f.set_index("key")["evidence_raw"]
    E = pd.DataFrame(ev)
    peers = [*PEERS, *[k for k in M if k.startswith("fam:")]]
    return cf, M, E, peers


def compose_auto(M: dict, E: pd.DataFrame, keys, shape: ShapeConfig, n: int = store.N_DRAWS):
    """Each case's draws as kind ``auto`` mixes them: the package's weights, its draw counts, evenly spaced."""
    out, W = {}, {}
    for key in keys:
        ev = {k: float(E.at[key, k]) for k in shape.kinds if key in E.index and np.isfinite(E.at[key, k])}
        allowed = [k for k in shape.kinds if k in ev and key in M.get(k, {})]
        if not allowed:
            continue
        w = kind_weights({}, ev, shape, allowed=allowed)
        parts = []
        for k, c in draw_counts(w, n).items():
            x = M[k][key]
            parts.append(x[np.round(np.linspace(0, len(x) - 1, c)).astype(int)])
        out[key], W[key] = np.concatenate(parts), w
    return out, W


def shape_config(prior=(1.0, 1.0, 1.0), min_weight: float = 0.1) -> ShapeConfig:
    return ShapeConfig(kinds=KINDS, prior=ShapePrior(at_floor=prior, elsewhere=prior), min_weight=min_weight)


# ------------------------------------------------------------------------------------------------ outlook
def fit_outlook(cf: pd.DataFrame, weights: dict[float, float]) -> Outlook:
    """The outlook from the cases ``cf`` (source-weighted quantiles of z per cutoff) with ``weights``."""
    grid, Q, Wt = [], [], []
    lv = (np.arange(LEVELS_Z) + 0.5) / LEVELS_Z
    lv = np.r_[0.0, lv, 1.0]
    for c, g in cf.groupby("cutoff"):
        w = layers.source_weights(g["source"])
        z = g["z"].to_numpy()
        q = [float(z.min())] + [layers.weighted_quantile(z, w, v) for v in lv[1:-1]] + [float(z.max())]
        grid.append(float(c))
        Q.append(tuple(float(x) for x in np.maximum.accumulate(q)))
        Wt.append(float(weights.get(float(c), 0.0)))
    return Outlook(grid=tuple(grid), weight=tuple(Wt), quantiles=tuple(Q))


def apply_outlook(ol: Outlook, draws: dict, cf: pd.DataFrame) -> dict:
    out = {}
    for r in cf.itertuples():
        x = draws.get(r.key)
        if x is None:
            continue
        idx, end = outlook_draws(ol, x.size, fraction=r.cutoff, level=r.level_pkg, scale=r.scale,
                                 run_id=r.key.split("|")[0])  # fmt: skip
        x = x.copy()
        x[idx] = end
        out[r.key] = x
    return out


def loso_outlook(draws: dict, cf: pd.DataFrame, weights: dict[float, float]) -> dict:
    out = {}
    for s in sorted(cf["source"].unique()):
        ol = fit_outlook(cf[cf["source"] != s], weights)
        out.update(apply_outlook(ol, draws, cf[cf["source"] == s]))
    return out


def choose_weights(draws: dict, cf: pd.DataFrame) -> tuple[dict[float, float], pd.DataFrame]:
    """Per cutoff the smallest weight of :data:`W_GRID` whose leave-one-source-out 80% coverage (source-
    weighted) reaches 0.80 (else the best coverage); the table of every weight's LOSO scores."""
    rows = []
    for w in W_GRID:
        got = loso_outlook(draws, cf, dict.fromkeys(cf["cutoff"].unique(), float(w)))
        S = score.score({"x": got}, cf)
        for c, g in S.groupby("cutoff"):
            rows.append(dict(w=w, cutoff=c, crps_sw=g.groupby("source")["ncrps"].mean().mean(),
                             cov80_sw=g.groupby("source")["cover80"].mean().mean(),
                             cov50_sw=g.groupby("source")["cover50"].mean().mean()))  # fmt: skip
    T = pd.DataFrame(rows)
    chosen = {}
    for c, g in T.groupby("cutoff"):
        ok = g[g["cov80_sw"] >= 0.80]
        chosen[float(c)] = float(ok["w"].min()) if len(ok) else float(g.loc[g["cov80_sw"].idxmax(), "w"])
    return chosen, T


# ------------------------------------------------------------------------------------------------ advice
def p_gain(x: np.ndarray, level: float, scale: float, delta: float = DELTA) -> float:
    return float(np.mean(x >= level + delta * scale))


def advice_cases(draws: dict, cf: pd.DataFrame) -> pd.DataFrame:
    """Per case: p_gain and whether stopping there is bad (the final reward ends more than 0.1 of the run's
    5-95% range above the level at the stop)."""
    rows = []
    for r in cf.itertuples():
        x = draws.get(r.key)
        if x is None:
            continue
        rows.append(dict(key=r.key, run=r.key.split("|")[0], source=r.source, cutoff=r.cutoff,
                         p_gain=p_gain(x, r.level_pkg, r.scale), bad=float(r.truth - r.level_pkg > DELTA_BAD * r.range)))  # fmt: skip
    return pd.DataFrame(rows)


def advice_outcome(A: pd.DataFrame, thr: float, min_fraction: float = 0.1) -> dict:
    """The advice read at every cutoff: bad-stop share over the stop answers (source-weighted: each source's
    share, then their mean over the sources that stop at all; per case beside), steps saved per run (first stop
    at cutoff c saves 1 - c), source-weighted."""
    A = A.assign(stop=(A["p_gain"] < thr) & (A["cutoff"] >= min_fraction))
    st = A[A["stop"]]
    bad_sw = float(st.groupby("source")["bad"].mean().mean()) if len(st) else float("nan")
    first = A[A["stop"]].groupby("run")["cutoff"].min()
    runs = A.groupby("run")["source"].first().to_frame()
    runs["saved"] = 1.0 - runs.index.map(first).astype(float)
    runs["saved"] = runs["saved"].fillna(0.0)
    return dict(thr=thr, stops=int(len(st)), bad_sw=bad_sw, bad_pc=float(st["bad"].mean()) if len(st) else float("nan"),
                saved_sw=float(runs.groupby("source")["saved"].mean().mean()),
                stop_sources=int(st["source"].nunique()))  # fmt: skip


def boot_advice(A: pd.DataFrame, thr: float, min_fraction: float = 0.1, B: int = 2000, seed: int = 0) -> dict:
    """90% source-bootstrap intervals of the bad-stop share and the steps saved."""
    rng = np.random.default_rng(seed)
    srcs = np.array(sorted(A["source"].unique()))
    bad, saved = [], []
    for _ in range(B):
        pick = rng.choice(srcs, size=srcs.size)
        parts = [A[A["source"] == s].assign(source=f"{s}#{i}", run=lambda d, i=i: d["run"] + f"#{i}")
                 for i, s in enumerate(pick)]  # fmt: skip
        o = advice_outcome(pd.concat(parts), thr, min_fraction)
        bad.append(o["bad_sw"])
        saved.append(o["saved_sw"])
    b = np.array(bad, float)
    return dict(bad_lo=float(np.nanquantile(b, 0.05)), bad_hi=float(np.nanquantile(b, 0.95)),
                saved_lo=float(np.quantile(saved, 0.05)), saved_hi=float(np.quantile(saved, 0.95)))  # fmt: skip


def choose_threshold(A: pd.DataFrame, risk: float = RISK) -> tuple[float, pd.DataFrame]:
    """The largest threshold whose leave-one-source-out bad-stop share stays within ``risk``: each source's
    advice at the threshold chosen on the others (in-sample choice on them), pooled."""
    T = pd.DataFrame([advice_outcome(A, t) for t in THR_GRID])

    def pick(sub: pd.DataFrame) -> float:
        tt = pd.DataFrame([advice_outcome(sub, t) for t in THR_GRID])
        ok = tt[(tt["bad_sw"].fillna(0.0) <= risk)]
        return float(ok["thr"].max()) if len(ok) else 0.0

    loso = []
    for s in sorted(A["source"].unique()):
        t = pick(A[A["source"] != s])
        loso.append(A[A["source"] == s].assign(thr=t))
    L = pd.concat(loso)
    L = L.assign(p_gain=np.where(L["p_gain"] < L["thr"], -1.0, 1.0))  # stop iff p_gain < its own threshold
    T.attrs["loso"] = advice_outcome(L, 0.0)
    T.attrs["table"] = [[r, *_row(T, r)] for r in RISKS]
    return pick(A), T


def _row(T: pd.DataFrame, risk: float) -> list:
    """``[threshold, bad stops, steps saved]`` of the largest threshold within ``risk`` (in sample), or ``[None]``."""
    ok = T[T["bad_sw"].fillna(0.0) <= risk]
    ok = ok[ok["stops"] > 0]
    if not len(ok):
        return [None]
    r = ok.loc[ok["thr"].idxmax()]
    return [float(r["thr"]), float(r["bad_sw"]), float(r["saved_sw"])]


# ------------------------------------------------------------------------------------------------ main
def _md_table(T: pd.DataFrame) -> str:
    return score.markdown(T)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ship", action="store_true")
    a = ap.parse_args(argv)
    cf, M, E, peers = load("selection")
    names, md = [], []
    # 1. the kinds' mixture
    variants = {"auto (osc+stat+deg, uniform, min 0.1)": shape_config(),
                "auto (min 0)": shape_config(min_weight=0.0),
                "auto (prior 0.8/0.1/0.1)": shape_config((0.8, 0.1, 0.1)),
                "auto (osc+deg, uniform)": ShapeConfig(kinds=("oscillator", "degeneracy"),
                                                      prior=ShapePrior(at_floor=(1, 1), elsewhere=(1, 1)), min_weight=0.1)}  # fmt: skip
    for n, sh in variants.items():
        M[n], _ = compose_auto(M, E, cf["key"], sh)
        names.append(n)
    base = "auto (osc+stat+deg, uniform, min 0.1)"
    # 2. the outlook on the chosen mixture
    weights, WT = choose_weights(M[base], cf)
    M["auto + outlook"] = loso_outlook(M[base], cf, weights)
    names.append("auto + outlook")
    # 3. a conformal stretch on top
    M["auto + outlook + conformal"] = layers.loso(layers.SideStretch, M["auto + outlook"], cf)
    names.append("auto + outlook + conformal")
    S = score.score({k: M[k] for k in ["oscillator", *names, *peers]}, cf)
    T = score.summarize(S, ["oscillator", *names], peers)
    # 4. advice on the shipped composition
    A = advice_cases(M["auto + outlook"], cf)
    thr, AT = choose_threshold(A)
    loso = AT.attrs["loso"]
    ins = advice_outcome(A, thr)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    md += [
        "# The default forecaster's choices, on the selection sources (leave-one-source-out)",
        "",
        f"Generated by `nice .venv/bin/python -m bench.yardstick.study{' --ship' if a.ship else ''}` ({stamp}). "
        f"Selection sources only ({cf['source'].nunique()} sources, {len(cf)} cases); the locked test is not read "
        "here. Split rule and data: `bench/yardstick/data.py`; scores: `bench/yardstick/score.py` (nCRPS = CRPS / "
        "the run's 5-95% range; ratios to the best peer per cutoff, 90% source-bootstrap intervals with the best "
        "peer chosen again in each replicate). Peers: " + ", ".join(peers) + ".",
        "",
        "## Forecasts",
        "",
        _md_table(T),
        "",
        "## The outlook's weight per cutoff (smallest with LOSO 80% coverage >= 0.80)",
        "",
        "| cutoff | " + " | ".join(f"w={w:g}" for w in W_GRID) + " | chosen |",
        "|---|" + "---|" * (len(W_GRID) + 1),
    ]
    for c, g in WT.groupby("cutoff"):
        cells = [f"{r.crps_sw:.3f} / {r.cov80_sw:.2f}" for r in g.sort_values("w").itertuples()]
        md.append(f"| {c:g} | " + " | ".join(cells) + f" | {weights[float(c)]:g} |")
    md += ["", "(cells: nCRPS sw / cov80 sw)", "",
           "## Stop advice (read at 0.1 / 0.2 / 0.3 / 0.5; bad stop: the final reward ends more than 0.1 of the "
           "run's range above the level at the stop)", "",
           f"Threshold chosen: stop when P(final >= level + {DELTA:g} scale) < **{thr:.2f}** (the largest with "
           f"source-weighted bad stops <= {RISK:g} on the selection sources).", "",
           "| reading | stops | bad stops sw (pc) | steps saved sw |", "|---|---|---|---|",
           f"| in sample, threshold {thr:.2f} | {ins['stops']} | {ins['bad_sw']:.3f} ({ins['bad_pc']:.3f}) | {ins['saved_sw']:.3f} |",
           f"| leave-one-source-out (each source at the threshold chosen on the others) | {loso['stops']} | "
           f"{loso['bad_sw']:.3f} ({loso['bad_pc']:.3f}) | {loso['saved_sw']:.3f} |", ""]  # fmt: skip
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "study.md").write_text("\n".join(md) + "\n")
    T.to_csv(OUT / "study_scores.csv", index=False)
    (OUT / "study.json").write_text(json.dumps(dict(weights=weights, threshold=thr, advice_in_sample=ins,
                                                    advice_loso=loso), indent=1, default=float) + "\n")  # fmt: skip
    print("\n".join(md))
    if a.ship:
        ship(cf, weights, thr, loso, stamp, AT.attrs["table"])


def ship(cf: pd.DataFrame, weights: dict, thr: float, loso: dict, stamp: str, table: list) -> None:
    prov = dict(command="nice .venv/bin/python -m bench.yardstick.study --ship", date=stamp,
                data=f"the yardstick's selection sources ({cf['source'].nunique()} sources, {len(cf)} cases; "
                     "bench/yardstick/data.py)", study="bench/results/yardstick/study.md")  # fmt: skip
    sh = shape_config()
    sh = sh.model_copy(
        update={"provenance": {**prov, "variant": "oscillator + stationary + degeneracy by block evidence"}}
    )
    sh.save(RES / "shape.json")
    ol = fit_outlook(cf, weights).model_copy(update={"provenance": {**prov, "weights": "per cutoff, the smallest "
                                                     "with leave-one-source-out 80% coverage >= 0.80"}})  # fmt: skip
    ol.save(RES / "outlook.json")
    # the study chose the mixture and the outlook, nothing else: an earlier study's post-hoc layers for kind auto
    # (bench/quality_study.py's interval layer and hazard) would otherwise stay active in the default
    for stale in ("intervals_auto.json", "hazard.json"):
        (RES / stale).unlink(missing_ok=True)
    decision = {
        "kind": "auto", "default_delta": DELTA,
        "deltas": {f"{DELTA:g}": {
            "calibration": {"method": "identity", "coef": [], "covariates": [], "bands": [], "knots_p": [],
                            "knots_y": [], "name": "identity", "provenance": {}},
            "policy": {"design": "p_gain", "delta": DELTA, "delta_bad": DELTA_BAD, "patience": 1, "min_fraction": 0.1,
                       "validated_fractions": [0.1, 0.5],
                       "thresholds": {"1": table}, "score": None},
            "measured": {"patience_1": {"risk": RISK, "bad_stops": loso["bad_sw"], "steps_saved": loso["saved_sw"],
                                        "where": "selection sources, leave-one-source-out (replaced by the locked "
                                                 "test's by bench.yardstick.final)"}},
        }},
        "provenance": prov,
    }  # fmt: skip
    (RES / "decision_auto.json").write_text(json.dumps(decision, indent=1, default=float) + "\n")
    ship_priors(prov)


def ship_priors(prov: dict) -> None:
    """The population priors fitted on the selection sources (+ the testbed), every source the same."""
    from bayesgrpo.models.kinds import default_prior
    from bayesgrpo.models.prior import fit_population
    from bench.yardstick.run_kinds import TABLE

    table = pd.read_csv(TABLE)
    for kind, fname in (("oscillator", "population_prior.json"), ("degeneracy", "population_prior_degeneracy.json")):
        rows = table[(table["kind"] == kind)
                     & table["source"].map(lambda s: s == "testbed" or D.split_of(s) == "selection")]  # fmt: skip
        base = default_prior(kind)
        p = fit_population(rows, name=f"population-{kind}-{prov['date']}", base=base,
                           provenance={**prov, "rows": "bench/results/yardstick/population_runs.csv",
                                       "sources": int(rows["source"].nunique()), "runs": int(rows["run_id"].nunique())})  # fmt: skip
        p.save(RES / fname)


if __name__ == "__main__":
    main()
