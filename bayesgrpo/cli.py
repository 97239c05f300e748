"""The ``bayesgrpo`` command line (typer). Heavy imports happen inside commands so ``--help`` is instant."""

from __future__ import annotations

import logging
import sys
import time
import warnings
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="bayesgrpo",
    help="Where is this GRPO run going? Calibrated Bayesian forecasts of reward curves from training logs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

EXAMPLE_DIR = Path(__file__).resolve().parents[1] / "data" / "examples"
EXAMPLE_RUN = EXAMPLE_DIR / "example-grpo-run" / "trainer_state.json"
EXAMPLE_META = EXAMPLE_DIR / "meta.csv"

MetaOpt = Annotated[Path | None, typer.Option("--meta", help="metadata CSV/JSON (run_id + model, group_size, beta1, max_steps, ...)")]
FormatOpt = Annotated[str | None, typer.Option("--format", help="log format (default: detected); see `bayesgrpo formats`")]


def _console():
    from rich.console import Console

    return Console(stderr=False, highlight=False)


def _fail(msg: str, code: int = 2):
    from rich.console import Console

    # soft_wrap: an error stays on one line whatever the terminal width
    from rich.markup import escape

    Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {escape(msg)}", highlight=False)
    raise typer.Exit(code)


def _show_warnings(caught) -> None:
    from rich.console import Console
    from rich.markup import escape

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for w in caught:
        err.print(f"[yellow]warning ({w.category.__name__}):[/] {escape(str(w.message))}")


def _read(paths: list[Path], meta: Path | None, fmt: str | None):
    """Read one or many logs into a RunSet; BayesGRPO errors become one-line messages."""
    from bayesgrpo.errors import BayesGRPOError
    from bayesgrpo.io import read_many, read_runs

    for p in paths:
        if not p.exists():
            _fail(f"{p}: no such file or directory")
    if meta is not None and not meta.exists():
        _fail(f"{meta}: no such metadata file")
    try:
        if len(paths) == 1:
            return read_runs(paths[0], format=fmt, meta=meta)
        return read_many(paths, format=fmt, meta=meta)
    except BayesGRPOError as e:
        _fail(str(e))


def _table(df, title: str | None = None, floatfmt: str = "{:.4g}"):
    from rich.table import Table

    t = Table(title=title, show_lines=False, header_style="bold")
    for c in df.columns:
        t.add_column(str(c), overflow="fold")
    for _, row in df.iterrows():
        t.add_row(*[floatfmt.format(v) if isinstance(v, float) else str(v) for v in row.to_numpy()])
    return t


@app.callback()
def _main(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="log progress details")] = False):
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


