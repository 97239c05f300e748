"""Issue 33, every input answered (round 3): each defect driven through the CLI (or the reader ``watch``
follows) as the user met it, sampling mocked (tests/conftest.py), asserting exit codes, one-line
messages and the numbers read. The live ``watch`` items are in tests/test_inputs_live.py, the diagnose
collapse items in tests/test_diagnose.py."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from bayesgrpo.cli import app
from bayesgrpo.errors import DataWarning

runner = CliRunner()
DATA = Path(__file__).parent / "data"
FAST = ("--draws", "20", "--tune", "10")


def invoke(*args, **kw):
    res = runner.invoke(app, [str(a) for a in args], **kw)
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def one_error_line(res, *needles):
    lines = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert res.exit_code == 2 and len(lines) == 1, res.output
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def said(res) -> str:
    """The output with its wrapping undone (warnings may wrap on a narrow console)."""
    return " ".join(res.output.split())


def curve(steps, lo=0.2, gain=0.5, tau=40.0):
    s = np.asarray(steps, dtype=float)
    return lo + gain * (1 - np.exp(-(s - s[0]) / tau))


def six_runs() -> pd.DataFrame:
    s = np.arange(1, 301)
    return pd.concat([pd.DataFrame({"run_id": f"run{k}", "step": s, "reward": curve(s, tau=30 + 10 * k).round(5)})
                      for k in range(6)])  # fmt: skip


def summary_ids(res) -> list[str]:
    rows = res.stdout.splitlines()
    return [
        ln.split()[0] for ln in rows[rows.index(next(r for r in rows if r.startswith("run_id"))) + 1 :] if ln.strip()
    ]


# ============================================================================ 1. a long .tsv (and .tsv.gz) holds its runs
@pytest.mark.parametrize("name", ["runs.tsv", "runs.tsv.gz"])
def test_a_long_tsv_with_run_ids_is_read_as_its_six_runs(tmp_path, name):
    p = tmp_path / name
    six_runs().to_csv(p, sep="\t", index=False)
    res = invoke("summary", p)
    assert res.exit_code == 0, res.output
    assert "# 6 run(s), 1800 points" in res.stdout and summary_ids(res) == [f"run{k}" for k in range(6)]


# ============================================================================ 16. semicolons, tabs in a .csv, comments
@pytest.mark.parametrize(
    ("sep", "comments", "expect"),
    [(";", "", "read as semicolon-separated (3 columns: run_id, step, reward)"),
     ("\t", "", "read as tab-separated (3 columns: run_id, step, reward)"),
     (",", "# exported by my script\n# second comment\n", "skipped 2 comment line(s) starting with '#'")],
)  # fmt: skip
def test_delimiter_sniffed_and_comment_lines_skipped_saying_what_was_read(tmp_path, sep, comments, expect):
    p = tmp_path / "runs.csv"
    p.write_text(comments + six_runs().to_csv(sep=sep, index=False))
    res = invoke("summary", p)
    assert res.exit_code == 0, res.output
    assert summary_ids(res) == [f"run{k}" for k in range(6)]
    assert f"warning: {p}: {expect}" in said(res)


def test_a_metrics_csv_with_a_run_id_column_keeps_its_runs_apart(tmp_path):
    df = six_runs().rename(columns={"reward": "mean_reward"})  # not the long schema: the generic reader
    p = tmp_path / "metrics.csv"
    df.to_csv(p, index=False)
    res = invoke("summary", p)
    assert res.exit_code == 0, res.output
    assert "# 6 run(s), 1800 points" in res.stdout


# ============================================================================ 2. a last line cut mid-number
def test_a_csv_whose_last_line_is_cut_mid_number_is_not_read_as_zero(tmp_path, mock_sampler):
    s = np.arange(1, 300)
    p = tmp_path / "runs.csv"
    text = pd.DataFrame({"run_id": "runA", "step": s, "reward": curve(s)}).to_csv(index=False)
    p.write_text(text + "runA,300,0.")  # the trainer is writing '0.7091...'
    out = tmp_path / "t.csv"
    res = invoke("forecast", p, "--horizon", 1000, "--out", out, *FAST)
    assert res.exit_code == 0, res.output
    row = pd.read_csv(out).iloc[0]
    assert row["observed_until"] == 299 and row["n_obs"] == 299
    assert f"warning: {p}, line 301: last line (3 of 3 fields) has no line break yet" in said(res)


# ============================================================================ must-show: a log written byte by byte
def _trainer_state(n: int) -> str:
    hist = [{"step": k, "reward": round(float(curve([1, k])[1]), 6), "loss": 0.01 * k, "epoch": k / 100}
            for k in range(1, n + 1)]  # fmt: skip
    return json.dumps({"global_step": n, "max_steps": 100, "logging_steps": 1, "log_history": hist}, indent=2) + "\n"


def _growing(kind: str, n: int = 12) -> tuple[str, str, str]:
    """(file name, the text of n - 1 records, the text of n): the last record's line is the one being written."""
    steps = np.arange(1, n + 1)
    r = [f"{v:.6f}" for v in curve(steps)]
    if kind == "long_csv":
        lines = ["run_id,step,reward\n"] + [f"runA,{k},{v}\n" for k, v in zip(steps, r, strict=True)]
        return "runs.csv", "".join(lines[:-1]), "".join(lines)
    if kind == "metrics_jsonl":
        lines = [json.dumps({"step": int(k), "reward": float(v)}) + "\n" for k, v in zip(steps, r, strict=True)]
        return "metrics.jsonl", "".join(lines[:-1]), "".join(lines)
    if kind == "verl_console":
        lines = [f"(TaskRunner pid=1) step:{k} - critic/score/mean:{v} - actor/entropy:1.5{k}\n"
                 for k, v in zip(steps, r, strict=True)]  # fmt: skip
        return "train.log", "".join(lines[:-1]), "".join(lines)
    return "trainer_state.json", _trainer_state(n - 1), _trainer_state(n)  # rewritten whole at each save


