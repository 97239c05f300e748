"""Every logged channel, read and named once (issue 17 item 1): the schema's channels on the real fixtures.

Expected values were read off the fixture files (json.load of trainer_state, the printed dicts, the
notebook's HTML table, the verl step lines, the CSV/JSONL rows, tbparse's raw tags), not produced by the
importers. Each case also states the exact set of channels the run has, so a key that stops mapping (or
starts mapping into the wrong name) fails here.
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.errors import DataWarning
from bayesgrpo.io import read_runs
from bayesgrpo.io._common import ALIASES, map_metric_columns, reward_std_is_batch, trl_reward_std_definition
from bayesgrpo.schema import CHANNEL_LABELS, CHANNELS, RunSet, is_channel

CF = Path(__file__).resolve().parent / "data" / "formats"


def cf(folder: str, key: str) -> Path:
    hits = [p for p in (CF / folder).rglob("*") if p.is_file() and key in str(p.relative_to(CF / folder))]
    assert len(hits) == 1, (folder, key, hits)
    return hits[0]


def read(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        return read_runs(path, **kw)


def row(rs, step, run=None):
    d = rs.run(run or rs.run_ids[0])
    r = d.loc[d["step"] == step]
    assert len(r) == 1, (step, len(r))
    return r.iloc[0]


FNS_OLD = [f"reward_fn/{f}_reward_func" for f in ("correctness", "int", "soft_format", "strict_format", "xmlcount")]
FNS_NB = [f"reward_fn/{f}" for f in ("match_format_exactly", "match_format_approximately", "check_answer",
                                     "check_numbers")]  # fmt: skip
VERL = ["approx_kl", "entropy", "completion_length", "frac_truncated", "clip_ratio"]

# (folder, key, step, {channel: value at that step, read off the file}, every channel the run has)
# fmt: off
CASES = [
    # TRL >= 0.20 via Unsloth, beta = 0 (no kl); clip_ratio = clip_ratio/region_mean; completions/clipped_ratio
    # is the truncated share, not a clip ratio
    ("trl_trainer_state", "srinath", 80,
     {"reward_std": 4.92253303527832, "frac_reward_zero_std": 0.7, "entropy": 1.1126408845186233,
      "completion_length": 126.575, "frac_truncated": 0.95625, "clip_ratio": 0.0,
      "reward_fn/gameplay_scores": 2.8125, "reward_fn/valid_json_reward": 1.875},
     ["reward_std", "frac_reward_zero_std", "entropy", "completion_length", "frac_truncated", "clip_ratio",
      "reward_fn/gameplay_scores", "reward_fn/valid_json_reward"]),
    # new keys + Unsloth's legacy completion_length (dropped as a duplicate of completions/mean_length) + kl
    ("trl_trainer_state", "gauri0508", 70,
     {"reward_std": 0.15393713116645813, "frac_reward_zero_std": 0.0, "kl": 0.0007834339630790055,
      "completion_length": 275.5, "frac_truncated": 0.0, "clip_ratio": 0.0,
      "reward_fn/reward_fn_total": 0.11885000020265579},
     ["reward_std", "frac_reward_zero_std", "kl", "completion_length", "frac_truncated", "clip_ratio",
      *[f"reward_fn/reward_fn_{f}" for f in ("anti_hacking", "completeness", "evidence_validity", "finding_accuracy",
                                             "total")]]),
    # TRL 0.14-0.16: rewards/<f> without /mean, completion_length
    ("trl_trainer_state", "IMJONEZZ", 20,
     {"reward_std": 0.060777194797992706, "kl": 0.000449147482868284, "completion_length": 174.33334350585938,
      "reward_fn/xmlcount_reward_func": 0.011333334259688854},
     ["reward_std", "kl", "completion_length", *FNS_OLD]),
    # evaluation entries of the same step -> eval/<name> in that row
    ("trl_trainer_state", "synthetic_grpo-eval", 20,
     {"reward_std": 0.5988216795027256, "kl": 8.964149169514713e-05, "completion_length": 429.8,
      "eval/reward": 0.5, "eval/reward_std": 0.25, "eval/rewards/correctness_reward_func/mean": 0.25},
     ["reward_std", "kl", "completion_length", *FNS_OLD, "eval/loss", "eval/reward", "eval/reward_std",
      "eval/rewards/correctness_reward_func/mean", "eval/runtime", "eval/samples_per_second",
      "eval/steps_per_second"]),
    # TRL >= 0.26 console dicts: frac_reward_zero_std = 1 with reward_std 0.107 -> a batch std (see below)
    ("trl_console", "rho1.00", 5,
     {"reward_std_batch": 0.10690449476242066, "frac_reward_zero_std": 1.0, "entropy": 0.17924876864999534,
      "completion_length": 273.025, "frac_truncated": 0.1, "clip_ratio": 0.0, "reward_fn/reward_fn": 0.9},
     ["reward_std_batch", "frac_reward_zero_std", "entropy", "completion_length", "frac_truncated", "clip_ratio",
      "reward_fn/reward_fn"]),
    ("trl_console", "Ning-Guo", 20,
     {"reward_std": 0.09798035061685369, "kl": 0.08682649958900583, "completion_length": 117.809375,
      "reward_fn/combined_reward": 0.7255576837807893},
     ["reward_std", "kl", "completion_length", "reward_fn/combined_reward"]),
    # transformers 5: every value a string ('0.1768')
    ("trl_console", "gate1_adq", 3,
     {"reward_std": 0.1768, "kl": 0.0002925, "completion_length": 246.2, "reward_fn/reward_fn": 0.625},
     ["reward_std", "kl", "completion_length", "reward_fn/reward_fn"]),
    # Unsloth notebook tables: 'rewards / check_answer' -> reward_fn/check_answer, 6-decimal cells
    ("unsloth_notebook", "Leen020", 2,
     {"reward_std": 0.57735, "completion_length": 664.25, "kl": 0.0, "reward_fn/match_format_approximately": -0.5},
     ["reward_std", "kl", "completion_length", *FNS_NB]),
    ("unsloth_notebook", "AbdullahFageeh", 2,
     {"reward_std": 4.618802, "completion_length": 1737.0, "frac_truncated": 0.5, "kl": 0.201705,
      "reward_fn/match_format_exactly": 1.5},
     ["reward_std", "kl", "completion_length", "frac_truncated", *FNS_NB]),
    # verl: actor/ppo_kl is the old->new policy KL (approx_kl, not kl); old verl's entropy name; validation
    ("verl_console", "Bihan", 110,
     {"approx_kl": 0.001, "entropy": 0.034, "clip_ratio": 0.002, "frac_truncated": 0.016,
      "eval/openai/gsm8k/reward/mean@1": 0.892},
     [*VERL, "eval/openai/gsm8k/reward/mean@1"]),
    ("verl_console", "grpo_ansi", 2,
     {"approx_kl": 0.0, "entropy": 1.18415367603302, "completion_length": 5741.40625, "frac_truncated": 0.0,
      "clip_ratio": 0.0}, VERL),
    ("verl_console", "synthetic_numpy2", 1,
     {"entropy": 1.182466983795166, "completion_length": 4987.0703125, "clip_ratio": 0.0}, VERL),
    ("verl_jsonl", "synthetic_file-logger", 3,
     {"entropy": 1.2077957391738892, "completion_length": 5318.984375, "approx_kl": 0.0}, VERL),
    # from-scratch loops: their own names
    ("from_scratch", "KardeniaPoyu", 1, {"entropy": 0.14103835821151733, "kl": 0.0}, ["kl", "entropy"]),
    ("from_scratch", "minimind", 2, {"kl": 0.0002, "completion_length": 176.0}, ["kl", "completion_length"]),
    ("from_scratch", "metrics.jsonl", 2, {"reward_std_batch": 0.2160182166583165}, ["reward_std_batch"]),
    ("openrlhf_console", "synthetic_ansi-prefix", 2, {"kl": 0.002, "completion_length": 194.0},
     ["kl", "completion_length"]),
    # W&B panel exports of these two files hold only the reward
    ("wandb_csv", "iodt-2", 20, {}, []),
    ("wandb_csv", "Hetero-RL", 3, {}, []),
]
# fmt: on


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_every_reader_keeps_the_channels_with_their_logged_values(case):
    folder, key, step, values, channels = case
    rs = read(cf(folder, key))
    rid = rs.run_ids[0]
    assert list(rs.channels(rid)) == channels
    r = row(rs, step)
    for ch, v in values.items():
        assert r[ch] == pytest.approx(v, rel=1e-12, abs=1e-15), ch
    # every channel has its source key in the metadata (families excepted: their names carry the key)
    for ch in channels:
        if ch in CHANNELS:
            assert rs.meta.loc[rid, f"{ch}_key"] in ALIASES[ch] or ch == "reward_std_batch"


def test_tensorboard_tags_lose_train_prefix_and_map(tmp_path):
    tbparse = pytest.importorskip("tbparse")
    path = cf("tensorboard", "1739866051")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = tbparse.SummaryReader(str(path)).scalars
    raw = raw.loc[raw["step"] == 10].set_index("tag")["value"]
    rs = read(path)
    r = row(rs, 10)
    fns = ["reward_fn/equation_reward_func", "reward_fn/format_reward_func"]
    assert list(rs.channels(rs.run_ids[0])) == ["reward_std", "kl", "completion_length", *fns]
    assert r["reward_std"] == raw["train/reward_std"] and r["kl"] == raw["train/kl"]
    assert r["completion_length"] == raw["train/completion_length"]
    assert r["reward_fn/format_reward_func"] == raw["train/rewards/format_reward_func"]


def test_wandb_export_of_trl_and_openrlhf_keys(tmp_path):
    """A W&B panel export holding TRL channels for one run and OpenRLHF's for another (layout of the
    real exports: x axis first, '<run> - train/<key>' columns, __MIN/__MAX companions, empty cells)."""
    p = tmp_path / "export.csv"
    p.write_text(
        '"train/global_step","trl-run - train/reward","trl-run - train/reward__MIN","trl-run - train/reward_std",'
        '"trl-run - train/kl","trl-run - train/completions/mean_length","trl-run - train/rewards/acc/mean",'
        '"trl-run - eval/reward","orl - train/reward","orl - train/group_reward_std","orl - train/rollout/reward_std",'
        '"orl - train/ppo_clip_ratio","orl - train/rollout/truncated_rate","orl - train/response_length"\n'
        '"10","0.25","0.2","0.3","0.001","120","0.25","","0.5","0.21","0.49","0.05","0.125","300"\n'
        '"20","0.5","0.4","0.35","0.002","110","0.5","0.45","0.55","0.2","0.5","0.04","0.25","320"\n'
        '"30","","","","","","","","0.6","0.19","0.48","0.03","0.0","310"\n'
    )
    rs = read(p)
    assert rs.channels("trl-run") == ("reward_std", "kl", "completion_length", "reward_fn/acc", "eval/reward")
    assert rs.channels("orl") == ("reward_std", "reward_std_batch", "completion_length", "frac_truncated", "clip_ratio")
    t, o = row(rs, 20, "trl-run"), row(rs, 20, "orl")
    assert (t["reward_std"], t["kl"], t["completion_length"], t["reward_fn/acc"], t["eval/reward"]) == (
        0.35, 0.002, 110.0, 0.5, 0.45)  # fmt: skip
    # OpenRLHF: group_reward_std is the mean within-group std, rollout/reward_std the batch's
    assert (o["reward_std"], o["reward_std_batch"], o["clip_ratio"], o["frac_truncated"]) == (0.2, 0.5, 0.04, 0.25)
    # the source key is recorded for the runs that log the channel only
    m = rs.meta
    assert m.loc["orl", "reward_std_key"] == "group_reward_std" and m.loc["trl-run", "reward_std_key"] == "reward_std"
    assert m.loc["orl", "reward_std_batch_key"] == "rollout/reward_std" and pd.isna(
        m.loc["trl-run", "reward_std_batch_key"]
    )
    assert pd.isna(m.loc["orl", "kl_key"]) and m.loc["trl-run", "kl_key"] == "kl"


def test_verl_and_openrlhf_keys_not_in_the_real_fixtures(tmp_path):
    """verl with use_kl_loss (actor/kl_loss; actor/ppo_kl is the step KL) and a fork's critic/score/std;
    OpenRLHF's console dict with its group and batch spreads (keys as their trainers log them)."""
    verl = tmp_path / "verl.log"
    verl.write_text(
        "(TaskRunner pid=1) step:1 - critic/score/mean:0.25 - critic/score/std:0.43 - critic/score/max:1.0 - "
        "actor/kl_loss:0.001 - actor/ppo_kl:0.0002 - actor/entropy:0.9 - actor/pg_clipfrac:0.01 - "
        "response_length/mean:300.5 - response_length/clip_ratio:0.125\n"
        "(TaskRunner pid=1) step:2 - critic/score/mean:0.5 - critic/score/std:0.5 - critic/score/max:1.0 - "
        "actor/kl_loss:0.002 - actor/ppo_kl:0.0003 - actor/entropy:0.8 - actor/pg_clipfrac:0.02 - "
        "response_length/mean:280.0 - response_length/clip_ratio:0.0625\n"
    )
    rs = read(verl)
    assert rs.channels(rs.run_ids[0]) == ("reward_std_batch", "kl", "approx_kl", "entropy", "completion_length",
                                          "frac_truncated", "clip_ratio")  # fmt: skip
    r = row(rs, 2)
    assert (r["reward"], r["reward_std_batch"], r["kl"], r["approx_kl"], r["entropy"]) == (0.5, 0.5, 0.002, 0.0003, 0.8)
    assert (r["completion_length"], r["frac_truncated"], r["clip_ratio"]) == (280.0, 0.0625, 0.02)
    assert r["critic/score/max"] == 1.0  # the other critic/score statistics keep their names
    orl = tmp_path / "openrlhf.log"
    orl.write_text(
        "(TrainingActor pid=7) INFO 03-05 12:01:00 ppo_trainer.py:150] \u2728 Global step 1: {'policy_loss': 0.1, "
        "'reward': 0.3, 'group_reward_std': 0.21, 'rollout/reward_std': 0.46, 'kl': 0.001, 'ppo_clip_ratio': 0.05, "
        "'response_length': 200.0, 'rollout/truncated_rate': 0.125, 'eval_gsm8k_pass1': 0.4}\n",
        encoding="utf-8",
    )
    rs = read(orl)
    assert rs.channels(rs.run_ids[0]) == ("reward_std", "reward_std_batch", "kl", "completion_length",
                                          "frac_truncated", "clip_ratio", "eval/gsm8k_pass1")  # fmt: skip
    r = row(rs, 1)
    assert (r["reward_std"], r["reward_std_batch"], r["clip_ratio"], r["frac_truncated"]) == (0.21, 0.46, 0.05, 0.125)


