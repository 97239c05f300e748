"""The run plan (bayesgrpo.plan): one definition of every per-run fact, with the numbers of hand examples."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from bayesgrpo.cli import app
from bayesgrpo.errors import ForecastError, OptionError
from bayesgrpo.plan import (
    MAX_FUTURE_STEPS,
    NEXT,
    final_window_mask,
    final_window_steps,
    is_unit_interval,
    logging_interval,
    plan_runs,
    reward_bounds,
)
from bayesgrpo.schema import RunSet


def _runs(specs: dict, meta: dict | None = None) -> RunSet:
    """``{run_id: (steps, rewards)}`` -> RunSet; ``meta``: ``{column: {run_id: value}}``."""
    rows = [pd.DataFrame({"run_id": r, "step": s, "reward": y}) for r, (s, y) in specs.items()]
    m = pd.DataFrame({"run_id": list(specs)})
    for col, vals in (meta or {}).items():
        m[col] = [vals.get(r, np.nan) for r in specs]
    return RunSet.from_frames(pd.concat(rows, ignore_index=True), m)


def _ramp(n=50, step=1, start=1, lo=0.2, hi=0.6):
    s = np.arange(start, start + n * step, step)
    return s, np.linspace(lo, hi, n)


def test_horizon_rule_and_where_it_came_from():
    runs = _runs({"a": _ramp(), "b": _ramp(), "c": _ramp()}, meta={"max_steps": {"a": 200, "b": 30}})
    p = plan_runs(runs)
    assert (p["a"].horizon, p["a"].horizon_from, p["a"].planned) == (200, "max_steps", 200)
    assert p["b"].error and "not after the last logged step 50" in p["b"].error  # max_steps before the log's end
    assert p["c"].horizon is None and "no horizon; pass --horizon STEPS" in p["c"].error
    p = plan_runs(runs, horizon={"a": 300, "c": 120})
    assert (p["a"].horizon, p["a"].horizon_from, p["a"].planned) == (300, "option", 200)  # planned stays max_steps
    assert (p["c"].horizon, p["c"].horizon_from, p["c"].planned) == (120, "option", 120)
    # a run missing from the dict: the default rule; its max_steps 30 is before the log's end (50): the run went
    # on past it, so it is complete at its last logged step (issue 33; forecast_batch warns)
    assert (p["b"].horizon, p["b"].horizon_from, p["b"].complete) == (50, "log", True)
    cut = plan_runs(runs, until_fraction=0.5)  # truncated: at least the log's own last step
    assert (cut["c"].horizon, cut["c"].horizon_from, cut["c"].last_step) == (50, "log", 25)
    assert (cut["a"].horizon, cut["a"].horizon_from) == (200, "max_steps")
    nxt = plan_runs(runs, horizon=NEXT)
    assert [(nxt[r].horizon, nxt[r].horizon_from) for r in "abc"] == [(51, "next")] * 3


def test_a_run_logged_to_its_horizon_is_complete_and_the_horizon_never_moves():
    """Issue 19 item 6: a horizon the user or the trainer set is never moved (the live path once pushed it
    one logging interval further); a run logged up to it is complete, not forecast."""
    runs = _runs({"a": _ramp(n=20, step=5, start=5)}, meta={"max_steps": {"a": 100}})
    p = plan_runs(runs)["a"]
    assert (p.horizon, p.horizon_from, p.interval, p.complete, p.ok) == (100, "max_steps", 5, True, False)
    assert "not after the last logged step 100" in p.error
    q = plan_runs(runs, horizon=300)["a"]
    assert (q.horizon, q.horizon_from, q.complete, q.ok) == (300, "option", False, True)  # not reached: unchanged
    assert plan_runs(runs, horizon=60)["a"].complete  # a horizon before the last step: the observed final reward


def test_interval_fraction_final_window_and_future_steps():
    s = np.r_[np.arange(0, 100, 10), [101, 103]]
    assert logging_interval(s) == 10 and logging_interval([7]) == 1 and logging_interval([3, 4, 6]) == 1
    runs = _runs({"a": _ramp(n=11, step=10, start=0)}, meta={"max_steps": {"a": 400}})
    p = plan_runs(runs)["a"]
    assert p.fraction == pytest.approx(100 / 400)
    np.testing.assert_array_equal(p.future_steps(), np.arange(110, 401, 10))
    np.testing.assert_array_equal(p.final_steps(), [370, 380, 390, 400])  # (0 + 0.9 * 400, 400]
    # the horizon itself is always a step of the window, off the logging grid too
    np.testing.assert_array_equal(
        final_window_steps(s0=0, horizon=405, interval=10, final_window=0.1), [370, 380, 390, 400, 405]
    )
    assert final_window_mask([90, 91], s0=0, horizon=100).tolist() == [False, True]  # the left end is open


def test_reward_bounds_one_tolerance_and_contradictions():
    assert reward_bounds({}, [0.0, 0.5, 1.0]) == (0.0, 1.0, "inferred")
    assert reward_bounds({}, [-1e-12, 1.0 + 1e-12])[2] == "inferred"  # within BOUND_TOL
    assert reward_bounds({}, [-1e-6, 0.5])[2] == "" and not is_unit_interval([np.nan])
    lo, hi, src = reward_bounds({"reward_min": 0.0}, [3.0])
    assert (lo, src) == (0.0, "metadata") and np.isnan(hi)
    runs = _runs({"a": _ramp(lo=0.1, hi=0.52)}, meta={"reward_min": {"a": 0.0}, "reward_max": {"a": 0.5},
                                                      "max_steps": {"a": 100}})  # fmt: skip
    err = plan_runs(runs)["a"].error
    assert "the logged reward 0.502" in err and "above reward_max 0.5" in err and "point(s) outside" in err


def test_too_few_points_names_the_first_logged_step_under_until_step():
    runs = _runs({"a": _ramp(step=10, start=10), "b": _ramp()}, meta={"max_steps": {"a": 900, "b": 900}})
    p = plan_runs(runs, until_step=8)
    assert p["a"].n_obs == 0 and p["a"].last_step is None
    assert p["a"].error == ("run 'a' has 0 logged reward point(s); a forecast needs at least 3 with --until-step 8 "
                            "(its first logged step is 10)")  # fmt: skip
    assert p["b"].ok and (p["b"].n_obs, p["b"].last_step, p["b"].last_logged) == (8, 8, 50)
    assert p.ok_ids == ["b"] and set(p.errors) == {"a"} and p.truncated
    with pytest.raises(ForecastError, match="run 'a' has 0"):
        p.require()
    with pytest.raises(OptionError, match="not both"):
        plan_runs(runs, until_step=8, until_fraction=0.5)
    with pytest.raises(OptionError, match="until_fraction"):
        plan_runs(runs, until_fraction=1.5)


def test_limits_memory_and_distance():
    runs = _runs({"a": _ramp()})
    assert "GiB; use fewer --draws" in plan_runs(runs, horizon=10_000, n_draws=10**8)["a"].error
    assert plan_runs(runs, horizon=10_000, n_draws=2000)["a"].ok
    far = plan_runs(runs, horizon=50 + MAX_FUTURE_STEPS + 1)["a"].error
    assert "steps beyond the log (its last logged step 50)" in far and "at most 100,000 are forecast" in far


def test_with_horizon_keeps_the_planned_length():
    p = plan_runs(_runs({"a": _ramp()}), horizon=100)["a"]
    q = p.with_horizon(400)
    assert (q.horizon, q.horizon_from, q.planned, q.ok) == (400, "option", 100, True)
    assert "not after the last logged step" in p.with_horizon(40).error


def test_cli_until_step_before_a_runs_first_step_is_an_error_row(tmp_path, mock_sampler):
    """Issue 19, item 2: --until-step before a run's first logged step is that run's error row, the others
    are forecast (it used to end in an IndexError traceback)."""
    s1, y1 = _ramp(n=60, step=10, start=10)
    s2, y2 = _ramp(n=60)
    df = pd.concat([pd.DataFrame({"run_id": "sparse", "step": s1, "reward": y1}),
                    pd.DataFrame({"run_id": "dense", "step": s2, "reward": y2})])  # fmt: skip
    df.to_csv(tmp_path / "runs.csv", index=False)
    out = tmp_path / "f.csv"
    res = CliRunner().invoke(app, ["forecast", str(tmp_path / "runs.csv"), "--horizon", "900", "--until-step", "8",
                                   "--draws", "20", "--tune", "10", "--out", str(out)])  # fmt: skip
    assert "Traceback" not in res.output and res.exit_code == 0, res.output
    t = pd.read_csv(out).set_index("run_id")
    assert t.loc["sparse", "status"] == "error" and "its first logged step is 10" in t.loc["sparse", "error"]
    assert t.loc["dense", "status"] == "ok" and t.loc["dense", "observed_until"] == 8
    for bad in ("0", "-5"):
        res = CliRunner().invoke(app, ["forecast", str(tmp_path / "runs.csv"), "--horizon", "900", "--until-step", bad])
        assert "Traceback" not in res.output and res.exit_code == 1  # every run is an error row: nothing forecast
        assert "has 0 logged reward point(s)" in res.output
