"""Hugging Face Trainer / TRL GRPOTrainer outputs: ``trainer_state.json``, console logs, notebooks, and the
run metadata of a trainer configuration (:func:`run_config_meta`: a ``TrainingArguments`` / ``GRPOConfig``
object or a W&B run's config dict).

Metric keys follow TRL (see :data:`bayesgrpo.io._common.ALIASES`): ``reward``, ``reward_std``,
``kl``, ``entropy``, ``frac_reward_zero_std``, ``completions/mean_length`` (or the legacy
``completion_length``), ``rewards/<fn>/mean`` (or the legacy ``rewards/<fn>``) and ``eval_*``.
"""

from __future__ import annotations

import ast
import contextlib
import html as _html
import json
import re
import warnings
from pathlib import Path

import pandas as pd

from bayesgrpo.errors import DataWarning
from bayesgrpo.io._common import ALIASES, default_run_id, fmt_error, line_of, num, records_frame
from bayesgrpo.io._text import read_text
from bayesgrpo.schema import REWARD, RUN, SOURCE_LINE, STEP

__all__ = ["read_trainer_state", "read_trl_console", "read_notebook", "run_config_meta", "hf_trainer_state"]

_SUMMARY_KEYS = ("train_runtime", "train_loss", "train_samples_per_second", "train_steps_per_second", "total_flos")
_STATE_META = (
    "max_steps",
    "logging_steps",
    "eval_steps",
    "save_steps",
    "global_step",
    "num_train_epochs",
    "train_batch_size",
)


def _is_eval(rec: dict) -> bool:
    keys = [k for k in rec if k not in ("epoch", "step")]
    return bool(keys) and all(k.startswith("eval_") for k in keys)


def _is_summary(rec: dict) -> bool:
    return any(k in rec for k in ("train_runtime", "train_loss")) and not any(k in rec for k in ALIASES[REWARD])


def _has_reward(keys) -> bool:
    keys = set(keys)
    return any(k in keys for k in ALIASES[REWARD]) or any(k.startswith("rewards/") for k in keys)


def _merge_eval(train: list[dict], evals: list[dict], path) -> list[dict]:
    """Put each eval record's metrics into the train record of the same step (when free)."""
    by_step = {r[STEP]: r for r in train}
    orphans = []
    for e in evals:
        t = by_step.get(e[STEP])
        metrics = {k: v for k, v in e.items() if k not in (STEP, SOURCE_LINE, "epoch")}
        if t is not None and not any(k in t for k in metrics):
            t.update(metrics)
        else:
            orphans.append(e)
    if orphans:
        warnings.warn(
            f"{path}: {len(orphans)} evaluation record(s) at step(s) {sorted({o[STEP] for o in orphans})[:8]} "
            "have no training record with a reward at the same step; their eval metrics were not kept",
            DataWarning,
            stacklevel=4,
        )
    return train


# ----------------------------------------------------------------------------- trainer_state.json
def _read_json(path: Path, what: str, expected: str):
    """``(text, parsed JSON)`` of a file, or a one-line format error saying where it breaks."""
    text = read_text(path)
    try:
        return text, json.loads(text)
    except json.JSONDecodeError as e:
        raise fmt_error(
            path, f"line {e.lineno}, column {e.colno}", f"invalid {what} ({e.msg}); expected {expected}"
        ) from None


def _record_lines(text: str, n: int) -> list[int] | None:
    """1-based line of each ``log_history`` entry when the file has the usual ``indent=2`` layout."""
    lines = text.split("\n")
    start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith('"log_history"')), None)
    if start is None:
        return None
    indent = len(lines[start]) - len(lines[start].lstrip())
    opener = " " * (indent + 2) + "{"
    closer = " " * indent + "]"
    out = []
    for i in range(start + 1, len(lines)):
        ln = lines[i].rstrip("\r")
        if ln.startswith(closer) and not ln.startswith(closer + " "):
            break
        if ln == opener:
            out.append(i + 1)
    return out if len(out) == n else None


_CKPT = re.compile(r"checkpoint-(\d+)$")


