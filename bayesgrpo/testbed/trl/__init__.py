"""A testbed made of TRL's own ``GRPOTrainer``: real GRPO jobs on CPU with every setting known.

The task (:mod:`bayesgrpo.testbed.trl.task`) has 0/1 rewards and prompts of known, varied difficulty,
and each prompt's pass rate is computed exactly from the policy's logits, so the latent expected
reward R_n of the physics is known at every step next to what the trainer logs. Needs the optional
extra ``[trl]`` (torch, transformers, trl); torch is imported only when a run starts.

>>> from bayesgrpo.testbed.trl import TRLRunConfig, run_trl            # doctest: +SKIP
>>> meta = run_trl("demo", TRLRunConfig(max_steps=50), "trl_runs")     # doctest: +SKIP

CLI: ``bayesgrpo testbed trl models/trl_sweep.json --out-dir data/trl-testbed``; the shipped sweep
is described in ``data/trl-testbed/README.md``.
"""

from bayesgrpo.testbed.trl.config import TRLRunConfig, TRLSweepConfig, load_trl_sweep

__all__ = ["TRLRunConfig", "TRLSweepConfig", "load_trl_sweep", "AnswerSetTask", "run_trl", "sweep_trl", "read_index"]


def __getattr__(name):  # the torch-backed parts load lazily
    if name == "AnswerSetTask":
        from bayesgrpo.testbed.trl.task import AnswerSetTask

        return AnswerSetTask
    if name == "run_trl":
        from bayesgrpo.testbed.trl.runner import run_trl

        return run_trl
    if name in ("sweep_trl", "read_index"):
        from bayesgrpo.testbed.trl import sweep

        return getattr(sweep, name)
    raise AttributeError(name)
