"""Configuration models of the GRPO testbed (pydantic v2, frozen, no unknown fields)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["TrainerConfig", "SweepGroup", "SweepConfig", "expand_groups", "load_sweep_config"]


class TrainerConfig(BaseModel):
    """One GRPO training run of the testbed.

    Randomness: ``task_seed`` fixes the task (prompts, features, targets, unlearnable prompts),
    the initial policy and its supervised "pretraining"; ``seed`` fixes the GRPO run (prompt
    batches, sampled completions, random targets of unlearnable prompts). Replicates that differ
    only in ``seed`` therefore start from the same policy and differ only in sampling noise.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    # task / policy
    task: Literal["bandit", "contextual"] = "bandit"
    n_prompts: int = Field(64, ge=1, description="training prompts")
    n_eval_prompts: int = Field(
        256, ge=1, description="held-out prompts (contextual); the bandit evaluates on its P prompts"
    )
    n_monitor_prompts: int = Field(
        256,
        ge=1,
        description="contextual: fixed subset of training prompts on which the exact expected reward is logged",
    )
    vocab_size: int = Field(8, ge=2, description="answers (bandit) / token vocabulary (contextual)")
    answer_length: int = Field(3, ge=1, description="tokens per answer (contextual; the bandit uses 1)")
    hidden: int = Field(64, ge=1, description="hidden width of the contextual MLP policy (= model size)")
    feature_dim: int = Field(16, ge=1, description="prompt feature dimension (contextual)")
    init_accuracy: float = Field(
        0.1, gt=0.0, lt=1.0, description="target initial expected reward on the training prompts"
    )
    init_spread: float = Field(
        0.0, ge=0.0, description="bandit: sd of per-prompt initial logit offsets (0 = mean field exact)"
    )
    unlearnable_fraction: float = Field(
        0.0, ge=0.0, lt=1.0, description="share of prompts whose target is redrawn at random per completion"
    )
    hack_token: int | None = Field(
        None, description="proxy-reward bug: reward 1 for the degenerate answer (h, h, ..., h)"
    )
    pretrain_lr: float = Field(0.01, gt=0.0)
    pretrain_max_steps: int = Field(2000, ge=0)
    task_seed: int = 0

    # GRPO
    seed: int = 0
    max_steps: int = Field(300, ge=1)
    batch_size: int = Field(16, ge=1)
    group_size: int = Field(8, ge=2)
    advantage: Literal["grpo", "drgrpo"] = Field("grpo", description="grpo: (r-mean)/(std+eps); drgrpo: r-mean")
    adv_eps: float = Field(1e-4, ge=0.0)
    std_ddof: int = Field(1, ge=0, le=1, description="1 = unbiased group std (torch default, as TRL)")
    clip_eps: float = Field(0.2, gt=0.0)
    kl_beta: float = Field(0.0, ge=0.0, description="KL penalty (k3 estimator) to the reference = initial policy")
    kl_mode: Literal["loss", "reward"] = Field(
        "loss",
        description="loss: k3 penalty in the loss at the current policy (TRL); reward: k1 penalty "
        "-beta*sum_t log(pi_sampling/pi_ref) folded into each completion's reward before the group "
        "normalisation (InstructGPT-style; evaluated at the sampling policy, hence lagged)",
    )
    refresh_interval: int = Field(1, ge=1, description="sampling policy refreshed every K optimizer steps")
    ratio_reference: Literal["sampling", "current"] = Field(
        "sampling",
        description="importance ratio against the sampling policy (PPO/TRL) or against the current "
        "policy (ratio = 1: uncorrected stale samples, as an async engine whose old log-probs are "
        "recomputed by the trainer)",
    )

    # optimizer
    optimizer: Literal["adam", "sgd"] = "adam"
    learning_rate: float = Field(0.01, gt=0.0)
    momentum: float = Field(0.9, ge=0.0, lt=1.0, description="Adam beta1 or heavy-ball momentum mu")
    beta2: float = Field(0.999, ge=0.0, lt=1.0)
    adam_eps: float = Field(1e-8, gt=0.0)

    # logging
    eval_every: int = Field(10, ge=1)

    @model_validator(mode="after")
    def _check(self) -> TrainerConfig:
        if self.batch_size > self.n_prompts:
            raise ValueError(f"batch_size {self.batch_size} exceeds n_prompts {self.n_prompts}")
        if self.hack_token is not None and not 0 <= self.hack_token < self.vocab_size:
            raise ValueError(f"hack_token {self.hack_token} outside the vocabulary 0..{self.vocab_size - 1}")
        return self

    @property
    def length(self) -> int:
        return 1 if self.task == "bandit" else self.answer_length

    @property
    def family(self) -> str:
        return "bandit-softmax" if self.task == "bandit" else "contextual-mlp"

    @property
    def model_name(self) -> str:
        if self.task == "bandit":
            return f"bandit-P{self.n_prompts}xV{self.vocab_size}"
        return f"mlp-h{self.hidden}-L{self.answer_length}xV{self.vocab_size}"

    @property
    def n_params(self) -> int:
        if self.task == "bandit":
            return self.n_prompts * self.vocab_size
        h, d, L, v = self.hidden, self.feature_dim, self.answer_length, self.vocab_size
        return h * d + h + L * (v * h + v)