def hf_trainer_state(folder) -> Path | None:
    """The ``trainer_state.json`` of a Hugging Face / TRL output folder that reaches furthest: the newest
    ``checkpoint-*/trainer_state.json`` or the folder's own (written at the end of training), by
    ``global_step`` then modification time; None when the folder holds neither (one rule for
    ``read_runs`` and ``bayesgrpo watch``)."""
    p = Path(folder)
    if not p.is_dir():
        return None
    cands = []
    for c in p.glob("checkpoint-*/trainer_state.json"):
        m = _CKPT.search(c.parent.name)
        if m and c.is_file():
            cands.append((int(m.group(1)), c.stat().st_mtime, c))
    top = p / "trainer_state.json"
    if top.is_file():
        cands.append((_global_step(top), top.stat().st_mtime, top))
    return max(cands, key=lambda t: (t[0], t[1]))[2] if cands else None


def _global_step(p: Path) -> int:
    try:
        return int(json.loads(p.read_text(encoding="utf-8")).get("global_step") or 0)
    except (ValueError, OSError, TypeError, AttributeError):
        return 0


def read_trainer_state(path: Path):
    """Read ``log_history`` of a HF ``trainer_state.json`` (GRPO runs only).

    Training entries become rows (``step`` from the entry); evaluation entries (``eval_*`` keys,
    same ``step``) are merged into the training row of that step as ``eval/<name>``; the final
    summary entry (``train_runtime``, ...) is skipped. ``max_steps``, ``logging_steps``,
    ``eval_steps``, ``save_steps``, ``global_step``, ``num_train_epochs``, ``train_batch_size``
    (per device) go to the metadata, and ``trl_version`` when TRL's model card lies beside the file
    (it says what ``reward_std`` measures, :func:`bayesgrpo.io._common.trl_reward_std_definition`).
    Bare ``NaN``/``Infinity`` tokens are accepted.
    """
    path = Path(path)
    text, obj = _read_json(path, "JSON", "a complete Hugging Face trainer_state.json (truncated file?)")
    if not isinstance(obj, dict) or not isinstance(obj.get("log_history"), list):
        raise fmt_error(path, "line 1", 'no "log_history" list; expected a Hugging Face trainer_state.json')
    lh = obj["log_history"]
    lines = _record_lines(text, len(lh))
    train: list[dict] = []
    evals: list[dict] = []
    for k, rec in enumerate(lh):
        where = f"line {lines[k]} (log_history record {k + 1})" if lines else f"log_history record {k + 1}"
        if not isinstance(rec, dict):
            raise fmt_error(path, where, f"entry is {type(rec).__name__}, expected a JSON object of metrics")
        if "step" not in rec:
            raise fmt_error(path, where, 'entry has no "step"; expected {..., "step": <int>}')
        step = num(rec["step"])
        if not isinstance(step, float) or step != step:
            raise fmt_error(path, where, f"step {rec['step']!r} is not a number")
        if _is_summary(rec):
            continue
        r = {k2: v for k2, v in rec.items() if k2 != "step"}
        r[STEP] = int(step)
        r[SOURCE_LINE] = lines[k] if lines else k + 1
        (evals if _is_eval(rec) else train).append(r)
    if not any(_has_reward(r) for r in train):
        keys = sorted({k for r in train for k in r if k not in (STEP, SOURCE_LINE)})
        raise fmt_error(
            path,
            None,
            f"no reward in any of the {len(train)} training log entries (keys: {', '.join(keys[:8]) or 'none'}); "
            "not a GRPO run (SFT or other Trainer?) - expected TRL GRPOTrainer logs with a 'reward' key",
        )
    train = _merge_eval(train, evals, path)
    rid = default_run_id(path)
    data = records_frame(train, path)
    data[RUN] = rid
    meta: dict[str, object] = {RUN: rid}
    for key in _STATE_META:
        if key in obj and obj[key] is not None:
            meta[key] = obj[key]
    version = _model_card_trl_version(path)
    if version is not None:
        meta["trl_version"] = version
    return data, pd.DataFrame([meta])


_CARD_TRL = re.compile(r"^- TRL: (\S+)\s*$", re.M)


def _model_card_trl_version(path: Path) -> str | None:
    """The TRL version in the model card TRL writes at every checkpoint save (``<output_dir>/README.md``,
    line ``- TRL: x.y.z``), beside ``trainer_state.json`` or one folder up from ``checkpoint-N/``."""
    folders = [path.parent]
    if re.fullmatch(r"checkpoint-\d+", path.parent.name):
        folders.append(path.parent.parent)
    for d in folders:
        card = d / "README.md"
        if card.is_file():
            m = _CARD_TRL.search(read_text(card)[:100_000])
            if m:
                return m.group(1)
    return None


