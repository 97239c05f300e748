"""JosephLi2023/CS224R: Stanford CS224R (2026) project on hierarchical credit assignment for LLM agents; the committed
run is the flat-GRPO baseline on WebShop (Qwen2.5-1.5B-Instruct + LoRA, warm-started from the team's SFT v3
adapter), K = 4 trajectories per task, one task per episode, up to 5 turns.

The numbers are ``docs/grpo_50ep_train_log.json`` of commit f608d5f ("reward curve script + 50-ep run
artifact"): one row per training episode (``mean_reward`` of the K trajectories, ``std_reward``, KL, losses,
grad norm). Episodes 16 and 47 died of CUDA OOM and have no row (their steps are absent). The reward is the
WebShop task score (0-1), for a different task every episode, so the curve is noisy.
"""

import json

import pandas as pd

from bench.collect import raw

SOURCE = dict(
    repo="JosephLi2023/CS224R",
    notes=(
        "Qwen2.5-1.5B-Instruct + LoRA (SFT-warm-started), flat GRPO on the WebShop agent environment, K = 4 "
        "trajectories per task, 1 task per episode, max 5 turns, lr 1e-6 (configs/method_flat_grpo.json), KL "
        "coefficient 0.04 with 3 warm-up episodes; 50 planned episodes, 48 logged (2 OOM); reward = mean WebShop "
        "score of the K trajectories (mean_reward), std_reward -> reward_std (within the one group), observed_kl -> "
        "kl; noisy (different task every episode)"
    ),
)
COMMIT = "f608d5f440612afef123f2fb115d798fc408e305"
PATH = "docs/grpo_50ep_train_log.json"

COLS = {
    "mean_reward": "reward", "std_reward": "reward_std", "observed_kl": "kl", "policy_loss": "policy_loss",
    "kl_term": "kl_term", "total_loss": "loss", "kl_coef": "kl_coef", "grad_norm": "grad_norm",
    "mean_traj_adv": "mean_traj_adv", "completed": "completed", "truncated": "truncated", "n_turns": "n_turns",
    "n_action_tokens": "n_action_tokens", "elapsed_s": "step_time",
}  # fmt: skip


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    doc = json.loads(raw.text(SOURCE["repo"], COMMIT, PATH))
    rows = [r for r in doc["rows"] if "mean_reward" in r]  # the OOM episodes carry only an error
    df = pd.DataFrame(rows)
    rid = "CS224R_webshop-flat-grpo-50ep"
    out = df[["episode", *COLS]].rename(columns={"episode": "step", **COLS})
    out.insert(0, "run_id", rid)
    meta = pd.DataFrame([dict(
        run_id=rid, source_path=PATH, commit=COMMIT, model="Qwen/Qwen2.5-1.5B-Instruct (LoRA, SFT v3 warm start)",
        params_b=1.54, group_size=int(doc["config"]["K"]), learning_rate=1e-6, batch_size=1,
        dataset="WebShop (1000 products), one task per episode", algorithm="GRPO (flat, trajectory-level, own loop)",
        max_steps=int(doc["config"]["n_episodes"]), regime="flat,noisy,custom-env",
        notes=("reward = mean_reward (mean WebShop score of the 4 trajectories of the episode's task); episodes 16 "
               "and 47 OOM (absent); lr from configs/method_flat_grpo.json; batch = 1 task x 4 trajectories"),
    )])  # fmt: skip
    return out, meta
