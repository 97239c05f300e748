"""Which calibration layer to ship, decided leave-one-source-out on the forecast benchmark's ledgers;
writes bench/results/calibration_study.md (+ .json) and the shipped layers
bayesgrpo/resources/calibration_<kind>.json.

    .venv/bin/python bench/forecast_benchmark.py --config oscillator   # the ledgers (draws per case)
    .venv/bin/python bench/calibration_study.py --config oscillator --config degeneracy

For every source S, each variant of the layer is fitted on the backtest cases of every OTHER source and
applied to S's draws, which are re-scored (``shift`` is the package's layer,
``bench/fit_layers.py::fit_calibration``; the others are research variants,
``bench/calibration_variants.py``):

* ``none``: the model's own draws;
* ``widths``: split-conformal width of each tail per observed fraction, free to narrow (to 0.5x);
* ``widen``: the same, never narrowing (``w_min = 1``);
* ``leave``: a population share of draws that leave the regime (end uniformly between the floor and
  the current level: a decline or collapse), the share per fraction minimising CRPS;
* ``leave+widen``: both;
* ``shift``: conformalised quantile regression (additive): each tail's 10% / 90% point moves out by a
  population quantile of the misses in units of the run's normalisation scale -- it widens an
  interval of almost no width (a flat prefix), which a ratio cannot;
* ``widen|past-peak``: ``widen`` fitted separately for prefixes past their peak (the mean of the last
  tenth more than 0.1 of the range below the prefix's highest running mean of that length: a
  decline has begun) and the others -- the reward-only precursor of a decline.

The shipped layer of each kind is the variant (of those the forecaster can apply: not the split one)
that meets the most coverage targets leave-one-source-out (ties: the lower CRPS; ``choose``), refitted on every case (all sources); its provenance names this
command, the cases and the date.
"""

from __future__ import annotations

import argparse
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
from calibration_variants import apply_layer, fit_variant_layer, leave_anchor  # noqa: E402
from devdata import SELECTION, load_dev  # noqa: E402

from bayesgrpo.evaluation.report import markdown_table  # noqa: E402
from bayesgrpo.evaluation.scoring import score_draws, summarize, summarize_weighted  # noqa: E402
from bench.fit_layers import fit_calibration  # noqa: E402

CMD = ".venv/bin/python bench/calibration_study.py"
VARIANTS = {
    "none": None,
    "widths": dict(w_min=0.5),
    "widen": dict(w_min=1.0),
    "leave": dict(w_min=1.0, leave=True, widths=False),
    "leave+widen": dict(w_min=1.0, leave=True),
    "widen|past-peak": dict(w_min=1.0, split="past_peak"),
    "shift": dict(additive=True),
}
PEAK_DROP = 0.1  # of the run's range: a prefix this far below its running peak is past its peak
#: the shipped variant: most coverage targets met (cov80 in 0.75-0.85 and cov50 in 0.42-0.58, per case
#: and source-weighted, at each cutoff: 16 cells), ties broken by the mean of the per-case nCRPS
COV80, COV50 = (0.75, 0.85), (0.42, 0.58)


def ledger(name: str, runs) -> tuple[pd.DataFrame, list]:
    """The config's scored bayesgrpo cases with their draws, the anchors of the leave component."""
    cases, draws = FB.load_cases(name), FB.load_draws(name)
    b = cases[cases["ok"].astype(bool) & cases["run_id"].isin(runs.run_ids)].copy()  # the ledger covers more sets
    b["key"] = [f"{r}|{c:g}|{m}" for r, c, m in zip(b["run_id"], b["cutoff"], b["orig_method"], strict=True)]
    b = b[b["key"].isin(draws)].reset_index(drop=True)
    anchors = []
    for r in b.itertuples():
        d = runs.run(r.run_id)
        rmin = runs.meta.loc[r.run_id].get("reward_min", np.nan) if "reward_min" in runs.meta else np.nan
        anchors.append(leave_anchor(d.loc[d["step"] <= r.observed_until, "reward"].to_numpy(),
                                    float(rmin) if pd.notna(rmin) else np.nan))  # fmt: skip
    b["level"], b["floor"] = (np.array(a) for a in zip(*anchors, strict=True))
    drop = []  # the running peak of the prefix above its level (leave_anchor's: the mean of the last tenth)
    for r in b.itertuples():
        d = runs.run(r.run_id)
        y = d.loc[d["step"] <= r.observed_until, "reward"].to_numpy()
        k = max(3, int(np.ceil(0.1 * y.size)))
        drop.append((pd.Series(y).rolling(k, min_periods=1).mean().max() - r.level) / r.range)
    b["past_peak"] = np.array(drop) > PEAK_DROP
    b["scale"] = [case_scale(runs, r.run_id, r.observed_until, r.horizon) for r in b.itertuples()]
    return b, [draws[k] for k in b["key"]]


