"""Live collapse detection on the development runs: replay ``dynamical_instability`` every 10 logged points.

For every development run (``../shared/data/grpo-{public,extra,more}``, ``data/grpo-collected`` and the
W&B export ``../shared/data/log-formats/wandb_csv/three-runs_*TrainReward.csv``, read by path), the
diagnosis is replayed on the first ``k`` logged points for ``k = 10, 20, ...`` and the last point, as
``bayesgrpo watch`` / ``diagnose --until-step`` would see the run. Only the ``dynamical_instability`` mode
is replayed (the collapse detector; no posterior draws).

* **Real collapse** labels (fixed before the detector was changed): the rule of
  ``bench/diagnostics_validation.py`` (0/1 reward, some 10%-block mean >= 0.5, last-25% mean < 0.1),
  or the ``collapse`` regime tag of ``data/grpo-collected/meta.csv`` (set by reading each run), or one of
  the two runs of the W&B export named in issue 33 (``[paper]GRPO_online``, ``[paper]GSPO_online``).
* **Band exit** (:mod:`bayesgrpo.diagnose.collapse_band`, on the whole run): the ``w``-point trailing
  mean (``w = min(50, max(5, n // 10))``) falls below mean - 3 noise of its preceding plateau; the
  collapse's exit is the last exit before the rolling mean's lowest point after its highest one.
* **Lag**: logged points from the band exit to the first replay with ``critical`` (replays every 10
  points, so a lag is known to within 10 points; a critical before the exit gives a negative lag).
* **False alarm**: a run not labelled collapse with ``critical`` at any replay.

Both detectors are replayed: with the band check and without it (``_collapse`` alone, the detector
before issue 33), for the before/after numbers.

Usage: ``python bench/diagnose_live.py [--out bench/results/diagnose_live.md]``. Runtime ~4 min on one core.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import bayesgrpo.diagnose.instability as inst
from bayesgrpo.diagnose.collapse_band import band_exits, band_track
from bayesgrpo.io import read_runs

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
WANDB_RUNS = ("[paper]GRPO_online", "[paper]GSPO_online")
EVERY = 10
LAG_OK = 30


def _sets() -> list[tuple[str, pd.DataFrame, pd.DataFrame | None]]:
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, d in [(f, SHARED / f) for f in ("grpo-public", "grpo-extra", "grpo-more")] + [
            ("grpo-collected", ROOT / "data" / "grpo-collected")
        ]:
            if (d / "runs.csv").is_file():
                rs = read_runs(d / "runs.csv", meta=d / "meta.csv")
                out.append((name, rs.data, rs.meta))
        wb = sorted((SHARED / "log-formats" / "wandb_csv").glob("three-runs_*TrainReward.csv"))
        if wb:
            rs = read_runs(wb[0])
            out.append(("wandb-export", rs.data, None))
    return out


def rule_label(y: np.ndarray) -> bool:
    """The collapse rule of bench/diagnostics_validation.py."""
    if y.size < 10 or y.min() < -1e-9 or y.max() > 1 + 1e-9:
        return False
    blocks = [b.mean() for b in np.array_split(y, 10)]
    return bool(max(blocks) >= 0.5 and y[-max(2, y.size // 4) :].mean() < 0.1)


def collapse_exit(y: np.ndarray) -> int | None:
    """Index of the band exit of the collapse (module docstring)."""
    tr = band_track(y)
    r = tr["r"].to_numpy()
    if not np.isfinite(r).any():
        return None
    top = int(np.nanargmax(r))
    low = top + int(np.nanargmin(r[top:]))
    ex = band_exits(tr)
    ex = ex[ex <= low]
    return int(ex[-1]) if ex.size else None


def replay(df: pd.DataFrame) -> list[tuple[int, str]]:
    """(points used, severity) of dynamical_instability every EVERY points and at the end."""
    n = len(df)
    ks = list(range(EVERY, n, EVERY)) + [n]
    out = []
    for k in ks:
        if k < 8:
            continue
        f = inst._instability("r", df.iloc[:k], None, None)
        out.append((k, f.severity))
    return out


def evaluate() -> pd.DataFrame:
    """One row per development run: its label, band exit and the first critical replay."""
    rows = []
    for name, data, meta in _sets():
        for rid, g in data.groupby("run_id", sort=False):
            df = g.sort_values("step").reset_index(drop=True)
            df = df[np.isfinite(df["reward"].to_numpy(float))].reset_index(drop=True)
            y = df["reward"].to_numpy(float)
            regime = str(meta.loc[rid, "regime"]) if meta is not None and "regime" in meta.columns else ""
            why = [w for w, ok in (("rule", rule_label(y)), ("regime tag", "collapse" in regime),
                                   ("issue 33", name == "wandb-export" and rid in WANDB_RUNS)) if ok]  # fmt: skip
            rep = replay(df)
            crit = [k for k, s in rep if s == "critical"]
            row = {"set": name, "run_id": rid, "n": len(df), "collapse": bool(why), "label": ", ".join(why),
                   "first_critical_k": crit[0] if crit else None, "final": rep[-1][1] if rep else "none",
                   "tail": ", ".join(f"{v:.2f}" for v in y[-6:])}  # fmt: skip
            if why:
                e = collapse_exit(y)
                row["exit_k"] = None if e is None else e + 1
                row["exit_step"] = None if e is None else int(df["step"].iat[e])
                if e is not None and crit:
                    row["lag"] = crit[0] - (e + 1)
            rows.append(row)
    return pd.DataFrame(rows)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    t0 = time.time()
    after = evaluate()
    band = inst.band_collapse
    inst.band_collapse = lambda step, y: {"severity": "none", "onset": None, "text": "", "score": 0.0}
    try:
        before = evaluate()
    finally:
        inst.band_collapse = band
    text = report(after, before, time.time() - t0)
    print(text)
    if a.out:
        a.out.write_text(text)


def _summary(res: pd.DataFrame) -> list[str]:
    col, healthy = res[res["collapse"]], res[~res["collapse"]]
    ok = col["lag"].notna() & (col["lag"] <= LAG_OK) if "lag" in col else pd.Series(False, index=col.index)
    lag = col["lag"].dropna() if "lag" in col else pd.Series(dtype=float)
    return [
        f"real collapses critical within {LAG_OK} logged points of the band exit: **{int(ok.sum())}/{len(col)}** "
        f"({int(col['exit_k'].notna().sum())} have a band exit)",
        f"critical at some replay: {int(col['first_critical_k'].notna().sum())}/{len(col)}",
        f"lag from band exit to first critical (points): median {lag.median():.0f}, max {lag.max():.0f} "
        f"(over {lag.size} collapses with an exit and a critical)",
        f"runs not labelled collapse with a critical at any replay: **{int(healthy['first_critical_k'].notna().sum())}"
        f"/{len(healthy)}**",
    ]


def report(res: pd.DataFrame, before: pd.DataFrame, secs: float) -> str:
    col = res[res["collapse"]]
    fa = res[~res["collapse"] & res["first_critical_k"].notna()]
    fa_before = set(before.loc[~before["collapse"] & before["first_critical_k"].notna(), "run_id"])
    new = fa[~fa["run_id"].isin(fa_before)]
    sets = ", ".join(f"{k}: {v}" for k, v in res.groupby("set", sort=False).size().items())
    lines = [
        "# Live collapse detection (dynamical_instability replayed every 10 logged points)",
        "",
        f"Generated by `python bench/diagnose_live.py --out bench/results/diagnose_live.md` in {secs:.0f} s "
        "(both detectors). Definitions (labels, band exit, lag, false alarm): the script's docstring; the band: "
        "`bayesgrpo/diagnose/collapse_band.py`.",
        "",
        f"Runs: {len(res)} ({sets}); real collapses: {len(col)} (the W&B export's two runs are also in "
        "grpo-collected as Hetero-RL_grpo/gspo-online: the same data, counted twice).",
        "",
        "**With the band check (now):**",
        "",
        *[f"* {t}" for t in _summary(res)],
        "",
        "**Without it (before issue 33, `_collapse` alone):**",
        "",
        *[f"* {t}" for t in _summary(before)],
        "",
        "| set | run | points | label | band exit (point / step) | first critical (point): now | lag | "
        "before: first critical | before: lag | final |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    b = before.set_index(["set", "run_id"])
    for _, r in col.iterrows():
        rb = b.loc[(r["set"], r["run_id"])]
        cells = [_int(r.get("exit_k")) + (f" / {_int(r.get('exit_step'))}" if pd.notna(r.get("exit_k")) else ""),
                 _int(r["first_critical_k"]), _int(r.get("lag")), _int(rb["first_critical_k"]), _int(rb.get("lag"))]  # fmt: skip
        lines.append(
            f"| {r['set']} | {r['run_id']} | {r['n']} | {r['label']} | " + " | ".join(cells) + f" | {r['final']} |"
        )
    lines += [
        "",
        f"Runs not labelled collapse with a critical at some replay: {len(fa)} ({len(new)} not so before).",
        "",
    ]
    lines += ["| set | run | points | first critical (point) | final | new |", "|---|---|---|---|---|---|"]
    for _, r in fa.iterrows():
        lines.append(f"| {r['set']} | {r['run_id']} | {r['n']} | {int(r['first_critical_k'])} | {r['final']} | "
                     f"{'yes' if r['run_id'] in set(new['run_id']) else ''} |")  # fmt: skip
    if len(new):
        lines += ["", "The new ones, with their last 6 rewards (to judge the label):", ""]
        lines += [f"* {r['set']} / {r['run_id']}: {r['tail']}" for _, r in new.iterrows()]
    lines += [
        "",
        "A collapse without a band exit falls before a plateau can be measured (the band needs 4 windows: "
        "w points for the mean, 2w of plateau, w between them; w = 5 on a 40-point run); the whole-run check "
        "(`_collapse`) makes those critical at the point shown.",
    ]
    return "\n".join(lines) + "\n"


def _int(v) -> str:
    return "" if v is None or pd.isna(v) else str(int(v))


if __name__ == "__main__":
    main()
