"""KardeniaPoyu/SLM-RL-Comparation: a hand-written GRPO loop on Qwen2.5-0.5B-Instruct (4-bit) for the
"24 points" arithmetic game; ``logs/grpo_metrics.csv`` (one row per optimiser step), overwritten later in
the repository's history, so the one long version (123 rows, commit edd24b59) is read."""

import io

import pandas as pd

from bench.collect import raw

SOURCE = dict(
    repo="KardeniaPoyu/SLM-RL-Comparation",
    notes=(
        "Qwen2.5-0.5B-Instruct (4-bit, LoRA), hand-written GRPO loop, '24 points' arithmetic game (custom env), "
        "G = 4, 8 prompts accumulated per update, lr 1e-5; one row per update. reward = the CSV's "
        "'mean_advantage' column, which train_grpo.py fills with the mean over the update's prompts of the group "
        "mean env reward (+0.1 think tag, -0.5 no/invalid expression, +1.0 solved; range -0.5..1.1); its "
        "'adv_std' column is the mean within-group reward std (-> reward_std); success_rate (solved share) "
        "kept, 0.0 on every step. A real failed run: reward at its -0.5 floor with rare think-tag bonuses. "
        "Later versions of the file in the repo's history are shorter re-runs (<= 23 rows) or empty, not used."
    ),
)
COMMIT = "edd24b5959c426280d64b698b2f63aa29ff85f7e"
PATH = "logs/grpo_metrics.csv"


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    rid = "SLM-RL-Comparation_grpo-qwen05b-24game"
    df = pd.read_csv(io.StringIO(raw.text(SOURCE["repo"], COMMIT, PATH)))
    # train_grpo.py writes the mean group reward under 'mean_advantage' and its within-group std under 'adv_std'
    df = df.rename(
        columns={"mean_advantage": "reward", "adv_std": "reward_std", "policy_entropy": "entropy", "kl_div": "kl"}
    )
    df.insert(0, "run_id", rid)
    meta = pd.DataFrame(
        [
            dict(
                run_id=rid,
                source_path=PATH,
                commit=COMMIT,
                model="Qwen/Qwen2.5-0.5B-Instruct (4-bit, LoRA)",
                params_b=0.494,
                group_size=4,
                learning_rate=1e-5,
                batch_size=8,
                dataset="24-points arithmetic game",
                algorithm="GRPO (hand-written loop)",
                max_steps=float("nan"),
                regime="flat,custom-env",
                notes="reward = mean env reward (CSV column mean_advantage), at its -0.5 floor; success_rate 0 on every step; step starts at 0",
            )
        ]
    )
    return df, meta