def test_trl_clip_keys_across_versions():
    # TRL 0.16: one clip_ratio; TRL >= 0.17: clip_ratio/region_mean (+ low/high parts), a bare clip_ratio only on
    # the Liger path -- the region share is the channel, the other keeps its name with an _orig suffix
    old = pd.DataFrame({"run_id": "a", "step": [1], "reward": [0.1], "clip_ratio": [0.02]})
    assert map_metric_columns(old)[0]["clip_ratio"].tolist() == [0.02]
    new = pd.DataFrame({"run_id": "a", "step": [1], "reward": [0.1], "clip_ratio/region_mean": [0.03],
                        "clip_ratio/low_mean": [0.01], "clip_ratio": [0.5]})  # fmt: skip
    out, used = map_metric_columns(new)
    assert (out["clip_ratio"].iloc[0], out["clip_ratio_orig"].iloc[0], out["clip_ratio/low_mean"].iloc[0]) == (
        0.03, 0.5, 0.01)  # fmt: skip
    assert used["clip_ratio"] == {"a": "clip_ratio/region_mean"}


# ------------------------------------------------------------------------------------ reward_std's two meanings
def test_a_within_group_spread_cannot_be_positive_where_every_group_is_degenerate():
    # the raw rho1.00 log: frac_reward_zero_std 1.0 and reward_std 0.1069 at step 5, and reward_std equals the
    # batch std of its only reward function at every step (to float32 rounding): TRL >= 0.27's batch std under
    # the old key
    path = cf("trl_console", "rho1.00")
    text = path.read_text()
    assert "'reward_std': 0.10690449476242066, 'frac_reward_zero_std': 1.0" in text
    rs = read(path)
    d = rs.run(rs.run_ids[0])
    assert "reward_std" not in d.columns and rs.meta.iloc[0]["reward_std_batch_key"] == "reward_std"
    np.testing.assert_allclose(d["reward_std_batch"], d["rewards/reward_fn/std"], rtol=1e-6)  # float32 window means
    # told otherwise, the caller's word wins; told "batch", a group-era log moves too
    assert "reward_std" in read(path, reward_std="group").channels(rs.run_ids[0])
    old = read(cf("trl_trainer_state", "IMJONEZZ"), reward_std="batch")
    assert old.channels(old.run_ids[0])[:2] == ("reward_std_batch", "kl")
    with pytest.raises(ValueError, match="reward_std must be one of"):
        read(path, reward_std="within")


