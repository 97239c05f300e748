"""anirudh-muthusundaram/GRPO-Fine-Tuning-of-Qwen3-1.7B-on-PHYBench-...: TRL GRPOTrainer (LoRA r=64 on q/v) on Qwen3-1.7B
with the PHYBench physics benchmark (100 questions, 550 steps).

The numbers are the lines ``[Step N] key=value ...`` that the notebook's ``ConsoleLoggerCallback`` printed
(every TRL log, ``logging_steps=1``) in the training cell of ``grpo_train.ipynb``. One reward function
``phybench_reward`` = 0.2*(has \\boxed{}) + 0.3*(>= 6 lines of reasoning) + 0.5*EED score of the boxed answer.
Every completion hit the 1024-token cap (clipped_ratio 1.0 throughout), so the reward sits at the 0.3
"trace" bonus almost always: a stuck, flat run.
"""

import re

import pandas as pd

from bench.collect import raw
from bench.collect.sources._nbutil import log_records, notebook_stream

SOURCE = dict(
    repo="anirudh-muthusundaram/GRPO-Fine-Tuning-of-Qwen3-1.7B-on-PHYBench-Physics-Benchmark-with-CoT-Reasoning",
    notes=(
        "Qwen3-1.7B LoRA, TRL GRPOTrainer, PHYBench (100 questions), 4 generations, 1 prompt per step, lr 5e-7, "
        "beta 0.1, 550 steps logged every step (printed by a callback in the notebook); reward = 0.2 format + "
        "0.3 trace + 0.5 EED correctness; every completion truncated at 1024 tokens, reward stuck near 0.3 (flat, "
        "no learning)"
    ),
)
COMMIT = "2c78b09d168c286ca71445f5d55f974b55c52bfe"
PATH = "grpo_train.ipynb"
CELL = 4  # the training cell ("Main")
_LINE = re.compile(r"^\[Step (\d+)\] (.*)$")
_KV = re.compile(r"(\S+?)=(\S+)")


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    text = notebook_stream(raw.text(SOURCE["repo"], COMMIT, PATH), CELL)
    recs = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        rec = {k: float(v) for k, v in _KV.findall(m.group(2))}
        if "reward" not in rec:  # the final train-summary line (train_runtime, train_loss)
            continue
        rec["step"] = int(m.group(1))
        recs.append(rec)
    rid = "PHYBench_qwen3-1.7b-grpo"
    data = log_records(recs, run_id=rid)
    meta = pd.DataFrame(
        [
            dict(
                run_id=rid,
                source_path=PATH,
                commit=COMMIT,
                model="Qwen/Qwen3-1.7B (LoRA r=64, q/v)",
                params_b=1.7,
                group_size=4,
                learning_rate=5e-7,
                batch_size=4,
                dataset="Eureka-Lab/PHYBench (100 full questions)",
                algorithm="GRPO (TRL)",
                max_steps=550,
                regime="flat",
                notes=(
                    "reward = TRL 'reward' = rewards/phybench_reward/mean (0.2*boxed + 0.3*>=6 lines + 0.5*EED score); "
                    "per_device_batch 2 x grad_accum 2 = 4 completions = 1 prompt x 4 generations per step; "
                    "completions always clipped at max_new_tokens 1024, so correctness never scores and the reward "
                    "stays near 0.3; printed by the notebook's ConsoleLoggerCallback (cell 4)"
                ),
            )
        ]
    )
    return data, meta
