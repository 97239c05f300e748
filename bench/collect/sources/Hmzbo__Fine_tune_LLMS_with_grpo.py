"""Hmzbo/Fine-tune-LLMS-with-grpo: Unsloth + TRL GRPOTrainer on Qwen2.5-3B-Instruct (4-bit, LoRA r=64) on GSM8K,
run locally on Windows (no vLLM) for a video tutorial: 3 generations per prompt, 350 steps.

The numbers are the Trainer progress table printed in the executed notebook ``grpo_unsloth.ipynb``
(logged every step; this TRL version prints no per-reward-function columns). Reward = sum of five
functions: an own ``count_reward_func`` (xml-tag count, can be negative), soft/strict format 0.5 each,
int 0.5, correctness 2.0.
"""

import pandas as pd

from bench.collect import raw
from bench.collect.sources._nbutil import grpo_tables

SOURCE = dict(
    repo="Hmzbo/Fine-tune-LLMS-with-grpo",
    notes=(
        "Qwen2.5-3B-Instruct 4-bit LoRA r=64, TRL GRPOTrainer via Unsloth (no vLLM, Windows), GSM8K, 3 generations, "
        "1 prompt per step, lr 5e-6, max_completion 400, 350 steps logged every step; summed reward (count + "
        "soft/strict format + int + correctness 2.0, max ~4; starts negative); rises from ~-0.3 to ~2 between "
        "steps 75 and 200, then plateaus; only reward, reward_std, completion_length, kl logged"
    ),
)
COMMIT = "351f0c28150b9481d4aefc4e7411b398353ba7bc"
PATH = "grpo_unsloth.ipynb"


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    rid = "Fine-tune-LLMS-with-grpo_qwen25-3b-gsm8k-g3"
    data = grpo_tables(raw.text(SOURCE["repo"], COMMIT, PATH), run_id=rid)
    meta = pd.DataFrame(
        [
            dict(
                run_id=rid,
                source_path=PATH,
                commit=COMMIT,
                model="Qwen/Qwen2.5-3B-Instruct (Unsloth 4-bit, LoRA r=64)",
                params_b=3.1,
                group_size=3,
                learning_rate=5e-6,
                batch_size=3,
                dataset="gsm8k",
                algorithm="GRPO (TRL/Unsloth)",
                max_steps=350,
                regime="late-rising,noisy",
                notes=(
                    "reward = TRL 'reward' = count_reward_func + soft_format + strict_format + int + correctness(2.0); "
                    "per_device_train_batch_size 1 x num_generations 3; max_completion_length 400, max_seq_length 512; "
                    "the progress table has no per-function columns (TRL commit e95f9fb of Feb 2025)"
                ),
            )
        ]
    )
    return data, meta
