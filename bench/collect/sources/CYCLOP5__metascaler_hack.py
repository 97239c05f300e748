"""CYCLOP5/metascaler-hack: an OpenEnv supply-chain environment ("dsc-co": 30 discrete ordering decisions scored at the
end by a MILP verifier); Llama-3.2-3B-Instruct (Unsloth 4-bit QLoRA r=32) trained with TRL GRPOTrainer, 400 steps on
an A100 Hugging Face Space.

The numbers are ``results/training_metrics.json`` of commit a8c3bb6: the trainer's ``log_history`` (a JSON list of
TRL's per-step dicts, logged every step, plus the final summary row), committed with ``results/training_summary.json``
(model, max_steps 400, 2,000 prompts, 8 generations, max completion 768), which gives the run's configuration. The list
is read through bayesgrpo's ``trainer_state`` reader. (The same author's CYCLOP5/low-taper-fade-openenv-scaler is a
different project and is not collected.)
"""

import json

import pandas as pd

from bench.collect import raw
from bench.collect.parse import via_reader

SOURCE = dict(
    repo="CYCLOP5/metascaler-hack",
    notes=(
        "Llama-3.2-3B-Instruct (Unsloth 4-bit QLoRA r=32), TRL GRPOTrainer, custom OpenEnv supply-chain environment "
        "(30-step episodes, MILP-verified terminal reward + schema + shaping rewards), G=8, one prompt (8 completions) "
        "per step, lr 5e-6 constant, max completion 768; results/training_metrics.json (log_history), 400 steps "
        "logged every step; reward rises from ~0.6 to ~1.1 in 25 steps, then creeps up slowly to ~1.2 with noise"
    ),
)
COMMIT = "a8c3bb658384ce521bd526011c697ebf8eadfa1b"
PATH = "results/training_metrics.json"
SUMMARY = "results/training_summary.json"


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    rid = "metascaler-hack_llama32-3b-supply-chain"
    repo = SOURCE["repo"]
    rows = json.loads(raw.text(repo, COMMIT, PATH))
    summ = json.loads(raw.text(repo, COMMIT, SUMMARY))
    data = via_reader(json.dumps({"log_history": rows}), suffix="_trainer_state.json", run_id=rid, fmt="trainer_state")
    lr = max(r.get("learning_rate", 0.0) for r in rows)
    meta = pd.DataFrame(
        [
            dict(
                run_id=rid,
                source_path=f"{PATH};{SUMMARY}",
                commit=COMMIT,
                model=f"{summ['model_name']} (QLoRA r=32)",
                params_b=3.21,
                group_size=int(summ["num_generations"]),
                learning_rate=lr,
                batch_size=int(summ["num_generations"]),
                dataset=f"own supply-chain episodes (OpenEnv environment), {summ['dataset_size']} prompts",
                algorithm="GRPO (TRL + Unsloth)",
                max_steps=int(summ["max_steps"]),
                regime="custom-env,rising,noisy",
                notes=(
                    "reward = TRL 'reward' = rewards/reward_func + schema_reward_func + terminal_reward_func (kept as "
                    "reward_fn/*); model, steps, prompts, generations from training_summary.json; batch = 8 completions "
                    "(epoch advances by 1/2000 per step: one prompt per step); lr = the logged learning_rate; LoRA rank "
                    "from the README at the same commit"
                ),
            )
        ]
    )
    return data, meta
