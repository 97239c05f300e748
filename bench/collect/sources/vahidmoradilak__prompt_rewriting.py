"""vahidmoradilak/prompt_rewriting: GRPO (TRL GRPOTrainer + Unsloth) teaching Llama-3.2-3B-Instruct (4-bit LoRA) to
rewrite GSM8K questions so that a frozen Llama-3.2-3B answers them correctly.

The numbers are the Trainer progress table printed in the executed notebook ``GRPO.ipynb`` (the GRPO cell;
the notebook's ORPO/DPO tables are other cells and are not read). Reward = one reward function
``grpo_reward_fn`` = 2.0 * (+1 correct / -1 wrong answer of the frozen solver on the rewritten question)
+ 0.3 * BERTScore-F1(original, rewritten) - 0.1 * |len - 60| / 60, so it ranges about -2.4 .. +2.3.
"""

import pandas as pd

from bench.collect import raw
from bench.collect.sources._nbutil import grpo_tables

SOURCE = dict(
    repo="vahidmoradilak/prompt_rewriting",
    notes=(
        "Llama-3.2-3B-Instruct (Unsloth 4-bit, LoRA r=64) rewrites GSM8K questions; TRL GRPOTrainer, 6 generations, "
        "1 prompt per step, lr 5e-6, 1 epoch over 50 training questions (50 steps, logged every step); reward = "
        "2*(+/-1 frozen-solver correctness) + 0.3*BERTScore - 0.1*length penalty (one reward function, can be "
        "negative); single prompt per step makes the curve very noisy"
    ),
)
COMMIT = "15fb68adfb0b8453fd3dca40d28dc4729a3054a2"
PATH = "GRPO.ipynb"


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    rid = "prompt_rewriting_llama32-3b-gsm8k-rewriter"
    data = grpo_tables(raw.text(SOURCE["repo"], COMMIT, PATH), run_id=rid)
    meta = pd.DataFrame(
        [
            dict(
                run_id=rid,
                source_path=PATH,
                commit=COMMIT,
                model="unsloth/Llama-3.2-3B-Instruct-bnb-4bit",
                params_b=3.2,
                group_size=6,
                learning_rate=5e-6,
                batch_size=6,
                dataset="gsm8k (50 test-split questions, question rewriting)",
                algorithm="GRPO (TRL/Unsloth)",
                max_steps=50,
                regime="noisy,flat",
                notes=(
                    "reward = TRL 'reward' (= rewards/grpo_reward_fn/mean): 2*(+1/-1 frozen Llama-3.2-3B answer "
                    "correct on the rewritten question) + 0.3*BERTScore F1 - 0.1*|len-60|/60; per_device_train_batch_size 6 "
                    "= one prompt x 6 generations per step; num_train_epochs 1 over 50 questions -> 50 steps; "
                    "the notebook also holds ORPO/DPO runs (not GRPO, not read)"
                ),
            )
        ]
    )
    return data, meta