def test_zero_spread_at_degenerate_steps_proves_nothing_and_stays_reward_std():
    frame = pd.DataFrame({"run_id": "a", "step": [1, 2, 3], "reward": [0.5, 1.0, 0.0],
                          "reward_std": [0.3, 0.0, 0.0], "frac_reward_zero_std": [0.5, 1.0, 1.0]})  # fmt: skip
    assert not reward_std_is_batch(frame)
    out, used = map_metric_columns(frame)
    assert "reward_std" in out.columns and "reward_std_batch" not in out.columns
    assert used["reward_std"] == {"a": "reward_std"}
    # one run of two proves a batch std: only that run's values move
    both = pd.concat([frame, frame.assign(run_id="b", reward_std=[0.3, 0.2, 0.1])], ignore_index=True)
    out, used = map_metric_columns(both)
    a, b = out[out["run_id"] == "a"], out[out["run_id"] == "b"]
    assert list(a["reward_std"]) == [0.3, 0.0, 0.0] and a["reward_std_batch"].isna().all()
    assert list(b["reward_std_batch"]) == [0.3, 0.2, 0.1] and b["reward_std"].isna().all()
    assert used == {"reward": {"a": "reward", "b": "reward"}, "reward_std": {"a": "reward_std"},
                    "reward_std_batch": {"b": "reward_std"},
                    "frac_reward_zero_std": {"a": "frac_reward_zero_std", "b": "frac_reward_zero_std"}}  # fmt: skip


