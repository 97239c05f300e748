"""Tianshi-Xu/assignment5-alignment: Stanford CS336 (2025) assignment 5, a hand-written GRPO loop
(``cs336_alignment/rl.py``) on MATH from an SFT checkpoint of Qwen2.5-Math-1.5B; Python-logging console logs with one
``rl_loss: ..., token_entropy: ..., reward_data: {'total_num': 256, 'total_reward': ...}`` line per GRPO step."""

import ast
import re

import pandas as pd

from bench.collect import raw

SOURCE = dict(
    repo="Tianshi-Xu/assignment5-alignment",
    notes=(
        "Qwen2.5-Math-1.5B after SFT on 1024 correct MATH traces (checkpoint sft_1024_correct), hand-written GRPO "
        "(CS336 a5), MATH train, 0/1 answer reward (format reward logged separately), G = 8, 256 rollouts per "
        "step, lr 1e-5, 200 planned steps (config/rl.yml). reward = total_reward / total_num of the step's "
        "rollout batch (= answer reward); format_rate = total_format_reward / total_num; token_entropy -> "
        "entropy, l2_norm -> grad_norm, rl_loss -> loss. SFT-initialised, so the reward starts at ~0.56. "
        "rl_grpo_clip_offpolicy.log holds several appended launches: only its one segment of >= 30 steps is "
        "kept (rollout batch 32, grpo_clip loss; collapses are in shorter segments that are left out)."
    ),
)
C_BASE = "ebb6ff53dce4400b55ab15d8da45ba1425ac3cb3"
C_CLIP = "93b2da1e0c2cf9714f64873620fceb687176d897"
_ROLL = re.compile(r"rollout batch (\d+) generated, length: (\d+)")
_STEP = re.compile(r"rl_loss: (\S+), time: \S+, l2_norm: (\S+), token_entropy: (\S+), reward_data: (\{.*?\})")


def _segments(text: str) -> list[tuple[int, list[dict]]]:
    segs, cur, batch = [], None, None
    for line in text.splitlines():
        m = _ROLL.search(line)
        if m:
            batch = int(m.group(1))
            if batch == 0:
                cur = []
                segs.append((int(m.group(2)), cur))
            continue
        m = _STEP.search(line)
        if m and cur is not None:
            rd = ast.literal_eval(m.group(4))
            n = rd["total_num"]
            cur.append(
                dict(
                    step=batch + 1,
                    reward=rd["total_reward"] / n,
                    format_rate=rd["total_format_reward"] / n,
                    loss=float(m.group(1).rstrip(",")),
                    grad_norm=float(m.group(2).rstrip(",")),
                    entropy=float(m.group(3).rstrip(",")),
                )
            )
    return segs


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    repo = SOURCE["repo"]
    specs = [
        ("assignment5-alignment-tianshi_grpo-sft-init", C_BASE, "rl.log", 256, "reinforce_with_baseline (script default)",
         "rising,noisy", "200-step run (the file is later also committed as rl_grpo_base.log)"),
        ("assignment5-alignment-tianshi_grpo-early-stop", C_BASE, "rl_early_stop.log", 256, "as rl.log (log_name rl_early_stop)",
         "rising,noisy", "100 logged steps of a second launch with the same config (same first step, then differs)"),
        ("assignment5-alignment-tianshi_grpo-clip-b32", C_CLIP, "rl_grpo_clip_offpolicy.log", 32, "grpo_clip, cliprange 0.2",
         "flat,noisy,short", "the one >= 30-step segment of the appended log: rollout batch 32 (4 questions x 8)"),
    ]  # fmt: skip
    datas, metas = [], []
    for rid, commit, path, batch, loss, regime, note in specs:
        segs = [s for n, s in _segments(raw.text(repo, commit, path)) if n == batch and len(s) >= 30]
        assert len(segs) == 1, (path, [len(s) for s in segs])
        d = pd.DataFrame(segs[0])
        d.insert(0, "run_id", rid)
        datas.append(d)
        metas.append(
            dict(
                run_id=rid,
                source_path=path,
                commit=commit,
                model="Qwen/Qwen2.5-Math-1.5B (SFT on 1024 correct MATH traces)",
                params_b=1.54,
                group_size=8,
                learning_rate=1e-5,
                batch_size=batch,
                dataset="MATH (r1_zero prompt)",
                algorithm=f"GRPO, hand-written CS336 loop ({loss})",
                max_steps=200,
                regime=regime,
                notes=f"{note}; step = rollout batch index + 1",
            )
        )
    return pd.concat(datas, ignore_index=True), pd.DataFrame(metas)
