"""HanlardResearch/Hetero-RL: GEPO paper (arXiv 2508.17850) W&B panel exports of three online (zero-delay)
runs -- GRPO, GEPO, GSPO -- of Qwen3-1.7B on SimpleRL-Zoo MATH level 3-5, open-r1/TRL-based trainer.
Reward = W&B ``train/reward`` (0/1 boxed-answer accuracy ``accuracy_lv35``, batch mean, every step); the
same runs' ``train/grad_norm`` is joined from the GradNorm export. x = ``train/global_step``."""

import pandas as pd

from bench.collect import raw
from bench.collect.sources._s2util import to_schema, wandb_csv

SOURCE = dict(
    repo="HanlardResearch/Hetero-RL",
    notes=(
        "GEPO paper (Qwen3-1.7B, open-r1/TRL GRPO-family trainer, SimpleRL-Zoo MATH lv3-5, 0/1 accuracy reward, "
        "G=8, lr 1e-6, beta 0, 4096-token completions); W&B CSV exports of the online runs GRPO/GEPO/GSPO: "
        "train/reward every step + train/grad_norm and train/sts_var/ratio_pEqQ (importance-weight variance) "
        "every step, eval/rewards/accuracy_reward_lv35/mean (held-out MATH lv3-5) every 32 steps (its step-0 "
        "value dropped: no training row there); x = train/global_step (W&B _step dropped). "
        "Train reward rises 0.45->0.75 in ~300 steps, then GRPO collapses to ~0.35-0.40 from step ~920 and "
        "GSPO from step ~1200 (20-step rolling mean falls by >0.15); GEPO stays at ~0.75."
    ),
)
COMMIT = "ebda3d6aec046b2a6f904f2b15d73035d80fefeb"
DIR = "src/hetero_rl/GEPO_paper_plot/wandb-res/"
RUNS = {"[paper]GRPO_online": "grpo", "[paper]GEPO_online": "gepo", "[paper]GSPO_online": "gspo"}
REGIME = {"grpo": "rising,collapse", "gepo": "rising", "gspo": "rising,collapse"}
ALGO = {"grpo": "GRPO", "gepo": "GEPO (group-expectation IS weights)", "gspo": "GSPO"}


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    paths = [
        DIR + "wandb_TrainReward.csv",
        DIR + "wandb_GradNorm.csv",
        DIR + "wandb_VarISweight.csv",
        DIR + "wandb_online.csv",
    ]
    tables = [wandb_csv(raw.text(SOURCE["repo"], COMMIT, p)) for p in paths]
    parts, meta = [], []
    for name, short in RUNS.items():
        d = tables[0][name]
        for t in tables[1:]:
            if name in t:
                d = d.merge(t[name], on="step", how="left")
        rid = f"Hetero-RL_{short}-online-qwen3-1.7b"
        d.insert(0, "run_id", rid)
        parts.append(d)
        meta.append(
            dict(
                run_id=rid,
                source_path=";".join(paths),
                commit=COMMIT,
                model="Qwen/Qwen3-1.7B",
                params_b=1.7,
                group_size=8,
                learning_rate=1e-6,
                batch_size=None,
                dataset="SimpleRL-Zoo MATH level 3-5",
                algorithm=ALGO[short],
                max_steps=None,
                regime=REGIME[short],
                notes="reward = train/reward (0/1 accuracy, batch mean), every step; config from recipes/OnlineRL/"
                "config_v1.yaml and sh_dir/Online_gXpo_4gpus.sh (4 GPUs x 8 per device x grad-accum 8, "
                "num_train_epochs 5; batch size not verified)",
            )
        )
    data = to_schema(pd.concat(parts, ignore_index=True))
    return data, pd.DataFrame(meta)
