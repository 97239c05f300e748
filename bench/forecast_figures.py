"""Fan charts of development runs of the shapes real runs take, forecast as the benchmark scores them
(leave-one-source-out population prior and calibration layer); writes
bench/results/figures/forecast_dev_<shape>.png.

    .venv/bin/python bench/forecast_figures.py     # after forecast_benchmark.py and calibration_study.py

The runs are picked by rule from the benchmark's oscillator ledger, not by hand: for each shape the
case whose outcome is most extreme in that direction, relative to the level of its prefix (the mean of
the last tenth), in units of the run's range --

* ``late_rise`` (an S-curve seen early): cutoff 0.2, the truth highest above the level;
* ``decline`` (a rise that peaks and falls or collapses): cutoff 0.3, the truth lowest below it;
* ``saturating`` (the common case): cutoff 0.3, the truth closest to the level plus the median
  gain of all cases at that cutoff.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import calibration_study as CS  # noqa: E402
import forecast_benchmark as FB  # noqa: E402
from devdata import load_dev  # noqa: E402

from bayesgrpo.forecast.forecaster import Forecaster  # noqa: E402
from bayesgrpo.plots.fan import fan_chart  # noqa: E402

OUT = FB.RES / "figures"
CONFIG = "oscillator"


def pick(b: pd.DataFrame) -> dict:
    b = b.assign(rel=(b["truth"] - b["level"]) / b["range"])
    c2, c3 = b[np.isclose(b["cutoff"], 0.2)], b[np.isclose(b["cutoff"], 0.3)]
    sat = c3.iloc[(c3["rel"] - c3["rel"].median()).abs().argsort()[:1]]
    return {"late_rise": c2.loc[c2["rel"].idxmax()], "decline": c3.loc[c3["rel"].idxmin()], "saturating": sat.iloc[0]}


def main():
    runs = load_dev()
    b, draws = CS.ledger(CONFIG, runs)
    table = pd.read_csv(FB.PRIOR_TABLE)
    import json

    shipped = json.loads((FB.RES / "calibration_study.json").read_text())[CONFIG]["shipped"]
    OUT.mkdir(parents=True, exist_ok=True)
    for shape, r in pick(b).items():
        s = r["source"]
        tr = np.flatnonzero(b["source"].to_numpy() != s)
        cal = None
        if shipped != "none":
            cal = CS.fit_variant(b.iloc[tr], [draws[i] for i in tr], CS.VARIANTS[shipped], f"loso-{shipped}")
        prior = FB.loso_prior(table, FB.CONFIGS[CONFIG]["kind"], s)
        full = runs.select([r["run_id"]])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = Forecaster(CONFIG, prior=prior, calibration=cal if cal is not None else False).fit(
                full.truncate(until_step=int(r["observed_until"])), horizon=int(r["horizon"])
            )
        fig = fan_chart(fit, r["run_id"], truth=full.run(r["run_id"]))
        fig.suptitle(f"{shape}: {s} (cutoff {r['cutoff']:g}; prior and calibration without this source)", fontsize=9)
        p = OUT / f"forecast_dev_{shape}.png"
        fig.savefig(p, dpi=100)
        row = fit.table().iloc[0]
        print(
            f"{shape}: {r['run_id']} truth {r['truth']:.3f} final {row['final_q50']:.3f} "
            f"[{row['final_q10']:.3f}, {row['final_q90']:.3f}] -> {p.relative_to(ROOT)}",
            flush=True,
        )


if __name__ == "__main__":
    main()
