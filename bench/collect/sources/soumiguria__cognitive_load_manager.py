"""soumiguria/cognitive-load-manager: Meta OpenEnv hackathon project; Qwen2.5-1.5B-Instruct (Unsloth, LoRA r16)
trained with TRL GRPOTrainer against a custom "Cognitive Load Manager" task-scheduling environment (an HTTP
server scores each completion's action); the reward function logs each call's mean/max/min reward to
``reward_curve.json``."""

import json

import pandas as pd

from bench.collect import raw

SOURCE = dict(
    repo="soumiguria/cognitive-load-manager",
    notes=(
        "Qwen2.5-1.5B-Instruct (Unsloth, LoRA r16), TRL GRPOTrainer, G = 4, 2 prompts per device x 2 "
        "accumulation, lr 5e-6, 25 epochs planned (the Unsloth banner in the notebook says 2,000 total steps), interrupted by hand after 223 min; custom env (task "
        "scheduling: progress/milestone/completion bonuses, context-switch, delay and burnout penalties; one env "
        "step per completion). reward = 'mean' of reward_curve.json, written by the notebook's reward function "
        "once per call (per generation batch of 8 completions), so the logging unit is the reward-function call "
        "(1117 calls, about two per optimiser step with 2-step accumulation), not the optimiser step; the notebook output prints the same per-call means; max/min of the call kept as reward_max/reward_min. Rises from "
        "~0.11 to a plateau ~0.25 (the env's best single action scores 0.27)."
    ),
)
COMMIT = "3a0befe65aa45734173f92c14d8163bf19d19ba1"
PATH = "reward_curve.json"


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    rid = "cognitive-load-manager_grpo-qwen15b-clm-env"
    recs = json.loads(raw.text(SOURCE["repo"], COMMIT, PATH))
    data = pd.DataFrame({
        "run_id": rid, "step": [r["step"] for r in recs], "reward": [r["mean"] for r in recs],
        "reward_max": [r["max"] for r in recs], "reward_min": [r["min"] for r in recs],
    })  # fmt: skip
    meta = pd.DataFrame(
        [
            dict(
                run_id=rid,
                source_path=PATH,
                commit=COMMIT,
                model="Qwen/Qwen2.5-1.5B-Instruct (Unsloth, LoRA r16)",
                params_b=1.54,
                group_size=4,
                learning_rate=5e-6,
                batch_size=4,
                dataset="Cognitive Load Manager env (OpenEnv, task scheduling)",
                algorithm="GRPO (TRL GRPOTrainer)",
                max_steps=float("nan"),
                regime="rising,noisy,custom-env",
                notes="step = reward-function call (8 completions each), 1117 calls; reward = mean env step reward",
            )
        ]
    )
    return data, meta
