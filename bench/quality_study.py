"""Issue 17 items 3-5 decided leave-one-source-out: the shape per run, the hazard of leaving the regime and
the conditioned interval layer, composed on the forecast benchmark's ledgers; writes
bench/results/quality_study.md (+ .json, quality_cases.csv.gz) and the shipped package data
bayesgrpo/resources/hazard.json and intervals_auto.json.

    nice -n 10 .venv/bin/python bench/forecast_benchmark.py --config oscillator --config degeneracy \\
        --config logistic --no-report                                     # the ledgers (draws per case and kind)
    nice -n 10 .venv/bin/python bench/quality_study.py --stage evidence   # every kind's block evidence per case
    .venv/bin/python bench/quality_study.py                               # the study, its report, the package data

Protocol
--------
Every case of the forecast benchmark (every development source, ``bench/devdata.py::load_all``; LOSO
population priors) has final-reward draws of each kind. The study composes what ``Forecaster("auto")``
does with them, case by case, and scores it against the logged truth:

1. **shape** -- the kinds' weights ``pi(x) exp(e_k)`` (:mod:`bayesgrpo.forecast.shape`), ``e_k`` the
   block evidence of each kind on the case's prefix (:func:`bayesgrpo.forecast.shape.run_evidence`,
   with the same LOSO prior the kind's draws were sampled with), kinds under the minimum weight
   dropped; the mixture takes ``round(w_k N)`` of each kind's draws.
2. **hazard** (:mod:`bench.posthoc.hazard`) fitted on the cases of every OTHER source (events: the
   run's final reward lies more than 0.3 of its range below its level at the cutoff), applied to the
   held-out source's mixture draws.
3. **interval layer** (:mod:`bench.posthoc.intervals`) fitted on the other sources' cases after
   the hazard, applied to the held-out source.

Variants of each step are scored leave-one-source-out; the shipped configuration is the one that
meets the most coverage targets (cov80 in 0.75-0.85 and cov50 in 0.42-0.58 at each cutoff, per case
and source-weighted: 16 cells), then the lowest mean CRPS, among those whose reward-only runs forecast
no worse than today's shipped forecaster (oscillator + its layer, LOSO). The transfer gap of the layer
is its coverage fitted on every case (in-sample) against leave-one-source-out.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import forecast_benchmark as FB  # noqa: E402
from devdata import load_all  # noqa: E402

from bayesgrpo.evaluation.scoring import score_draws, summarize, summarize_weighted  # noqa: E402
from bayesgrpo.forecast.features import CHANNEL_FLAGS, PRECURSORS, prefix_features  # noqa: E402
from bayesgrpo.forecast.shape import ShapeConfig, ShapePrior, draw_counts, kind_weights  # noqa: E402
from bayesgrpo.series import current_level, noise_sd, robust_range, start_level  # noqa: E402
from bench.fit_layers import fit_calibration, leave_anchor  # noqa: E402
from bench.posthoc.hazard import FALL, fit_hazard, left_regime  # noqa: E402
from bench.posthoc.intervals import LEVELS, RULES, case_weights, fit_layer  # noqa: E402

KINDS = ("oscillator", "degeneracy", "logistic")
RES = FB.RES
EVIDENCE = FB.WORK / "evidence.csv"
CMD = ".venv/bin/python bench/quality_study.py"
COV80, COV50 = (0.75, 0.85), (0.42, 0.58)
N_DRAWS = 400  # draws per case in the ledgers
#: hazard inputs: the reward's own signs, and the precursor channels
HAZARD_REWARD = ("past_peak", "recent", "trend", "position", "noise", "bounded")
HAZARD_ALL = HAZARD_REWARD + PRECURSORS
CHANNEL_OF = {"has_kl": ("kl_growth",), "has_entropy": ("entropy_fall",), "has_length": ("length_growth",),
              "has_zero_std": ("zero_std_rise",), "has_spread": ("spread_fall",)}  # fmt: skip


# ----------------------------------------------------------------------------------------- classes
CLASSES = ("S-curve", "decline/collapse", "saturating", "flat/noisy")
CLASS_RULE = (
    "on the complete run, with its reward smoothed by a running mean of max(5, 10% of its points), R its "
    "robust range, sigma its noise sd, start/final the means of its first/last 10%: **decline/collapse** if the "
    "smoothed peak lies more than max(0.3 R, 3 sigma / sqrt(window)) above the final; else, if the final lies "
    "that far above the start, **S-curve** when the smoothed curve stays within 0.15 R of the start over the "
    "first 20% of the run and **saturating** otherwise; the rest **flat/noisy**"
)


def run_class(y) -> str:
    """The class of a complete run (:data:`CLASS_RULE`)."""
    y = np.asarray(y, dtype=float)
    y = y[np.isfinite(y)]
    n = y.size
    k = max(5, int(math.ceil(0.1 * n)))
    sm = pd.Series(y).rolling(k, min_periods=1, center=True).mean().to_numpy()
    R = robust_range(y)
    thr = max(0.3 * R, 3.0 * noise_sd(y) / math.sqrt(k))
    start, final = start_level(y), current_level(y)
    if sm.max() - final > thr:
        return "decline/collapse"
    if final - start > thr:
        early = sm[: max(k, int(0.2 * n))]
        return "S-curve" if np.all(early - start < 0.15 * R) else "saturating"
    return "flat/noisy"


# ----------------------------------------------------------------------------------------- the cases
def load_ledgers() -> tuple[pd.DataFrame, dict]:
    """One row per (run, cutoff) every kind scored, and each kind's draws aligned with the rows."""
    parts, draws = {}, {}
    for k in KINDS:
        c = FB.load_cases(k)
        c = c[c["ok"].astype(bool)].copy()
        c["key"] = [f"{r}|{x:g}|{m}" for r, x, m in zip(c["run_id"], c["cutoff"], c["orig_method"], strict=True)]
        parts[k] = c.set_index(["run_id", "cutoff"])
        draws[k] = FB.load_draws(k)
    idx = parts[KINDS[0]].index
    for k in KINDS[1:]:
        idx = idx.intersection(parts[k].index)
    idx = [i for i in idx if all(parts[k].loc[i, "key"] in draws[k] for k in KINDS)]
    base = parts[KINDS[0]].loc[idx].reset_index()
    cols = ["run_id", "source", "cutoff", "n_obs", "observed_until", "s0", "horizon", "truth", "range", "scale"]
    B = base[cols].copy()
    for k in KINDS:
        p = parts[k].loc[idx]
        B[f"sec_{k}"] = p["seconds"].to_numpy()
        B[f"rhat_{k}"] = p["r_hat_max"].to_numpy()
        B[f"div_{k}"] = p["divergences"].to_numpy()
    D = {k: [np.sort(draws[k][parts[k].loc[i, "key"]].astype(float)) for i in idx] for k in KINDS}
    return B, D


