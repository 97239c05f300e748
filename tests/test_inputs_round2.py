"""Issue 19, every input answered (round 2): each defect driven through the real CLI as the user met
it (sampling mocked; tests/conftest.py), asserting the exit code, the one-line message, the files left
on disk or the corrected numbers. The Ctrl-C, live and real-sampling items are in
tests/test_inputs_live.py and tests/test_inputs_slow.py."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from bayesgrpo.cli import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
FAST = ("--draws", "20", "--tune", "10")


def invoke(*args, **kw):
    res = runner.invoke(app, [str(a) for a in args], **kw)
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def error_lines(res):
    return [ln for ln in res.output.splitlines() if ln.startswith("error:")]


def one_error_line(res, *needles):
    lines = error_lines(res)
    assert len(lines) == 1, res.output
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def warning_text(res) -> str:
    """Every warning line, joined (warnings may wrap on a narrow console)."""
    return " ".join(" ".join(res.output.split()).split("warning:")[1:])


def curve(steps, lo=0.2, gain=0.5, tau=30.0):
    s = np.asarray(steps, dtype=float)
    return lo + gain * (1 - np.exp(-(s - s[0]) / tau))


def write_long(path, runs: dict, meta=None):
    """runs: run id -> (steps, rewards)."""
    rows = [pd.DataFrame({"run_id": rid, "step": s, "reward": r}) for rid, (s, r) in runs.items()]
    pd.concat(rows).to_csv(path, index=False)
    if meta is not None:
        pd.DataFrame(meta).to_csv(path.with_name("meta.csv"), index=False)
    return path


def table(path) -> pd.DataFrame:
    return pd.read_csv(path).set_index("run_id")


# ============================================================================ 2. --until-step before the first step
@pytest.mark.parametrize("until", [8, 0, -5])
def test_until_step_before_the_first_logged_step_is_an_error_row(tmp_path, mock_sampler, until):
    s10, s1 = np.arange(10, 310, 10), np.arange(1, 301)
    p = write_long(tmp_path / "runs.csv", {"every10": (s10, curve(s10)), "every1": (s1, curve(s1))},
                   meta=[{"run_id": "every10", "max_steps": 300}, {"run_id": "every1", "max_steps": 300}])  # fmt: skip
    out = tmp_path / "t.csv"
    res = invoke("forecast", p, "--meta", tmp_path / "meta.csv", "--until-step", until, "--out", out, *FAST)
    t = table(out)
    assert t.loc["every10", "status"] == "error"
    assert (
        f"--until-step {until}" in t.loc["every10", "error"] and "first logged step is 10" in t.loc["every10", "error"]
    )
    if until == 8:  # the other run is forecast
        assert res.exit_code == 0, res.output
        assert t.loc["every1", "status"] == "ok" and t.loc["every1", "observed_until"] == 8
    else:  # no run left: every row an error, exit 1
        assert res.exit_code == 1, res.output
        assert t.loc["every1", "status"] == "error"


# ============================================================================ 3. sparse step axis
def test_sparse_step_axis_is_refused_within_seconds_naming_the_run_and_grid(tmp_path, mock_sampler):
    s = np.r_[np.arange(10, 110, 10), 1_000_000]
    dense = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {"sparse": (s, curve(s)), "dense": (dense, curve(dense))})
    out = tmp_path / "t.csv"
    t0 = time.perf_counter()
    res = invoke("forecast", p, "--horizon", 2_000_000, "--out", out, *FAST)
    took = time.perf_counter() - t0
    assert took < 30, took
    t = table(out)
    assert t.loc["sparse", "status"] == "error"
    msg = t.loc["sparse", "error"]
    assert "'sparse'" in msg and "grid" in msg and "999,991" in msg, msg
    assert "'sparse'" in warning_text(res)
    # the dense run's horizon of 2,000,000 steps is refused too (propagating every step would take minutes)
    assert t.loc["dense", "status"] == "error" and "1,999,900" in t.loc["dense", "error"]
    assert res.exit_code == 1  # nothing could be forecast
    assert not mock_sampler["calls"]  # refused before any sampling


def test_a_long_but_feasible_horizon_is_forecast(tmp_path, mock_sampler):
    s = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {"d": (s, curve(s))})
    out = tmp_path / "t.csv"
    res = invoke("forecast", p, "--horizon", 20_000, "--out", out, *FAST)
    assert res.exit_code == 0, res.output
    assert table(out).loc["d", "status"] == "ok"


def test_long_work_is_announced_before_it_starts(tmp_path, mock_sampler):
    s = np.r_[np.arange(1, 100), np.arange(100, 8001, 50)]  # a grid of 8,000 steps: minutes of fitting
    p = write_long(tmp_path / "runs.csv", {"long": (s, curve(s, tau=2000.0))})
    res = invoke("forecast", p, "--horizon", 9000, *FAST)
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "run 'long': a grid of 8,000 steps" in out and "takes about" in out
    assert out.index("takes about") < out.index("final reward =")  # said before the table, i.e. before the work


# ============================================================================ 4. bounds kept by the latent state
def _near_one(n=120):
    s = np.arange(1, n + 1)
    r = np.clip(0.55 + 0.42 * (1 - np.exp(-s / 25)) + 0.03 * np.random.default_rng(2).standard_normal(n), 0, 1)
    return s, r


@pytest.mark.parametrize("kind", ["oscillator", "degeneracy"])
def test_known_bounds_bound_the_plateau_of_the_model(kind):
    import pymc as pm

    from bayesgrpo.models.arrays import prepare_arrays
    from bayesgrpo.models.kinds import default_prior, get_kind
    from bayesgrpo.schema import RunSet

    s, r = _near_one()
    runs = RunSet.from_frames(pd.DataFrame({"run_id": "r", "step": s, "reward": r}), None)  # [0, 1] inferred
    prior = default_prior(kind)
    arr, infos = prepare_arrays(runs, horizon=500, prior=prior)
    assert arr.ceil_known[0] == 1.0 and arr.ceil[0] == pytest.approx((1 - infos[0].loc) / infos[0].scale)
    with get_kind(kind).build(arr, prior=prior):
        pri = pm.sample_prior_predictive(draws=4000, random_seed=1)
    r_star = pri["prior"]["r_star"].to_numpy().ravel()
    raw = (pri["prior"]["r0"] + prior.values_at(arr.fraction)["gain_mu"][0]).to_numpy().ravel()
    assert (raw > arr.ceil[0]).mean() > 0.05  # without the bound the prior puts plateaus above 1 ...
    assert r_star.max() <= arr.ceil[0] + 1e-12 and r_star.min() >= arr.floor[0] - 1e-12  # ... with it, none


def test_latent_paths_and_plateau_stay_inside_known_bounds(tmp_path, mock_sampler):
    mock_sampler["params"].update(r_star=3.0, sigma_p=0.05)  # a fit that (unbounded) would plateau far above 1
    s, r = _near_one()
    p = write_long(tmp_path / "runs.csv", {"r": (s, r)})
    out, figs = tmp_path / "t.csv", tmp_path / "figs"
    res = invoke("forecast", p, "--horizon", 500, "--out", out, "--out-dir", figs, *FAST)
    assert res.exit_code == 0, res.output
    paths = pd.read_csv(figs / "paths.csv")
    assert paths["latent_mean"].max() <= 1.0 and paths["yhat_q95"].max() <= 1.0 and paths["yhat"].max() <= 1.0
    t = table(out).loc["r"]
    assert t.plateau_q95 <= 1.0 and t.final_q95 <= 1.0


# ============================================================================ 5. no silent [0, 1]
def test_tiny_rewards_get_no_silent_unit_bounds(tmp_path, mock_sampler):
    mock_sampler["spread"] = 0.3  # posterior spread of the plateau, in normalised units
    s = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {"tiny": (s, 0.001 + 0.006 * (1 - np.exp(-s / 30)))})
    out, ranged = tmp_path / "t.csv", tmp_path / "r.csv"
    res = invoke("forecast", p, "--horizon", 300, "--out", out, *FAST)
    assert res.exit_code == 0, res.output
    w = warning_text(res)  # a rate flat at its floor may rise: assumed, but never silently
    assert "'tiny'" in w and "less than 5% of [0, 1]" in w and "--reward-range" in w, res.output
    res = invoke("forecast", p, "--horizon", 300, "--out", ranged, "--reward-range", "0,0.01", *FAST)
    assert "less than 5%" not in warning_text(res)  # declared: no warning, and the width follows the declared range
    width = lambda t: float(t.loc["tiny", "final_q90"] - t.loc["tiny", "final_q10"])  # noqa: E731
    assert width(table(ranged)) < 0.1 * width(table(out)), (width(table(out)), width(table(ranged)))


def test_a_flat_pass_rate_at_its_floor_keeps_room_to_rise(tmp_path, mock_sampler):
    mock_sampler["spread"] = 0.3
    s = np.arange(1, 26)
    p = write_long(tmp_path / "runs.csv", {"floor": (s, np.full(s.size, 0.01))})
    out = tmp_path / "t.csv"
    res = invoke("forecast", p, "--horizon", 116, "--out", out, *FAST)
    assert res.exit_code == 0, res.output
    assert "assumed a rate in [0, 1]" in warning_text(res)
    t = table(out).loc["floor"]
    assert t.final_q90 - t.final_q10 > 0.05  # the [0, 1] scale: room above, not a copy of the flat prefix


def test_a_reward_of_1e_12_is_forecast_on_its_own_scale(tmp_path, mock_sampler):
    mock_sampler["spread"] = 0.3
    s = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {"pico": (s, 1e-12 * (1 + 0.5 * (1 - np.exp(-s / 30))))})
    out = tmp_path / "t.csv"
    res = invoke("forecast", p, "--horizon", 300, "--out", out, *FAST)
    assert res.exit_code == 0, res.output
    t = table(out).loc["pico"]
    assert t.final_q90 - t.final_q10 < 10 * 1.5e-12, (t.final_q10, t.final_q90)


# ============================================================================ 6. finished runs
def test_a_run_logged_to_its_horizon_is_complete_with_the_observed_final_reward(tmp_path, mock_sampler):
    s = np.arange(1, 101)
    r = curve(s)
    p = write_long(tmp_path / "runs.csv", {"done": (s, r)})
    out = tmp_path / "t.csv"
    res = invoke("forecast", p, "--horizon", 100, "--out", out, *FAST)
    assert res.exit_code == 0, res.output
    t = table(out).loc["done"]
    assert t.status == "complete"
    want = r[s > 1 + 0.9 * 99].mean()  # the mean logged reward over the final window (s0 + 0.9 (H - s0), H]
    for q in ("final_q05", "final_q10", "final_q50", "final_q90", "final_q95", "final_mean"):
        assert t[q] == pytest.approx(want, rel=1e-12), q
    assert t.horizon == 100 and t.observed_until == 100
    assert "complete" in res.output and "error" not in res.output.lower()
    # a horizon before the last step: the final reward of that horizon, observed
    res = invoke("forecast", p, "--horizon", 50, "--out", out, *FAST)
    t = table(out).loc["done"]
    assert t.status == "complete" and t.horizon == 50
    assert t.final_q50 == pytest.approx(r[(s > 1 + 0.9 * 49) & (s <= 50)].mean())
    assert not mock_sampler["calls"]


def test_a_run_that_reached_max_steps_is_complete_without_a_horizon(tmp_path, mock_sampler):
    s = np.arange(1, 201)
    p = write_long(tmp_path / "runs.csv", {"done": (s, curve(s)), "going": (s, curve(s))},
                   meta=[{"run_id": "done", "max_steps": 200}, {"run_id": "going", "max_steps": 400}])  # fmt: skip
    out = tmp_path / "t.csv"
    res = invoke("forecast", p, "--meta", tmp_path / "meta.csv", "--out", out, *FAST)
    assert res.exit_code == 0, res.output
    t = table(out)
    assert t.loc["done", "status"] == "complete" and t.loc["done", "horizon"] == 200
    assert t.loc["going", "status"] == "ok" and t.loc["going", "horizon"] == 400


# ============================================================================ 7. one horizon
def test_horizon_below_max_steps_warns_and_is_the_forecast_of_the_planned_run(tmp_path, mock_sampler):
    s = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {"r": (s, curve(s))}, meta=[{"run_id": "r", "max_steps": 1000}])
    meta = tmp_path / "meta.csv"
    many = ("--draws", "1000", "--tune", "10")
    short, full = tmp_path / "short", tmp_path / "full"
    res = invoke("forecast", p, "--meta", meta, "--horizon", 200, "--out", short / "t.csv", "--out-dir", short, *many)
    assert res.exit_code == 0, res.output
    w = warning_text(res)
    assert "'r'" in w and "--horizon 200" in w and "max_steps 1000" in w, res.output
    res = invoke("forecast", p, "--meta", meta, "--out-dir", full, *many)
    assert res.exit_code == 0 and "--horizon" not in warning_text(res)
    assert table(short / "t.csv").loc["r", "horizon"] == 200
    # one forecast: the one to step 200 is the one of the planned 1000 steps read at step 200
    a = pd.read_csv(short / "paths.csv").set_index("step").loc[200]
    b = pd.read_csv(full / "paths.csv").set_index("step").loc[200]
    for q in ("yhat_q10", "yhat_q50", "yhat_q90"):
        assert a[q] == pytest.approx(b[q], abs=0.005), (q, a[q], b[q])
    fr = [c["fraction"] for c in mock_sampler["calls"]]
    assert fr[0] == pytest.approx(99 / 999) and fr[1] == pytest.approx(99 / 999)  # the share of the planned run


# ============================================================================ 8. a constant curve settles
def test_a_constant_curve_has_settled_and_budget_says_stop_now(tmp_path, mock_sampler):
    # what a fit of a reward that is exactly 0.5 for 200 steps gives: no gain left to realise, a slow timescale
    mock_sampler["params"].update(r_star=0.002, tau=3000.0)
    s = np.arange(1, 201)
    p = write_long(tmp_path / "runs.csv", {"flat": (s, np.full(s.size, 0.5))})
    out = tmp_path / "t.csv"
    res = invoke("forecast", p, "--horizon", 400, "--out", out, *FAST)
    assert res.exit_code == 0, res.output
    t = table(out).loc["flat"]
    assert t.p_stop_before_horizon == 1.0 and t.stop_q50 <= 200
    assert ">400" not in res.output
    bud = tmp_path / "b.csv"
    res = invoke("budget", p, "--horizon", 400, "--out", bud, *FAST)
    assert res.exit_code == 0, res.output
    rec = pd.read_csv(bud).iloc[0]
    assert rec["step"] <= 200, rec.to_dict()


def test_a_rising_run_still_settles_late(tmp_path, mock_sampler):
    mock_sampler["params"].update(r_star=1.0, tau=3000.0)  # a real gain to come: not settled
    s = np.arange(1, 201)
    p = write_long(tmp_path / "runs.csv", {"rise": (s, curve(s, tau=3000.0))})
    out = tmp_path / "t.csv"
    invoke("forecast", p, "--horizon", 400, "--out", out, *FAST)
    assert table(out).loc["rise", "p_stop_before_horizon"] == 0.0


# ============================================================================ 11. honest status
def test_poor_sampler_health_is_a_warning_status_in_every_table(tmp_path, mock_sampler):
    mock_sampler["chain_shift"] = 0.5  # the two chains disagree: r_hat far above 1.05, ESS tiny
    s = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {"bad": (s, curve(s))})
    out = tmp_path / "t.csv"
    res = invoke("forecast", p, "--horizon", 300, "--out", out, *FAST)
    assert res.exit_code == 0, res.output
    t = table(out).loc["bad"]
    assert t.status == "warning" and t.r_hat_max > 1.05
    assert "sampler health" in t.error and "r_hat" in t.error
    row = [ln for ln in res.output.splitlines() if ln.startswith("bad ")]
    assert row and "warning" in row[0] and " ok" not in row[0], res.output
    bud = tmp_path / "b.csv"
    invoke("budget", p, "--horizon", 300, "--out", bud, *FAST)
    assert pd.read_csv(bud).iloc[0]["status"] == "warning"


def test_good_sampler_health_stays_ok(tmp_path, mock_sampler):
    s = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {"good": (s, curve(s))})
    out = tmp_path / "t.csv"
    invoke("forecast", p, "--horizon", 300, "--out", out, *FAST)
    assert table(out).loc["good", "status"] == "ok"


# ============================================================================ 12. the umask
@pytest.fixture
def umask027():
    old = os.umask(0o027)
    yield 0o640
    os.umask(old)


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_output_files_follow_the_umask(tmp_path, mock_sampler, umask027):
    s = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {"a": (s, curve(s)), "b": (s, curve(s, gain=0.3))})
    out, figs = tmp_path / "t.csv", tmp_path / "figs"
    res = invoke("forecast", p, "--horizon", 300, "--out", out, "--out-dir", figs, *FAST)
    assert res.exit_code == 0, res.output
    files = [out, *figs.iterdir()]
    assert len(files) == 4
    assert {f.name: _mode(f) for f in files} == {f.name: umask027 for f in files}
    bt = tmp_path / "bt"
    res = invoke("backtest", p, "--cutoffs", "0.3", "--peers", "last_value", "--out-dir", bt, *FAST)
    assert res.exit_code == 0, res.output
    written = [f for f in bt.rglob("*") if f.is_file()]
    assert len(written) >= 4 and all(_mode(f) == umask027 for f in written), {f.name: oct(_mode(f)) for f in written}


# ============================================================================ 13. output paths checked first
def test_out_in_an_impossible_place_is_refused_before_sampling(tmp_path, mock_sampler):
    s = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {"a": (s, curve(s))})
    res = invoke("forecast", p, "--horizon", 300, "--out", "/proc/nope/f.csv", *FAST)
    assert res.exit_code == 2
    one_error_line(res, "--out", "/proc/nope/f.csv")
    assert not mock_sampler["calls"]


@pytest.mark.parametrize(
    ("verb", "blocker"),
    [
        (["forecast", "--horizon", "300"], "paths.csv"),
        (["forecast", "--horizon", "300"], "a.png"),
        (["diagnose"], "a_diagnosis.png"),
        (["budget", "--horizon", "300"], "a_budget.csv"),
        (["backtest", "--cutoffs", "0.3", "--peers", "none"], "cases.csv"),
    ],
)
def test_a_folder_where_an_output_file_goes_is_refused_before_any_work(tmp_path, mock_sampler, verb, blocker):
    s = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {"a": (s, curve(s))})
    d = tmp_path / "outdir"
    (d / blocker).mkdir(parents=True)
    res = invoke(verb[0], p, *verb[1:], "--out-dir", d, *FAST)
    assert res.exit_code == 2, res.output
    one_error_line(res, "--out-dir", blocker, "folder")
    assert not mock_sampler["calls"]
    assert sorted(f.name for f in d.iterdir()) == [blocker]  # nothing half-written


# ============================================================================ 14. diagnose
def test_diagnose_posterior_on_a_complete_run_logged_every_5_steps(tmp_path, mock_sampler):
    s = np.arange(5, 505, 5)
    p = write_long(tmp_path / "runs.csv", {"every5": (s, curve(s, tau=100.0))})
    out = tmp_path / "d.csv"
    res = invoke("diagnose", p, "--posterior", "--out", out, *FAST)
    assert res.exit_code == 0, res.output
    d = pd.read_csv(out)
    inst = d[d["mode"] == "dynamical_instability"].iloc[0]
    assert "posterior draws" not in str(inst["missing"]), inst.to_dict()
    assert mock_sampler["calls"]


def test_ceiling_contradicted_late_in_the_run_is_not_applied(tmp_path):
    s = np.arange(1, 301)
    summed = 0.3 + 2.2 * (1 - np.exp(-s / 60))  # a sum of reward functions: starts below 1, ends at 2.5
    p = write_long(tmp_path / "runs.csv", {"summed": (s, summed), "rate": (s, curve(s))})
    out = tmp_path / "d.csv"
    res = invoke("diagnose", p, "--ceiling", 1.0, "--out", out, "--out-dir", tmp_path / "figs")
    assert res.exit_code == 0, res.output
    w = warning_text(res)
    assert "'summed'" in w and "not applied" in w and "step" in w, res.output
    d = pd.read_csv(out).set_index(["run_id", "mode"])
    assert d.loc[("summed", "reward_hacking"), "severity"] in ("none", "watch")
    assert "ceiling (not given)" in d.loc[("summed", "reward_hacking"), "missing"]
    assert "within the ceiling 1" in d.loc[("rate", "reward_hacking"), "evidence"]


def test_the_diagnosis_figure_draws_the_ceiling(tmp_path):
    from bayesgrpo.io import read_runs
    from bayesgrpo.plots.diagnosis import plot_diagnosis

    s = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {"rate": (s, curve(s))})
    fig = plot_diagnosis(read_runs(p), "rate", ceiling=1.0)
    ax = fig.axes[0]
    flat = [ln for ln in ax.get_lines() if np.allclose(np.asarray(ln.get_ydata(), float), 1.0)]
    assert flat and any("ceiling" in str(ln.get_label()) for ln in flat)


# ============================================================================ 15. late or missing validation
def test_negative_seed_is_refused_before_reading(tmp_path, mock_sampler):
    s = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {"a": (s, curve(s))})
    for verb in (["forecast", "--horizon", "300"], ["budget", "--horizon", "300"], ["backtest"], ["compare"],
                 ["diagnose", "--posterior"]):  # fmt: skip
        res = invoke(verb[0], p, *verb[1:], "--seed", -1)
        assert res.exit_code == 2, (verb, res.output)
        one_error_line(res, "--seed", "-1")
    assert not mock_sampler["calls"]


@pytest.mark.parametrize("ceiling", ["nan", "inf", "-inf"])
def test_diagnose_ceiling_must_be_a_finite_number(tmp_path, ceiling):
    s = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {"a": (s, curve(s))})
    res = invoke("diagnose", p, "--ceiling", ceiling)
    assert res.exit_code == 2, res.output
    one_error_line(res, "--ceiling", ceiling)


def test_a_ceiling_below_every_reward_is_never_silently_ignored(tmp_path):
    s = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {"a": (s, curve(s))})  # rewards 0.2 .. 0.7
    res = invoke("diagnose", p, "--ceiling", "-1")
    assert res.exit_code == 0, res.output
    w = warning_text(res)
    assert "'a'" in w and "--ceiling -1" in w and "not applied" in w, res.output


def test_compare_with_one_run_is_refused_before_sampling(tmp_path, prior_sampler, monkeypatch):
    from bayesgrpo.inference import sampling

    calls = []
    monkeypatch.setattr(sampling, "nuts", lambda *a, **k: calls.append(1))
    s = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {"only": (s, curve(s))}, meta=[{"run_id": "only", "family": "qwen"}])
    res = invoke("compare", p, "--meta", tmp_path / "meta.csv")
    assert res.exit_code == 2, res.output
    one_error_line(res, "compare", "1 run", "'only'")
    assert not calls


# ============================================================================ 16. metadata
def test_metadata_without_run_id_column_is_an_error_naming_the_file(tmp_path):
    s = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {"a": (s, curve(s)), "b": (s, curve(s))})
    m = tmp_path / "m.csv"
    pd.DataFrame({"id": ["a", "b"], "max_steps": [300, 400]}).to_csv(m, index=False)
    res = invoke("summary", p, "--meta", m)
    assert res.exit_code == 2
    one_error_line(res, "m.csv", "run_id", "id, max_steps")


def test_one_row_metadata_without_run_id_says_it_applies_to_every_run(tmp_path):
    s = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {"a": (s, curve(s)), "b": (s, curve(s))})
    m = tmp_path / "m.csv"
    pd.DataFrame({"max_steps": [300]}).to_csv(m, index=False)
    res = invoke("summary", p, "--meta", m)
    assert res.exit_code == 0
    w = warning_text(res)
    assert "m.csv" in w and "run_id" in w and "every run" in w, res.output


def test_metadata_rows_with_an_empty_id_and_bad_values_are_named_in_the_meta_file(tmp_path):
    s = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {"a": (s, curve(s)), "b": (s, curve(s))})
    m = tmp_path / "m.csv"
    m.write_text("run_id,max_steps,group_size\n,300,8\na,inf,-4\nb,200,8\n")
    res = invoke("summary", p, "--meta", m)
    assert res.exit_code == 0, res.output
    w = warning_text(res)
    assert "m.csv" in w and "line 2" in w and "empty run_id" in w, res.output
    assert "with no data" not in w and "nan" not in w.split("empty run_id")[0][-40:]
    assert "'max_steps' is inf" in w and "'group_size' is -4" in w
    assert "runs.csv" not in w.split("'group_size' is -4")[0][-120:]  # named in the meta file, not the data file
    out = tmp_path / "s.csv"
    invoke("summary", p, "--meta", m, "--out", out)


def test_infinite_metadata_never_reaches_a_forecast(tmp_path, mock_sampler):
    s = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {"a": (s, curve(s))})
    m = tmp_path / "m.csv"
    m.write_text("run_id,max_steps,reward_max\na,inf,inf\n")
    res = invoke("forecast", p, "--meta", m)
    assert res.exit_code == 1  # no horizon left: an error row, not a forecast to step inf
    assert "no horizon" in res.output and "'max_steps' is inf" in warning_text(res)


# ============================================================================ 17. HF output folders
def _hf_folder(root: Path, *, max_steps=100, ckpts=(10, 20)):
    rng = np.random.default_rng(0)
    for n in ckpts:
        d = root / f"checkpoint-{n}"
        d.mkdir(parents=True)
        hist = [{"step": s, "reward": float(curve([0, s])[1] + 0.01 * rng.standard_normal()), "loss": 0.0}
                for s in range(1, n + 1)]  # fmt: skip
        (d / "trainer_state.json").write_text(json.dumps({"log_history": hist, "max_steps": max_steps,
                                                          "global_step": n}))  # fmt: skip
    return root


def test_forecast_reads_an_hf_output_folder_like_watch(tmp_path, mock_sampler):
    out_dir = _hf_folder(tmp_path / "out" / "grpo-run")
    (out_dir / "runs" / "Jan01_00-00-00_host").mkdir(parents=True)  # an (empty) TensorBoard folder beside
    t = tmp_path / "t.csv"
    res = invoke("forecast", str(out_dir) + "/", "--out", t, *FAST)
    assert res.exit_code == 0, res.output
    row = pd.read_csv(t).iloc[0]
    assert row["run_id"] == "grpo-run" and row["horizon"] == 100 and row["observed_until"] == 20
    res = invoke("summary", out_dir)
    assert res.exit_code == 0 and "checkpoint-20" in res.output


def test_watch_on_a_missing_path(tmp_path):
    res = invoke("watch", tmp_path / "nope" / "deeper" / "run.jsonl", "--horizon", 100)
    assert res.exit_code == 2
    one_error_line(res, "nope", "no such file or folder")
    res = invoke("watch", tmp_path / "not-yet.jsonl", "--horizon", 100, "--idle-timeout", 0.5, "--interval", 0.1)
    assert res.exit_code == 0, res.output
    assert "waiting for" in res.output and "not-yet.jsonl" in res.output


# ============================================================================ 18. readability
def test_summary_on_a_narrow_terminal_keeps_ids_and_numbers_whole(tmp_path, monkeypatch):
    from bayesgrpo.cli import common

    long_id = "Qwen2.5-7B-Instruct__grpo__gsm8k__lr1e-6__G8__seed1234567"
    s = np.arange(1, 101)
    p = write_long(tmp_path / "runs.csv", {long_id: (s, curve(s) + 0.0123456), "short": (s, curve(s))})
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setattr(common, "stdout_is_terminal", lambda: True)  # what a terminal of 100 columns gets
    res = runner.invoke(app, ["summary", str(p)], env={"COLUMNS": "100"}, color=False)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert all(len(ln) <= 100 for ln in lines), max(len(ln) for ln in lines)
    at = next(k for k, ln in enumerate(lines) if long_id in ln)  # the id whole on its own line
    block = lines[at : next(k for k, ln in enumerate(lines) if ln.strip() == "short")]
    assert any("0.2123" in ln for ln in block), block  # each number whole, next to its column's name
    assert any("points 100" in ln for ln in block), block


def test_non_ascii_run_ids_keep_their_names_in_figure_files(tmp_path, mock_sampler):
    s = np.arange(1, 101)
    ids = ("模型-运行", "Ünïcode run", "ascii")
    p = write_long(tmp_path / "runs.csv", {i: (s, curve(s)) for i in ids})
    figs = tmp_path / "figs"
    res = invoke("forecast", p, "--horizon", 300, "--out-dir", figs, *FAST)
    assert res.exit_code == 0, res.output
    names = sorted(f.name for f in figs.glob("*.png"))
    assert names == sorted(["模型-运行.png", "Ünïcode_run.png", "ascii.png"]), names


def test_fan_chart_truth_stays_behind_the_forecast_on_long_runs(tmp_path, mock_sampler):
    s = np.arange(1, 5001)
    r = curve(s, tau=800.0) + 0.05 * np.random.default_rng(1).standard_normal(s.size)
    p = write_long(tmp_path / "runs.csv", {"long": (s, r)})
    figs = tmp_path / "figs"
    res = invoke("forecast", p, "--until-fraction", 0.1, "--out-dir", figs, *FAST)
    assert res.exit_code == 0, res.output
    from bayesgrpo.forecast import Forecaster
    from bayesgrpo.inference.sampling import SamplerConfig
    from bayesgrpo.io import read_runs
    from bayesgrpo.plots.fan import fan_chart

    runs = read_runs(p)
    fit = Forecaster(sampler=SamplerConfig(draws=20, tune=10)).fit(runs.truncate(fraction=0.1), horizon=5000)
    fig = fan_chart(fit, "long", truth=runs.run("long"))
    ax = fig.axes[0]
    truth = [ln for ln in ax.get_lines() if "truth" in str(ln.get_label()) or "later" in str(ln.get_label())]
    band = max(c.get_zorder() for c in ax.collections)
    assert truth and all(ln.get_zorder() < band for ln in truth)
    assert sum(len(ln.get_xdata()) for ln in truth) <= 1000


def test_formats_says_what_each_format_detects():
    res = invoke("formats")
    assert res.exit_code == 0
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    from bayesgrpo.io import FORMATS

    for f in FORMATS:
        row = next((ln for ln in lines if ln.split()[0] == f), None)
        assert row is not None and len(row.split()) > 3, (f, res.output)
    assert "log_history" in res.output and "tfevents" in res.output and "Global step" in res.output


# ============================================================================ 19. options the messages name
def test_reward_key_option_picks_the_reward_metric(tmp_path, mock_sampler):
    s = np.arange(1, 101)
    p = tmp_path / "metrics.csv"
    pd.DataFrame({"step": s, "score_a": curve(s), "score_b": curve(s, lo=0.6, gain=0.1)}).to_csv(p, index=False)
    res = invoke("summary", p)
    assert res.exit_code == 2
    one_error_line(res, "no reward series", "--reward-key", "score_a")
    res = invoke("summary", p, "--reward-key", "score_b")
    assert res.exit_code == 0, res.output
    assert "0.6" in res.output
    res = invoke("summary", p, "--reward-key", "nosuch")
    assert res.exit_code == 2
    one_error_line(res, "--reward-key", "'nosuch'", "score_a")
    out = tmp_path / "t.csv"
    res = invoke("forecast", p, "--reward-key", "score_a", "--horizon", 300, "--out", out, *FAST)
    assert res.exit_code == 0 and table(out).iloc[0]["status"] == "ok"


def test_messages_name_cli_options_not_python_keywords(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"something": 1}')
    res = invoke("summary", p)
    assert res.exit_code == 2
    one_error_line(res, "--format NAME")


def test_watch_takes_meta_reward_range_and_model(tmp_path, monkeypatch):
    import bayesgrpo.integrations.watch as W

    seen = []

    class Recorder:
        def __init__(self, *a, **k):
            self.busy = False

        def submit(self, req):
            seen.append(req)
            return len(seen)

        def poll(self):
            return []

        def close(self):
            pass

    monkeypatch.setattr(W, "ForecastWorker", Recorder)
    s = np.arange(1, 31)
    p = write_long(tmp_path / "runs.csv", {"r": (s, curve(s))})
    m = tmp_path / "m.csv"
    pd.DataFrame([{"run_id": "r", "max_steps": 300, "group_size": 8}]).to_csv(m, index=False)
    res = invoke("watch", p, "--meta", m, "--reward-range", "0,1", "--model", "degeneracy", "--idle-timeout", 0.3,
                 "--interval", 0.05)  # fmt: skip
    assert res.exit_code == 0, res.output
    fc = [r for r in seen if r.get("kind") == "forecast"]
    assert fc and fc[-1]["model_kind"] == "degeneracy" and fc[-1]["horizon"] == 300
    assert fc[-1]["meta"]["group_size"] == 8 and fc[-1]["meta"]["reward_min"] == 0 and fc[-1]["meta"]["reward_max"] == 1
    for bad, needle in ((["--model", "magic"], "--model 'magic'"), (["--reward-range", "1,0"], "--reward-range"),
                        (["--meta", tmp_path / "none.csv"], "--meta")):  # fmt: skip
        res = invoke("watch", p, *bad)
        assert res.exit_code == 2, res.output
        one_error_line(res, needle)


def test_diagnose_until_step(tmp_path):
    s = np.arange(1, 301)
    r = np.where(s < 200, curve(s), 0.05)  # collapses at step 200
    p = write_long(tmp_path / "runs.csv", {"c": (s, r)})
    out = tmp_path / "d.csv"
    res = invoke("diagnose", p, "--out", out)
    assert res.exit_code == 0
    late = pd.read_csv(out).set_index("mode")
    res = invoke("diagnose", p, "--until-step", 150, "--out", out)
    assert res.exit_code == 0, res.output
    early = pd.read_csv(out).set_index("mode")
    assert late.loc["dynamical_instability", "severity"] == "critical"
    assert early.loc["dynamical_instability", "severity"] in ("none", "watch")
    res = invoke("diagnose", p, "--until-step", 0)
    assert res.exit_code == 2
    one_error_line(res, "--until-step 0")
