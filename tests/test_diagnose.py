"""Failure-mode diagnostics (bayesgrpo.diagnose) on constructed series."""

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.diagnose.failure_modes import (
    MODES,
    degenerate_share,
    diagnose_run,
    diagnose_runs,
    expected_group_std,
    posterior_instability,
)
from bayesgrpo.forecast.paths import PathDraws
from bayesgrpo.physics.stability import spectral_radius
from bayesgrpo.plots.diagnosis import plot_diagnosis
from bayesgrpo.schema import RunSet

RANK = {"none": 0, "watch": 1, "warning": 2, "critical": 3}
G, B, N = 8, 16, 300


def grpo_log(p_of_t, *, seed=0, n=N, G=G, entropy=None, length=None, eval_fn=None):
    """A GRPO log from per-step success probabilities: B groups of G Bernoulli rewards per step."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    p = np.clip(p_of_t(t), 0.0, 1.0)
    # prompt heterogeneity: per-group success probabilities around p
    pq = np.clip(p[:, None] + rng.normal(0, 0.05, (n, B)), 0, 1)
    r = (rng.random((n, B, G)) < pq[..., None]).astype(float)
    df = pd.DataFrame(
        {
            "run_id": "r",
            "step": t,
            "reward": r.mean(axis=(1, 2)),
            "reward_std": r.std(axis=2, ddof=1).mean(axis=1),
            "frac_reward_zero_std": (r.std(axis=2) == 0).mean(axis=1),
            "kl": 0.02 * (1 - np.exp(-t / 100)) + rng.normal(0, 0.002, n),
            "entropy": (entropy(t) if entropy else 1.5 - 0.6 * (p - p[0]) / max(p.max() - p[0], 1e-9))
            + rng.normal(0, 0.02, n),
            "completion_length": (length(t) if length else 200 + rng.normal(0, 8, n)),
        }
    )
    ev = eval_fn(t, p) if eval_fn else p - 0.05
    df["eval/accuracy"] = np.where(t % 10 == 0, ev + rng.normal(0, 0.01, n), np.nan)
    return df


def healthy(t):
    return 0.8 - 0.6 * np.exp(-t / 60)


def sev(findings, mode):
    return next(f for f in findings if f.mode == mode)


def test_healthy_saturating_curve_triggers_nothing():
    for seed in range(3):
        fs = diagnose_run(grpo_log(healthy, seed=seed), group_size=G, ceiling=1.0)
        assert [f.mode for f in fs] == list(MODES)
        for f in fs:
            assert RANK[f.severity] <= RANK["watch"], (seed, f.mode, f.severity, f.evidence)
            assert f.evidence


def test_collapse_detected_with_onset():
    df = grpo_log(lambda t: np.where(t < 200, healthy(t), 0.01), seed=1)
    f = sev(diagnose_run(df, group_size=G), "dynamical_instability")
    assert f.severity == "critical", f.evidence
    assert abs(f.onset_step - 200) <= 10
    assert "collapse" in f.evidence
    # degeneracy follows (all-zero groups)
    assert RANK[sev(diagnose_run(df, group_size=G), "advantage_degeneracy").severity] >= RANK["warning"]


def test_transient_dip_is_not_a_collapse():
    df = grpo_log(lambda t: np.where((t > 150) & (t < 170), 0.2, healthy(t)), seed=2)
    f = sev(diagnose_run(df, group_size=G), "dynamical_instability")
    assert RANK[f.severity] <= RANK["watch"], f.evidence


def test_growing_oscillation():
    rng = np.random.default_rng(3)
    t = np.arange(400)
    amp = 0.02 * np.exp(t / 130)
    y = 0.5 + np.clip(amp, 0, 0.4) * np.sin(2 * np.pi * t / 40) + rng.normal(0, 0.01, t.size)
    f = sev(diagnose_run(pd.DataFrame({"step": t, "reward": y})), "dynamical_instability")
    assert RANK[f.severity] >= RANK["warning"], f.evidence
    assert "oscillation" in f.evidence or "fluctuation" in f.evidence


def draws(a, mu, n=50, **kw):
    steps = np.arange(1, 3)
    z = np.zeros((n, 2))
    return PathDraws(
        "r",
        steps,
        z,
        z,
        np.zeros(n),
        np.ones(n),
        np.full(n, 10.0),
        a,
        mu,
        np.zeros(n),
        np.zeros(n),
        last_step=0,
        horizon=2,
        **kw,
    )


def test_posterior_instability_matches_dynamics():
    rng = np.random.default_rng(4)
    a = rng.uniform(0.001, 4.5, 200)
    mu = rng.uniform(0.0, 0.95, 200)
    pi = posterior_instability(draws(a, mu, n=200))
    ref = np.array([spectral_radius(a=ai, momentum=mi) for ai, mi in zip(a, mu, strict=True)])
    assert pi["p_rho_ge_1"] == pytest.approx(np.mean(ref >= 1.0))
    # refresh pattern: mu = 0.9, a = 0.02 -> exact K* = 15 (physics.md section 4)
    assert posterior_instability(draws(np.full(5, 0.02), np.full(5, 0.9), n=5, refresh_interval=10))["p_rho_ge_1"] == 0
    assert posterior_instability(draws(np.full(5, 0.02), np.full(5, 0.9), n=5, refresh_interval=20))["p_rho_ge_1"] == 1
    # lag erodes damping: c = 1 - mu - a d <= 0
    assert posterior_instability(draws(np.full(5, 0.05), np.full(5, 0.5), n=5, lag=20))["p_c_le_0"] == 1


def test_posterior_flag_in_diagnose_runs():
    df = grpo_log(healthy, seed=5)
    rs = RunSet.from_frames(df, pd.DataFrame({"run_id": ["r"], "group_size": [G]}))
    unstable = draws(np.full(40, 4.0), np.full(40, 0.9), n=40)
    stable = draws(np.full(40, 0.02), np.full(40, 0.9), n=40)
    d = diagnose_runs(rs, posteriors={"r": unstable}, ceiling=1.0).set_index("mode")
    assert d.loc["dynamical_instability", "severity"] == "critical"
    assert "spectral radius" in d.loc["dynamical_instability", "evidence"]
    d = diagnose_runs(rs, posteriors={"r": stable}, ceiling=1.0).set_index("mode")
    assert RANK[d.loc["dynamical_instability", "severity"]] <= RANK["watch"]
    assert "posterior draws" not in d.loc["dynamical_instability", "missing"]


def test_stable_posterior_caps_the_oscillation_checks_at_watch():
    """The shape checks (growing scatter, swings) alone say ``warning``; a confidently stable posterior of
    recursion (1) reads them as a stable run's noise (``watch``, with the reason), an unstable one keeps the flag,
    and a collapse is flagged whatever the posterior says."""
    rng = np.random.default_rng(3)
    t = np.arange(400)
    y = 0.5 + np.clip(0.02 * np.exp(t / 130), 0, 0.4) * np.sin(2 * np.pi * t / 40) + rng.normal(0, 0.01, t.size)
    df = pd.DataFrame({"step": t, "reward": y})
    alone = sev(diagnose_run(df), "dynamical_instability")
    stable = sev(diagnose_run(df, draws=draws(np.full(40, 0.02), np.full(40, 0.9), n=40)), "dynamical_instability")
    unstable = sev(diagnose_run(df, draws=draws(np.full(40, 4.0), np.full(40, 0.9), n=40)), "dynamical_instability")
    assert RANK[alone.severity] >= RANK["warning"], alone.evidence
    assert stable.severity == "watch" and "the fitted dynamics are stable" in stable.evidence, stable.evidence
    assert unstable.severity == "critical", unstable.evidence
    col = grpo_log(lambda t: np.where(t < 200, healthy(t), 0.01), seed=1)
    f = sev(diagnose_run(col, group_size=G, draws=draws(np.full(40, 0.02), np.full(40, 0.9), n=40)),
            "dynamical_instability")  # fmt: skip
    assert f.severity == "critical" and "collapse" in f.evidence, f.evidence


def test_reward_hacking_eval_decouples():
    df = grpo_log(healthy, seed=6, eval_fn=lambda t, p: 0.3 + 0.2 * np.exp(-(((t - 80) / 60.0) ** 2)) - 0.0005 * t)
    f = sev(diagnose_run(df, group_size=G), "reward_hacking")
    assert f.severity == "critical", f.evidence
    assert "eval" in f.evidence and f.onset_step is not None


def test_reward_hacking_ceiling_and_length_runaway():
    df = grpo_log(healthy, seed=7)
    f = sev(diagnose_run(df, group_size=G, ceiling=0.6), "reward_hacking")
    assert f.severity == "critical" and "ceiling" in f.evidence
    df = grpo_log(healthy, seed=8, length=lambda t: 150 * np.exp(t / 150))
    f = sev(diagnose_run(df, group_size=G, ceiling=1.0), "reward_hacking")
    assert RANK[f.severity] >= RANK["warning"] and "runaway" in f.evidence


def test_degeneracy_prediction_formula():
    assert degenerate_share(0.5, 2) == pytest.approx(0.5)
    assert degenerate_share(0.2, 4) == pytest.approx(0.2**4 + 0.8**4)
    assert np.allclose(degenerate_share(np.array([0.0, 1.0]), 16), 1.0)
    assert degenerate_share(np.array([0.1, 0.5]), np.array([8, 8])) == pytest.approx([0.9**8 + 0.1**8, 2 * 0.5**8])
    # Monte Carlo: the zero-variance share of G Bernoulli(p) draws
    rng = np.random.default_rng(9)
    r = rng.random((200_000, 4)) < 0.3
    mc = np.mean(r.all(axis=1) | (~r).all(axis=1))
    assert mc == pytest.approx(degenerate_share(0.3, 4), abs=0.005)
    # expected unbiased within-group std: G = 2, p = 1/2 -> half the groups split, each sqrt(1/2)
    assert expected_group_std(0.5, 2) == pytest.approx(0.5 * np.sqrt(0.5))
    assert expected_group_std(0.5, 2, given_nondegenerate=True) == pytest.approx(np.sqrt(0.5))
    mc_sd = r.astype(float).std(axis=1, ddof=1).mean()
    assert mc_sd == pytest.approx(expected_group_std(0.3, 4), abs=0.005)


def test_advantage_degeneracy_triggered():
    # reward stuck low while the zero-variance share rises toward 1 (groups all-fail)
    df = grpo_log(lambda t: 0.15 * np.exp(-t / 80) + 0.005, seed=10)
    f = sev(diagnose_run(df, group_size=G, ceiling=1.0), "advantage_degeneracy")
    assert f.severity == "critical", f.evidence
    assert "predicted p^G+(1-p)^G" in f.evidence and f.onset_step is not None
    # the same physics without frac_reward_zero_std: implied from reward_std
    f = sev(diagnose_run(df.drop(columns="frac_reward_zero_std"), group_size=G, ceiling=1.0), "advantage_degeneracy")
    assert RANK[f.severity] >= RANK["warning"] and "implied zero-variance share" in f.evidence
    assert "frac_reward_zero_std" in f.missing


def test_policy_concentration_triggered_and_not_when_reward_rises():
    flat = lambda t: 0.3 + 0 * t  # noqa: E731
    df = grpo_log(flat, seed=11, entropy=lambda t: 0.3 + 1.7 * np.exp(-t / 60))
    df["kl"] = 0.01 + 0.002 * np.arange(len(df))
    f = sev(diagnose_run(df, group_size=G, ceiling=1.0), "policy_concentration")
    assert f.severity == "critical", f.evidence
    assert "entropy" in f.evidence and f.onset_step is not None
    # the same entropy fall while the reward rises is ordinary learning
    df = grpo_log(healthy, seed=12, entropy=lambda t: 0.3 + 1.7 * np.exp(-t / 60))
    f = sev(diagnose_run(df, group_size=G, ceiling=1.0), "policy_concentration")
    assert RANK[f.severity] <= RANK["watch"], f.evidence


def test_missing_metrics_reported():
    t = np.arange(100)
    df = pd.DataFrame({"step": t, "reward": 0.8 - 0.6 * np.exp(-t / 30)})
    fs = {f.mode: f for f in diagnose_run(df)}
    assert set(fs["reward_hacking"].missing) == {"eval/*", "completion_length", "ceiling (not given)"}
    assert set(fs["advantage_degeneracy"].missing) == {"frac_reward_zero_std", "reward_std", "group_size (meta)"}
    assert set(fs["policy_concentration"].missing) == {"entropy", "reward_std", "kl"}
    assert fs["dynamical_instability"].missing == ("posterior draws",)
    assert not fs["advantage_degeneracy"].assessed and not fs["policy_concentration"].assessed
    assert not fs["reward_hacking"].assessed and fs["dynamical_instability"].assessed
    assert all(f.severity == "none" for f in fs.values())
    # an all-NaN column counts as missing
    df["kl"] = np.nan
    assert "kl" in {f.mode: f for f in diagnose_run(df)}["policy_concentration"].missing


def test_diagnose_runs_table_and_plot(tmp_path):
    a = grpo_log(healthy, seed=13)
    b = grpo_log(lambda t: np.where(t < 150, healthy(t), 0.01), seed=14).assign(run_id="c")
    rs = RunSet.from_frames(pd.concat([a, b]), pd.DataFrame({"run_id": ["r", "c"], "group_size": [G, G]}))
    d = diagnose_runs(rs, ceiling={"r": 1.0, "c": 1.0})
    assert len(d) == 8
    assert list(d.columns) == ["run_id", "mode", "severity", "onset_step", "evidence", "missing", "assessed", "score"]
    assert str(d["onset_step"].dtype) == "Int64"
    row = d[(d.run_id == "c") & (d["mode"] == "dynamical_instability")].iloc[0]
    assert row["severity"] == "critical"
    fig = plot_diagnosis(rs, "c", d)
    fig.savefig(tmp_path / "d.png", dpi=50)
    assert len(fig.axes) >= 5


def test_too_few_points_not_assessed():
    fs = diagnose_run(pd.DataFrame({"step": [0, 1, 2], "reward": [0.1, 0.2, 0.3]}))
    assert len(fs) == 4 and all(not f.assessed and f.severity == "none" for f in fs)


def test_cli_says_once_what_no_log_holds(tmp_path):
    """Per run, the metrics it does not log (one separator, no leading space); the ceiling a run's reward passes and
    the posterior not fitted are said once, with the option that gives them -- not as 'not logged' per run."""
    from pathlib import Path

    from typer.testing import CliRunner

    from bayesgrpo.cli import app

    data = Path(__file__).parent / "data" / "grpo_small"
    res = CliRunner().invoke(app, ["diagnose", str(data / "runs.csv"), "--meta", str(data / "meta.csv"),
                                   "--ceiling", "1.0"])  # fmt: skip
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if "not logged, so not assessed from them: " in ln]
    assert len(lines) == 6
    for ln in lines:
        items = ln.split("not assessed from them: ", 1)[1].split(", ")
        assert items == sorted(items) and all(i == i.strip() and "," not in i for i in items), ln
        assert "posterior draws" not in ln and "ceiling" not in ln
    assert "run(s) without a verifiable ceiling" in res.output and "their reward passes --ceiling" in res.output
    assert res.output.count("add --posterior") == 1