def describe_cases(B: pd.DataFrame, runs) -> pd.DataFrame:
    """Features of each case's prefix (as the forecaster computes them), its anchor, its run's class."""
    from bayesgrpo.models.arrays import prepare_arrays

    rows = []
    for r in B.itertuples():
        rs = runs.select([r.run_id]).truncate(until_step=int(r.observed_until))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, infos = prepare_arrays(rs, horizon=int(r.horizon))
        info = infos[0]
        frac = (info.last_step - info.s0) / max(1, info.planned - info.s0)
        pre = rs.run(r.run_id)
        f = prefix_features(pre, fraction=frac, reward_min=info.reward_min, reward_max=info.reward_max)
        level, floor = leave_anchor(pre["reward"].to_numpy(), info.reward_min)
        f.update(level=level, floor=floor, fraction_model=frac, cls=run_class(runs.run(r.run_id)["reward"]))
        rows.append(f)
    F = pd.DataFrame(rows, index=B.index)
    out = pd.concat([B, F.drop(columns=[c for c in F.columns if c in B.columns])], axis=1)
    out["event"] = left_regime(out["level"], out["truth"], out["range"])
    out["outcome"] = np.clip((out["truth"] - out["floor"]) / (out["level"] - out["floor"]).where(lambda v: v > 0), 0, 1)
    return out


def compute_evidence(B: pd.DataFrame, runs, *, split: float = 0.5) -> pd.DataFrame:
    """Block evidence of every kind per case (resumable ledger ``EVIDENCE``), with its CPU seconds."""
    from bayesgrpo.forecast.shape import run_evidence
    from bayesgrpo.models.arrays import prepare_arrays
    from bayesgrpo.models.kinds import get_kind

    table = pd.read_csv(FB.PRIOR_TABLE)
    done = pd.read_csv(EVIDENCE) if EVIDENCE.exists() else pd.DataFrame(columns=["run_id", "cutoff", "kind"])
    seen = {(a, round(float(b), 4), c) for a, b, c in zip(done["run_id"], done["cutoff"], done["kind"], strict=True)}
    priors, rows, t0 = {}, [], time.time()
    for n, r in enumerate(B.itertuples(), start=1):
        for k in KINDS:
            if (r.run_id, round(r.cutoff, 4), k) in seen:
                continue
            if (k, r.source) not in priors:
                priors[(k, r.source)] = FB.loso_prior(table, k, r.source)
            prior = priors[(k, r.source)]
            rs = runs.select([r.run_id]).truncate(until_step=int(r.observed_until))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                arr, infos = prepare_arrays(rs, horizon=int(r.horizon), prior=prior)
            kind = get_kind(k)
            if kind.degeneracy and infos[0].refresh_interval > 1:
                e, cpu = -math.inf, 0.0
            else:
                c0 = time.process_time()
                e = run_evidence(kind, arr, prior, split=split)
                cpu = time.process_time() - c0
            rows.append(dict(run_id=r.run_id, cutoff=r.cutoff, kind=k, evidence=e, cpu=cpu))
        if rows and (n % 10 == 0 or n == len(B)):
            pd.DataFrame(rows).to_csv(EVIDENCE, mode="a", header=not EVIDENCE.exists(), index=False)
            rows = []
            print(f"[{time.time() - t0:6.0f}s] evidence: {n}/{len(B)} cases", flush=True)
    return pd.read_csv(EVIDENCE)


TIMING = FB.WORK / "evidence_timing.csv"
TIMING_CASES = 40


def evidence_timing(B: pd.DataFrame, runs, *, n: int = TIMING_CASES, repeats: int = 5) -> pd.DataFrame:
    """Wall seconds of each kind's block evidence on ``n`` cases spread over the table, the best of
    ``repeats`` (the CPU seconds of the evidence stage are inflated many times by the other jobs on the
    2 shared cores; the best of several repeats is what the work costs). Resumable ledger ``TIMING``."""
    from bayesgrpo.forecast.shape import run_evidence
    from bayesgrpo.models.arrays import prepare_arrays
    from bayesgrpo.models.kinds import get_kind

    if TIMING.exists():
        return pd.read_csv(TIMING)
    table = pd.read_csv(FB.PRIOR_TABLE)
    rows = []
    for i in np.linspace(0, len(B) - 1, n).round().astype(int):
        r = B.iloc[i]
        for k in KINDS:
            prior = FB.loso_prior(table, k, r["source"])
            rs = runs.select([r["run_id"]]).truncate(until_step=int(r["observed_until"]))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                arr, infos = prepare_arrays(rs, horizon=int(r["horizon"]), prior=prior)
            kind = get_kind(k)
            if kind.degeneracy and infos[0].refresh_interval > 1:
                continue
            best = math.inf
            for _ in range(repeats):
                t0 = time.perf_counter()
                run_evidence(kind, arr, prior)
                best = min(best, time.perf_counter() - t0)
            rows.append(dict(run_id=r["run_id"], cutoff=r["cutoff"], kind=k, n_obs=r["n_obs"], seconds=best))
    out = pd.DataFrame(rows)
    out.to_csv(TIMING, index=False)
    return out


def attach_evidence(B: pd.DataFrame) -> pd.DataFrame:
    E = pd.read_csv(EVIDENCE)
    E["cutoff"] = E["cutoff"].round(4)
    P = E.pivot_table(index=["run_id", "cutoff"], columns="kind", values=["evidence", "cpu"], aggfunc="first")
    key = list(zip(B["run_id"], B["cutoff"].round(4), strict=True))
    out = B.copy()
    for k in KINDS:
        out[f"ev_{k}"] = [P.loc[i, ("evidence", k)] if i in P.index else np.nan for i in key]
        out[f"evcpu_{k}"] = [P.loc[i, ("cpu", k)] if i in P.index else np.nan for i in key]
    return out