# ----------------------------------------------------------------------------------------- summary
@app.command()
def summary(
    paths: Annotated[list[Path], typer.Argument(help="log files (any supported format)")],
    meta: MetaOpt = None,
    fmt: FormatOpt = None,
):
    """List the runs found in log files: points, steps, reward range, metrics and metadata present."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = _read(paths, meta, fmt)
    _show_warnings(caught)
    s = runs.summary().reset_index()
    s["interval"] = s["interval"].map(lambda v: f"{v:g}")
    con = _console()
    con.print(_table(s, title=f"{len(runs)} run(s), {len(runs.data)} points"))


@app.command()
def formats():
    """List the supported log formats."""
    from bayesgrpo.io import FORMATS

    for f in FORMATS:
        typer.echo(f)


# ---------------------------------------------------------------------------------------- forecast
def _safe_name(run_id: str) -> str:
    """A file-name-safe version of a run id."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in run_id)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _forecast_impl(
    runs_paths, meta, fmt, *, run_ids=None, horizon=None, until_step=None, until_fraction=None, context=None,
    context_meta=None, model="oscillator", out=None, plot=None, seed=0, final_window=0.1, stop_fraction=0.95,
    draws=1000, tune=800, title="forecast",
):  # fmt: skip
    import pandas as pd
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from bayesgrpo.errors import BayesGRPOError

    con = _console()
    t_start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = _read(runs_paths, meta, fmt)
        ctx = _read(context, context_meta, None) if context else None
    _show_warnings(caught)
    if run_ids:
        try:
            runs = runs.select(run_ids)
        except KeyError as e:
            _fail(str(e.args[0]))
    full = runs
    if until_step is not None or until_fraction is not None:
        runs = runs.truncate(until_step=until_step) if until_step is not None else runs.truncate(fraction=until_fraction)
        if horizon is None:
            # forecasting "from the early steps" of a logged run: the horizon is where the log ends
            # unless max_steps says more
            horizon = {
                r: int(max(full.run(r)["step"].iloc[-1], full.meta.loc[r].get("max_steps") or 0)) for r in runs.run_ids
            }
    from bayesgrpo.forecast import Forecaster, SamplerConfig

    fc = Forecaster(
        model, final_window=final_window, stop_fraction=stop_fraction,
        sampler=SamplerConfig(draws=draws, tune=tune, seed=seed),
    )  # fmt: skip
    con.print(
        f"[bold]{title}[/]: {len(runs)} run(s), model [cyan]{model}[/]"
        + (f", pooling with {len(ctx)} context run(s)" if ctx is not None else "")
        + " — compiling the model once (about 15–30 s), then about 1 s per run"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with Progress(
                TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TimeElapsedColumn(), console=con, transient=True,
            ) as prog:  # fmt: skip
                task = prog.add_task("sampling", total=None)
                fit = fc.fit(runs, horizon=horizon, context=ctx, progress=lambda d, n: prog.update(task, completed=d, total=n))
            table = fit.table()
            fit.warn_health()
        except BayesGRPOError as e:
            _fail(str(e))
    _show_warnings(caught)
    show = pd.DataFrame(
        {
            "run": table["run_id"],
            "seen/horizon": [f"{a}/{b}" for a, b in zip(table["observed_until"], table["horizon"])],
            "final reward [80%]": [f"{m:.3g} [{lo:.3g}, {hi:.3g}]" for m, lo, hi in zip(table["final_q50"], table["final_q10"], table["final_q90"])],
            "plateau": [f"{v:.3g}" for v in table["plateau_q50"]],
            "stop step": [f"{v:.0f}" for v in table["stop_q50"]],
            "P(stop<H)": [f"{v:.2f}" for v in table["p_stop_before_horizon"]],
            "r_hat": [f"{v:.3f}" for v in table["r_hat_max"]],
        }
    )
    con.print(_table(show, title="final reward = mean logged reward over the last 10% of the run (median [80% interval])"))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.suffix == ".json":
            table.to_json(out, orient="records", indent=2)
        else:
            table.to_csv(out, index=False)
        con.print(f"wrote {out}")
    if plot is not None:
        from bayesgrpo.plots import fan_chart

        plt = _pyplot()

        plot.mkdir(parents=True, exist_ok=True)
        for rid in fit.forecast_ids:
            truth = full.run(rid) if (until_step is not None or until_fraction is not None) else None
            fig = fan_chart(fit, rid, truth=truth)
            path = plot / f"{_safe_name(rid)}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            con.print(f"wrote {path}")
    con.print(f"done in {time.perf_counter() - t_start:.1f} s")
    return fit, table


@app.command()
def forecast(
    runs: Annotated[list[Path], typer.Argument(help="log file(s) holding the runs to forecast")],
    meta: MetaOpt = None,
    fmt: FormatOpt = None,
    run: Annotated[list[str] | None, typer.Option("--run", help="forecast only these run ids (repeatable)")] = None,
    horizon: Annotated[int | None, typer.Option(help="step to forecast to (default: metadata max_steps)")] = None,
    until_step: Annotated[int | None, typer.Option(help="use only steps <= this (what would the forecast have said then?)")] = None,
    until_fraction: Annotated[float | None, typer.Option(help="use only the first fraction of each run's logged steps")] = None,
    context: Annotated[list[Path] | None, typer.Option(help="complete runs of related models to pool with (hierarchical)")] = None,
    context_meta: Annotated[Path | None, typer.Option(help="metadata for --context runs")] = None,
    model: Annotated[str, typer.Option(help="oscillator | saturation | scaling")] = "oscillator",
    out: Annotated[Path | None, typer.Option(help="write the forecast table (.csv or .json)")] = None,
    plot: Annotated[Path | None, typer.Option(help="write one fan-chart PNG per run into this folder")] = None,
    seed: int = 0,
    final_window: Annotated[float, typer.Option(help="final reward = mean over this last fraction of the run")] = 0.1,
    stop_fraction: Annotated[float, typer.Option(help="stop step = first step reaching this share of the gain")] = 0.95,
    draws: Annotated[int, typer.Option(help="posterior draws per chain")] = 1000,
    tune: Annotated[int, typer.Option(help="tuning steps per chain")] = 800,
):
    """Forecast every run's final reward and stop step, with intervals, from its logged steps."""
    if model not in ("oscillator", "saturation", "scaling"):
        _fail(f"--model must be oscillator, saturation or scaling, not {model!r}")
    _forecast_impl(
        runs, meta, fmt, run_ids=run, horizon=horizon, until_step=until_step, until_fraction=until_fraction,
        context=context, context_meta=context_meta, model=model, out=out, plot=plot, seed=seed,
        final_window=final_window, stop_fraction=stop_fraction, draws=draws, tune=tune,
    )  # fmt: skip


@app.command()
def demo(
    out_dir: Annotated[Path, typer.Option("--out-dir", help="where to write the table and the plot")] = Path("out/demo"),
    until_step: Annotated[int, typer.Option(help="forecast from the first steps only")] = 150,
):
    """Forecast the shipped example run (a TRL trainer_state.json) from its first 150 steps."""
    _console().print(f"example: {EXAMPLE_RUN.relative_to(EXAMPLE_DIR.parents[1])} (500 steps logged; forecasting from step {until_step})")
    _forecast_impl([EXAMPLE_RUN], EXAMPLE_META, None, until_step=until_step, out=out_dir / "forecast.csv", plot=out_dir, title="demo forecast")


# ------------------------------------------------------------------------------------------ budget
@app.command()
def budget(
    runs: Annotated[list[Path], typer.Argument(help="log file(s)")],
    meta: MetaOpt = None,
    fmt: FormatOpt = None,
    run: Annotated[list[str] | None, typer.Option("--run", help="run id(s) to budget (default: all)")] = None,
    horizon: Annotated[int | None, typer.Option(help="last step to consider (default: max_steps)")] = None,
    until_step: Annotated[int | None, typer.Option(help="use only steps <= this")] = None,
    target: Annotated[float | None, typer.Option(help="target reward (run units)")] = None,
    cost_per_step: Annotated[float | None, typer.Option(help="cost of one more optimizer step")] = None,
    cost_per_hour: Annotated[float | None, typer.Option(help="cost per GPU-hour (with --steps-per-hour)")] = None,
    steps_per_hour: Annotated[float | None, typer.Option(help="optimizer steps per hour")] = None,
    value_per_reward: Annotated[float | None, typer.Option(help="value of one reward unit at the end")] = None,
    epoch_steps: Annotated[int | None, typer.Option(help="steps per epoch (compare with paper B's ~0.8 epoch rule)")] = None,
    out_dir: Annotated[Path, typer.Option("--out-dir")] = Path("out/budget"),
    seed: int = 0,
):
    """Probability of reaching a target by a budget, expected gains, and the best step to stop."""
    from bayesgrpo.decisions import budget_table, plot_budget, recommend_stop

    fit, _ = _forecast_impl(runs, meta, fmt, run_ids=run, horizon=horizon, until_step=until_step, seed=seed, title="budget")
    con = _console()
    out_dir.mkdir(parents=True, exist_ok=True)
    kw = dict(
        target=target, cost_per_step=cost_per_step, cost_per_hour=cost_per_hour, steps_per_hour=steps_per_hour,
        value_per_reward=value_per_reward, epoch_steps=epoch_steps,
        max_steps=None if horizon is None else horizon,
    )  # fmt: skip
    plt = _pyplot()
    for rid in fit.forecast_ids:
        draws = fit.paths(rid)
        tab = budget_table(draws, **kw)
        rec = recommend_stop(draws, **kw)
        cols = [c for c in ("step", "expected_reward", "reward_q05", "reward_q95", "p_target", "expected_gain_next", "expected_utility", "p_best") if c in tab.columns]
        con.print(_table(tab[cols].iloc[:: max(1, len(tab) // 12)], title=f"{rid}: budget"))
        con.print(rec.summary())
        name = _safe_name(rid)
        tab.to_csv(out_dir / f"{name}_budget.csv", index=False)
        fig = plot_budget(draws, tab, history=fit.runs.run(rid), **kw)
        fig.savefig(out_dir / f"{name}_budget.png", dpi=110)
        plt.close(fig)
        con.print(f"wrote {out_dir / (name + '_budget.csv')} and {out_dir / (name + '_budget.png')}")


# ---------------------------------------------------------------------------------------- diagnose
@app.command()
def diagnose(
    runs: Annotated[list[Path], typer.Argument(help="log file(s)")],
    meta: MetaOpt = None,
    fmt: FormatOpt = None,
    run: Annotated[list[str] | None, typer.Option("--run", help="run id(s) (default: all)")] = None,
    ceiling: Annotated[float | None, typer.Option(help="verifiable reward ceiling (e.g. 1 for 0/1 rewards)")] = None,
    posterior: Annotated[bool, typer.Option(help="also fit the oscillator and use its posterior for instability")] = False,
    out_dir: Annotated[Path, typer.Option("--out-dir")] = Path("out/diagnose"),
):
    """Check runs for reward hacking, advantage degeneracy, policy concentration and instability."""
    from bayesgrpo.diagnose import diagnose_runs, plot_diagnosis

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rs = _read(runs, meta, fmt)
    _show_warnings(caught)
    if run:
        rs = rs.select(run)
    posts = None
    if posterior:
        fit, _ = _forecast_impl(runs, meta, fmt, run_ids=run, title="posterior for diagnostics")
        posts = {r: fit.paths(r) for r in fit.forecast_ids}
    res = diagnose_runs(rs, posteriors=posts, ceiling=ceiling)
    con = _console()
    sev = res["severity"].astype(str)
    flagged = res[sev.isin(["warning", "critical"])]
    show = flagged[["run_id", "mode", "severity", "onset_step", "evidence"]]
    con.print(_table(show, title=f"warnings and critical findings: {len(flagged)} of {len(res)} checks ({len(rs)} runs x 4 modes)"))
    n_watch = int((sev == "watch").sum())
    if n_watch:
        con.print(f"[dim]{n_watch} more check(s) at severity 'watch' are listed in {out_dir / 'diagnosis.csv'}[/]")
    missing = res.groupby("run_id")["missing"].apply(lambda s: ",".join(sorted({m for v in s for m in str(v).split(",") if m and m != "nan"})))
    for rid, m in missing.items():
        if m:
            con.print(f"[dim]{rid}: not logged, so not assessed from them: {m}[/]")
    out_dir.mkdir(parents=True, exist_ok=True)
    res.to_csv(out_dir / "diagnosis.csv", index=False)
    plt = _pyplot()
    for rid in rs.run_ids:
        fig = plot_diagnosis(rs, rid, res, ceiling=ceiling, posteriors=posts)
        fig.savefig(out_dir / f"{_safe_name(rid)}_diagnosis.png", dpi=100)
        plt.close(fig)
    con.print(f"wrote {out_dir / 'diagnosis.csv'} and {len(rs)} figure(s) in {out_dir}")


# -------------------------------------------------------------------------- commands from modules
def _mount() -> None:
    from bayesgrpo.cli_backtest import backtest_cmd
    from bayesgrpo.cli_compare import compare_cmd
    from bayesgrpo.testbed.cli import testbed_app

    app.add_typer(testbed_app, name="testbed")
    app.command("backtest", help="Truncate complete runs at cutoffs, forecast, and score against what happened (vs peers).")(backtest_cmd)
    app.command("compare", help="Compare model families and group sizes with a hierarchical fit; PSIS-LOO model comparison.")(compare_cmd)
    __import__("bayesgrpo.integrations.cli", fromlist=["mount"]).mount(app)  # `bayesgrpo watch` (bayesgrpo/integrations/cli.py)


_mount()


def main() -> None:  # pragma: no cover
    sys.exit(app())
