"""The examples of the README and of the user guide (docs/guide.md) run on the data shipped with the
repository (issue 19, item 19).

Every ``bash`` block of either document is read line by line: ``NAME=value`` lines set variables,
``$B ...`` lines are ``bayesgrpo`` commands (several per line with ``;``; a ``| tee ...`` pipe is dropped),
run through the real CLI from a copy of the repository's layout (so every relative path resolves) with
the sampler mocked (tests/conftest.py) and ``watch``'s worker answering in this process. Every
``python`` block runs too. What cannot run here is listed in :data:`NOT_RUN` with the reason (and
where it is tested instead); a command of either document matching nothing there must run and exit 0.
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
GUIDE = ROOT / "docs" / "guide.md"
#: the documents whose examples run here
DOCS = (README, GUIDE)
#: per document: what its commands must leave behind (relative to the working directory) and how many of its
#: commands and python blocks must run at least (the README's python example trains a model: not run here)
EXPECT = {
    README: {"files": ("out/forecast.csv", "out/report.html", "live.html"), "commands": 5, "python": 0},
    GUIDE: {
        "files": ("out/forecast.csv", "out/backtest/cases.csv", "out/compare/levels.png", "live/forecasts.csv"),
        "commands": 15,
        "python": 1,
    },
}
pytestmark = pytest.mark.slow  # about a minute: every example of the README and the guide, sampling mocked

#: substring of a documented command or python block -> why it is not run here (and what tests it)
NOT_RUN = {
    "bash scripts/": "sets up a virtualenv (scripts/test.sh is what CI runs)",
    "pip install": "installs packages",
    "wandb:": "needs a W&B account (tests/test_watch.py drives the reader with a mocked API)",
    "--scheduler": "needs a running Dask cluster (tests/test_fleet.py starts one)",
    "--workers": "starts a Dask cluster of worker processes (tests/test_fleet.py)",
    "testbed sweep": "177 real training runs, ~5 minutes (tests/test_testbed.py runs small sweeps)",
    "GRPOTrainer(model=": "downloads Qwen2.5-0.5B (tests/test_integration_trl.py trains a tiny local model)",
    "watch(": "follows a log until stopped (the documents' watch commands run here with --idle-timeout)",
    "DaskExecutor(": "starts a Dask cluster (tests/test_fleet.py)",
}


def _blocks(lang: str, doc: Path = README) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", doc.read_text(), flags=re.S)


def _skip(text: str) -> str | None:
    return next((why for key, why in NOT_RUN.items() if key in text), None)


def _commands(doc: Path = README) -> list[tuple[str, list[str]]]:
    """(document line, argv) of every bayesgrpo command in the bash blocks of ``doc``, variables and globs
    expanded."""
    out = []
    for block in _blocks("bash", doc):
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


def _doc_id(doc: Path) -> str:
    return str(doc.relative_to(ROOT))


def test_the_docs_have_the_examples_they_promise():
    cmds = {doc: _commands(doc) for doc in DOCS}
    verbs = {argv[0] for doc in DOCS for _, argv in cmds[doc]}
    assert {"summary", "forecast", "budget", "diagnose", "backtest", "compare", "watch", "formats", "models"} <= verbs
    assert {"forecast", "report", "watch"} <= {argv[0] for _, argv in cmds[README]}  # the README's three examples
    assert any("BayesGRPOCallback(" in b for b in _blocks("python", README))
    for doc in DOCS:
        assert len([c for c in cmds[doc] if not _skip(c[0])]) >= EXPECT[doc]["commands"], _doc_id(doc)


@pytest.mark.parametrize("doc", DOCS, ids=_doc_id)
def test_every_doc_command_runs_on_shipped_data(doc, repo, mock_sampler, inprocess_watch, request):
    runner = CliRunner()
    ran = []
    cmds = [c for c in _commands(doc) if not _skip(c[0])]
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
    missing = [f for f in EXPECT[doc]["files"] if not (repo / f).exists()]
    assert not missing, missing
    assert len(ran) >= EXPECT[doc]["commands"]


@pytest.mark.parametrize("doc", DOCS, ids=_doc_id)
def test_every_doc_python_block_runs(doc, repo, mock_sampler):
    ran = 0
    for block in _blocks("python", doc):
        if _skip(block):
            continue
        exec(compile(block, str(doc), "exec"), {"__name__": "readme"})
        ran += 1
    assert ran >= EXPECT[doc]["python"]
    if ran:
        assert (repo / "fit.nc").exists()
