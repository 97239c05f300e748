"""Fan charts of the worst case of each class of run, forecast by the shipped default as the benchmark scores
it (priors, hazard and interval layer fitted without the case's source); writes
bench/results/figures/forecast_auto_<class>.png and forecast_auto_check.csv.

    .venv/bin/python bench/forecast_figures.py     # after bench/quality_study.py

For each class of :data:`quality_study.CLASS_RULE` the case with the highest nCRPS of the shipped variant
(``bench/results/quality_study.json``) is forecast again by ``Forecaster("auto")`` itself -- a full fit of
every kind its weights keep, the LOSO population prior of each kind, the hazard and the layer refitted on
the other sources' cases exactly as the study does -- and drawn with the rest of the run for comparison.
``forecast_auto_check.csv`` puts the forecaster's final-reward quantiles beside the study's composed ones
(the same method, sampled again: they agree to Monte Carlo error).
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import forecast_benchmark as FB  # noqa: E402
import quality_study as QS  # noqa: E402
from devdata import load_all  # noqa: E402

from bayesgrpo.forecast.forecaster import AUTO, Forecaster  # noqa: E402
from bayesgrpo.forecast.intervals import IntervalLayer, fit_layer  # noqa: E402
from bayesgrpo.plots.fan import fan_chart  # noqa: E402

OUT = FB.RES / "figures"


def loso_layers(B: pd.DataFrame, mix: list, source: str, hz_names, rule):
    """The hazard and layer the study applies to ``source``: fitted on every other source's cases."""
    tr = B["source"].to_numpy() != source
    hz, cur = None, mix
    if hz_names is not None:
        hz = QS._hazard_fit(B, tr, hz_names, l2=1.0)
        cur = QS.apply_hazard(hz, B, mix, np.arange(len(B)))
    lay = fit_layer(QS.layer_cases(B, cur, np.flatnonzero(tr)), rule=rule, name="loso") if rule else IntervalLayer()
    return hz, lay


def main():
    runs = load_all()
    chosen = json.loads((FB.RES / "quality_study.json").read_text())["chosen"]
    shape, hz_names, rule = QS.parse(chosen)
    B, D = QS.load_ledgers()
    B = QS.attach_evidence(QS.describe_cases(B, runs))
    weights = QS.shape_weights(B, QS.SHAPES[shape])
    B = QS.with_weights(B, weights)  # the layer rule `shape` reads w_oscillator
    mix = [QS.mixture(D, i, w) for i, w in enumerate(weights)]
    q = pd.read_csv(FB.RES / "quality_cases.csv.gz")
    q = q[q["method"] == chosen]
    table = pd.read_csv(FB.PRIOR_TABLE)
    OUT.mkdir(parents=True, exist_ok=True)
    rows = []
    for cl in QS.CLASSES:
        g = q[q["cls"] == cl]
        if g.empty:
            continue
        r = g.loc[g["ncrps"].idxmax()]
        i = int(np.flatnonzero((B["run_id"] == r["run_id"]).to_numpy() & np.isclose(B["cutoff"], r["cutoff"]))[0])
        s = r["source"]
        hz, lay = loso_layers(B, mix, s, hz_names, rule)
        priors = {k: FB.loso_prior(table, k, s) for k in QS.SHAPES[shape].kinds}
        full = runs.select([r["run_id"]])
        fc = Forecaster(AUTO, shape=QS.SHAPES[shape], priors=priors, hazard=hz if hz is not None else False,
                        intervals=lay, calibration=False)  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = fc.fit(full.truncate(until_step=int(B["observed_until"].iloc[i])), horizon=int(B["horizon"].iloc[i]))
        fig = fan_chart(fit, r["run_id"], truth=full.run(r["run_id"]))
        fig.suptitle(f"{cl}: {s}, {r['run_id'][:40]} (cutoff {r['cutoff']:g}; priors, hazard and layer without "
                     "this source)", fontsize=8)  # fmt: skip
        name = cl.split("/")[0].lower().replace("-", "")
        p = OUT / f"forecast_auto_{name}.png"
        fig.savefig(p, dpi=100)
        row = fit.table().iloc[0]
        rows.append(dict(cls=cl, run_id=r["run_id"], source=s, cutoff=r["cutoff"], truth=float(B["truth"].iloc[i]),
                         ncrps=r["ncrps"],
                         kinds=row["model"], study_q10=r["q10"], study_q50=r["q50"], study_q90=r["q90"],
                         forecaster_q10=row["final_q10"], forecaster_q50=row["final_q50"],
                         forecaster_q90=row["final_q90"], figure=str(p.relative_to(ROOT))))  # fmt: skip
        print(rows[-1], flush=True)
    pd.DataFrame(rows).to_csv(OUT / "forecast_auto_check.csv", index=False)


if __name__ == "__main__":
    main()
