"""``bayesgrpo summary``, ``formats`` and ``models``: what is in the logs, what can be read, what can be fit."""

from __future__ import annotations

import typer

from bayesgrpo.cli import common as C
from bayesgrpo.cli.options import ExcludeOpt, FormatOpt, MetaOpt, OutOpt, RewardKeyOpt, RunOpt, RunsArg

__all__ = ["summary_cmd", "formats_cmd", "models_cmd"]


def summary_cmd(
    runs: RunsArg,
    meta: MetaOpt = None,
    fmt: FormatOpt = None,
    reward_key: RewardKeyOpt = None,
    run: RunOpt = None,
    exclude: ExcludeOpt = None,
    out: OutOpt = None,
):
    """List the runs found in log files: points, steps, reward range and the channels each run logs.

    Channels (bayesgrpo.schema.CHANNELS): std = reward_std (mean within-group std), bstd =
    reward_std_batch (std of the whole batch), zero = frac_reward_zero_std, kl, akl = approx_kl (old ->
    new policy), ent = entropy, len = completion_length, trunc = frac_truncated, clip = clip_ratio,
    fnN = N reward functions (reward_fn/*), evalN = N eval metrics (eval/*). A last line (stderr)
    counts the runs that log each channel. --out writes every column: the channels by name, the other
    metrics, the metadata present.
    """
    from bayesgrpo.io.output import write_table
    from bayesgrpo.plan import logging_interval

    C.validate_outputs(out=out)
    rs = C.read_runsets(runs, meta, fmt, run=run, exclude=exclude, reward_key=reward_key)
    s = rs.summary().reset_index()
    s.insert(s.columns.get_loc("last_step") + 1, "interval", [logging_interval(rs.run(r)["step"]) for r in s["run_id"]])
    C.print_table(_compact(s), title=f"{len(rs)} run(s), {len(rs.data)} points")
    C.status(channel_census(rs))
    if out is not None:
        with C.guard():
            write_table(s, out)
        C.status(f"wrote {out}")


def _compact(s):
    """The printed view of the summary table: seven columns, ranges as ``lo..hi``, channels as labels."""
    import pandas as pd

    def num(v):
        return "" if pd.isna(v) else f"{v:.4g}"

    return pd.DataFrame({
        "run_id": s["run_id"],
        "points": s["points"].astype(str),
        "steps": [f"{a}..{b}" for a, b in zip(s["first_step"], s["last_step"], strict=True)],
        "every": [num(v) for v in s["interval"]],
        "reward": [f"{num(a)}..{num(b)}" for a, b in zip(s["reward_min"], s["reward_max"], strict=True)],
        "last10%": [num(v) for v in s["reward_last10"]],
        "channels": [channel_labels(c) for c in s["channels"]],
    })  # fmt: skip


def _families(names) -> list[str]:
    """Channel names with each family (``reward_fn/*``, ``eval/*``) as its prefix, in order, once."""
    from bayesgrpo.schema import EVAL_PREFIX, REWARD_FN_PREFIX

    out: list[str] = []
    for n in names:
        key = next((p for p in (REWARD_FN_PREFIX, EVAL_PREFIX) if n.startswith(p)), n)
        if key not in out:
            out.append(key)
    return out


def channel_labels(channels: str) -> str:
    """``"reward_std,kl,reward_fn/a,reward_fn/b"`` -> ``"std,kl,fn2"`` (:data:`~bayesgrpo.schema.CHANNEL_LABELS`)."""
    from bayesgrpo.schema import CHANNEL_LABELS

    names = [c for c in channels.split(",") if c]
    fam = {k: sum(n.startswith(k) for n in names) for k in _families(names) if k.endswith("/")}
    return ",".join(f"{CHANNEL_LABELS.get(k, k)}{fam.get(k, '')}" for k in _families(names))


def channel_census(rs) -> str:
    """One line: how many runs log each channel (``std=reward_std 100/100, kl 54/100, ...``)."""
    from bayesgrpo.schema import CHANNEL_LABELS

    counts = rs.channel_counts()
    if counts.shape[1] == 0:
        return f"channels: none besides the reward in any of the {len(rs)} run(s)"
    parts = []
    for k in _families(counts.columns):
        cols = [c for c in counts.columns if c.startswith(k)] if k.endswith("/") else [k]
        n = int((counts[cols] > 0).any(axis=1).sum())
        label = CHANNEL_LABELS.get(k, k)
        name = f"{k}*" if k.endswith("/") else k
        parts.append(f"{label}{'' if label == name else '=' + name} {n}/{len(rs)}")
    return "runs logging each channel: " + ", ".join(parts)


def formats_cmd():
    """List the supported log formats: name, what detects it, what it is (--format NAME forces one)."""
    import pandas as pd

    from bayesgrpo.io import REGISTRY

    rows = [{"format": f.name, "detected by": f.detects, "what": f.description} for f in REGISTRY.values()]
    C.print_table(
        pd.DataFrame(rows), title="log formats (detected from the name and content; --format NAME forces one)"
    )


def models_cmd():
    """List the model kinds (``--model``)."""
    from bayesgrpo.conventions import AUTO_KIND
    from bayesgrpo.forecast.shape import ShapeConfig
    from bayesgrpo.models.kinds import MODEL_KINDS

    kinds = ", ".join(ShapeConfig.default().kinds)
    typer.echo(
        f"{AUTO_KIND}\tthe default: the shape chosen per run among {kinds} by its block evidence, with the "
        "between-source outlook (what runs of other sources did from the same observed fraction)"
    )
    for k in MODEL_KINDS.values():
        typer.echo(f"{k.name}\t{k.summary}")