class SweepGroup(BaseModel):
    """A block of runs: ``base`` overrides, a cartesian ``grid`` and replicate ``seeds``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    base: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    zip: dict[str, list[Any]] = Field(default_factory=dict, description="parameters varied together (equal lengths)")
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2])
    labels: dict[str, Any] = Field(default_factory=dict, description="extra metadata columns (e.g. failure_mode)")

    @model_validator(mode="after")
    def _check(self) -> SweepGroup:
        lens = {len(v) for v in self.zip.values()}
        if len(lens) > 1:
            raise ValueError(f"group {self.name!r}: zip lists have different lengths {sorted(lens)}")
        return self


class SweepConfig(BaseModel):
    """A sweep: shared ``base`` settings plus groups; see ``models/testbed_sweep.json``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    description: str = ""
    base: dict[str, Any] = Field(default_factory=dict)
    groups: list[SweepGroup]

    def expand(self) -> list[tuple[str, Any, dict[str, Any]]]:
        """All runs as ``(run_id, config, labels)``; configs validated here."""
        return expand_groups(self.base, self.groups, TrainerConfig)


def expand_groups(base: dict[str, Any], groups: list[SweepGroup], factory) -> list[tuple[str, Any, dict[str, Any]]]:
    """Expand sweep groups into ``(run_id, factory(**params), labels)``, run ids ``<group>-<cell>-s<seed>``.

    Parameters of a run: the sweep ``base``, the group's ``base``, one cartesian ``grid`` cell, one
    ``zip`` row and the seed, later ones overriding earlier ones. Shared by every testbed sweep.
    """
    out = []
    seen = set()
    for grp in groups:
        if grp.name in seen:
            raise ValueError(f"sweep group name {grp.name!r} used twice")
        seen.add(grp.name)
        keys = list(grp.grid)
        combos = list(itertools.product(*(grp.grid[k] for k in keys))) or [()]
        zkeys = list(grp.zip)
        zrows = list(zip(*(grp.zip[k] for k in zkeys), strict=True)) if zkeys else [()]
        k = 0
        for combo in combos:
            for zrow in zrows:
                for seed in grp.seeds:
                    params = {
                        **base,
                        **grp.base,
                        **dict(zip(keys, combo, strict=True)),
                        **dict(zip(zkeys, zrow, strict=True)),
                        "seed": seed,
                    }
                    out.append(
                        (f"{grp.name}-{k:03d}-s{seed}", factory(**params), {"sweep": grp.name, "cell": k, **grp.labels})
                    )
                k += 1
    return out


def load_sweep_config(path: str | Path) -> SweepConfig:
    return SweepConfig.model_validate(json.loads(Path(path).read_text()))
