"""JPassionQ/assignment5-alignment: Stanford CS336 (spring 2025) assignment 5, the author's own GRPO loop
(``cs336_alignment/run_grpo.py``: vLLM rollouts, losses no_baseline / reinforce_with_baseline / grpo_clip, off-policy
epochs) on Qwen2.5-Math-1.5B with the r1_zero prompt and the 0/1 MATH answer reward, logged to W&B offline.

The numbers are the committed W&B run files ``cs336_alignment/wandb/offline-run-*/run-<id>.wandb`` (the run's
transaction log), decoded by :func:`bench.collect.sources._s4util.wandb_history` (no ``wandb`` package): one
``train/reward_*`` row per GRPO step (``grpo_step``), the optimiser rows of the step (``train/loss``, ``entropy``,
``grad_norm``, ``clip_fraction``, several per step with off-policy epochs: averaged per step) and an evaluation row
every 5 steps. The run's configuration is its W&B display name (loss type, lr, epochs, train batch, loss
normalisation, std normalisation), read from the same file. Files of 4 MiB and more (15 runs, among them the
earliest GRPO runs and the 2026-04-04 long runs) are not in the snapshot and are skipped; runs with fewer than
30 GRPO steps (aborted launches) are skipped.
"""

import re
import subprocess

import numpy as np
import pandas as pd

from bench.collect import raw
from bench.collect.sources._s4util import wandb_history, wandb_run_name

SOURCE = dict(
    repo="JPassionQ/assignment5-alignment",
    notes=(
        "Qwen2.5-Math-1.5B base, hand-written CS336 a5 GRPO loop, MATH train (r1_zero prompt), 0/1 answer reward, "
        "G = 8, 256 rollouts (32 prompts) per GRPO step, 50 GRPO steps per run; reward = train/reward_mean (mean "
        "reward of the step's 256 rollouts), train/reward_max/min kept; optimiser rows averaged per step "
        "(train/loss -> loss, train/entropy -> entropy, train/grad_norm -> grad_norm, train/clip_fraction -> "
        "clip_ratio); eval/* every 5 steps on the validation subset; configuration from the W&B display name; "
        "the .wandb files decoded directly (LevelDB log + protobuf HistoryRecord)"
    ),
)
ROOT = "cs336_alignment/wandb"
MIN_STEPS = 30


def _files() -> list[tuple[str, str]]:
    """(commit, path) of every .wandb file of the history that is present in the snapshot (its last version)."""
    gd = raw.git_dir(SOURCE["repo"])
    log = subprocess.run(["git", f"--git-dir={gd}", "log", "--all", "--format=C %H", "--name-only",
                          "--diff-filter=AM", "--", ROOT], capture_output=True, text=True, check=True).stdout  # fmt: skip
    seen: dict[str, str] = {}
    commit = ""
    for line in log.splitlines():
        if line.startswith("C "):
            commit = line[2:]
        elif line.endswith(".wandb") and line not in seen:
            seen[line] = commit  # newest first: the first commit seen is the last version
    out = []
    for path, c in sorted(seen.items()):
        ok = subprocess.run(["git", f"--git-dir={gd}", "cat-file", "-e", f"{c}:{path}"], capture_output=True)
        if ok.returncode == 0:
            out.append((c, path))
    return out


def _config(name: str) -> dict:
    m = re.match(
        r"grpo_(?P<loss>[a-z_]+?)_lr(?P<lr>[0-9.e-]+)_epoch(?P<ep>\d+)_train_batch(?P<tb>\d+)_?(?P<rest>.*)", name
    )
    if not m:
        return {}
    rest = m.group("rest")
    return dict(loss=m.group("loss"), lr=float(m.group("lr")), epochs=int(m.group("ep")), train_batch=int(m.group("tb")),
                norm=("masked_normalize" if rest.startswith("masked_normalize") else "masked_mean"
                      if rest.startswith("masked_mean") else "unstated"),
                std=("no_use_std" not in rest) if "use_std" in rest else None, rest=rest)  # fmt: skip