# ----------------------------------------------------------------------------------------- the shape
#: shape variants: name -> ShapeConfig (the kinds, the prior over kinds, evidence or not)
SHAPES = {
    "oscillator": ShapeConfig(kinds=("oscillator",), prior=ShapePrior(at_floor=(1.0,), elsewhere=(1.0,))),
    "osc+deg": ShapeConfig(kinds=("oscillator", "degeneracy"),
                           prior=ShapePrior(at_floor=(0.5, 0.5), elsewhere=(0.9, 0.1)), min_weight=0.2),
    "osc+deg|prior": ShapeConfig(kinds=("oscillator", "degeneracy"),
                                 prior=ShapePrior(at_floor=(0.5, 0.5), elsewhere=(0.9, 0.1)), min_weight=0.2,
                                 evidence=False),
    "osc+deg|wide": ShapeConfig(kinds=("oscillator", "degeneracy"),
                                prior=ShapePrior(at_floor=(0.5, 0.5), elsewhere=(0.7, 0.3)), min_weight=0.2),
    "all": ShapeConfig(prior=ShapePrior(at_floor=(0.34, 0.33, 0.33), elsewhere=(0.8, 0.1, 0.1)), min_weight=0.2),
    "all|uniform": ShapeConfig(prior=ShapePrior(at_floor=(1, 1, 1), elsewhere=(1, 1, 1)), min_weight=0.2),
}  # fmt: skip


def shape_weights(B: pd.DataFrame, cfg: ShapeConfig) -> list[dict]:
    out = []
    for r in B.to_dict("records"):
        allowed = [k for k in cfg.kinds if math.isfinite(r.get(f"ev_{k}", 0.0))]
        ev = {k: r[f"ev_{k}"] for k in cfg.kinds if np.isfinite(r.get(f"ev_{k}", np.nan))}
        out.append(kind_weights(r, ev, cfg, allowed=allowed or cfg.kinds[:1]))
    return out


def with_weights(B: pd.DataFrame, weights: list[dict]) -> pd.DataFrame:
    """The cases with a shape variant's weights as features ``w_<kind>`` (as the forecaster's features carry
    them: the interval rule ``shape`` reads ``w_oscillator``)."""
    return B.assign(**{f"w_{k}": [w.get(k, 0.0) for w in weights] for k in KINDS})


def mixture(D: dict, i: int, w: dict) -> np.ndarray:
    """The mixture of case ``i``: ``round(w_k N)`` evenly spaced draws of each kind (N = the ledger's 400)."""
    parts = []
    for k, m in draw_counts(w, N_DRAWS).items():
        x = D[k][i]
        parts.append(x[np.round(np.linspace(0, x.size - 1, m)).astype(int)])
    return np.sort(np.concatenate(parts))


UNPACKAGED = "auto-unpackaged"  # ShapeConfig() raw: `--model auto` without package data
EVIDENCE_SECONDS: dict = {}  # kind -> median seconds of its block evidence (evidence_timing), set by main


def shape_cost(B: pd.DataFrame, weights: list[dict], *, evidence: bool, kinds=KINDS) -> np.ndarray:
    """Seconds per forecast of a shape variant: the posterior fits of the kinds kept (the ledgers'
    seconds of each kind's fit of the case) plus the evidence of every kind (its median timed cost)."""
    sec = np.array([sum(B[f"sec_{k}"].iloc[i] for k in w) for i, w in enumerate(weights)])
    if evidence:
        sec = sec + sum(EVIDENCE_SECONDS.get(k, 0.0) for k in kinds)
    return sec


# ----------------------------------------------------------------------------------------- hazard, layer
def _hazard_fit(B: pd.DataFrame, tr: np.ndarray, names, *, l2: float):
    X = B.loc[tr, list(names)].to_numpy(float)
    w = case_weights(B.loc[tr, "source"]) * tr.sum()
    ev = B.loc[tr, "event"].to_numpy(bool)
    return fit_hazard(X, ev, features=names, to_go=1 - B.loc[tr, "fraction_model"].to_numpy(float), weights=w,
                      outcome=B.loc[tr, "outcome"].to_numpy(float)[ev], l2=l2, name="loso")  # fmt: skip


def apply_hazard(hz, B: pd.DataFrame, draws: list, idx) -> list:
    out = list(draws)
    recs = _records(B)
    for i in idx:
        r = recs[i]
        if int(round(hz.p_leave(r) * draws[i].size)):
            out[i] = np.sort(hz.apply(draws[i], r, level=r["level"], floor=r["floor"]))
    return out


_RECORDS: dict = {}


def _records(B: pd.DataFrame) -> list[dict]:
    """The rows of ``B`` as dicts (cached per table: the features the hazard and the layer read)."""
    key = id(B)
    if key not in _RECORDS or len(_RECORDS[key][1]) != len(B):
        _RECORDS[key] = (B, B.to_dict("records"))
    return _RECORDS[key][1]


_QLEVELS = (*LEVELS, 0.5)
_QCOLS = [f"q{round(lv * 100):02d}" for lv in _QLEVELS]


def _quantiles(x: np.ndarray) -> np.ndarray:
    """``np.quantile(x, _QLEVELS)`` of sorted draws (linear interpolation, as numpy's default), without the sort."""
    pos = np.asarray(_QLEVELS) * (x.size - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, x.size - 1)
    return x[lo] + (x[hi] - x[lo]) * (pos - lo)


def layer_cases(B: pd.DataFrame, draws: list, idx, quantiles: np.ndarray | None = None) -> pd.DataFrame:
    """The cases ``idx`` as the layer is fitted on them: their features and the quantiles of ``draws``."""
    q = quantiles[idx] if quantiles is not None else np.array([_quantiles(np.sort(draws[i])) for i in idx])
    df = B.iloc[idx].copy()
    df[_QCOLS] = q
    return df


def apply_layer(lay, B: pd.DataFrame, draws: list, idx) -> list:
    out = list(draws)
    recs = _records(B)
    for i in idx:
        r = recs[i]
        out[i] = lay.apply(draws[i], r, fraction=r["fraction_model"], scale=r["scale"])
    return out


