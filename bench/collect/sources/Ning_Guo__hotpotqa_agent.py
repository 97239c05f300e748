"""Ning-Guo/hotpotqa-agent: answer-synthesis policy of a LangGraph multi-hop QA agent (Qwen2.5-3B-Instruct, SFT
then GRPO with a LoRA adapter, TRL GRPOTrainer, HotpotQA with retrieved passages); console logs of three GRPO
runs (``logs/grpo.log``, ``logs/grpo_v2.log``, ``logs/grpo_v3.log``) with TRL's printed metric dicts."""

import pandas as pd

from bench.collect import raw
from bench.collect.parse import via_reader

SOURCE = dict(
    repo="Ning-Guo/hotpotqa-agent",
    notes=(
        "Qwen2.5-3B-Instruct SFT-merged checkpoint + LoRA r16, TRL GRPOTrainer, HotpotQA answer synthesis over "
        "retrieved passages (agent pipeline), combined reward 0.7 accuracy + 0.25 grounding - length penalty "
        "(<= 0.05), lr 5e-6, 4 prompts/device x 8 accumulation, logged every 20 steps; reward = TRL 'reward' "
        "(= rewards/combined_reward). SFT-initialised, so the reward starts high (~0.65-0.72) and moves little. "
        "v1: G = 4, beta 0.01, 15k prompts, 1875 steps (1 GPU); v2/v3: G = 2, beta 0.05, 30k prompts, 4 GPUs, "
        "936 steps. Steps from TRL's progress bar (the console reader)."
    ),
)
RUNS = [
    ("hotpotqa-agent_grpo-v1-g4", "1b3ce87f4596666a6feee28ad2fad8e58429aa0d", "logs/grpo.log", 4, 0.01, 1875, 15000),
    ("hotpotqa-agent_grpo-v2-g2", "9694e95663e36eb3d2c0bb9b4c2693c59937c33c", "logs/grpo_v2.log", 2, 0.05, 936, 30000),
    ("hotpotqa-agent_grpo-v3-g2", "54e8af70c545b8cfc705e49c6681693e4a7303f0", "logs/grpo_v3.log", 2, 0.05, 936, 30000),
]  # fmt: skip


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    datas, metas = [], []
    for rid, commit, path, g, beta, steps, n in RUNS:
        d = via_reader(raw.read(SOURCE["repo"], commit, path), suffix=".log", run_id=rid, fmt="trl_console")
        datas.append(d.drop(columns=[c for c in ("epoch",) if c in d.columns]))
        metas.append(
            dict(
                run_id=rid,
                source_path=path,
                commit=commit,
                model="Qwen/Qwen2.5-3B-Instruct (SFT, LoRA)",
                params_b=3.09,
                group_size=g,
                learning_rate=5e-6,
                batch_size=32,
                dataset=f"HotpotQA answer synthesis with retrieved passages ({n} prompts)",
                algorithm="GRPO (TRL GRPOTrainer)",
                max_steps=steps,
                regime="flat,noisy" if g == 4 else "flat",
                notes=f"beta {beta}; reward = combined accuracy/grounding/length reward",
            )
        )
    return pd.concat(datas, ignore_index=True), pd.DataFrame(metas)