def case_scale(runs, rid: str, until: int, horizon: int) -> float:
    """The normalisation scale a forecast of the prefix uses (``RunInfo.scale``, run units)."""
    import warnings

    from bayesgrpo.models.arrays import prepare_arrays

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant prefixes warn; their scale is what is wanted
        _, infos = prepare_arrays(runs.select([rid]).truncate(until_step=int(until)), horizon=int(horizon))
    return float(infos[0].scale)


def choose(S: pd.DataFrame, W: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """The variant to ship (see COV80/COV50) and the table of cells met per variant."""
    rows = []
    for v in VARIANTS:
        if VARIANTS[v] and VARIANTS[v].get("split"):
            continue  # studied, not a candidate: the forecaster takes no precursor input (yet)
        met, n = 0, 0
        for T in (S, W):
            g = T[T["method"].str.endswith(":" + v)]
            met += int(g["cover80"].between(*COV80).sum() + g["cover50"].between(*COV50).sum())
            n += 2 * len(g)
        rows.append(
            dict(
                variant=v,
                targets_met=met,
                cells=n,
                mean_ncrps=float(S[S["method"].str.endswith(":" + v)]["mean_ncrps"].mean()),
            )
        )
    t = pd.DataFrame(rows).sort_values(["targets_met", "mean_ncrps"], ascending=[False, True])
    return str(t.iloc[0]["variant"]), t


def fit_variant(cases, draws, spec, name):
    """The layer of one variant: the package's (``additive``) or a research one (``calibration_variants``)."""
    spec = dict(spec)
    split = spec.pop("split", None)
    if split:  # one layer per group of the split column
        return {g: fit_variant(cases[cases[split] == g], [d for d, m in zip(draws, cases[split] == g, strict=True) if m],
                               spec, name) for g in (False, True)}  # fmt: skip
    if spec.pop("additive", False):
        return fit_calibration(cases, name=name, **spec)
    widths = spec.pop("widths", True)
    cal = fit_variant_layer(cases, draws=draws, name=name, **spec)
    if not widths:
        cal = cal.model_copy(update={"w_up": (1.0,) * len(cal.fraction_grid), "w_dn": (1.0,) * len(cal.fraction_grid)})
    return cal


def loso_rows(name: str, b: pd.DataFrame, draws: list) -> tuple[pd.DataFrame, dict]:
    rows, layers = [], {v: {} for v in VARIANTS}
    for s in sorted(b["source"].unique()):
        tr = np.flatnonzero(b["source"].to_numpy() != s)
        te = np.flatnonzero(b["source"].to_numpy() == s)
        for v, spec in VARIANTS.items():
            fitted = None if spec is None else fit_variant(b.iloc[tr], [draws[i] for i in tr], spec, f"loso-{v}")
            if fitted is not None and not isinstance(fitted, dict):
                layers[v][s] = {k: getattr(fitted, k) for k in ("w_up", "w_dn", "p_leave", "c_up", "c_dn")
                                if hasattr(fitted, k)}  # fmt: skip
            for i in te:
                r = b.iloc[i]
                cal = fitted[bool(r.past_peak)] if isinstance(fitted, dict) else fitted
                x = draws[i] if cal is None else apply_layer(cal, draws[i], fraction=r.cutoff, level=r.level,
                                                             floor=r.floor, scale=r.scale)  # fmt: skip
                row = dict(run_id=r.run_id, source=s, cutoff=r.cutoff, method=f"{name}:{v}", ok=True, seconds=0.0)
                row.update(score_draws(x, r.truth, r["range"]))
                rows.append(row)
    return pd.DataFrame(rows), layers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", action="append", help="benchmark configuration(s) whose ledgers to study")
    args = ap.parse_args()
    configs = args.config or ["oscillator"]
    runs = load_dev()
    cols = ["cutoff", "method", "n", "median_nae", "mean_ncrps", "cover50", "cover80", "cover90"]
    md = ["# Which calibration layer to ship (leave-one-source-out)", "", f"Regenerate: `{CMD} "
          + " ".join(f"--config {c}" for c in configs) + "` (after `bench/forecast_benchmark.py`)", "",
          __doc__.split("\n\n", 2)[2].split("\n\nThe shipped")[0], ""]  # fmt: skip
    out = {}
    stamp = time.strftime("%Y-%m-%d")
    for name in configs:
        b, draws = ledger(name, runs)
        if b.empty:
            print(f"{name}: no ledger; run bench/forecast_benchmark.py --config {name} first")
            continue
        df, layers = loso_rows(name, b, draws)
        S, W = summarize(df), summarize_weighted(df)
        md += [f"## {name} ({len(b)} cases, {b['run_id'].nunique()} runs, {b['source'].nunique()} sources)", "",
               "Per case:", "", markdown_table(S[[c for c in cols if c in S]]), "",
               "Source-weighted (each source the same):", "", markdown_table(W[[c for c in cols if c in W]]), "",
               "Median learned share leaving the regime per fraction (LOSO folds): "
               + ", ".join(f"{c:g}: {np.median([v['p_leave'][k] for v in layers['leave'].values()]):.2f}"
                           for k, c in enumerate(FB.CUTOFFS)), ""]  # fmt: skip
        shipped, score = choose(S, W)
        md += [
            "Coverage targets met per variant (of the cells: cov80 and cov50 at 4 cutoffs, per case and "
            "source-weighted); the shipped variant is the first row:",
            "",
            "```",
            score.to_string(index=False),
            "```",
            "",
        ]
        out[name] = dict(per_case=S.to_dict("records"), source_weighted=W.to_dict("records"),
                         choice=score.to_dict("records"), shipped=shipped)  # fmt: skip
        kind = FB.CONFIGS[name]["kind"]
        if name == kind and shipped == "none":  # no layer pays: the kind ships none (a stale one is removed)
            (ROOT / "bayesgrpo" / "resources" / f"calibration_{kind}.json").unlink(missing_ok=True)
            md += [f"No layer ships for `{kind}` (`none` met the most targets).", ""]
        if name == kind and shipped != "none":  # the kind's layer: refitted on every case
            cal = fit_variant(b, draws, VARIANTS[shipped], f"calibration-{kind}-{stamp}")
            cal = cal.model_copy(update={"provenance": {**cal.provenance, "command": CMD, "data": SELECTION,
                                                        "ledger": f"bench/results/forecast_runs/dev/{name}", "date": stamp}})  # fmt: skip
            cal.save(ROOT / "bayesgrpo" / "resources" / f"calibration_{kind}.json")
            pars = ", ".join(
                f"{k} {v}" for k, v in cal.model_dump(exclude={"name", "provenance", "fraction_grid"}).items()
            )
            md += [f"Shipped `bayesgrpo/resources/calibration_{kind}.json` ({shipped}, every case): {pars} at "
                   f"fractions {cal.fraction_grid}; identity `{cal.identity}`.", ""]  # fmt: skip
        print(name, "done", flush=True)
    (FB.RES / "calibration_study.md").write_text("\n".join(md) + "\n")
    (FB.RES / "calibration_study.json").write_text(json.dumps(out, indent=1, default=float) + "\n")


if __name__ == "__main__":
    main()
