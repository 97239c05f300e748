"""``bayesgrpo budget``: P(target by a budget), expected gains, and the best step to stop."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from bayesgrpo.cli import common as C
from bayesgrpo.cli.costs import (
    CostPerGpuHourOpt,
    CostPerHourOpt,
    CurrencyOpt,
    GpusOpt,
    StepsPerHourOpt,
    check_costs,
    run_costs,
    run_rates,
)
from bayesgrpo.cli.forecast import run_forecast
from bayesgrpo.cli.options import ADVICE, KIND, OUTPUTS, PLAN, READ, SAMPLER, RunsArg, with_options

__all__ = ["budget_cmd"]


def _names(run_ids) -> list[str]:
    """The files ``--out-dir`` receives: a budget table and figure per run."""
    from bayesgrpo.io.output import file_stems

    return [f"{s}_budget.{x}" for s in file_stems(run_ids).values() for x in ("csv", "png")]


@with_options(*READ, *PLAN, *KIND, "reward_range", *OUTPUTS, *SAMPLER, "strict", *ADVICE)
def budget_cmd(
    runs: RunsArg,
    target: Annotated[float | None, typer.Option("--target", help="target reward (the run's units)")] = None,
    cost_per_step: Annotated[
        float | None,
        typer.Option("--cost-per-step", help="cost of one more optimizer step (in units of --value-per-reward)"),
    ] = None,
    cost_per_hour: CostPerHourOpt = None,
    cost_per_gpu_hour: CostPerGpuHourOpt = None,
    gpus: GpusOpt = None,
    steps_per_hour: StepsPerHourOpt = None,
    currency: CurrencyOpt = None,
    value_per_reward: Annotated[
        float | None, typer.Option("--value-per-reward", help="value of one reward unit at the end (default 1)")
    ] = None,
    epoch_steps: Annotated[
        int | None, typer.Option("--epoch-steps", help="steps per epoch (compare with paper B's 0.8-epoch rule)")
    ] = None,
    **options,
):
    """Probability of reaching a target by a budget, expected gains, and the best step to stop.

    The main table (--out) has one row per run with the recommendation and the stop policy's advice; over
    several runs (a sweep) it also says which runs to stop now, the share of the sweep's remaining steps
    that saves, and the reward expected to be lost, with its 90% interval. With a cost per hour (or per
    GPU-hour) and the steps an hour runs (given, or read from the step times the log records), each run's
    recommendation says what stopping saves in hours and money, with the 90% interval of what stopping at the
    best step saves. --out-dir gets each run's budget table (every step) and figure.
    """
    import pandas as pd

    from bayesgrpo.io.output import file_stems, write_table

    # ---- costs are checked before any sampling (their bounds and consistency: decisions.Costs)
    costs: dict[str, Any] = dict(cost_per_step=cost_per_step, cost_per_hour=cost_per_hour, steps_per_hour=steps_per_hour,
                 value_per_reward=value_per_reward, epoch_steps=epoch_steps, cost_per_gpu_hour=cost_per_gpu_hour,
                 gpus=gpus, currency=currency)  # fmt: skip
    check_costs(**costs)
    rates: dict[str, float] = {}
    out, out_dir = options.pop("out"), options.pop("out_dir")
    C.validate_outputs(out=out, out_dir=out_dir)

    def check_runs(rs) -> None:  # before any sampling: the output names and each run's steps per hour
        C.check_out_names(out_dir, _names(rs.run_ids))
        rates.update(run_rates(rs, costs))

    res = run_forecast(runs, **options, title="budget", figures=False, check_runs=check_runs)
    stems = file_stems(res.table["run_id"])
    status = res.table.set_index("run_id")[["status", "error"]]
    recs = [
        _one_run(res, rid, target=target, costs=run_costs(costs, rates, rid), out_dir=out_dir, stem=stems[rid])
        | {"status": status.loc[rid, "status"], "status_reason": status.loc[rid, "error"]}
        for rid in (res.fit.forecast_ids if res.fit is not None else [])
    ]
    for rid, v in res.complete.items():  # logged up to the horizon: nothing left to decide
        h = int(res.table.set_index("run_id").loc[rid, "horizon"])
        recs.append({"run_id": rid, "step": h, "rule": "complete (logged up to its horizon)", "expected_reward": v,
                     "notes": ("the final reward is observed",), "status": "complete",
                     "status_reason": ""})  # fmt: skip
        C.status(f"{rid}: logged up to its horizon {h}; its final reward {v:.4g} is observed")
    table = pd.DataFrame(recs)
    table["notes"] = table["notes"].map(lambda n: "; ".join(n))
    if res.decisions:
        table = _sweep_advice(table, res, costs=costs, rates=rates)
    if out is not None:
        with C.guard():
            write_table(table, out)
        C.status(f"wrote {out}")


def _one_run(res, rid: str, *, target, costs: dict, out_dir, stem: str) -> dict:
    """One run's budget table (printed; with ``out_dir`` written with its figure) and its recommendation."""
    from bayesgrpo.decisions.budget import budget_table
    from bayesgrpo.io.output import save_figure, write_table
    from bayesgrpo.plots.budget import plot_budget

    fit = res.fit
    with C.guard():
        draws_ = fit.paths(rid)
        tab = budget_table(draws_, target=target, max_steps=fit.infos[rid].horizon, **costs)
    rec = tab.attrs["recommendation"]
    cols = [c for c in ("step", "expected_reward", "reward_q05", "reward_q95", "p_target", "expected_gain_next",
                        "expected_utility", "p_best", "p_settled") if c in tab.columns]  # fmt: skip
    every = max(1, len(tab) // 12)
    C.print_table(tab[cols].iloc[::every], title=f"{rid}: budget (every {every}th forecast step)")
    C.status(rec.summary())
    if out_dir is not None:
        truth = res.full.run(rid) if res.truncated and res.full is not None else None
        with C.guard():
            write_table(tab, out_dir / f"{stem}_budget.csv")
            save_figure(
                plot_budget(draws_, tab, history=fit.runs.run(rid), truth=truth), out_dir / f"{stem}_budget.png"
            )
        C.status(f"wrote {out_dir / (stem + '_budget.csv')} and {out_dir / (stem + '_budget.png')}")
    return rec.to_dict()


def _disagreements(table, advice, fit) -> None:
    """Say where a run's budget stop step and the stop policy's advice point different ways: they answer
    different questions (the budget: where the expected utility or the settling of the mean path puts the
    stop; the policy: whether stopping now loses more than delta of the range, at the measured risk)."""
    for r in table.itertuples():
        if r.run_id not in advice.index or r.status not in ("ok", "warning"):
            continue
        now = int(r.step) <= int(fit.infos[r.run_id].last_step)
        a = advice[r.run_id]
        if (a == "stop" and not now) or (a == "continue" and now):
            C.status(f"{r.run_id}: the budget says stop {'now' if now else f'at step {int(r.step)}'} ({r.rule}), the "
                     f"stop policy says {a}: the budget weighs the expected reward (and cost) along the mean path, "
                     f"the policy the risk that stopping now loses more than delta of the range")  # fmt: skip


def _sweep_advice(table, res, *, costs: dict, rates: dict):
    """The stop policy over the sweep: which runs to stop now, the share of remaining steps (and the hours and
    money) that saves, and the reward expected to be lost (printed; its per-run columns joined to ``table``)."""
    from bayesgrpo.decisions.budget import Costs
    from bayesgrpo.decisions.stop import sweep_stop_table

    fit, adv = res.fit, res.table.set_index("run_id")["advice"]
    runs = [dict(run_id=rid, advice=adv[rid], last_step=fit.infos[rid].last_step, horizon=fit.infos[rid].horizon,
                 level=res.decisions[rid]["level"], scale=res.decisions[rid]["scale"],
                 final_draws=fit.final_draws(rid), steps_per_hour=rates.get(rid)) for rid in fit.forecast_ids]  # fmt: skip
    hourly = Costs(**{k: costs[k] for k in ("cost_per_hour", "cost_per_gpu_hour", "gpus")}, steps_per_hour=1.0).hourly
    per_run, summ = sweep_stop_table(runs, cost_per_hour=hourly)
    C.print_table(per_run, title="stop policy over the runs: advice now, steps left, and the reward lost by stopping "
                                 "now (final - current level: mean [90% interval], the run's units)")  # fmt: skip
    line = (
        f"sweep: stop {summ['stopped']} of {summ['runs']} run(s) now; that saves "
        f"{summ['share_of_remaining_steps_saved']:.0%} of the sweep's remaining steps"
    )
    if summ.get("hours_saved") is not None:
        line += f" ({summ['hours_saved']:.3g} h" + (
            f", {costs['currency'] or 'cost'} {summ['cost_saved']:,.4g})" if summ.get("cost_saved") is not None else ")"
        )
    if "lost_scale_mean" in summ:
        line += (
            f"; expected reward lost per stopped run {summ['lost_scale_mean']:+.3f} of its scale "
            f"[90%: {summ['lost_scale_lo']:+.3f}, {summ['lost_scale_hi']:+.3f}]"
        )
    C.status(line)
    _disagreements(table, adv, fit)
    return table.merge(per_run.drop(columns="advice"), on="run_id", how="left").merge(
        res.table[["run_id", "p_gain", "advice", "advice_error_rate"]], on="run_id", how="left"
    )
