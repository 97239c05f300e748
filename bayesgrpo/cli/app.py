"""The ``bayesgrpo`` command (typer). Heavy imports happen inside the verbs so ``--help`` is instant.

Each verb lives in its own module of this package and holds no domain logic: it validates options
(:mod:`bayesgrpo.cli.common`), calls the library and prints. Adding a verb is one edit: a module with
its function and one ``app.command`` line in :func:`_mount`.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Annotated

import typer

app = typer.Typer(
    name="bayesgrpo",
    help="Where is this GRPO run going? Calibrated Bayesian forecasts of reward curves from training logs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)


def _version(value: bool):
    if value:
        from bayesgrpo._version import __version__

        typer.echo(f"bayesgrpo {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="log progress details (stderr)")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version")
    ] = False,
):
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    _install_sigint()


def _install_sigint() -> None:
    """Ctrl-C: the first stops the work (``KeyboardInterrupt``: the verb keeps what finished and exits
    130); a second one while that is cleaned up and written is ignored; a third ends the process at once."""
    import os
    import signal

    count = [0]

    def handler(signum, frame):
        count[0] += 1
        if count[0] == 1:
            raise KeyboardInterrupt
        if count[0] >= 3:
            os._exit(130)

    with contextlib.suppress(ValueError):  # not the main thread (e.g. the CLI invoked from a test runner's thread)
        signal.signal(signal.SIGINT, handler)


def _mount() -> None:
    from bayesgrpo.cli.backtest import backtest_cmd
    from bayesgrpo.cli.budget import budget_cmd
    from bayesgrpo.cli.compare import compare_cmd
    from bayesgrpo.cli.diagnose import diagnose_cmd
    from bayesgrpo.cli.forecast import demo_cmd, forecast_cmd
    from bayesgrpo.cli.report import report_cmd
    from bayesgrpo.cli.summary import formats_cmd, models_cmd, summary_cmd
    from bayesgrpo.cli.testbed import testbed_app

    app.command("summary")(summary_cmd)
    app.command("formats")(formats_cmd)
    app.command("models")(models_cmd)
    app.command("forecast")(forecast_cmd)
    app.command("demo")(demo_cmd)
    app.command("budget")(budget_cmd)
    app.command("diagnose")(diagnose_cmd)
    app.command("backtest")(backtest_cmd)
    app.command("compare")(compare_cmd)
    app.command("report")(report_cmd)
    app.add_typer(testbed_app, name="testbed")
    from bayesgrpo.integrations.cli import mount

    mount(app)  # `bayesgrpo watch`


_mount()
