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
    """List the runs found in log files: points, steps, reward range, metrics and metadata present."""
    from bayesgrpo.io.output import write_table

    C.validate_outputs(out=out)
    rs = C.read_runsets(runs, meta, fmt, run=run, exclude=exclude, reward_key=reward_key)
    s = rs.summary().reset_index()
    C.print_table(s, title=f"{len(rs)} run(s), {len(rs.data)} points")
    if out is not None:
        with C.guard():
            write_table(s, out)
        C.status(f"wrote {out}")


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
    from bayesgrpo.models.kinds import MODEL_KINDS

    for k in MODEL_KINDS.values():
        typer.echo(f"{k.name}\t{k.summary}")
