"""aryxnsdfs/swarm-os: an OpenEnv multi-agent "swarm OS" incident environment; Llama-3.1-8B-Instruct (Unsloth 4-bit,
LoRA r=16) trained with TRL GRPOTrainer on a Kaggle T4 (``kaggle_training_notebook.py``), 300 steps.

The numbers are ``reward_log.jsonl`` of commit 838f7a6, written by the script's own ``RewardLoggingCallback``: at
every ``on_step_end`` whose step is a multiple of ``logging_steps`` (5) it writes ``reward_latest`` and ``reward_std``,
taken from the newest entry of the trainer's ``log_history`` (TRL's logged ``reward`` / ``reward_std``), plus
sliding-window statistics of those values. The HF Trainer calls ``on_step_end`` *before* it logs the step, so the row
written at step s holds the TRL log of step s - 5; the committed ``training_summary.json`` confirms it (its
``total_steps`` = 295 = the number of step ends, 6..300, that found a logged reward). The module therefore puts each
row at step s - 5 (steps 5..295; the log of step 300 is not in the file). The callback's window/all-time means are
derived from the same values and are not kept.
"""

import json

import pandas as pd

from bench.collect import raw

SOURCE = dict(
    repo="aryxnsdfs/swarm-os",
    notes=(
        "Llama-3.1-8B-Instruct (Unsloth 4-bit, LoRA r=16), TRL GRPOTrainer, custom OpenEnv incident-response "
        "environment (300 prompts x 2 epochs), G=2, 1 x grad-accum 2, lr 5e-6, beta 0.01, max completion 384; "
        "reward_log.jsonl of the script's own callback (TRL reward and reward_std every 5 steps, one logging "
        "interval late: re-aligned to the logged step), 59 points over 300 steps; reward rises noisily from "
        "-0.45 to ~0.3"
    ),
)
COMMIT = "838f7a6639ae4b6a5aed014f88a8126dfa7aa9f6"
PATH = "reward_log.jsonl"
SUMMARY = "training_summary.json"
LAG = 5  # logging_steps: the callback reads the previous log (see the module docstring)


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    rid = "swarm-os_llama31-8b"
    repo = SOURCE["repo"]
    rows = [json.loads(line) for line in raw.text(repo, COMMIT, PATH).splitlines() if line.strip()]
    summ = json.loads(raw.text(repo, COMMIT, SUMMARY))
    # the callback saw one reward per step end from step LAG + 1 on
    assert summ["total_steps"] == rows[-1]["step"] - LAG, summ
    data = pd.DataFrame(
        {
            "run_id": rid,
            "step": [int(r["step"]) - LAG for r in rows],
            "reward": [float(r["reward_latest"]) for r in rows],
            "reward_std": [float(r["reward_std"]) for r in rows],
        }
    )
    meta = pd.DataFrame(
        [
            dict(
                run_id=rid,
                source_path=f"{PATH};{SUMMARY}",
                commit=COMMIT,
                model="unsloth/llama-3.1-8b-instruct-bnb-4bit (LoRA r=16)",
                params_b=8.03,
                group_size=2,
                learning_rate=5e-6,
                batch_size=2,
                dataset="own swarm-os incident scenarios (OpenEnv environment), 300 prompts x 2 epochs",
                algorithm="GRPO (TRL + Unsloth)",
                max_steps=300,
                regime="custom-env,rising,noisy",
                notes=(
                    "reward = TRL 'reward' as copied by the script's RewardLoggingCallback (reward_latest), "
                    "reward_std = TRL 'reward_std'; configuration from kaggle_training_notebook.py at the same commit "
                    "(GRPOConfig: lr 5e-6, batch 1 x accumulation 2, num_generations 2, logging_steps 5, 2 epochs of "
                    "300 prompts); steps shifted back by one logging interval (callback order, checked against "
                    "training_summary.json total_steps=295)"
                ),
            )
        ]
    )
    return data, meta
