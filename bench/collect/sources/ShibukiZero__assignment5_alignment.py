"""ShibukiZero/assignment5-alignment: Stanford CS336 (2026) assignment 5, a hand-written GRPO loop (vLLM rollouts,
policy-gradient losses no_baseline / reinforce_with_baseline / grpo_clip / grpo_no_clip) on Qwen2.5-Math-1.5B
with the r1_zero prompt and 0/1 MATH answer reward; one ``metrics.jsonl`` per run (branch ``solutions``) with
``rollout`` / ``train`` / ``eval`` records per GRPO step, for the assignment's ablations and sweeps."""

import json
import posixpath

import numpy as np
import pandas as pd

from bench.collect import raw

SOURCE = dict(
    repo="ShibukiZero/assignment5-alignment",
    notes=(
        "Qwen2.5-Math-1.5B, hand-written GRPO (CS336 a5), MATH (numeric-answer subset), r1_zero prompt, 0/1 answer "
        "reward (format share logged separately), G = 8, 256 rollouts (32 questions) per GRPO step, lr 4e-5 "
        "(1e-5 for grpo_train_loop); one point per GRPO step from the run's 'rollout' records (reward = mean "
        "rollout reward of the step's batch, std_reward -> reward_std_batch); train records (one or several "
        "per step for off-policy epochs, averaged per step): token_entropy -> entropy, clip_fraction -> "
        "clip_ratio, approx_kl, reference_kl -> kl; eval records every 5 steps (1024 validation questions) -> "
        "eval/*. Ablations: baselines, std normalisation, length normalisation, clipping, off-policy "
        "epochs x train batch (40-step 'broad' and 200-step 'focused' sweeps), prompt (question_only), "
        "SFT-initialised GRPO with KL; several runs are the same reference run linked into several ablations."
    ),
)
COMMIT = "73a0f466e62717be93f7b6a2d0a216a504a96ff8"  # branch 'solutions'
ROOT = "artifacts/experiments/main/ch7"


def _one(path: str, rid: str) -> tuple[pd.DataFrame, dict]:
    recs = [json.loads(line) for line in raw.text(SOURCE["repo"], COMMIT, path).splitlines() if line.strip()]
    ro = pd.DataFrame([r for r in recs if r["type"] == "rollout"])
    out = pd.DataFrame({
        "run_id": rid, "step": ro["grpo_step"].astype(int), "reward": ro["reward"],
        "reward_std_batch": ro["std_reward"], "completion_length": ro["avg_response_token_length"],
        "format_accuracy": ro["format_accuracy"], "answer_accuracy": ro["answer_accuracy"],
        "std_advantage": ro["std_advantage"],
    })  # fmt: skip
    tr = pd.DataFrame([r for r in recs if r["type"] == "train"])
    tcols = {
        "token_entropy": "entropy",
        "clip_fraction": "clip_ratio",
        "approx_kl": "approx_kl",
        "reference_kl": "kl",
        "loss": "loss",
        "grad_norm": "grad_norm",
    }
    have = [c for c in tcols if c in tr.columns]
    t = tr[["grpo_step", *have]].apply(pd.to_numeric, errors="coerce").groupby("grpo_step").mean().rename(columns=tcols)
    out = out.merge(t.dropna(axis=1, how="all"), left_on="step", right_index=True, how="left")
    ev = pd.DataFrame([r for r in recs if r["type"] == "eval"])
    e = ev.set_index("grpo_step")[["reward", "answer_accuracy", "format_accuracy"]].add_prefix("eval/")
    out = out.merge(e, left_on="step", right_index=True, how="left")
    cfg = tr.iloc[0]
    info = dict(
        learning_rate=float(cfg["learning_rate"]),
        loss_type=cfg["loss_type"],
        epochs=int(cfg["epochs_per_rollout_batch"]),
        train_batch=int(cfg["train_batch_size"]),
        rollout_batch=int(cfg["rollout_batch_size"]),
        group_size=int(ro["group_size"].iloc[0]),
        norm=cfg["loss_normalization"],
        kl_coef=float(cfg["kl_coef"]),
    )
    return out, info


def _regime(r: np.ndarray) -> str:
    """Shape tags from the curve: start = first 5 steps, end = last tenth."""
    n = len(r)
    start, end, peak = r[:5].mean(), r[-max(3, n // 10) :].mean(), r.max()
    tags = []
    if end - start > 0.15 or peak - start > 0.25:
        tags.append("rising")
    if peak - end > 0.25:
        tags.append("collapse" if end < 0.05 else "decline")
    if not tags:
        tags.append("flat")
    if n < 60:
        tags.append("short")
    return ",".join(tags)


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    paths = [p for p in raw.ls(SOURCE["repo"], COMMIT, ROOT) if p.endswith("/metrics.jsonl")]
    datas, metas = [], []
    for path in sorted(paths):
        study, _, name = posixpath.dirname(path)[len(ROOT) + 1 :].split("/")
        if study == "sft_kl_grpo" and name.startswith("sft_"):
            continue  # the SFT stage, not GRPO
        slug = name.replace("(", "").replace(")", "").replace(".", "p").replace("_", "-").lower()
        rid = f"assignment5-alignment-shibuki_{study.replace('_', '-')}_{slug}"
        d, info = _one(path, rid)
        cfg_path = posixpath.join(posixpath.dirname(path), "config.json")
        planned = json.loads(raw.text(SOURCE["repo"], COMMIT, cfg_path))["n_grpo_steps"]
        datas.append(d)
        init = "SFT checkpoint (256 examples, 100 steps)" if "sft256" in name else "Qwen2.5-Math-1.5B base"
        note = (
            f"study {study}, run {name}: loss_type {info['loss_type']}, {info['epochs']} epoch(s) per rollout "
            f"batch, train batch {info['train_batch']}, loss normalisation {info['norm']}, kl_coef "
            f"{info['kl_coef']}; init {init}; reward = mean 0/1 answer reward of the step's 256 rollouts"
        )
        if name == "question_only":
            note += "; question_only prompt (no r1_zero format), so the reward starts high"
        metas.append(dict(
            run_id=rid, source_path=f"{path};{cfg_path}", commit=COMMIT, model="Qwen/Qwen2.5-Math-1.5B", params_b=1.54,
            group_size=info["group_size"], learning_rate=info["learning_rate"], batch_size=info["rollout_batch"],
            dataset="MATH (competition_math numeric subset), r1_zero prompt",
            algorithm=f"GRPO family, hand-written CS336 loop ({info['loss_type']})",
            max_steps=int(planned), regime=_regime(d["reward"].to_numpy()), notes=note,
        ))  # fmt: skip
    return pd.concat(datas, ignore_index=True), pd.DataFrame(metas)
