"""Configuration of the TRL testbed (pydantic v2, frozen, no unknown fields); torch-free."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bayesgrpo.testbed.config import SweepConfig, expand_groups

__all__ = ["TRLRunConfig", "TRLSweepConfig", "load_trl_sweep"]


class TRLRunConfig(BaseModel):
    """One real TRL ``GRPOTrainer`` run on the answer-set task (CPU, one thread, nothing downloaded).

    The task (``bayesgrpo.testbed.trl.task``): ``n_prompts`` one-token prompts; prompt q is answered
    with ONE token and rewarded 1 when that token is in its own allowed set of
    ``allowed_sizes[q mod len(allowed_sizes)]`` of the ``n_answers`` answer tokens (0 otherwise).
    The set size is the difficulty: a random policy passes a prompt with probability
    (set size) / (vocabulary size). The policy is a randomly initialised ``LlamaForCausalLM``
    (``hidden`` wide, ``layers`` deep) built from a config. ``task_seed`` fixes the allowed sets
    and the initial weights, ``seed`` the GRPO run (prompt order and sampling): replicates that
    differ only in ``seed`` start from the same policy.

    Every ``GRPOConfig`` field the physics names is here under TRL's own name. The refresh
    interval of the physics (optimizer steps between two generations) is
    ``steps_per_generation * num_iterations``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    # task and policy
    n_prompts: int = Field(64, ge=1, description="distinct one-token prompts")
    n_answers: int = Field(32, ge=2, description="answer tokens (the rest of the vocabulary never passes)")
    allowed_sizes: list[int] = Field(
        default_factory=lambda: [1, 2, 4, 8], description="allowed-set size of prompt q: allowed_sizes[q % len]"
    )
    task_seed: int = Field(0, description="allowed sets and initial weights")
    prompt_copies: int = Field(
        1, ge=1, description="dataset rows = n_prompts * prompt_copies; one generation batch must fit in an epoch"
    )
    hidden: int = Field(32, ge=2, description="hidden size of the Llama policy")
    layers: int = Field(1, ge=1, description="decoder layers")
    heads: int = Field(2, ge=1, description="attention heads")

    # GRPO (TRL GRPOConfig names)
    seed: int = 0
    max_steps: int = Field(400, ge=1, description="optimizer steps")
    prompts_per_step: int = Field(8, ge=1, description="prompts (groups) per optimizer step, B")
    num_generations: int = Field(8, ge=2, description="completions per prompt, G")
    learning_rate: float = Field(3e-3, gt=0)
    adam_beta1: float = Field(0.9, ge=0, lt=1)
    adam_beta2: float = Field(0.999, ge=0, lt=1)
    beta: float = Field(0.05, ge=0, description="KL coefficient (k3 estimator in the loss, TRL's default placement)")
    num_iterations: int = Field(1, ge=1, description="optimisation passes over each generated batch (TRL's mu)")
    steps_per_generation: int = Field(1, ge=1, description="optimizer steps served by one generation")
    scale_rewards: Literal["group", "batch", "none"] = Field(
        "group", description="group: std GRPO; none: Dr.GRPO advantages (r - group mean)"
    )
    loss_type: str = Field("dapo", description="TRL loss aggregation (with one-token answers all agree)")
    epsilon: float = Field(0.2, gt=0, description="PPO clip range")
    temperature: float = Field(1.0, gt=0)
    max_grad_norm: float = Field(1.0, gt=0)
    checkpoint_every: int = Field(10, ge=1, description="per-prompt exact pass rates every this many steps")

    @model_validator(mode="after")
    def _check(self) -> TRLRunConfig:
        if any(k < 1 or k > self.n_answers for k in self.allowed_sizes) or not self.allowed_sizes:
            raise ValueError(f"allowed_sizes {self.allowed_sizes} must lie in 1..n_answers={self.n_answers}")
        if self.prompts_per_step > self.n_prompts:
            raise ValueError(f"prompts_per_step {self.prompts_per_step} exceeds n_prompts {self.n_prompts}")
        if self.prompts_per_step * self.steps_per_generation > self.dataset_rows:
            raise ValueError(
                f"a generation batch of prompts_per_step * steps_per_generation = "
                f"{self.prompts_per_step * self.steps_per_generation} prompts exceeds the {self.dataset_rows} "
                "dataset rows; raise prompt_copies"
            )
        if self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not a multiple of heads {self.heads}")
        return self

    @property
    def refresh_interval(self) -> int:
        """Optimizer steps between two generations (the lag pattern cycles 0..K-1)."""
        return self.steps_per_generation * self.num_iterations

    @property
    def vocab_size(self) -> int:
        return len(SPECIAL_TOKENS) + self.n_prompts + self.n_answers

    @property
    def dataset_rows(self) -> int:
        return self.n_prompts * self.prompt_copies

    def digest(self) -> str:
        """Short hash of the configuration (a run folder is reused only when it matches)."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]


SPECIAL_TOKENS = ("<pad>", "<eos>", "<unk>", "<bos>")


class TRLSweepConfig(SweepConfig):
    """A sweep of TRL runs: shared ``base`` settings plus groups (see ``models/trl_sweep.json``)."""

    def expand(self) -> list[tuple[str, Any, dict[str, Any]]]:
        """All runs as ``(run_id, config, labels)``; configs validated here."""
        return expand_groups(self.base, self.groups, TRLRunConfig)


def load_trl_sweep(path: str | Path) -> TRLSweepConfig:
    return TRLSweepConfig.model_validate(json.loads(Path(path).read_text()))
