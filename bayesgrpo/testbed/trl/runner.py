"""Run one real TRL ``GRPOTrainer`` job of the answer-set task and write its run folder.

A run folder holds

* ``trainer_state.json.gz`` -- the trainer's own ``TrainerState.save_to_json`` output (every logged
  metric at every step), gzipped;
* ``latent.csv.gz`` -- per policy version ``step`` = 0..max_steps (the policy after ``step``
  optimizer updates): ``reward_current`` = exact expected reward over all prompts (the latent R_n,
  free of sampling noise), ``pass_rate_sd`` across prompts, and for the run's G the exact
  ``exp_frac_zero_std`` = mean_q [p_q^G + (1-p_q)^G] and ``exp_within_var`` = mean_q p_q (1-p_q);
* ``pass_rates.csv.gz`` -- every prompt's exact pass rate at the checkpoints (every
  ``checkpoint_every`` steps and the last);
* ``run.json`` -- the configuration, its digest, the metadata row and the wall time;
* ``README.md`` -- TRL's own model card (``trainer.create_model_card()``, as TRL writes it at every
  checkpoint save); its ``- TRL: x.y.z`` line tells a reader what this TRL's ``reward_std`` measures.

The folder is written under a temporary name and renamed when complete, so a folder that exists
is a finished run (the sweep resumes by skipping them).
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import platform
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.testbed.trl.config import TRLRunConfig
from bayesgrpo.testbed.trl.task import AnswerSetTask, require_trl

__all__ = ["run_trl", "train", "build_trainer", "grpo_config", "metadata", "write_model_card", "RUN_FILES"]

log = logging.getLogger("bayesgrpo")

RUN_FILES = ("trainer_state.json.gz", "latent.csv.gz", "pass_rates.csv.gz", "run.json", "README.md")
_GZ = {"method": "gzip", "mtime": 0}


def _deterministic() -> None:
    import torch

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def _recorder(task: AnswerSetTask, cfg: TRLRunConfig, tokenizer):
    """A TrainerCallback computing every prompt's exact pass rate after every optimizer step."""
    import torch
    from transformers import TrainerCallback

    mask = torch.as_tensor(task.allowed_mask(), dtype=torch.float64)

    class PassRateRecorder(TrainerCallback):
        def __init__(self):
            self.p: dict[int, np.ndarray] = {}

        def _take(self, model, step):
            self.p[int(step)] = task.pass_rates(model, temperature=cfg.temperature, tokenizer=tokenizer, mask=mask)

        def on_train_begin(self, args, state, control, model=None, **kw):
            self._take(model, 0)

        def on_step_end(self, args, state, control, model=None, **kw):
            self._take(model, state.global_step)

    return PassRateRecorder()


def grpo_config(cfg: TRLRunConfig, output_dir: Path):
    """The ``GRPOConfig`` of a run: TRL's own names; everything the physics reads set explicitly."""
    from trl import GRPOConfig

    G, B = cfg.num_generations, cfg.prompts_per_step
    return GRPOConfig(
        output_dir=str(output_dir), max_steps=cfg.max_steps, per_device_train_batch_size=B * G,
        gradient_accumulation_steps=1, num_generations=G, max_completion_length=1, logging_steps=1,
        learning_rate=cfg.learning_rate, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0,
        adam_beta1=cfg.adam_beta1, adam_beta2=cfg.adam_beta2, max_grad_norm=cfg.max_grad_norm, beta=cfg.beta,
        num_iterations=cfg.num_iterations, steps_per_generation=cfg.steps_per_generation,
        scale_rewards=cfg.scale_rewards, loss_type=cfg.loss_type, epsilon=cfg.epsilon, temperature=cfg.temperature,
        top_k=0, top_p=1.0, seed=cfg.seed, data_seed=cfg.seed, use_cpu=True, bf16=False, fp16=False,
        gradient_checkpointing=False, report_to="none", save_strategy="no", disable_tqdm=True,
        dataloader_num_workers=0, log_completions=False,
    )  # fmt: skip


def build_trainer(cfg: TRLRunConfig, workdir: Path, *, callbacks=()):
    """The GRPOTrainer of ``cfg`` in ``workdir`` (not trained yet); return ``(trainer, recorder, task)``.

    Deterministic: torch on one thread with deterministic algorithms, the initial weights from
    ``task_seed``, the GRPO run from ``seed``; bf16 and gradient checkpointing (TRL's defaults) off;
    a constant learning rate (no warm-up, no decay) so the physics' eta is the configured one.
    """
    require_trl()
    import transformers
    from datasets import Dataset
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOTrainer

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    _deterministic()
    task = AnswerSetTask.from_config(cfg)
    tok = task.tokenizer()
    model = task.model(cfg)
    init_dir = Path(workdir) / "init_model"  # the reference policy is loaded from here when beta > 0
    model.save_pretrained(init_dir)
    model.config._name_or_path = str(init_dir)
    rec = _recorder(task, cfg, tok)
    ds = Dataset.from_dict({"prompt": task.prompts * cfg.prompt_copies})
    with warnings.catch_warnings():  # transformers 5 renamed gradient_checkpointing; TRL still sets the old name
        warnings.simplefilter("ignore", FutureWarning)
        args = grpo_config(cfg, Path(workdir) / "out")
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[task.reward_function()],
            args=args,
            train_dataset=ds,
            processing_class=tok,
            callbacks=[rec, *callbacks],
        )
    for cb in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(cb)
    return trainer, rec, task


