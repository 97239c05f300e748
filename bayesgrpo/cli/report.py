"""``bayesgrpo report``: forecast every run and write ONE self-contained HTML page of them all."""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Annotated

import typer

from bayesgrpo.cli import common as C
from bayesgrpo.cli.costs import (
    CostPerGpuHourOpt,
    CostPerHourOpt,
    CurrencyOpt,
    GpusOpt,
    StepsPerHourOpt,
    check_costs,
    run_rates,
)
from bayesgrpo.cli.forecast import run_forecast
from bayesgrpo.cli.options import FORECAST, RunsArg, with_options

__all__ = ["report_cmd", "command_line"]

ReportOutOpt = Annotated[Path, typer.Option("--out", help="the HTML file to write (.html)")]
TargetOpt = Annotated[float | None, typer.Option("--target", help="target reward (the run's units): adds P(target)")]
CostOpt = Annotated[
    float | None,
    typer.Option("--cost-per-step", help="cost of one more optimizer step (in units of --value-per-reward)"),
]
ValueOpt = Annotated[
    float | None, typer.Option("--value-per-reward", help="value of one reward unit at the end (default 1)")
]
ByOpt = Annotated[
    str | None,
    typer.Option("--by", help="comma-separated metadata columns to compare the runs by (e.g. family,group_size)"),
]
CeilingOpt = Annotated[
    float | None,
    typer.Option("--ceiling", help="verifiable reward ceiling for the diagnostics of runs without reward_max metadata"),
]


def command_line(ctx: typer.Context) -> str:
    """The command as a user would type it again: the verb and every option that differs from its default."""
    parts = ["bayesgrpo", *ctx.command_path.split()[1:]]
    for p in ctx.command.params:
        v = ctx.params.get(p.name)
        if v is None or v == p.default or (isinstance(v, (list, tuple)) and not v):
            continue
        if p.param_type_name == "argument":
            parts += [str(x) for x in (v if isinstance(v, (list, tuple)) else [v])]
        elif isinstance(v, bool):
            parts.append(p.opts[0])
        else:
            for x in v if isinstance(v, (list, tuple)) else [v]:
                parts += [p.opts[0], str(x)]
    return shlex.join(parts)


def _check_decisions(*, target, ceiling, **costs) -> None:
    """The costs by their bounds (:class:`bayesgrpo.decisions.budget.Costs`, as ``budget`` checks them); target
    and ceiling finite."""
    for name, v in (("--target", target), ("--ceiling", ceiling)):
        if v is not None and not math.isfinite(v):
            C.fail(f"{name} must be a finite number, got {v}")
    check_costs(**costs)


@with_options(*(o for o in FORECAST if o != "out_dir"))
def report_cmd(
    ctx: typer.Context,
    runs: RunsArg,
    out: ReportOutOpt = Path("report.html"),
    target: TargetOpt = None,
    cost_per_step: CostOpt = None,
    value_per_reward: ValueOpt = None,
    by: ByOpt = None,
    ceiling: CeilingOpt = None,
    cost_per_hour: CostPerHourOpt = None,
    cost_per_gpu_hour: CostPerGpuHourOpt = None,
    gpus: GpusOpt = None,
    steps_per_hour: StepsPerHourOpt = None,
    currency: CurrencyOpt = None,
    **options,
):
    """Forecast every run and write ONE self-contained HTML report (opens offline; no server).

    The page holds a sortable, filterable table of every run (final reward with its 80% interval,
    P(target), stop step, stop advice, failure flags, sampler health, error rows), small multiples of
    every run's curve with its fan, per-run fan chart, budget curve and diagnostics, a comparison by
    --by groups, and the provenance (versions, prior, command line, data files with hashes). With a cost per
    hour (or per GPU-hour) the budget of each run says what stopping saves in hours and money, with its 90%
    interval (the steps per hour: --steps-per-hour, or the step times the log records).
    """
    from bayesgrpo.io.output import check_output_file
    from bayesgrpo.report import REPORT_SUFFIXES, write_report

    costs = dict(cost_per_step=cost_per_step, cost_per_hour=cost_per_hour, cost_per_gpu_hour=cost_per_gpu_hour,
                 gpus=gpus, steps_per_hour=steps_per_hour, currency=currency)  # fmt: skip
    _check_decisions(target=target, ceiling=ceiling, value_per_reward=value_per_reward, **costs)
    by_t = tuple(s.strip() for s in (by or "").split(",") if s.strip())
    if by is not None and not by_t:
        C.fail("--by must name at least one metadata column, e.g. --by family,group_size")
    with C.guard():
        check_output_file(out, option="--out", suffixes=REPORT_SUFFIXES)

    cmd = command_line(ctx)
    rates: dict[str, float] = {}

    def check_runs(rs) -> None:  # before any sampling: the --by columns and each run's steps per hour
        C.validate_meta_columns(rs, by_t, option="--by")
        rates.update(run_rates(rs, costs))

    res = run_forecast(runs, **options, title="report", figures=False, exit_if_none=False, check_runs=check_runs)
    files = [*runs, *([options["meta"]] if options["meta"] is not None else [])]
    with C.guard():
        p = write_report(res, out, target=target, value_per_reward=value_per_reward, by=by_t, ceiling=ceiling,
                         command=cmd, data_files=files, costs={**costs, "steps_per_hour": rates})  # fmt: skip
    C.status(f"wrote {p} ({p.stat().st_size / 1e6:.2f} MB, {len(res.table)} runs)")
    if res.fit is None:
        raise typer.Exit(C.EXIT_FAILED)