def test_trl_version_decides_what_reward_std_means():
    assert trl_reward_std_definition("0.27.0") == trl_reward_std_definition("1.16.0") == "batch"
    assert trl_reward_std_definition("0.26.2", "group") == "group"
    assert trl_reward_std_definition("0.26.2", "none") == "group"  # TRL still logs the group std then
    assert trl_reward_std_definition("0.26.2", "batch") == "batch"
    assert trl_reward_std_definition("0.26.2") is None and trl_reward_std_definition("dev") is None


def test_model_card_beside_a_checkpoint_gives_the_trl_version(tmp_path):
    """TRL writes <output_dir>/README.md ('- TRL: x.y.z') at every checkpoint save; the reader uses it."""
    src = cf("trl_trainer_state", "srinath")
    ck = tmp_path / "out" / "checkpoint-80"
    ck.mkdir(parents=True)
    (ck / "trainer_state.json").write_bytes(src.read_bytes())
    rs = read(ck / "trainer_state.json")
    assert "reward_std" in rs.metrics and "trl_version" not in rs.meta.columns
    (tmp_path / "out" / "README.md").write_text(
        "# out\n\n### Framework versions\n\n- TRL: 0.27.1\n- Transformers: 5.0\n"
    )
    rs = read(ck / "trainer_state.json")
    rid = rs.run_ids[0]
    assert rs.meta.loc[rid, "trl_version"] == "0.27.1" and rs.meta.loc[rid, "reward_std_batch_key"] == "reward_std"
    assert row(rs, 80)["reward_std_batch"] == 4.92253303527832 and "reward_std" not in rs.channels(rid)
    (tmp_path / "out" / "README.md").write_text("### Framework versions\n\n- TRL: 0.19.0\n")
    assert "reward_std" in read(ck / "trainer_state.json").channels(rid)  # group era: the default reading