def train(cfg: TRLRunConfig, workdir: Path, *, callbacks=()):
    """Build (:func:`build_trainer`) and train the GRPOTrainer of ``cfg``; return ``(trainer, recorder, task)``."""
    trainer, rec, task = build_trainer(cfg, workdir, callbacks=callbacks)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        trainer.train()
    return trainer, rec, task


def _latent(rec, cfg: TRLRunConfig) -> pd.DataFrame:
    steps = sorted(rec.p)
    P = np.stack([rec.p[s] for s in steps])
    G = cfg.num_generations
    return pd.DataFrame(
        {
            "step": steps,
            "reward_current": P.mean(axis=1),
            "pass_rate_sd": P.std(axis=1),
            "exp_frac_zero_std": (P**G + (1 - P) ** G).mean(axis=1),
            "exp_within_var": (P * (1 - P)).mean(axis=1),
        }
    )


def _pass_rates(rec, cfg: TRLRunConfig) -> pd.DataFrame:
    last = max(rec.p)
    keep = [s for s in sorted(rec.p) if s % cfg.checkpoint_every == 0 or s == last]
    P = np.stack([rec.p[s] for s in keep])
    q = np.arange(P.shape[1])
    return pd.DataFrame({"step": np.repeat(keep, len(q)), "prompt": np.tile(q, len(keep)), "p": P.ravel()})


def metadata(run_id: str, cfg: TRLRunConfig, task: AnswerSetTask, *, n_params: int, seconds: float) -> dict:
    """The run's metadata row (schema names first: ``group_size``, ``learning_rate``, ``beta1``, ...).

    ``batch_size`` counts completions per optimizer step (TRL's ``per_device_train_batch_size``), as the
    metadata :class:`~bayesgrpo.integrations.trl.BayesGRPOCallback` reads from a live run; the groups
    per step are ``prompts_per_step``.
    """
    return {
        "run_id": run_id,
        "model": f"llama-h{cfg.hidden}-l{cfg.layers}",
        "family": "trl-tiny-llama",
        "params_b": n_params / 1e9,
        "params": n_params,
        "group_size": cfg.num_generations,
        "learning_rate": cfg.learning_rate,
        "beta1": cfg.adam_beta1,
        "refresh_interval": cfg.refresh_interval,
        "batch_size": cfg.prompts_per_step * cfg.num_generations,  # completions per step, as BayesGRPOCallback
        "prompts_per_step": cfg.prompts_per_step,
        "max_steps": cfg.max_steps,
        "dataset": f"answer-set-P{cfg.n_prompts}xV{cfg.n_answers}-seed{cfg.task_seed}",
        "algorithm": "dr_grpo" if cfg.scale_rewards == "none" else "grpo",
        "optimizer": "adamw",
        **{
            f: getattr(cfg, f)
            for f in (
                "seed",
                "task_seed",
                "adam_beta2",
                "beta",
                "num_iterations",
                "steps_per_generation",
                "scale_rewards",
                "loss_type",
                "epsilon",
                "temperature",
                "max_grad_norm",
                "hidden",
                "layers",
                "n_prompts",
                "n_answers",
                "prompt_copies",
            )
        },
        "allowed_sizes": " ".join(map(str, cfg.allowed_sizes)),
        "reward_ceiling": 1.0,
        "seconds": round(seconds, 2),
    }


def write_model_card(trainer, path: Path) -> None:
    """TRL's model card of ``trainer`` (written to its output_dir by TRL, then copied to ``path``)."""
    trainer.create_model_card()
    shutil.copyfile(Path(trainer.args.output_dir) / "README.md", path)


def run_trl(run_id: str, cfg: TRLRunConfig, out_dir: str | Path, *, labels: dict | None = None) -> dict:
    """Train ``cfg`` and write the run folder ``out_dir/run_id`` (atomically); return its metadata row."""
    require_trl()
    import torch
    import transformers
    import trl

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=".work-", dir=out_dir) as work:
        trainer, rec, task = train(cfg, Path(work))
        seconds = time.perf_counter() - t0
        stage = Path(work) / "stage"
        stage.mkdir()
        state_json = Path(work) / "trainer_state.json"
        trainer.state.save_to_json(str(state_json))  # the trainer's own serialiser, as in every checkpoint
        with open(state_json, "rb") as src, gzip.GzipFile(stage / RUN_FILES[0], "wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)
        _latent(rec, cfg).to_csv(stage / RUN_FILES[1], index=False, float_format="%.7g", compression=_GZ)
        _pass_rates(rec, cfg).to_csv(stage / RUN_FILES[2], index=False, float_format="%.5g", compression=_GZ)
        n_params = sum(p.numel() for p in trainer.model.parameters())
        meta = {**metadata(run_id, cfg, task, n_params=n_params, seconds=seconds), **(labels or {})}
        info = {
            "run_id": run_id, "digest": cfg.digest(), "config": cfg.model_dump(), "meta": meta,
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__,
                         "python": platform.python_version()},
        }  # fmt: skip
        (stage / RUN_FILES[3]).write_text(json.dumps(info, indent=1, default=str))
        write_model_card(trainer, stage / RUN_FILES[4])
        final = out_dir / run_id
        if final.exists():
            shutil.rmtree(final)
        os.replace(stage, final)
    log.info("bayesgrpo: TRL testbed run %s done in %.1f s", run_id, seconds)
    return meta
