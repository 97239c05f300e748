"""averma12/Grpo_experiments: Unsloth + TRL GRPOTrainer on Qwen2.5-3B-Instruct (4-bit, LoRA r=32) with GSM8K
concatenated with OpenThoughts-114k, the five Unsloth reward functions, 8 generations, 250 steps.

The numbers are the Trainer progress table printed in the executed notebook ``Qwen_GRPO.ipynb``
(logged every step). Own run (not the Unsloth reference output): the OpenThoughts prompts carry a full
reasoning text as ``answer``, so correctness almost never fires, and with max_completion_length 200 the
format rewards stay at 0: the summed reward stays at its floor (only xmlcount moves, around 0-0.1).
"""

import pandas as pd

from bench.collect import raw
from bench.collect.sources._nbutil import grpo_tables

SOURCE = dict(
    repo="averma12/Grpo_experiments",
    notes=(
        "Qwen2.5-3B-Instruct 4-bit LoRA r=32, TRL GRPOTrainer via Unsloth, GSM8K + OpenThoughts-114k prompts, "
        "8 generations, 1 prompt per step, lr 5e-6, max_completion 200, 250 steps logged every step; reward = sum "
        "of the 5 Unsloth reward functions (correctness 2.0, int 0.5, strict/soft format 0.5, xmlcount); stays "
        "at the floor (~0.05): only xmlcount moves, correctness/format never switch on in 250 steps"
    ),
)
COMMIT = "d91c95c3f0877ded6df93bc0a6620697e72c8c32"
PATH = "Qwen_GRPO.ipynb"


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    rid = "Grpo_experiments_qwen25-3b-gsm8k-openthoughts"
    data = grpo_tables(raw.text(SOURCE["repo"], COMMIT, PATH), run_id=rid)
    meta = pd.DataFrame(
        [
            dict(
                run_id=rid,
                source_path=PATH,
                commit=COMMIT,
                model="Qwen/Qwen2.5-3B-Instruct (Unsloth 4-bit, LoRA r=32)",
                params_b=3.1,
                group_size=8,
                learning_rate=5e-6,
                batch_size=8,
                dataset="gsm8k train + open-thoughts/OpenThoughts-114k (concatenated)",
                algorithm="GRPO (TRL/Unsloth)",
                max_steps=250,
                regime="flat",
                notes=(
                    "reward = TRL 'reward' = sum of rewards/xmlcount, soft_format, strict_format, int, correctness "
                    "(kept as reward_fn/*); per_device_train_batch_size 1 x 8 generations; max_completion_length 200; "
                    "OpenThoughts answers are whole solutions so exact-match correctness ~never fires; reward at its floor"
                ),
            )
        ]
    )
    return data, meta