@pytest.mark.parametrize("kind", ["long_csv", "metrics_jsonl", "verl_console", "trainer_state"])
def test_a_log_written_byte_by_byte_never_yields_a_phantom_point(tmp_path, kind):
    """``watch``'s reader polls the file after every byte of its last record: every step it ever holds
    has the value the finished file gives it (a line without its line break waits)."""
    from bayesgrpo.integrations.watch import LogSource

    name, before, after = _growing(kind)
    p = tmp_path / name
    p.write_text(before)
    src = LogSource(p)
    assert src.poll() > 0
    done = LogSource(_write(tmp_path / "done" / name, after))
    done.poll()
    truth = {st: rec["reward"] for st, rec in done.rows.items()}
    n = len(truth)
    start = 0 if kind == "trainer_state" else len(before)  # the whole file is rewritten / only the tail is new
    seen_last = []
    for k in range(start, len(after) + 1):
        p.write_text(after[:k])
        src.poll()
        for st, rec in src.rows.items():
            assert rec["reward"] == truth[st], (kind, k, st, rec["reward"], truth[st])
        seen_last.append(n in src.rows)
    assert seen_last[-1]  # the finished record is read ...
    first = seen_last.index(True)
    assert all(seen_last[first:])  # ... once, for good
    if kind in ("long_csv", "verl_console"):  # a line is whole only with its line break
        assert first == len(after) - start


def _write(p: Path, text: str) -> Path:
    p.parent.mkdir(exist_ok=True)
    p.write_text(text)
    return p


# ============================================================================ 3. --reward-key
def test_reward_key_naming_no_logged_key_is_refused_naming_the_option(tmp_path, mock_sampler):
    p = tmp_path / "runs.csv"
    six_runs().to_csv(p, index=False)
    res = invoke("forecast", p, "--reward-key", "acc", "--horizon", 500, *FAST)
    one_error_line(res, "--reward-key 'acc'", str(p), "(reward)")
    assert not mock_sampler["calls"]


def test_the_keys_a_reward_error_suggests_are_accepted_by_reward_key(tmp_path, mock_sampler):
    s = np.arange(1, 101)
    p = tmp_path / "metrics.csv"
    pd.DataFrame({"step": s, "acc": curve(s), "rewards/fmt/mean": curve(s, lo=0.5)}).to_csv(p, index=False)
    res = invoke("summary", p)
    line = one_error_line(res, "no reward series found")
    keys = line.split("logged keys: ")[1].split(")")[0].split(", ")
    assert keys == ["acc", "reward_fn/fmt"]
    for key in keys:  # every name it offers, taken as it is offered
        res = invoke("summary", p, "--reward-key", key)
        assert res.exit_code == 0, (key, res.output)
    res = invoke("summary", p, "--reward-key", "rewards/fmt/mean")  # and the key as logged
    assert res.exit_code == 0 and "0.5..0.9" in res.stdout, res.output


def test_watch_refuses_a_reward_key_naming_no_logged_key(tmp_path):
    p = tmp_path / "metrics.csv"
    pd.DataFrame({"step": np.arange(1, 50), "reward": curve(np.arange(1, 50))}).to_csv(p, index=False)
    res = invoke("watch", p, "--reward-key", "acc", "--horizon", 100, "--interval", "0.05", "--idle-timeout", "5")
    one_error_line(res, "--reward-key 'acc'")


