"""``bayesgrpo watch PATH``: the typer command around :func:`bayesgrpo.integrations.watch.watch`.

Mount it with ``app.command("watch", help=WATCH_HELP)(watch_cmd)`` (or :func:`mount`). Only typer is
imported at module level, so ``bayesgrpo --help`` stays instant.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.markup import escape

from bayesgrpo.conventions import DEFAULT_KIND, DEFAULT_RISK

__all__ = ["watch_cmd", "mount", "WATCH_HELP"]

AlertToOpt = Annotated[
    list[str] | None,
    typer.Option("--alert-to", metavar="TRACKER[:PROJECT]", help="also send the alerts (stop advice, failure flags, "
                 "P(decline)) to a run of this tracker: trackio (its local store) or wandb (WANDB_MODE applies); "
                 "project 'bayesgrpo' by default; repeatable"),
]  # fmt: skip
WATCH_HELP = "Follow a log that is being written (HF folder, verl/OpenRLHF/CSV/JSONL log, wandb:run) and re-forecast every N new steps."


def _live_table(results, *, title: str, note: str | None = None):
    """The live table of ``watch``'s last forecasts; ``note``: the latest status line, as its caption."""
    from rich.table import Table

    from bayesgrpo.integrations.watch import stop_text

    t = Table(title=escape(title), header_style="bold", caption=escape(note) if note else None)
    # the labels of `bayesgrpo forecast`'s table where the quantity is the same
    for c in (
        "seen/horizon",
        "final reward [80%]",
        "P(gain)",
        "advice",
        "P(>=target)",
        "stop step",
        "P(plateaued)",
        "budget stop",
        "flags",
        "fit s",
    ):
        t.add_column(c)
    for r in results[-12:]:
        if not r.get("ok"):
            t.add_row("-", f"[red]failed: {escape(str(r.get('error'))[:60])}[/]", *[""] * 8)
            continue
        flags = ",".join(f"{m}={v}" for m, v in (r.get("flags") or {}).items() if v not in ("none", "watch")) or "-"
        if r.get("status") == "complete":
            t.add_row(f"{r['observed_until']}/{r['horizon']}", f"{r['final_q50']:.3g} (observed: complete)", *[""] * 6,
                      flags, f"{r.get('seconds', float('nan')):.1f}")  # fmt: skip
            continue
        warn = " [yellow](sampler health poor)[/]" if r.get("status") == "warning" else ""
        t.add_row(
            f"{r['observed_until']}/{r['horizon']}",
            f"{r['final_q50']:.3g} [{r['final_q10']:.3g}, {r['final_q90']:.3g}]{warn}",
            "" if r.get("p_gain") is None else f"{r['p_gain']:.2f}", r.get("advice") or "",
            "" if r.get("p_target") is None else f"{r['p_target']:.2f}", stop_text(r),
            f"{r['p_plateaued']:.2f}", "" if r.get("recommended_stop") is None else f"{r['recommended_stop']:.0f}",
            flags, f"{r.get('seconds', float('nan')):.1f}",
        )  # fmt: skip
    return t


class _Display:
    """Where ``watch`` shows its forecasts: a live table on a terminal, else one plain line each."""

    def __init__(self, title: str, *, tty: bool, line):
        from rich.console import Console

        self.title, self.line = title, line
        self.results: list[dict] = []
        self.note: str | None = None  # the latest status line (the live table's caption)
        self.live = None
        if tty:
            from rich.live import Live

            con = Console(highlight=False, soft_wrap=True)
            self.live = Live(_live_table(self.results, title=title), console=con, refresh_per_second=2, transient=False)
            self.live.start()

    def update(self, res: dict) -> None:
        self.results.append(res)
        if self.live is not None:
            self.live.update(_live_table(self.results, title=self.title, note=self.note))
        else:
            typer.echo(self.line(res))
            sys.stdout.flush()

    def status(self, msg: str) -> None:
        """A status line: on stderr, or on a terminal the live table's caption (e.g. while the model compiles)."""
        self.note = msg
        if self.live is None:
            typer.echo(f"# {msg}", err=True)
        else:
            self.live.update(_live_table(self.results, title=self.title, note=msg))


