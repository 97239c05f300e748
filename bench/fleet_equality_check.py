"""Serial vs --workers 2 on every 10th of the fleet benchmark's 1,000 runs (--draws 200 --tune 200): are the
tables identical? (The 1,000-run comparison in bench/results/fleet.md was not; this check narrows it down.)

    .venv/bin/python bench/fleet_equality_check.py      # prints the result (about 5 min on 2 cores)
"""

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))
import fleet_benchmark as F  # noqa: E402 - after the path insert
import pandas as pd  # noqa: E402


def main():
    tmp = Path(tempfile.mkdtemp())
    rc, mc, _ = F.make_1000(tmp)
    d = pd.read_csv(rc)
    m = pd.read_csv(mc)
    keep = list(m.run_id.iloc[::10])  # 100 of the 1000
    d[d.run_id.isin(keep)].to_csv(tmp / "r.csv", index=False)
    m[m.run_id.isin(keep)].to_csv(tmp / "m.csv", index=False)
    import warnings

    from bayesgrpo.forecast import Forecaster, SamplerConfig
    from bayesgrpo.forecast.batch import forecast_batch
    from bayesgrpo.inference.executor import make_executor
    from bayesgrpo.io import read_runs

    warnings.simplefilter("ignore")
    runs = read_runs(tmp / "r.csv", meta=tmp / "m.csv")
    tabs = {}
    for w in (None, 2):
        fc = Forecaster(sampler=SamplerConfig(draws=200, tune=200))
        with make_executor(workers=w, scheduler=None) as ex:
            tabs[w] = forecast_batch(runs, forecaster=fc, executor=ex).table.drop(columns="seconds").set_index("run_id")
    a, b = tabs[None], tabs[2].loc[tabs[None].index]
    out = [
        f"# Serial vs --workers 2 on {len(a)} of the fleet benchmark's 1,000 runs (every 10th)",
        "",
        "Regenerate: `.venv/bin/python bench/fleet_equality_check.py`",
        "",
        f"Tables identical (all columns but `seconds`): {a.equals(b)}",
    ]
    print("equal:", a.equals(b))
    num = a.select_dtypes("number").columns
    diff = (a[num] - b[num]).abs()
    print(diff.max().sort_values().tail(8))
    bad = diff.max(axis=1) > 0
    print("runs differing:", int(bad.sum()), list(a.index[bad])[:5])
    out.append(
        f"Runs with any numeric difference: {int(bad.sum())}; largest difference per column: "
        + ", ".join(f"{k} {v:.3g}" for k, v in diff.max().items())
    )
    (ROOT / "bench" / "results" / "fleet_equality.md").write_text("\n".join(out) + "\n")
    for c in a.columns.difference(num):
        ne = a[c].astype(str) != b[c].astype(str)
        if ne.any():
            print("non-numeric col differs:", c, a.loc[ne, c].head(2).tolist(), b.loc[ne, c].head(2).tolist())


if __name__ == "__main__":
    main()
