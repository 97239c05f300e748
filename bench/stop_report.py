"""The stop study's analysis (``bench/stop_study.py --stage report``): decision probabilities, their
leave-one-source-out recalibration, the stop policy's operating characteristic; writes
bench/results/stop_policy.md (+ .json, figures) and bayesgrpo/resources/decision_<kind>.json.

Every number is leave-one-source-out: a run of source S is judged with a recalibration map and
thresholds fitted on the other sources only (nested: the probabilities the thresholds are chosen on
were recalibrated without S as well).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import forecast_benchmark as FB  # noqa: E402
import stop_study as SS  # noqa: E402
from devdata import SELECTION_MORE, load_dev  # noqa: E402

from bayesgrpo.decisions.stop import StopPolicy  # noqa: E402
from bayesgrpo.evaluation.stop_rule import decision_cases, policy_backtest  # noqa: E402
from bayesgrpo.forecast.calibration import Calibration  # noqa: E402
from bench.fit_layers import case_weights, fit_decision_calibration  # noqa: E402
from bench.stop_rule import checkpoint_sequences, operating_curve, risk_index, sweep  # noqa: E402

DELTA, DELTA_BAD = 0.05, 0.1
FIG = SS.RES / "figures"


# ============================================================================ ledgers
def _ledger(folder: Path) -> tuple[pd.DataFrame, dict]:
    parts, draws = [], {}
    for p in sorted(folder.glob("*/cases.csv")):
        parts.append(pd.read_csv(p))
        z = p.parent / "draws.npz"
        if z.exists():
            with np.load(z) as f:
                draws.update({k: f[k].astype(float) for k in f.files})
    cases = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return cases, draws


def interval_layers(config: str) -> dict:
    """The forecast benchmark's LOSO interval layer per source (fitted on the other development sources);
    sources outside it (grpo-more) get the shipped layer, which never saw them."""
    kind = FB.CONFIGS[config]["kind"]
    p = FB.WORK / config / "loso_calibration.json"
    layers = {}
    if p.exists():
        js = json.loads(p.read_text())
        layers = {s: Calibration(**v) for s, v in js["layers"].items()}
    return {"__default__": Calibration.default(kind), **layers}


def load_cases(config: str, runs) -> tuple[pd.DataFrame, dict]:
    """Every method's cases and final-reward draws at the checkpoints: bayesgrpo with its LOSO interval
    layer applied (``bayesgrpo``, as it ships) and without (``bayesgrpo:raw``), and the peers."""
    b, bd = _ledger(SS.WORK / config)
    pc, pdraws = _ledger(SS.WORK / "peers")
    layers = interval_layers(config)
    draws = dict(pdraws)
    rows = []
    for r in b[b["ok"].astype(bool)].itertuples(index=False):
        key = f"{r.run_id}|{r.cutoff:g}|bayesgrpo"
        if key not in bd:
            continue
        x = bd[key]
        cal = layers.get(r.source, layers["__default__"])
        draws[f"{r.run_id}|{r.cutoff:g}|bayesgrpo:raw"] = x
        draws[key] = np.sort(cal.apply(x, fraction=r.cutoff, scale=r.scale))
        rows.append(r._asdict())
    bc = pd.DataFrame(rows)
    cases = pd.concat([bc, bc.assign(method="bayesgrpo:raw"), pc], ignore_index=True)
    return cases, draws


# ============================================================================ recalibration (LOSO)
#: designs of the probability a policy thresholds: (name, event it is calibrated to, calibration method,
#: extra covariates). ``p_gain`` designs are the table's column; ``p_bad`` designs calibrate the model's
#: probability straight to the outcome the risk is about (a bad stop).
DESIGNS = {
    "p_gain:identity": ("p_gain_raw", "event", "identity", ()),
    "p_gain:platt": ("p_gain_raw", "event", "platt", ()),
    "p_gain:beta": ("p_gain_raw", "event", "beta", ()),
    "p_gain:isotonic": ("p_gain_raw", "event", "isotonic", ()),
    # what else a single forecast knows: the level's noise, the recent trend, P(already plateaued)
    "p_gain:platt+cov": ("p_gain_raw", "event", "platt", ("level_se", "trend", "logit_plateaued")),
    # the model's probability calibrated straight to the outcome the risk is about: a bad stop
    "p_bad:platt": ("p_gain_raw", "bad", "platt", ()),
    "p_bad:platt+plateaued": ("p_gain_raw", "bad", "platt", ("logit_plateaued",)),
    "p_bad:platt+cov": ("p_gain_raw", "bad", "platt", ("level_se", "trend", "logit_plateaued")),
    # ImprovementStop's probability, P(final >= best so far), as it is (the callback's rule, measured)
    "p_improve:identity": ("p_improve_raw", "event", "identity", ()),
}


def _fit(tr: pd.DataFrame, design: str):
    col, event, method, cov = DESIGNS[design]
    return fit_decision_calibration(tr[col], tr[event], fraction=tr["fraction"], method=method,
                                    covariates={c: tr[c] for c in cov} or None, source=tr["source"])  # fmt: skip


def _apply(cal, te: pd.DataFrame, design: str) -> np.ndarray:
    col, _, _, cov = DESIGNS[design]
    return cal.apply(te[col].to_numpy(), fraction=te["fraction"].to_numpy(), **{c: te[c].to_numpy() for c in cov})


def loso_probs(g: pd.DataFrame, design: str, *, exclude=()) -> np.ndarray:
    """One method's cases, each source's probabilities from a map fitted on the other sources (minus
    ``exclude``). NaN where no map could be fitted."""
    out = np.full(len(g), np.nan)
    src = g["source"].to_numpy()
    for s in np.unique(src):
        if s in exclude:
            continue
        tr = g[(src != s) & ~np.isin(src, list(exclude))]
        if tr.empty:
            continue
        te = np.flatnonzero(src == s)
        out[te] = _apply(_fit(tr, design), g.iloc[te], design)
    return out


def loso_recalibrate(dec: pd.DataFrame, designs=None) -> None:
    """Adds a column per design: every case's probability from a map fitted without its source."""
    for d in designs or DESIGNS:
        col = np.full(len(dec), np.nan)
        for _, g in dec.groupby("method"):
            if any(g[c].isna().all() for c in DESIGNS[d][3]):
                continue  # a covariate this method has not got (P(plateaued) of the peers)
            col[g.index.to_numpy()] = loso_probs(g, d)
        dec[d] = col


