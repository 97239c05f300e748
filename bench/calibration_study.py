"""Which calibration layer to ship, decided leave-one-source-out on the forecast benchmark's ledgers;
writes bench/results/calibration_study.md (+ .json) and the shipped layers
bayesgrpo/resources/calibration_<kind>.json.

    .venv/bin/python bench/forecast_benchmark.py --config oscillator   # the ledgers (draws per case)
    .venv/bin/python bench/calibration_study.py --config oscillator --config degeneracy

For every source S, each variant of the layer (``bayesgrpo.forecast.calibration.fit_calibration``) is
fitted on the backtest cases of every OTHER source and applied to S's draws, which are re-scored:

* ``none``: the model's own draws;
* ``widths``: split-conformal width of each tail per observed fraction, free to narrow (to 0.5x);
* ``widen``: the same, never narrowing (``w_min = 1``) -- the shipped layer;
* ``leave``: a population share of draws that leave the regime (end uniformly between the floor and
  the current level: a decline or collapse), the share per fraction minimising CRPS;
* ``leave+widen``: both.

The shipped layer of each kind is the ``widen`` variant fitted on every case (all sources); its
provenance names this command, the cases and the date.
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
from devdata import SELECTION, load_dev  # noqa: E402

from bayesgrpo.evaluation.report import markdown_table  # noqa: E402
from bayesgrpo.evaluation.scoring import score_draws, summarize, summarize_weighted  # noqa: E402
from bayesgrpo.forecast.calibration import fit_calibration, leave_anchor  # noqa: E402

CMD = ".venv/bin/python bench/calibration_study.py"
VARIANTS = {
    "none": None,
    "widths": dict(w_min=0.5),
    "widen": dict(w_min=1.0),
    "leave": dict(w_min=1.0, leave=True, widths=False),
    "leave+widen": dict(w_min=1.0, leave=True),
}
SHIPPED = "widen"


def ledger(name: str, runs) -> tuple[pd.DataFrame, list]:
    """The config's scored bayesgrpo cases with their draws, the anchors of the leave component."""
    cases, draws = FB.load_cases(name), FB.load_draws(name)
    b = cases[cases["ok"].astype(bool)].copy()
    b["key"] = [f"{r}|{c:g}|{m}" for r, c, m in zip(b["run_id"], b["cutoff"], b["orig_method"])]
    b = b[b["key"].isin(draws)].reset_index(drop=True)
    anchors = []
    for r in b.itertuples():
        d = runs.run(r.run_id)
        rmin = runs.meta.loc[r.run_id].get("reward_min", np.nan) if "reward_min" in runs.meta else np.nan
        anchors.append(leave_anchor(d.loc[d["step"] <= r.observed_until, "reward"].to_numpy(),
                                    float(rmin) if pd.notna(rmin) else np.nan))  # fmt: skip
    b["level"], b["floor"] = (np.array(a) for a in zip(*anchors))
    return b, [draws[k] for k in b["key"]]


def fit_variant(cases, draws, spec, name):
    spec = dict(spec)
    widths = spec.pop("widths", True)
    cal = fit_calibration(cases, draws=draws, name=name, **spec)
    if not widths:
        cal = cal.model_copy(update={"w_up": (1.0,) * len(cal.fraction_grid), "w_dn": (1.0,) * len(cal.fraction_grid)})
    return cal


def loso_rows(name: str, b: pd.DataFrame, draws: list) -> tuple[pd.DataFrame, dict]:
    rows, layers = [], {v: {} for v in VARIANTS}
    for s in sorted(b["source"].unique()):
        tr = np.flatnonzero(b["source"].to_numpy() != s)
        te = np.flatnonzero(b["source"].to_numpy() == s)
        for v, spec in VARIANTS.items():
            cal = None if spec is None else fit_variant(b.iloc[tr], [draws[i] for i in tr], spec, f"loso-{v}")
            if cal is not None:
                layers[v][s] = dict(w_up=cal.w_up, w_dn=cal.w_dn, p_leave=cal.p_leave)
            for i in te:
                r = b.iloc[i]
                x = draws[i] if cal is None else cal.apply(draws[i], fraction=r.cutoff, level=r.level, floor=r.floor)
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
        out[name] = dict(per_case=S.to_dict("records"), source_weighted=W.to_dict("records"))
        kind = FB.CONFIGS[name]["model"]
        if name == kind:  # the shipped layer of the kind: fitted on every case
            cal = fit_variant(b, draws, VARIANTS[SHIPPED], f"calibration-{kind}-{stamp}")
            cal = cal.model_copy(update={"provenance": {**cal.provenance, "command": CMD, "data": SELECTION,
                                                        "ledger": f"bench/results/forecast_runs/dev/{name}", "date": stamp}})  # fmt: skip
            cal.save(ROOT / "bayesgrpo" / "resources" / f"calibration_{kind}.json")
            md += [f"Shipped `bayesgrpo/resources/calibration_{kind}.json` ({SHIPPED}, every case): "
                   f"w_up {cal.w_up}, w_dn {cal.w_dn} at fractions {cal.fraction_grid}; identity `{cal.identity}`.", ""]  # fmt: skip
        print(name, "done", flush=True)
    (FB.RES / "calibration_study.md").write_text("\n".join(md) + "\n")
    (FB.RES / "calibration_study.json").write_text(json.dumps(out, indent=1, default=float) + "\n")


if __name__ == "__main__":
    main()