def compose(B: pd.DataFrame, mix: list, *, hazard, rule, l2: float = 1.0, loso: bool = True) -> list:
    """Hazard (``None`` or a tuple of feature names) then the interval layer (``None`` or a rule), each fitted
    on the other sources' cases (``loso``) or on every case (in-sample), applied to each source."""
    src = B["source"].to_numpy()
    out = [None] * len(B)
    folds = sorted(set(src)) if loso else [None]
    q0 = np.array([_quantiles(x) for x in mix]) if rule is not None else None  # mixtures are sorted
    for s in folds:
        te = np.flatnonzero(src == s) if s is not None else np.arange(len(B))
        tr = src != s if s is not None else np.ones(len(B), dtype=bool)
        cur, q = mix, q0
        if hazard is not None:
            hz = _hazard_fit(B, tr, hazard, l2=l2)
            cur = apply_hazard(hz, B, mix, np.arange(len(B)))  # training cases too: the layer is fitted after it
            if rule is not None:
                q = q0.copy()
                for i in (i for i in range(len(B)) if cur[i] is not mix[i]):
                    q[i] = _quantiles(cur[i])
        if rule is not None:
            lay = fit_layer(layer_cases(B, cur, np.flatnonzero(tr), q), rule=rule, name="loso")
            cur = apply_layer(lay, B, cur, te)
        for i in te:
            out[i] = cur[i]
    return out


def today(B: pd.DataFrame, D: dict) -> list:
    """Today's shipped forecaster: the oscillator with its additive layer (``shift``), fitted LOSO."""
    src = B["source"].to_numpy()
    out = [None] * len(B)
    for s in sorted(set(src)):
        tr, te = np.flatnonzero(src != s), np.flatnonzero(src == s)
        cases = layer_cases(B, D["oscillator"], tr)
        cal = fit_calibration(cases, name="loso-shift")
        for i in te:
            out[i] = cal.apply(D["oscillator"][i], fraction=B["cutoff"].iloc[i], scale=B["scale"].iloc[i])
    return out


