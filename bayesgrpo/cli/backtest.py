"""``bayesgrpo backtest``: truncate complete runs, forecast, score against what was logged later."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bayesgrpo.cli import common as C
from bayesgrpo.cli.options import (
    DEFAULT_CHAINS,
    DEFAULT_DRAWS,
    DEFAULT_MODEL,
    DEFAULT_TUNE,
    ChainsOpt,
    ContextMetaOpt,
    ContextOpt,
    DrawsOpt,
    ExcludeOpt,
    FormatOpt,
    MetaOpt,
    ModelOpt,
    OutDirOpt,
    OutOpt,
    RewardKeyOpt,
    RewardRangeOpt,
    RunOpt,
    RunsArg,
    SchedulerOpt,
    SeedOpt,
    TuneOpt,
    WorkersOpt,
)

__all__ = ["backtest_cmd"]


def _cutoffs(text: str) -> tuple[float, ...]:
    """``--cutoffs``: a comma list of observed fractions, each in (0, 1) (else one line, exit 2)."""
    try:
        cut = tuple(float(c) for c in text.split(",") if c.strip())
    except ValueError:
        C.fail(f"--cutoffs must be a comma list of numbers, got {text!r}")
    if not cut or any(not 0 < c < 1 for c in cut):
        C.fail(f"--cutoffs: every cutoff must lie in (0, 1), got {text!r}")
    return cut


def _run(rs, out_dir, **kw):
    """The backtest with a progress bar; after a Ctrl-C one line saying what the ledger keeps, exit 130."""
    from bayesgrpo.evaluation.backtest import backtest

    stopped = None
    with C.progress_bar("backtest", unit="case") as bar:
        try:
            return backtest(rs, out_dir=out_dir, progress=lambda d, n, m: bar(d, n, m), **kw)
        except KeyboardInterrupt as e:
            stopped = e
    n = getattr(stopped, "partial", None)
    C.interrupted(f"{n if n is not None else 'the'} finished case(s) are in {out_dir / 'cases.csv'}; the case in "
                  "flight is not; rerun the same command to resume")  # fmt: skip


def backtest_cmd(
    runs: RunsArg,
    meta: MetaOpt = None,
    fmt: FormatOpt = None,
    reward_key: RewardKeyOpt = None,
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
) -> None:
    """Backtest forecasts: truncate each complete run at each cutoff, forecast its final reward with
    bayesgrpo and the peers, and score against the logged truth. --out-dir holds cases.csv (the resume
    ledger), summary.md/json and figures; --out writes the summary table. Safe to interrupt: rerun the
    same command to resume."""
    from bayesgrpo.evaluation.backtest import OUTPUT_FILES
    from bayesgrpo.evaluation.methods import resolve_methods
    from bayesgrpo.inference.executor import check_options, make_executor
    from bayesgrpo.io.output import write_table

    C.validate_model(model)
    cut = _cutoffs(cutoffs)
    try:
        resolve_methods(peers)
    except ValueError as e:
        C.fail(f"--peers: {e}")
    smp = C.sampler_config(draws=draws, tune=tune, chains=chains, seed=seed)
    C.validate_outputs(out=out, out_dir=out_dir)
    with C.guard():
        check_options(workers=workers, scheduler=scheduler)
    rs = C.read_runsets(
        runs,
        meta,
        fmt,
        run=run,
        exclude=exclude,
        reward_range=C.parse_reward_range(reward_range),
        reward_key=reward_key,
    )
    C.check_out_names(out_dir, OUTPUT_FILES)
    ctx = C.read_runsets(context, context_meta, None, option="--context") if context else None
    C.status(f"backtest: {len(rs)} run(s) x {len(cut)} cutoff(s), peers {peers}; ledger {out_dir / 'cases.csv'}")
    with C.guard(), make_executor(workers=workers, scheduler=scheduler) as ex:
        res = _run(rs, out_dir, cutoffs=cut, model=model, context=ctx, peers=peers, sampler=smp, resume=resume,
                   seed=seed, executor=ex)  # fmt: skip
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
    if out is not None:
        with C.guard():
            write_table(s, out)
        C.status(f"wrote {out}")
    C.status(f"wrote {out_dir}/cases.csv, summary.md, summary.json and figures")
