"""RaghuHemadri/openenv_hack: an OpenEnv hackathon "watchdog" environment (a user model decides, per turn of an
agent conversation, whether to flag it); Qwen3-8B with LoRA r=16 trained with TRL GRPOTrainer on 1,641 samples
from 100 played episodes, 200 steps.

The numbers are TRL's per-step log dicts printed to the terminal and committed as ``output1.txt`` (the console
of ``python -m watchdog_env.train_user --model Qwen/Qwen3-8B --train_steps 200``). The capture is hard-wrapped
at a fixed terminal width, so the lines are joined without separators before the ``{'loss': ...}`` dicts are
read (``ast.literal_eval``); the dicts carry no step, and there are exactly 200 of them for 200 optimizer steps
with ``logging_steps=1`` (``train_steps_per_second`` x ``train_runtime`` = 200), so the k-th dict is step k. They
are then read through bayesgrpo's ``metrics_jsonl`` reader (its key table maps TRL names onto the channels).
"""

import ast
import json
import re

import pandas as pd

from bench.collect import raw
from bench.collect.parse import via_reader

SOURCE = dict(
    repo="RaghuHemadri/openenv_hack",
    notes=(
        "Qwen3-8B bf16 + LoRA r=16, TRL GRPOTrainer, custom OpenEnv 'watchdog' environment (flag / pass decisions "
        "on agent conversations), G=4, batch 1 x grad-accum 8, lr 2e-4 (linear warm-up), max completion 384; "
        "terminal capture output1.txt (hard-wrapped lines joined), 200 steps logged every step; reward = "
        "_reward_action + reward_format, rises from ~-3 to ~0 by step 60 then stays noisy around -0.5..1"
    ),
)
COMMIT = "5aaf6fe20dd9853378b2c00420329b877b881d18"
PATH = "output1.txt"
_DICT = re.compile(r"\{'loss'[^{}]*\}")


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    rid = "openenv_hack_qwen3-8b-watchdog"
    text = raw.text(SOURCE["repo"], COMMIT, PATH).replace("\r", "").replace("\n", "")
    rows = [ast.literal_eval(d) for d in _DICT.findall(text)]
    rows = [r for r in rows if "reward" in r]
    lines = "\n".join(json.dumps({"step": k, **r}) for k, r in enumerate(rows, start=1))
    data = via_reader(lines, suffix=".jsonl", run_id=rid, fmt="metrics_jsonl")
    meta = pd.DataFrame(
        [
            dict(
                run_id=rid,
                source_path=PATH,
                commit=COMMIT,
                model="Qwen/Qwen3-8B (LoRA r=16)",
                params_b=8.2,
                group_size=4,
                learning_rate=2e-4,
                batch_size=8,
                dataset="own watchdog episodes (OpenEnv environment), 1,641 samples",
                algorithm="GRPO (TRL)",
                max_steps=200,
                regime="custom-env,rising,noisy",
                notes=(
                    "reward = TRL 'reward' = _reward_action + reward_format (kept as reward_fn/*); configuration from "
                    "watchdog_env/train_user.py at the same commit (logging_steps=1, num_generations=4, "
                    "per_device_train_batch_size=1, gradient_accumulation_steps=8, lr 2e-4); steps numbered by "
                    "the order of the printed dicts; every completion hits the 384-token limit early on"
                ),
            )
        ]
    )
    return data, meta
