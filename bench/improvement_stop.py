"""Does ``ImprovementStop`` fire on runs that have plateaued, and how often wrongly? (issue 19, item 9)

The callback's rule: stop when ``P(final reward >= best so far + delta) < epsilon`` for ``patience``
consecutive forecasts, "best so far" the best mean of 5 consecutive logged rewards
(:func:`bayesgrpo.series.best_window_mean`, the callback's own definition). It is run
here, as it runs live, through forecasts made at every 5% of each development run -- the final-reward
draws of the stop-advice study's ledger (``bench/stop_study.py --stage forecasts``: leave-one-source-out
priors, no layer; the shipped calibration layer of the oscillator is applied here, as the callback
applies it) -- for the README's parameters and a grid of alternatives. A stop at a checkpoint saves
``(H - step) / (H - s0)`` of the run and loses ``max(0, final - level) / range`` (``level``: the current
level at the stop, the mean of the last tenth of the prefix as in :func:`bench/calibration_variants.leave_anchor`;
``range``: the run's robust range); a **bad stop** loses more than 0.1 of the range.
The **oracle** stops at the first checkpoint whose true remaining gain is below 0.05 of the range; a
run the oracle stops by half its span has **plateaued early** (the runs a stop rule is for).

    python bench/improvement_stop.py [--ledger DIR]     # writes bench/results/improvement_stop.md / .json

``--ledger`` defaults to ``bench/results/stop_runs/oscillator`` (the stop-advice study's ledger); until
that study is merged, pass the folder where it was written.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from calibration_variants import leave_anchor  # noqa: E402  (bench/: the research variants of the layer)

from bayesgrpo.forecast.calibration import Calibration  # noqa: E402
from bayesgrpo.io import read_runs  # noqa: E402
from bayesgrpo.series import best_window_mean  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
RES = ROOT / "bench" / "results"
BAD = 0.1  # a stop that loses more than this share of the run's range is bad
ORACLE_GAIN = 0.05  # the oracle stops once less than this share of the range is still to come
README = {"delta": ("abs", 0.01), "epsilon": 0.05, "patience": 3}  # the README's example


def _runs():
    parts = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for f in ("grpo-public", "grpo-extra", "grpo-more"):
            parts.append(read_runs(SHARED / f / "runs.csv", meta=SHARED / f / "meta.csv"))
    return {r: rs.run(r) for rs in parts for r in rs.run_ids}


def _cases(ledger: Path, runs: dict) -> pd.DataFrame:
    cal = Calibration.default("oscillator")
    rows = []
    for d in sorted(Path(ledger).glob("*")):
        if not (d / "cases.csv").exists() or not (d / "draws.npz").exists():
            continue
        cases = pd.read_csv(d / "cases.csv")
        with np.load(d / "draws.npz") as z:
            draws = {k: z[k] for k in z.files}
        for r in cases[cases["ok"].astype(bool)].itertuples():
            key = f"{r.run_id}|{r.cutoff:g}|{r.method}"
            if key not in draws or r.run_id not in runs:
                continue
            g = runs[r.run_id]
            pre = g.loc[g["step"] <= r.observed_until, "reward"].to_numpy(dtype=float)
            x = cal.apply(draws[key].astype(float), fraction=float(r.cutoff), scale=float(r.scale))
            rows.append({"run_id": r.run_id, "source": r.source, "cutoff": r.cutoff, "step": r.observed_until,
                         "s0": r.s0, "H": r.horizon, "truth": r.truth, "range": r.range, "scale": r.scale,
                         "best": best_window_mean(pre, 5), "level": leave_anchor(pre)[0], "draws": x})  # fmt: skip
    return pd.DataFrame(rows).sort_values(["run_id", "cutoff"]).reset_index(drop=True)


def _delta(spec, scale: float) -> float:
    kind, v = spec
    return v if kind == "abs" else v * scale


def simulate(cases: pd.DataFrame, *, delta, epsilon: float, patience: int) -> pd.DataFrame:
    out = []
    for rid, g in cases.groupby("run_id", sort=False):
        count, stop = 0, None
        for r in g.itertuples():
            p = float(np.mean(r.draws >= r.best + _delta(delta, r.scale)))
            count = count + 1 if p < epsilon else 0
            if count >= patience:
                stop = r
                break
        last = g.iloc[-1]
        oracle = next((r for r in g.itertuples() if (r.truth - r.level) / r.range < ORACLE_GAIN), None)
        early = oracle is not None and oracle.cutoff <= 0.5
        if stop is None:
            out.append({"run_id": rid, "source": last.source, "stopped": False, "saved": 0.0, "lost": 0.0,
                        "bad": False, "early": early, "delay": np.nan})  # fmt: skip
            continue
        lost = max(0.0, (stop.truth - stop.level) / stop.range)
        out.append({"run_id": rid, "source": stop.source, "stopped": True,
                    "saved": (stop.H - stop.step) / (stop.H - stop.s0), "lost": lost, "bad": lost > BAD,
                    "early": early,
                    "delay": stop.cutoff - oracle.cutoff if oracle is not None else np.nan})  # fmt: skip
    return pd.DataFrame(out)


def _summary(sim: pd.DataFrame, weighted: bool) -> dict:
    if weighted:
        by = sim.groupby("source")
        f = lambda col: float(by[col].mean().mean())  # noqa: E731
    else:
        f = lambda col: float(sim[col].mean())  # noqa: E731
    early = sim[sim["early"]]
    return {"stopped": f("stopped"), "saved": f("saved"), "bad": f("bad"), "lost": f("lost"),
            "plateaued_stopped": float(early["stopped"].mean()),
            "plateaued_delay": float(early.loc[early["stopped"], "delay"].median())}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ledger", type=Path, default=RES / "stop_runs" / "oscillator")
    args = ap.parse_args()
    runs = _runs()
    cases = _cases(args.ledger, runs)
    grid = [(d, e, p) for d in (("abs", 0.01), ("abs", 0.0), ("scale", 0.0), ("scale", 0.02), ("scale", 0.05))
            for e in (0.05, 0.1, 0.2, 0.3) for p in (1, 2, 3)]  # fmt: skip
    res = []
    for d, e, p in grid:
        sim = simulate(cases, delta=d, epsilon=e, patience=p)
        res.append({"delta": f"{d[1]:g}" + (" x scale" if d[0] == "scale" else ""), "epsilon": e, "patience": p,
                    **{f"run_{k}": v for k, v in _summary(sim, False).items()},
                    **{f"src_{k}": v for k, v in _summary(sim, True).items()}})  # fmt: skip
    t = pd.DataFrame(res)
    n_runs, n_src = cases["run_id"].nunique(), cases["source"].nunique()
    n_plat = int(simulate(cases, delta=("abs", 0.0), epsilon=0.05, patience=1)["early"].sum())
    md = ["# ImprovementStop on forecasts at every 5% of the development runs", "",
          f"Regenerate: `python bench/improvement_stop.py --ledger DIR` (module docstring). {n_runs} runs of {n_src} "
          f"sources, {len(cases)} forecasts (checkpoints 0.05 ... 0.95); {n_plat} runs plateaued early (the oracle "
          f"stops them by half their span: less than {ORACLE_GAIN:g} of the range still to come). Ledger: "
          f"`{args.ledger}` as read on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. "
          f"Bad stop: more than {BAD:g} of the range lost. README example: delta 0.01, epsilon 0.05, patience 3.", "",
          "| delta | epsilon | patience | stopped (runs) | plateaued early: stopped | their delay (share of the run, "
          "median) | steps saved | bad stops | reward lost | stopped (src-weighted) | steps saved (src-w.) | bad stops "
          "(src-w.) |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in t.itertuples():
        md.append(f"| {r.delta} | {r.epsilon:g} | {r.patience} | {r.run_stopped:.0%} | {r.run_plateaued_stopped:.0%} | "
                  f"{r.run_plateaued_delay:.2f} | {r.run_saved:.0%} | {r.run_bad:.0%} | {r.run_lost:.3f} | "
                  f"{r.src_stopped:.0%} | {r.src_saved:.0%} | {r.src_bad:.0%} |")  # fmt: skip
    (RES / "improvement_stop.md").write_text("\n".join(md) + "\n")
    (RES / "improvement_stop.json").write_text(json.dumps(t.to_dict("records"), indent=1))
    print("\n".join(md))


if __name__ == "__main__":
    main()
