"""The README's examples run on the data shipped with the repository (issue 19, item 19).

Every ``bash`` block is read line by line: ``NAME=value`` lines set variables, ``$B ...`` lines are
``bayesgrpo`` commands (several per line with ``;``; a ``| tee ...`` pipe is dropped), run through the
real CLI from a copy of the repository's layout (so every relative path of the README resolves) with
the sampler mocked (tests/conftest.py) and ``watch``'s worker answering in this process. Every
``python`` block runs too. What cannot run here is listed in :data:`NOT_RUN` with the reason (and
where it is tested instead); a README command matching nothing there must run and exit 0.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bayesgrpo.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
pytestmark = pytest.mark.slow  # about a minute: every example of the README, sampling mocked

#: substring of a README command or python block -> why it is not run here (and what tests it)
NOT_RUN = {
    "bash scripts/": "sets up a virtualenv (scripts/test.sh is what CI runs)",
    "pip install": "installs packages",
    "wandb:": "needs a W&B account (tests/test_watch.py drives the reader with a mocked API)",
    "--scheduler": "needs a running Dask cluster (tests/test_fleet.py starts one)",
    "--workers": "starts a Dask cluster of worker processes (tests/test_fleet.py)",
    "testbed sweep": "177 real training runs, ~5 minutes (tests/test_testbed.py runs small sweeps)",
    "GRPOTrainer(model=": "downloads Qwen2.5-0.5B (tests/test_integration_trl.py trains a tiny local model)",
    "watch(": "follows a log until stopped (the watch commands of the README run here with --idle-timeout)",
    "DaskExecutor(": "starts a Dask cluster (tests/test_fleet.py)",
}


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(), flags=re.S)


def _skip(text: str) -> str | None:
    return next((why for key, why in NOT_RUN.items() if key in text), None)


def _commands() -> list[tuple[str, list[str]]]:
    """(README line, argv) of every bayesgrpo command in the bash blocks, variables and globs expanded."""
    out = []
    for block in _blocks("bash"):
        block = re.sub(r"\\\n\s*", " ", block)  # a command continued on the next line (a trailing backslash)
        env: dict[str, str] = {}
        for line in block.splitlines():
            code = line.split("  #")[0].split("| tee")[0].strip()
            m = re.fullmatch(r"([A-Z_]+)=(\S+)(\s+#.*)?", line.strip())
            if m:
                env[m.group(1)] = m.group(2)
                continue
            for part in code.split(";"):
                words = shlex.split(part, comments=True)
                if not words or words[0] != "$B":
                    continue
                argv = []
                for w in words[1:]:
                    w = re.sub(r"\$([A-Z_]+)", lambda mm, env=env: env.get(mm.group(1), mm.group(0)), w)
                    hits = sorted(glob.glob(str(ROOT / w))) if any(c in w for c in "*?[") else []
                    argv += [os.path.relpath(h, ROOT) for h in hits] or [w]
                out.append((part.strip(), argv))
    return out


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A working directory with the repository's data folders (symlinked) and a fresh out/."""
    for name in ("bayesgrpo", "tests", "data", "models"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def inprocess_watch(monkeypatch):
    import sys

    import bayesgrpo.integrations.watch as W

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from inprocess_worker import InProcessWorker

    monkeypatch.setattr(W, "ForecastWorker", InProcessWorker)


def test_the_readme_has_the_examples_it_promises():
    cmds = _commands()
    verbs = {argv[0] for _, argv in cmds}
    assert {"summary", "forecast", "budget", "diagnose", "backtest", "compare", "watch", "formats", "models"} <= verbs
    assert len([c for c in cmds if not _skip(c[0])]) >= 15


def test_every_readme_command_runs_on_shipped_data(repo, mock_sampler, inprocess_watch, request):
    runner = CliRunner()
    ran = []
    cmds = [c for c in _commands() if not _skip(c[0])]
    for line, argv in sorted(cmds, key=lambda c: c[1][0] == "compare"):  # compare last:
        if argv[0] == "compare" and "compare" not in ran:  # its models sample their prior (conftest.prior_sampler)
            request.getfixturevalue("prior_sampler")
        if argv[0] == "watch":
            argv = [*argv, "--idle-timeout", "0.5", "--interval", "0.05"]
        res = runner.invoke(app, argv)
        assert "Traceback" not in res.output, (line, res.output[-3000:])
        assert res.exit_code == 0, (line, res.output[-3000:])
        assert not [ln for ln in res.output.splitlines() if ln.startswith("error:")], (line, res.output[-2000:])
        ran.append(argv[0])
    assert (repo / "out" / "forecast.csv").exists() and (repo / "out" / "backtest" / "cases.csv").exists()
    assert (repo / "out" / "compare" / "forest.png").exists() and (repo / "live" / "forecasts.csv").exists()
    assert len(ran) >= 15


def test_every_readme_python_block_runs(repo, mock_sampler):
    ran = 0
    for block in _blocks("python"):
        if _skip(block):
            continue
        exec(compile(block, str(README), "exec"), {"__name__": "readme"})
        ran += 1
    assert ran >= 1 and (repo / "fit.nc").exists()
