"""yuxuanwang2009/RL_GRPO: a minimal hand-written GRPO loop (``train_grpo.py``: PPO-style clipped objective, Schulman
KL to a frozen reference) on Qwen2.5-0.5B/1.5B-Instruct for generated arithmetic tasks; ``grpo_metrics.json``
(overwritten by each committed run, five versions in the history) holds the reward, accuracy and KL series."""

import json

import numpy as np
import pandas as pd

from bench.collect import raw

SOURCE = dict(
    repo="yuxuanwang2009/RL_GRPO",
    notes=(
        "Hand-written GRPO (PPO-clip objective, Schulman KL, std-normalised group advantages), 4 prompts x G "
        "generations per iteration, Qwen2.5-0.5B-Instruct on generated (a op b) op c arithmetic (reward 0.2 format "
        "+ 0.2 within +-1 + 0.6 exact, max 1.0) and Qwen2.5-1.5B-Instruct on a countdown-style task. "
        "CAVEAT: SMOOTHED series: train_grpo.py logs, every 10 iterations, the TRAILING MEAN of the last 10 (first "
        "run) or 20 iterations' batch-mean reward (deque), so neighbouring points share iterations; step = "
        "iteration (0, 10, 20, ...); the first point is iteration 0 alone. accuracy / kl are smoothed the same "
        "way; val_accuracy (later runs) is a fresh 32-prompt validation batch at each log. Hyperparameters read "
        "from the train_grpo.py committed together with each metrics version."
    ),
)
PATH = "grpo_metrics.json"
#: commit that introduced each version, with the config of train_grpo.py at that commit
RUNS = [
    ("6c2cf6c568e4e087983ef8c59a2d22299956e88d", "arith-0p5b-lr1e-7-inner5", "Qwen/Qwen2.5-0.5B-Instruct", 0.494, 8,
     1e-7, 3000, "arithmetic (a op b) op c", "window 10; beta 0.04, 5 inner updates per batch"),
    ("c354c3f8a96611f1188237afdcc6f0b436af3678", "arith-0p5b-lr1e-7-beta0p08", "Qwen/Qwen2.5-0.5B-Instruct", 0.494, 8,
     1e-7, 4000, "arithmetic (a op b) op c", "window 20; beta 0.08, 1 inner update; stopped after ~2000 of 4000"),
    ("a4d587d4a3d93404eceb6965d343fd2d943a470c", "arith-0p5b-lr1e-7-beta0p04", "Qwen/Qwen2.5-0.5B-Instruct", 0.494, 8,
     1e-7, 4000, "arithmetic (a op b) op c", "window 20; beta 0.04, 1 inner update"),
    ("ff04ed71de47a76d9602c2846065fd1822cf79ef", "arith-0p5b-lr2e-6-g16", "Qwen/Qwen2.5-0.5B-Instruct", 0.494, 16,
     2e-6, 1200, "arithmetic, harder variant with reasoning (max_new_tokens 64)",
     "window 20; beta 0.01, 1 inner update, curriculum every 200 iterations"),
    ("becc93a6ef1a59b89aaa5aa9e2803409ad11e57f", "countdown-1p5b-lr2e-6-g16", "Qwen/Qwen2.5-1.5B-Instruct", 1.54, 16,
     2e-6, 1200, "countdown-style number puzzle", "window 20; beta 0.01, 1 inner update, max_new_tokens 160"),
]  # fmt: skip


def _regime(r: np.ndarray) -> str:
    start, end, peak = r[:3].mean(), r[-max(3, len(r) // 10) :].mean(), r.max()
    tags = ["rising"] if end - start > 0.1 else []
    if peak - end > 0.15:
        tags.append("decline")
    return ",".join(tags or ["flat"])


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    datas, metas = [], []
    for commit, name, model, params, g, lr, iters, ds, note in RUNS:
        rid = f"RL_GRPO_{name}"
        m = json.loads(raw.text(SOURCE["repo"], commit, PATH))
        n = len(m["rewards_avg"])
        d = pd.DataFrame({"run_id": rid, "step": np.arange(n) * 10, "reward": m["rewards_avg"], "kl": m["kl_avg"]})
        if "accuracies_avg" in m:
            d["accuracy"] = m["accuracies_avg"]
        else:
            d["accuracy"] = m["train_accuracies_avg"]
            d["eval/val_accuracy"] = m["val_accuracies_avg"]
        datas.append(d)
        metas.append(
            dict(
                run_id=rid,
                source_path=PATH,
                commit=commit,
                model=model,
                params_b=params,
                group_size=g,
                learning_rate=lr,
                batch_size=4,
                dataset=ds,
                algorithm="GRPO (hand-written, PPO-clip + KL)",
                max_steps=iters,
                regime=_regime(d["reward"].to_numpy()),
                notes=f"reward = trailing mean of batch-mean shaped reward ({note}); logged every 10 iterations",
            )
        )
    return pd.concat(datas, ignore_index=True), pd.DataFrame(metas)
