"""A built wheel behaves exactly like the source tree: it ships the prior and the example run and
forecasts the example with the same numbers (same seed).

The wheel is installed into a fresh virtualenv (``python -m venv``) whose dependencies are borrowed
from the test environment through a path-only ``.pth`` file (its editable-install hook is not
processed, so ``import bayesgrpo`` can only find the wheel).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import bayesgrpo
from bayesgrpo import Forecaster, SamplerConfig, read_runs
from bayesgrpo.models.kinds import default_prior
from bayesgrpo.resources import example_meta, example_run
runs = read_runs(example_run(), meta=example_meta()).truncate(until_step=150)
fit = Forecaster(sampler=SamplerConfig(draws=60, tune=60, seed=11)).fit(runs, horizon=500)
t = fit.table()
cols = ["final_q05", "final_q50", "final_q95", "stop_q50", "plateau_q50"]
print(json.dumps({"file": bayesgrpo.__file__, "prior": default_prior().identity,
                  "example": str(example_run()), "table": t[cols].iloc[0].tolist()}))
"""


def _run(python: str, cwd: Path, env: dict) -> dict:
    out = subprocess.run([python, "-c", SCRIPT], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_wheel_forecasts_the_example_exactly_like_the_source_tree(tmp_path):
    dist = tmp_path / "dist"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(dist), str(ROOT)], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = dist.glob("bayesgrpo-*.whl")
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert "bayesgrpo/resources/population_prior.json" in names
    assert "bayesgrpo/resources/examples/example-grpo-run/trainer_state.json" in names
    assert "bayesgrpo/resources/examples/meta.csv" in names

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    py = str(venv / "bin" / "python")
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    deps = sysconfig.get_paths()["purelib"]  # this environment's site-packages (pymc, nutpie, ...)
    Path(site, "borrowed_deps.pth").write_text(deps + "\n")
    inst = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", site, str(wheel)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert inst.returncode == 0, inst.stderr[-2000:]

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BAYESGRPO_PRIOR")}
    installed = _run(py, tmp_path, env)
    source = _run(sys.executable, ROOT, {**env, "PYTHONPATH": str(ROOT)})
    assert installed["file"].startswith(site), installed["file"]  # the wheel, not the source tree
    assert source["file"].startswith(str(ROOT / "bayesgrpo"))
    assert installed["prior"] == source["prior"]
    assert installed["example"].startswith(site)
    assert installed["table"] == source["table"]  # same seed, same numbers
