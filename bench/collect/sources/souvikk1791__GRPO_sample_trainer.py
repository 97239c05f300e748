"""souvikk1791/GRPO_sample_trainer: a GRPO trainer written from scratch (no TRL) with several policy updates per
batch (GRPO_ITER), LoRA r=8 on Qwen2.5-0.5B-Instruct, GSM8K, reward = correctness + format.

The numbers are the W&B history of run ``mjq39fsw`` (19 Feb 2025), read from its committed datastore file
``wandb/run-20250219_111820-mjq39fsw/run-mjq39fsw.wandb`` (added in commit 627a74e, deleted in cd67f8b;
read at cd67f8b's parent 2c2da64) with :mod:`._wandbfile`. The loop logs ``rewards`` (mean reward of the
step's B x G completions), ``correctness_reward``, ``format_reward``, ``kl_div`` (KL to an EMA reference),
``loss`` and ``objective`` once per ``global_step``. The other 80 committed runs of the repository are
restarts with fewer than 30 logged steps (the longest other one has 24, all zero reward) and are not read.
"""

import pandas as pd

from bench.collect import raw
from bench.collect.sources._wandbfile import scalar_table

SOURCE = dict(
    repo="souvikk1791/GRPO_sample_trainer",
    notes=(
        "Qwen2.5-0.5B-Instruct LoRA r=8, own GRPO loop (no TRL; group-normalised advantages, KL to an EMA reference "
        "model, GRPO_ITER=2 updates per batch, Adam lr 2e-5), GSM8K, G=16, 16 prompts per batch; W&B datastore "
        "file committed under wandb/ (binary protobuf history, parsed without the wandb package); one run of "
        "60 steps; reward = mean of correctness (0 or 2) + int / strict / soft format (0.5 each) + xml-count terms (logged as correctness_reward and format_reward), rises late from ~0 to ~0.8"
    ),
)
COMMIT = "2c2da6494adc55212766e848e336b40e4eab4cb9"
PATH = "wandb/run-20250219_111820-mjq39fsw/run-mjq39fsw.wandb"
RENAME = {
    "global_step": "step",
    "rewards": "reward",
    "kl_div": "kl",
    "correctness_reward": "reward_fn/correctness_reward",
    "format_reward": "reward_fn/format_reward",
}


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    rid = "GRPO_sample_trainer_qwen25-05b-gsm8k"
    t = scalar_table(raw.read(SOURCE["repo"], COMMIT, PATH))
    t = t.dropna(subset=["global_step", "rewards"]).rename(columns=RENAME)
    # "_step" etc. are W&B bookkeeping; "completions/nrows|ncols|size" describe a logged table of samples
    t = t.drop(columns=[c for c in t.columns if c.startswith(("_", "completions/"))])
    t["step"] = t["step"].astype(int)
    t.insert(0, "run_id", rid)
    cols = ["run_id", "step", "reward"] + [c for c in t.columns if c not in ("run_id", "step", "reward")]
    data = t[cols].sort_values("step").reset_index(drop=True)
    meta = pd.DataFrame(
        [
            dict(
                run_id=rid,
                source_path=PATH,
                commit=COMMIT,
                model="Qwen/Qwen2.5-0.5B-Instruct (LoRA r=8)",
                params_b=0.49,
                group_size=16,
                learning_rate=2e-5,
                batch_size=16,
                dataset="openai/gsm8k",
                algorithm="GRPO (own loop, 2 updates per batch, EMA reference)",
                max_steps=None,
                regime="late-rising,short",
                notes=(
                    "reward = W&B 'rewards' = mean over the step's completions of correctness + format rewards "
                    "(kept as reward_fn/*); consecutive steps often repeat a value (GRPO_ITER=2 logs the same "
                    "batch's reward twice); KL 'kl_div' is to an EMA (decay 0.99) reference; run stopped by hand "
                    "after 60 steps (no max_steps)"
                ),
            )
        ]
    )
    return data, meta
