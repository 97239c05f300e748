"""Stop advice a team can act on (issue 18): decision probabilities backtested at every 5% of every
development run, their recalibration, and the stop policy's operating characteristic -- all
leave-one-source-out; writes bench/results/stop_policy.md (+ .json, figures) and the shipped map and
thresholds bayesgrpo/resources/decision_<kind>.json.

    nice -n 10 .venv/bin/python bench/stop_study.py --stage peers          # the peers' checkpoints (resumable)
    nice -n 10 .venv/bin/python bench/stop_study.py --stage forecasts      # bayesgrpo's (resumable, LOSO priors)
    .venv/bin/python bench/stop_study.py --stage report                    # the study, the report, the package data
    nice -n 10 .venv/bin/python bench/stop_study.py --config degeneracy    # another kind: all three stages

Protocol
--------
Every development run (``bench/devdata.py``: grpo-public + grpo-extra as the forecast benchmark selects
them, plus grpo-more) is truncated at every 5% of its step span (0.05 ... 0.95: what a live run would
see at a forecast every 5% of it) and forecast to its own last step. bayesgrpo's population prior and
interval layer for a run of source S are fitted without S (the forecast benchmark's LOSO priors and
layers); the peers need none (for CPU time they forecast at most 6 runs of a source, an even spread --
the two large sources have 20 and 26 -- and domhan_fast, 5 s a forecast, at every 10%). Each forecast's
final-reward draws give the decision probabilities of :mod:`bayesgrpo.forecast.decision` against what the
complete run did; methods are compared on the cases every one of them forecast.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import forecast_benchmark as FB  # noqa: E402
from devdata import load_dev  # noqa: E402

from bayesgrpo.evaluation.backtest import backtest  # noqa: E402
from bayesgrpo.inference.sampling import SamplerConfig  # noqa: E402

#: every 5% of the run (what a live run forecast every 5% of its length would see)
CHECKPOINTS = tuple(round(0.05 * k, 2) for k in range(1, 20))
RES = ROOT / "bench" / "results"
WORK = RES / "stop_runs"
CMD = ".venv/bin/python bench/stop_study.py"
PEERS = ("last_value", "exponential", "scalerl", "pow3", "domhan_fast")
PEER_KW = {p: {"n_boot": 40} for p in ("exponential", "scalerl", "pow3")}
#: the peers forecast at most this many runs of a source (an even spread), domhan_fast at every 10%
PEER_MAX_RUNS = 6
CUT10 = CHECKPOINTS[1::2]
#: final-reward draws kept per case (evenly spaced order statistics: probabilities to 0.005)
KEEP_DRAWS = 200


def _progress(t0: float, label: str):
    def progress(done, total, msg):
        if done % 20 == 0 or done == total:
            print(f"[{time.time() - t0:6.0f}s] {label}: {done}/{total} {msg}", flush=True)

    return progress


def run_forecasts(config: str, runs, sampler: SamplerConfig, only_sources=None) -> None:
    """bayesgrpo at every checkpoint, one source at a time with its LOSO prior (uncalibrated draws: the
    interval layer is applied LOSO by the report, as the forecast benchmark does)."""
    import pandas as pd

    cfg = FB.CONFIGS[config]
    table = pd.read_csv(FB.PRIOR_TABLE)
    src = runs.meta["source_repo"].astype(str)
    t0 = time.time()
    for s in sorted(src.unique()):
        if only_sources and s not in only_sources:
            continue
        ids = [r for r in runs.run_ids if src[r] == s]
        prior = FB.loso_prior(table, cfg["kind"], s)
        backtest(runs.select(ids), cutoffs=CHECKPOINTS, kind=cfg["kind"], peers=(), sampler=sampler, prior=prior,
                 calibration=False, out_dir=WORK / config / FB.slug(s), make_figures=False, save_draws=KEEP_DRAWS,
                 example_runs=(),
                 progress=_progress(t0, f"{config} {s}"))  # fmt: skip
        print(f"[{time.time() - t0:6.0f}s] {config}: {s} ({len(ids)} runs) done", flush=True)


def peer_runs(ids: list[str]) -> list[str]:
    """The runs of one source the peers forecast: all of a source of at most PEER_MAX_RUNS runs, else an
    even spread of PEER_MAX_RUNS of them in file order (CPU time: the peers cost 7 s per checkpoint)."""
    if len(ids) <= PEER_MAX_RUNS:
        return list(ids)
    return [ids[int(k)] for k in np.round(np.linspace(0, len(ids) - 1, PEER_MAX_RUNS)).astype(int)]


def run_peers(runs, only_sources=None) -> None:
    """The peers at every checkpoint (domhan_fast, 5 s a forecast, at every 10%), per source."""
    src = runs.meta["source_repo"].astype(str)
    t0 = time.time()
    for s in sorted(src.unique()):
        if only_sources and s not in only_sources:
            continue
        ids = peer_runs([r for r in runs.run_ids if src[r] == s])
        for peers, cuts in ((tuple(p for p in PEERS if p != "domhan_fast"), CHECKPOINTS), (("domhan_fast",), CUT10)):
            backtest(runs.select(ids), cutoffs=cuts, peers=peers, include_bayes=False, peer_kwargs=PEER_KW,
                     out_dir=WORK / "peers" / FB.slug(s), make_figures=False, save_draws=KEEP_DRAWS, example_runs=(),
                     progress=_progress(t0, f"peers {s}"))  # fmt: skip
        print(f"[{time.time() - t0:6.0f}s] peers: {s} ({len(ids)} runs) done", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="oscillator", choices=sorted(FB.CONFIGS))
    ap.add_argument("--stage", action="append", choices=("peers", "forecasts", "report"),
                    help="default: every stage (the peers' ledger is shared by every config)")  # fmt: skip
    ap.add_argument("--source", action="append", help="only these sources (forecast stages)")
    ap.add_argument("--draws", type=int, default=FB.DEFAULT_SAMPLER.draws)
    ap.add_argument("--tune", type=int, default=FB.DEFAULT_SAMPLER.tune)
    args = ap.parse_args()
    stages = args.stage or ["peers", "forecasts", "report"]
    runs = load_dev(more=True)
    if "peers" in stages:
        run_peers(runs, only_sources=args.source)
    if "forecasts" in stages:
        run_forecasts(args.config, runs, SamplerConfig(draws=args.draws, tune=args.tune, seed=0),
                      only_sources=args.source)  # fmt: skip
    if "report" in stages:
        import stop_report

        stop_report.main(args.config)


if __name__ == "__main__":
    main()
