"""Rishabh200729/incident-commander-openenv: an OpenEnv "incident commander" environment (a simulated microservice
outage -- single-service failure, cascading failure, hidden root cause -- that the model must diagnose and fix);
Qwen2.5-0.5B-Instruct with LoRA r=16 trained with TRL GRPOTrainer (``train_grpo.py``), 500 steps.

The numbers are ``results/training_log.json`` of commit d16e3d5 ("training log"): the script's own dump of the
trainer's ``train_result``, ``log_history`` (TRL's per-step dicts, logged every 10 steps) and run ``config`` (model,
steps 500, batch 2, lr 5e-6, LoRA, 2 generations, 8 seeds per task). The next commit stops tracking ``results/``. The
``log_history`` is read through bayesgrpo's ``trainer_state`` reader. The same project lives on in the fork
hs-zz27/incident-commander-openenv (which shares this commit); only this repository is collected.
"""

import json

import pandas as pd

from bench.collect import raw
from bench.collect.parse import via_reader

SOURCE = dict(
    repo="Rishabh200729/incident-commander-openenv",
    notes=(
        "Qwen2.5-0.5B-Instruct + LoRA r=16, TRL GRPOTrainer, custom OpenEnv incident-response environment (3 tasks x 8 "
        "seeds = 24 prompts, ~42 epochs), G=2, batch 2 x grad-accum 2, lr 5e-6 (linear decay), max completion 256; "
        "results/training_log.json (log_history + config), 500 steps logged every 10; reward = incident_reward_func, "
        "rises from -0.09 to ~0.02 within 100 steps, then a flat noisy plateau"
    ),
)
COMMIT = "d16e3d54d8da51e75e3511024d1d1614a4ef6845"
PATH = "results/training_log.json"


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    rid = "incident-commander-openenv_qwen25-05b"
    doc = json.loads(raw.text(SOURCE["repo"], COMMIT, PATH))
    cfg = doc["config"]
    data = via_reader(
        json.dumps({"log_history": doc["log_history"]}), suffix="_trainer_state.json", run_id=rid, fmt="trainer_state"
    )
    meta = pd.DataFrame(
        [
            dict(
                run_id=rid,
                source_path=PATH,
                commit=COMMIT,
                model=f"{cfg['model']} (LoRA r=16)",
                params_b=0.49,
                group_size=int(cfg["num_generations"]),
                learning_rate=float(cfg["lr"]),
                batch_size=int(cfg["batch_size"]) * 2,
                dataset="own incident-commander episodes (OpenEnv environment), 3 tasks x 8 seeds",
                algorithm="GRPO (TRL)",
                max_steps=int(cfg["steps"]),
                regime="custom-env,rising,flat,noisy",
                notes=(
                    "reward = TRL 'reward' = rewards/incident_reward_func (kept as reward_fn/*); model, steps, batch, "
                    "lr, generations from the file's own 'config'; gradient_accumulation_steps=2 and LoRA r=16 from "
                    "train_grpo.py at the same commit; logging every 10 steps (first point step 10)"
                ),
            )
        ]
    )
    return data, meta