# ============================================================================ the policy (nested LOSO)
RISKS = (0.05, 0.1, 0.15, 0.2, 0.3)
PATIENCES = (1, 2, 3)
MIN_FRACTIONS = (0.1, 0.2, 0.3)
THRESHOLDS = tuple(np.round(np.linspace(0.0, 1.0, 101), 3))
SHIPPED_RISK = 0.1


def choose_policy(d: pd.DataFrame, p: str, risk: float, *, patiences=PATIENCES, min_fractions=MIN_FRACTIONS,
                  cutoffs=None) -> dict | None:  # fmt: skip
    """The (patience, min_fraction, threshold) saving the most steps (mean of per run and source-weighted)
    among those whose stops were bad at most ``risk`` of the time on ``d`` (:func:`risk_index`)."""
    best = None
    seq = checkpoint_sequences(d, p, cutoffs)
    for pat in patiences:
        for mf in min_fractions:
            (r,) = sweep(seq, THRESHOLDS, patience=pat, min_fraction=mf, delta_bad=DELTA_BAD).values()
            i = risk_index(r, risk)
            if i is None:
                continue
            saved = 0.5 * float(r["steps_saved"][i] + r["steps_saved_w"][i])
            if best is None or saved > best["saved"] + 1e-12:
                best = dict(patience=pat, min_fraction=mf, threshold=float(r["threshold"][i]), saved=saved)
    return best


def loso_policy(g: pd.DataFrame, design: str, risk: float, **kw) -> tuple[pd.DataFrame, list]:
    """One method's stops with the policy chosen and recalibrated without each run's source (nested: the
    probabilities it is chosen on were recalibrated without that source too)."""
    src = g["source"].to_numpy()
    stops, chosen = [], []
    for s in np.unique(src):
        inner = g[src != s].copy()
        inner[design] = loso_probs(inner, design)
        pol = choose_policy(inner, design, risk, **kw)
        outer = g[src == s].copy()
        outer[design] = _apply(_fit(inner, design), outer, design)
        chosen.append({"source": s, **(pol or {})})
        if pol is None:  # no threshold met the risk on the other sources: never stop
            pol = dict(patience=1, min_fraction=0.0, threshold=0.0)
        policy = StopPolicy(threshold=pol["threshold"], patience=pol["patience"], min_fraction=pol["min_fraction"],
                            delta=DELTA, delta_bad=DELTA_BAD)  # fmt: skip
        stops.append(policy_backtest(outer, policy, p=design, oracle=False, cutoffs=kw.get("cutoffs")))
    return pd.concat(stops, ignore_index=True), chosen


def scores_table(dec: pd.DataFrame, cols: dict, *, y: str = "event", by=None) -> pd.DataFrame:
    """Brier and log scores per method x probability column (x ``by``), cases weighing half per case and
    half per source."""
    from bench.stop_rule import prob_scores

    rows = []
    groups = [((), dec)] if by is None else dec.groupby(by)
    for key, g in groups:
        for meth, gm in g.groupby("method"):
            w = case_weights(gm["source"])
            for label, col in cols.items():
                s = prob_scores(gm[col], gm[y], weights=w)
                rows.append({**({} if by is None else {by: key}), "method": meth, "probability": label, **s})
    return pd.DataFrame(rows)


# ============================================================================ report sections
def _pct(v) -> str:
    return "–" if v is None or not np.isfinite(v) else f"{v:.0%}"


def stops_summary(stops: pd.DataFrame) -> pd.DataFrame:
    """Per method and weighting: stopped, steps saved, bad stops, reward lost."""
    from bayesgrpo.evaluation.stop_rule import summarize_stops

    return pd.concat([summarize_stops(stops, weighted=w).assign(weighting="source-weighted" if w else "per run")
                      for w in (False, True)], ignore_index=True)  # fmt: skip


def stops_md(t: pd.DataFrame, label: str = "method") -> list[str]:
    out = [f"| {label} | runs | stopped (per run / source-w.) | steps saved | bad stops | reward lost |",
           "|---|---|---|---|---|---|"]  # fmt: skip
    for m in t[label].unique():
        a = t[(t[label] == m) & (t["weighting"] == "per run")].iloc[0]
        b = t[(t[label] == m) & (t["weighting"] == "source-weighted")].iloc[0]
        out.append(f"| {m} | {int(a.runs)} | {_pct(a.stopped)} / {_pct(b.stopped)} | {_pct(a.steps_saved)} / "
                   f"{_pct(b.steps_saved)} | {_pct(a.bad_stops)} / {_pct(b.bad_stops)} | {a.reward_lost:.3f} / "
                   f"{b.reward_lost:.3f} |")  # fmt: skip
    return out


