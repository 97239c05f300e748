"""adv06/WidgetAnchor: a hand-written GRPO loop (``training/training_loop_grpo.py``) fine-tuning an SFT-merged
GLM-4.1V-9B-Thinking (LoRA) to write a UI widget's TSX code from its screenshot.

The numbers are the console log ``grpo_log.txt``: for every step a line ``Step N: generating 2 candidates``
followed by ``Rewards: [r1, r2] (k/2 rendered)``; every 10 steps a summary line ``GRPO step N/500 | loss |
mean_reward | KL | clip_frac | lr``. Reward of a candidate: -1.0 when its TSX does not render, else the
widget2code visual-similarity metric (about 0.2-0.8). The run's reward is the mean of the step's 2 candidates.
"""

import re

import numpy as np
import pandas as pd

from bench.collect import raw

SOURCE = dict(
    repo="adv06/WidgetAnchor",
    notes=(
        "GLM-4.1V-9B-Thinking (SFT-merged, LoRA) screenshot-to-TSX widget code; own GRPO loop, 1 prompt x 2 "
        "candidates per step, lr 1e-5, beta 0.05; reward -1 if the code fails to render else a widget2code "
        "similarity score; per-step reward = mean of the 2 candidates' rewards (printed every step), loss/KL/clip "
        "every 10 steps; log stops at step 345 of a planned 500; group of 2 makes it very noisy"
    ),
)
COMMIT = "7b88680db259b5a031521b5d950ba807e16ee135"
PATH = "grpo_log.txt"

_STEP = re.compile(r"^\s*Step (\d+): generating (\d+) candidates")
_REW = re.compile(r"^\s*Rewards: \[([^\]]*)\] \((\d+)/(\d+) rendered\)")
_SUM = re.compile(
    r"GRPO step (\d+)/(\d+) \| loss: ([-\d.e+]+) \| mean_reward: ([-\d.e+]+) \| KL: ([-\d.e+]+) \| "
    r"clip_frac: ([-\d.e+]+) \| lr: ([-\d.e+]+)"
)


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    text = raw.text(SOURCE["repo"], COMMIT, PATH)
    rows: dict[int, dict] = {}
    step = None
    for line in text.splitlines():
        if m := _STEP.match(line):
            step = int(m.group(1))
        elif (m := _REW.match(line)) and step is not None:
            vals = [float(v) for v in m.group(1).split(",")]
            rows[step] = dict(
                step=step,
                reward=float(np.mean(vals)),
                reward_std=float(np.std(vals)),
                render_rate=int(m.group(2)) / int(m.group(3)),
            )
            step = None
        elif m := _SUM.search(line):
            s = int(m.group(1))
            rows.setdefault(s, dict(step=s)).update(
                loss=float(m.group(3)),
                kl=float(m.group(5)),
                clip_ratio=float(m.group(6)),
                learning_rate=float(m.group(7)),
            )
    rid = "WidgetAnchor_glm41v-9b-widget2code"
    data = pd.DataFrame(sorted(rows.values(), key=lambda r: r["step"]))
    data = data[data["reward"].notna()].assign(run_id=rid)
    meta = pd.DataFrame(
        [
            dict(
                run_id=rid,
                source_path=PATH,
                commit=COMMIT,
                model="GLM-4.1V-9B-Thinking (SFT-merged, LoRA)",
                params_b=10.3,
                group_size=2,
                learning_rate=1e-5,
                batch_size=2,
                dataset="widget screenshots -> TSX (1000 images)",
                algorithm="GRPO (own loop, PPO-clip eps 0.2)",
                max_steps=500,
                regime="noisy,flat,custom-env",
                notes=(
                    "reward = mean over the step's 2 candidates of (-1 if not rendered else widget2code similarity); "
                    "reward_std = population std of those 2; render_rate = rendered/2; loss, kl, clip_ratio, lr from the "
                    "10-step summary lines only; training_steps=500, the committed log ends at step 345 (interrupted)"
                ),
            )
        ]
    )
    return data, meta
