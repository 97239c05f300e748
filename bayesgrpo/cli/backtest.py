"""``bayesgrpo backtest``: truncate complete runs, forecast, score against what was logged later.

Mounted by the main CLI as ``app.command("backtest")(backtest_cmd)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

__all__ = ["backtest_cmd"]


def _load(path: Path, meta: Optional[Path]):
    from bayesgrpo.io import read_runs

    return read_runs(str(path), meta=str(meta) if meta is not None else None)


def backtest_cmd(
    runs: Path = typer.Argument(..., help="Complete runs (any format read_runs understands, e.g. a long CSV)."),
    meta: Optional[Path] = typer.Option(None, "--meta", help="Per-run metadata CSV (source_repo is used for per-source aggregates)."),
    run: Optional[list[str]] = typer.Option(None, "--run", help="Backtest only these run ids (repeatable)."),
    cutoffs: str = typer.Option("0.1,0.2,0.3,0.5", help="Comma list of observed fractions of each run's step span."),
    model: str = typer.Option("oscillator", help="oscillator | saturation | scaling"),
    context: Optional[Path] = typer.Option(None, help="Complete runs used as hierarchical context (up to 6 of the same source per forecast run)."),
    context_meta: Optional[Path] = typer.Option(None, "--context-meta", help="Metadata of the context runs."),
    peers: str = typer.Option("all", help='"all", "none" or a comma list of last_value, exponential, scalerl, pow3, domhan, domhan_fast, lc_pfn.'),
    out: Path = typer.Option(Path("backtest_out"), help="Output folder (cases.csv is the resume ledger)."),
    seed: int = typer.Option(0, help="Sampler / bootstrap seed."),
    draws: int = typer.Option(500, help="NUTS draws per chain."),
    tune: int = typer.Option(500, help="NUTS tuning steps per chain."),
    resume: bool = typer.Option(True, help="Skip cases already in OUT/cases.csv."),
) -> None:
    """Backtest forecasts: truncate each complete run at each cutoff, forecast its final reward with
    bayesgrpo and the peers, and score against the logged truth (writes cases.csv, summary.md/json,
    figures). Safe to interrupt: rerun the same command to resume."""
    import warnings

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from bayesgrpo.evaluation.backtest import backtest
    from bayesgrpo.forecast.forecaster import SamplerConfig

    console = Console()
    try:
        cut = tuple(float(c) for c in cutoffs.split(",") if c.strip())
    except ValueError:
        raise typer.BadParameter(f"--cutoffs must be a comma list of numbers, got {cutoffs!r}") from None
    if not cut or any(not 0 < c < 1 for c in cut):
        raise typer.BadParameter(f"every cutoff must lie in (0, 1), got {cutoffs!r}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rs = _load(runs, meta)
        if run:
            try:
                rs = rs.select(run)
            except KeyError as e:
                raise typer.BadParameter(str(e.args[0]), param_hint="--run") from None
        ctx = _load(context, context_meta) if context is not None else None
    sampler = SamplerConfig(draws=draws, tune=tune, seed=seed)
    with Progress(
        TextColumn("[bold]backtest[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=False,
    ) as bar:  # fmt: skip
        task = bar.add_task("starting", total=None)

        def progress(done: int, total: int, msg: str) -> None:
            bar.update(task, completed=done, total=total, description=msg)

        res = backtest(rs, cutoffs=cut, model=model, context=ctx, peers=peers, sampler=sampler, out_dir=out,
                       resume=resume, progress=progress, seed=seed)  # fmt: skip
    _print_summary(console, res)
    console.print(f"wrote {out}/cases.csv, summary.md, summary.json and figures")


def _print_summary(console, res) -> None:
    from rich.table import Table

    s = res.summary
    if s.empty:
        console.print("[yellow]no case could be scored[/]")
        return
    t = Table(title="Backtest: per cutoff x method (normalised by each run's 5–95% reward range)")
    heads = ["cutoff", "method", "median nAE", "mean nCRPS", "cov50", "cov80", "cov90", "width80", "s/forecast", "failed", "n"]
    for h in heads:
        t.add_column(h, justify="right" if h not in ("method",) else "left")
    for _, r in s.iterrows():
        t.add_row(
            f"{r.cutoff:g}", str(r.method), f"{r.median_nae:.3f}", f"{r.mean_ncrps:.3f}", f"{r.cover50:.0%}",
            f"{r.cover80:.0%}", f"{r.cover90:.0%}", f"{r.mean_nwidth80:.3f}", f"{r.sec_per_forecast:.2f}",
            f"{r.failure_rate:.0%}", str(int(r.n_cases)),
        )  # fmt: skip
    console.print(t)
    if len(res.skipped):
        console.print(f"skipped {len(res.skipped)} run x cutoff (too few points before the cutoff); see skipped.csv")