# ------------------------------------------------------------------------------------ the accessor
def test_channels_accessor_counts_finite_points_in_schema_order():
    df = pd.DataFrame({
        "run_id": ["a"] * 3 + ["b"] * 3, "step": [1, 2, 3] * 2, "reward": [0.1, 0.2, 0.3] * 2,
        "eval/acc": [np.nan, 0.5, np.nan, np.nan, np.nan, np.nan], "kl": [0.0, np.nan, 0.1, np.nan, np.nan, np.nan],
        "reward_fn/x": [0.1, 0.2, 0.3, 0.0, 0.0, 0.0], "reward_std": [np.nan] * 6, "loss": 1.0, "tag": "t",
    })  # fmt: skip
    rs = RunSet.from_frames(df)
    assert rs.channels("a") == ("kl", "reward_fn/x", "eval/acc") and rs.channels("b") == ("reward_fn/x",)
    c = rs.channel_counts()
    assert list(c.columns) == ["reward_std", "kl", "reward_fn/x", "eval/acc"]  # all-NaN reward_std counts 0
    assert c.loc["a"].tolist() == [0, 2, 3, 1] and c.loc["b"].tolist() == [0, 0, 3, 0]
    s = rs.summary()
    assert s.loc["a", "channels"] == "kl,reward_fn/x,eval/acc" and s.loc["a", "metrics"] == "loss,tag"
    with pytest.raises(KeyError, match="no run 'z'"):
        rs.channels("z")
    assert not is_channel("loss") and not is_channel("eval/") and is_channel("reward_fn/x") and is_channel("kl")
    assert set(CHANNELS) <= set(CHANNEL_LABELS) and len(set(CHANNEL_LABELS.values())) == len(CHANNEL_LABELS)


