"""Coicozoi/minimind-from-scratch: a 30M-parameter MiniMind decoder (pretrain -> SFT -> DPO) trained further
with a hand-written GRPO loop (MiniMind's ``train_grpo.py`` and the repo's own ``train_grpo_r1.py``); one
printed line per optimiser step (``Epoch:[1/1](k/N), Reward: ..., KL_ref: ...``) in ``logs/*.log``."""

import re

import pandas as pd

from bench.collect import raw

SOURCE = dict(
    repo="Coicozoi/minimind-from-scratch",
    notes=(
        "MiniMind 30M decoder (hidden 512, 8 layers), hand-written GRPO loop, G = 4, batch 2 prompts; one "
        "printed line per step. v1: model-based reward (InternLM2-1.8B-Reward score, negative), RLAIF prompts, "
        "9751 steps, lr 3e-7, reward flat (README: reward hacking). v2 (R1-style): rule reward 0.5 think-tag + "
        "0.5 answer-tag + 2.0 GSM8K correct - 0.5 repetition penalty, lr 1e-6 cosine; a 200-step run (first "
        "commit) and a 500-step run (second commit), same seed, so their first steps coincide. reward = mean "
        "batch reward; Fmt / Correct are the batch's format and correctness rates (correct_rate mostly 0, "
        "occasional 0.12-0.25 spikes); debug dumps of completions interleaved in the logs are skipped."
    ),
)
C_FIRST = "a1fbaada49352486510b44720ee9d44b6b4d17bf"
C_HEAD = "5d13cb028a3f2c0e766b4b6f10ec47b9b9abfb47"

_LINE = re.compile(r"^Epoch:\[\d+/\d+\]\((\d+)/(\d+)\),\s*(.*)$")
_NAMES = {
    "Reward": "reward", "KL_ref": "kl", "Avg Response Len": "completion_length", "Avg Len": "completion_length",
    "Fmt": "format_rate", "Correct": "correct_rate", "Adv Std": "adv_std", "Adv Mean": "adv_mean",
    "Actor Loss": "loss", "Learning Rate": "learning_rate", "LR": "learning_rate",
}  # fmt: skip


def _parse(text: str, run_id: str) -> tuple[pd.DataFrame, int]:
    rows, total = [], 0
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        total = int(m.group(2))
        row = {"run_id": run_id, "step": int(m.group(1))}
        for part in m.group(3).split(","):
            k, _, v = part.partition(":")
            row[_NAMES[k.strip()]] = float(v)
        rows.append(row)
    return pd.DataFrame(rows), total


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    repo = SOURCE["repo"]
    common = dict(model="MiniMind 30M (from scratch, SFT+DPO)", params_b=0.03003, group_size=4, batch_size=2)
    specs = [
        ("minimind-from-scratch_grpo-v1-rm-9751", C_HEAD, "logs/grpo.log", 3e-7, "RLAIF prompts (19.5K), InternLM2-1.8B reward model",
         "GRPO (MiniMind train_grpo.py, beta 0.1)", "flat,noisy",
         "reward = reward-model score (negative, about -2.3..-0.7); README: no improvement, reward hacking"),
        ("minimind-from-scratch_grpo-r1-gsm8k-200", C_FIRST, "logs/r1_main.log", 1e-6, "gsm8k (1K prompts)",
         "GRPO (hand-written train_grpo_r1.py)", "flat,noisy",
         "rule reward (format 0.5+0.5, correct 2.0, minus repetition penalty); first 200-step version of the run"),
        ("minimind-from-scratch_grpo-r1-gsm8k-500", C_HEAD, "logs/r1_main.log", 1e-6, "gsm8k (1K prompts)",
         "GRPO (hand-written train_grpo_r1.py)", "flat,noisy",
         "rule reward (format 0.5+0.5, correct 2.0, minus repetition penalty); README: 0.337 -> 0.404 (last 100)"),
    ]  # fmt: skip
    datas, metas = [], []
    for rid, commit, path, lr, ds, algo, regime, note in specs:
        d, total = _parse(raw.text(repo, commit, path), rid)
        datas.append(d)
        metas.append(
            dict(
                run_id=rid,
                source_path=path,
                commit=commit,
                learning_rate=lr,
                dataset=ds,
                algorithm=algo,
                max_steps=total,
                regime=regime,
                notes=note,
                **common,
            )
        )
    return pd.concat(datas, ignore_index=True), pd.DataFrame(metas)