# ----------------------------------------------------------------------------- console logs
_DICT_RE = re.compile(
    r"\{'(?:loss|train_runtime|train_loss|eval_[A-Za-z_]+|reward|grad_norm|learning_rate)'\s*:[^{}\n\r]*\}"
)
_BARE_NONFINITE = re.compile(r"(:\s*)(-?(?:nan|inf))(?=\s*[,}])")
_COUNTER_RE = re.compile(r"(?<![\d/])(\d+)/(\d+) \[")
_TOTAL_RE = re.compile(r"Total optimization steps = ([\d,]+)")


def _parse_dict(s: str, path, line: int) -> dict:
    try:
        d = ast.literal_eval(_BARE_NONFINITE.sub(r"\1'\2'", s))
    except (ValueError, SyntaxError) as e:
        raise fmt_error(
            path,
            f"line {line}",
            f"cannot parse the printed metrics dict ({type(e).__name__}); expected a Python dict repr like {{'loss': 0.1, 'reward': 0.5, ...}}",
        ) from None
    if not isinstance(d, dict) or not all(isinstance(k, str) for k in d):
        raise fmt_error(path, f"line {line}", "expected a dict of metric name -> value")
    return d


def read_trl_console(path: Path, *, logging_steps: int | None = None):
    """Read the metric dicts the HF Trainer prints (``{'loss': ..., 'reward': ...}``).

    Printed dicts carry no step. The step of the i-th training dict (1-based) is reconstructed,
    in this order of preference:

    1. ``logging_steps=k`` given -> ``i * k`` (the Trainer logs every k optimizer steps);
    2. the training progress-bar counter printed just before each dict, when these counters are
       exactly ``k, 2k, 3k, ...`` (unbuffered output);
    3. a completed run (final ``{'train_runtime': ...}`` dict) with a known total number of steps
       N (``Total optimization steps = N`` or the bar's ``/N``) and n training dicts -> ``k = N // n``
       (the Trainer logs ``floor(N / k)`` times);
    4. otherwise ``k = 1`` with a :class:`~bayesgrpo.errors.DataWarning` (assumption).

    The chosen ``logging_steps`` and how it was found (``step_source``) go to the metadata. A new
    run starts after each final summary dict (several trainings in one log -> ``<name>#2`` ...).
    """
    path = Path(path)
    text = read_text(path)
    totals = [(m.start(), int(m.group(1).replace(",", ""))) for m in _TOTAL_RE.finditer(text)]
    counters = [(m.start(), int(m.group(1)), int(m.group(2))) for m in _COUNTER_RE.finditer(text)]
    segments: list[dict] = []
    cur: dict = {"train": [], "eval": [], "summary": None}
    for m in _DICT_RE.finditer(text):
        line = line_of(text, m.start())
        d = _parse_dict(m.group(0), path, line)
        if "train_runtime" in d or ("train_loss" in d and not _has_reward(d)):
            cur["summary"] = (m.start(), d)
            segments.append(cur)
            cur = {"train": [], "eval": [], "summary": None}
            continue
        d[SOURCE_LINE] = line
        d["_pos"] = m.start()
        (cur["eval"] if _is_eval(d) else cur["train"]).append(d)
    if cur["train"] or cur["eval"]:
        segments.append(cur)
    segments = [s for s in segments if s["train"]]
    if not segments:
        raise fmt_error(path, None, "no training metrics dict found; expected printed dicts like "
                        "{'loss': ..., 'reward': ...} from the Hugging Face Trainer")  # fmt: skip
    base = default_run_id(path)
    frames, metas = [], []
    for si, seg in enumerate(segments):
        rid = base if len(segments) == 1 else f"{base}#{si + 1}"
        tr = seg["train"]
        first_pos = tr[0]["_pos"]
        n_total = next((n for pos, n in reversed(totals) if pos < first_pos), None)
        before = [c for c in counters if c[0] < first_pos]
        bar_total = n_total or (before[-1][2] if before else None)
        k: int
        if logging_steps is not None:
            k, how = int(logging_steps), "logging_steps option"
        else:
            cs: list[int | None] = []
            for d in tr:
                prev = [c for c in counters if c[0] < d["_pos"] and (bar_total is None or c[2] == bar_total)]
                cs.append(prev[-1][1] if prev else None)
            c0 = cs[0]
            if c0 is not None and c0 > 0 and all(c == c0 * (i + 1) for i, c in enumerate(cs)):
                k, how = c0, "progress-bar counter"
            elif (
                seg["summary"] is not None
                and bar_total
                and bar_total >= len(tr)
                and bar_total // (bar_total // len(tr)) == len(tr)
            ):
                k, how = bar_total // len(tr), "total steps / number of logs"
            else:
                k, how = 1, "assumed (no step information)"
                warnings.warn(
                    f"{path}: the printed metric dicts carry no step and it cannot be reconstructed; "
                    f"assumed logging_steps=1 (step = order of the dict). Pass logging_steps=... if wrong.",
                    DataWarning,
                    stacklevel=3,
                )
        for i, d in enumerate(tr):
            d[STEP] = (i + 1) * k
        evs: list[dict] = []
        for e in seg["eval"]:
            earlier = [d for d in tr if d["_pos"] < e["_pos"]]
            e[STEP] = earlier[-1][STEP] if earlier else 0
            evs.append(e)
        rows = _merge_eval(tr, evs, path)
        df = records_frame([{kk: v for kk, v in r.items() if kk != "_pos"} for r in rows], path)
        df[RUN] = rid
        frames.append(df)
        meta = {RUN: rid, "logging_steps": k, "step_source": how, "completed": seg["summary"] is not None}
        if n_total or bar_total:
            meta["max_steps"] = n_total or bar_total
        metas.append(meta)
    return pd.concat(frames, ignore_index=True), pd.DataFrame(metas)


