"""anishmah100/sudoku-rlvr: Qwen2.5-3B-Instruct (Unsloth 4-bit, LoRA r32) trained with TRL GRPOTrainer on generated
Sudoku puzzles (4x4, 6x6, 8x8) with a verifiable reward, as difficulty curricula: each experiment runs several
stages (fewer clues = harder), each a fresh ``trainer.train()`` with its own warm-up + cosine schedule that
continues the previous stage's LoRA weights; ``experiments/<exp>/train_log_stage<k>.json`` is each stage's
``log_history``."""

import json
import re

import numpy as np
import pandas as pd

from bench.collect import raw
from bench.collect.parse import trainer_state

SOURCE = dict(
    repo="anishmah100/sudoku-rlvr",
    notes=(
        "Qwen2.5-3B-Instruct (Unsloth 4-bit, LoRA r32), TRL GRPOTrainer, custom Sudoku env (generated puzzles, "
        "verifier), G = 8, beta 0.04, lr 5e-6 or 1e-5, cosine per stage, logged every step. reward = TRL 'reward' "
        "= format_reward (max 0.2) + solution_reward (partial credit per correct cell, up to ~3+); solved_metric "
        "(0/1 solved share, weight 0) kept as reward_fn/solved_metric. ONE RUN PER CURRICULUM STAGE: a stage is a "
        "separate trainer run (step restarts at 1, new schedule, harder puzzles) initialised from the previous "
        "stage's adapter (stage 0 from the base model or from an earlier experiment's adapter, see each run's "
        "notes); stages shorter than 30 steps are left out by the builder. experiments/REGISTRY.md lists the "
        "experiments (exp1..exp8, final commit); meta.json the configs read here. The first study (easy 4x4 "
        "curriculum from the base model, lr 1e-5, results/train_log_stage*_4x4.json at the first commit) is "
        "included as runs easy-4x4_stage0..4."
    ),
)
COMMIT = "adafb87f91cbb7d143202c35a6f3bec218958810"
#: the first study (4x4 "easy" curriculum from the base model, configs/easy_curriculum.yaml), first commit
C_EASY = "46a4ebf8c54eafdca89c759e028ad108e6609334"


def _regime(r: np.ndarray) -> str:
    n = len(r)
    k = max(5, n // 8)
    start, end, _peak = r[:k].mean(), r[-k:].mean(), r.max()
    spread = max(float(np.ptp(r)), 1e-9)
    tags = []
    if (end - start) / spread > 0.2:
        tags.append("rising")
    elif (start - end) / spread > 0.2:
        tags.append("decline")
    else:
        tags.append("flat")
    tags.append("noisy")
    tags.append("custom-env")
    return ",".join(tags)


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    repo = SOURCE["repo"]
    exps = sorted({p.split("/")[1] for p in raw.ls(repo, COMMIT, "experiments") if p.endswith("/meta.json")})
    datas, metas = [], []
    for exp in exps:
        meta_path = f"experiments/{exp}/meta.json"
        cfg = json.loads(raw.text(repo, COMMIT, meta_path))["config"]
        for k, stage in enumerate(cfg["stages"]):
            path = f"experiments/{exp}/train_log_stage{k}.json"
            rid = f"sudoku-rlvr_{exp.replace('_', '-')}_stage{k}"
            hist = json.loads(raw.text(repo, COMMIT, path))
            d = trainer_state(json.dumps({"log_history": hist}), run_id=rid)
            d = d.drop(columns=[c for c in ("epoch",) if c in d.columns])
            datas.append(d)
            init = (
                f"stage {k - 1} adapter"
                if k
                else (f"adapter {cfg['resume_adapter']}" if cfg.get("resume_adapter") else "base model")
            )
            size, clues = stage["size"], stage.get("clues")
            metas.append(dict(
                run_id=rid, source_path=f"{path};{meta_path}", commit=COMMIT, model=cfg["model"] + " (LoRA r32)",
                params_b=3.09, group_size=cfg["num_generations"], learning_rate=cfg["learning_rate"],
                batch_size=cfg["per_device_train_batch_size"] * cfg["gradient_accumulation_steps"] // cfg["num_generations"],
                dataset=f"Sudoku {size}x{size}, {clues} clues (generated)", algorithm="GRPO (TRL GRPOTrainer, Unsloth)",
                max_steps=stage["max_steps"], regime=_regime(d["reward"].to_numpy()),
                notes=(f"experiment {exp}, curriculum stage {k} ({size}x{size}, {clues} clues); initialised from {init}; "
                       f"batch_size = prompts per optimiser step"),
            ))  # fmt: skip
    cfg_path = "configs/easy_curriculum.yaml"
    text = raw.text(repo, C_EASY, cfg_path)
    stages = [
        tuple(int(x) for x in m) for m in re.findall(r"size:\s*(\d+),\s*clues:\s*(\d+),\s*max_steps:\s*(\d+)", text)
    ]
    lr = float(re.search(r"^learning_rate:\s*([0-9.eE+-]+)", text, re.M).group(1))
    g = int(re.search(r"^num_generations:\s*(\d+)", text, re.M).group(1))
    for k, (size, clues, steps) in enumerate(stages):
        path = f"results/train_log_stage{k}_4x4.json"
        rid = f"sudoku-rlvr_easy-4x4_stage{k}"
        d = trainer_state(json.dumps({"log_history": json.loads(raw.text(repo, C_EASY, path))}), run_id=rid)
        datas.append(d.drop(columns=[c for c in ("epoch",) if c in d.columns]))
        metas.append(dict(
            run_id=rid, source_path=f"{path};{cfg_path}", commit=C_EASY, model="Qwen/Qwen2.5-3B-Instruct (LoRA r32)",
            params_b=3.09, group_size=g, learning_rate=lr, batch_size=1,
            dataset=f"Sudoku {size}x{size}, {clues} clues (generated)", algorithm="GRPO (TRL GRPOTrainer, Unsloth)",
            max_steps=steps, regime=_regime(d["reward"].to_numpy()),
            notes=(f"first study (easy 4x4 curriculum, configs/easy_curriculum.yaml), stage {k} ({clues} clues); "
                   f"initialised from {'the base model' if k == 0 else f'stage {k - 1} adapter'}; 1 prompt x 8 per step"),
        ))  # fmt: skip
    return pd.concat(datas, ignore_index=True), pd.DataFrame(metas)
