"""uqcxu9/qwen2.5_300step_NEW_CONSIS_RESULT: a Qwen2.5-7B-Instruct economic agent (AI-Economist simulation: work and
consumption decisions) trained with verl GRPO and a hand-written shaped reward (``RL/reward.py``); verl console
logs of the successive reward-design iterations in ``logs/`` (first commit) and the final run ``RL/train.log``."""

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
        "parsed by bayesgrpo's verl_console reader. logs/ holds the successive reward-design iterations (v1 "
        "300 steps, new reward / v2, v3, v4 300 steps, v5 700, v6 stopped at 192, v9 300; a 54-step early launch): "
        "the reward DEFINITION changes between versions (reward.py was rewritten), so the runs are not comparable "
        "in level. logs/rl_train.log is the same file as RL/train.log and logs/train_v2_300steps.log the same as "
        "logs/train_new_reward.log (not read twice)."
    ),
)
COMMIT = "96eca073e807f7aac8d9c1f581515f53e25f5a0b"
C_FIRST = "0f7598cff20a0d633a5cf4d239078c5c4a73853b"
RUNS = [  # run id suffix, commit, path, planned steps, regime
    ("econ-agent-grpo-final-700", COMMIT, "RL/train.log", 700, "rising,noisy,custom-env"),
    ("econ-agent-grpo-early-54", C_FIRST, "logs/grpo_train.log", float("nan"), "noisy,flat,custom-env,short"),
    ("econ-agent-grpo-v1-300", C_FIRST, "logs/train_300steps.log", 300, "noisy,flat,custom-env"),
    ("econ-agent-grpo-v2-newreward-300", C_FIRST, "logs/train_new_reward.log", 300, "rising,noisy,custom-env"),
    ("econ-agent-grpo-v3-300", C_FIRST, "logs/train_v3_reward.log", 300, "rising,noisy,custom-env"),
    ("econ-agent-grpo-v4-300", C_FIRST, "logs/train_v4_reward.log", 300, "rising,noisy,custom-env"),
    ("econ-agent-grpo-v5-700", C_FIRST, "logs/train_v5_reward.log", 700, "rising,noisy,custom-env"),
    ("econ-agent-grpo-v6-192", C_FIRST, "logs/train_v6_reward.log", float("nan"), "rising,noisy,custom-env"),
    ("econ-agent-grpo-v9-300", C_FIRST, "logs/training_v9.log", 300, "noisy,flat,custom-env"),
]


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    datas, metas = [], []
    for name, commit, path, planned, regime in RUNS:
        rid = f"qwen2.5_300step_{name}"
        d = via_reader(raw.read(SOURCE["repo"], commit, path), suffix=".log", run_id=rid, fmt="verl_console")
        datas.append(d)
        metas.append(
            dict(
                run_id=rid,
                source_path=path,
                commit=commit,
                model="Qwen/Qwen2.5-7B-Instruct (LoRA r64)",
                params_b=7.6,
                group_size=4,
                learning_rate=1e-5,
                batch_size=2,
                dataset="AI-Economist economic decision env (custom reward.py)",
                algorithm="GRPO (verl)",
                max_steps=planned,
                regime=regime,
                notes="reward = critic/score/mean (shaped economic reward, can be negative); "
                "config (lr, n, batch) from the final RL/config/econ_grpo_small.yaml, "
                "earlier versions may differ",
            )
        )
    return pd.concat(datas, ignore_index=True), pd.DataFrame(metas)