# ----------------------------------------------------------------------------- notebooks
_TABLE_RE = re.compile(r"<table[^>]*>(.*?)</table>", re.S | re.I)
_TR_RE = re.compile(r"<tr[^>]*>(.*?)</tr>", re.S | re.I)
_CELL_RE = re.compile(r"<t([dh])[^>]*>(.*?)</t[dh]>", re.S | re.I)
_PROGRESS_RE = re.compile(r"<progress\s+value='(\d+)'\s+max='(\d+)'")
_TAG_RE = re.compile(r"<[^>]+>")
_NB_COLUMNS = {"Training Loss": "loss", "Validation Loss": "eval_loss"}


def _cell_text(s: str) -> str:
    return _html.unescape(_TAG_RE.sub("", s)).strip()


def read_notebook(path: Path):
    """Read the Trainer progress table(s) from the outputs of an executed notebook.

    Header ``Step | Training Loss | reward | ... | rewards / <fn> / mean | ...``: ``' / '`` becomes
    ``'/'`` (so TRL keys map as usual), ``Training Loss`` -> ``loss``, ``Validation Loss`` ->
    ``eval/loss``, ``No Log`` -> NaN. One run per training table (``<name>#cell<i>`` when a notebook
    has several). ``source_line`` is the table row (1-based); the cell index and the progress bar
    (``progress_value``/``progress_max``; the table lags the bar in interrupted runs) go to the metadata.
    """
    path = Path(path)
    _, nb = _read_json(path, "notebook JSON", "an .ipynb file")
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise fmt_error(path, None, 'no "cells" list; expected a Jupyter notebook (nbformat 4)')
    tables = []
    for ci, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []) or []:
            h = (out.get("data") or {}).get("text/html")
            if h is None:
                continue
            h = "".join(h) if isinstance(h, list) else str(h)
            prog = _PROGRESS_RE.search(h)
            for tm in _TABLE_RE.finditer(h):
                rows = _TR_RE.findall(tm.group(1))
                if not rows:
                    continue
                header = [_cell_text(c) for _, c in _CELL_RE.findall(rows[0])]
                if not header or header[0] != "Step" or "Training Loss" not in header:
                    continue
                tables.append((ci, header, rows[1:], prog))
    if not tables:
        raise fmt_error(path, None, "no training progress table (header 'Step | Training Loss | ...') in any cell "
                        "output; expected an executed Trainer notebook")  # fmt: skip
    base = default_run_id(path)
    frames, metas = [], []
    for ci, header, rows, prog in tables:
        rid = base if len(tables) == 1 else f"{base}#cell{ci}"
        cols = [_NB_COLUMNS.get(h, h.replace(" / ", "/")) for h in header]
        recs = []
        for ri, row in enumerate(rows, start=1):
            cells = [_cell_text(c) for _, c in _CELL_RE.findall(row)]
            if len(cells) != len(cols):
                raise fmt_error(
                    path,
                    f"cell {ci}, table row {ri}",
                    f"{len(cells)} values, expected {len(cols)} (one per header column)",
                )
            rec: dict[str, object] = dict(zip(cols, cells, strict=True))
            st = num(rec.pop("Step"))
            if not isinstance(st, float) or st != st:
                raise fmt_error(path, f"cell {ci}, table row {ri}", f"Step {cells[0]!r} is not a number")
            rec[STEP] = int(st)
            rec[SOURCE_LINE] = ri
            recs.append(rec)
        if not recs:
            raise fmt_error(
                path, f"cell {ci}", "the training progress table has no rows; expected at least one logged step"
            )
        df = records_frame(recs, path)
        df[RUN] = rid
        frames.append(df)
        meta = {RUN: rid, "notebook_cell": ci}
        if prog:
            meta["progress_value"] = int(prog.group(1))
            meta["progress_max"] = int(prog.group(2))
            meta["max_steps"] = int(prog.group(2))
        metas.append(meta)
    return pd.concat(frames, ignore_index=True), pd.DataFrame(metas)


