"""RunSet validation, sorting, xarray round trip, normalisation — and messages that name the row."""

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.errors import DataValidationError, DataWarning
from bayesgrpo.schema import RunSet


def frame():
    return pd.DataFrame(
        {
            "run_id": ["a"] * 4 + ["b"] * 3,
            "step": [1, 2, 3, 4, 10, 20, 30],
            "reward": [0.1, 0.2, 0.3, 0.35, 1.0, 2.0, 2.5],
            "kl": [0, 0.1, 0.2, 0.3, np.nan, 0.5, 0.6],
        }
    )


def test_valid_set_keeps_input_unchanged():
    df = frame()
    before = df.copy()
    rs = RunSet.from_frames(df, pd.DataFrame({"run_id": ["a"], "group_size": [8]}))
    pd.testing.assert_frame_equal(df, before)
    assert rs.run_ids == ["a", "b"]
    assert rs.meta.loc["a", "group_size"] == 8 and np.isnan(rs.meta.loc["b", "group_size"])


def test_missing_columns_and_bad_values_name_row():
    with pytest.raises(DataValidationError, match=r"required column\(s\) \['reward'\]"):
        RunSet.from_frames(frame().drop(columns="reward"), source="x.csv")
    df = frame().astype({"reward": object})
    df.loc[5, "reward"] = "oops"
    with pytest.raises(DataValidationError, match=r"reward 'oops' is not a number \(file x.csv, run 'b', row 5\)"):
        RunSet.from_frames(df, source="x.csv")
    df = frame()
    df.loc[2, "reward"] = np.inf  # issue 33: dropped like a NaN, with a warning; the run's other rows go on
    with pytest.warns(DataWarning, match=r"dropped 1 row\(s\) with an infinite reward.*run 'a', row 2"):
        assert len(RunSet.from_frames(df).data) == len(df) - 1
    df = frame().astype({"step": float})
    df.loc[1, "step"] = 2.5
    with pytest.raises(DataValidationError, match=r"step 2\.5 is not an integer"):
        RunSet.from_frames(df)


def test_nan_rewards_dropped_with_warning():
    df = frame()
    df.loc[1, "reward"] = np.nan
    with pytest.warns(DataWarning, match=r"dropped 1 row\(s\) with a missing \(NaN\) reward.*run 'a', row 1"):
        rs = RunSet.from_frames(df)
    assert list(rs.run("a")["step"]) == [1, 3, 4]


def test_unsorted_sorted_with_warning_and_duplicates():
    df = frame().iloc[[1, 0, 2, 3, 4, 5, 6]]
    with pytest.warns(DataWarning, match="not sorted.*step 1 follows 2"):
        rs = RunSet.from_frames(df)
    assert list(rs.run("a")["step"]) == [1, 2, 3, 4]
    dup = pd.concat([frame().iloc[:3], frame().iloc[[2]].assign(reward=9.0), frame().iloc[3:]], ignore_index=True)
    with pytest.raises(DataValidationError, match=r"run 'a' logs step\(s\) \[3\] more than once"):
        RunSet.from_frames(dup)
    with pytest.warns(DataWarning, match="kept the last"):
        rs = RunSet.from_frames(dup, on_duplicate="last")
    assert rs.run("a").set_index("step").loc[3, "reward"] == 9.0


def test_xarray_round_trip_is_lossless():
    rs = RunSet.from_frames(
        frame(), pd.DataFrame({"run_id": ["a", "b"], "model": ["m1", None], "params_b": [3.0, 7.0]})
    )
    ds = rs.to_xarray()
    assert dict(ds.sizes) == {"run": 2, "step": 7}
    back = RunSet.from_xarray(ds)
    pd.testing.assert_frame_equal(back.data[rs.data.columns], rs.data)
    assert back.meta.loc["a", "model"] == "m1" and back.meta.loc["b", "params_b"] == 7.0


def test_truncate():
    rs = RunSet.from_frames(frame())
    t = rs.truncate(fraction=0.5)
    assert list(t.run("a")["step"]) == [1, 2] and list(t.run("b")["step"]) == [10, 20]
    assert list(rs.truncate(until_step=3).run("a")["step"]) == [1, 2, 3]


def test_real_runs_round_trip_normalise_and_truncate():
    """The six committed real runs (tests/data/grpo_small): ragged steps, NaN columns, string metadata."""
    from pathlib import Path

    small = Path(__file__).resolve().parent / "data" / "grpo_small"
    df, meta = pd.read_csv(small / "runs.csv"), pd.read_csv(small / "meta.csv")
    rs = RunSet.from_frames(df, meta, source=str(small / "runs.csv"))
    assert len(rs) == 6 and len(rs.data) == 297
    assert (rs.meta["n_points"] == rs.data.groupby("run_id").size().reindex(rs.meta.index)).all()
    ds = rs.to_xarray()
    assert dict(ds.sizes) == {"run": 6, "step": 232}  # union of the runs' steps
    back = RunSet.from_xarray(ds)
    pd.testing.assert_frame_equal(back.data[rs.data.columns], rs.data)
    assert back.meta.loc["colab__Qwen3__4B_-GRPO__07a98ee", "model"] == "unsloth/Qwen3-4B-Base"
    assert np.isnan(back.meta.loc["Hetero-RL__GEPO_online__276368f", "group_size"])
    t = rs.truncate(fraction=0.5)
    assert [len(t.run(r)) for r in t.run_ids] == [25, 25, 23, 25, 26, 25]
    assert t.run("colab__Qwen3__4B_-GRPO__07a98ee")["step"].iloc[-1] == 23