def target_met(t: pd.DataFrame, method: str, *, saved: float, bad: float) -> tuple[bool, str]:
    g = t[t["method"] == method].set_index("weighting")
    ok = all(g.loc[w, "steps_saved"] >= saved and g.loc[w, "bad_stops"] <= bad for w in g.index)
    txt = "; ".join(f"{w}: {g.loc[w, 'steps_saved']:.1%} saved, {g.loc[w, 'bad_stops']:.1%} bad" for w in g.index)
    return ok, txt


def reliability_check(p, y, *, band: float = 0.07, min_n: int = 30) -> dict:
    from bench.stop_rule import reliability, reliability_worst_gap

    t = reliability(p, y)
    worst = reliability_worst_gap(p, y, min_n=min_n)
    return dict(bins=t.to_dict("records"), worst_gap=worst, met=bool(np.isfinite(worst) and worst <= band),
                populated=int((t["n"] >= min_n).sum()))  # fmt: skip


CUT4 = (0.1, 0.2, 0.3, 0.5)
PEER_NAMES = ("last_value", "exponential", "scalerl", "pow3", "domhan_fast")


def common_cases(dec: pd.DataFrame) -> pd.DataFrame:
    """The run x checkpoint cases every method forecast (scores compare like with like)."""
    n = dec.groupby(["run_id", "cutoff"])["method"].transform("nunique")
    return dec[n == dec["method"].nunique()].reset_index(drop=True)


def choose_calibration(dec: pd.DataFrame, method: str = "bayesgrpo") -> tuple[str, pd.DataFrame]:
    """The p_gain recalibration to ship: the lowest LOSO log score of ``method`` (cases weighing half per
    case, half per source); Brier breaks ties."""
    cand = [d for d in DESIGNS if DESIGNS[d][:2] == ("p_gain_raw", "event")]
    t = scores_table(dec[dec["method"] == method], {d: d for d in cand}).sort_values(["log", "brier"])
    return str(t.iloc[0]["probability"]), t


def prob_section(dec: pd.DataFrame, shipped: str) -> tuple[list[str], dict]:
    """Brier / log scores of p_gain (raw and recalibrated, LOSO) per method, overall, by checkpoint and by source."""
    cols = {"raw": "p_gain_raw", "recalibrated": shipped}
    overall = scores_table(dec, cols)
    by_c = scores_table(dec, {"recalibrated": shipped}, by="cutoff")
    by_s = scores_table(dec, {"recalibrated": shipped}, by="source")
    md = [
        "| method | Brier raw | Brier recalibrated | log raw | log recalibrated | cases |",
        "|---|---|---|---|---|---|",
    ]
    for m in sorted(overall["method"].unique(), key=lambda m: (not m.startswith("bayesgrpo"), m)):
        a = overall[(overall["method"] == m) & (overall["probability"] == "raw")].iloc[0]
        b = overall[(overall["method"] == m) & (overall["probability"] == "recalibrated")].iloc[0]
        md.append(f"| {m} | {a.brier:.3f} | {b.brier:.3f} | {a.log:.3f} | {b.log:.3f} | {int(a.n)} |")
    piv = by_c.pivot(index="cutoff", columns="method", values="brier")
    md += ["", "Brier score of the recalibrated p_gain by checkpoint (lowest per row in bold):", "",
           "| checkpoint | " + " | ".join(piv.columns) + " |", "|---|" + "---|" * len(piv.columns)]  # fmt: skip
    for c, r in piv.iterrows():
        md.append(f"| {c:g} | " + " | ".join(("**%.3f**" if v == r.min() else "%.3f") % v for v in r) + " |")
    piv = by_s.pivot(index="source", columns="method", values="brier")
    md += ["", "Brier score of the recalibrated p_gain by source (lowest per row in bold):", "",
           "| source | " + " | ".join(piv.columns) + " |", "|---|" + "---|" * len(piv.columns)]  # fmt: skip
    for c, r in piv.iterrows():
        md.append(f"| {c} | " + " | ".join(("**%.3f**" if v == r.min() else "%.3f") % v for v in r) + " |")
    js = dict(overall=overall.to_dict("records"), by_cutoff=by_c.to_dict("records"), by_source=by_s.to_dict("records"))
    return md, js


