"""``bayesgrpo backtest``: truncate complete runs, forecast, score against what was logged later."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bayesgrpo.cli import common as C
from bayesgrpo.cli.options import (
    DEFAULT_CHAINS,
    DEFAULT_DELTA,
    DEFAULT_DRAWS,
    DEFAULT_MODEL,
    DEFAULT_RISK,
    DEFAULT_TUNE,
    ChainsOpt,
    ContextMetaOpt,
    ContextOpt,
    DeltaOpt,
    DrawsOpt,
    ExcludeOpt,
    FormatOpt,
    MetaOpt,
    ModelOpt,
    OutDirOpt,
    OutOpt,
    RewardRangeOpt,
    RiskOpt,
    RunOpt,
    RunsArg,
    SchedulerOpt,
    SeedOpt,
    TuneOpt,
    WorkersOpt,
)

__all__ = ["backtest_cmd"]


def backtest_cmd(
    runs: RunsArg,
    meta: MetaOpt = None,
    fmt: FormatOpt = None,
    run: RunOpt = None,
    exclude: ExcludeOpt = None,
    cutoffs: Annotated[
        str, typer.Option("--cutoffs", help="comma list of observed fractions of each run's step span, each in (0, 1)")
    ] = "0.1,0.2,0.3,0.5",
    model: ModelOpt = DEFAULT_MODEL,
    reward_range: RewardRangeOpt = None,
    context: ContextOpt = None,
    context_meta: ContextMetaOpt = None,
    peers: Annotated[
        str,
        typer.Option(
            "--peers",
            help='"all", "none" or a comma list of last_value, exponential, scalerl, pow3, domhan, domhan_fast',
        ),
    ] = "all",
    out: OutOpt = None,
    out_dir: OutDirOpt = Path("backtest_out"),
    seed: SeedOpt = 0,
    draws: DrawsOpt = DEFAULT_DRAWS,
    tune: TuneOpt = DEFAULT_TUNE,
    chains: ChainsOpt = DEFAULT_CHAINS,
    resume: Annotated[
        bool, typer.Option("--resume/--no-resume", help="skip cases already in OUT_DIR/cases.csv")
    ] = True,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
    delta: DeltaOpt = DEFAULT_DELTA,
    risk: RiskOpt = DEFAULT_RISK,
) -> None:
    """Backtest forecasts: truncate each complete run at each cutoff, forecast its final reward with
    bayesgrpo and the peers, and score against the logged truth. --out-dir holds cases.csv (the resume
    ledger), summary.md/json and figures; --out writes the summary table. Safe to interrupt: rerun the
    same command to resume. With bayesgrpo among the methods it also prints the stop policy's operating
    characteristic on these runs (--risk, --delta; checked at the cutoffs in order, as a live run would be):
    runs stopped, steps saved, the share of stops that were bad (lost more than 0.1 of the run's range) and
    the reward lost, against the oracle (OUT_DIR/stop_policy.csv), so a lab can check the advice on its own
    history."""
    from bayesgrpo.evaluation.backtest import backtest
    from bayesgrpo.evaluation.methods import resolve_methods
    from bayesgrpo.inference.executor import check_options, make_executor
    from bayesgrpo.io.output import write_table

    C.validate_model(model)
    try:
        cut = tuple(float(c) for c in cutoffs.split(",") if c.strip())
    except ValueError:
        C.fail(f"--cutoffs must be a comma list of numbers, got {cutoffs!r}")
    if not cut or any(not 0 < c < 1 for c in cut):
        C.fail(f"--cutoffs: every cutoff must lie in (0, 1), got {cutoffs!r}")
    try:
        resolve_methods(peers)
    except ValueError as e:
        C.fail(f"--peers: {e}")
    smp = C.sampler_config(draws=draws, tune=tune, chains=chains, seed=seed)
    C.validate_outputs(out=out, out_dir=out_dir)
    policy = C.stop_policy(model=model, risk=risk, delta=delta)
    with C.guard():
        check_options(workers=workers, scheduler=scheduler)
    rs = C.read_runsets(runs, meta, fmt, run=run, exclude=exclude, reward_range=C.parse_reward_range(reward_range))
    ctx = C.read_runsets(context, context_meta, None, option="--context") if context else None
    C.status(f"backtest: {len(rs)} run(s) x {len(cut)} cutoff(s), peers {peers}; ledger {out_dir / 'cases.csv'}")
    with C.guard(), make_executor(workers=workers, scheduler=scheduler) as ex, C.progress_bar("backtest") as bar:
        res = backtest(rs, cutoffs=cut, model=model, context=ctx, peers=peers, sampler=smp, out_dir=out_dir,
                       resume=resume, progress=lambda d, n, m: bar(d, n, m), seed=seed, executor=ex,
                       save_draws=STOP_DRAWS if policy is not None else 0)  # fmt: skip
    s = res.summary
    if s.empty:
        C.status("no case could be scored")
        raise typer.Exit(C.EXIT_FAILED)
    show = s[["cutoff", "method", "median_nae", "mean_ncrps", "cover50", "cover80", "cover90", "mean_nwidth80",
              "sec_per_forecast", "failure_rate", "n_cases"]]  # fmt: skip
    C.print_table(show, title="backtest per cutoff x method (errors, CRPS and widths divided by each run's reward range)",
                  floatfmt="{:.3f}")  # fmt: skip
    if len(res.skipped):
        C.status(
            f"skipped {len(res.skipped)} run x cutoff (too few points before the cutoff); see {out_dir / 'skipped.csv'}"
        )
    if policy is not None:
        _stop_characteristic(res, rs, policy, out_dir)
    if out is not None:
        with C.guard():
            write_table(s, out)
        C.status(f"wrote {out}")
    C.status(f"wrote {out_dir}/cases.csv, summary.md, summary.json and figures")


#: final-reward draws kept per bayesgrpo case for the stop policy's probabilities (OUT_DIR/draws.npz)
STOP_DRAWS = 400


def _stop_characteristic(res, runs, policy, out_dir: Path) -> None:
    """The stop policy run through each run's cutoffs in order, against the oracle, printed and written to
    ``out_dir/stop_policy.csv`` (per run) -- :func:`bayesgrpo.evaluation.stop_rule.policy_characteristic`."""
    import numpy as np

    from bayesgrpo.evaluation.stop_rule import policy_characteristic
    from bayesgrpo.io.output import write_table

    path = out_dir / "draws.npz"
    if not path.exists():
        return
    with np.load(path) as z:
        draws = {k: z[k] for k in z.files}
    with C.guard():
        stops, summ = policy_characteristic(res.cases, runs, policy, draws=draws)
    if summ.empty:
        C.status("stop policy: no bayesgrpo case to judge it on")
        return
    show = summ[["weighting", "method", "runs", "stopped", "steps_saved", "bad_stops", "reward_lost"]]
    C.print_table(show, title=f"stop policy on these runs at the cutoffs in order ({policy.describe()}); "
                              "bad stop = lost more than 0.1 of the run's range; the oracle knows the outcome",
                  floatfmt="{:.3f}")  # fmt: skip
    C.status(f"stop policy: measured on the development runs, {policy.error_rate:.0%} of its stops were bad "
             "(leave-one-source-out, a forecast every 5% of each run); these runs' own rate is above")  # fmt: skip
    with C.guard():
        write_table(stops, out_dir / "stop_policy.csv")
    C.status(f"wrote {out_dir / 'stop_policy.csv'}")
