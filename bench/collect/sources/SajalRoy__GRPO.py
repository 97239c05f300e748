"""SajalRoy/GRPO: an own execution of Unsloth's Qwen3-4B-Base GRPO notebook (SFT format warm-up, then TRL
GRPOTrainer on DAPO-Math-17k), interrupted at step 33 of 100.

The numbers are the GRPO Trainer progress table (cell 55) of the executed notebook ``GRPO_Qwen.ipynb``
(logged every step, 31 rows printed); the notebook's SFT table (cell 21, no reward) is not read. The same
run is committed again as ``GRPO_Qwen3.ipynb`` (commit 2c511b0), not read twice. Its numbers differ from
Unsloth's reference output. Reward = sum of match_format_exactly (+3), match_format_approximately
(+-0.5 per tag), check_answer (-4.5 .. +5), check_numbers (-2.5 .. +3.5); floor -7.5.
"""

import pandas as pd

from bench.collect import raw
from bench.collect.sources._nbutil import grpo_tables

SOURCE = dict(
    repo="SajalRoy/GRPO",
    notes=(
        "Qwen3-4B-Base LoRA r=32 (16-bit), Unsloth Qwen3 GRPO notebook re-run (own execution, not the reference "
        "output), DAPO-Math-17k, 4 generations, 1 prompt per step, lr 5e-6; stopped at step 33 of max_steps 100 "
        "(31 logged rows, every step); summed reward (floor -7.5) sits at the floor with rare spikes"
    ),
)
COMMIT = "c7ec912f6c1e6dbbf17fdbbb02421621fd4a03cb"
PATH = "GRPO_Qwen.ipynb"


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    rid = "SajalRoy-GRPO_qwen3-4b-dapo-math"
    data = grpo_tables(raw.text(SOURCE["repo"], COMMIT, PATH), run_id=rid, cells=[55])
    meta = pd.DataFrame(
        [
            dict(
                run_id=rid,
                source_path=PATH,
                commit=COMMIT,
                model="unsloth/Qwen3-4B-Base (LoRA r=32, SFT format warm-up)",
                params_b=4.0,
                group_size=4,
                learning_rate=5e-6,
                batch_size=4,
                dataset="open-r1/DAPO-Math-17k-Processed",
                algorithm="GRPO (TRL/Unsloth)",
                max_steps=100,
                regime="flat,short",
                notes=(
                    "reward = TRL 'reward' = match_format_exactly + match_format_approximately + check_answer + "
                    "check_numbers (kept as reward_fn/*), floor -7.5; progress bar 33/100 when the notebook was saved "
                    "(interrupted), 31 table rows; config identical to Unsloth's Qwen3 (4B) GRPO notebook, numbers are "
                    "this user's own run"
                ),
            )
        ]
    )
    return data, meta
