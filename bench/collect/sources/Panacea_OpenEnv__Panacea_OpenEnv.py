"""Panacea-OpenEnv/Panacea-OpenEnv: an OpenEnv hackathon environment (an auditor agent detects deception --
inflation, masking, ghost entries, collusion -- in partially observed records through tool calls); Qwen2.5-1.5B-Instruct
(Unsloth 4-bit + LoRA) trained with TRL GRPOTrainer on 1,350 simulated trajectories, 300 steps.

The numbers are TRL's per-step log dicts in the Colab console pasted into ``logs/grpo_run_1.log`` (commit 7a94c1f,
"logs"). Unsloth prints every value as a string (``'reward': '-0.7'``), so each ``{'loss': ...}`` dict is read with
``ast.literal_eval`` and its values turned into floats. The dicts carry no step; there are exactly 300 of them for the
300 optimizer steps the Unsloth banner announces ("Total steps = 300", logging every step), so the k-th dict is step k.
They are then read through bayesgrpo's ``metrics_jsonl`` reader (its key table maps TRL names onto the channels).
"""

import ast
import json
import re

import pandas as pd

from bench.collect import raw
from bench.collect.parse import via_reader

SOURCE = dict(
    repo="Panacea-OpenEnv/Panacea-OpenEnv",
    notes=(
        "Qwen2.5-1.5B-Instruct (Unsloth 4-bit, LoRA, 18.5M trainable parameters), TRL GRPOTrainer, custom OpenEnv "
        "deception-audit environment (tool-call traces), G=6, 6 completions x 2 accumulation = 12 per step, lr 5e-6 "
        "(warm-up), max completion 256 tokens; Colab console pasted into logs/grpo_run_1.log, 300 steps logged every "
        "step; reward = tool_trace + format + tool_use rewards, flat at -0.7 for ~150 steps (every completion "
        "truncated, zero-std groups) then rising slowly to ~-0.5"
    ),
)
COMMIT = "7a94c1f494e7a8cc65cd96a89878ee45239a55cc"
PATH = "logs/grpo_run_1.log"
_DICT = re.compile(r"\{'loss'[^{}]*\}")


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    rid = "Panacea-OpenEnv_qwen25-15b-deception-audit"
    text = raw.text(SOURCE["repo"], COMMIT, PATH)
    rows = [ast.literal_eval(d) for d in _DICT.findall(text)]
    rows = [{k: float(v) for k, v in r.items()} for r in rows if "reward" in r]
    lines = "\n".join(json.dumps({"step": k, **r}) for k, r in enumerate(rows, start=1))
    data = via_reader(lines, suffix=".jsonl", run_id=rid, fmt="metrics_jsonl")
    meta = pd.DataFrame(
        [
            dict(
                run_id=rid,
                source_path=PATH,
                commit=COMMIT,
                model="unsloth/Qwen2.5-1.5B-Instruct-bnb-4bit (LoRA)",
                params_b=1.54,
                group_size=6,
                learning_rate=5e-6,
                batch_size=12,
                dataset="own POMDP deception-audit trajectories (OpenEnv environment), 1,350 train prompts",
                algorithm="GRPO (TRL + Unsloth)",
                max_steps=300,
                regime="custom-env,late-rising,flat",
                notes=(
                    "reward = TRL 'reward' = rewards/tool_trace_reward_fn + format_reward_fn + tool_use_reward_fn "
                    "(kept as reward_fn/*); the Unsloth banner of the same log gives 6 completions per device x 2 "
                    "accumulation, 6 generations, 300 total steps; steps numbered by the order of the printed dicts; "
                    "all completions hit the 256-token limit for most of the run"
                ),
            )
        ]
    )
    return data, meta
