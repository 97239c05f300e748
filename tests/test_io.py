"""Importers (bayesgrpo.io) against the real log fixtures in shared/data/log-formats.

Expected numbers were read off the raw files (grep / a JSON viewer / the TensorBoard event data),
not produced by the importers.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from shared_data import shared_data

from bayesgrpo.errors import DataValidationError, DataWarning, LogFormatError
from bayesgrpo.io import FORMATS, detect_format, read_many, read_runs

SHARED = shared_data()
needs_data = pytest.mark.skipif(SHARED is None, reason="shared/data (real log fixtures) not available")
LF = SHARED / "log-formats" if SHARED else Path("/nonexistent")


def fx(folder: str, key: str) -> Path:
    """The fixture in ``folder`` whose name contains ``key`` (unique)."""
    hits = [p for p in (LF / folder).iterdir() if key in p.name]
    assert len(hits) == 1, (folder, key, hits)
    return hits[0]


def quiet_read(*args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        return read_runs(*args, **kw)


def at(rs, step, col="reward", run=None):
    d = rs.data if run is None else rs.run(run)
    row = d.loc[d["step"] == step]
    assert len(row) == 1, (step, len(row))
    return row[col].iloc[0]


# ------------------------------------------------------------------------------------ per file
# (folder, key in name, format, runs, points of first run, first step, last step, {step: reward})
CASES = [
    (
        "trl_trainer_state",
        "IMJONEZZ",
        "trainer_state",
        1,
        250,
        1,
        250,
        {2: -0.046833336353302, 250: 1.3333333730697632},
    ),
    ("trl_trainer_state", "abdo-ashraf", "trainer_state", 1, 25, 10, 250, {10: 0.4269749991595745, 250: 1.5109375}),
    ("trl_trainer_state", "srinath", "trainer_state", 1, 50, 10, 500, {10: -9.6625, 500: 0.425}),
    (
        "trl_trainer_state",
        "gauri0508",
        "trainer_state",
        1,
        100,
        1,
        100,
        {67: 0.3933500051498413, 100: 0.19474999606609344},
    ),
    ("trl_console", "rho1.00", "trl_console", 1, 40, 5, 200, {5: 0.9, 10: 0.75, 200: 0.0}),
    ("trl_console", "gate1_adq", "trl_console", 1, 200, 1, 200, {1: 0.125, 100: 0.125, 200: 0.875}),
    ("trl_console", "Ning-Guo", "trl_console", 1, 46, 20, 920, {20: 0.7255576837807893, 920: 0.7748442128300667}),
    ("unsloth_notebook", "Leen020", "unsloth_notebook", 1, 12, 1, 12, {2: -0.5, 3: 0.875, 12: -1.0}),
    ("unsloth_notebook", "AbdullahFageeh", "unsloth_notebook", 1, 46, 1, 46, {1: -7.5, 46: -7.5}),
    ("verl_console", "yuzhaouoe", "verl_console", 1, 10, 1, 10, {1: 0.5721990466117859, 10: 0.8335199356079102}),
    ("verl_console", "Bihan", "verl_console", 1, 109, 101, 209, {101: 0.941, 110: 0.934}),
    ("wandb_csv", "Hetero-RL", "wandb_csv", 3, 1280, 1, 1280, {640: 0.7265625}),
    ("wandb_csv", "iodt-2", "wandb_csv", 1, 676, 10, 6760, {10: 0.06763294078409672, 2990: 0.7991666734218598}),
    ("tensorboard", "one-scalar-step", "tensorboard", 1, 1, 10, 10, {10: -0.13515624403953552}),
    ("tensorboard", "part1", "tensorboard", 1, 325, 2, 650, {2: 0.28125, 10: 0.3359375, 650: 1.5026042461395264}),
    ("tensorboard", "part2", "tensorboard", 1, 27, 602, 654, {602: 1.515625, 650: 1.5182292461395264}),
    ("tensorboard", "part3", "tensorboard", 1, 280, 652, 1210, {652: 1.4140625, 1210: 1.5546875}),
    ("from_scratch", "metrics.jsonl", "metrics_jsonl", 1, 30, 1, 30, {5: 0.8568747993989829}),
    ("from_scratch", "AxiomForgeAI__metrics.csv", "metrics_csv", 1, 30, 1, 30, {5: 0.856875}),
    ("from_scratch", "KardeniaPoyu", "metrics_csv", 1, 122, 0, 121, {0: 0.0, 121: 0.0}),
    ("from_scratch", "minimind", "minimind_log", 1, 500, 1, 500, {1: 0.3846, 250: 0.3524}),
]
REFUSED = [
    ("trl_trainer_state", "edge_sft", "trainer_state", "no reward"),
    ("tensorboard", "text-only", "tensorboard", "no scalar"),
]


@needs_data
def test_every_fixture_is_covered():
    covered = {fx(f, k) for f, k, *_ in CASES} | {fx(f, k) for f, k, *_ in REFUSED}
    all_files = {p for p in LF.rglob("*") if p.is_file() and p.name != "README.md"}
    assert all_files == covered


@needs_data
@pytest.mark.parametrize("case", CASES, ids=[c[1] for c in CASES])
def test_fixture_numbers(case):
    folder, key, fmt, n_runs, n_pts, first, last, rewards = case
    path = fx(folder, key)
    assert detect_format(path) == fmt
    rs = quiet_read(path)
    assert len(rs) == n_runs
    run = rs.run_ids[0]
    d = rs.run(run)
    assert len(d) == n_pts
    assert (d["step"].iloc[0], d["step"].iloc[-1]) == (first, last)
    for step, r in rewards.items():
        assert at(rs, step, run=run) == pytest.approx(r, rel=1e-6, abs=1e-9)
    assert (d["source_file"] == str(path)).all()
    assert np.isfinite(d["reward"]).all()


@needs_data
@pytest.mark.parametrize("case", REFUSED, ids=[c[1] for c in REFUSED])
def test_refusals_are_one_line(case):
    folder, key, fmt, text = case
    path = fx(folder, key)
    assert detect_format(path) == fmt
    with pytest.raises(LogFormatError) as ei:
        read_runs(path)
    msg = str(ei.value)
    assert "\n" not in msg and path.name in msg and text in msg


@needs_data
def test_inputs_unchanged_after_reading():
    files = sorted(p for p in LF.rglob("*") if p.is_file() and p.name != "README.md")
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    mtimes = {p: p.stat().st_mtime_ns for p in files}
    for p in files:
        with contextlib.suppress(LogFormatError):
            quiet_read(p)
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in files} == before
    assert {p: p.stat().st_mtime_ns for p in files} == mtimes


# ------------------------------------------------------------------------------------ details
@needs_data
def test_trainer_state_mapping_and_meta():
    rs = read_runs(fx("trl_trainer_state", "abdo-ashraf"))
    assert at(rs, 10, "reward_fn/correctness_reward_func") == 0.225
    assert at(rs, 10, "completion_length") == 542.6875
    m = rs.meta.iloc[0]
    assert (m["max_steps"], m["logging_steps"], m["train_batch_size"]) == (250, 10, 8)
    rs = read_runs(fx("trl_trainer_state", "srinath"))
    assert "kl" not in rs.metrics  # beta = 0: no kl logged
    assert at(rs, 10, "entropy") == pytest.approx(1.4185649514198304)
    assert at(rs, 500, "frac_reward_zero_std") == 0.7
    assert at(rs, 10, "completion_length") == 124.2125  # completions/mean_length
    assert at(rs, 10, "reward_fn/gameplay_scores") == -8.7875
    assert "rewards/gameplay_scores/std" in rs.metrics  # unmapped metric kept
    rs = read_runs(fx("trl_trainer_state", "gauri0508"))
    assert math.isnan(at(rs, 67, "grad_norm"))  # bare NaN token
    assert at(rs, 100, "kl") == pytest.approx(0.000942867947742343)
    assert at(rs, 67, "source_line") == 2322  # line of the "{" opening the step-67 entry
    # IMJONEZZ: every step logged, legacy keys
    rs = read_runs(fx("trl_trainer_state", "IMJONEZZ"))
    assert at(rs, 1, "completion_length") == 200.0


@needs_data
def test_trl_console_step_reconstruction():
    rs = quiet_read(fx("trl_console", "rho1.00"))
    m = rs.meta.iloc[0]
    assert m["logging_steps"] == 5 and m["step_source"] == "total steps / number of logs"
    assert at(rs, 5, "entropy") == pytest.approx(rs.data["entropy"].iloc[0])
    rs = quiet_read(fx("trl_console", "Ning-Guo"))
    assert rs.meta.iloc[0]["logging_steps"] == 20 and rs.meta.iloc[0]["step_source"] == "progress-bar counter"
    assert rs.meta.iloc[0]["completed"] == False  # noqa: E712 - killed by SIGHUP, no summary
    rs = quiet_read(fx("trl_console", "gate1_adq"))  # transformers 5: string values
    assert rs.data["reward"].dtype == float and at(rs, 1, "grad_norm") == 0.2221
    assert at(rs, 100, "kl") == 0.08001
    rs = quiet_read(fx("trl_console", "rho1.00"), logging_steps=1)
    assert list(rs.data["step"].iloc[:3]) == [1, 2, 3]


@needs_data
def test_notebook_and_verl_details():
    rs = read_runs(fx("unsloth_notebook", "AbdullahFageeh"))
    m = rs.meta.iloc[0]
    assert (m["progress_value"], m["progress_max"]) == (48, 100)
    assert at(rs, 1, "kl") == 0.1511 and at(rs, 1, "completion_length") == 1846.0
    assert "reward_fn/check_answer" in rs.metrics
    rs = read_runs(fx("unsloth_notebook", "Leen020"))
    assert at(rs, 3, "reward_fn/check_numbers") == 0.375
    rs = read_runs(fx("verl_console", "Bihan"))
    assert at(rs, 110, "eval/openai/gsm8k/reward/mean@1") == 0.892
    assert at(rs, 101, "entropy") == 0.035  # actor/entropy_loss (old verl)
    assert at(rs, 101, "completion_length") == 128.648
    assert at(rs, 101, "source_line") == 377
    assert rs.meta.iloc[0]["reward_key"] == "critic/score/mean"
    rs = read_runs(fx("verl_console", "yuzhaouoe"))
    assert at(rs, 1, "entropy") == pytest.approx(1.182466983795166)
    assert at(rs, 1, "critic/rewards/mean") == pytest.approx(0.5721990466117859)  # kept


@needs_data
def test_wandb_runs_and_x_axis():
    path = fx("wandb_csv", "Hetero-RL")
    rs = read_runs(path)
    assert rs.run_ids == ["[paper]GRPO_online", "[paper]GEPO_online", "[paper]GSPO_online"]
    assert [len(rs.run(r)) for r in rs.run_ids] == [1280, 1295, 1295]
    assert at(rs, 640, run="[paper]GEPO_online") == 0.734375
    assert at(rs, 640, run="[paper]GSPO_online") == 0.70703125
    assert at(rs, 640, "_step", run="[paper]GRPO_online") == 21579
    assert not any("__MIN" in c or "__MAX" in c for c in rs.metrics)
    assert at(rs, 640, "source_line", run="[paper]GRPO_online") == 641
    rs2 = read_runs(path, x="_step")
    assert rs2.run("[paper]GRPO_online")["step"].iloc[0] == 179


@needs_data
def test_from_scratch_details():
    rs = quiet_read(fx("from_scratch", "AxiomForgeAI__metrics.csv"))
    assert at(rs, 5, "eval/combined") == 0.9192 and math.isnan(at(rs, 6, "eval/combined"))
    assert at(rs, 5, "training_phase") == "GROUNDED_ONLY"
    with pytest.warns(DataWarning, match="missing"):
        rs = read_runs(fx("from_scratch", "metrics.jsonl"))  # record 0: eval-only baseline
    assert at(rs, 5, "loss") == pytest.approx(8.118284122815567e-05)
    assert math.isnan(at(rs, 1, "chain_arith_score"))  # null
    rs = read_runs(fx("from_scratch", "KardeniaPoyu"))
    assert (rs.data["reward"] == 0).all() and rs.meta.iloc[0]["reward_key"] == "success_rate"
    rs = read_runs(fx("from_scratch", "minimind"))
    assert at(rs, 250, "kl") == -0.0004 and at(rs, 250, "completion_length") == 168


@needs_data
def test_tensorboard_resumed_parts_keep_later():
    parts = [fx("tensorboard", k) for k in ("part3", "part1", "part2")]  # any order: by wall time
    with pytest.warns(DataWarning, match=r"602"):
        rs = read_runs(parts, run_id="mini-r1")
    d = rs.run("mini-r1")
    assert len(d) == 325 + 27 + 280 - 25 - 2
    assert (d["step"].iloc[0], d["step"].iloc[-1]) == (2, 1210)
    assert at(rs, 650) == pytest.approx(1.5182292461395264)  # part2, not part1's 1.5026
    assert at(rs, 652) == pytest.approx(1.4140625)  # part3, not part2's 1.4948
    assert at(rs, 650, "source_file") == str(parts[2])
    assert at(rs, 10, "reward_fn/equation_reward_func") >= 0
    with pytest.raises(DataValidationError, match="more than once"):
        read_runs(parts, on_duplicate="error")


@needs_data
def test_tensorboard_folder_is_one_run(tmp_path):
    # three (re)starts of one run in the HF Trainer's layout: runs/<Mon DD_HH-MM-SS>_<host>/ per start (named
    # from the event files' own timestamps); other sub-folders are separate runs (test_cli_edges)
    run_dir = tmp_path / "qwen-2.5-3b-r1-countdown"
    starts = {"part1": "Feb18_08-07-31_fdse", "part2": "Feb19_09-18-27_fdse", "part3": "Feb19_10-10-25_fdse"}
    for k, name in starts.items():  # symlinks: the fixtures are not copied
        (run_dir / "runs" / name).mkdir(parents=True)
        (run_dir / "runs" / name / fx("tensorboard", k).name).symlink_to(fx("tensorboard", k))
    assert detect_format(run_dir) == "tensorboard"
    with pytest.warns(DataWarning, match="more than once"):
        rs = read_runs(run_dir)
    assert rs.run_ids == ["qwen-2.5-3b-r1-countdown"] and len(rs.data) == 605


def test_tensorboard_without_tbparse(monkeypatch):
    monkeypatch.setitem(sys.modules, "tbparse", None)
    path = cf("tensorboard", "1739956707")
    with pytest.raises(LogFormatError) as ei:
        read_runs(path)
    msg = str(ei.value)
    assert msg.startswith(f"{path}: ") and "needs the optional package tbparse" in msg
    assert msg.endswith("install it with: pip install bayesgrpo[tensorboard]") and "\n" not in msg


@needs_data
def test_grpo_public_long_csv_with_meta():
    d = SHARED / "grpo-public"
    assert detect_format(d / "runs.csv") == "long"
    rs = read_runs(d / "runs.csv", meta=d / "meta.csv")
    assert len(rs) == 100 and len(rs.data) == 13671
    first = "math-phi4__Qwen2_5__3B__GRPO__9662dc4"
    assert at(rs, 1, run=first) == 0.033625 and rs.meta.loc[first, "group_size"] == 8
    assert at(rs, 1, "source_line", run=first) == 2


def test_read_many_unique_ids_and_meta():
    a = cf("trl_trainer_state", "old-trl_every-10")
    with pytest.warns(DataWarning, match=r"already used; renamed to '.*#2'"):
        rs = read_many(
            [a, a, cf("wandb_csv", "iodt-2")],
            meta=pd.DataFrame({"run_id": ["fragrant-sea-49"], "model": ["Qwen/Qwen2-0.5B-Instruct"]}),
        )
    stem = a.name[: -len(".json")]
    assert rs.run_ids == [stem, stem + "#2", "fragrant-sea-49"]
    assert rs.meta.loc["fragrant-sea-49", "model"] == "Qwen/Qwen2-0.5B-Instruct"
    assert rs.meta.loc[stem + "#2", "max_steps"] == 250 and pd.isna(rs.meta.loc[stem, "model"])
    assert len(rs.data) == 10 + 10 + 30
    assert at(rs, 300, run="fragrant-sea-49") == 0.770166665315628


def test_run_id_and_meta_override():
    rs = read_runs(
        cf("trl_trainer_state", "IMJONEZZ"),
        run_id="llama8b",
        meta={"model": "meta-llama/Llama-3.1-8B-Instruct", "group_size": 6},
    )
    assert rs.run_ids == ["llama8b"]
    assert rs.meta.loc["llama8b", "group_size"] == 6 and rs.meta.loc["llama8b", "max_steps"] == 250
    assert rs.meta.loc["llama8b", "model"] == "meta-llama/Llama-3.1-8B-Instruct"
    rs = read_runs(cf("trl_trainer_state", "IMJONEZZ"), meta={"max_steps": 20})  # user metadata wins over the file's
    assert rs.meta.iloc[0]["max_steps"] == 20 and rs.meta.iloc[0]["logging_steps"] == 1
    rs = read_runs(cf("wandb_csv", "Hetero-RL"), run_id="gepo")
    assert rs.run_ids == ["gepo/[paper]GRPO_online", "gepo/[paper]GEPO_online", "gepo/[paper]GSPO_online"]


def test_formats_tuple():
    assert len(FORMATS) == len(set(FORMATS)) and "trainer_state" in FORMATS and "tensorboard" in FORMATS


# ------------------------------------------------------------------------------------ committed fixtures
# tests/data/formats: trimmed copies of the shared files (written by tests/data/make_fixtures.py and
# committed), so that every importer and quirk is tested on a clone without ../shared. Expected
# numbers were read off the fixture files themselves (json / csv / regex / the TFRecord events).
DATA = Path(__file__).resolve().parent / "data"
CF = DATA / "formats"
SMALL = DATA / "grpo_small"


def cf(folder: str, key: str) -> Path:
    """The committed fixture under ``tests/data/formats/<folder>`` whose path contains ``key`` (unique)."""
    hits = [p for p in (CF / folder).rglob("*") if p.is_file() and key in str(p.relative_to(CF / folder))]
    assert len(hits) == 1, (folder, key, hits)
    return hits[0]


# (folder, key in path, format, runs, points of first run, first step, last step, {step: reward})
COMMITTED = [
    ("trl_trainer_state", "IMJONEZZ", "trainer_state", 1, 20, 1, 20, {2: -0.046833336353302, 20: 0.011333334259688854}),
    (
        "trl_trainer_state",
        "old-trl_every-10",
        "trainer_state",
        1,
        10,
        10,
        100,
        {10: 0.4269749991595745, 100: 1.1962499976158143},
    ),
    ("trl_trainer_state", "srinath", "trainer_state", 1, 8, 10, 80, {10: -9.6625, 80: 4.6875}),
    (
        "trl_trainer_state",
        "gauri0508",
        "trainer_state",
        1,
        8,
        63,
        70,
        {63: 0.14309999346733093, 67: 0.3933500051498413, 70: 0.11885000020265579},
    ),
    ("trl_trainer_state", "synthetic_grpo-eval", "trainer_state", 1, 4, 10, 40, {10: 0.4269749991595745}),
    ("trl_console", "rho1.00", "trl_console", 1, 40, 5, 200, {5: 0.9, 10: 0.75, 200: 0.0}),
    ("trl_console", "gate1_adq", "trl_console", 1, 60, 1, 60, {1: 0.125, 3: 0.625, 60: 0.375}),
    ("trl_console", "Ning-Guo", "trl_console", 1, 9, 20, 180, {20: 0.7255576837807893, 180: 0.7697511442005635}),
    ("unsloth_notebook", "Leen020", "unsloth_notebook", 1, 12, 1, 12, {2: -0.5, 3: 0.875, 12: -1.0}),
    ("unsloth_notebook", "AbdullahFageeh", "unsloth_notebook", 1, 12, 1, 12, {1: -7.5, 2: -3.5, 5: 13.0, 12: -5.5}),
    ("verl_console", "Bihan", "verl_console", 1, 10, 101, 110, {101: 0.941, 110: 0.934}),
    ("verl_console", "grpo_ansi", "verl_console", 1, 2, 1, 2, {1: 0.5721990466117859, 2: 0.724267303943634}),
    ("verl_console", "synthetic_numpy2", "verl_console", 1, 2, 1, 2, {1: 0.5721990466117859, 2: 0.724267303943634}),
    ("verl_jsonl", "synthetic_file-logger", "verl_jsonl", 1, 3, 1, 3, {1: 0.5721990466117859, 3: 0.771440327167511}),
    ("wandb_csv", "Hetero-RL", "wandb_csv", 3, 30, 1, 1280, {3: 0.4453125, 1280: 0.31640625}),
    (
        "wandb_csv",
        "iodt-2",
        "wandb_csv",
        1,
        30,
        10,
        300,
        {10: 0.06763294078409672, 20: 0.6129404842853546, 300: 0.770166665315628},
    ),
    ("tensorboard", "1739394346", "tensorboard", 1, 1, 10, 10, {10: -0.13515624403953552}),
    (
        "tensorboard",
        "1739866051",
        "tensorboard",
        1,
        21,
        2,
        650,
        {2: 0.28125, 10: 0.3359375, 630: 1.4895833730697632, 650: 1.5026042461395264},
    ),
    (
        "tensorboard",
        "1739956707",
        "tensorboard",
        1,
        13,
        630,
        654,
        {630: 1.4791667461395264, 650: 1.5182292461395264, 654: 1.4244792461395264},
    ),
    (
        "tensorboard",
        "1739959825",
        "tensorboard",
        1,
        15,
        652,
        680,
        {652: 1.4140625, 654: 1.4401042461395264, 680: 1.421875},
    ),
    (
        "from_scratch",
        "AxiomForgeAI__metrics.csv",
        "metrics_csv",
        1,
        11,
        1,
        11,
        {1: 0.914309, 5: 0.856875, 11: 0.969814},
    ),
    (
        "from_scratch",
        "metrics.jsonl",
        "metrics_jsonl",
        1,
        10,
        1,
        10,
        {1: 0.914308755129325, 5: 0.8568747993989829, 10: 0.8807654454859567},
    ),
    ("from_scratch", "KardeniaPoyu", "metrics_csv", 1, 40, 0, 39, {0: 0.0, 39: 0.0}),
    ("from_scratch", "minimind", "minimind_log", 1, 40, 1, 40, {1: 0.3846, 3: 0.436, 40: 0.4246}),
    ("long", "csv.gz", "long", 2, 50, 1, 246, {1: 0.0, 6: -0.09333333373069763, 246: 2.454166889190674}),
    ("long", "parquet", "long", 2, 50, 1, 246, {1: 0.0, 6: -0.09333333373069763, 246: 2.454166889190674}),
    ("openrlhf_console", "synthetic_ansi-prefix", "openrlhf_console", 1, 20, 1, 20, {2: 0.214, 20: 0.6271}),
]
# (folder, key, format, exact message after "<path>: ")
COMMITTED_REFUSED = [
    (
        "trl_trainer_state",
        "edge_sft",
        "trainer_state",
        "no reward in any of the 6 training log entries (keys: epoch, grad_norm, learning_rate, loss); not a GRPO run "
        "(SFT or other Trainer?) - expected TRL GRPOTrainer logs with a 'reward' key",
    ),
    (
        "tensorboard",
        "1739394275",
        "tensorboard",
        "no scalar summaries in the TensorBoard event file(s) (text-only?); expected scalars such as train/reward",
    ),
]


def test_committed_fixtures_cover_every_format_and_file():
    files = {p for p in CF.rglob("*") if p.is_file()}
    covered = {cf(f, k) for f, k, *_ in COMMITTED} | {cf(f, k) for f, k, *_ in COMMITTED_REFUSED}
    assert files == covered
    assert {c[2] for c in COMMITTED} == set(FORMATS) and len(FORMATS) == 12


def test_committed_fixtures_stay_small():
    total = sum(p.stat().st_size for p in DATA.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                and "artefacts" not in p.parts)  # fmt: skip
    assert total < 400_000, f"the log fixtures in tests/data hold {total} bytes; keep them under ~400 KB"


@pytest.mark.parametrize("case", COMMITTED, ids=[f"{c[0]}-{c[1]}" for c in COMMITTED])
def test_committed_fixture_numbers(case):
    folder, key, fmt, n_runs, n_pts, first, last, rewards = case
    path = cf(folder, key)
    assert detect_format(path) == fmt
    rs = quiet_read(path)
    assert len(rs) == n_runs
    run = rs.run_ids[0]
    d = rs.run(run)
    assert len(d) == n_pts
    assert (d["step"].iloc[0], d["step"].iloc[-1]) == (first, last)
    for step, r in rewards.items():
        assert at(rs, step, run=run) == pytest.approx(r, rel=1e-12, abs=1e-15)
    if fmt != "long":
        assert (d["source_file"] == str(path)).all()
    assert np.isfinite(d["reward"]).all() and d["reward"].dtype == float


@pytest.mark.parametrize("case", COMMITTED_REFUSED, ids=[c[1] for c in COMMITTED_REFUSED])
def test_committed_refusals_name_file_and_reason(case):
    folder, key, fmt, text = case
    path = cf(folder, key)
    assert detect_format(path) == fmt
    with pytest.raises(LogFormatError) as ei:
        read_runs(path)
    assert str(ei.value) == f"{path}: {text}"


def test_committed_inputs_unchanged_after_reading():
    files = sorted(p for p in CF.rglob("*") if p.is_file())
    before = {p: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in files}
    for p in files + [CF / "tensorboard" / "qwen-2.5-3b-r1-countdown"]:
        with contextlib.suppress(LogFormatError):
            quiet_read(p)
    assert {p: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in files} == before


def test_committed_trainer_state_keys_nan_and_meta():
    # old TRL keys, every 10 steps (10-step means), max_steps etc. -> metadata
    rs = read_runs(cf("trl_trainer_state", "old-trl_every-10"))
    assert at(rs, 10, "reward_fn/correctness_reward_func") == 0.225 and at(rs, 10, "completion_length") == 542.6875
    m = rs.meta.iloc[0]
    assert (m["max_steps"], m["logging_steps"], m["global_step"], m["train_batch_size"], m["reward_key"]) == (
        250,
        10,
        250,
        8,
        "reward",
    )
    # old keys every step; the checkpoint's top-level keys survive the trim (max_steps 250, 20 entries kept)
    rs = read_runs(cf("trl_trainer_state", "IMJONEZZ"))
    assert at(rs, 1, "completion_length") == 200.0 and "reward_fn/xmlcount_reward_func" in rs.metrics
    assert rs.meta.iloc[0]["max_steps"] == 250 and len(rs.data) == 20
    # new keys (TRL >= 0.20): entropy, frac_reward_zero_std, rewards/<f>/mean, completions/mean_length; beta = 0 -> no kl
    rs = read_runs(cf("trl_trainer_state", "srinath"))
    assert "kl" not in rs.metrics
    assert at(rs, 10, "entropy") == pytest.approx(1.4185649514198304) and at(rs, 80, "frac_reward_zero_std") == 0.7
    assert at(rs, 10, "completion_length") == 124.2125 and at(rs, 10, "reward_fn/gameplay_scores") == -8.7875
    assert (
        "rewards/gameplay_scores/std" in rs.metrics
        and rs.meta.iloc[0]["completion_length_key"] == "completions/mean_length"
    )
    # bare NaN token (step 67), legacy completion_length next to the new keys, kl
    path = cf("trl_trainer_state", "gauri0508")
    assert '"grad_norm": NaN,' in path.read_text()
    rs = read_runs(path)
    assert math.isnan(at(rs, 67, "grad_norm")) and np.isfinite(rs.data.loc[rs.data["step"] != 67, "grad_norm"]).all()
    assert at(rs, 70, "kl") == pytest.approx(0.0007834339630790055)
    assert at(rs, 67, "source_line") == 152  # line of the "{" opening the step-67 entry
    assert at(rs, 63, "source_line") == 12 and rs.meta.iloc[0]["max_steps"] == 100


def test_committed_trainer_state_eval_entries_and_summary():
    # eval dicts share the step of a train dict -> eval/<name> in that row; the final summary is skipped
    rs = read_runs(cf("trl_trainer_state", "synthetic_grpo-eval"))
    assert list(rs.data["step"]) == [10, 20, 30, 40]
    assert at(rs, 20, "eval/reward") == 0.5 and at(rs, 40, "eval/reward") == 1.0 and at(rs, 40, "eval/loss") == 0.0002
    assert at(rs, 40, "eval/rewards/correctness_reward_func/mean") == 0.5
    assert math.isnan(at(rs, 10, "eval/reward")) and math.isnan(at(rs, 30, "eval/loss"))
    assert not any(c.startswith("train_") for c in rs.metrics) and "total_flos" not in rs.metrics
    assert (rs.meta.iloc[0]["max_steps"], rs.meta.iloc[0]["eval_steps"]) == (40, 20)


def test_committed_trl_console_three_step_sources():
    # completed run: k = total steps / number of dicts = 200 / 40 (dicts arrive in buffered bursts)
    path = cf("trl_console", "rho1.00")
    assert "\r{'loss'" in path.read_bytes().decode()  # a burst's first dict follows tqdm redraws on one line
    rs = read_runs(path)
    m = rs.meta.iloc[0]
    assert (m["logging_steps"], m["step_source"], m["completed"], m["max_steps"]) == (
        5,
        "total steps / number of logs",
        True,
        200,
    )
    assert at(rs, 5, "entropy") == 0.17924876864999534 and "reward_fn/reward_fn" in rs.metrics
    rs = quiet_read(path, logging_steps=1)
    assert list(rs.data["step"].iloc[:3]) == [1, 2, 3] and rs.meta.iloc[0]["step_source"] == "logging_steps option"
    # 4 ranks, tqdm \r redraws before every dict, killed: k from the bar counters 20, 40, ...
    path = cf("trl_console", "Ning-Guo")
    text = path.read_bytes().decode()
    assert text.count("\r") == 239 and all(f"[rank{r}]" in text for r in range(4)) and "SIGHUP" in text
    rs = read_runs(path)
    m = rs.meta.iloc[0]
    assert (m["logging_steps"], m["step_source"], m["completed"], m["max_steps"]) == (
        20,
        "progress-bar counter",
        False,
        936,
    )
    assert at(rs, 100, "kl") == pytest.approx(0.037836826997227034) and at(
        rs, 20, "reward_fn/combined_reward"
    ) == pytest.approx(0.7255576837807893)
    # transformers 5: every value a string; cut after 60 dicts (no summary) -> k assumed 1, with a warning
    path = cf("trl_console", "gate1_adq")
    with pytest.warns(DataWarning, match="assumed logging_steps=1"):
        rs = read_runs(path)
    m = rs.meta.iloc[0]
    assert (m["logging_steps"], m["step_source"], m["completed"], m["max_steps"]) == (
        1,
        "assumed (no step information)",
        False,
        200,
    )
    assert rs.data["reward"].dtype == float and rs.data["kl"].dtype == float
    assert at(rs, 1, "grad_norm") == 0.2221 and at(rs, 3, "kl") == 0.0002925 and at(rs, 3, "loss") == 1.169e-05
    assert at(rs, 60, "learning_rate") == 7.421e-05 and at(rs, 60, "epoch") == 0.03211


def test_committed_notebooks_tables_and_interruption():
    rs = read_runs(cf("unsloth_notebook", "Leen020"))  # old keys; 2 error outputs in other cells
    m = rs.meta.iloc[0]
    assert (m["progress_value"], m["progress_max"], m["max_steps"], m["notebook_cell"]) == (14, 50, 50, 3)
    assert at(rs, 3, "reward_fn/check_numbers") == 0.375 and at(rs, 3, "kl") == 0.000004
    assert at(rs, 2, "reward_std") == 0.57735 and at(rs, 1, "completion_length") == 758.25
    assert at(rs, 12, "source_line") == 12 and "loss" in rs.metrics
    rs = read_runs(cf("unsloth_notebook", "AbdullahFageeh"))  # new keys '/ mean', '/ std'
    m = rs.meta.iloc[0]
    assert (m["progress_value"], m["progress_max"]) == (48, 100) and len(rs.data) == 12  # table lags the bar
    assert at(rs, 1, "kl") == 0.1511 and at(rs, 1, "completion_length") == 1846.0
    assert "reward_fn/check_answer" in rs.metrics and "rewards/check_answer/std" in rs.metrics


def test_committed_verl_console_quirks():
    path = cf("verl_console", "Bihan")  # resumed at 101, 3-decimal values, validation in the step-110 line, cut off
    raw = path.read_bytes()
    assert b"\x1b[36m(TaskRunner pid=14640)\x1b[0m step:101 - " in raw and not raw.endswith(b"\n")
    with pytest.warns(
        DataWarning,
        match=r"line 110: last metric line has no line break yet \(still being written, or cut\?\); dropped it",
    ):
        rs = read_runs(path)
    assert at(rs, 110, "eval/openai/gsm8k/reward/mean@1") == 0.892 and math.isnan(
        at(rs, 109, "eval/openai/gsm8k/reward/mean@1")
    )
    assert at(rs, 101, "entropy") == 0.035 and at(rs, 101, "completion_length") == 128.648  # old verl names
    assert at(rs, 101, "source_line") == 41 and rs.meta.iloc[0]["reward_key"] == "critic/score/mean"
    assert at(rs, 101, "training/global_step") == 101.0
    rs = read_runs(cf("verl_console", "grpo_ansi"))  # full-precision values, ray prefix, 'step N - ' in tracebacks
    assert at(rs, 1, "entropy") == 1.182466983795166 and at(rs, 1, "critic/rewards/mean") == 0.5721990466117859
    assert at(rs, 1, "reward_extra_info/overall") == 0.5721990710442653 and at(rs, 2, "source_line") == 35
    with pytest.warns(
        DataWarning, match=r"dropped 1 row\(s\) with a missing \(NaN\) reward"
    ):  # step 0: validation only
        rs = read_runs(cf("verl_console", "synthetic_numpy2"))
    assert at(rs, 1, "entropy") == 1.182466983795166 and at(rs, 1, "rollout/total_num_samples") == 96.0
    assert at(rs, 2, "actor/grad_norm") == pytest.approx(3.0837838649749756)


def test_committed_verl_jsonl_nulls_and_validation_step():
    path = cf("verl_jsonl", "synthetic_file-logger")
    assert path.read_text().startswith('{"step":0,"data":{"val-core/cursor/reward/mean@1":0.4375,')
    with pytest.warns(DataWarning, match=r"dropped 1 row\(s\) with a missing \(NaN\) reward"):
        rs = read_runs(path)
    assert list(rs.data["step"]) == [1, 2, 3]
    assert math.isnan(at(rs, 2, "entropy")) and at(rs, 3, "entropy") == 1.2077957391738892
    assert at(rs, 1, "elapsed_seconds") == 1099.66 and at(rs, 1, "resize/mode") == "schedule"
    assert at(rs, 1, "source_line") == 2 and rs.meta.iloc[0]["reward_key"] == "critic/score/mean"


def test_committed_wandb_runs_min_max_and_x_axis():
    path = cf("wandb_csv", "Hetero-RL")
    assert path.read_text().startswith(
        '"train/global_step","[paper]GRPO_online - _step",'
    ) and not path.read_text().endswith("\n")
    rs = read_runs(path)
    assert rs.run_ids == ["[paper]GRPO_online", "[paper]GEPO_online", "[paper]GSPO_online"]
    assert [len(rs.run(r)) for r in rs.run_ids] == [30, 45, 45]
    assert [rs.run(r)["step"].iloc[-1] for r in rs.run_ids] == [1280, 1295, 1295]  # GRPO cells empty after 1280
    assert at(rs, 3, run="[paper]GEPO_online") == 0.44140625 and at(rs, 3, run="[paper]GSPO_online") == 0.421875
    assert at(rs, 1280, run="[paper]GEPO_online") == 0.6640625 and at(rs, 3, "_step", run="[paper]GRPO_online") == 237
    assert not any("__MIN" in c or "__MAX" in c for c in rs.metrics)
    assert (
        at(rs, 1271, "source_line", run="[paper]GRPO_online") == 22 and rs.meta.iloc[0]["x_axis"] == "train/global_step"
    )
    rs2 = read_runs(path, x="_step")
    d = rs2.run("[paper]GRPO_online")
    assert (d["step"].iloc[0], d["step"].iloc[-1], len(d)) == (179, 43159, 30) and rs2.meta.iloc[0]["x_axis"] == "_step"
    rs = read_runs(cf("wandb_csv", "iodt-2"))  # unquoted, no __MIN/__MAX
    assert rs.run_ids == ["fragrant-sea-49"] and rs.meta.iloc[0]["x_axis"] == "train/global_step"


def test_committed_tensorboard_resumed_parts_keep_later():
    parts = [cf("tensorboard", k) for k in ("1739959825", "1739866051", "1739956707")]  # any order: by wall time
    with pytest.warns(DataWarning, match=r"logs step\(s\) \[630, 632"):
        rs = read_runs(parts, run_id="mini-r1")
    d = rs.run("mini-r1")
    assert len(d) == 21 + 13 + 15 - 11 - 2
    assert (d["step"].iloc[0], d["step"].iloc[-1]) == (2, 680)
    assert at(rs, 630) == 1.4791667461395264  # part 2, not part 1's 1.4895833730697632
    assert at(rs, 650) == 1.5182292461395264  # part 2, not part 1's 1.5026042461395264
    assert at(rs, 652) == 1.4140625  # part 3, not part 2's 1.4947917461395264
    assert at(rs, 650, "source_file") == str(parts[2]) and at(rs, 652, "source_file") == str(parts[0])
    assert at(rs, 2, "reward_fn/equation_reward_func") >= 0 and "kl" in rs.metrics and "reward_std" in rs.metrics
    with pytest.raises(DataValidationError, match="more than once"):
        read_runs(parts, on_duplicate="error")
    with pytest.warns(DataWarning, match="kept the first"):
        assert at(read_runs(parts, on_duplicate="first"), 650) == 1.5026042461395264


def test_committed_tensorboard_folders():
    run_dir = CF / "tensorboard" / "qwen-2.5-3b-r1-countdown"  # one sub-folder per process start
    assert detect_format(run_dir) == "tensorboard"
    with pytest.warns(DataWarning, match="more than once"):
        rs = read_runs(run_dir)
    assert rs.run_ids == ["qwen-2.5-3b-r1-countdown"] and len(rs.data) == 36 and rs.meta.iloc[0]["n_event_files"] == 3
    assert at(rs, 652) == 1.4140625
    rs = read_runs(CF / "tensorboard" / "Qwen2-0.5B-GRPO-test")  # the text-only file beside the scalar file is ignored
    assert (
        rs.run_ids == ["Qwen2-0.5B-GRPO-test"]
        and list(rs.data["step"]) == [10]
        and rs.meta.iloc[0]["n_event_files"] == 1
    )
    assert "reward_fn/format_reward" in rs.metrics and "reward_fn/reward_function" in rs.metrics


def test_committed_from_scratch_quirks():
    path = cf(
        "from_scratch", "AxiomForgeAI__metrics.csv"
    )  # CRLF, sparse eval_* columns, string column, cut-off last line
    assert path.read_bytes().count(b"\r\n") == 12
    with pytest.warns(DataWarning, match=r"line 13: last line \(13 of 32 fields\) has no line break yet"):
        rs = read_runs(path)
    assert (
        at(rs, 5, "eval/combined") == 0.9192
        and at(rs, 10, "eval/combined") == 0.9199
        and math.isnan(at(rs, 6, "eval/combined"))
    )
    assert at(rs, 5, "training_phase") == "GROUNDED_ONLY" and rs.meta.iloc[0]["reward_key"] == "mean_reward"
    # a from-scratch loop's std_reward is the std of the step's rewards pooled: reward_std_batch, not reward_std
    assert rs.meta.iloc[0]["reward_std_batch_key"] == "std_reward" and at(rs, 11, "reward_std_batch") == 0.098322
    assert "reward_std" not in rs.metrics
    path = cf("from_scratch", "metrics.jsonl")  # record 0 eval-only, eval merged into 5 and 10, nulls, cut-off
    with pytest.warns(DataWarning) as rec:
        rs = read_runs(path)
    msgs = " | ".join(str(w.message) for w in rec)
    assert (
        "line 12: incomplete last JSON line (run cut off, or still being written?); dropped it" in msgs
        and "missing (NaN) reward" in msgs
    )
    assert (
        at(rs, 5, "loss") == 8.118284122815567e-05
        and at(rs, 5, "accuracy") == 0.9192
        and math.isnan(at(rs, 4, "accuracy"))
    )
    assert math.isnan(at(rs, 1, "chain_arith_score")) and at(rs, 1, "training_phase") == "GROUNDED_ONLY"
    rs = read_runs(cf("from_scratch", "KardeniaPoyu"))  # all-zero reward, step from 0
    assert (rs.data["reward"] == 0).all() and rs.meta.iloc[0]["reward_key"] == "success_rate"
    assert at(rs, 0, "entropy") == 0.13090866804122925 and rs.meta.iloc[0]["kl_key"] == "kl_div"
    rs = read_runs(cf("from_scratch", "minimind"))  # step = (e-1)*N + i
    assert at(rs, 3, "kl") == -0.005 and at(rs, 1, "completion_length") == 129 and at(rs, 1, "Fmt") == 1.0
    assert rs.meta.iloc[0]["max_steps"] == 500 and at(rs, 1, "source_line") == 6


def test_committed_long_gz_parquet_and_grpo_small():
    gz, pq = cf("long", "csv.gz"), cf("long", "parquet")
    a, b = read_runs(gz), read_runs(pq)
    assert (
        a.run_ids
        == b.run_ids
        == ["UnslothGRPO__checkpoint-250_trainer_state__e32c3be", "minimind-from-scratch__r1_main__5d13cb0"]
    )
    pd.testing.assert_frame_equal(
        a.data[["run_id", "step", "reward", "kl"]], b.data[["run_id", "step", "reward", "kl"]]
    )
    assert at(a, 6, "source_line") == 3 and "source_line" not in b.data.columns
    rs = read_runs(SMALL / "runs.csv", meta=SMALL / "meta.csv")
    assert len(rs) == 6 and len(rs.data) == 297
    assert [len(rs.run(r)) for r in rs.run_ids] == [50, 50, 46, 50, 51, 50]
    imj = "UnslothGRPO__checkpoint-250_trainer_state__e32c3be"
    assert at(rs, 246, run=imj) == 2.454166889190674 and rs.meta.loc[imj, "group_size"] == 6
    assert rs.meta.loc["colab__Qwen3__4B_-GRPO__07a98ee", "last_step"] == 46
    assert math.isnan(rs.meta.loc["Hetero-RL__GEPO_online__276368f", "group_size"])
    with pytest.warns(DataWarning, match="renamed"):
        both = read_many([gz, pq])
    assert len(both) == 4


def test_make_fixtures_reproduces_committed_files(tmp_path):
    """tests/data is what tests/data/make_fixtures.py writes from ../shared/data/log-formats."""
    if SHARED is None:
        pytest.skip("shared/data (real log fixtures) not available")
    pytest.importorskip("tensorboard")
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_fixtures", DATA / "make_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.Builder(SHARED / "log-formats", tmp_path).build()
    made = {p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()}
    committed = {p.relative_to(DATA) for p in DATA.rglob("*") if p.is_file() and p.name != "make_fixtures.py"
                 and "__pycache__" not in p.parts and "artefacts" not in p.parts}  # fmt: skip
    assert made == committed
    for rel in sorted(made):
        if rel.suffix == ".parquet":  # bytes depend on the pyarrow version
            pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / rel), pd.read_parquet(DATA / rel))
        else:
            assert (tmp_path / rel).read_bytes() == (DATA / rel).read_bytes(), rel


@needs_data
def test_grpo_small_matches_grpo_public_and_raw_files():
    """The three grpo_small runs that grpo-public also holds have the same values at the kept steps."""
    small = pd.read_csv(SMALL / "runs.csv")
    pub = pd.read_csv(SHARED / "grpo-public" / "runs.csv")
    shared_ids = sorted(set(small["run_id"]) & set(pub["run_id"]))
    assert shared_ids == [
        "UnslothGRPO__checkpoint-250_trainer_state__e32c3be",
        "colab__Qwen3__4B_-GRPO__07a98ee",
        "nips-grpo-dynamics__gates_1_2_gate1_adq_seed42__7446de7",
    ]
    for rid in shared_ids:
        s = small[small["run_id"] == rid].set_index("step")
        p = pub[pub["run_id"] == rid].set_index("step").loc[s.index]
        np.testing.assert_allclose(s["reward"], p["reward"], rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------ malformed input
def _state(entries: list[str]) -> str:
    body = ",\n".join("    {\n" + e + "\n    }" for e in entries)
    return (
        '{\n  "global_step": 3,\n  "log_history": [\n' + body + '\n  ],\n  "logging_steps": 1,\n  "max_steps": 3\n}\n'
    )


ENTRY = '      "loss": 0.0,\n      "reward": {r},\n      "step": {s}'


def test_truncated_trainer_state(tmp_path):
    p = tmp_path / "trainer_state.json"
    full = _state([ENTRY.format(r=0.1 * s, s=s) for s in (1, 2, 3)])
    p.write_text(full[: full.index('"step": 2')])
    with pytest.raises(LogFormatError) as ei:
        read_runs(p)
    msg = str(ei.value)
    assert str(p) in msg and "line " in msg and "\n" not in msg and "trainer_state" in msg


def test_trainer_state_non_numeric_reward_names_line(tmp_path):
    p = tmp_path / "trainer_state.json"
    p.write_text(_state([ENTRY.format(r=0.1, s=1), ENTRY.format(r='"abc"', s=2), ENTRY.format(r=0.3, s=3)]))
    with pytest.raises(LogFormatError) as ei:
        read_runs(p)
    assert str(p) in str(ei.value) and "line 9" in str(ei.value) and "'abc'" in str(ei.value)  # line of the entry


def test_trainer_state_eval_and_summary_entries(tmp_path):
    p = tmp_path / "trainer_state.json"
    p.write_text(
        _state(
            [
                ENTRY.format(r=0.1, s=1),
                '      "eval_loss": 1.5,\n      "eval_reward": 0.05,\n      "step": 1',
                ENTRY.format(r=0.2, s=2),
                '      "train_runtime": 10.0,\n      "train_loss": 0.0,\n      "step": 2',
            ]
        )
    )
    rs = read_runs(p)
    assert list(rs.data["step"]) == [1, 2]
    assert at(rs, 1, "eval/reward") == 0.05 and math.isnan(at(rs, 2, "eval/loss"))
    assert "train_runtime" not in rs.metrics


def test_jsonl_garbage_line(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 1, "reward": 0.1}\nthis is not json\n{"step": 3, "reward": 0.3}\n')
    with pytest.raises(LogFormatError) as ei:
        read_runs(p)
    assert str(p) in str(ei.value) and "line 2" in str(ei.value)


def test_jsonl_cut_last_line_dropped_with_warning(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 1, "reward": 0.1}\n{"step": 2, "reward": 0.2}\n{"step": 3, "rew')
    with pytest.warns(DataWarning, match="line 3"):
        rs = read_runs(p)
    assert len(rs.data) == 2


def test_csv_non_numeric_reward_and_bad_row(tmp_path):
    p = tmp_path / "log.csv"
    p.write_text("step,mean_reward,loss\n1,0.1,0.0\n2,oops,0.0\n")
    with pytest.raises(LogFormatError) as ei:
        read_runs(p)
    assert str(p) in str(ei.value) and "line 3" in str(ei.value) and "'oops'" in str(ei.value)
    p.write_text("step,mean_reward,loss\n1,0.1,0.0\n2,0.2\n")
    with pytest.raises(LogFormatError, match=r"line 3: 2 fields, expected 3"):
        read_runs(p)
    p.write_text("iteration,mean_reward\n1,\n2,nan\n")
    with pytest.raises(LogFormatError, match="no finite reward"):
        read_runs(p)


def test_csv_cut_off_last_line_dropped_with_warning(tmp_path):
    """Regression: a metrics CSV whose last line was cut while being written (killed run, or read
    while the run is still writing) used to raise 'N fields, expected M'; the line is now dropped
    with a warning, like the JSONL and verl readers do. A short line that ends with a line break is
    still an error (see test_csv_non_numeric_reward_and_bad_row). Issue 33: a last line with every
    field but no line break waits too (``2,0.2,0.5`` may be ``2,0.2,0.55`` a moment later)."""
    p = tmp_path / "metrics.csv"
    p.write_bytes(b"step,mean_reward,loss\r\n1,0.1,0.0\r\n2,0.2,0.0\r\n3,0.")
    with pytest.warns(DataWarning, match=r"metrics.csv, line 4: last line \(2 of 3 fields\) has no line break yet"):
        rs = read_runs(p)
    assert list(rs.data["step"]) == [1, 2] and list(rs.data["reward"]) == [0.1, 0.2]
    p.write_bytes(b"step,mean_reward,loss\n1,0.1,0.0\n2,0.2")  # cut between fields
    with pytest.warns(DataWarning, match="line 3: last line"):
        assert len(read_runs(p).data) == 1
    p.write_bytes(b"step,mean_reward,loss\n1,0.1,0.0\n2,0.2,0.5")  # every field, no line break: waits
    with pytest.warns(DataWarning, match=r"line 3: last line \(3 of 3 fields\) has no line break yet"):
        assert list(read_runs(p).data["loss"]) == [0.0]
    p.write_bytes(b'"step","mean_reward"\n"1","0.1"\n"2","0.2"')  # a closing quote ends the line (W&B exports)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        assert list(read_runs(p).data["reward"]) == [0.1, 0.2]


def test_long_csv_non_numeric_reward(tmp_path):
    p = tmp_path / "runs.csv"
    p.write_text("run_id,step,reward\na,1,0.5\na,2,x\n")
    assert detect_format(p) == "long"
    with pytest.raises(LogFormatError, match=r"runs.csv, line 3: reward value 'x'"):
        read_runs(p)
    pq = tmp_path / "runs.parquet"
    pd.DataFrame({"run_id": ["a", "a", "b"], "step": [1, 2, 1], "reward": [0.1, 0.2, 0.3]}).to_parquet(pq)
    rs = read_runs(pq)
    assert rs.run_ids == ["a", "b"] and len(rs.data) == 3


def test_trl_console_garbage_and_strings(tmp_path):
    p = tmp_path / "train.log"
    p.write_text("start\n{'loss': 0.0, 'reward': 0.5}\n{'loss': 0.1, 'reward': 0.6, oops}\n")
    assert detect_format(p) == "trl_console"
    with pytest.raises(LogFormatError) as ei:
        read_runs(p)
    assert str(p) in str(ei.value) and "line 3" in str(ei.value)
    p.write_text("{'loss': '0', 'reward': '0.5'}\r  5%|   | 1/20 [00:01<?]\n{'loss': '0', 'reward': 'n/a!'}\n")
    with pytest.raises(LogFormatError, match=r"line 2: reward value 'n/a!'"):
        quiet_read(p)
    p.write_text("{'loss': 0.0, 'reward': nan}\n{'loss': 0.0, 'reward': 0.7}\n")
    with pytest.warns(DataWarning) as rec:
        rs = read_runs(p)
    msgs = " | ".join(str(w.message) for w in rec)
    assert "assumed logging_steps=1" in msgs and "missing (NaN) reward" in msgs
    assert list(rs.data["step"]) == [2]


def test_verl_console_and_jsonl_spec(tmp_path):
    esc = "\x1b[36m(TaskRunner pid=7)\x1b[0m "
    p = tmp_path / "run.log"
    p.write_text(
        "config dump step: 3\n"
        + esc
        + "step:1 - actor/entropy:np.float64(1.5) - critic/score/mean:0.25 - critic/rewards/mean:0.2 - mode:fast\n"
        + esc
        + "step:2 - critic/score/mean:0.5 - val-core/gsm8k/reward/mean@1:0.7\n"
        + esc
        + "step:3 - critic/score/mean:abc\n"
    )
    assert detect_format(p) == "verl_console"
    with pytest.raises(LogFormatError, match=r"line 4: reward value 'abc'"):
        read_runs(p)
    p.write_text(
        esc
        + "step:1 - critic/score/mean:0.25\n"
        + esc
        + "step:2 - critic/score/mean:0.5 - garbage field\n"
        + esc
        + "step:3 - critic/score/mean:0.6\n"
    )
    with pytest.raises(LogFormatError, match=r"run.log, line 2: malformed verl metric field"):
        read_runs(p)
    j = tmp_path / "exp.jsonl"
    j.write_text(
        '{"step":0,"data":{"val-core/gsm8k/reward/mean@1":0.1}}\n'
        '{"step":1,"data":{"critic/score/mean":0.2,"actor/entropy":null,"resize/mode":"schedule"},"elapsed_seconds":3.5}\n'
        '{"step":2,"data":{"critic/score/mean":0.3,"actor/kl_loss":0.01}}\n'
    )
    assert detect_format(j) == "verl_jsonl"
    with pytest.warns(DataWarning, match="missing"):  # step 0: validation only
        rs = read_runs(j)
    assert list(rs.data["step"]) == [1, 2] and at(rs, 2, "kl") == 0.01 and at(rs, 1, "elapsed_seconds") == 3.5
    assert at(rs, 1, "resize/mode") == "schedule"


def test_wandb_malformed(tmp_path):
    p = tmp_path / "export.csv"
    p.write_text('"Step","r1 - train/reward","r1 - train/reward__MIN"\n"1","0.5","0.5"\n"2","0.6"\n')
    assert detect_format(p) == "wandb_csv"
    with pytest.raises(LogFormatError, match=r"export.csv, line 3: 2 fields, expected 3"):
        read_runs(p)
    p.write_text('"Step","r1 - train/reward"\n"1","0.5"\n"2","bad"\n')
    with pytest.raises(LogFormatError, match=r"line 3: reward value 'bad'"):
        read_runs(p)


def test_openrlhf_style_keys_map(tmp_path):
    p = tmp_path / "export.csv"
    p.write_text(
        "train/global_step,run a - train/rollout/reward_mean,run a - train/kl,run a - train/response_length\n1,0.1,0.01,100\n2,0.2,0.02,110\n"
    )
    rs = read_runs(p)
    assert (
        rs.run_ids == ["run a"]
        and at(rs, 2) == 0.2
        and at(rs, 2, "kl") == 0.02
        and at(rs, 1, "completion_length") == 100
    )


def test_detect_unknown(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("hello\n")
    with pytest.raises(LogFormatError, match="unrecognised"):
        detect_format(p)
    with pytest.raises(LogFormatError, match="no such file"):
        read_runs(tmp_path / "missing.json")
