"""The yardstick's cases: every run cut at each cutoff (a fraction of its step span), forecast to its own last
step, scored on the mean logged reward of the last 10% of the run -- the geometry of
:func:`bayesgrpo.evaluation.backtest.backtest` (its plans and truth), so that its ledgers and these cases
name the same forecasts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayesgrpo.conventions import DEFAULT_FINAL_WINDOW
from bayesgrpo.evaluation.scoring import run_truth
from bayesgrpo.plan import plan_runs
from bayesgrpo.schema import REWARD, STEP, RunSet
from bayesgrpo.series import robust_range
from bench.yardstick.data import CUTOFFS

#: the yardstick's cases have at least 5 points (its ledgers were computed so, before the package forecast from
#: 3: ``bench/short_prefix.py`` measures those)
CASE_MIN_POINTS = 5


@dataclass
class Case:
    run_id: str
    source: str
    split: str
    cutoff: float
    steps: np.ndarray
    rewards: np.ndarray
    future: np.ndarray
    truth: float
    range: float
    s0: float
    horizon: float
    prefix: pd.DataFrame

    @property
    def key(self) -> str:
        return f"{self.run_id}|{self.cutoff:g}"

    @property
    def observed_until(self) -> float:
        return float(self.steps[-1])


def build(runs: RunSet, cutoffs=CUTOFFS, final_window: float = DEFAULT_FINAL_WINDOW) -> list[Case]:
    out = []
    facts = {r: (runs.run(r), *run_truth(runs.run(r), final_window)) for r in runs.run_ids}
    horizon = {r: facts[r][4] for r in runs.run_ids}
    for c in cutoffs:
        plans = plan_runs(runs, until_fraction=c, horizon=horizon, min_points=CASE_MIN_POINTS)
        for r in runs.run_ids:
            df, truth, rng, s0, H = facts[r]
            if plans[r].error is not None or not np.isfinite(truth):
                continue
            pre = plans.observed.run(r)
            fut = df.loc[df[STEP] > plans[r].last_step, STEP].to_numpy(float)
            m = runs.meta.loc[r]
            out.append(Case(r, str(m["source_repo"]), str(m.get("split", "")), float(c), pre[STEP].to_numpy(float),
                            pre[REWARD].to_numpy(float), fut, float(truth), float(rng), float(s0), float(H),
                            pre.drop(columns=["run_id"], errors="ignore")))  # fmt: skip
    return out


def frame(cases: list[Case]) -> pd.DataFrame:
    return pd.DataFrame([dict(key=c.key, run_id=c.run_id, source=c.source, split=c.split, cutoff=c.cutoff,
                              n_obs=len(c.steps), observed_until=c.observed_until, s0=c.s0, horizon=c.horizon,
                              truth=c.truth, range=c.range, prange=robust_range(c.rewards), level=float(np.mean(c.rewards[-max(3, len(c.rewards) // 10):])))
                         for c in cases])  # fmt: skip
