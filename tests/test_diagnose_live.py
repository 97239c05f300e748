"""Live collapse detection through the CLI (issue 33 item 5): ``diagnose --until-step`` a few steps after the
reward's rolling mean leaves the band of its plateau (bayesgrpo.diagnose.collapse_band) says ``critical``."""

import warnings

import numpy as np
import pandas as pd
import pytest
from shared_data import shared_data
from typer.testing import CliRunner

from bayesgrpo.cli import app
from bayesgrpo.diagnose.collapse_band import band_collapse, band_exits, band_track
from bayesgrpo.io import read_runs

runner = CliRunner()


SHARED = shared_data()
WANDB = sorted((SHARED / "log-formats" / "wandb_csv").glob("three-runs_*TrainReward.csv")) if SHARED else []
needs_wandb = pytest.mark.skipif(not WANDB, reason="shared/data (W&B export fixture) not available")


def diagnose_table(tmp_path, *args) -> pd.DataFrame:
    out = tmp_path / "diag.csv"
    res = runner.invoke(app, ["diagnose", *map(str, args), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return pd.read_csv(out)


def severity(tab: pd.DataFrame, rid: str, mode: str = "dynamical_instability") -> str:
    return str(tab[(tab["run_id"] == rid) & (tab["mode"] == mode)]["severity"].iloc[0])


def band_exit_step(step, y) -> int:
    """The collapse's band exit: the last exit before the rolling mean's lowest point after its highest."""
    tr = band_track(y)
    r = tr["r"].to_numpy()
    top = int(np.nanargmax(r))
    low = top + int(np.nanargmin(r[top:]))
    ex = band_exits(tr)
    return int(step[ex[ex <= low][-1]])


@needs_wandb
@pytest.mark.parametrize(("rid", "exit_step"), [("[paper]GRPO_online", 901), ("[paper]GSPO_online", 1186)])
def test_wandb_collapse_is_critical_30_steps_after_band_exit(tmp_path, rid, exit_step):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = read_runs(WANDB[0]).run(rid)
    step, y = df["step"].to_numpy(), df["reward"].to_numpy(float)
    assert np.all(np.diff(step) == 1)  # one logged point per step: 30 steps = 30 logged points
    assert band_exit_step(step, y) == exit_step
    before = diagnose_table(tmp_path, WANDB[0], "--run", rid, "--until-step", exit_step - 10)
    assert severity(before, rid) != "critical"  # no alarm on the plateau
    tab = diagnose_table(tmp_path, WANDB[0], "--run", rid, "--until-step", exit_step + 30)
    assert severity(tab, rid) == "critical"
    ev = str(tab[(tab["run_id"] == rid) & (tab["mode"] == "dynamical_instability")]["evidence"].iloc[0])
    assert "left the band of its plateau" in ev


def _plateau_runs(seed: int, n: int = 600) -> pd.DataFrame:
    """Healthy 0/1-reward runs: a rise to a noisy, slowly drifting plateau (64 and 8 samples per step)."""
    rng = np.random.default_rng(seed)
    t = np.arange(1, n + 1)
    frames = []
    for k, samples in enumerate((64, 8, 8)):
        drift = 0.04 * np.sin(2 * np.pi * t / rng.uniform(80, 200)) + np.cumsum(rng.normal(0, 0.002, n))
        p = np.clip(0.7 - 0.4 * np.exp(-t / 60) + drift, 0.02, 0.98)
        frames.append(pd.DataFrame({"run_id": f"plateau{k}", "step": t, "reward": rng.binomial(samples, p) / samples}))
    return pd.concat(frames, ignore_index=True)


@pytest.mark.parametrize("seed", [0, 1])
def test_healthy_noisy_plateau_gives_no_critical(tmp_path, seed):
    p = tmp_path / "plateau.csv"
    runs = _plateau_runs(seed)
    runs.to_csv(p, index=False)
    for until in (200, 400, 600):
        tab = diagnose_table(tmp_path, p, "--until-step", until)
        assert not (tab["severity"] == "critical").any(), tab[tab["severity"] == "critical"].to_dict("records")
    # the early check alone, live at every 10 points: never critical
    for rid, g in runs.groupby("run_id"):
        y, s = g["reward"].to_numpy(float), g["step"].to_numpy()
        for k in range(50, y.size + 1, 10):
            assert band_collapse(s[:k], y[:k])["severity"] != "critical", (rid, k)


def test_synthetic_collapse_critical_within_30_points_of_band_exit(tmp_path):
    rng = np.random.default_rng(5)
    t = np.arange(1, 801)
    p = np.where(t < 600, 0.75 - 0.3 * np.exp(-t / 60), np.maximum(0.05, 0.75 - 0.02 * (t - 600)))
    y = rng.binomial(128, p) / 128
    path = tmp_path / "collapse.csv"
    pd.DataFrame({"run_id": "c", "step": t, "reward": y}).to_csv(path, index=False)
    ex = band_exit_step(t, y)
    assert 595 <= ex <= 620
    assert severity(diagnose_table(tmp_path, path, "--until-step", ex + 30), "c") == "critical"
