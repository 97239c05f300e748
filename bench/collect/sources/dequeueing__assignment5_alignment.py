"""dequeueing/assignment5-alignment: Stanford CS336 (spring 2025) assignment 5, a hand-written GRPO loop (vLLM
rollouts; losses no_baseline / reinforce_with_baseline / grpo_clip) on Qwen2.5-Math-1.5B with the r1_zero prompt
and the 0/1 drgrpo answer reward, GSM8K (problems 1-9 of the assignment) and MATH (the leaderboard run).

The numbers are ``results/<run>/grpo_metrics.jsonl`` (one record per GRPO step) of commit 5350f9c ("add all
experiment results and summaries"); the run's configuration is read from ``grpo_summary.json`` where the run has
one, else from the author's ``results/summary/problem*_notes.md`` (stated in each run's notes). The runs before
the author's "shuffle fix" (lr sweep, baselines, length / std normalisation) assigned advantages to the wrong
examples (the DataLoader shuffled the microbatches): genuine runs of a buggy loop, their reward stays flat at
the base model's ~3 %; the off-policy / clip / prompt / MATH runs are after the fix.
"""

import json

import numpy as np
import pandas as pd

from bench.collect import raw

SOURCE = dict(
    repo="dequeueing/assignment5-alignment",
    notes=(
        "Qwen2.5-Math-1.5B base, hand-written CS336 GRPO loop, GSM8K (MATH for the leaderboard run), r1_zero "
        "prompt, 0/1 answer reward, G = 8, 256 rollouts (32 prompts) per GRPO step (128 for MATH), lr 5e-6, "
        "seed 42 in every run (so the first rollouts coincide across runs); one point per GRPO step: reward = "
        "rollout_reward_mean, rollout_reward_std -> reward_std_batch, train_clip_fraction -> clip_ratio, "
        "mean_response_length -> completion_length, gradient_norm -> grad_norm, train_loss_mean -> loss; "
        "val_accuracy / val_format_ok_rate / val_mean_reward every 10 (5) steps -> eval/*. Runs before the "
        "author's shuffle fix (lr, baselines, length/std normalisation) mis-assign advantages and stay flat"
    ),
)
COMMIT = "5350f9c88d411436cf05ba0c892afefab542ad46"

# run dir, planned steps when no summary says it, loss, epochs, dataset, before the shuffle fix, note
RUNS = [
    ("grpo_clip_e1", None, None, None, None, False, "problem 7 off-policy sweep, epochs 1 (on-policy)"),
    (
        "grpo_clip_e4",
        200,
        "grpo_clip",
        4,
        "gsm8k",
        False,
        "problem 7/8 off-policy sweep, 4 epochs per rollout batch, cliprange 0.2; stopped by the author at 82 of 200 "
        "steps (config from problem7_notes.md)",
    ),
    (
        "grpo_noclip_e4",
        200,
        "grpo_clip, cliprange 1e6 (no clipping)",
        4,
        "gsm8k",
        False,
        "problem 8 clip ablation, 4 epochs, cliprange 1e6; stopped at 80 of 200 steps (config from problem8_notes.md)",
    ),
    (
        "grpo_prompt_ablation",
        200,
        "grpo_clip",
        4,
        "gsm8k",
        False,
        "problem 9: question_only reward (answer only, no r1_zero format) -- rollout reward climbs to ~0.8 while "
        "r1_zero validation accuracy stays ~0; stopped at 52 steps (config from problem9_notes.md)",
    ),
    (
        "grpo_leaderboard",
        None,
        None,
        None,
        None,
        False,
        "problem 10 MATH leaderboard, best GSM8K config (grpo_clip, 4 epochs), rollout batch 128",
    ),
    ("grpo_lr_5e-6", None, None, None, None, True, "problem 1 learning-rate sweep, 50-step run"),
    (
        "grpo_lr_5e-6_full",
        200,
        "reinforce_with_baseline",
        1,
        "gsm8k",
        True,
        "problem 1 lr 5e-6, 200 planned, stopped at 176 (problem1_notes.md); also the std-normalised arm of problem 5",
    ),
    (
        "grpo_no_baseline",
        200,
        "no_baseline",
        1,
        "gsm8k",
        True,
        "problem 2 baselines, no_baseline loss; 89 of 200 steps (problem2_notes.md)",
    ),
    ("grpo_length_norm", None, None, None, None, True, "problem 4 length normalisation (masked_normalize)"),
    (
        "grpo_no_std_norm_rwb",
        200,
        "reinforce_with_baseline, use_std_normalization False",
        1,
        "gsm8k",
        True,
        "problem 5 std normalisation off; 105 of 200 steps (problem5_notes.md)",
    ),
]

