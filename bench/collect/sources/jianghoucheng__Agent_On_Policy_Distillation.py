"""jianghoucheng/Agent_On_Policy_Distillation: a fork of Open-AgentRL (verl, ReTool-style multi-turn tool-use
RL on math) training a multi-turn-SFT Qwen2.5-3B-Instruct student with GRPO plus an on-policy-distillation
KL penalty towards a 32B ReTool teacher; the W&B offline run directories are committed (wandb/run-*/).
The verl console lines are read from each run's ``files/output.log``; the run's config from the
``run-*.wandb`` record file where it was committed (files of 4 MiB and more are absent from the snapshot)."""

import re

import pandas as pd

from bench.collect import raw
from bench.collect.sources._s2util import verl_train

SOURCE = dict(
    repo="jianghoucheng/Agent_On_Policy_Distillation",
    notes=(
        "multi-turn-SFT Qwen2.5-3B-Instruct student, verl GRPO (adv_estimator grpo, rollout n 16, lr 1e-6, "
        "32 prompts) with an on-policy-distillation KL penalty in the reward (teacher "
        "JoeYing/ReTool-DeepSeek-R1-Distill-Qwen-32B, actor/reward_kl_penalty_coeff per run), ReTool "
        "code-interpreter math task; reward = critic/score/mean (task score in [-1, 1]; critic/rewards/mean, "
        "after the KL penalty, kept under its own name). W&B output.log keeps 4096 characters of a line, so "
        "the step lines that also carry validation metrics (every 10th step) lose their training metrics: "
        "those steps are missing and a cut line's last field is dropped. Config (n, lr, batch, KL coef) read "
        "from run-*.wandb where committed, else from the step lines (actor/lr, actor/reward_kl_penalty_coeff)."
    ),
)
COMMIT = "17245cf866ff2cc55c890fd37827e6641f7358ae"
RUNS = [
    "20251129_221801-i80f2v90",
    "20251130_144822-gjvwlq13",
    "20251130_194146-f6sves9c",
    "20251130_224918-ry3hgbx5",
    "20251201_182421-xx1oj7kk",
    "20251202_000304-yeu8r64c",
    "20251202_120842-do7bl4gg",
    "20251203_152244-bd2o9c4a",
    "20251203_214315-cr3q4lay",
    "20251205_203738-5qinw90x",
]
REGIME = {
    "i80f2v90": "collapse,flat",
    "gjvwlq13": "decline",
    "f6sves9c": "rising,noisy",
    "ry3hgbx5": "rising",
    "xx1oj7kk": "flat,noisy",
    "yeu8r64c": "decline",
    "do7bl4gg": "rising",
    "bd2o9c4a": "rising,noisy",
    "cr3q4lay": "rising",
    "5qinw90x": "rising,noisy",
}


def _config(repo: str, run: str) -> tuple[dict, str | None]:
    rid = run.rsplit("-", 1)[1]
    path = f"wandb/run-{run}/run-{rid}.wandb"
    try:
        b = raw.read(repo, COMMIT, path).decode("latin-1")
    except raw.RawMissing:
        return {}, None
    out = {}
    for key, pat in (
        ("group_size", r'"do_sample": true, "n": (\d+)'),
        ("learning_rate", r'"optim": \{"lr": ([0-9.e-]+)'),
        ("batch_size", r'"train_batch_size": (\d+)'),
        ("ppo_mini_batch_size", r'"ppo_mini_batch_size": (\d+)'),
        ("kl_coef", r'"kl_coef": ([0-9.e-]+)'),
        ("experiment_name", r'"experiment_name": "([^"]+)"'),
        ("adv_estimator", r'"adv_estimator": "([^"]+)"'),
    ):
        m = re.search(pat, b)
        if m:
            out[key] = m.group(1)
    return out, path


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    repo = SOURCE["repo"]
    parts, meta = [], []
    for run in RUNS:
        short = run.rsplit("-", 1)[1]
        path = f"wandb/run-{run}/files/output.log"
        rid = f"Agent_On_Policy_Distillation_opd-{short}"
        d = verl_train(raw.text(repo, COMMIT, path), rid, maxlen=4096)
        parts.append(d)
        cfg, cpath = _config(repo, run)
        coef = (
            d["actor/reward_kl_penalty_coeff"].dropna()
            if "actor/reward_kl_penalty_coeff" in d
            else pd.Series(dtype=float)
        )
        lr0 = d["actor/lr"].dropna() if "actor/lr" in d else pd.Series(dtype=float)
        extra = ", ".join(f"{k}={v}" for k, v in cfg.items()) if cfg else "run-*.wandb not in the snapshot (>= 4 MiB)"
        meta.append(
            dict(
                run_id=rid,
                source_path=path + (f";{cpath}" if cpath else ""),
                commit=COMMIT,
                model="Qwen2.5-3B-Instruct (multi-turn SFT, global_step_372)",
                params_b=3.1,
                group_size=float(cfg["group_size"]) if "group_size" in cfg else None,
                learning_rate=float(cfg["learning_rate"])
                if "learning_rate" in cfg
                else (float(lr0.iloc[0]) if len(lr0) else None),
                batch_size=float(cfg["batch_size"]) if "batch_size" in cfg else None,
                dataset="ReTool/Open-AgentRL multi-turn tool-use math",
                algorithm="GRPO + on-policy distillation KL (verl)",
                max_steps=None,
                regime=REGIME[short],
                notes=f"W&B run {run}; reward_kl_penalty_coeff {coef.iloc[0] if len(coef) else 'n/a'}; {extra}; "
                "every 10th step missing (validation lines cut at 4096 characters)",
            )
        )
    return pd.concat(parts, ignore_index=True), pd.DataFrame(meta)
