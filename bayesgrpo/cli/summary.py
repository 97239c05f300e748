"""``bayesgrpo summary``, ``formats`` and ``models``: what is in the logs, what can be read, what can be fit."""

from __future__ import annotations

import typer

from bayesgrpo.cli import common as C
from bayesgrpo.cli.options import ExcludeOpt, FormatOpt, MetaOpt, OutOpt, RunOpt, RunsArg

__all__ = ["summary_cmd", "formats_cmd", "models_cmd"]


def summary_cmd(
    runs: RunsArg,
    meta: MetaOpt = None,
    fmt: FormatOpt = None,
    run: RunOpt = None,
    exclude: ExcludeOpt = None,
    out: OutOpt = None,
):
    """List the runs found in log files: points, steps, reward range, metrics and metadata present."""
    from bayesgrpo.io.output import write_table
    from bayesgrpo.plan import logging_interval

    C.validate_outputs(out=out)
    rs = C.read_runsets(runs, meta, fmt, run=run, exclude=exclude)
    s = rs.summary().reset_index()
    s.insert(s.columns.get_loc("last_step") + 1, "interval", [logging_interval(rs.run(r)["step"]) for r in s["run_id"]])
    C.print_table(s, title=f"{len(rs)} run(s), {len(rs.data)} points")
    if out is not None:
        with C.guard():
            write_table(s, out)
        C.status(f"wrote {out}")


def formats_cmd():
    """List the supported log formats."""
    from bayesgrpo.io import FORMATS

    for f in FORMATS:
        typer.echo(f)


def models_cmd():
    """List the model kinds (``--model``)."""
    from bayesgrpo.models.kinds import MODEL_KINDS

    for k in MODEL_KINDS.values():
        typer.echo(f"{k.name}\t{k.summary}")