COLS = {
    "rollout_reward_mean": "reward", "rollout_reward_std": "reward_std_batch",
    "rollout_reward_max": "reward_max", "rollout_reward_min": "reward_min",
    "advantage_mean": "advantage_mean", "advantage_std": "advantage_std", "train_loss_mean": "loss",
    "train_clip_fraction": "clip_ratio", "gradient_norm": "grad_norm", "mean_response_length": "completion_length",
    "step_elapsed_sec": "step_time",
}  # fmt: skip
EVAL = {
    "val_accuracy": "eval/accuracy",
    "val_mean_reward": "eval/mean_reward",
    "val_format_ok_rate": "eval/format_ok_rate",
}


def _regime(r: np.ndarray) -> str:
    n = len(r)
    start, end, peak = r[:5].mean(), r[-max(3, n // 10) :].mean(), r.max()
    tags = []
    if end - start > 0.15 or peak - start > 0.25:
        tags.append("rising")
    if peak - end > 0.15:
        tags.append("decline")
    if not tags:
        tags.append("flat")
    tags.append("noisy")
    if n < 60:
        tags.append("short")
    return ",".join(tags)


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    repo = SOURCE["repo"]
    datas, metas = [], []
    for name, planned, loss, epochs, ds, buggy, note in RUNS:
        path = f"results/{name}/grpo_metrics.jsonl"
        recs = [json.loads(line) for line in raw.text(repo, COMMIT, path).splitlines() if line.strip()]
        df = pd.DataFrame(recs)
        rid = f"assignment5-alignment-dequeueing_{name.replace('_', '-')}"
        out = df[["step", *COLS]].rename(columns=COLS)
        ev = df["val_accuracy"].notna()  # the val_* fields are placeholders (0) where no evaluation ran
        for k, v in EVAL.items():
            out[v] = pd.to_numeric(df[k], errors="coerce").where(ev)
        out.insert(0, "run_id", rid)
        sources = [path]
        lr, batch, group = 5e-6, np.nan, 8
        if planned is None:
            spath = f"results/{name}/grpo_summary.json"
            cfg = json.loads(raw.text(repo, COMMIT, spath))["config"]
            sources.append(spath)
            planned, loss, epochs = cfg["n_grpo_steps"], cfg["loss_type"], cfg["epochs_per_rollout_batch"]
            ds = "math" if "/math/" in cfg["train_data_path"] else "gsm8k"
            lr, batch, group = cfg["learning_rate"], cfg["rollout_batch_size"], cfg["group_size"]
            if cfg.get("use_length_normalization"):
                loss += ", masked_normalize (length normalisation)"
        else:
            batch = 256
        dataset = {"gsm8k": "GSM8K (train, r1_zero prompt)", "math": "MATH (7498 train), r1_zero prompt"}[ds]
        datas.append(out)
        metas.append(dict(
            run_id=rid, source_path=";".join(sources), commit=COMMIT, model="Qwen/Qwen2.5-Math-1.5B", params_b=1.54,
            group_size=group, learning_rate=lr, batch_size=batch, dataset=dataset,
            algorithm=f"GRPO family, hand-written CS336 loop ({loss}, {epochs} epoch(s) per rollout batch)",
            max_steps=planned, regime=_regime(out["reward"].to_numpy()),
            notes=note + ("; before the author's shuffle fix (advantages mis-assigned to examples)" if buggy else ""),
        ))  # fmt: skip
    return pd.concat(datas, ignore_index=True), pd.DataFrame(metas)
