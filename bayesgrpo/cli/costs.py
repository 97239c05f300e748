"""The cost options of ``budget`` and ``report`` (issue 32): what an hour of training costs (per hour, or per
GPU-hour times the GPUs), how many optimizer steps an hour runs -- given, or read from the step times the
log records (:func:`bayesgrpo.plan.logged_steps_per_hour`) -- and the currency. Their bounds and consistency
are :class:`bayesgrpo.decisions.budget.Costs`'s; every check runs before any sampling."""

from __future__ import annotations

from typing import Annotated

import typer

from bayesgrpo.cli import common as C

__all__ = ["CostPerHourOpt", "CostPerGpuHourOpt", "GpusOpt", "StepsPerHourOpt", "CurrencyOpt", "check_costs", "run_rates",
           "run_costs"]  # fmt: skip

CostPerHourOpt = Annotated[
    float | None,
    typer.Option("--cost-per-hour", help="cost per hour of training (its steps per hour: --steps-per-hour or the log's "
                 "step times)"),
]  # fmt: skip
CostPerGpuHourOpt = Annotated[
    float | None, typer.Option("--cost-per-gpu-hour", help="price of one GPU-hour (times --gpus: the cost per hour)")
]
GpusOpt = Annotated[
    int | None, typer.Option("--gpus", help="GPUs a run trains on (with --cost-per-gpu-hour; default 1)")
]
StepsPerHourOpt = Annotated[
    float | None,
    typer.Option("--steps-per-hour", help="optimizer steps per hour (default: from the step times the log records, "
                 "when it does: timing_s/step, step_time, iter_time_s, elapsed_seconds, _runtime)"),
]  # fmt: skip
CurrencyOpt = Annotated[str | None, typer.Option("--currency", help="what costs are counted in, e.g. USD")]


def check_costs(**costs) -> None:
    """The cost options by :class:`~bayesgrpo.decisions.budget.Costs` (one line naming the option); a cost per hour
    without ``--steps-per-hour`` is checked with the rate left to the log (:func:`run_rates`)."""
    from bayesgrpo.decisions.budget import Costs

    hourly = costs.get("cost_per_hour") is not None or costs.get("cost_per_gpu_hour") is not None
    rate = costs.get("steps_per_hour")
    C.validated(Costs, **{**costs, "steps_per_hour": rate if rate is not None or not hourly else 1.0})


def run_rates(runs, costs: dict) -> dict[str, float]:
    """Run id -> steps per hour: ``--steps-per-hour``, else the run's logged step times (runs without any are left
    out). A cost per hour for a run whose rate is unknown: one line naming the run, exit 2."""
    from bayesgrpo.plan import ELAPSED_KEYS, STEP_SECONDS_KEYS, logged_steps_per_hour

    if costs.get("steps_per_hour") is not None:
        return dict.fromkeys(runs.run_ids, float(costs["steps_per_hour"]))
    out = {}
    for rid in runs.run_ids:
        got = logged_steps_per_hour(runs.run(rid))
        if got is not None:
            out[rid] = got[0]
            C.status(f"{rid}: {got[0]:.4g} steps per hour, from the logged {got[1]}")
    hourly = next((o for o in ("cost_per_hour", "cost_per_gpu_hour") if costs.get(o) is not None), None)
    missing = [r for r in runs.run_ids if r not in out]
    if hourly is not None and missing:
        C.fail(f"--{hourly.replace('_', '-')} needs --steps-per-hour: run {missing[0]!r} logs no step times "
               f"({', '.join(STEP_SECONDS_KEYS + ELAPSED_KEYS)})")  # fmt: skip
    return out


def run_costs(costs: dict, rates: dict, run_id: str) -> dict:
    """The cost keyword arguments of :func:`~bayesgrpo.decisions.budget.budget_table` for one run (its rate)."""
    return {**costs, "steps_per_hour": rates.get(run_id, costs.get("steps_per_hour"))}
