"""uqcxu9/qwen2.5_300step_NEW_CONSIS_RESULT: a Qwen2.5-7B-Instruct economic agent (AI-Economist simulation: work and
consumption decisions) trained with verl GRPO and a hand-written shaped reward (``RL/reward.py``); verl console
logs ``RL/train.log`` (699 steps) and ``logs/grpo_train.log`` (a shorter run, 54 steps)."""

import pandas as pd

from bench.collect import raw
from bench.collect.parse import via_reader

SOURCE = dict(
    repo="uqcxu9/qwen2.5_300step_NEW_CONSIS_RESULT",
    notes=(
        "Qwen2.5-7B-Instruct + LoRA (r 64), verl GRPO (adv_estimator grpo, no KL), custom economic-agent env "
        "(AI-Economist, 100 agents; reward.py: poor-lazy work penalty, regime-adjusted consumption targets, "
        "anti-plateau diversity penalty; can be negative), train batch 2 prompts x n = 4 rollouts, lr 1e-5 cosine "
        "with 10% warm-up, 700 planned steps; reward = verl critic/score/mean, one point per step. Console lines "
        "parsed by bayesgrpo's verl_console reader. The 54-step run in logs/ is a separate, earlier launch "
        "(different first-step rewards)."
    ),
)
COMMIT = "96eca073e807f7aac8d9c1f581515f53e25f5a0b"
RUNS = [
    ("qwen2.5_300step_econ-agent-grpo-700", "RL/train.log", "rising,noisy,custom-env"),
    ("qwen2.5_300step_econ-agent-grpo-54", "logs/grpo_train.log", "noisy,flat,custom-env,short"),
]


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    datas, metas = [], []
    for rid, path, regime in RUNS:
        d = via_reader(raw.read(SOURCE["repo"], COMMIT, path), suffix=".log", run_id=rid, fmt="verl_console")
        datas.append(d)
        metas.append(dict(run_id=rid, source_path=path, commit=COMMIT, model="Qwen/Qwen2.5-7B-Instruct (LoRA r64)",
                          params_b=7.6, group_size=4, learning_rate=1e-5, batch_size=2,
                          dataset="AI-Economist economic decision env (custom reward.py)", algorithm="GRPO (verl)",
                          max_steps=700 if path.startswith("RL/") else float("nan"), regime=regime,
                          notes="reward = critic/score/mean (shaped economic reward, can be negative)"))
    return pd.concat(datas, ignore_index=True), pd.DataFrame(metas)
