"""What every verb shares: consoles (tables on stdout, status on stderr), one-line errors, reading runs,
tables that survive a pipe, warnings, progress. Verbs hold no domain logic; they call the library.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import warnings
from pathlib import Path

import typer

from bayesgrpo.errors import BayesGRPOError

__all__ = ["out_console", "err_console", "fail", "status", "read_runsets", "print_table", "capture_warnings",
           "progress_bar", "guard", "validate_sampler", "sampler_config", "EXIT_USAGE", "EXIT_FAILED"]  # fmt: skip

log = logging.getLogger("bayesgrpo")

EXIT_USAGE = 2  # bad option, bad input file
EXIT_FAILED = 1  # nothing could be done (every run failed)


def out_console():
    """stdout: tables only. Soft-wrapped, no highlighting; rich markup in data is never interpreted."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=not sys.stdout.isatty())


def err_console():
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def fail(msg: str, code: int = EXIT_USAGE):
    """Print ``error: msg`` on one line (stderr) and exit."""
    from rich.markup import escape

    err_console().print(f"[bold red]error:[/] {escape(msg)}")
    raise typer.Exit(code)


def status(msg: str) -> None:
    """A status line on stderr (never mixed into the tables on stdout)."""
    from rich.markup import escape

    err_console().print(f"[dim]{escape(msg)}[/]")


