"""damek/assignment5-alignment: Stanford CS336 (2025) assignment 5, a hand-written GRPO loop
(``cs336_alignment/grpo_train_loop.py``, vLLM rollouts, reinforce_with_baseline loss) on Qwen2.5-Math-1.5B with
GSM8K; two committed console logs whose per-iteration reward histogram lines
(``histogram:  {'correct with both format and answer reward 1': k, ...}``) give the rollout batch's rewards."""

import ast
import re

import pandas as pd

from bench.collect import raw

SOURCE = dict(
    repo="damek/assignment5-alignment",
    notes=(
        "Qwen2.5-Math-1.5B, hand-written GRPO (CS336 a5 grpo_train_loop.py: reinforce_with_baseline, std "
        "normalisation), GSM8K train, G = 8, 256 rollouts per iteration, script defaults lr 1e-5 and 200 "
        "iterations (the command lines are not committed). One point per GRPO iteration (0-based), parsed from "
        "the console log's histogram of the iteration's 256 rollouts: reward = share with format and answer "
        "reward 1 (the 0/1 reward; equals the log's 'Percentage of correct examples'), format_rate = share with "
        "format reward 1. Histograms printed after an 'Evaluating...' line are the GSM8K test evaluation (1319 "
        "questions, every 4-5 iterations) -> eval/answer_reward, eval/format_rate. Both runs were stopped "
        "early by hand (KeyboardInterrupt at ~45 and 40 iterations)."
    ),
)
C_LOOP = "f424f199f65caac6d2b6873253ce0d9ced4dd4b0"
C_PROMPT = "36c7421116d6a2f07b9dcebb81fd2dec6ee509f7"
_EVAL = re.compile(r"^GRPO Iteration (\d+), Epoch \d+, Evaluating")


def _parse(text: str, rid: str) -> pd.DataFrame:
    rows, evals, pending = [], {}, None
    for line in text.splitlines():
        m = _EVAL.match(line)
        if m:
            pending = int(m.group(1))
            continue
        if not line.startswith("histogram:"):
            continue
        counts = list(ast.literal_eval(line.split(":", 1)[1].strip()).values())  # correct, format-only, neither
        n = sum(counts)
        if pending is not None:
            evals[pending] = (counts[0] / n, (counts[0] + counts[1]) / n)
            pending = None
        else:
            rows.append(
                dict(
                    run_id=rid,
                    step=len(rows),
                    reward=counts[0] / n,
                    format_rate=(counts[0] + counts[1]) / n,
                    n_rollouts=n,
                )
            )
    df = pd.DataFrame(rows)
    df["eval/answer_reward"] = df["step"].map({k: v[0] for k, v in evals.items()})
    df["eval/format_rate"] = df["step"].map({k: v[1] for k, v in evals.items()})
    return df


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    repo = SOURCE["repo"]
    specs = [
        ("assignment5-alignment-damek_grpo-train-loop-gsm8k", C_LOOP, "cs336_alignment/outputs/grpo_train_loop_log.txt",
         1e-5, "gsm8k, r1_zero prompt", "rising,decline,short",
         "r1_zero prompt; rises 0.07 -> 0.9 by iteration 18, then drifts down to ~0.5-0.6; lr = script default "
         "(command not committed)"),
        ("assignment5-alignment-damek_grpo-prompt-ablation-question-only", C_PROMPT,
         "cs336_alignment/outputs/grpo_prompt_ablation.txt", float("nan"), "gsm8k, question_only prompt",
         "collapse,short",
         "question_only prompt: starts ~0.69, peaks 0.9 at iteration 18, crashes to ~0.12 and partly recovers "
         "(README: 'went up really fast to 70% -- then crashed'); lr not stated (the lr study preceded it)"),
    ]  # fmt: skip
    datas, metas = [], []
    for rid, commit, path, lr, ds, regime, note in specs:
        d = _parse(raw.text(repo, commit, path), rid)
        assert (d["n_rollouts"] == 256).all()
        datas.append(d.drop(columns="n_rollouts"))
        metas.append(
            dict(
                run_id=rid,
                source_path=path,
                commit=commit,
                model="Qwen/Qwen2.5-Math-1.5B",
                params_b=1.54,
                group_size=8,
                learning_rate=lr,
                batch_size=256,
                dataset=ds,
                algorithm="GRPO, hand-written CS336 loop (reinforce_with_baseline)",
                max_steps=200,
                regime=regime,
                notes=note,
            )
        )
    return pd.concat(datas, ignore_index=True), pd.DataFrame(metas)
