"""A real GRPO testbed in numpy: exact, fast (seconds per run) and bit-for-bit reproducible.

Two tasks: ``bandit`` (tabular softmax over P prompts x V answers; the mean-field assumption of
the physics holds exactly when all prompts start alike) and ``contextual`` (a one-hidden-layer
MLP of width ``hidden`` = the model size, emitting L-token answers from a V-token vocabulary,
reward 1 only if every token is right; a supervised warm-up sets the initial accuracy; optional
unlearnable prompts and a proxy-reward bug).

>>> from bayesgrpo.testbed import TrainerConfig, run
>>> df, meta = run(TrainerConfig(task="bandit", max_steps=50))

See ``data/testbed/README.md`` for the shipped dataset and ``bench/physics_validation.py`` for the
validation of the mean-field physics against it.
"""

from bayesgrpo.testbed.config import SweepConfig, SweepGroup, TrainerConfig, load_sweep_config
from bayesgrpo.testbed.grpo import Adam, HeavyBall, group_advantages, grpo_logit_grad, run
from bayesgrpo.testbed.sweep import sweep, write_runs

__all__ = [
    "TrainerConfig",
    "SweepConfig",
    "SweepGroup",
    "load_sweep_config",
    "run",
    "sweep",
    "write_runs",
    "group_advantages",
    "grpo_logit_grad",
    "Adam",
    "HeavyBall",
]