def _one(data: bytes, rid: str) -> pd.DataFrame:
    rows = wandb_history(data)
    reward, train, evals, cur = [], [], [], None
    for r in rows:
        if "train/reward_mean" in r:
            cur = int(r["grpo_step"])
            reward.append(dict(step=cur, reward=r["train/reward_mean"], reward_max=r.get("train/reward_max"),
                               reward_min=r.get("train/reward_min")))  # fmt: skip
        elif "train/loss" in r and "grpo_step" in r:
            train.append(dict(step=int(r["grpo_step"]), loss=r.get("train/loss"), entropy=r.get("train/entropy"),
                              grad_norm=r.get("train/grad_norm"), clip_ratio=r.get("train/clip_fraction")))  # fmt: skip
        elif "eval/accuracy" in r and cur is not None:  # logged at the end of the step it follows
            evals.append({"step": cur, **{k: v for k, v in r.items() if k.startswith("eval/")}})
    out = pd.DataFrame(reward)
    if train:
        out = out.merge(pd.DataFrame(train).groupby("step").mean().reset_index(), on="step", how="left")
    if evals:
        ev = pd.DataFrame(evals).groupby("step").last().reset_index()
        ev = ev.rename(columns={"eval/avg_response_length": "eval/response_length", "eval/avg_entropy": "eval/entropy",
                                "eval/avg_correct_res_length": "eval/correct_response_length",
                                "eval/avg_incorrect_res_length": "eval/incorrect_response_length"})  # fmt: skip
        out = out.merge(ev, on="step", how="left")
    out.insert(0, "run_id", rid)
    return out


def _regime(r: np.ndarray) -> str:
    start, end, peak = r[:5].mean(), r[-5:].mean(), r.max()
    tags = ["rising" if end - start > 0.15 else "flat"]
    if peak - end > 0.15:
        tags.append("decline")
    return ",".join(tags + ["noisy"])


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    repo = SOURCE["repo"]
    datas, metas = [], []
    for commit, path in _files():
        data = raw.read(repo, commit, path)
        name = wandb_run_name(data) or ""
        wid = path.rsplit("-", 1)[-1].removesuffix(".wandb")
        stamp = path.split("/")[2].split("-")[2]  # offline-run-<date_time>-<id>
        rid = f"assignment5-alignment-jpassionq_{stamp.replace('_', '-')}-{wid}"
        d = _one(data, rid)
        if len(d) < MIN_STEPS:
            raw.READ.pop((repo, commit, path), None)
            continue
        cfg = _config(name)
        if d["reward"].iloc[:3].mean() > 0.3:
            extra = (
                "; starts high (step-1 reward ~0.55, eval accuracy 0.44, long responses) unlike the base-model runs "
                "(~0.1): presumably the question_only prompt ablation or another start model -- not stated"
            )
        else:
            extra = ""
        datas.append(d)
        algo = (f"GRPO family, hand-written CS336 loop ({cfg.get('loss', '?')}, {cfg.get('epochs', '?')} epoch(s) per "
                f"rollout batch)")  # fmt: skip
        metas.append(dict(
            run_id=rid, source_path=path, commit=commit, model="Qwen/Qwen2.5-Math-1.5B", params_b=1.54, group_size=8,
            learning_rate=cfg.get("lr", np.nan), batch_size=256, dataset="MATH train (r1_zero prompt)",
            algorithm=algo, max_steps=np.nan, regime=_regime(d["reward"].to_numpy()),
            notes=(f"W&B run {wid}, display name '{name}' (train batch {cfg.get('train_batch', '?')}, loss "
                   f"normalisation {cfg.get('norm', '?')}, std normalisation {cfg.get('std')}); planned length not "
                   f"logged (script default 200, every committed run stops at 50); G = 8 and 256 rollouts are the "
                   f"script defaults{extra}"),
        ))  # fmt: skip
    return pd.concat(datas, ignore_index=True), pd.DataFrame(metas)
