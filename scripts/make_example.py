"""Regenerate the shipped example run (a testbed GRPO run written as a TRL trainer_state.json).

    .venv/bin/python scripts/make_example.py

The run is a real GRPO training run of the package's testbed (a 128-wide MLP policy answering
3-token prompts, G = 8, Adam lr 8e-4, 20% unlearnable prompts), so its curve has the slow start,
rise and sub-1 plateau of an LLM run while being reproducible bit for bit.
"""

import json
from pathlib import Path

from bayesgrpo.testbed import TrainerConfig, run

HERE = Path(__file__).resolve().parents[1] / "bayesgrpo" / "resources" / "examples"
cfg = TrainerConfig(
    task="contextual", hidden=128, max_steps=500, group_size=8, batch_size=16, learning_rate=0.0008,
    init_accuracy=0.1, unlearnable_fraction=0.2, seed=3,
)  # fmt: skip
df, meta = run(cfg)
history = []
for row in df.itertuples(index=False):
    entry = {
        "epoch": round(row.step / cfg.max_steps, 4),
        "step": int(row.step),
        "loss": 0.0,
        "reward": round(float(row.reward), 6),
        "reward_std": round(float(row.reward_std), 6),
        "kl": round(float(row.kl), 8),
        "entropy": round(float(row.entropy), 6),
        "frac_reward_zero_std": round(float(row.frac_reward_zero_std), 6),
        "learning_rate": cfg.learning_rate,
    }
    history.append(entry)
state = {
    "best_metric": None,
    "epoch": 1.0,
    "global_step": cfg.max_steps,
    "is_world_process_zero": True,
    "log_history": history,
    "logging_steps": 1,
    "max_steps": cfg.max_steps,
    "num_train_epochs": 1,
    "train_batch_size": cfg.batch_size,
    "trial_name": None,
}
(HERE / "example-grpo-run" / "trainer_state.json").write_text(json.dumps(state, indent=2) + "\n")
meta_out = {
    k: meta.get(k)
    for k in ("model", "family", "params_b", "group_size", "learning_rate", "beta1", "batch_size", "max_steps")
}
meta_out["run_id"] = "example-grpo-run"
import pandas as pd  # noqa: E402 - only this last step needs pandas

pd.DataFrame([meta_out]).to_csv(HERE / "meta.csv", index=False)
print(
    f"wrote {HERE / 'example-grpo-run' / 'trainer_state.json'} ({len(history)} steps; final expected reward {df['reward_expected'].iloc[-1]:.3f})"
)