def watch_cmd(
    path: Annotated[
        str, typer.Argument(help="log file, HF output folder, TensorBoard folder, or wandb:entity/project/run_id")
    ],
    every: Annotated[int, typer.Option(help="re-forecast after this many new logged steps")] = 5,
    interval: Annotated[float, typer.Option(help="seconds between polls of the log")] = 2.0,
    horizon: Annotated[int | None, typer.Option(help="step to forecast to (default: the log's max_steps)")] = None,
    target: Annotated[float | None, typer.Option(help="target reward: report P(final reward >= target)")] = None,
    cost_per_step: Annotated[
        float | None, typer.Option(help="budget: cost of one more step (adds the recommended stop step)")
    ] = None,
    value_per_reward: Annotated[float, typer.Option(help="budget: value of one unit of final reward")] = 1.0,
    plot: Annotated[Path | None, typer.Option(help="keep an updated fan chart PNG here")] = None,
    report: Annotated[
        Path | None, typer.Option(help="keep an updated HTML report here (.html; the page reloads itself)")
    ] = None,
    history: Annotated[
        Path | None, typer.Option(help="append every forecast to this CSV (latest.json beside it)")
    ] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="log format (default: detected)")] = None,
    reward_key: Annotated[
        str | None, typer.Option("--reward-key", help="the logged metric to use as the reward (default: detected)")
    ] = None,
    meta: Annotated[
        Path | None, typer.Option("--meta", help="metadata CSV/JSON of the run (max_steps, beta1, group_size, ...)")
    ] = None,
    reward_range: Annotated[
        str | None, typer.Option("--reward-range", help="the reward's bounds 'LO,HI' (e.g. 0,1 for a pass rate)")
    ] = None,
    kind: Annotated[str, typer.Option("--kind", help="model kind (see `bayesgrpo models`)")] = DEFAULT_KIND,
    model: Annotated[str | None, typer.Option("--model", hidden=True, help="deprecated: use --kind")] = None,
    run: Annotated[str | None, typer.Option(help="run id to follow when the log holds several")] = None,
    ceiling: Annotated[float | None, typer.Option(help="verifiable reward ceiling for the diagnostics")] = None,
    draws: Annotated[int, typer.Option(help="posterior draws per chain")] = 400,
    tune: Annotated[int, typer.Option(help="tuning steps per chain")] = 400,
    seed: int = 0,
    max_updates: Annotated[int | None, typer.Option(help="exit after this many forecasts")] = None,
    idle_timeout: Annotated[
        float | None, typer.Option(help="exit when the log has not changed for this many seconds")
    ] = None,
    plain: Annotated[bool, typer.Option(help="plain lines even on a terminal")] = False,
    stop: Annotated[
        bool, typer.Option("--stop", help="show the stop policy's advice (stop / continue / too early) at --risk")
    ] = False,
    risk: Annotated[
        float, typer.Option(help="--stop: at most this share of its stops may lose > 0.1 of the range")
    ] = DEFAULT_RISK,
    delta: Annotated[float, typer.Option(help="--stop: p_gain = P(final >= current level + delta x scale)")] = 0.05,
    alert_to: AlertToOpt = None,
):
    """Follow a log that is being written and re-forecast every N new steps (Ctrl-C to stop)."""
    from rich.console import Console

    from bayesgrpo.integrations._requests import _light
    from bayesgrpo.integrations.watch import format_line, watch

    bounds, meta_row, kind = _check_watch_options(path, kind=kind, model=model, meta=meta, reward_range=reward_range,
                                                  fmt=fmt, history=history, plot=plot, report=report, draws=draws,
                                                  tune=tune, seed=seed, alert_to=alert_to)  # fmt: skip
    utility = None if cost_per_step is None else {"cost_per_step": cost_per_step, "value_per_reward": value_per_reward}
    policy = _check_policy(kind, risk=risk, delta=delta) if stop else None
    show = _Display(f"watching {path}", tty=sys.stdout.isatty() and not plain, line=format_line)
    results, live, update, status = show.results, show.live, show.update, show.status
    try:
        watch(
            path, every=every, interval=interval, horizon=horizon, target=target, utility=utility, fmt=fmt, run=run,
            ceiling=ceiling, plot=plot, report=report, history=history,
            sampler={"draws": draws, "tune": tune, "seed": seed}, on_update=update, on_status=status,
            max_updates=max_updates, idle_timeout=idle_timeout, kind=kind, meta=meta_row, reward_range=bounds,
            reward_key=reward_key, policy=policy,
        )  # fmt: skip
    except (_light().errors.BayesGRPOError, KeyError) as e:
        if live is not None:
            live.stop()
        Console(stderr=True, soft_wrap=True, highlight=False).print(f"[bold red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    finally:
        if live is not None:
            live.stop()
    _said(results, plot=plot, report=report)


def _open_trackers(specs: list[str], *, name: str) -> None:
    """``--alert-to TRACKER[:PROJECT]``: a run of each tracker (finished by the tracker's own exit hook), opened
    after every other option is checked and before anything is followed (a bad one: one line, exit 2)."""
    from bayesgrpo.integrations.alerts import TRACKERS, open_tracker_runs

    by: dict[str, str] = {}
    for spec in specs:
        tracker, _, project = spec.partition(":")
        if tracker not in TRACKERS:
            _fail(f"--alert-to {spec!r}: alerts go to {' or '.join(TRACKERS)} (TRACKER or TRACKER:PROJECT)")
        by[tracker] = project or "bayesgrpo"
    try:
        for tracker, project in by.items():
            open_tracker_runs([tracker], project=project, name=name)
    except ImportError as e:
        _fail(f"--alert-to: {e}")


def _said(results, *, plot, report) -> None:
    """What ``watch`` left behind, on stderr."""
    if plot is not None and results:
        typer.echo(f"# fan chart: {plot}", err=True)
    if report is not None and results:
        typer.echo(f"# report: {report}", err=True)
    typer.echo(f"# {len(results)} forecast(s)", err=True)


def _check_policy(kind: str, *, risk: float, delta: float) -> dict:
    """``--stop``'s policy, checked before anything is followed (:func:`bayesgrpo.decisions.stop.policy_from_options`):
    its fields for the worker's requests, and one status line saying what a 'stop' means and how often such
    stops were bad."""
    from bayesgrpo.decisions.stop import policy_from_options
    from bayesgrpo.errors import BayesGRPOError

    try:
        pol = policy_from_options(kind, risk=risk, delta=delta)
    except BayesGRPOError as e:
        _fail(str(e))
    if pol is None:
        _fail(f"--stop: the stop advice was never measured for --kind {kind!r}; use --kind auto or oscillator")
    typer.echo(f"# stop policy: {pol.describe()}; {pol.measured}", err=True)
    return {"risk": risk, "delta": delta}


def _fail(msg: str) -> NoReturn:
    from rich.console import Console

    Console(stderr=True, soft_wrap=True, highlight=False).print(f"[bold red]error:[/] {escape(msg)}")
    raise typer.Exit(2)


def _check_watch_options(path, *, kind, model, meta, reward_range, fmt, history, plot, report, draws, tune, seed,
                         alert_to=None):  # fmt: skip
    """Every option and output of ``watch`` before anything is followed or compiled (one line, exit 2), then the
    trackers of ``--alert-to`` (:func:`_open_trackers`). Returns the reward bounds, the metadata (a frame, or
    None) and the model kind."""
    from pydantic import ValidationError
    from rich.console import Console

    from bayesgrpo.errors import BayesGRPOError
    from bayesgrpo.inference.sampling import SamplerConfig
    from bayesgrpo.io import FORMATS, load_meta
    from bayesgrpo.models.kinds import kind_option
    from bayesgrpo.plan import parse_reward_range

    if fmt is not None and fmt not in FORMATS:
        _fail(f"--format {fmt!r} is not a supported format; choose one of {', '.join(FORMATS)}")
    if not str(path).startswith("wandb:"):
        p = Path(path)
        if not p.exists() and not p.parent.exists():
            _fail(f"{p}: no such file or folder, and its folder {p.parent} does not exist either (a run about to "
                  "start must at least have its output folder)")  # fmt: skip
    try:
        kind, warning = kind_option(kind, model)
    except BayesGRPOError as e:
        _fail(str(e))
    if warning is not None:
        Console(stderr=True, soft_wrap=True, highlight=False).print(f"[yellow]warning:[/] {escape(warning)}")
    try:  # the bounds are the sampler config's (one place)
        SamplerConfig(draws=draws, tune=tune, chains=2, seed=seed)
    except ValidationError as e:
        err = e.errors()[0]
        _fail(f"--{err['loc'][0]} must be {err['msg'].removeprefix('Input should be ')}, got {err.get('input')}")
    meta_row = None
    try:
        bounds = parse_reward_range(reward_range)
        if meta is not None:
            if not meta.exists():
                _fail(f"--meta {meta}: no such file")
            meta_row = load_meta(meta)
        _check_watch_outputs(history=history, plot=plot, report=report)
    except BayesGRPOError as e:
        _fail(str(e))
    _open_trackers(alert_to or [], name=Path(str(path)).stem or "run")
    return bounds, meta_row, kind


def _check_watch_outputs(*, history, plot, report) -> None:
    """``--history`` (and the files beside it), ``--plot`` and ``--report`` can be written."""
    from bayesgrpo.io.output import check_output_file

    if history is not None:
        check_output_file(history, option="--history", suffixes={".csv": "csv"})
        for name in ("latest.json", "worker.log"):
            if (history.parent / name).is_dir():
                _fail(f"--history {history}: {name} beside it is a folder where an output file goes")
    if plot is not None:
        check_output_file(plot, option="--plot", suffixes={".png": "png", ".svg": "svg", ".pdf": "pdf"})
    if report is not None:
        from bayesgrpo.report import REPORT_SUFFIXES

        check_output_file(report, option="--report", suffixes=REPORT_SUFFIXES)


def mount(app: typer.Typer) -> None:
    """Register ``watch`` on a typer app."""
    app.command("watch", help=WATCH_HELP)(watch_cmd)