@contextlib.contextmanager
def guard():
    """Turn the package's own errors into one-line messages (exit 2); warnings are shown as lines."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with _quiet_numerics():
                yield
        except BayesGRPOError as e:
            _show(caught)
            fail(str(e))
        except KeyError as e:  # unknown run ids etc. carry their message as the first argument
            _show(caught)
            fail(str(e.args[0]) if e.args else repr(e))
    _show(caught)


@contextlib.contextmanager
def _quiet_numerics():
    import numpy as np

    with np.errstate(all="ignore"):
        yield


_NOISE = ("invalid value encountered", "divide by zero", "overflow encountered", "Glyph", "missing from font",
          "Mean of empty slice", "Degrees of freedom", "The effect of Potentials")  # fmt: skip


def _show(caught) -> None:
    from rich.markup import escape

    err = err_console()
    seen = set()
    for w in caught:
        msg = str(w.message)
        if any(n in msg for n in _NOISE) or msg in seen:
            continue
        seen.add(msg)
        cat = w.category.__name__
        if cat in ("DataWarning", "SamplerWarning", "UserWarning"):
            err.print(f"[yellow]warning:[/] {escape(msg)}")
        else:
            log.debug("%s: %s", cat, msg)


def capture_warnings():
    return guard()


def parse_reward_range(text: str | None):
    """``"0,1"`` -> ``(0.0, 1.0)``; None -> None; a bad value is a one-line error naming the option."""
    if text is None:
        return None
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        fail(f"--reward-range {text!r}: expected LO,HI, e.g. 0,1")
    if not lo < hi:
        fail(f"--reward-range {text!r}: LO must be below HI")
    return lo, hi


def read_runsets(paths: list[Path], meta: Path | None, fmt: str | None, *, run: list[str] | None = None,
                 exclude: list[str] | None = None, option: str = "RUNS", reward_range=None):  # fmt: skip
    """Read one or many logs into a RunSet and apply ``--run`` / ``--exclude`` / ``--reward-range``
    (one-line errors)."""
    from bayesgrpo.io import FORMATS, read_many, read_runs

    if fmt is not None and fmt not in FORMATS:
        fail(f"--format {fmt!r} is not a supported format; choose one of {', '.join(FORMATS)}")
    for p in paths:
        if not p.exists():
            fail(f"{p}: no such file or directory ({option})")
    if meta is not None and not meta.exists():
        fail(f"--meta {meta}: no such file")
    with guard():
        rs = read_runs(paths[0], format=fmt, meta=meta) if len(paths) == 1 else read_many(paths, format=fmt, meta=meta)
    ids = list(rs.run_ids)
    if run:
        unknown = [r for r in run if r not in ids]
        if unknown:
            fail(f"--run {unknown[0]!r}: no such run; runs are {_few(ids)}")
        ids = [r for r in ids if r in set(run)]
    if exclude:
        unknown = [r for r in exclude if r not in rs.run_ids]
        if unknown:
            fail(f"--exclude {unknown[0]!r}: no such run; runs are {_few(rs.run_ids)}")
        ids = [r for r in ids if r not in set(exclude)]
    if not ids:
        fail("no run left to process after --run / --exclude")
    rs = rs.select(ids) if ids != list(rs.run_ids) else rs
    if reward_range is not None:
        rs = rs.with_meta_defaults(reward_min=reward_range[0], reward_max=reward_range[1])
    return rs


def _few(ids, n: int = 8) -> str:
    ids = list(ids)
    return ", ".join(repr(i) for i in ids[:n]) + (f" ... ({len(ids)} in all)" if len(ids) > n else "")


_NUMBER = re.compile(r"([-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?%?|[<>]\d+|)(\.\.[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?)?")


def print_table(df, *, title: str | None = None, floatfmt: str = "{:.4g}") -> None:
    """Print a table on stdout: a rich table on a terminal; in a pipe, a title line and one line per
    row, columns aligned, every id and number in full (nothing folded or cut)."""
    import pandas as pd

    cells = df.copy()
    for c in cells.columns:
        cells[c] = [("" if (isinstance(v, float) and pd.isna(v)) else floatfmt.format(v)) if isinstance(v, float) else str(v)
                    for v in cells[c]]  # fmt: skip
    if sys.stdout.isatty():
        from rich.markup import escape
        from rich.table import Table

        t = Table(title=escape(title) if title else None, header_style="bold", show_lines=False)
        for c in cells.columns:
            # numbers never break over lines; ids and lists fold instead
            t.add_column(escape(str(c)), overflow="fold", no_wrap=all(_NUMBER.fullmatch(v) for v in cells[c]))
        for row in cells.itertuples(index=False):
            t.add_row(*[escape(v) for v in row])
        out_console().print(t)
        return
    widths = [max([len(str(c))] + [len(v) for v in cells[c]]) for c in cells.columns]
    lines = []
    if title:
        lines.append(f"# {title}")
    lines.append("  ".join(str(c).ljust(w) for c, w in zip(cells.columns, widths)).rstrip())
    for row in cells.itertuples(index=False):
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


@contextlib.contextmanager
def progress_bar(description: str, total: int | None = None):
    """A transient progress bar on stderr when it is a terminal; a no-op updater otherwise."""
    if not sys.stderr.isatty():
        yield lambda done, n, msg=None: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console(), transient=True) as prog:  # fmt: skip
        task = prog.add_task(description, total=total)

        def update(done, n, msg=None):
            prog.update(task, completed=done, total=n, description=f"{description} {msg}" if msg else description)

        yield update


def validate_sampler(*, draws: int, tune: int, chains: int) -> None:
    if draws < 10:
        fail(f"--draws must be at least 10, got {draws}")
    if tune < 10:
        fail(f"--tune must be at least 10, got {tune}")
    if not 1 <= chains <= 64:
        fail(f"--chains must be between 1 and 64, got {chains}")


def sampler_config(*, draws: int, tune: int, chains: int, seed: int):
    from bayesgrpo.inference.sampling import SamplerConfig

    validate_sampler(draws=draws, tune=tune, chains=chains)
    return SamplerConfig(draws=draws, tune=tune, chains=chains, seed=seed)


def validate_model(model: str) -> None:
    from bayesgrpo.conventions import AUTO_KIND
    from bayesgrpo.models.kinds import MODEL_KINDS

    if model not in MODEL_KINDS and model != AUTO_KIND:
        fail(f"--model {model!r} is not a model kind; choose {AUTO_KIND} or one of {', '.join(MODEL_KINDS)}")


def parse_channels(text: str | None, model: str) -> tuple[str, ...]:
    """``--channels``: ``"reward_std,frac_reward_zero_std"`` (or ``spread`` for both) -> a tuple; checked against
    the kind (the spread channels observe a degeneracy state). A bad value is a one-line error."""
    from bayesgrpo.models.arrays import SPREAD_CHANNELS
    from bayesgrpo.models.kinds import MODEL_KINDS

    if not text:
        return ()
    names = SPREAD_CHANNELS if text.strip() == "spread" else tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [n for n in names if n not in SPREAD_CHANNELS]
    if bad:
        fail(f"--channels {text!r}: {', '.join(bad)} is not a spread channel; choose from {', '.join(SPREAD_CHANNELS)} "
             "or 'spread' for both")  # fmt: skip
    if model in MODEL_KINDS and not MODEL_KINDS[model].degeneracy:
        kinds = ", ".join(k for k, v in MODEL_KINDS.items() if v.degeneracy)
        fail(f"--channels needs a --model with a degeneracy state ({kinds}), not {model!r}")
    return tuple(dict.fromkeys(names))


def stop_policy(*, model: str, risk: float, delta: float):
    """The stop policy of ``--risk`` / ``--delta`` (:class:`bayesgrpo.decisions.stop.StopPolicy`), checked before
    any reading or sampling: a value outside what was measured is one line naming the option. None (with a
    status line) for a model kind whose stop advice was never measured: its table has p_gain, no advice."""
    from bayesgrpo.decisions.stop import StopPolicy
    from bayesgrpo.forecast.decision import measured_deltas

    if not 0.0 < risk < 1.0:
        fail(f"--risk must lie in (0, 1), got {risk:g}")
    if not delta > 0.0:
        fail(f"--delta must be > 0, got {delta:g}")
    deltas = measured_deltas(model)
    if not deltas:
        status(f"stop advice: measured for the oscillator kind only; --model {model} gives p_gain without advice")
        return None
    if not any(abs(delta - d) < 1e-12 for d in deltas):
        fail(f"--delta {delta:g}: p_gain's recalibration and the stop advice were measured for delta "
             f"{', '.join(f'{d:g}' for d in sorted(deltas))} only; choose one of them")  # fmt: skip
    from pydantic import ValidationError

    try:
        return StopPolicy(risk=risk, delta=delta, kind=model)
    except ValidationError as e:  # the policy's own check of the risk against the measured operating points
        msg = str(e.errors()[0].get("ctx", {}).get("error") or e.errors()[0]["msg"])
        fail(f"--risk {risk:g}: {msg}")


def validate_window(*, final_window: float, stop_fraction: float) -> None:
    if not 0.0 < final_window <= 1.0:
        fail(f"--final-window must lie in (0, 1], got {final_window:g}")
    if not 0.0 < stop_fraction < 1.0:
        fail(f"--stop-fraction must lie in (0, 1), got {stop_fraction:g}")


def validate_until(*, until_step: int | None, until_fraction: float | None, horizon: int | None = None) -> None:
    if until_step is not None and until_fraction is not None:
        fail("give --until-step or --until-fraction, not both")
    if until_fraction is not None and not 0.0 < until_fraction < 1.0:
        fail(f"--until-fraction must lie in (0, 1), got {until_fraction:g}")
    if horizon is not None and horizon < 1:
        fail(f"--horizon must be a positive step, got {horizon}")


def validate_meta_columns(runs, columns, *, option: str = "--by") -> None:
    """Every name in ``columns`` is a metadata column with a value for at least one run (else a one-line error)."""
    missing = [c for c in columns if c not in runs.meta.columns or runs.meta[c].isna().all()]
    if missing:
        cols = [c for c in runs.meta.columns if runs.meta[c].notna().any()]
        fail(f"{option} {missing[0]!r}: no run has this metadata column; columns with values: {', '.join(cols[:15])}")


def validate_outputs(*, out: Path | None = None, out_dir: Path | None = None) -> None:
    from bayesgrpo.io.output import check_output_dir, check_output_file

    with guard():
        if out is not None:
            check_output_file(out, option="--out")
        if out_dir is not None:
            check_output_dir(out_dir, option="--out-dir")
