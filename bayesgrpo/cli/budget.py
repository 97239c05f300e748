"""``bayesgrpo budget``: P(target by a budget), expected gains, and the best step to stop."""

from __future__ import annotations

from typing import Annotated

import typer

from bayesgrpo.cli import common as C
from bayesgrpo.cli.forecast import run_forecast
from bayesgrpo.cli.options import (
    DEFAULT_CHAINS,
    DEFAULT_DRAWS,
    DEFAULT_MODEL,
    DEFAULT_TUNE,
    ChainsOpt,
    DrawsOpt,
    ExcludeOpt,
    FormatOpt,
    HorizonOpt,
    MetaOpt,
    ModelOpt,
    OutDirOpt,
    OutOpt,
    RewardKeyOpt,
    RewardRangeOpt,
    RunOpt,
    RunsArg,
    SeedOpt,
    StrictOpt,
    TuneOpt,
    UntilFractionOpt,
    UntilStepOpt,
)

__all__ = ["budget_cmd"]


def _names(run_ids) -> list[str]:
    """The files ``--out-dir`` receives: a budget table and figure per run."""
    from bayesgrpo.io.output import file_stems

    return [f"{s}_budget.{x}" for s in file_stems(run_ids).values() for x in ("csv", "png")]


def budget_cmd(
    runs: RunsArg,
    meta: MetaOpt = None,
    fmt: FormatOpt = None,
    reward_key: RewardKeyOpt = None,
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
):
    """Probability of reaching a target by a budget, expected gains, and the best step to stop.

    The main table (--out) has one row per run with the recommendation; --out-dir gets each run's
    budget table (every step) and figure.
    """
    import pandas as pd

    from bayesgrpo.decisions.budget import budget_table
    from bayesgrpo.io.output import file_stems, save_figure, write_table
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
                       strict=strict, title="budget", figures=False, reward_range=reward_range, reward_key=reward_key,
                       check_runs=lambda rs: C.check_out_names(out_dir, _names(rs.run_ids)))  # fmt: skip
    fit = res.fit
    stems = file_stems(res.table["run_id"])
    status = res.table.set_index("run_id")[["status", "error"]]
    recs = []
    for rid in fit.forecast_ids if fit is not None else []:
        info = fit.infos[rid]
        kw = dict(target=target, cost_per_step=cost_per_step, cost_per_hour=cost_per_hour, steps_per_hour=steps_per_hour,
                  value_per_reward=value_per_reward, epoch_steps=epoch_steps, max_steps=info.horizon)  # fmt: skip
        with C.guard():
            draws_ = fit.paths(rid)
            tab = budget_table(draws_, **kw)
        rec = tab.attrs["recommendation"]
        recs.append(rec.to_dict() | {"status": status.loc[rid, "status"], "status_reason": status.loc[rid, "error"]})
        cols = [c for c in ("step", "expected_reward", "reward_q05", "reward_q95", "p_target", "expected_gain_next",
                            "expected_utility", "p_best", "p_settled") if c in tab.columns]  # fmt: skip
        C.print_table(
            tab[cols].iloc[:: max(1, len(tab) // 12)],
            title=f"{rid}: budget (every {max(1, len(tab) // 12)}th forecast step)",
        )
        C.status(rec.summary())
        if out_dir is not None:
            stem = stems[rid]
            truth = res.full.run(rid) if res.truncated else None
            with C.guard():
                write_table(tab, out_dir / f"{stem}_budget.csv")
                fig = plot_budget(draws_, tab, history=fit.runs.run(rid), truth=truth)
                save_figure(fig, out_dir / f"{stem}_budget.png")
            C.status(f"wrote {out_dir / (stem + '_budget.csv')} and {out_dir / (stem + '_budget.png')}")
    for rid, v in res.complete.items():  # logged up to the horizon: nothing left to decide
        h = int(res.table.set_index("run_id").loc[rid, "horizon"])
        recs.append({"run_id": rid, "step": h, "rule": "complete (logged up to its horizon)", "expected_reward": v,
                     "notes": ("the final reward is observed",), "status": "complete",
                     "status_reason": ""})  # fmt: skip
        C.status(f"{rid}: logged up to its horizon {h}; its final reward {v:.4g} is observed")
    table = pd.DataFrame(recs)
    table["notes"] = table["notes"].map(lambda n: "; ".join(n))
    if out is not None:
        with C.guard():
            write_table(table, out)
        C.status(f"wrote {out}")
