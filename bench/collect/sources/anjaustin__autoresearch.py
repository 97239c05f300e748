"""anjaustin/autoresearch ("Project GhostWeight", a fork of karpathy/autoresearch): GRPO on GSM8K of BitNet b1.58
2B4T (2.41B ternary weights) with 210 trainable TinyLoRA scalars, CPU only (AVX2 kernel), G = 2 completions of one
question per step, lr 0.01 (cosine), 8-hour budget.

The numbers are ``grpo_log.jsonl`` of commit 97e2a91 ("Pass 9 complete: 200-step GRPO run on BitNet v3 kernel"):
one record per GRPO step. The file holds, appended, a few aborted launches of 1-3 steps and then the 201-step v3
run (the run of ``grpo_v3_run.log`` in the same commit); only the last segment (from its step 1) is read. A step
whose two rewards are equal is skipped (no gradient) and logged with its rewards only.
"""

import itertools
import json

import pandas as pd

from bench.collect import raw

SOURCE = dict(
    repo="anjaustin/autoresearch",
    notes=(
        "BitNet b1.58 2B4T (ternary, 2.41B) + 210 TinyLoRA scalar adapters, own GRPO loop on CPU, GSM8K train, 1 "
        "question x G = 2 completions per step, lr 0.01 cosine, KL to the frozen model; reward = mean of the 2 "
        "rewards (1.0 correct, 0.6 a parsed but wrong answer, as logged), logged every step; 163 of 201 steps skipped "
        "(equal rewards, no update); very noisy (one question per step), flat around 0.85"
    ),
)
COMMIT = "97e2a9122fae45682b09aa5135ea8ca48db6f711"
PATH = "grpo_log.jsonl"

COLS = {"mean_reward": "reward", "kl": "kl", "loss": "loss", "reinforce_loss": "reinforce_loss",
        "mean_grad": "mean_grad", "max_grad": "max_grad", "mean_abs_scale": "mean_abs_scale",
        "max_abs_scale": "max_abs_scale", "lr": "lr", "total_time": "step_time"}  # fmt: skip


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    recs = [json.loads(line) for line in raw.text(SOURCE["repo"], COMMIT, PATH).splitlines() if line.strip()]
    start = max(i for i, r in enumerate(recs) if r["step"] == 1)  # the last launch
    seg = recs[start:]
    assert all(b["step"] == a["step"] + 1 for a, b in itertools.pairwise(seg))
    df = pd.DataFrame(seg)
    rid = "autoresearch_bitnet-2b-tinylora-grpo-gsm8k-v3"
    out = df[["step"]].copy()
    for k, v in COLS.items():
        out[v] = pd.to_numeric(df[k], errors="coerce") if k in df.columns else float("nan")
    out["skipped"] = df["skipped"].astype(float)
    out.insert(0, "run_id", rid)
    meta = pd.DataFrame([dict(
        run_id=rid, source_path=PATH, commit=COMMIT, model="microsoft/bitnet-b1.58-2B-4T (bf16, 210 TinyLoRA scalars)",
        params_b=2.41, group_size=2, learning_rate=0.01, batch_size=1, dataset="gsm8k (train)",
        algorithm="GRPO (own loop, CPU)", max_steps=float("nan"), regime="flat,noisy",
        notes=("reward = mean_reward of the step's 2 completions; planned length = 8-hour budget (~163 steps "
               "estimated), ran 201; last of the appended launches in grpo_log.jsonl"),
    )])  # fmt: skip
    return out, meta