# ============================================================================ 4. bytes that are not UTF-8
def test_a_latin1_run_id_is_read_not_a_traceback(tmp_path):
    df = six_runs()
    df["run_id"] = df["run_id"].str.replace("run0", "r\xe9sum\xe9")
    p = tmp_path / "runs.csv"
    p.write_bytes(df.to_csv(index=False).encode("latin-1"))
    m = tmp_path / "meta.csv"
    m.write_bytes("run_id,max_steps\nr\xe9sum\xe9,400\n".encode("latin-1"))
    res = invoke("summary", p, "--meta", m)
    assert res.exit_code == 0, res.output
    assert summary_ids(res)[-5:] == [f"run{k}" for k in range(1, 6)] and "r\xe9sum\xe9" in res.stdout
    assert f"warning: {p}, line 2: not UTF-8 (byte 0xe9); read the file as Latin-1" in said(res)


def test_a_file_cut_inside_a_utf8_character_waits_for_the_rest():
    from bayesgrpo.io._text import decode

    raw = "step,run\n1,r\xe9sum\xe9\n2,r\xe9".encode()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)  # not read as Latin-1
        assert decode(raw[:-1], "f.csv") == "step,run\n1,r\xe9sum\xe9\n2,r"


# ============================================================================ 8. a truncated .csv.gz
def test_a_truncated_csv_gz_is_read_up_to_its_last_whole_line(tmp_path):
    p = tmp_path / "runs.csv.gz"
    b = gzip.compress(six_runs().to_csv(index=False).encode())
    p.write_bytes(b[: len(b) // 2])
    res = invoke("summary", p)
    assert res.exit_code == 0, res.output
    assert f"warning: {p}: the gzip stream ends early" in said(res) and "has no line break yet" in said(res)
    assert summary_ids(res)[0] == "run0"


# ============================================================================ 7. a run's warning names its own file
def test_a_per_run_warning_names_the_runs_own_file_not_every_input(tmp_path, mock_sampler):
    s = np.arange(1, 101)
    a, short = tmp_path / "a.csv", tmp_path / "short.csv"
    pd.DataFrame({"step": s, "reward": curve(s)}).to_csv(a, index=False)
    pd.DataFrame({"step": s[:2], "reward": curve(s[:2])}).to_csv(short, index=False)
    out = tmp_path / "t.csv"
    res = invoke("forecast", a, short, "--horizon", 300, "--out", out, *FAST)
    assert res.exit_code == 0, res.output
    assert f"warning: run 'short' ({short}) has 2 logged reward point(s)" in said(res)
    assert str(a) not in pd.read_csv(out).set_index("run_id").loc["short", "error"]


# ============================================================================ 8. one bad value, one bad file: the rest go on
def test_an_infinite_reward_is_dropped_with_a_warning_and_the_batch_goes_on(tmp_path, mock_sampler):
    s = np.arange(1, 101)
    r = curve(s)
    a, b = tmp_path / "a.csv", tmp_path / "inf.csv"
    pd.DataFrame({"step": s, "reward": r}).to_csv(a, index=False)
    r[50] = np.inf
    pd.DataFrame({"step": s, "reward": r}).to_csv(b, index=False)
    out = tmp_path / "t.csv"
    res = invoke("forecast", a, b, "--horizon", 300, "--out", out, *FAST)
    assert res.exit_code == 0, res.output
    t = pd.read_csv(out).set_index("run_id")
    assert list(t["status"]) == ["ok", "ok"] and t.loc["inf", "n_obs"] == 99
    assert f"dropped 1 row(s) with an infinite reward in {b}, first at file {b}, run 'inf', line 52" in said(res)


def test_a_verl_jsonl_cut_mid_line_is_read_up_to_its_last_whole_record(tmp_path):
    p = tmp_path / "grpo.jsonl"
    recs = [json.dumps({"step": k, "data": {"critic/score/mean": float(curve([1, k])[1])}}) for k in range(1, 31)]
    p.write_text("\n".join(recs) + "\n" + recs[0][:25])  # the next record, half written
    res = invoke("summary", p)
    assert res.exit_code == 0, res.output
    assert "1..30" in res.stdout and f"{p}, line 31: incomplete last JSON line" in said(res)


def test_one_unreadable_file_of_several_is_a_warning_and_the_others_are_forecast(tmp_path, mock_sampler):
    s = np.arange(1, 101)
    a, bad = tmp_path / "a.csv", tmp_path / "bad.json"
    pd.DataFrame({"step": s, "reward": curve(s)}).to_csv(a, index=False)
    bad.write_text("{not json")
    out = tmp_path / "t.csv"
    res = invoke("forecast", a, bad, "--horizon", 300, "--out", out, *FAST)
    assert res.exit_code == 0, res.output
    assert list(pd.read_csv(out)["run_id"]) == ["a"]
    assert f'warning: {bad}: JSON file without a "log_history" key' in said(res) and "this file is left out" in said(
        res
    )
    one_error_line(invoke("forecast", a, bad, "--horizon", 300, "--strict", *FAST), str(bad))


# ============================================================================ 15. TensorBoard runs in one folder
def test_tensorboard_event_files_of_different_runs_in_one_folder_are_different_runs(tmp_path):
    pytest.importorskip("tbparse")
    from torch.utils.tensorboard import SummaryWriter

    folder = tmp_path / "tb"
    for k in range(3):  # three runs started one after the other, all writing into one folder
        w = SummaryWriter(log_dir=str(folder), filename_suffix=f".run{k}")
        for s in range(1, 41):
            w.add_scalar("train/reward", 0.1 * k + s / 100, s, walltime=1000.0 * k + s)
        w.close()
    w = SummaryWriter(log_dir=str(folder), filename_suffix=".resumed")  # the third run resumed at step 30
    for s in range(30, 61):
        w.add_scalar("train/reward", 0.25 + s / 100, s, walltime=5000.0 + s)
    w.close()
    res = invoke("summary", folder)
    assert res.exit_code == 0, res.output
    assert summary_ids(res) == ["tb", "tb#2", "tb#3"]
    steps = {ln.split()[0]: ln.split()[2] for ln in res.stdout.splitlines() if ln.startswith("tb")}
    assert steps == {"tb": "1..40", "tb#2": "1..40", "tb#3": "1..60"}  # the resumed part joins its run
    assert "its event files hold 3 runs" in said(res)


# ============================================================================ 6. the planned length a log states
def test_the_planned_length_a_verl_or_trl_console_log_states_is_the_horizon(tmp_path, mock_sampler):
    p = tmp_path / "verl.log"
    lines = ["(TaskRunner pid=7) Total training steps: 240\n"]
    lines += [f"(TaskRunner pid=7) step:{k} - critic/score/mean:{curve([1, k])[1]:.4f} - actor/entropy:1.2\n"
              for k in range(1, 61)]  # fmt: skip
    p.write_text("".join(lines))
    trl = DATA / "formats" / "trl_console"
    trl_log = next(trl.glob("new-trl_vllm*.log"))  # prints 'Total optimization steps = 200'
    for log, horizon in ((p, 240), (trl_log, 200)):
        out = tmp_path / "t.csv"
        res = invoke("forecast", log, "--until-fraction", 0.2, "--out", out, *FAST)
        assert res.exit_code == 0, res.output
        assert int(pd.read_csv(out)["horizon"].iloc[0]) == horizon, res.output


# ============================================================================ 9. horizons before the end of the log
def test_a_horizon_before_the_last_logged_step_is_said_and_max_steps_below_the_log_is_not_the_plan(
    tmp_path, mock_sampler
):
    s = np.arange(1, 101)
    a = tmp_path / "a.csv"
    pd.DataFrame({"step": s, "reward": curve(s, tau=30.0)}).to_csv(a, index=False)
    out = tmp_path / "t.csv"
    res = invoke("forecast", a, "--horizon", 50, "--out", out, *FAST)
    assert res.exit_code == 0, res.output
    assert (
        f"warning: run 'a' ({a}): --horizon 50 is before its last logged step 100: the run is complete at step 50"
        in said(res)
    )
    row = pd.read_csv(out).iloc[0]
    assert row["status"] == "complete" and row["final_mean"] == pytest.approx(curve(s, tau=30.0)[45:50].mean())
    m = tmp_path / "meta.csv"
    pd.DataFrame([{"run_id": "a", "max_steps": 200}]).to_csv(m, index=False)
    res = invoke("forecast", a, "--meta", m, "--horizon", 50, "--out", out, *FAST)
    assert "is before its last logged step 100: the run is complete at step 50" in said(res)
    assert "differs from its max_steps" not in said(res)  # not "the forecast of the planned 200 steps read at 50"
    pd.DataFrame([{"run_id": "a", "max_steps": 60}]).to_csv(m, index=False)
    res = invoke("forecast", a, "--meta", m, "--out", out, *FAST)
    assert "its max_steps 60 (metadata) is before its last logged step 100; the run went on past it" in said(res)
    row = pd.read_csv(out).iloc[0]  # complete at the end of the log, not at step 60
    assert (row["status"], row["horizon"]) == ("complete", 100)
    assert row["final_mean"] == pytest.approx(curve(s, tau=30.0)[90:].mean())
    res = invoke("forecast", a, "--meta", m, "--until-step", 40, "--out", out, *FAST)  # what step 40 would have said
    row = pd.read_csv(out).iloc[0]
    assert (row["status"], row["horizon"]) == ("ok", 100)
    # the prior is conditioned on the share of the run to its horizon (39 of 99 steps), not of the max_steps 60
    from bayesgrpo.io import read_runs
    from bayesgrpo.plan import plan_runs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        plans = plan_runs(read_runs(a, meta=m), until_step=40)
    assert plans["a"].planned == 100 and plans["a"].fraction == pytest.approx(39 / 99)
