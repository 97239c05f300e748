"""zzlzero/mini-R1: philschmid "mini-deepseek-r1" recipe, TRL 0.14/0.15 GRPOTrainer, Qwen2.5-3B-Instruct on
Countdown (Jiayi-Pan/Countdown-Tasks-3to4); TensorBoard event files committed under runs/. Two runs:
the base run (three event files: a process resumed from checkpoints 600 and 650, joined with the later
file winning on overlapping steps) and a second run with a 0.1-weighted format reward."""

import pandas as pd

from bench.collect import raw
from bench.collect.parse import via_reader

SOURCE = dict(
    repo="zzlzero/mini-R1",
    notes=(
        "Qwen2.5-3B-Instruct, TRL GRPOTrainer (vLLM), Countdown 3-4 numbers; reward = TRL reward = "
        "format_reward_func + equation_reward_func (max 2.0; the second run weights format 0.1 -> max 1.1); "
        "TensorBoard train/* scalars every 2 steps (2-step window means); G=8, lr 5e-7 cosine, beta 0.001, "
        "max_steps 1875 (from the args text summary). Base run: 3 event files of one resumed run joined "
        "(part1 steps 2-600, part2 602-650, part3 652-1210; the later file wins where they overlap)."
    ),
)
COMMIT = "f0c65f5b9f73b250af72c887a402085c02943153"
BASE = "runs/qwen-2.5-3b-r1-countdown/runs/"
PARTS = [
    BASE + "Feb18_08-06-13_fdse/events.out.tfevents.1739866051.fdse.115441.0",
    BASE + "Feb19_09-17-34_fdse/events.out.tfevents.1739956707.fdse.659406.0",
    BASE + "Feb19_10-09-32_fdse/events.out.tfevents.1739959825.fdse.669140.0",
]
FMT01 = "runs/qwen-2.5-3b-r1-countdown_0.1format_reward/runs/Feb20_05-48-04_fdse/events.out.tfevents.1740030530.fdse.818757.0"


def _tb(path: str, rid: str) -> pd.DataFrame:
    return via_reader(
        raw.read(SOURCE["repo"], COMMIT, path), suffix="." + path.rsplit("/", 1)[-1], run_id=rid, fmt="tensorboard"
    )


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    rid = "mini-R1_qwen25-3b-countdown"
    parts = [_tb(p, rid) for p in PARTS]
    joined = parts[0]
    for later in parts[1:]:  # files in time order: a later file's steps replace the earlier file's
        joined = pd.concat([joined[joined["step"] < later["step"].min()], later], ignore_index=True)
    rid2 = "mini-R1_qwen25-3b-countdown-fmt0.1"
    second = _tb(FMT01, rid2)
    common = dict(
        commit=COMMIT,
        model="Qwen/Qwen2.5-3B-Instruct",
        params_b=3.1,
        group_size=8,
        learning_rate=5e-7,
        batch_size=None,
        dataset="Jiayi-Pan/Countdown-Tasks-3to4",
        algorithm="GRPO (TRL 0.14/0.15, beta 0.001)",
        max_steps=1875,
    )
    meta = pd.DataFrame(
        [
            dict(
                run_id=rid,
                source_path=";".join(PARTS),
                regime="rising",
                **common,
                notes="reward = format (0/1) + equation (0/1); fast rise 0.7->1.45 in ~200 steps then slow creep; "
                "3 resumed parts joined (later file wins on steps 602-654); stops at 1210 of 1875",
            ),
            dict(
                run_id=rid2,
                source_path=FMT01,
                regime="rising",
                **common,
                notes="same recipe with the format reward weighted 0.1 (reward max 1.1); steps 2-900 of 1875",
            ),
        ]
    )
    return pd.concat([joined, second], ignore_index=True), meta
