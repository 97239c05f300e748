"""``bayesgrpo budget``: P(target by a budget), expected gains, and the best step to stop."""

from __future__ import annotations

from typing import Annotated

import typer

from bayesgrpo.cli import common as C
from bayesgrpo.cli.forecast import run_forecast
from bayesgrpo.cli.options import (
    DEFAULT_CHAINS,
    DEFAULT_DRAWS,
    DEFAULT_KIND,
    DEFAULT_TUNE,
    ChainsOpt,
    DrawsOpt,
    ExcludeOpt,
    FormatOpt,
    HorizonOpt,
    KindOpt,
    MetaOpt,
    ModelAliasOpt,
    OutDirOpt,
    OutOpt,
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


def budget_cmd(
    runs: RunsArg,
    meta: MetaOpt = None,
    fmt: FormatOpt = None,
    run: RunOpt = None,
    exclude: ExcludeOpt = None,
    horizon: HorizonOpt = None,
    until_step: UntilStepOpt = None,
    until_fraction: UntilFractionOpt = None,
    kind: KindOpt = DEFAULT_KIND,
    model: ModelAliasOpt = None,
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

    from bayesgrpo.decisions.budget import Costs
    from bayesgrpo.io.output import write_table

    # ---- costs are checked before any sampling (their bounds and consistency: decisions.Costs)
    C.validated(Costs, cost_per_step=cost_per_step, cost_per_hour=cost_per_hour, steps_per_hour=steps_per_hour,
                value_per_reward=value_per_reward, epoch_steps=epoch_steps)  # fmt: skip
    C.validate_outputs(out=out, out_dir=out_dir)
    res = run_forecast(runs, meta=meta, fmt=fmt, run=run, exclude=exclude, horizon=horizon, until_step=until_step,
                       until_fraction=until_fraction, kind=kind, model=model, seed=seed, draws=draws, tune=tune, chains=chains,
                       strict=strict, title="budget", figures=False, reward_range=reward_range)  # fmt: skip
    costs = dict(cost_per_step=cost_per_step, cost_per_hour=cost_per_hour, steps_per_hour=steps_per_hour,
                 value_per_reward=value_per_reward, epoch_steps=epoch_steps)  # fmt: skip
    taken: set[str] = set()
    recs = [_one_run(res, rid, target=target, costs=costs, out_dir=out_dir, taken=taken) for rid in res.fit.forecast_ids]
    table = pd.DataFrame(recs)
    table["notes"] = table["notes"].map(lambda n: "; ".join(n))
    if out is not None:
        with C.guard():
            write_table(table, out)
        C.status(f"wrote {out}")


def _one_run(res, rid: str, *, target, costs: dict, out_dir, taken: set) -> dict:
    """One run's budget table (printed; with ``out_dir`` written with its figure) and its recommendation."""
    from bayesgrpo.decisions.budget import budget_table
    from bayesgrpo.io.output import safe_file_stem, save_figure, write_table
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
        stem = safe_file_stem(rid, taken)
        truth = res.full.run(rid) if res.truncated else None
        with C.guard():
            write_table(tab, out_dir / f"{stem}_budget.csv")
            save_figure(plot_budget(draws_, tab, history=fit.runs.run(rid), truth=truth), out_dir / f"{stem}_budget.png")
        C.status(f"wrote {out_dir / (stem + '_budget.csv')} and {out_dir / (stem + '_budget.png')}")
    return rec.to_dict()
