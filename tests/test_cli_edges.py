"""Every bad input answered, driven through the real CLI as a user would (sampling mocked): exit code,
one line, no traceback, the files left on disk, nothing silently wrong."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from bayesgrpo.cli import app

runner = CliRunner()
DATA = Path(__file__).parent / "data"


def invoke(*args):
    res = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in res.output, res.output
    return res


def one_error_line(res, *needles):
    lines = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, res.output
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def write_runs(tmp_path, ids=("a", "b"), n=60, name="runs.csv", meta=None):
    rng = np.random.default_rng(0)
    rows = []
    for rid in ids:
        s = np.arange(1, n + 1)
        rows.append(
            pd.DataFrame(
                {"run_id": rid, "step": s, "reward": 0.2 + 0.5 * (1 - np.exp(-s / 30)) + 0.02 * rng.standard_normal(n)}
            )
        )
    p = tmp_path / name
    pd.concat(rows).to_csv(p, index=False)
    if meta is not None:
        pd.DataFrame(meta).to_csv(tmp_path / "meta.csv", index=False)
    return p


# ------------------------------------------------------------------ option validation before any work
@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--until-fraction", "1.5"], ["--until-fraction", "(0, 1)"]),
        (["--until-fraction", "0.3", "--until-step", "50"], ["--until-step or --until-fraction"]),
        (["--final-window", "0"], ["--final-window", "(0, 1]"]),
        (["--final-window", "1.5"], ["--final-window"]),
        (["--stop-fraction", "1.5"], ["--stop-fraction"]),
        (["--draws", "0"], ["--draws", "at least 10"]),
        (["--format", "nosuch"], ["--format 'nosuch'", "trainer_state"]),
        (["--kind", "magic"], ["--kind 'magic'", "oscillator"]),
        (["--model", "magic"], ["--model 'magic'"]),  # the deprecated name of --kind
        (["--run", "nosuchrun"], ["--run 'nosuchrun'", "'a'"]),
        (["--exclude", "nosuchrun"], ["--exclude 'nosuchrun'"]),
        (["--out", "f.txt"], ["--out", "'.txt'", ".csv, .json, .parquet"]),
    ],
)
def test_forecast_options_are_validated_in_one_line(tmp_path, mock_sampler, args, needles):
    p = write_runs(tmp_path)
    res = invoke("forecast", p, "--horizon", 200, *[str(tmp_path / a) if a == "f.txt" else a for a in args])
    assert res.exit_code == 2
    one_error_line(res, *needles)
    assert not mock_sampler["calls"]  # refused before any sampling


def test_unwritable_outputs_refused_before_sampling(tmp_path, mock_sampler):
    p = write_runs(tmp_path)
    (tmp_path / "afile").write_text("x")
    res = invoke("forecast", p, "--horizon", 200, "--out-dir", tmp_path / "afile")
    assert res.exit_code == 2
    one_error_line(res, "--out-dir", "is a file")
    res = invoke("forecast", p, "--horizon", 200, "--out", tmp_path / "afile" / "t.csv")
    assert res.exit_code == 2
    one_error_line(res, "--out", "is a file, not a folder")
    assert not mock_sampler["calls"]


def test_budget_costs_checked_before_sampling(tmp_path, mock_sampler):
    p = write_runs(tmp_path)
    res = invoke("budget", p, "--horizon", 200, "--cost-per-hour", 3)
    assert res.exit_code == 2
    one_error_line(res, "--cost-per-hour needs --steps-per-hour")
    assert not mock_sampler["calls"]


@pytest.mark.parametrize(
    ("cmd", "needles"),
    [
        (["diagnose", "{p}", "--run", "nosuchrun"], ["--run 'nosuchrun'"]),
        (["compare", "{p}", "--run", "nosuchrun"], ["--run 'nosuchrun'"]),
        (["compare", "{p}", "--by", "nosuchcol"], ["--by 'nosuchcol'"]),
        (["compare", "{p}", "--models", "foo"], ["--models 'foo'"]),
        (["backtest", "{missing}"], ["no such file"]),
        (["backtest", "{p}", "--peers", "foo"], ["--peers", "unknown peer", "foo"]),
        (["backtest", "{p}", "--cutoffs", "0.1,2"], ["--cutoffs", "(0, 1)"]),
        (["testbed", "run", "-s", "nosuchfield=3"], ["--set nosuchfield", "no such field"]),
        (["testbed", "run", "-s", "learning_rate=abc"], ["--set learning_rate"]),
    ],
)
def test_other_verbs_answer_in_one_line(tmp_path, mock_sampler, cmd, needles):
    p = write_runs(tmp_path)
    args = [a.format(p=p, missing=tmp_path / "nonexist.csv") for a in cmd]
    res = invoke(*args)
    assert res.exit_code == 2, res.output
    one_error_line(res, *needles)


# ------------------------------------------------------------------ silent wrong answers
def test_tensorboard_folder_with_two_runs_is_two_runs(tmp_path):
    src = DATA / "formats" / "tensorboard" / "qwen-2.5-3b-r1-countdown"
    shutil.copytree(src, tmp_path / "logs" / "a")
    shutil.copytree(src, tmp_path / "logs" / "b")
    res = invoke("summary", tmp_path / "logs")
    assert res.exit_code == 0
    rows = [ln for ln in res.output.splitlines() if ln.startswith("logs/")]
    assert [r.split()[0] for r in rows] == ["logs/a", "logs/b"]
    res = invoke("summary", src)  # HF's per-start folders of ONE resumed run stay one run
    assert "1 run(s)" in res.output and "qwen-2.5-3b-r1-countdown" in res.output


def test_run_ids_with_brackets_survive(tmp_path, mock_sampler):
    p = write_runs(tmp_path, ids=("[paper]GRPO_online", "plain"))
    res = invoke("summary", p)
    assert "[paper]GRPO_online" in res.output
    res = invoke("forecast", p, "--horizon", 200, "--run", "[paper]GRPO_online", "--draws", 20, "--tune", 10)
    assert res.exit_code == 0, res.output
    assert "[paper]GRPO_online" in res.output


def test_plot_file_names_are_unique_safe_and_short(tmp_path, mock_sampler):
    ids = ("a/b/c", "a_b_c", "../../etc/evil", "x" * 300)
    p = write_runs(tmp_path, ids=ids)
    out = tmp_path / "figs"
    res = invoke("forecast", p, "--horizon", 200, "--out-dir", out, "--draws", 20, "--tune", 10)
    assert res.exit_code == 0, res.output
    files = sorted(f.name for f in out.iterdir() if f.suffix == ".png")
    assert len(files) == 4 and all(not f.startswith(".") for f in files)
    assert all(len(f) <= 84 for f in files)
    assert not (tmp_path.parent / "etc").exists()
    assert sorted(f.name for f in out.iterdir() if f.suffix != ".png") == ["paths.csv"]  # nothing half-written
    bands = pd.read_csv(out / "paths.csv")
    assert sorted(bands["run_id"].unique()) == sorted(ids)
    per = bands[bands["run_id"] == "a/b/c"]
    assert per["step"].is_monotonic_increasing and per["step"].iloc[-1] == 200
    assert (per["yhat_q05"] <= per["yhat_q50"]).all() and (per["yhat_q50"] <= per["yhat_q95"]).all()


def test_table_suffix_decides_the_format(tmp_path, mock_sampler):
    p = write_runs(tmp_path)
    for suffix in (".csv", ".json", ".parquet"):
        out = tmp_path / f"t{suffix}"
        res = invoke("forecast", p, "--horizon", 200, "--out", out, "--draws", 20, "--tune", 10)
        assert res.exit_code == 0, res.output
        t = {".csv": pd.read_csv, ".json": pd.read_json, ".parquet": pd.read_parquet}[suffix](out)
        assert list(t["run_id"]) == ["a", "b"] and "final_q50" in t.columns


def test_one_short_run_is_an_error_row_not_a_lost_batch(tmp_path, mock_sampler):
    p = write_runs(tmp_path)
    df = pd.read_csv(p)
    df = pd.concat([df, pd.DataFrame({"run_id": "tiny", "step": [1, 2], "reward": [0.1, 0.2]})])
    df.to_csv(p, index=False)
    out = tmp_path / "t.csv"
    res = invoke("forecast", p, "--horizon", 200, "--out", out, "--draws", 20, "--tune", 10)
    assert res.exit_code == 0, res.output
    assert "warning:" in res.output and "'tiny'" in res.output
    t = pd.read_csv(out).set_index("run_id")
    assert t.loc["tiny", "status"] == "error" and "at least 3" in t.loc["tiny", "error"]
    assert (t.loc[["a", "b"], "status"] == "ok").all()
    res = invoke("forecast", p, "--horizon", 200, "--exclude", "tiny", "--draws", 20, "--tune", 10)
    assert res.exit_code == 0 and "tiny" not in res.output
    res = invoke("forecast", p, "--horizon", 200, "--strict")
    assert res.exit_code == 2


def test_a_run_of_three_points_is_forecast_and_says_it_is_rough(tmp_path, mock_sampler):
    """The 10% cut of a 30-point run has 3 points: a forecast (not an error row) that says what was measured
    from so few (up to 5 points); 6 points do not."""
    p = tmp_path / "short.csv"
    steps = np.arange(1, 7)
    rows = [("three", s, 0.1 + 0.02 * s) for s in steps[:3]] + [("six", s, 0.1 + 0.02 * s) for s in steps]
    pd.DataFrame(rows, columns=["run_id", "step", "reward"]).to_csv(p, index=False)
    out = tmp_path / "t.csv"
    res = invoke("forecast", p, "--horizon", 30, "--out", out, "--draws", 20, "--tune", 10)
    assert res.exit_code == 0, res.output
    t = pd.read_csv(out).set_index("run_id")
    assert set(t["status"]) <= {"ok", "warning"} and t.loc["three", "n_obs"] == 3  # forecast, not an error row
    assert "'three'" in res.output and "only 3 logged points" in res.output and "short_prefix" in res.output
    assert res.output.count("logged points, a rough answer") == 1


def test_bad_metadata_cell_warns_and_is_missing(tmp_path, mock_sampler):
    p = write_runs(tmp_path, meta=[{"run_id": "a", "learning_rate": "5e-6 (script default; unverified)", "group_size": -4},
                                   {"run_id": "b", "learning_rate": 1e-6, "group_size": 8}])  # fmt: skip
    res = invoke("summary", p, "--meta", tmp_path / "meta.csv")
    assert res.exit_code == 0
    assert "meta.csv" in res.output and "'learning_rate'" in res.output and "5e-6 (script default" in res.output
    assert "'group_size' is -4" in res.output


def test_constant_curve_is_flagged_and_never_oscillates(tmp_path, mock_sampler):
    p = tmp_path / "flat.csv"
    pd.DataFrame({"run_id": "flat", "step": np.arange(1, 101), "reward": 3.0}).to_csv(p, index=False)
    res = invoke("forecast", p, "--horizon", 300, "--draws", 20, "--tune", 10)
    assert res.exit_code == 0
    assert "constant" in res.output and "assumed scale" in res.output
    res = invoke("diagnose", p)
    assert res.exit_code == 0 and "oscillation" not in res.output and "nan" not in res.output.lower()


def test_ceiling_not_applied_to_runs_on_another_scale(tmp_path):
    p = tmp_path / "sum.csv"
    s = np.arange(1, 101)
    pd.DataFrame({"run_id": "sum", "step": s, "reward": 1.5 + 0.01 * s}).to_csv(p, index=False)
    res = invoke("diagnose", p, "--ceiling", 1.0)
    assert res.exit_code == 0
    assert "starts at" in res.output and "not applied" in res.output
    assert "reward_hacking" not in res.output  # no critical hacking alarm from a ceiling of another scale


def test_censored_stop_step_shown_as_censored(tmp_path, mock_sampler):
    mock_sampler["params"]["tau"] = 5000.0
    p = write_runs(tmp_path, ids=("slow",))
    res = invoke("forecast", p, "--horizon", 200, "--draws", 20, "--tune", 10)
    assert res.exit_code == 0
    assert ">200" in res.output


def test_piped_tables_keep_every_id_and_number_on_one_line(tmp_path):
    long_id = "a-very-long-run-id-that-would-be-folded-in-a-narrow-terminal-0123456789"
    p = write_runs(tmp_path, ids=(long_id, "short"))
    res = invoke("summary", p)
    lines = res.output.splitlines()
    row = [ln for ln in lines if ln.startswith(long_id)]
    assert len(row) == 1 and "0.2" in row[0]


def test_help_of_every_verb_shares_the_grammar():
    for verb in ("forecast", "budget", "diagnose", "backtest", "compare", "summary"):
        res = invoke(verb, "--help")
        assert res.exit_code == 0
        for opt in ("--meta", "--format", "--run", "--exclude", "--out"):
            assert opt in res.output, (verb, opt)
    for verb in ("forecast", "budget", "diagnose", "backtest", "compare"):
        res = invoke(verb, "--help")
        for opt in (
            "--kind" if verb != "compare" else "--kinds",
            "--draws",
            "--tune",
            "--chains",
            "--seed",
            "--out-dir",
        ):
            assert opt in res.output, (verb, opt)


def test_unreadable_prior_is_one_line_not_a_traceback(tmp_path, mock_sampler, monkeypatch):
    p = write_runs(tmp_path)
    monkeypatch.setenv("BAYESGRPO_PRIOR", str(tmp_path / "no_such_prior.json"))
    res = invoke("forecast", p, "--horizon", 200)
    assert res.exit_code == 2, res.output
    one_error_line(res, "no_such_prior.json")
    (tmp_path / "bad.json").write_text("{not json")
    monkeypatch.setenv("BAYESGRPO_PRIOR", str(tmp_path / "bad.json"))
    res = invoke("forecast", p, "--horizon", 200)
    assert res.exit_code == 2, res.output
    one_error_line(res, "bad.json")


def test_until_step_before_the_first_logged_step_names_the_option(tmp_path, mock_sampler):
    s = np.arange(100, 160)
    p = tmp_path / "late.csv"
    pd.DataFrame({"run_id": "late", "step": s, "reward": 0.2 + 0.001 * s}).to_csv(p, index=False)
    res = invoke("forecast", p, "--horizon", 400, "--until-step", 50)
    assert res.exit_code != 0
    assert "--until-step 50" in res.output and "first logged step is 100" in res.output, res.output


def test_reward_range_the_log_contradicts_is_an_error_row_not_a_clipped_forecast(tmp_path, mock_sampler):
    p = write_runs(tmp_path)  # rewards rise from 0.2 towards 0.7
    res = invoke("forecast", p, "--horizon", 200, "--reward-range", "0,0.5")
    assert "above reward_max 0.5" in res.output and "step" in res.output, res.output
    assert "ok" not in [ln.split()[-1] for ln in res.output.splitlines() if ln.startswith(("a ", "b "))], res.output


def test_kind_is_the_statistical_model_and_model_its_deprecated_alias(tmp_path, mock_sampler):
    """The table's column and the option are ``kind``; ``--model`` (the old name) still works, with a warning."""
    p = write_runs(tmp_path)
    out = tmp_path / "t.csv"
    res = invoke("forecast", p, "--horizon", 200, "--kind", "saturation", "--draws", 20, "--tune", 10, "--out", out)
    assert res.exit_code == 0 and "deprecated" not in res.output
    t = pd.read_csv(out)
    assert "kind" in t.columns and "model" not in t.columns and set(t["kind"]) == {"saturation"}
    res = invoke("forecast", p, "--horizon", 200, "--model", "saturation", "--draws", 20, "--tune", 10, "--out", out)
    assert res.exit_code == 0 and "--model is deprecated: the model kind is --kind" in res.output
    assert set(pd.read_csv(out)["kind"]) == {"saturation"}


def test_retry_option_reaches_the_forecaster(tmp_path, mock_sampler):
    """Chains that disagree (mock chain shift) are sampled again under the default `--retry` (two NUTS calls
    for the one run) and once under `--no-retry`; a run still unhealthy after it is a warning row that says why."""
    p = write_runs(tmp_path, ids=("a",))
    mock_sampler["chain_shift"] = 0.5
    mock_sampler["spread"] = 0.05
    sizes: list = []
    for flag in ("--retry", "--no-retry"):
        mock_sampler["calls"].clear()
        out = tmp_path / f"t{flag}.csv"
        res = invoke("forecast", p, "--horizon", 200, "--draws", 500, "--tune", 20, flag, "--out", out)
        assert res.exit_code == 0, res.output
        sizes.append([c["y"].shape for c in mock_sampler["calls"]])
        row = pd.read_csv(out).iloc[0]  # still poor either way (the mock's chains always disagree): a warning row
        assert row["status"] == "warning" and "r_hat" in row["error"], row.to_dict()
    assert len(sizes[0]) == 2 and len(sizes[1]) == 1