def reliability_section(dec: pd.DataFrame, draws: dict, shipped: str, config: str) -> tuple[list[str], dict, list]:
    """Reliability diagrams (figures) of p_gain, P(final >= target) and P(already plateaued), and the
    ±0.07 check of every populated p_gain bin."""
    from bench.plots_stop import reliability_figure
    from bench.stop_rule import threshold_cases

    FIG.mkdir(parents=True, exist_ok=True)
    js, figs, md = {}, [], []
    methods = sorted(dec["method"].unique(), key=lambda m: (not m.startswith("bayesgrpo"), m))
    panels = {f"{m} (raw)" if k == 0 else f"{m}": (dec.loc[dec.method == m, col], dec.loc[dec.method == m, "event"])
              for m in methods for k, col in ((0, "p_gain_raw"), (1, shipped)) if k == 1 or m == "bayesgrpo"}  # fmt: skip
    fig = reliability_figure(panels, title=f"p_gain = P(final >= level + {DELTA:g} x scale), leave-one-source-out "
                             f"recalibrated ({shipped}); raw = the model's own")  # fmt: skip
    figs.append(_save(fig, f"stop_reliability_p_gain_{config}.png"))
    md += [
        "| method | probability | populated bins (>= 30 cases) | worst gap | every bin within 0.07 |",
        "|---|---|---|---|---|",
    ]
    for m in methods:
        g = dec[dec["method"] == m]
        for label, col in (("raw", "p_gain_raw"), ("recalibrated", shipped)):
            r = reliability_check(g[col], g["event"])
            js[f"{m}|{label}"] = r
            md.append(f"| {m} | {label} | {r['populated']} | {r['worst_gap']:.3f} | {'yes' if r['met'] else 'no'} |")
    md += ["", *noise_floor_md(dec[dec["method"] == "bayesgrpo"], shipped, js)]
    # P(final >= target) at targets below and above the level, through the p_gain map (LOSO)
    th = threshold_cases(dec[dec["method"] == "bayesgrpo"], draws)
    cov = DESIGNS[shipped][3]
    th = th.merge(dec[["run_id", "cutoff", "method", *cov]], on=["run_id", "cutoff", "method"]) if cov else th
    th["p_cal"] = np.nan
    b = dec[dec["method"] == "bayesgrpo"]
    for s in th["source"].unique():
        cal = _fit(b[b["source"] != s], shipped)
        m = th["source"] == s
        th.loc[m, "p_cal"] = cal.apply(th.loc[m, "p_raw"].to_numpy(), fraction=th.loc[m, "fraction"].to_numpy(),
                                       **{c: th.loc[m, c].to_numpy() for c in cov})  # fmt: skip
    tp = {}
    for k, g in th.groupby("k"):
        tp[f"target level {k:+g} x scale (raw)"] = (g["p_raw"], g["event"])
        tp[f"target level {k:+g} x scale (p_gain map)"] = (g["p_cal"], g["event"])
    figs.append(_save(reliability_figure(tp, title="bayesgrpo: P(final >= target), targets relative to the current level"),
                      f"stop_reliability_target_{config}.png"))  # fmt: skip
    js["target"] = {f"{k:g}": {"raw": reliability_check(g["p_raw"], g["event"]),
                                "mapped": reliability_check(g["p_cal"], g["event"])} for k, g in th.groupby("k")}  # fmt: skip
    js["target_scores"] = {f"{k:g}": {"raw": _scores(g, "p_raw"), "mapped": _scores(g, "p_cal")}
                           for k, g in th.groupby("k")}  # fmt: skip
    # P(already plateaued): the model's own, and recalibrated LOSO (platt) to "no gain of delta x scale left"
    b = dec[dec["method"] == "bayesgrpo"].copy()
    b["p_plat_cal"] = np.nan
    for s in b["source"].unique():
        tr = b[(b["source"] != s) & np.isfinite(b["p_plateaued"])]
        cal = fit_decision_calibration(tr["p_plateaued"], tr["plateau_event"], fraction=tr["fraction"], method="platt",
                                       source=tr["source"])  # fmt: skip
        m = b["source"] == s
        b.loc[m, "p_plat_cal"] = cal.apply(b.loc[m, "p_plateaued"].to_numpy(), fraction=b.loc[m, "fraction"].to_numpy())
    figs.append(_save(reliability_figure({"P(already plateaued), the model's": (b["p_plateaued"], b["plateau_event"]),
                                          "recalibrated (platt, LOSO)": (b["p_plat_cal"], b["plateau_event"])},
                                         title="bayesgrpo: P(already plateaued) against 'no gain of delta x scale left'"),
                      f"stop_reliability_plateaued_{config}.png"))  # fmt: skip
    js["plateaued"] = {"raw": {**reliability_check(b["p_plateaued"], b["plateau_event"]), **_scores(b, "p_plateaued", "plateau_event")},
                       "recalibrated": {**reliability_check(b["p_plat_cal"], b["plateau_event"]), **_scores(b, "p_plat_cal", "plateau_event")}}  # fmt: skip
    md += ["", "P(final >= target) for targets at the current level + k x scale (bayesgrpo; the p_gain map applied LOSO):", "",
           "| k | Brier raw | Brier mapped | log raw | log mapped | worst gap raw | worst gap mapped |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for k in js["target"]:
        a, c = js["target_scores"][k]["raw"], js["target_scores"][k]["mapped"]
        md.append(f"| {k} | {a['brier']:.3f} | {c['brier']:.3f} | {a['log']:.3f} | {c['log']:.3f} | "
                  f"{js['target'][k]['raw']['worst_gap']:.3f} | {js['target'][k]['mapped']['worst_gap']:.3f} |")  # fmt: skip
    pl = js["plateaued"]
    md += ["", f"P(already plateaued) (bayesgrpo) against 'no gain of {DELTA:g} x scale left': Brier "
           f"{pl['raw']['brier']:.3f} (model's own) / {pl['recalibrated']['brier']:.3f} (recalibrated LOSO), worst "
           f"populated-bin gap {pl['raw']['worst_gap']:.3f} / {pl['recalibrated']['worst_gap']:.3f}.", ""]  # fmt: skip
    return md, js, figs


def noise_floor_md(b: pd.DataFrame, shipped: str, js: dict) -> list[str]:
    """What the +-0.07 check can tell on these cases (:func:`~bench.stop_rule.reliability_noise_floor`),
    the source-weighted diagram, and which sources fill the bins that miss."""
    from bench.stop_rule import reliability, reliability_noise_floor

    md = ["What the check can tell on these cases: checkpoints of one run share its final reward, so their outcomes "
          "are correlated (the latent correlation `rho` of a Gaussian copula, matched to the within-run correlation "
          "of the outcomes around their bin's observed frequency; errors of the forecaster that differ from run to "
          "run raise it too, so `rho = 0`, independent cases, is given beside it). `pass rate` is how often a "
          "forecaster *exactly* calibrated at the same probabilities passes the check, with its median worst gap; "
          "`p-value`: (1 + the calibrated worlds whose worst gap is at least the observed one) / (1 + 400 "
          "simulations) (`bench/stop_rule.py::reliability_noise_floor`).", "",
          "| probability | observed worst gap | rho | pass rate (exactly calibrated) | median worst gap | p-value | pass rate, independent cases |",
          "|---|---|---|---|---|---|---|"]  # fmt: skip
    for label, col in (("raw", "p_gain_raw"), ("recalibrated", shipped)):
        f = reliability_noise_floor(b[col], b["event"], b["run_id"])
        js[f"noise_floor|{label}"] = f
        md.append(f"| {label} | {f['observed_worst_gap']:.3f} | {f['rho']:.2f} | {f['pass_rate']:.0%} | "
                  f"{f['median_worst_gap']:.3f} | {f['p_value']:.3f} | {f['pass_rate_independent']:.0%} |")  # fmt: skip
    w = 1.0 / b.groupby("source")["event"].transform("size").to_numpy()
    t = reliability(b[shipped], b["event"], weights=w)
    u = reliability(b[shipped], b["event"])
    big = b["source"].value_counts()
    top = str(big.index[0])
    share = reliability(b[shipped], (b["source"] == top).astype(float))["observed"]  # the bins' share of it
    md += ["", f"The recalibrated p_gain per bin, per case and source-weighted (each source the same), and the share of "
           f"the bin's cases from the largest source ({top}: {big.iloc[0]} of {len(b)} cases):", "",
           "| bin | cases | observed - p, per case | observed - p, source-weighted | share of the largest source |",
           "|---|---|---|---|---|"]  # fmt: skip
    for (_, a), (_, c), sh in zip(u.iterrows(), t.iterrows(), share, strict=True):
        md.append(f"| {a['lo']:.1f}-{a['hi']:.1f} | {int(a['n'])} | {a['gap']:+.3f} | {c['gap']:+.3f} | {sh:.0%} |")
    js["source_weighted_reliability"] = t.to_dict("records")
    return md


def _scores(g: pd.DataFrame, col: str, y: str = "event") -> dict:
    from bench.stop_rule import prob_scores

    return prob_scores(g[col], g[y], weights=case_weights(g["source"]))


def _save(fig, name: str) -> Path:
    path = FIG / name
    fig.savefig(path, dpi=110)
    return path


def policy_designs(dec: pd.DataFrame, designs, risk: float = SHIPPED_RISK) -> tuple[pd.DataFrame, dict]:
    """Every policy design (what the threshold is on) for every method, nested leave-one-source-out at
    ``risk``: the stops and the policy each held-out source got."""
    rows, chosen = [], {}
    for d in designs:
        for m, g in dec.groupby("method"):
            if any(g[c].isna().all() for c in DESIGNS[d][3]):
                continue  # a covariate this method has not got (P(plateaued) of the peers)
            st, ch = loso_policy(g, d, risk)
            rows.append(st.assign(design=d))
            chosen[(d, m)] = ch
    return pd.concat(rows, ignore_index=True), chosen


def design_table(stops: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (d, m), g in stops.groupby(["design", "method"]):
        out.append(stops_summary(g).assign(design=d, method=m))
    return pd.concat(out, ignore_index=True)


def ship_policy(dec: pd.DataFrame, design: str) -> dict:
    """The shipped policy: patience and min_fraction chosen at the shipped risk, then per patience and risk
    ``[risk, threshold, bad-stop share, steps saved]`` (:func:`risk_index`; the larger of the per-run and
    source-weighted bad-stop shares, and the mean of their steps saved) on every source's LOSO
    probabilities of bayesgrpo; None where no threshold met the risk."""
    b = dec[dec["method"] == "bayesgrpo"]
    pol = choose_policy(b, design, SHIPPED_RISK)
    mf = pol["min_fraction"] if pol else 0.1
    seq = checkpoint_sequences(b, design)
    th = {}
    for pat in PATIENCES:
        (r,) = sweep(seq, THRESHOLDS, patience=pat, min_fraction=mf, delta_bad=DELTA_BAD).values()
        rows, prev = [], None
        for risk in RISKS:
            i = risk_index(r, risk)
            if i is not None and (prev is None or i > prev):
                prev = i
            rows.append([risk, None] if prev is None else
                        [risk, float(r["threshold"][prev]), float(max(r["bad_stops"][prev], r["bad_stops_w"][prev])),
                         float(0.5 * (r["steps_saved"][prev] + r["steps_saved_w"][prev]))])  # fmt: skip
        th[str(pat)] = rows
    return dict(design=design, delta=DELTA, delta_bad=DELTA_BAD, patience=int(pol["patience"]) if pol else 2,
                min_fraction=float(mf), thresholds=th)  # fmt: skip


def operating_section(dec: pd.DataFrame, stops: pd.DataFrame, design: str, ship: dict, config: str):
    """The operating curves (LOSO probabilities, the threshold swept at the shipped patience and
    min_fraction) with each method's nested-LOSO point at the shipped risk and the oracle."""
    from bayesgrpo.decisions.stop import StopPolicy
    from bench.plots_stop import operating_figure

    curves = operating_curve(dec, THRESHOLDS, patience=ship["patience"], min_fraction=ship["min_fraction"], p=design,
                             delta_bad=DELTA_BAD)  # fmt: skip
    pts = stops_summary(stops[stops["design"] == design])
    b = dec[dec["method"] == "bayesgrpo"]
    orc = policy_backtest(b, StopPolicy(threshold=0.0, patience=1, min_fraction=0.0, delta=DELTA, delta_bad=DELTA_BAD),
                          p=design)  # fmt: skip
    oracle = stops_summary(orc[orc["method"] == "oracle"])
    fig = operating_figure(curves, points=pts, oracle=oracle, risk=SHIPPED_RISK,
                           title=f"Stop policy on {design} (patience {ship['patience']}, from {ship['min_fraction']:.0%} "
                                 f"of the run), every 5% of {dec['run_id'].nunique()} runs, leave-one-source-out; "
                                 f"points: thresholds chosen without the run's source at risk {SHIPPED_RISK:g} "
                                 "(star: bayesgrpo, shipped); diamond: oracle")  # fmt: skip
    return curves, oracle, _save(fig, f"stop_operating_{config}.png")


def four_checkpoint(dec: pd.DataFrame, design: str) -> pd.DataFrame:
    """The forecast table's rule: stop at the first of 0.1/0.2/0.3/0.5 where advice = stop (patience 1;
    the patience-1 threshold chosen on the 5% checkpoints without the run's source)."""
    rows = []
    for m, g in dec.groupby("method"):
        if any(g[c].isna().all() for c in DESIGNS[design][3]):
            continue
        src = g["source"].to_numpy()
        for s in np.unique(src):
            inner = g[src != s].copy()
            inner[design] = loso_probs(inner, design)
            pol = choose_policy(inner, design, SHIPPED_RISK, patiences=(1,))
            outer = g[src == s].copy()
            outer[design] = _apply(_fit(inner, design), outer, design)
            pol = pol or dict(threshold=0.0, min_fraction=0.0)
            policy = StopPolicy(threshold=pol["threshold"], patience=1, min_fraction=pol["min_fraction"], delta=DELTA,
                                delta_bad=DELTA_BAD)  # fmt: skip
            rows.append(policy_backtest(outer, policy, p=design, cutoffs=CUT4, oracle=m == "bayesgrpo"))
    return pd.concat(rows, ignore_index=True)


def today_rules(dec: pd.DataFrame) -> pd.DataFrame:
    """Today's rules on every 5% checkpoint, as they ship (no recalibration, nothing chosen): the plain rule
    of bench/results/forecast.md (P(final >= level + 0.05 scale) < 0.2 on the raw p_gain, patience 1) and
    ``ImprovementStop()``'s defaults (P(final >= best so far) < 0.05 at 3 consecutive forecasts)."""
    rules = {
        "plain rule (raw p_gain < 0.2)": ("p_gain_raw", 0.2, 1),
        "ImprovementStop() defaults": ("p_improve_raw", 0.05, 3),
    }
    out = []
    for name, (col, eps, pat) in rules.items():
        pol = StopPolicy(threshold=eps, patience=pat, min_fraction=0.0, delta=DELTA, delta_bad=DELTA_BAD)
        st = policy_backtest(dec, pol, p=col, oracle=False)
        out.append(stops_summary(st).assign(rule=name))
    return pd.concat(out, ignore_index=True)


def delta_entry(bay: pd.DataFrame, shipped_cal: str, design: str, policy: dict, measured: dict) -> dict:
    """The package data of one delta: the p_gain map and the policy (its score's own map when the design is
    not the p_gain map itself), refitted on every case."""
    kind_stamp = time.strftime("%Y-%m-%d")
    cal = _fit(bay, shipped_cal).model_copy(update={"name": f"p_gain-{DELTA:g}-{kind_stamp}"})
    score = None
    if design != shipped_cal:
        sc = _fit(bay, design).model_copy(update={"name": f"{design}-{DELTA:g}-{kind_stamp}"})
        score = {"input": DESIGNS[design][0], "calibration": sc.model_dump(mode="json")}
    return {"calibration": cal.model_dump(mode="json"), "policy": {**policy, "score": score}, "measured": measured}


def ship(config: str, bay: pd.DataFrame, entries: dict) -> Path:
    """bayesgrpo/resources/decision_<kind>.json: per delta, the p_gain map and the policy, with provenance."""
    kind = FB.CONFIGS[config]["kind"]
    prov = dict(command=f"{SS.CMD} --config {config}", data=SELECTION_MORE, ledger=f"bench/results/stop_runs/{config}",
                checkpoints="every 5% of each run (0.05 ... 0.95)", date=time.strftime("%Y-%m-%d"),
                runs=int(bay["run_id"].nunique()), sources=int(bay["source"].nunique()), cases=int(len(bay)),
                method="leave-one-source-out backtest; maps and thresholds refitted on every case")  # fmt: skip
    out = {"kind": kind, "default_delta": 0.05, "deltas": entries, "provenance": prov}
    path = ROOT / "bayesgrpo" / "resources" / f"decision_{kind}.json"
    if config == kind:  # a configuration of its kind's defaults ships; others (context, ...) are studied only
        path.write_text(json.dumps(out, indent=1, default=float) + "\n")
    return path


def prepare(runs, cases, draws, delta: float):
    """Decision cases at ``delta`` with every design's LOSO probabilities: (all, bayesgrpo's, common)."""
    global DELTA
    DELTA = delta
    dec = decision_cases(cases, runs, draws=draws, delta=delta, delta_bad=DELTA_BAD).reset_index(drop=True)
    dec["plateau_event"] = 1.0 - dec["event"]
    loso_recalibrate(dec)
    return dec, dec[dec["method"] == "bayesgrpo"].reset_index(drop=True), common_cases(dec)


def patience_errors(bay: pd.DataFrame, design: str, policy: dict) -> dict:
    """Nested-LOSO bad-stop share and steps saved at the shipped risk for each patience, the start fixed at
    the shipped one (what ``StopPolicy(patience=k).error_rate`` reports)."""
    out = {}
    for pat in PATIENCES:
        st, _ = loso_policy(bay, design, SHIPPED_RISK, patiences=(pat,), min_fractions=(policy["min_fraction"],))
        t = stops_summary(st)
        t = t[t["method"] == "bayesgrpo"]
        out[f"patience_{pat}"] = dict(risk=SHIPPED_RISK, bad_stops=float(t["bad_stops"].max()),
                                      steps_saved=float(t["steps_saved"].mean()))  # fmt: skip
    return out


def other_delta(runs, cases, draws, delta: float, shipped_cal: str, design: str) -> tuple[dict, dict]:
    """The shipped calibration method and design at another delta: its package data and measured numbers."""
    _dec, bay, _ = prepare(runs, cases, draws, delta)
    policy = ship_policy(bay, design)
    st, _ = loso_policy(bay, design, SHIPPED_RISK)
    seq = stops_summary(st)
    four = stops_summary(four_checkpoint(bay, design))
    rel = reliability_check(bay[shipped_cal], bay["event"])
    measured = {"sequential": seq.to_dict("records"), "four_checkpoint": four.to_dict("records"),
                "reliability": {k: rel[k] for k in ("worst_gap", "met", "populated")},
                **patience_errors(bay, design, policy)}  # fmt: skip
    return delta_entry(bay, shipped_cal, design, policy, measured), dict(seq=seq, four=four, rel=rel, policy=policy)


def write_report(config: str, ns: dict) -> None:
    """bench/results/stop_policy[_<config>].md and .json from the study's results (``ns``: main's locals)."""
    bay, common, design, policy = ns["bay"], ns["common"], ns["design"], ns["policy"]
    stem = "stop_policy" if config == "oscillator" else f"stop_policy_{config}"
    mark = lambda ok: "**met**" if ok else "**not met**"  # noqa: E731
    thr = "; ".join(f"patience {k}: " + ", ".join(f"risk {e[0]:g} -> {e[1]:.2f}" if e[1] is not None else f"risk {e[0]:g} -> none"
                                                 for e in v) for k, v in policy["thresholds"].items())  # fmt: skip
    md = [
        f"# Stop advice: decision probabilities and a stop policy with a measured error rate ({config})",
        "",
        f"Regenerate: `{SS.CMD} --config {config}` (stages peers, forecasts, report; resumable; `--stage report` "
        f"rebuilds this page, the figures and `bayesgrpo/resources/decision_<kind>.json`). Generated "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        f"**Runs.** {SELECTION_MORE}: {bay['run_id'].nunique()} runs from {bay['source'].nunique()} sources, "
        f"forecast at every 5% of each run (what a live forecast every 5% would see): {len(bay)} bayesgrpo cases; "
        f"{len(common)} run x checkpoint x method cases ({common['run_id'].nunique()} runs, "
        f"{common['source'].nunique()} sources) that every peer forecast too, on which all comparisons are made.",
        "",
        "**Protocol.** " + SS.__doc__.split("Protocol\n--------\n")[1].replace("\n", " ").strip(),
        "",
        "**Definitions.** current level = the mean of the last 10% of the logged points, at least 3 "
        "(`bayesgrpo.series.current_level`); scale = the forecast's normalising scale of the prefix (the range of "
        f"the rewards logged so far, at least a quarter of known bounds); p_gain = P(final >= level + {DELTA:g} x "
        f"scale); a stop is **bad** when the final reward exceeds the level at the stop by more than {DELTA_BAD:g} "
        "of the complete run's robust range; steps saved = (H - stop) / (H - s0); the oracle stops at the first "
        f"checkpoint whose true remaining gain is below {DELTA:g} of the range. Every probability below is "
        "recalibrated leave-one-source-out, every threshold chosen leave-one-source-out (nested: also the "
        "probabilities it was chosen on were recalibrated without the held-out source).",
        "",
        "## Targets",
        "",
        *[f"- {k}: {mark(v[0])} ({v[1]})" for k, v in ns["targets"].items()],
        "",
        "## 1. Decision probabilities",
        "",
        f"Recalibration of bayesgrpo's p_gain, LOSO (lowest log score ships: `{ns['shipped_cal']}`; cases weigh "
        "half per case, half per source):",
        "",
        "```",
        ns["cal_table"].to_string(index=False),
        "```",
        "",
        "Every method, on the common cases (its own p_gain, raw and recalibrated LOSO with the shipped method):",
        "",
        *ns["md_p"],
        "",
        "Reliability of p_gain (bins of 0.1; populated: at least 30 cases; target: every populated bin within 0.07):",
        "",
        *ns["md_r"],
        f"Figures: `bench/results/figures/stop_reliability_p_gain_{config}.png`, `stop_reliability_target_{config}.png`, "
        f"`stop_reliability_plateaued_{config}.png`.",
        "",
        "## 2. The stop policy",
        "",
        f"Designs tried (what the threshold is on), bayesgrpo, nested LOSO at risk {SHIPPED_RISK:g} (patience, "
        f"start and threshold chosen without the run's source among patience {PATIENCES}, start "
        f"{MIN_FRACTIONS}; most steps saved with at most risk bad stops, per run and source-weighted):",
        "",
        *stops_md(
            ns["dt"]
            .rename(columns={"method": "m"})
            .assign(method=lambda t: t["design"])
            .drop(columns="m")
            .groupby(["method", "weighting"], as_index=False)
            .first()
        ),
        "",
        f"Shipped design: `{design}`; patience {policy['patience']}, advice from {policy['min_fraction']:.0%} of the "
        f"run; thresholds (all sources' LOSO probabilities): {thr}.",
        "",
        "Every method with the shipped design on the common cases (nested LOSO; the oracle knows the outcome):",
        "",
        *stops_md(ns["seq_c"]),
        "",
        "Today's rules on the same checkpoints (bayesgrpo, as they ship, nothing recalibrated or chosen):",
        "",
        *stops_md(ns["today"], label="rule"),
        "",
        f"Operating curves: `bench/results/figures/stop_operating_{config}.png`.",
        "",
        "The forecast table's rule: stop at the first of 0.1/0.2/0.3/0.5 where advice = stop (patience 1, "
        "threshold chosen LOSO on the 5% checkpoints):",
        "",
        *stops_md(ns["four_b"]),
        "",
        "The same on the common cases, every method:",
        "",
        *stops_md(ns["four_c"]),
        "",
        "## Other deltas (`--delta`)",
        "",
        "The same calibration method and policy design, refitted and measured (nested LOSO, risk "
        f"{SHIPPED_RISK:g}) at each delta that ships:",
        "",
        "| delta | sequential: saved / bad (per run; source-w.) | four checkpoints: saved / bad | p_gain worst bin gap |",
        "|---|---|---|---|",
        *[
            f"| {d:g} | "
            + " | ".join(
                "; ".join(
                    f"{r.steps_saved:.0%} / {r.bad_stops:.0%}" for r in t[t["method"] == "bayesgrpo"].itertuples()
                )
                for t in (o["seq"], o["four"])
            )
            + f" | {o['rel']['worst_gap']:.3f} |"
            for d, o in ns["others"].items()
        ],
        "",
    ]
    (SS.RES / f"{stem}.md").write_text("\n".join(md) + "\n")
    js = dict(config=config, design=design, policy=policy, shipped_calibration=ns["shipped_cal"],
              calibration_choice=ns["cal_table"].to_dict("records"), scores=ns["js_p"], reliability=ns["js_r"],
              reliability_common=ns["rel_common"], designs=ns["dt"].to_dict("records"),
              sequential_common=ns["seq_c"].to_dict("records"), four_checkpoint=ns["four_b"].to_dict("records"),
              four_checkpoint_common=ns["four_c"].to_dict("records"), today=ns["today"].to_dict("records"),
              targets={k: {"met": bool(v[0]), "numbers": v[1]} for k, v in ns["targets"].items()},
              chosen={f"{d}|{m}": v for (d, m), v in ns["chosen"].items()},
              operating_curves=ns["curves"].to_dict("records"))  # fmt: skip
    (SS.RES / f"{stem}.json").write_text(json.dumps(js, indent=1, default=float) + "\n")


DELTAS = (0.02, 0.05, 0.1)


def main(config: str = "oscillator") -> None:
    t0 = time.time()
    runs = load_dev(more=True)
    cases, draws = load_cases(config, runs)
    dec, bay, common = prepare(runs, cases, draws, 0.05)
    print(f"{len(bay)} bayesgrpo cases ({bay['run_id'].nunique()} runs, {bay['source'].nunique()} sources); "
          f"{len(common)} cases common to every method ({time.time() - t0:.0f} s)", flush=True)  # fmt: skip
    shipped_cal, cal_table = choose_calibration(bay)
    md_p, js_p = prob_section(common, shipped_cal)
    md_r, js_r, figs = reliability_section(bay, draws, shipped_cal, config)
    rel_common = {m: reliability_check(g[shipped_cal], g["event"]) for m, g in common.groupby("method")}
    stops_b, chosen = policy_designs(bay, list(DESIGNS))
    dt = design_table(stops_b)
    b = dt.groupby("design").agg(saved=("steps_saved", "mean"), bad=("bad_stops", "max"))
    ok = b[b["bad"] <= SHIPPED_RISK]
    design = str(ok["saved"].idxmax() if len(ok) else b["bad"].idxmin())
    policy = ship_policy(bay, design)
    stops_c, _ = policy_designs(common, [design])
    curves, oracle, fig = operating_section(common, stops_c, design, policy, config)
    figs.append(fig)
    four_b = stops_summary(four_checkpoint(bay, design))
    four_c = stops_summary(four_checkpoint(common, design))
    today = today_rules(bay)
    seq_b = stops_summary(stops_b[stops_b["design"] == design])
    seq_c = pd.concat([stops_summary(stops_c), oracle.assign(method="oracle")], ignore_index=True)
    targets = {
        "sequential_risk_0.1": target_met(seq_b, "bayesgrpo", saved=0.25, bad=0.10),
        "four_checkpoint": target_met(four_b, "bayesgrpo", saved=0.20, bad=0.15),
        "reliability_p_gain": (js_r["bayesgrpo|recalibrated"]["met"], f"worst populated-bin gap "
                               f"{js_r['bayesgrpo|recalibrated']['worst_gap']:.3f} ({js_r['bayesgrpo|recalibrated']['populated']} bins)"),
    }  # fmt: skip
    ov = pd.DataFrame(js_p["overall"])
    rec = ov[ov["probability"] == "recalibrated"].set_index("method")["brier"]
    best_peer = ov[~ov["method"].str.startswith("bayesgrpo")]["brier"].min()  # raw or recalibrated, whichever is lower
    targets["brier_below_peers"] = (bool(rec["bayesgrpo"] < best_peer),
                                    f"bayesgrpo {rec['bayesgrpo']:.3f} vs best peer {best_peer:.3f}")  # fmt: skip
    measured = {"sequential": seq_b.to_dict("records"), "four_checkpoint": four_b.to_dict("records"),
                "targets": {k: {"met": bool(v[0]), "numbers": v[1]} for k, v in targets.items()},
                **patience_errors(bay, design, policy)}  # fmt: skip
    entries = {"0.05": delta_entry(bay, shipped_cal, design, policy, measured)}
    others = {}
    for d in DELTAS:
        if d != 0.05:
            entries[f"{d:g}"], others[d] = other_delta(runs, cases, draws, d, shipped_cal, design)
    global DELTA
    DELTA = 0.05
    path = ship(config, bay, entries)
    write_report(config, locals())
    print(f"done in {time.time() - t0:.0f} s; shipped {path}", flush=True)


if __name__ == "__main__":
    main(*(sys.argv[1:2] or ["oscillator"]))
