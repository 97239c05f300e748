"""Importers (bayesgrpo.io) against the real log fixtures in shared/data/log-formats.

Expected numbers were read off the raw files (grep / a JSON viewer / the TensorBoard event data),
not produced by the importers.
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.errors import DataValidationError, DataWarning, LogFormatError
from bayesgrpo.io import FORMATS, detect_format, read_many, read_runs


def _shared() -> Path | None:
    cands = [Path(__file__).resolve().parents[2] / "shared" / "data"]
    if os.environ.get("BAYESGRPO_SHARED"):
        cands.append(Path(os.environ["BAYESGRPO_SHARED"]))
    return next((c for c in cands if (c / "log-formats").is_dir()), None)


SHARED = _shared()
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
    ("trl_trainer_state", "IMJONEZZ", "trainer_state", 1, 250, 1, 250, {2: -0.046833336353302, 250: 1.3333333730697632}),
    ("trl_trainer_state", "abdo-ashraf", "trainer_state", 1, 25, 10, 250, {10: 0.4269749991595745, 250: 1.5109375}),
    ("trl_trainer_state", "srinath", "trainer_state", 1, 50, 10, 500, {10: -9.6625, 500: 0.425}),
    ("trl_trainer_state", "gauri0508", "trainer_state", 1, 100, 1, 100, {67: 0.3933500051498413, 100: 0.19474999606609344}),
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
        try:
            quiet_read(p)
        except LogFormatError:
            pass
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
    run_dir = tmp_path / "qwen-2.5-3b-r1-countdown"
    for k in ("part1", "part2", "part3"):  # symlinks: the fixtures are not copied
        (run_dir / k).mkdir(parents=True)
        (run_dir / k / fx("tensorboard", k).name).symlink_to(fx("tensorboard", k))
    assert detect_format(run_dir) == "tensorboard"
    with pytest.warns(DataWarning, match="more than once"):
        rs = read_runs(run_dir)
    assert rs.run_ids == ["qwen-2.5-3b-r1-countdown"] and len(rs.data) == 605


@needs_data
def test_tensorboard_without_tbparse(monkeypatch):
    monkeypatch.setitem(sys.modules, "tbparse", None)
    with pytest.raises(LogFormatError, match=r"pip install bayesgrpo\[tensorboard\]"):
        read_runs(fx("tensorboard", "part2"))


@needs_data
def test_grpo_public_long_csv_with_meta():
    d = SHARED / "grpo-public"
    assert detect_format(d / "runs.csv") == "long"
    rs = read_runs(d / "runs.csv", meta=d / "meta.csv")
    assert len(rs) == 100 and len(rs.data) == 13671
    first = "math-phi4__Qwen2_5__3B__GRPO__9662dc4"
    assert at(rs, 1, run=first) == 0.033625 and rs.meta.loc[first, "group_size"] == 8
    assert at(rs, 1, "source_line", run=first) == 2


@needs_data
def test_read_many_unique_ids_and_meta():
    a = fx("trl_trainer_state", "abdo-ashraf")
    with pytest.warns(DataWarning, match="renamed"):
        rs = read_many([a, a, fx("wandb_csv", "iodt-2")], meta=pd.DataFrame({"run_id": ["fragrant-sea-49"], "model": ["Qwen/Qwen2-0.5B-Instruct"]}))
    stem = a.name[: -len(".json")]
    assert rs.run_ids == [stem, stem + "#2", "fragrant-sea-49"]
    assert rs.meta.loc["fragrant-sea-49", "model"] == "Qwen/Qwen2-0.5B-Instruct"
    assert len(rs.data) == 25 + 25 + 676


@needs_data
def test_run_id_and_meta_override():
    rs = read_runs(fx("trl_trainer_state", "IMJONEZZ"), run_id="llama8b", meta={"model": "meta-llama/Llama-3.1-8B-Instruct", "group_size": 6})
    assert rs.run_ids == ["llama8b"]
    assert rs.meta.loc["llama8b", "group_size"] == 6 and rs.meta.loc["llama8b", "max_steps"] == 250
    rs = read_runs(fx("wandb_csv", "Hetero-RL"), run_id="gepo")
    assert rs.run_ids[0] == "gepo/[paper]GRPO_online"


def test_formats_tuple():
    assert len(FORMATS) == len(set(FORMATS)) and "trainer_state" in FORMATS and "tensorboard" in FORMATS


# ------------------------------------------------------------------------------------ malformed input
def _state(entries: list[str]) -> str:
    body = ",\n".join("    {\n" + e + "\n    }" for e in entries)
    return '{\n  "global_step": 3,\n  "log_history": [\n' + body + '\n  ],\n  "logging_steps": 1,\n  "max_steps": 3\n}\n'


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
    p.write_text(_state([
        ENTRY.format(r=0.1, s=1),
        '      "eval_loss": 1.5,\n      "eval_reward": 0.05,\n      "step": 1',
        ENTRY.format(r=0.2, s=2),
        '      "train_runtime": 10.0,\n      "train_loss": 0.0,\n      "step": 2',
    ]))
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
    still an error (see test_csv_non_numeric_reward_and_bad_row)."""
    p = tmp_path / "metrics.csv"
    p.write_bytes(b"step,mean_reward,loss\r\n1,0.1,0.0\r\n2,0.2,0.0\r\n3,0.")
    with pytest.warns(DataWarning, match=r"metrics.csv, line 4: incomplete last line \(2 of 3 fields"):
        rs = read_runs(p)
    assert list(rs.data["step"]) == [1, 2] and list(rs.data["reward"]) == [0.1, 0.2]
    p.write_bytes(b"step,mean_reward,loss\n1,0.1,0.0\n2,0.2")  # cut between fields
    with pytest.warns(DataWarning, match="line 3: incomplete last line"):
        assert len(read_runs(p).data) == 1
    p.write_bytes(b"step,mean_reward,loss\n1,0.1,0.0\n2,0.2,0.5")  # complete last line without a line break
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        assert list(read_runs(p).data["loss"]) == [0.0, 0.5]


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
        + esc + "step:1 - actor/entropy:np.float64(1.5) - critic/score/mean:0.25 - critic/rewards/mean:0.2 - mode:fast\n"
        + esc + "step:2 - critic/score/mean:0.5 - val-core/gsm8k/reward/mean@1:0.7\n"
        + esc + "step:3 - critic/score/mean:abc\n"
    )
    assert detect_format(p) == "verl_console"
    with pytest.raises(LogFormatError, match=r"line 4: reward value 'abc'"):
        read_runs(p)
    p.write_text(esc + "step:1 - critic/score/mean:0.25\n" + esc + "step:2 - critic/score/mean:0.5 - garbage field\n" + esc + "step:3 - critic/score/mean:0.6\n")
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
    p.write_text("train/global_step,run a - train/rollout/reward_mean,run a - train/kl,run a - train/response_length\n1,0.1,0.01,100\n2,0.2,0.02,110\n")
    rs = read_runs(p)
    assert rs.run_ids == ["run a"] and at(rs, 2) == 0.2 and at(rs, 2, "kl") == 0.02 and at(rs, 1, "completion_length") == 100


def test_detect_unknown(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("hello\n")
    with pytest.raises(LogFormatError, match="unrecognised"):
        detect_format(p)
    with pytest.raises(LogFormatError, match="no such file"):
        read_runs(tmp_path / "missing.json")
