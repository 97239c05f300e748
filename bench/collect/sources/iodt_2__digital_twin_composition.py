"""iodt-2/digital-twin-composition: TRL GRPOTrainer with default GRPOConfig fine-tuning Qwen2-0.5B-Instruct to
fill DTDL JSON fields; one W&B panel export (results/llm-fill-in/reward.csv, run "fragrant-sea-49")."""

import pandas as pd

from bench.collect import raw
from bench.collect.sources._s2util import to_schema, wandb_csv

SOURCE = dict(
    repo="iodt-2/digital-twin-composition",
    notes=(
        "Qwen2-0.5B-Instruct, TRL GRPOTrainer with default GRPOConfig (1 epoch; TRL defaults: lr 1e-6, "
        "logging_steps 10), DTDL JSON fill-in task; reward = W&B train/reward of a custom key-match reward "
        "in [-1, 1] (-1 = unparsable JSON, 0.8 x fraction of matching keys inside a ```json fence, 1 x "
        "fraction otherwise); exported without __MIN/__MAX, every 10 steps, 676 points (steps 10-6760)."
    ),
)
COMMIT = "8a7b244ba9beab5fa4abc1be8857cb305a0f8ccb"
PATH = "results/llm-fill-in/reward.csv"


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    ((name, d),) = wandb_csv(raw.text(SOURCE["repo"], COMMIT, PATH)).items()
    rid = "digital-twin-composition_qwen2-0.5b-dtdl-fill"
    d.insert(0, "run_id", rid)
    meta = pd.DataFrame(
        [
            dict(
                run_id=rid,
                source_path=PATH,
                commit=COMMIT,
                model="Qwen/Qwen2-0.5B-Instruct",
                params_b=0.5,
                group_size=None,
                learning_rate=1e-6,
                batch_size=None,
                dataset="DTDL interface fill-in (own, llm-fill-ft.ds)",
                algorithm="GRPO (TRL, default GRPOConfig)",
                max_steps=None,
                regime="rising,flat",
                notes=f"W&B run {name}; 1.fine-tune-GRPO-llm.py sets only output_dir and num_train_epochs=1, so G, lr and "
                "batch are TRL defaults of the installed version (lr 1e-6; G not recorded); logged every 10 steps; rises 0.07 -> 0.77 within the first 50 steps, then flat at ~0.77",
            )
        ]
    )
    return to_schema(d), meta
