"""kokolerk/TON ("Think Only when Needed", GRPO for vision-language models): an early GUI-agent GRPO run committed with
the repo's W&B directory -- Qwen2.5-VL-3B-Instruct, R1-V's ``grpo_gui.py`` (TRL GRPOTrainer), AITW episodes, accuracy
+ format rewards, 8 generations, lr 1e-6, logged every step.

The numbers are the run file ``scripts/wandb/run-20250318_112846-evvobjd4/run-evvobjd4.wandb`` of commit ee5197d
(the W&B transaction log, decoded by :func:`bench.collect.sources._s4util.wandb_history`); the run configuration is
the ``args`` of its ``files/wandb-metadata.json``. The run was stopped after 33 of the 2374 planned steps (the
progress bar of ``files/output.log``); the other 13 committed runs of the directory are aborted launches of at
most 13 steps.
"""

import json

import pandas as pd

from bench.collect import raw
from bench.collect.parse import via_reader
from bench.collect.sources._s4util import wandb_history

SOURCE = dict(
    repo="kokolerk/TON",
    notes=(
        "Qwen2.5-VL-3B-Instruct, TRL GRPOTrainer (R1-V grpo_gui.py), AITW GUI-agent actions, reward = accuracy_reward "
        "+ format_reward (TRL 'reward'), 8 generations, per-device batch 1 x grad-accum 4 on 8 GPUs, lr 1e-6 "
        "constant, logged every step; 33 of 2374 planned steps (stopped early): the reward climbs from 0 to ~1 "
        "within 20 steps and saturates -- all of it format_reward: accuracy_reward is 0 at every logged step; read from "
        "the committed .wandb run file"
    ),
)
COMMIT = "ee5197d6459f5da21eee14317795575791212bb9"
RUN = "scripts/wandb/run-20250318_112846-evvobjd4"


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    repo = SOURCE["repo"]
    commit = COMMIT
    path = f"{RUN}/run-evvobjd4.wandb"
    rows = [r for r in wandb_history(raw.read(repo, commit, path)) if "train/reward" in r]
    recs = [{"step": int(r["train/global_step"]), **{k.removeprefix("train/"): v for k, v in r.items()
                                                        if k.startswith("train/") and k != "train/global_step"}}
            for r in rows]  # fmt: skip
    rid = "TON_gui-agent-qwen25vl-3b-grpo"
    # TRL keys through bayesgrpo's trainer_state reader (the same key table as a trainer_state.json)
    data = via_reader(json.dumps({"log_history": recs}), suffix="_trainer_state.json", run_id=rid, fmt="trainer_state")
    mpath = f"{RUN}/files/wandb-metadata.json"
    args = json.loads(raw.text(repo, commit, mpath))["args"]
    arg = dict(zip(args[0::2], args[1::2], strict=True))
    meta = pd.DataFrame([dict(
        run_id=rid, source_path=f"{path};{mpath}", commit=commit, model="Qwen/Qwen2.5-VL-3B-Instruct", params_b=3.75,
        group_size=int(arg["--num_generations"]), learning_rate=float(arg["--learning_rate"]),
        batch_size=int(arg["--per_device_train_batch_size"]) * int(arg["--gradient_accumulation_steps"]) * 8,
        dataset="AITW (Android in the Wild) GUI actions, images", algorithm="GRPO (TRL, R1-V grpo_gui.py)",
        max_steps=2374, regime="s-curve,short",
        notes=("reward = TRL reward = rewards/accuracy_reward + rewards/format_reward (accuracy 0 throughout: the "
               "curve is the format reward being learned); batch = 1 x 4 accumulation x "
               "8 GPUs (completions); planned 2374 steps (2 epochs), stopped at 33"),
    )])  # fmt: skip
    return data, meta
