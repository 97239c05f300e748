"""Does the code reproduce the committed forecast benchmark? Re-forecast a fixed sample of its cases.

    .venv/bin/python bench/reproduce_cases.py              # ~15 min on 2 busy cores (12 fits)
    .venv/bin/python bench/reproduce_cases.py --no-report  # the sampled cases only

Three checks, written to ``bench/results/reproduce_cases.md`` (+ ``.json``):

1. **Sampled cases.** For each of the configurations oscillator, degeneracy and logistic, one case per
   cutoff (0.1, 0.2, 0.3, 0.5), each of a different source (sources sorted by name, the k-th cutoff
   takes source ``(k * n_sources // 4 + offset) mod n_sources``, or the next one with such a case, and
   its first run in the ledger with at most 300 observed points; the offset is 0, 1, 2 for the three
   configurations), is forecast again exactly as
   ``bench/forecast_benchmark.py`` made it: the run alone, its leave-one-source-out prior
   (``forecast_benchmark.loso_prior``), ``backtest`` at that cutoff without peers and without a
   calibration layer, the benchmark's sampler (nutpie, 2 chains x 1000 draws, 800 tune, seed 0).
   Every number of its ``cases.csv`` row (scores, quantiles, sampler health; not the seconds) and its
   400 stored final-reward draws (``draws.npz``) are compared with the ledger.
2. **Calibrated cases.** The ``+cal`` rows (the shipped layer variant fitted leave-one-source-out on
   the other sources' ledger cases, ``forecast_benchmark.calibrated_cases``) are recomputed for every
   case of the three ledgers and compared with ``bench/results/forecast_cases.csv.gz``.
3. **The report.** ``forecast_benchmark.report`` rebuilds ``forecast.md`` and ``forecast_stops.csv``
   into a temporary folder from the committed ledgers; every line of the page (its "Generated" time
   stamp aside) and every number of the stop table is compared with the committed one.

A number matches when it is equal or within 1e-9 (relative to max(1, |value|)).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import forecast_benchmark as FB  # noqa: E402
from devdata import load_dev  # noqa: E402

from bayesgrpo.evaluation.backtest import backtest  # noqa: E402
from bayesgrpo.inference.sampling import SamplerConfig  # noqa: E402

CONFIGS = ("oscillator", "degeneracy", "logistic")
MAX_OBS = 300  # cases of at most this many observed points (CPU time: the EKF kinds take minutes on 500)
TOL = 1e-9
OUT_MD = FB.RES / "reproduce_cases.md"
OUT_JSON = FB.RES / "reproduce_cases.json"
#: the sampled cases' rows and draws as another code version computed them (``--save-reference``)
REFERENCE = FB.RES / "reproduce_cases_reference.json"
#: explanations of the differences (kept by hand; copied into the report)
NOTES = FB.RES / "reproduce_cases_notes.md"
SKIP = {"seconds", "warnings"}  # wall clock; warning text (compared separately: same categories)
CMD = ".venv/bin/python bench/reproduce_cases.py"


def pick_cases(name: str, offset: int) -> pd.DataFrame:
    """The sampled cases of one configuration (module docstring, check 1): those of the reference when
    there is one (the ledgers have grown sources since it was saved, which would move the rule's picks)."""
    cases = FB.load_cases(name)
    if REFERENCE.exists():
        keys = set(json.loads(REFERENCE.read_text())["cases"])
        hit = cases.apply(lambda r: f"{name}|{r['run_id']}|{r['cutoff']:g}|bayesgrpo" in keys, axis=1)
        if hit.any():
            return cases[hit].sort_values(["cutoff"], kind="stable")
    ok = cases[cases["ok"].astype(bool) & (cases["n_obs"] <= MAX_OBS)].sort_values(["source", "run_id"], kind="stable")
    srcs = sorted(ok["source"].unique())
    rows = []
    for k, c in enumerate(FB.CUTOFFS):
        for j in range(len(srcs)):  # the rule's source, else the next one that has a case at the cutoff
            s = srcs[(k * len(srcs) // len(FB.CUTOFFS) + offset + j) % len(srcs)]
            g = ok[(ok["source"] == s) & np.isclose(ok["cutoff"], c)]
            if len(g) and s not in {r["source"] for r in rows}:
                rows.append(g.iloc[0])
                break
    return pd.DataFrame(rows)


def _close(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):  # an empty message is read back from a CSV as NaN
        return ("" if pd.isna(a) else str(a)) == ("" if pd.isna(b) else str(b))
    if pd.isna(a) and pd.isna(b):
        return True
    if pd.isna(a) or pd.isna(b):
        return False
    a, b = float(a), float(b)
    return a == b or abs(a - b) <= TOL * max(1.0, abs(a), abs(b))


def compare_rows(new: dict, old: pd.Series) -> list[str]:
    """Columns whose values differ (beyond :data:`TOL`)."""
    bad = []
    for col, v in old.items():
        if col in SKIP or col in ("orig_method",) or col not in new:
            continue
        if col == "method":
            continue
        if col == "ok":
            if bool(new[col]) != bool(v):
                bad.append(f"{col}: {new[col]} vs {v}")
            continue
        if not _close(new[col], v):
            bad.append(f"{col}: {new[col]!r} vs {v!r}")
    return bad


def reforecast(name: str, case: pd.Series, runs, table: pd.DataFrame, work: Path, reference: dict) -> dict:
    kind = FB.CONFIGS[name]["kind"]
    prior = FB.loso_prior(table, kind, case["source"])
    out = work / f"{name}-{FB.slug(case['run_id'])}-{case['cutoff']:g}"
    t0 = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = backtest(runs.select([case["run_id"]]), cutoffs=(float(case["cutoff"]),), kind=kind, peers=(),
                       sampler=SamplerConfig(draws=FB.DEFAULT_SAMPLER.draws, tune=FB.DEFAULT_SAMPLER.tune, seed=0),
                       prior=prior, calibration=False, out_dir=out, resume=False, save_draws=400)  # fmt: skip
    row = {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in res.cases.iloc[0].to_dict().items()}
    key = f"{case['run_id']}|{case['cutoff']:g}|bayesgrpo"
    with np.load(out / "draws.npz") as z:
        new_draws = z[key].astype(float)
    vs_ledger = compare_rows(row, case) + _draw_diff(new_draws, FB.load_draws(name)[key])
    ref = reference.get(f"{name}|{key}")
    vs_ref = None
    if ref is not None:
        vs_ref = compare_rows(row, pd.Series(ref["row"])) + _draw_diff(new_draws, np.asarray(ref["draws"], float))
    return dict(config=name, key=key, run_id=case["run_id"], source=case["source"], cutoff=float(case["cutoff"]),
                n_compared=int(sum(1 for c in case.index if c not in SKIP)), vs_ledger=vs_ledger,
                vs_reference=vs_ref, seconds=round(time.time() - t0, 1), row=row,
                draws=[float(v) for v in new_draws])  # fmt: skip


def _draw_diff(a: np.ndarray, b: np.ndarray) -> list[str]:
    if a.shape != b.shape:
        return [f"draws: shape {a.shape} vs {b.shape}"]
    d = float(np.max(np.abs(a - b.astype(float))))
    return [] if d == 0.0 else [f"draws: max |difference| {d:.3g}"]


def check_calibrated() -> list[dict]:
    committed = pd.read_csv(FB.RES / "forecast_cases.csv.gz")
    out = []
    for name in CONFIGS:
        new = FB.calibrated_cases(name, FB.load_cases(name))
        method = f"bayesgrpo[{name}+cal]"
        old = committed[committed["method"] == method].set_index(["run_id", "cutoff"])
        if new.empty:
            missing = [] if old.empty else ["no rows recomputed"]
            out.append(dict(config=name, cases=0, committed=int(len(old)), differences=missing))
            continue
        new = new.set_index(["run_id", "cutoff"])
        common = new.index.intersection(old.index)
        bad = []
        for k in common:
            diff = compare_rows(new.loc[k].to_dict(), old.loc[k][[c for c in new.columns if c in old.columns]])
            if diff:
                bad.append(f"{k}: {'; '.join(diff[:3])}")
        out.append(dict(config=name, cases=int(len(common)), committed=int(len(old)), differences=bad[:20],
                        n_different=len(bad)))  # fmt: skip
    return out


def check_report() -> dict:
    """``forecast_benchmark.report`` into a temporary folder (with the committed study it reads), then
    every line of ``forecast.md`` and every number of ``forecast_stops.csv`` against the committed ones."""
    import shutil

    with tempfile.TemporaryDirectory() as tmp:
        res = FB.RES
        shutil.copy(res / "calibration_study.json", Path(tmp) / "calibration_study.json")
        FB.RES = Path(tmp)
        try:
            FB.report(list(FB.CONFIGS))
        finally:
            FB.RES = res
        new = (Path(tmp) / "forecast.md").read_text().splitlines()
        stops_new = pd.read_csv(Path(tmp) / "forecast_stops.csv")
    old = (FB.RES / "forecast.md").read_text().splitlines()
    stamp = lambda ls: [ln.split(" Generated ")[0] if ln.startswith("Regenerate:") else ln for ln in ls]  # noqa: E731
    a, b = stamp(old), stamp(new)
    diff = [f"line {i + 1}: {x!r} vs {y!r}" for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y]
    if len(a) != len(b):
        diff.append(f"{len(b)} lines vs {len(a)} committed")
    stops_old = pd.read_csv(FB.RES / "forecast_stops.csv")
    stop_diff = [] if stops_old.shape == stops_new.shape else [f"shape {stops_new.shape} vs {stops_old.shape}"]
    if not stop_diff:
        for i in range(len(stops_old)):
            d = compare_rows(stops_new.iloc[i].to_dict(), stops_old.iloc[i])
            stop_diff += [f"row {i}: {x}" for x in d]
    return dict(lines=len(a), differences=diff[:30], n_different=len(diff), stops_rows=len(stops_old),
                stops_differences=stop_diff[:10], n_stops_different=len(stop_diff))  # fmt: skip


def _diff_cell(d) -> str:
    if d is None:
        return "–"
    return "identical" if not d else "; ".join(d[:3]) + (f" (+{len(d) - 3} more)" if len(d) > 3 else "")


def write(results: dict) -> None:
    md = ["# Reproducing the forecast benchmark", "",
          f"Regenerate: `{CMD}`. Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on commit "
          f"`{results['commit']}`; the reference: {results.get('reference_commit') or 'none'}.", "",
          __doc__.split("\n\n", 2)[2].split("\n\nA number")[0], "",
          f"A number matches when equal or within {TOL:g} (relative to max(1, |value|)).", ""]  # fmt: skip
    if results.get("cases") is not None:
        n_led = sum(bool(r["vs_ledger"]) for r in results["cases"])
        n_ref = sum(bool(r["vs_reference"]) for r in results["cases"] if r["vs_reference"] is not None)
        md += ["## 1. Sampled cases", "",
               f"{len(results['cases'])} cases: {n_led} differ from the ledger, {n_ref} from the reference.", "",
               "| config | run | source | cutoff | numbers | vs the ledger | vs the reference | s |",
               "|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for r in results["cases"]:
            md.append(
                f"| {r['config']} | `{r['run_id']}` | {r['source']} | {r['cutoff']:g} | {r['n_compared']} + 400 "
                f"draws | {_diff_cell(r['vs_ledger'])} | {_diff_cell(r['vs_reference'])} | {r['seconds']} |"
            )
        md.append("")
    if results.get("calibrated") is not None:
        md += ["## 2. Calibrated cases (`+cal`)", "", "| config | cases recomputed | committed | differing |",
               "|---|---|---|---|"]  # fmt: skip
        for r in results["calibrated"]:
            n = r.get("n_different", len(r["differences"]))
            md.append(f"| {r['config']} | {r['cases']} | {r['committed']} | {n} |")
        md.append("")
        md += [f"- {r['config']}: {d}" for r in results["calibrated"] for d in r["differences"][:5]]
        md.append("")
    if results.get("report") is not None:
        r = results["report"]
        md += ["## 3. The report", "", f"`forecast.md` rebuilt: {r['lines']} lines, {r['n_different']} differ.", ""]
        md += [f"- {d}" for d in r["differences"]]
        md += ["", f"`forecast_stops.csv` (the stop rule on every method's forecasts): {r['stops_rows']} rows, "
               f"{r['n_stops_different']} numbers differ.", ""]  # fmt: skip
        md += [f"- {d}" for d in r["stops_differences"]]
        md.append("")
    notes = NOTES.read_text().strip() if NOTES.exists() else ""
    if notes:
        md += ["## Notes", "", notes, ""]
    OUT_MD.write_text("\n".join(md) + "\n")
    slim = {**results, "cases": [{k: v for k, v in r.items() if k not in ("row", "draws")}
                                 for r in results.get("cases") or []]}  # fmt: skip
    OUT_JSON.write_text(json.dumps(slim, indent=1, default=str) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-report", action="store_true", help="only the sampled cases")
    ap.add_argument("--no-cases", action="store_true", help="only the calibrated cases and the report")
    ap.add_argument(
        "--save-reference",
        action="store_true",
        help=f"store the sampled cases' rows and draws as the reference ({REFERENCE.name})",
    )
    args = ap.parse_args()
    import subprocess

    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "(not a git checkout)"  # fmt: skip
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "bayesgrpo"], capture_output=True,
                           text=True).stdout.strip()  # fmt: skip
    ref = json.loads(REFERENCE.read_text()) if REFERENCE.exists() else {}
    results: dict = {"commit": commit + (" (+ uncommitted changes in bayesgrpo/)" if dirty else ""),
                     "reference_commit": ref.get("commit")}  # fmt: skip
    if not args.no_cases:
        runs = load_dev(more=True)
        table = pd.read_csv(FB.PRIOR_TABLE)
        results["cases"] = []
        with tempfile.TemporaryDirectory() as tmp:
            for off, name in enumerate(CONFIGS):
                for _, case in pick_cases(name, off).iterrows():
                    r = reforecast(name, case, runs, table, Path(tmp), ref.get("cases", {}))
                    print(f"{name} {r['run_id']} @ {r['cutoff']:g}: ledger {_diff_cell(r['vs_ledger'])}; reference "
                          f"{_diff_cell(r['vs_reference'])} ({r['seconds']} s)", flush=True)  # fmt: skip
                    results["cases"].append(r)
                    write(results)
        if args.save_reference:
            cases = {f"{r['config']}|{r['key']}": {"row": r["row"], "draws": r["draws"]} for r in results["cases"]}
            REFERENCE.write_text(json.dumps({"commit": results["commit"], "cases": cases}, default=str) + "\n")
    if not args.no_report:
        results["calibrated"] = check_calibrated()
        print("calibrated:", [(r["config"], r.get("n_different")) for r in results["calibrated"]], flush=True)
        results["report"] = check_report()
        print("report:", results["report"]["n_different"], "lines differ", flush=True)
    write(results)


if __name__ == "__main__":
    main()
