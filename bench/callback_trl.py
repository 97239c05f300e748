"""BayesGRPOCallback live on the TRL testbed: its forecasts and stop decisions against what the run then did.

    .venv/bin/python bench/callback_trl.py                                   # 10 runs, ImprovementStop
    .venv/bin/python bench/callback_trl.py --stop '{"rule": "utility", "cost_per_step": 2e-4}' --tag utility
    .venv/bin/python bench/callback_trl.py --stop mypkg.rules:make_rule --tag mine   # any rule object

Ten runs of the shipped sweep, one per setting (picked by rule: seed 0 of the cells in :data:`PICK`), are
trained again by TRL exactly as in ``data/trl-testbed`` with the callback attached (one forecasting
worker, compiled once, shared by the runs; ``logging_steps = 1``, so the callback sees every step; its
default ``every`` = one fit per 50 logged rewards). The runs are deterministic, so the shipped run of the
same entry IS what the run would have done without the callback: when the stop rule stops a run, the
shipped run shows the steps it saved and the reward it left; up to the stop step the two runs must log
the same numbers (checked). Forecast truth: the shipped run's final reward (mean logged reward over the
last 10% of the steps) and its exact final expected reward.

Run time (2026-12-05, a 2-core machine shared with other jobs): 2-10 min for the 10 runs (training 10-60 s per
run plus 8 live fits each).

Outputs: ``bench/results/callback_trl[_TAG].md`` and ``callback_trl[_TAG]_forecasts.csv`` (every live
forecast). The stop rule is a parameter (``--stop``): a JSON dict accepted by ``BayesGRPOCallback(stop=...)``
or ``module:callable`` returning a rule object with ``request()``, ``check(result)`` and ``patience``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import trl_data as TD  # noqa: E402

RES = ROOT / "bench" / "results"
CMD = ".venv/bin/python bench/callback_trl.py"
#: one run per setting: (sweep, cell) at seed 0
PICK = (
    ("base", 0),
    ("lr", 0),
    ("lr", 3),
    ("beta1", 4),
    ("G", 0),
    ("G", 2),
    ("drgrpo", 2),
    ("kl", 0),
    ("size", 2),
    ("difficulty", 0),
)
DEFAULT_STOP = '{"rule": "improvement", "delta": 0.02, "epsilon": 0.05, "patience": 2, "window": 20, "min_step": 50}'
WALL = {"step_time", "train_runtime", "train_samples_per_second", "train_steps_per_second"}


def stop_rule(spec: str):
    if spec.strip().startswith("{"):
        return json.loads(spec)
    mod, _, fn = spec.partition(":")
    return getattr(importlib.import_module(mod), fn)()


def truth(rid: str) -> dict:
    """What the shipped (uninterrupted) run did."""
    from bayesgrpo.evaluation.metrics import final_reward

    rs = TD.load_runset([rid])
    d = rs.data
    s, r = d["step"].to_numpy(float), d["reward"].to_numpy(float)
    lat = TD.latent(rid)["reward_current"].to_numpy()
    n = len(lat) - 1
    return {
        "final": float(final_reward(s, r, s0=int(s.min()), horizon=int(s.max()))),
        "final_exact": float(lat[int(0.9 * n) :].mean()),
        "latent": lat,
        "range": float(np.quantile(r, 0.95) - np.quantile(r, 0.05)),
    }


def logged(state) -> list[dict]:
    return [
        {k: v for k, v in e.items() if k not in WALL and not k.startswith("bayesgrpo/")}
        for e in state.log_history
        if "reward" in e
    ]


def shipped_logged(rid: str) -> list[dict]:
    import gzip

    with gzip.open(TD.state_path(rid)) as f:
        lh = json.load(f)["log_history"]
    return [{k: v for k, v in e.items() if k not in WALL} for e in lh if "reward" in e]


def one(rid: str, cfg, *, worker, stop, model: str, tmp: Path) -> dict:
    from transformers import TrainerCallback

    from bayesgrpo.integrations.trl import BayesGRPOCallback
    from bayesgrpo.testbed.trl.runner import train

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.t = []

        def on_step_begin(self, args, state, control, **kw):
            self.t.append(time.perf_counter())

    hist = tmp / rid / "bayesgrpo"
    cb = BayesGRPOCallback(
        stop=stop, model=model, worker=worker, warmup=False, history=str(hist), final_wait=10, max_wait=60
    )
    timer = StepTimer()
    t0 = time.perf_counter()
    trainer, _, _ = train(cfg, tmp / rid, callbacks=[timer, cb])
    wall = time.perf_counter() - t0
    steps = np.diff(timer.t)
    fc = pd.read_csv(hist / "forecasts.csv") if (hist / "forecasts.csv").exists() else pd.DataFrame()
    mine, ship = logged(trainer.state), shipped_logged(rid)
    same = mine == ship[: len(mine)]
    return {
        "run_id": rid,
        "stopped_at": int(trainer.state.global_step),
        "max_steps": cfg.max_steps,
        "stop_reason": cb._stop_reason,
        "fits": cb._n_fits,
        "failures": cb._n_failures,
        "wall": wall,
        "median_step_ms": float(1e3 * np.median(steps)),
        "log_calls": cb.log_calls,
        "log_us_per_call": 1e6 * cb.log_seconds / max(1, cb.log_calls),
        "max_log_ms": 1e3 * cb.max_log_seconds,
        "end_s": cb.end_seconds,
        "identical_to_shipped": bool(same),
        "forecasts": fc,
    }


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--stop", default=DEFAULT_STOP, help="JSON rule spec or module:callable (default: %(default)s)")
    ap.add_argument("--tag", default="", help="suffix of the output files (one per rule)")
    ap.add_argument("--model", default="oscillator")
    ap.add_argument("--runs", type=int, default=len(PICK))
    a = ap.parse_args(argv)
    import torch
    import transformers
    import trl

    from bayesgrpo.integrations._worker import ForecastWorker
    from bayesgrpo.integrations.trl import LIVE_SAMPLER
    from bayesgrpo.testbed.trl.config import load_trl_sweep

    items = {
        (lab["sweep"], lab["cell"], c.seed): (r, c)
        for r, c, lab in load_trl_sweep(ROOT / "models/trl_sweep.json").expand()
    }
    picks = [items[(s, k, 0)] for s, k in PICK[: a.runs]]
    tmp = Path(tempfile.mkdtemp(prefix="callback_trl_"))
    worker = ForecastWorker(log_file=tmp / "worker.log")
    t0 = time.perf_counter()
    rid0 = worker.submit({"kind": "warmup", "model": a.model, "sampler": LIVE_SAMPLER})
    worker.wait_for(rid0, timeout=600)
    compile_s = time.perf_counter() - t0
    print(f"worker ready in {compile_s:.0f} s", flush=True)
    rows, fcs = [], []
    for rid, cfg in picks:
        res = one(rid, cfg, worker=worker, stop=stop_rule(a.stop), model=a.model, tmp=tmp)
        t = truth(rid)
        fc = res.pop("forecasts")
        if len(fc):
            fc = fc[fc["ok"].astype(str).isin(["True", "1", "true"])].copy()
            fc["run_id"] = rid
            fc["truth"] = t["final"]
            fc["truth_exact"] = t["final_exact"]
            fc["inside80"] = (fc["final_q10"] <= t["final"]) & (t["final"] <= fc["final_q90"])
            fc["abs_err"] = (fc["final_q50"] - t["final"]).abs()
            fc["nae"] = fc["abs_err"] / t["range"]
            fcs.append(fc)
        s = res["stopped_at"]
        lat = t["latent"]
        res.update(
            truth=t["final"],
            truth_exact=t["final_exact"],
            range=t["range"],
            at_stop_exact=float(lat[min(s, len(lat) - 1)]),
            saved=(cfg.max_steps - s) / cfg.max_steps,
        )
        res["lost_exact"] = res["truth_exact"] - res["at_stop_exact"] if s < cfg.max_steps else 0.0
        # hindsight: the first step (>= the rule's min_step) after which the exact R never rose by delta again
        rule = stop_rule(a.stop)
        delta = float(rule.get("delta", 0.0)) if isinstance(rule, dict) else float(getattr(rule, "delta", 0.0))
        lo = int(rule.get("min_step", 0)) if isinstance(rule, dict) else int(getattr(rule, "min_step", 0))
        ahead = np.maximum.accumulate(lat[::-1])[::-1]  # max of R from step n on
        later = np.flatnonzero((ahead - lat < delta) & (np.arange(len(lat)) >= lo))
        res["oracle_stop"] = int(later[0]) if len(later) else cfg.max_steps
        res["oracle_delta"] = delta
        before = fc[fc["observed_until"] < cfg.max_steps] if len(fc) else fc
        res["p_improve_last"] = float(before["p_improve"].iloc[-1]) if len(before) else float("nan")
        res["p_improve_min"] = float(before["p_improve"].min()) if len(before) else float("nan")
        res["bad_stop"] = bool(s < cfg.max_steps and res["lost_exact"] > 0.1 * t["range"])
        rows.append(res)
        print(
            f"{rid}: stopped at {s}/{cfg.max_steps}, {res['fits']} fits, identical to shipped: "
            f"{res['identical_to_shipped']}, hook {res['log_us_per_call']:.0f} us/call",
            flush=True,
        )
    worker.close()
    df = pd.DataFrame(rows)
    first = TD.DATA / "runs" / df["run_id"].iloc[0] / "run.json"
    shipped_versions = json.loads(first.read_text()).get("versions", {})
    fc = pd.concat(fcs, ignore_index=True) if fcs else pd.DataFrame()
    tag = f"_{a.tag}" if a.tag else ""
    fc.to_csv(RES / f"callback_trl{tag}_forecasts.csv", index=False)
    stops = df[df["stopped_at"] < df["max_steps"]]
    # live forecasts by how much of the run they saw
    fc["seen"] = fc["observed_until"] / 400
    fc["phase"] = pd.cut(fc["seen"], [0, 0.25, 0.5, 0.75, 1.0], labels=["<=25%", "25-50%", "50-75%", "75-100%"])
    ph = fc.groupby("phase", observed=True).agg(n=("run_id", "size"), cov80=("inside80", "mean"), nae=("nae", "median"))
    md = [
        "# BayesGRPOCallback live on the TRL testbed",
        "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} in {(time.perf_counter() - t0) / 60:.0f} min "
        "by "
        f"`{CMD}{' --stop ' + repr(a.stop) if a.stop != DEFAULT_STOP else ''}{' --tag ' + a.tag if a.tag else ''}` "
        f"on {platform.node()} ({platform.python_version()}, torch {torch.__version__}, transformers "
        f"{transformers.__version__}, "
        f"trl {trl.__version__}); the machine is shared with other jobs (wall times are indicative). The shipped "
        "runs were made with "
        + ", ".join(f"{k} {v}" for k, v in shipped_versions.items() if k in ("torch", "transformers", "trl"))
        + ".",
        "",
        f"Stop rule: `{a.stop}`. Model kind `{a.model}`, live sampler {LIVE_SAMPLER}, one worker compiled once "
        f"({compile_s:.0f} s). " + __doc__.split("\n\n")[2].replace("\n", " "),
        "",
        "## Per run",
        "",
        "| run | stopped at | fits | reason | final reward (shipped run) | exact R at stop -> at the end | steps "
        "saved | bad stop | P(improve) at the last fit before the end (lowest) | hindsight stop | logged numbers "
        "identical to the shipped run |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        md.append(
            f"| {r['run_id']} | {r['stopped_at']} | {r['fits']} | {(r['stop_reason'] or '-')[:90]} | "
            f"{r['truth']:.3f} | "
            f"{r['at_stop_exact']:.3f} -> {r['truth_exact']:.3f} | {r['saved']:.0%} | {r['bad_stop']} | "
            f"{r['p_improve_last']:.2f} ({r['p_improve_min']:.2f}) | {r['oracle_stop']} | "
            f"{r['identical_to_shipped']} |"
        )
    md += [
        "",
        f"Stopped {len(stops)}/{len(df)} runs; steps saved {df['saved'].mean():.0%} on average; bad stops (exact "
        "reward "
        f"lost > 0.1 x the run's range) {int(df['bad_stop'].sum())}; mean exact reward lost by the stopped runs "
        f"{stops['lost_exact'].mean() if len(stops) else 0:.3f}. Every run logged the same numbers as its shipped "
        f"twin up to where it stopped: {bool(df['identical_to_shipped'].all())}.",
        "",
        f"Hindsight stop = the first step (>= the rule's min_step) after which the run's exact expected reward never "
        f"rose by the rule's delta ({df['oracle_delta'].iloc[0]:g}) again: {int((df['oracle_stop'] < 400).sum())} of "
        f"{len(df)} runs could have stopped before the end, saving {(1 - df['oracle_stop'] / 400).mean():.0%} of the "
        "steps on average. With one fit per 50 logged rewards a 400-step run gets "
        f"{int(df['fits'].median())} fits, and the rule needs P(improve) below epsilon at `patience` consecutive fits; "
        f"the lowest P(improve) any run reached before its end was {df['p_improve_min'].min():.2f}.",
        "",
        "## The live forecasts against what the run then did",
        "",
        f"{len(fc)} forecasts; the truth is the shipped run's final reward. By the share of the run observed:",
        "",
        "| observed | forecasts | inside the 80% interval | median abs error / range |",
        "|---|---|---|---|",
        *[f"| {k} | {int(v['n'])} | {v['cov80']:.0%} | {v['nae']:.3f} |" for k, v in ph.iterrows()],
        "",
        f"All forecasts: 80% coverage {fc['inside80'].mean():.0%}, median abs error / range {fc['nae'].median():.3f}.",
        "",
        "## Overhead",
        "",
        f"One `on_log` call of the callback took **{df['log_us_per_call'].mean():.0f} us** on average (the longest "
        f"{df['max_log_ms'].max():.1f} ms) at a median optimizer step of "
        f"{statistics.median(df['median_step_ms']):.1f} ms "
        f"({100 * df['log_us_per_call'].mean() / 1e3 / statistics.median(df['median_step_ms']):.2f}% of a step; this "
        "run logs at every step). "
        f"`on_train_end` waited {df['end_s'].mean():.1f} s on average for the last forecast. "
        "The worker competes for the CPU with the training loop on this machine; `bench/results/live_overhead.md` "
        "measures that effect with and without the callback.",
        "",
    ]
    (RES / f"callback_trl{tag}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