def test_every_alias_maps_onto_a_defined_channel_once():
    keys = [k for canon, names in ALIASES.items() if canon != "reward" for k in names]
    assert set(ALIASES) - {"reward"} == set(CHANNELS)
    assert len(keys) == len(set(keys)), "a source key is listed for two channels"


# ------------------------------------------------------------------------------------ summary
def test_summary_shows_channel_labels_and_counts_runs_per_channel():
    from typer.testing import CliRunner

    from bayesgrpo.cli import app

    paths = [cf("trl_trainer_state", "srinath"), cf("verl_console", "grpo_ansi"), cf("wandb_csv", "iodt-2")]
    res = CliRunner().invoke(app, ["summary", *map(str, paths)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    header = next(ln for ln in lines if ln.startswith("run_id"))
    assert header.split() == ["run_id", "points", "steps", "every", "reward", "last10%", "channels"]
    srinath = next(ln for ln in lines if ln.startswith("new-trl_entropy"))
    assert srinath.split()[2:] == ["10..80", "10", "-9.662..4.688", "4.688", "std,zero,ent,len,trunc,clip,fn2"]
    verl = next(ln for ln in lines if ln.startswith("grpo_ansi"))
    assert verl.split()[-1] == "akl,ent,len,trunc,clip"
    assert len(next(ln for ln in lines if ln.startswith("fragrant-sea-49")).split()) == 6  # no channel: empty cell
    census = next(ln for ln in lines if ln.startswith("runs logging each channel"))
    assert census == ("runs logging each channel: std=reward_std 1/3, zero=frac_reward_zero_std 1/3, "
                      "akl=approx_kl 1/3, ent=entropy 2/3, len=completion_length 2/3, trunc=frac_truncated 2/3, "
                      "clip=clip_ratio 2/3, fn=reward_fn/* 1/3")  # fmt: skip


# ------------------------------------------------------------------------------------ development data
def _shared() -> Path | None:
    cands = [Path(__file__).resolve().parents[2] / "shared" / "data"]
    if os.environ.get("BAYESGRPO_SHARED"):
        cands.insert(0, Path(os.environ["BAYESGRPO_SHARED"]))
    return next((c for c in cands if (c / "grpo-public").is_dir()), None)


#: runs logging each channel, per development dataset (docs/guide.md, "Channels", shows this table)
DEV_CHANNELS = {
    "grpo-public": (100, {"reward_std": 100, "kl": 54, "completion_length": 100}),
    "grpo-extra": (34, {"reward_std": 4, "kl": 29, "completion_length": 30}),
    "grpo-more": (18, {"reward_std": 17, "frac_reward_zero_std": 6, "kl": 16, "entropy": 3, "completion_length": 12}),
}


@pytest.mark.skipif(_shared() is None, reason="shared development data absent")
@pytest.mark.parametrize("name", list(DEV_CHANNELS))
def test_development_datasets_channel_census(name):
    d = _shared() / name
    rs = read(d / "runs.csv", meta=d / "meta.csv")
    n, expected = DEV_CHANNELS[name]
    counts = rs.channel_counts()
    assert len(rs) == n
    assert {c: int((counts[c] > 0).sum()) for c in counts.columns if (counts[c] > 0).any()} == expected
    assert not math.isnan(counts.to_numpy().sum())
