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

# ---------------------------------------------------------------- a verl run whose 0/1 reward starts flat at its floor
# the same testbed task with a rarer first success (init_accuracy 0.005): groups of 8 are almost always all-zero,
# so the reward stays near 0 for ~80 steps before its S-curve (advantage degeneracy; the `degeneracy` kind),
# written as verl's file logger writes it (one JSON record per step)
cfg = TrainerConfig(
    task="contextual", hidden=128, max_steps=400, group_size=8, batch_size=16, learning_rate=0.0008,
    init_accuracy=0.005, unlearnable_fraction=0.2, seed=3,
)  # fmt: skip
df, meta = run(cfg)
lines = []
for row in df.itertuples(index=False):
    data = {
        "critic/score/mean": round(float(row.reward), 6),
        "critic/rewards/mean": round(float(row.reward), 6),
        "critic/score/std": round(float(row.reward_std), 6),
        "actor/entropy": round(float(row.entropy), 6),
        "actor/ppo_kl": round(float(row.kl), 8),
        "actor/lr": cfg.learning_rate,
        "training/global_step": int(row.step) + 1,
    }
    lines.append(json.dumps({"step": int(row.step) + 1, "data": data}))
out = HERE / "verl-slow-start" / "grpo.jsonl"
out.parent.mkdir(exist_ok=True)
out.write_text("\n".join(lines) + "\n")
print(f"wrote {out} ({len(lines)} steps; reward {df['reward'].iloc[:80].mean():.3f} over the first 80)")
