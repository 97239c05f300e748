"""``bayesgrpo budget``: P(target by a budget), expected gains, and the best step to stop."""

from __future__ import annotations

from typing import Annotated

import typer

from bayesgrpo.cli import common as C
from bayesgrpo.cli.forecast import run_forecast
from bayesgrpo.cli.options import (
    DEFAULT_CHAINS,
    DEFAULT_DELTA,
    DEFAULT_DRAWS,
    DEFAULT_MODEL,
    DEFAULT_RISK,
    DEFAULT_TUNE,
    ChainsOpt,
    DeltaOpt,
    DrawsOpt,
    ExcludeOpt,
    FormatOpt,
    HorizonOpt,
    MetaOpt,
    ModelOpt,
    OutDirOpt,
    OutOpt,
    RewardRangeOpt,
    RiskOpt,
    RunOpt,
    RunsArg,
    SeedOpt,
    StrictOpt,
    TuneOpt,
    UntilFractionOpt,
    UntilStepOpt,
)

__all__ = ["budget_cmd"]


def budget_cmd(
    runs: RunsArg,
    meta: MetaOpt = None,
    fmt: FormatOpt = None,
    run: RunOpt = None,
    exclude: ExcludeOpt = None,
    horizon: HorizonOpt = None,
    until_step: UntilStepOpt = None,
    until_fraction: UntilFractionOpt = None,
    model: ModelOpt = DEFAULT_MODEL,
    reward_range: RewardRangeOpt = None,
    target: Annotated[float | None, typer.Option("--target", help="target reward (the run's units)")] = None,
    cost_per_step: Annotated[
        float | None,
        typer.Option("--cost-per-step", help="cost of one more optimizer step (in units of --value-per-reward)"),
    ] = None,
    cost_per_hour: Annotated[
        float | None, typer.Option("--cost-per-hour", help="cost per hour of training (needs --steps-per-hour)")
    ] = None,
    steps_per_hour: Annotated[float | None, typer.Option("--steps-per-hour", help="optimizer steps per hour")] = None,
    value_per_reward: Annotated[
        float | None, typer.Option("--value-per-reward", help="value of one reward unit at the end (default 1)")
    ] = None,
    epoch_steps: Annotated[
        int | None, typer.Option("--epoch-steps", help="steps per epoch (compare with paper B's 0.8-epoch rule)")
    ] = None,
    out: OutOpt = None,
    out_dir: OutDirOpt = None,
    seed: SeedOpt = 0,
    draws: DrawsOpt = DEFAULT_DRAWS,
    tune: TuneOpt = DEFAULT_TUNE,
    chains: ChainsOpt = DEFAULT_CHAINS,
    strict: StrictOpt = False,
    delta: DeltaOpt = DEFAULT_DELTA,
    risk: RiskOpt = DEFAULT_RISK,
):
    """Probability of reaching a target by a budget, expected gains, and the best step to stop.

    The main table (--out) has one row per run with the recommendation and the stop policy's advice; over
    several runs (a sweep) it also says which runs to stop now, the share of the sweep's remaining steps
    that saves, and the reward expected to be lost, with its 90% interval. --out-dir gets each run's
    budget table (every step) and figure.
    """
    import pandas as pd

    from bayesgrpo.decisions.budget import budget_table
    from bayesgrpo.io.output import atomic_path, safe_file_stem, write_table
    from bayesgrpo.plots.budget import plot_budget

    # ---- costs are checked before any sampling
    if cost_per_hour is not None and steps_per_hour is None:
        C.fail("--cost-per-hour needs --steps-per-hour (to turn hours into optimizer steps)")
    for name, v in (("--steps-per-hour", steps_per_hour), ("--epoch-steps", epoch_steps)):
        if v is not None and v <= 0:
            C.fail(f"{name} must be > 0, got {v:g}")
    for name, v in (("--cost-per-step", cost_per_step), ("--cost-per-hour", cost_per_hour)):
        if v is not None and v < 0:
            C.fail(f"{name} must be >= 0, got {v:g}")
    if cost_per_step is not None and cost_per_hour is not None:
        implied = cost_per_hour / steps_per_hour
        if abs(implied - cost_per_step) > 1e-9 * max(1.0, abs(cost_per_step)):
            C.fail(
                f"--cost-per-step {cost_per_step:g} contradicts --cost-per-hour / --steps-per-hour = {implied:g}; give one of them"
            )
    C.validate_outputs(out=out, out_dir=out_dir)
    res = run_forecast(runs, meta=meta, fmt=fmt, run=run, exclude=exclude, horizon=horizon, until_step=until_step,
                       until_fraction=until_fraction, model=model, seed=seed, draws=draws, tune=tune, chains=chains,
                       strict=strict, title="budget", figures=False, reward_range=reward_range, delta=delta,
                       risk=risk)  # fmt: skip
    fit = res.fit
    recs = []
    taken: set[str] = set()
    for rid in fit.forecast_ids:
        info = fit.infos[rid]
        kw = dict(target=target, cost_per_step=cost_per_step, cost_per_hour=cost_per_hour, steps_per_hour=steps_per_hour,
                  value_per_reward=value_per_reward, epoch_steps=epoch_steps, max_steps=info.horizon)  # fmt: skip
        with C.guard():
            draws_ = fit.paths(rid)
            tab = budget_table(draws_, **kw)
        rec = tab.attrs["recommendation"]
        recs.append(rec.to_dict())
        cols = [c for c in ("step", "expected_reward", "reward_q05", "reward_q95", "p_target", "expected_gain_next",
                            "expected_utility", "p_best", "p_settled") if c in tab.columns]  # fmt: skip
        C.print_table(
            tab[cols].iloc[:: max(1, len(tab) // 12)],
            title=f"{rid}: budget (every {max(1, len(tab) // 12)}th forecast step)",
        )
        C.status(rec.summary())
        if out_dir is not None:
            stem = safe_file_stem(rid, taken)
            truth = res.full.run(rid) if res.truncated else None
            with C.guard():
                write_table(tab, out_dir / f"{stem}_budget.csv")
                fig = plot_budget(draws_, tab, history=fit.runs.run(rid), truth=truth)
                with atomic_path(out_dir / f"{stem}_budget.png") as tmp:
                    fig.savefig(tmp, dpi=110, format="png")
            C.status(f"wrote {out_dir / (stem + '_budget.csv')} and {out_dir / (stem + '_budget.png')}")
    table = pd.DataFrame(recs)
    table["notes"] = table["notes"].map(lambda n: "; ".join(n))
    if res.decisions:
        table = _sweep_advice(table, res)
    if out is not None:
        with C.guard():
            write_table(table, out)
        C.status(f"wrote {out}")


def _sweep_advice(table, res):
    """The stop policy over the sweep: which runs to stop now, the share of remaining steps that saves, and
    the reward expected to be lost (printed; its per-run columns joined to ``table``)."""
    from bayesgrpo.decisions.stop import sweep_stop_table

    fit, adv = res.fit, res.table.set_index("run_id")["advice"]
    runs = [dict(run_id=rid, advice=adv[rid], last_step=fit.infos[rid].last_step, horizon=fit.infos[rid].horizon,
                 level=res.decisions[rid]["level"], scale=res.decisions[rid]["scale"],
                 final_draws=fit.final_draws(rid)) for rid in fit.forecast_ids]  # fmt: skip
    per_run, summ = sweep_stop_table(runs)
    C.print_table(per_run, title="stop policy over the runs: advice now, steps left, and the reward lost by stopping "
                                 "now (final - current level: mean [90% interval], the run's units)")  # fmt: skip
    line = (
        f"sweep: stop {summ['stopped']} of {summ['runs']} run(s) now; that saves "
        f"{summ['share_of_remaining_steps_saved']:.0%} of the sweep's remaining steps"
    )
    if "lost_scale_mean" in summ:
        line += (
            f"; expected reward lost per stopped run {summ['lost_scale_mean']:+.3f} of its scale "
            f"[90%: {summ['lost_scale_lo']:+.3f}, {summ['lost_scale_hi']:+.3f}]"
        )
    C.status(line)
    return table.merge(per_run.drop(columns="advice"), on="run_id", how="left").merge(
        res.table[["run_id", "p_gain", "advice", "advice_error_rate"]], on="run_id", how="left"
    )
