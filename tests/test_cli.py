"""The CLI as a user meets it: help, summary, one-line errors (no tracebacks), gz testbed data."""

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bayesgrpo.cli import app
from bayesgrpo.resources import example_run

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "grpo-public"
runner = CliRunner()


def test_help_lists_commands():
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0
    for cmd in ("summary", "forecast", "demo", "budget", "diagnose", "backtest", "compare", "testbed"):
        assert cmd in res.output


@pytest.mark.skipif(not SHARED.exists(), reason="shared development data absent")
def test_summary_lists_100_real_runs():
    res = runner.invoke(app, ["summary", str(SHARED / "runs.csv"), "--meta", str(SHARED / "meta.csv")])
    assert res.exit_code == 0, res.output
    assert "100 run(s), 13671 points" in res.output


def test_summary_reads_shipped_example_and_gz_testbed():
    res = runner.invoke(app, ["summary", str(example_run())])
    assert res.exit_code == 0 and "1 run(s), 500 points" in res.output
    res = runner.invoke(
        app, ["summary", str(ROOT / "data/testbed/runs.csv.gz"), "--meta", str(ROOT / "data/testbed/meta.csv.gz")]
    )
    assert res.exit_code == 0, res.output
    assert re.search(r"\d+ run\(s\), \d+ points", res.output)


def test_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("run_id,step,reward\nr,1,0.1\nr,2,abc\n")
    res = runner.invoke(app, ["forecast", str(bad), "--horizon", "100"])
    assert res.exit_code == 2
    assert "Traceback" not in res.output
    assert "bad.csv" in res.output and "line 3" in res.output
    res = runner.invoke(app, ["forecast", str(tmp_path / "missing.csv")])
    assert res.exit_code == 2 and "no such file" in res.output
    few = tmp_path / "few.csv"
    few.write_text("run_id,step,reward\nr,1,0.1\nr,2,0.2\n")
    res = runner.invoke(app, ["forecast", str(few), "--horizon", "100"])  # the only run: an error row, exit 1
    assert res.exit_code == 1 and "'r'" in res.output and "at least 3" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["forecast", str(few), "--horizon", "100", "--strict"])
    assert res.exit_code == 2 and "at least 3" in res.output
    res = runner.invoke(app, ["forecast", str(few), "--model", "magic"])
    assert res.exit_code == 2 and "--model 'magic' is not a model kind" in res.output


def test_architecture_module_map_is_true():
    """Every path named in ARCHITECTURE.md exists, and every module of every package is named there."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    named = set(re.findall(r"`(bayesgrpo/[\w/]+(?:\.py|/))`", text))
    for path in named:
        assert (ROOT / path).exists(), f"ARCHITECTURE.md names {path}, which does not exist"
    mods = {
        str(p.relative_to(ROOT))
        for p in (ROOT / "bayesgrpo").rglob("*.py")
        if "__pycache__" not in p.parts
        and not (
            p.name == "__init__.py" and p.parent != ROOT / "bayesgrpo" and p.parent.name not in ("io", "resources")
        )
    }
    missing = sorted(mods - named)
    assert not missing, f"modules missing from ARCHITECTURE.md: {missing}"


def test_summary_lists_grpo_small_real_runs():
    small = ROOT / "tests" / "data" / "grpo_small"
    res = runner.invoke(app, ["summary", str(small / "runs.csv"), "--meta", str(small / "meta.csv")])
    assert res.exit_code == 0, res.output
    assert "6 run(s), 297 points" in res.output and "Traceback" not in res.output


def test_summary_reads_every_committed_format_at_once():
    """All readable committed fixtures (11 formats) in one `summary` call: ids made unique, warnings shown."""
    formats = ROOT / "tests" / "data" / "formats"
    refused = ("edge_sft", "tfevents.1739394275")
    paths = sorted(str(p) for p in formats.rglob("*") if p.is_file() and not any(r in p.name for r in refused))
    assert len(paths) == 27
    res = runner.invoke(app, ["summary", *paths])
    assert res.exit_code == 0, res.output
    assert "31 run(s), 721 points" in res.output  # sum of the per-file counts in tests/test_io.py::COMMITTED
    out = " ".join(res.output.split())
    assert "warning:" in out and "already used; renamed to" in out and "assumed logging_steps=1" in out


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("edge_sft", "not a GRPO run (SFT or other Trainer?)"),
        ("tfevents.1739394275", "no scalar summaries in the TensorBoard event file(s)"),
    ],
)
def test_refused_fixtures_give_one_line_errors(key, reason):
    path = next(p for p in (ROOT / "tests" / "data" / "formats").rglob("*") if key in p.name)
    res = runner.invoke(app, ["summary", str(path)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    out = " ".join(res.output.split())
    assert reason in out and path.name in out