def health(B: pd.DataFrame, weights: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Sampler health of a forecast that mixes kinds: the worst r_hat and the sum of divergences of the kinds kept."""
    rhat = np.array([max(B[f"rhat_{k}"].iloc[i] for k in w) for i, w in enumerate(weights)])
    div = np.array([sum(B[f"div_{k}"].iloc[i] for k in w) for i, w in enumerate(weights)])
    return rhat, div


def score(B: pd.DataFrame, draws: list, method: str, seconds=None, sampler_health=None) -> pd.DataFrame:
    rows = []
    rhat, div = sampler_health if sampler_health is not None else (B["rhat_oscillator"], B["div_oscillator"])
    for i, r in enumerate(B.to_dict("records")):
        s = score_draws(draws[i], r["truth"], r["range"])
        s.update(run_id=r["run_id"], source=r["source"], cutoff=r["cutoff"], method=method, ok=True,
                 seconds=float(seconds[i]) if seconds is not None else 0.0, cls=r["cls"],
                 reward_only=not any(r[f] for f in CHANNEL_FLAGS if f != "has_spread"),
                 r_hat_max=float(np.asarray(rhat)[i]), divergences=float(np.asarray(div)[i]))  # fmt: skip
        rows.append(s)
    return pd.DataFrame(rows)


def targets_met(S: pd.DataFrame, W: pd.DataFrame, method: str) -> int:
    n = 0
    for T in (S, W):
        g = T[T["method"] == method]
        n += int(g["cover80"].between(*COV80).sum() + g["cover50"].between(*COV50).sum())
    return n


# ----------------------------------------------------------------------------------------- the study
def ablate(B: pd.DataFrame, flags) -> pd.DataFrame:
    """The cases as if the channels of ``flags`` were not logged (their flag and precursor 0)."""
    out = B.copy()
    for f in flags:
        out[f] = 0.0
        for p in CHANNEL_OF[f]:
            out[p] = 0.0
    return out


def variants(B: pd.DataFrame, D: dict) -> tuple[pd.DataFrame, dict]:
    """Every shape raw, then hazards x interval rules on the shapes; returns the scored cases and the
    shape weights per variant."""
    scored, weights, mixes = [], {}, {}
    base = today(B, D)
    scored.append(score(B, base, "today", B["sec_oscillator"].to_numpy()))
    for k in KINDS:
        scored.append(score(B, D[k], f"kind:{k}", B[f"sec_{k}"].to_numpy(), (B[f"rhat_{k}"], B[f"div_{k}"])))
    for name, cfg in SHAPES.items():
        w = shape_weights(B, cfg)
        weights[name] = w
        mixes[name] = [mixture(D, i, wi) for i, wi in enumerate(w)]
        cost = shape_cost(B, w, evidence=cfg.evidence and len(cfg.kinds) > 1, kinds=cfg.kinds)
        scored.append(score(B, mixes[name], f"{name}|raw", cost, health(B, w)))
    for name in SHAPES:
        cfg = SHAPES[name]
        cost = shape_cost(B, weights[name], evidence=cfg.evidence and len(cfg.kinds) > 1, kinds=cfg.kinds)
        hl = health(B, weights[name])
        Bw = with_weights(B, weights[name])
        for hname, hz in (("none", None), ("reward", HAZARD_REWARD), ("all", HAZARD_ALL)):
            for rule in RULES if name in ("oscillator", "osc+deg", "all") else ("none", "recent", "recent+noise"):
                x = compose(Bw, mixes[name], hazard=hz, rule=rule)
                scored.append(score(Bw, x, f"{name}|{hname}|{rule}", cost, hl))
            print(f"{name} hazard {hname} done", flush=True)
    return pd.concat(scored, ignore_index=True), {"weights": weights, "mixes": mixes}


def choose(cases: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """The shipped variant: most coverage targets met, then the lowest mean CRPS, among the variants whose
    reward-only runs forecast no worse (mean CRPS) than today's."""
    S, W = summarize(cases), summarize_weighted(cases)
    ro = cases[cases["reward_only"]].groupby("method")["ncrps"].mean()
    rows = []
    for m in cases["method"].unique():
        g = cases[cases["method"] == m]
        rows.append(dict(method=m, targets=targets_met(S, W, m), crps=float(S[S["method"] == m]["mean_ncrps"].mean()),
                         crps_w=float(W[W["method"] == m]["mean_ncrps"].mean()), reward_only=float(ro.get(m, np.nan)),
                         seconds=float(g["seconds"].mean())))  # fmt: skip
    t = pd.DataFrame(rows)
    ok = t[(t["reward_only"] <= t.loc[t["method"] == "today", "reward_only"].iloc[0] + 1e-9) & (t["method"] != "today")]
    pick = ok.sort_values(["targets", "crps"], ascending=[False, True]).iloc[0]["method"] if len(ok) else "today"
    return str(pick), t.sort_values(["targets", "crps"], ascending=[False, True])


def parse(method: str) -> tuple[str, tuple | None, str | None]:
    # a shape's own name may hold "|" (osc+deg|prior): the longest shape the method starts with
    shape = max((k for k in SHAPES if method == k or method.startswith(k + "|")), key=len, default=method)
    hz, rule = (method[len(shape) + 1 :].split("|") + [None, None])[:2] if method != shape else (None, None)
    hz_names = {"none": None, "reward": HAZARD_REWARD, "all": HAZARD_ALL, "raw": None, None: None}[hz]
    return shape, hz_names, (None if rule in (None, "raw") else rule)


def ship(B: pd.DataFrame, mix: list, shape: str, hz_names, rule, stamp: str) -> dict:
    """Refit the chosen hazard and layer on every case and write them (and the shape) as package data."""
    from bench.posthoc.intervals import IntervalLayer

    res = ROOT / "bayesgrpo" / "resources"
    prov = {"command": CMD, "data": "bench/devdata.py::load_all (every development source)", "date": stamp,
            "ledgers": "bench/results/forecast_runs/dev/<kind>", "study": "bench/results/quality_study.md"}  # fmt: skip
    out = {}
    cfg = SHAPES[shape]
    cfg.model_copy(update={"provenance": {**prov, "variant": shape}}).save(res / "shape.json")
    out["shape"] = cfg.model_dump()
    cur = mix
    if hz_names is not None:
        hz = _hazard_fit(B, np.ones(len(B), dtype=bool), hz_names, l2=1.0)
        hz = hz.model_copy(update={"name": f"hazard-{stamp}", "provenance": {**hz.provenance, **prov}})
        hz.save(res / "hazard.json")
        cur = apply_hazard(hz, B, mix, np.arange(len(B)))
        out["hazard"] = hz.model_dump()
    else:
        (res / "hazard.json").unlink(missing_ok=True)
    if rule is not None:
        lay = fit_layer(layer_cases(B, cur, np.arange(len(B))), rule=rule, name=f"intervals-auto-{stamp}")
        lay = lay.model_copy(update={"provenance": {**lay.provenance, **prov}})
        lay.save(res / "intervals_auto.json")
        out["intervals"] = lay.model_dump()
    else:
        (res / "intervals_auto.json").unlink(missing_ok=True)
        IntervalLayer()  # the identity
    return out


def hazard_check(B: pd.DataFrame, names) -> dict:
    """LOSO probability of leaving per case and its rank AUC for the events (1 = perfect, 0.5 = none)."""
    from scipy.stats import mannwhitneyu

    src = B["source"].to_numpy()
    p = np.zeros(len(B))
    for s in sorted(set(src)):
        hz = _hazard_fit(B, src != s, names, l2=1.0)
        for i in np.flatnonzero(src == s):
            p[i] = hz.p_leave(B.iloc[i].to_dict())
    ev = B["event"].to_numpy(bool)
    auc = mannwhitneyu(p[ev], p[~ev]).statistic / (ev.sum() * (~ev).sum()) if ev.any() and (~ev).any() else np.nan
    return dict(auc=float(auc), events=int(ev.sum()), cases=int(len(B)), p_event=float(p[ev].mean()),
                p_other=float(p[~ev].mean()), p=p)  # fmt: skip


def beats_today(table: pd.DataFrame, pick: str, base: str = "today") -> bool:
    """The pre-registered rule against today's shipped forecaster (or ``base``): more coverage targets met, or
    as many and a lower mean CRPS (the reward-only condition is part of :func:`choose`)."""
    t = table.set_index("method")
    if pick == base or pick not in t.index:
        return False
    a, b = t.loc[pick], t.loc[base]
    return bool(a["targets"] > b["targets"] or (a["targets"] == b["targets"] and a["crps"] < b["crps"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stage", choices=("evidence", "study"), default="study")
    ap.add_argument("--partial", action="store_true", help="study the cases with evidence only (a dry run: no report)")
    ap.add_argument("--cache", type=Path, help="pickle of the scored variants: read if it exists, else written")
    args = ap.parse_args()
    runs = load_all()
    B, D = load_ledgers()
    if args.stage == "evidence":
        compute_evidence(B, runs)
        return
    B = attach_evidence(describe_cases(B, runs))
    missing = int(B[[f"ev_{k}" for k in KINDS]].isna().any(axis=1).sum())
    if args.partial:
        keep = ~B[[f"ev_{k}" for k in KINDS]].isna().any(axis=1).to_numpy()
        B, D = B[keep].reset_index(drop=True), {k: [x for x, m in zip(v, keep, strict=True) if m] for k, v in D.items()}
        cases, _ = variants(B, D)
        pick, table = choose(cases)
        print(table.head(30).to_string())
        print("chosen", pick)
        return
    if missing:
        sys.exit(f"{missing} case(s) have no evidence yet: run `{CMD} --stage evidence` first")
    timing = evidence_timing(B, runs)
    EVIDENCE_SECONDS.update(timing.groupby("kind")["seconds"].median().to_dict())
    study(B, D, cache=args.cache)


def study(B: pd.DataFrame, D: dict, *, cache: Path | None = None) -> None:
    """The variants scored LOSO, the choice, the ablations and the transfer gap, the package data, the report.
    ``cache``: a pickle of the scored variants (read if it exists, else written), so that the report can be
    rebuilt without scoring every variant again."""
    import pickle

    t0 = time.time()
    if cache is not None and cache.exists():
        cases, extra = pickle.loads(cache.read_bytes())
    else:
        cases, extra = variants(B, D)
        if cache is not None:
            cache.write_bytes(pickle.dumps((cases, extra)))
    pick, table = choose(cases)
    default = beats_today(table, pick)
    # what `--model auto` forecasts without package data (ShapeConfig(): no hazard, no layer), not a candidate:
    # the package data ships only if the chosen variant beats it by the same rule
    w0 = shape_weights(B, ShapeConfig())
    m0 = [mixture(D, i, w) for i, w in enumerate(w0)]
    un = score(B, m0, UNPACKAGED, shape_cost(B, w0, evidence=True), health(B, w0))
    cases = pd.concat([cases, un], ignore_index=True)
    _, t0_ = choose(cases[cases["method"].isin(["today", pick, UNPACKAGED])])
    helps = beats_today(t0_, pick, base=UNPACKAGED)
    print(f"[{time.time() - t0:.0f}s] chosen: {pick} (beats today: {default}; beats auto unpackaged: {helps})",
          flush=True)  # fmt: skip
    stamp = time.strftime("%Y-%m-%d")
    abl, gap, shipped, weights = [], None, {}, None
    if pick != "today":
        shape, hz_names, rule = parse(pick)
        mix = extra["mixes"][shape]
        weights = extra["weights"][shape]
        B = with_weights(B, weights)
        secs = cases[cases["method"] == pick]["seconds"].to_numpy()
        hl = health(B, weights)

        def run(b, label):
            return score(B, compose(b, mix, hazard=hz_names, rule=rule), label, secs, hl)

        if hz_names is not None or rule is not None:  # the channels enter through the hazard's and layer's inputs
            abl = [run(ablate(B, [f]), f"{pick} without {f[4:]}") for f in CHANNEL_FLAGS]
            abl.append(run(ablate(B, CHANNEL_FLAGS), f"{pick} without channels"))
            gap = score(B, compose(B, mix, hazard=hz_names, rule=rule, loso=False), f"{pick} in-sample", secs, hl)
        if default or helps:
            shipped = ship(B, mix, shape, hz_names, rule, stamp)
    if not shipped:  # the study decides the package data of `--model auto`: none
        for f in ("shape.json", "hazard.json", "intervals_auto.json"):
            (ROOT / "bayesgrpo" / "resources" / f).unlink(missing_ok=True)
    hz_info = {n: hazard_check(B, v) for n, v in (("reward", HAZARD_REWARD), ("all", HAZARD_ALL))}
    allcases = pd.concat([cases, *abl, *([gap] if gap is not None else [])], ignore_index=True)
    write_report(
        B,
        allcases,
        pd.concat([table, t0_[t0_["method"] == UNPACKAGED]]),
        pick,
        weights,
        shipped,
        hz_info,
        default=default,
        helps=helps,
    )
    # the scored cases of the methods the reports read (every variant's aggregates are in the .json)
    keep = {"today", UNPACKAGED, *(f"kind:{k}" for k in KINDS), *(f"{k}|raw" for k in SHAPES)}
    m = allcases["method"]
    allcases[m.isin(keep) | m.str.startswith(pick)].to_csv(RES / "quality_cases.csv.gz", index=False)
    B.drop(columns=[c for c in B.columns if c.startswith("q")], errors="ignore").to_csv(
        RES / "quality_features.csv.gz", index=False
    )


def _pivot(T: pd.DataFrame, methods, col: str, fmt: str) -> list[str]:
    cut = sorted(T["cutoff"].unique())
    lines = ["| method | " + " | ".join(f"{c:g}" for c in cut) + " |", "|---|" + "---|" * len(cut)]
    for m in methods:
        g = T[T["method"] == m].set_index("cutoff")
        lines.append(f"| {m} | " + " | ".join(fmt.format(g.loc[c, col]) if c in g.index else "–" for c in cut) + " |")
    return lines


PEERS = ("last_value", "exponential", "scalerl", "pow3", "domhan_fast")


def shipped_default() -> str:
    """The model the CLI and ``Forecaster()`` use by default."""
    from bayesgrpo.cli.options import DEFAULT_MODEL

    return DEFAULT_MODEL


def peer_cases(B: pd.DataFrame) -> pd.DataFrame:
    """The peers' scored cases (``bench/run_peers.py``) on the study's cases, with the class and reward-only flag."""
    p = pd.read_csv(FB.WORK / "peers" / "cases.csv")
    p["cutoff"] = p["cutoff"].round(4)
    key = pd.MultiIndex.from_arrays([B["run_id"], B["cutoff"].round(4)])
    p = p[pd.MultiIndex.from_arrays([p["run_id"], p["cutoff"]]).isin(key) & p["method"].isin(PEERS)].copy()
    flags = [f for f in CHANNEL_FLAGS if f != "has_spread"]
    ro = dict(zip(zip(B["run_id"], B["cutoff"].round(4), strict=True), ~B[flags].astype(bool).any(axis=1), strict=True))
    p["cls"] = p["run_id"].map(B.drop_duplicates("run_id").set_index("run_id")["cls"])
    p["reward_only"] = [bool(ro[k]) for k in zip(p["run_id"], p["cutoff"], strict=True)]
    return p


def headline(T: pd.DataFrame, methods) -> tuple[list[str], dict]:
    """Per cutoff: cov80, cov50 and mean nCRPS of ``methods``, the best peer's nCRPS and each method's ratio to it."""
    lines = ["| cutoff | method | cov80 | cov50 | mean nCRPS | best peer (nCRPS) | ratio to best peer | "
             "every peer beaten |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    res = {}
    for c, g in T.groupby("cutoff"):
        g = g.set_index("method")
        pr = g.loc[[m for m in PEERS if m in g.index], "mean_ncrps"]
        best, best_m = float(pr.min()), str(pr.idxmin())
        for m in methods:
            if m not in g.index:
                continue
            r = g.loc[m]
            ratio = float(r["mean_ncrps"] / best)
            res.setdefault(m, {})[f"{c:g}"] = dict(cov80=float(r["cover80"]), cov50=float(r["cover50"]),
                                                   crps=float(r["mean_ncrps"]), best_peer=best_m,
                                                   best_peer_crps=best, ratio=ratio)  # fmt: skip
            lines.append(f"| {c:g} | {m} | {r['cover80']:.0%} | {r['cover50']:.0%} | {r['mean_ncrps']:.3f} | "
                         f"{best_m} ({best:.3f}) | {ratio:.2f}x | {'yes' if ratio < 1 else 'no'} |")  # fmt: skip
    return lines, res


def target_lines(S: pd.DataFrame, W: pd.DataFrame, cases: pd.DataFrame, m: str) -> tuple[list[str], dict]:
    """The issue's targets for method ``m``, met or not."""
    mark = lambda ok: "met" if ok else "**not met**"  # noqa: E731
    out, res = [], {}
    for title, T in (("source-weighted", W), ("per case", S)):
        g = T[T["method"] == m].set_index("cutoff")
        c80 = {f"{c:g}": bool(COV80[0] <= v <= COV80[1]) for c, v in g["cover80"].items()}
        c50 = {f"{c:g}": bool(COV50[0] <= v <= COV50[1]) for c, v in g["cover50"].items()}
        res[title] = dict(cov80=c80, cov50=c50)
        out.append(f"- {title}: cov80 in 0.75-0.85 at " + ", ".join(f"{k} {mark(v)}" for k, v in c80.items())
                   + "; cov50 in 0.42-0.58 at " + ", ".join(f"{k} {mark(v)}" for k, v in c50.items()))  # fmt: skip
    _, wmean = FB.worst_sources(cases, m)
    b = cases[cases["method"] == m]
    cl = {c: float(b.loc[b["cls"] == c, "cover80"].mean()) for c in ("S-curve", "decline/collapse")}
    res.update(worst5_cov80=wmean, classes_cov80=cl)
    out.append(f"- the five worst sources' mean cov80 {wmean:.2f} (>= 0.5: {mark(wmean >= 0.5)})")
    out.append("- classes cov80 >= 0.65: " + ", ".join(f"{c} {v:.0%} ({mark(v >= 0.65)})" for c, v in cl.items()))
    return out, res


def spread_ledger() -> list[str]:
    """The spread channel in the degeneracy kind's fit (``--channels``): its ledger against the reward-only
    degeneracy ledger on the cases both have (raw draws, no layer)."""
    a, d = FB.load_cases("degeneracy_spread"), FB.load_cases("degeneracy")
    if a.empty:
        return ["No ledger of the degeneracy kind with the spread channel (`degeneracy_spread`)."]
    key = ["run_id", "cutoff"]
    a, d = a[a["ok"].astype(bool)], d[d["ok"].astype(bool)]
    j = a.merge(d, on=key, suffixes=("_spread", "_reward"))
    lines = [f"`bench/results/forecast_runs/dev/degeneracy_spread` covers {j['run_id'].nunique()} runs of "
             f"{j['source_spread'].nunique()} sources ({len(j)} cases; the other sources were never run with the "
             "channel): the degeneracy kind's raw draws with the spread channel against without it on these cases.",
             "", "| cutoff | cases | cov80 with | cov80 without | cov50 with | cov50 without | nCRPS with | "
             "nCRPS without |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for c, g in j.groupby("cutoff"):
        lines.append(f"| {c:g} | {len(g)} | {g['cover80_spread'].mean():.0%} | {g['cover80_reward'].mean():.0%} | "
                     f"{g['cover50_spread'].mean():.0%} | {g['cover50_reward'].mean():.0%} | "
                     f"{g['ncrps_spread'].mean():.3f} | {g['ncrps_reward'].mean():.3f} |")  # fmt: skip
    return lines


def write_report(B, cases, table, pick, weights, shipped, hz_info, *, default: bool, helps: bool) -> None:
    peers = peer_cases(B)
    cases = cases.assign(cutoff=cases["cutoff"].round(4))
    both = pd.concat([cases, peers], ignore_index=True)
    S, W = summarize(both), summarize_weighted(both)
    ev = B[[f"ev_{k}" for k in KINDS]].to_numpy(float)
    d_deg, d_log = ev[:, 1] - ev[:, 0], ev[:, 2] - ev[:, 0]
    shape, _, _rule = parse(pick) if pick != "today" else ("oscillator", None, None)
    n_kinds = np.array([len(w) for w in weights]) if weights is not None else np.ones(len(B))
    head = [m for m in ("today", "kind:oscillator", UNPACKAGED, f"{shape}|raw", pick) if m in set(cases["method"])]
    head = list(dict.fromkeys(head))
    t = table.set_index("method")

    def cells(m):
        return f"{t.loc[m, 'targets']} coverage cells, mean nCRPS {t.loc[m, 'crps']:.3f}"

    if pick == "today":
        verdict = "No variant forecasts the reward-only runs no worse than today's: nothing ships, the default stays."
    else:
        verdict = (f"The rule chooses `{pick}` ({cells(pick)}; today's shipped forecaster: {cells('today')}; "
                   f"`--model auto` without package data, `{UNPACKAGED}`: {cells(UNPACKAGED)}). "
                   + ("It beats today's forecaster by the rule: it qualifies as the default (the default shipped: "
                      f"`{shipped_default()}`; see the decision below). " if default else
                      "It does not beat today's forecaster: today's default stays, auto stays opt-in. ")
                   + (f"It beats `{UNPACKAGED}`: its package data ships for `--model auto`." if helps else
                      f"It does not beat `{UNPACKAGED}`: no package data ships."))  # fmt: skip
    md = ["# The shape per run, the hazard of leaving, the conditioned interval layer (leave-one-source-out)", "",
          f"Regenerate: `{CMD} --stage evidence && {CMD}` (after the forecast benchmark's ledgers). "
          f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.", "",
          __doc__.split("Protocol\n--------\n")[1].strip(), "",
          f"**Cases.** {len(B)} run x cutoff cases of {B['run_id'].nunique()} runs from {B['source'].nunique()} "
          f"sources (cutoffs {', '.join(f'{c:g}' for c in sorted(B['cutoff'].unique()))}): every case that all "
          f"three kinds' ledgers scored; {int(B['event'].sum())} of them left their regime after the cutoff (final "
          f"more than {FALL:g} of the range below the level at the cutoff; {B.loc[B['event'], 'source'].nunique()} "
          f"sources). Peers: {', '.join(PEERS)} on the same cases (`bench/run_peers.py`).", "",
          f"**Verdict.** {verdict}", "",
          "## 0. Headline: the shipped variant against today's and the peers", "",
          "Source-weighted (each source counts the same; the headline):", "", *headline(W, head)[0], "",
          "Per case:", "", *headline(S, head)[0], ""]  # fmt: skip
    js_targets = {}
    for m in dict.fromkeys(("today", pick)):
        tl, tr = target_lines(S, W, both, m)
        js_targets[m] = tr
        ws, _ = FB.worst_sources(both, m)
        md += [f"Targets, `{m}`:", "", *tl, "", f"The five worst sources (`{m}`, mean coverage over their cases):",
               "", *ws, "", FB._sampler_line(both, m, "today")[0], ""]  # fmt: skip
    md += ["Per class of run (" + CLASS_RULE + "):", "",
           *FB.class_table(both, list(dict.fromkeys((pick, "today", "kind:oscillator", "kind:degeneracy",
                                                              "kind:logistic", "last_value", "exponential")))),
           "", "## 1. Evidence per run", "",
           "Block evidence (log p(later half of the prefix | first half), Laplace on each kind's compiled model, "
           "LOSO priors) relative to the oscillator's, over the cases:", "",
           "| kind | median | 10% | 90% | share > +1 nat | share < -1 nat |", "|---|---|---|---|---|---|"]  # fmt: skip
    for name, d in (("degeneracy", d_deg), ("logistic", d_log)):
        d = d[np.isfinite(d)]
        md.append(f"| {name} | {np.median(d):+.2f} | {np.quantile(d, 0.1):+.2f} | {np.quantile(d, 0.9):+.2f} | "
                  f"{(d > 1).mean():.0%} | {(d < -1).mean():.0%} |")  # fmt: skip
    cpu = B[[f"evcpu_{k}" for k in KINDS]].sum(axis=1)
    timed = ", ".join(f"{k} {1000 * v:.0f} ms" for k, v in EVIDENCE_SECONDS.items())
    md += ["", f"The evidence of a kind costs (median over {TIMING_CASES} cases, the best of 5 timings each: "
           f"`{TIMING.relative_to(ROOT)}`) {timed} -- against ~1 s for a posterior fit; the CPU seconds of the "
           f"evidence stage itself, {cpu.median():.2f} s per case for the three kinds (median), were inflated by "
           "the other jobs sharing the 2 cores. Under the chosen shape "
           f"({shape}: {json.dumps(SHAPES[shape].prior.model_dump())}, min weight {SHAPES[shape].min_weight:g}) "
           f"{(n_kinds > 1).mean():.0%} of the forecasts keep more than one kind "
           f"({(B['at_floor'] > 0).mean():.0%} of the cases sit at their floor).", "",
           "## 2. Every variant (shape | hazard | interval rule), leave-one-source-out", "",
           "`targets`: coverage cells met of 16 (cov80 in 0.75-0.85 and cov50 in 0.42-0.58 at 4 cutoffs, per case "
           "and source-weighted); `crps`: mean nCRPS over the cutoffs per case, `crps_w` source-weighted; "
           "`reward_only`: mean nCRPS of the runs that log no precursor channel (must not exceed today's); "
           "`seconds`: per forecast (the kinds' fits from the ledgers + the evidence). Interval rules: "
           + "; ".join(f"`{k}` {v[0]}" for k, v in RULES.items()) + ".", "", "```",
           table.round(4).to_string(index=False), "```", "", f"**Chosen: `{pick}`.**", ""]  # fmt: skip
    for title, T in (("Per case", S), ("Source-weighted", W)):
        for col, fmt in (("cover80", "{:.0%}"), ("cover50", "{:.0%}"), ("mean_ncrps", "{:.3f}")):
            md += [f"{title}, {col}:", "", *_pivot(T, head, col, fmt), ""]
    md += [
        "## 3. The hazard of leaving the regime",
        "",
        "Leave-one-source-out probability of leaving, events against the other cases (rank AUC: 0.5 = no information):",
        "",
        "| inputs | AUC | mean P(leave), events | mean P(leave), others |",
        "|---|---|---|---|",
    ]
    for n, h in hz_info.items():
        md.append(f"| {n} | {h['auc']:.2f} | {h['p_event']:.3f} | {h['p_other']:.3f} |")
    if "hazard" in shipped:
        hz = shipped["hazard"]
        md += [
            "",
            "Shipped hazard (fitted on every case; coefficients per robust spread of each input):",
            "",
            "```",
            json.dumps({k: hz[k] for k in ("features", "coef", "intercept", "outcome")}, indent=1),
            "```",
        ]
    md += ["", "## 4. Channels: with and without, each ablated", "",
           "The precursor channels (KL, entropy, length, zero-spread share, spread) enter the chosen variant "
           "through the hazard's and the interval layer's inputs; below, each as if not logged (its presence "
           "flag and its precursor set to 0, hazard and layer refitted leave-one-source-out), and none. The "
           "kinds' posterior fits in the three ledgers read the reward only.", ""]  # fmt: skip
    abl = [m for m in cases["method"].unique() if " without " in m]
    if abl:
        for title, T in (("Per case", S), ("Source-weighted", W)):
            for col, fmt in (("cover80", "{:.0%}"), ("mean_ncrps", "{:.3f}")):
                md += [f"{title}, {col}:", "", *_pivot(T, [pick, *abl], col, fmt), ""]
    else:
        md += ["The chosen variant has neither a hazard nor an interval layer: no channel enters it.", ""]
    md += [
        "The spread as an observation channel of the degeneracy kind (`--channels`, `models/spread.py`):",
        "",
        *spread_ledger(),
        "",
    ]
    md += [
        "## 5. Transfer gap of the interval layer",
        "",
        "Coverage with the hazard and layer fitted on every case (in-sample) against leave-one-source-out:",
        "",
    ]
    if f"{pick} in-sample" in set(cases["method"]):
        for title, T in (("Per case", S), ("Source-weighted", W)):
            for col in ("cover80", "cover50"):
                md += [f"{title}, {col}:", "", *_pivot(T, [f"{pick} in-sample", pick], col, "{:.0%}"), ""]
    if "intervals" in shipped:
        lay = shipped["intervals"]
        md += [f"Shipped layer (rule `{lay['rule']}`, groups {lay['provenance'].get('groups')}): shifts of the levels "
               f"{lay['levels']} in units of the run's scale, per fraction {lay['grid']}:", "", "```",
               json.dumps(lay["shifts"], indent=1), "```", ""]  # fmt: skip
    notes = RES / "quality_study_notes.md"  # the decision and the fan charts, judged by hand
    if notes.exists():
        md += ["## 6. Decision and fan charts", "", notes.read_text(), ""]
    (RES / "quality_study.md").write_text("\n".join(md) + "\n")
    js = {"chosen": pick, "rule_says_default": default, "default_shipped": shipped_default(),
          "package_data": bool(shipped), "table": table.to_dict("records"), "summary": S.to_dict("records"),
          "summary_weighted": W.to_dict("records"), "targets": js_targets,
          "headline": {"source_weighted": headline(W, head)[1], "per_case": headline(S, head)[1]},
          "shipped": shipped, "cases": int(len(B)), "sources": int(B["source"].nunique()),
          "hazard_check": {k: {kk: vv for kk, vv in v.items() if kk != "p"} for k, v in hz_info.items()}}  # fmt: skip
    (RES / "quality_study.json").write_text(json.dumps(js, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