# ----------------------------------------------------------------------------- run configuration
def _get(cfg, name, default=None):
    v = cfg.get(name, default) if isinstance(cfg, dict) else getattr(cfg, name, default)
    return default if v is None else v


def run_config_meta(config, *, world_size: int = 1, max_steps: int | None = None) -> dict:
    """Run metadata (schema :data:`~bayesgrpo.schema.META_FIELDS`) from a trainer configuration.

    Works on a ``transformers.TrainingArguments`` / ``trl.GRPOConfig`` object and on the dict of a
    W&B run's ``config``. The refresh interval (optimizer steps between two generations, the lag
    of physics.md) is ``steps_per_generation * num_iterations / gradient_accumulation_steps``
    (TRL >= 0.18; older TRL generates every optimizer step and reuses it ``num_iterations`` times,
    which is the same formula with ``steps_per_generation = gradient_accumulation_steps``).

    Parameters
    ----------
    config : TrainingArguments, GRPOConfig or dict
    world_size : int
        Number of data-parallel processes (the global batch is per-device batch x GAS x world).
    max_steps : int, optional
        Overrides ``config.max_steps`` (the trainer's ``state.max_steps`` is the resolved one).

    Returns
    -------
    dict
        Any of ``max_steps, learning_rate, beta1, group_size, batch_size, refresh_interval,
        logging_steps, prompts_per_step, scale_rewards`` that the configuration holds, and
        ``trl_version`` for a TRL configuration (with ``scale_rewards`` it says what TRL's ``reward_std``
        measures: :func:`bayesgrpo.io._common.trl_reward_std_definition`).

    Examples
    --------
    >>> m = run_config_meta({"max_steps": 500, "learning_rate": 1e-6, "adam_beta1": 0.9,
    ...                      "num_generations": 8, "per_device_train_batch_size": 8,
    ...                      "gradient_accumulation_steps": 4, "steps_per_generation": 8})
    >>> m["group_size"], m["batch_size"], m["refresh_interval"]
    (8, 32, 2)
    """
    out: dict = {}
    ms = max_steps if max_steps is not None else _get(config, "max_steps")
    if ms is not None and float(ms) > 0:
        out["max_steps"] = int(ms)
    for src, dst in (("learning_rate", "learning_rate"), ("adam_beta1", "beta1")):
        v = _get(config, src)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[dst] = float(v)
    g = _get(config, "num_generations")
    if isinstance(g, (int, float)) and g > 0:
        out["group_size"] = int(g)
    bs = _get(config, "per_device_train_batch_size")
    gas = _get(config, "gradient_accumulation_steps", 1) or 1
    if isinstance(bs, (int, float)) and bs > 0:
        out["batch_size"] = int(bs) * int(gas) * int(world_size or 1)
        if "group_size" in out and out["batch_size"] % out["group_size"] == 0:
            out["prompts_per_step"] = out["batch_size"] // out["group_size"]
    spg = _get(config, "steps_per_generation") or gas
    nit = _get(config, "num_iterations", 1) or 1
    try:
        k = float(spg) * float(nit) / float(gas)
    except (TypeError, ValueError, ZeroDivisionError):
        k = 1.0
    out["refresh_interval"] = max(1, int(round(k)))
    ls = _get(config, "logging_steps")
    if isinstance(ls, (int, float)) and ls >= 1:
        out["logging_steps"] = int(ls)
    sr = _get(config, "scale_rewards")  # with the TRL version: what TRL's reward_std measures
    if sr is not None:
        out["scale_rewards"] = {True: "group", False: "none"}.get(sr, str(sr)) if isinstance(sr, bool) else str(sr)
    if type(config).__module__.startswith("trl."):
        from importlib.metadata import PackageNotFoundError, version

        with contextlib.suppress(PackageNotFoundError):
            out["trl_version"] = version("trl")
    return out
