"""Weights & Biases run history through the public API (optional: ``pip install bayesgrpo[wandb]``).

``wandb.Api().run("entity/project/run_id").scan_history()`` yields **every** logged row (a dict per
``wandb.log`` call, with ``_step``, ``_runtime``, ``_timestamp`` and the logged keys); it is used
here and never ``run.history()``, which returns a *sample* of at most ``samples`` rows.

Rows: the step is ``train/global_step`` when present (the HF Trainer and OpenRLHF log their
optimizer step under it; W&B's own ``_step`` counts ``wandb.log`` calls), else ``_step``. Metric names
lose a leading ``train/`` (as in the W&B CSV reader), so ``train/reward`` -> ``reward`` and the usual
key mapping applies; ``eval/<m>`` becomes ``eval/<m>``. Rows without a reward (eval-only or
system rows) are merged into the row of the same step. The run's ``config`` gives the metadata
(``max_steps``, ``learning_rate``, ``adam_beta1``, ``num_generations``, batch sizes, refresh interval).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from bayesgrpo.errors import LogFormatError
from bayesgrpo.io._common import strip_train_prefix
from bayesgrpo.schema import RUN, SOURCE_LINE, STEP, RunSet

__all__ = ["read_wandb_run", "wandb_rows"]

_INTERNAL = ("_step", "_runtime", "_timestamp", "_wandb")
_STEP_KEYS = ("train/global_step", "global_step", "trainer/global_step")


def _api(api):
    if api is not None:
        return api
    try:
        import wandb
    except ImportError:
        raise LogFormatError(
            "reading a W&B run through its API needs the optional package wandb; install it with: "
            "pip install bayesgrpo[wandb]"
        ) from None
    return wandb.Api()


def wandb_rows(history: Iterable[dict], *, x: str | None = None) -> list[dict]:
    """Schema-ready records (``step`` + metrics) from W&B history rows, merged per step.

    Parameters
    ----------
    history : iterable of dict
        Rows of ``run.scan_history()``.
    x : str, optional
        Key to use as the step (default: ``train/global_step`` when a row has it, else ``_step``).

    Examples
    --------
    >>> wandb_rows([{"_step": 0, "train/global_step": 10, "train/reward": 0.5},
    ...             {"_step": 1, "train/global_step": 10, "eval/reward": 0.4}])
    [{'reward': 0.5, 'step': 10, '_step': 1, 'eval/reward': 0.4}]
    """
    by_step: dict[int, dict] = {}
    for i, row in enumerate(history):
        if not isinstance(row, dict):
            raise LogFormatError(f"W&B history row {i + 1} is {type(row).__name__}, expected a dict")
        keys = (x,) if x else _STEP_KEYS
        sx = next(
            (row[k] for k in keys if isinstance(row.get(k), (int, float)) and not isinstance(row.get(k), bool)), None
        )
        if sx is None and not x:
            sx = row.get("_step")
        if sx is None or sx != sx:
            continue
        rec = {
            strip_train_prefix(k): v for k, v in row.items()
            if k not in _INTERNAL and k not in keys and isinstance(v, (int, float, str)) and not isinstance(v, bool)
        }  # fmt: skip
        rec = {k: v for k, v in rec.items() if v is not None}
        st = int(sx)
        tgt = by_step.setdefault(st, {})
        tgt.update(rec)
        tgt[STEP] = st
        if "_step" in row:
            tgt["_step"] = row["_step"]
    return list(by_step.values())


def read_wandb_run(path: str, *, api=None, x: str | None = None, min_step: int | None = None, page_size: int = 1000,
                   run_id: str | None = None, on_duplicate: str = "last") -> RunSet:  # fmt: skip
    """Read one W&B run's full history (``scan_history``) into a :class:`~bayesgrpo.schema.RunSet`.

    Parameters
    ----------
    path : str
        ``"entity/project/run_id"`` (a ``wandb:`` prefix is accepted).
    api : wandb.Api-like, optional
        Object with ``.run(path)`` (tests pass a mock); default ``wandb.Api()``.
    x : str, optional
        Key used as the step (see :func:`wandb_rows`).
    min_step : int, optional
        Only W&B ``_step`` >= this (forwarded to ``scan_history``; ``watch`` fetches new rows only).
    page_size : int
        Rows per API page.
    run_id : str, optional
        Run id in the RunSet (default: the run's name, else its id).

    Raises
    ------
    LogFormatError
        wandb missing, no such run, or no reward in the history.

    Examples
    --------
    >>> from bayesgrpo.io.wandb_api import read_wandb_run
    >>> rs = read_wandb_run("my-team/grpo/abc123")          # doctest: +SKIP
    """
    from bayesgrpo.io import _map_and_finish
    from bayesgrpo.io.trl import run_config_meta

    p = path[len("wandb:") :] if path.startswith("wandb:") else path
    p = p.strip("/")
    if p.count("/") != 2:
        raise LogFormatError(f"{path}: expected a W&B run path 'entity/project/run_id'")
    a = _api(api)
    try:
        run = a.run(p)
    except Exception as e:  # noqa: BLE001 - the W&B client raises its own types (CommError, ValueError, ...)
        raise LogFormatError(f"{path}: cannot open the W&B run ({type(e).__name__}: {e})") from None
    kw = {"page_size": page_size}
    if min_step is not None:
        kw["min_step"] = int(min_step)
    recs = wandb_rows(run.scan_history(**kw), x=x)
    for i, r in enumerate(recs, start=1):
        r[SOURCE_LINE] = i
    rid = run_id or getattr(run, "name", None) or getattr(run, "id", None) or p.rsplit("/", 1)[-1]
    if not recs:
        raise LogFormatError(f"{path}: the W&B run has no history rows with a step")
    data = pd.DataFrame.from_records(recs)
    data[RUN] = str(rid)
    data["source_file"] = f"wandb:{p}"
    cfg = getattr(run, "config", None) or {}
    meta = {RUN: str(rid), **run_config_meta(cfg), "wandb_path": p}
    name = cfg.get("model_name_or_path") or cfg.get("_name_or_path") if isinstance(cfg, dict) else None
    if isinstance(name, str) and name:
        meta["model"] = name
    return _map_and_finish(data, pd.DataFrame([meta]), Path(f"wandb:{p}"), run_id=None, user_meta=None,
                           on_duplicate=on_duplicate)  # fmt: skip
