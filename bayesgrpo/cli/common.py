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
from typing import Any

import typer

from bayesgrpo.errors import BayesGRPOError

__all__ = ["out_console", "err_console", "fail", "status", "read_runsets", "print_table", "progress_bar", "guard",
           "validated", "sampler_config", "plan_options", "forecast_options", "check_out_names", "interrupted",
           "no_interrupts", "stdout_is_terminal", "until_step_prefix", "EXIT_USAGE", "EXIT_FAILED",
           "EXIT_INTERRUPTED"]  # fmt: skip

log = logging.getLogger("bayesgrpo")

EXIT_USAGE = 2  # bad option, bad input file
EXIT_FAILED = 1  # nothing could be done (every run failed)
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as a shell reports it


def stdout_is_terminal() -> bool:
    """Tables go to a terminal (a rich table) or to a pipe / file (one plain line per row)."""
    return sys.stdout.isatty()


def out_console():
    """stdout: tables only. Soft-wrapped, no highlighting; rich markup in data is never interpreted."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=not stdout_is_terminal())


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


def warn(msg: str) -> None:
    """A warning line on stderr (``warning: ...``)."""
    from rich.markup import escape

    err_console().print(f"[yellow]warning:[/] {escape(msg)}")


def interrupted(what: str = "nothing was written") -> None:
    """After a Ctrl-C: one line (``interrupted: ...``) on stderr and exit 130.

    Further Ctrl-C are ignored from here on: the process is exiting, and a signal during the
    interpreter's shutdown (when Python handlers are gone) would end it as killed instead of 130."""
    import signal

    from rich.markup import escape

    with contextlib.suppress(ValueError):  # not the main thread
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    err_console().print(f"[bold yellow]interrupted[/] (Ctrl-C): {escape(what)}")
    raise typer.Exit(EXIT_INTERRUPTED)


@contextlib.contextmanager
def no_interrupts():
    """Ignore further Ctrl-C while the finished results are written (a write is atomic anyway); call
    :func:`interrupted` after the block, not in it (it ignores Ctrl-C for good)."""
    import signal

    try:
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@contextlib.contextmanager
def guard():
    """Turn the package's own errors into one-line messages (exit 2) and a Ctrl-C into one line (exit
    130); warnings are shown as lines."""
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
        except KeyboardInterrupt:
            _show(caught)
            interrupted()
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


def parse_reward_range(text: str | None):
    """``"0,1"`` -> ``(0.0, 1.0)``; None -> None; a bad value is a one-line error naming the option."""
    from bayesgrpo.plan import parse_reward_range as parse

    with guard():
        return parse(text)


def read_runsets(paths: list[Path], meta: Path | None, fmt: str | None, *, run: list[str] | None = None,
                 exclude: list[str] | None = None, option: str = "RUNS", reward_range=None,
                 reward_key: str | None = None, strict: bool = False):  # fmt: skip
    """Read one or many logs into a RunSet and apply ``--reward-key`` / ``--run`` / ``--exclude`` /
    ``--reward-range`` (one-line errors). Of several files, one that cannot be read is a warning and
    the others are read (``--strict``: fatal)."""
    from bayesgrpo.io import FORMATS, read_many, read_runs

    if fmt is not None and fmt not in FORMATS:
        fail(f"--format {fmt!r} is not a supported format; choose one of {', '.join(FORMATS)}")
    for p in paths:
        if not p.exists():
            fail(f"{p}: no such file or directory ({option})")
    if meta is not None and not meta.exists():
        fail(f"--meta {meta}: no such file")
    kw = {"reward_key": reward_key} if reward_key else {}
    from bayesgrpo.io.trl import hf_trainer_state

    for p in paths:
        ts = hf_trainer_state(p) if fmt in (None, "trainer_state") else None
        if ts is not None:
            status(f"{p}: a Hugging Face output folder; reading {ts.relative_to(p)} (the furthest trainer_state.json)")
    with guard():
        rs = (read_runs(paths[0], format=fmt, meta=meta, **kw) if len(paths) == 1
              else read_many(paths, format=fmt, meta=meta, errors="raise" if strict else "warn", **kw))  # fmt: skip
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


def read_options(paths: list[Path], options: dict):
    """:func:`read_runsets` of a verb's shared options (``--meta``, ``--format``, ``--reward-key``, ``--run``,
    ``--exclude`` and, where the verb has it, ``--reward-range``)."""
    bounds = parse_reward_range(options.get("reward_range"))
    return read_runsets(paths, options["meta"], options["fmt"], run=options["run"], exclude=options["exclude"],
                        reward_range=bounds, reward_key=options.get("reward_key"),
                        strict=bool(options.get("strict")))  # fmt: skip


def read_context(options: dict):
    """The ``--context`` runs of a verb's shared options (None without them)."""
    if not options.get("context"):
        return None
    return read_runsets(options["context"], options["context_meta"], None, option="--context")


def _few(ids, n: int = 8) -> str:
    ids = list(ids)
    return ", ".join(repr(i) for i in ids[:n]) + (f" ... ({len(ids)} in all)" if len(ids) > n else "")


_NUMBER = re.compile(r"([-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?%?|[<>]\d+|)(\.\.[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?)?")


def print_table(df, *, title: str | None = None, floatfmt: str = "{:.4g}") -> None:
    """Print a table on stdout, never splitting an id or a number.

    In a pipe: a title line and one line per row, columns aligned, every id and number in full. On a
    terminal: a rich table when it fits the terminal's width, else one block per row (the first
    column on its own line, then ``column value`` pairs packed into lines that fit), so a narrow
    terminal never folds an id into pieces or a number over two lines.
    """
    import pandas as pd

    cells = df.copy()
    for c in cells.columns:
        cells[c] = [("" if (isinstance(v, float) and pd.isna(v)) else floatfmt.format(v)) if isinstance(v, float) else str(v)
                    for v in cells[c]]  # fmt: skip
    if stdout_is_terminal():
        con = out_console()
        widths = [max([len(str(c))] + [len(v) for v in cells[c]]) for c in cells.columns]
        if sum(widths) + 3 * len(widths) + 1 <= con.width:
            _rich_table(con, cells, title)
        else:
            _row_blocks(con, cells, title)
        return
    widths = [max([len(str(c))] + [len(v) for v in cells[c]]) for c in cells.columns]
    lines = []
    if title:
        lines.append(f"# {title}")
    lines.append("  ".join(str(c).ljust(w) for c, w in zip(cells.columns, widths, strict=True)).rstrip())
    for row in cells.itertuples(index=False):
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


def _rich_table(con, cells, title) -> None:
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=escape(title) if title else None, header_style="bold", show_lines=False)
    for c in cells.columns:
        t.add_column(escape(str(c)), no_wrap=True)
    for row in cells.itertuples(index=False):
        t.add_row(*[escape(v) for v in row])
    con.print(t)


def _row_blocks(con, cells, title) -> None:
    """One block per row for a terminal too narrow for the table: ``column value`` pairs, whole."""
    import textwrap

    from rich.markup import escape

    width = max(20, con.width)
    out = [f"[bold]{escape(title)}[/]"] if title else []
    first, rest = cells.columns[0], list(cells.columns[1:])
    for _, row in cells.iterrows():
        out.append(f"[bold]{escape(row[first])}[/]")
        line = ""
        for c in rest:
            if row[c] == "":
                continue
            pair = f"{c} {row[c]}"
            if len(pair) > width - 2:  # free text longer than a line: wrapped on its own lines
                if line:
                    out.append(escape("  " + line))
                    line = ""
                out += [escape(t) for t in textwrap.wrap(pair, width, initial_indent="  ", subsequent_indent="    ")]
            elif len(line) + 2 + len(pair) > width - 2 and line:
                out.append(escape("  " + line))
                line = pair
            else:
                line = f"{line}  {pair}" if line else pair
        if line:
            out.append(escape("  " + line))
    con.print("\n".join(out), soft_wrap=True)


#: seconds between two progress lines when stderr is not a terminal (every update with ``-v``)
PROGRESS_EVERY = 30.0


@contextlib.contextmanager
def progress_bar(description: str, total: int | None = None, *, unit: str = "item"):
    """A transient progress bar on stderr when it is a terminal; otherwise a line
    ``description: done/n unit(s) (t s)`` every :data:`PROGRESS_EVERY` seconds (every update with ``-v``),
    so long work in a pipe or a log file is never silent."""
    if not sys.stderr.isatty():
        import time

        t0 = time.monotonic()
        last: list = [t0, None]  # when a line was last printed, and for how many done

        def line(done, n, msg=None):
            now = time.monotonic()
            if done == last[1] or (now - last[0] < PROGRESS_EVERY and not log.isEnabledFor(logging.INFO)):
                return
            last[0], last[1] = now, done
            status(f"{description}: {done}/{n} {unit}(s) ({now - t0:.0f} s)" + (f"; {msg}" if msg else ""))

        yield line
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console(), transient=True) as prog:  # fmt: skip
        task = prog.add_task(description, total=total)

        def update(done, n, msg=None):
            prog.update(task, completed=done, total=n, description=f"{description} {msg}" if msg else description)

        yield update


def _bounds_text(info) -> str:
    """``"must lie in (0, 1]"`` / ``"must be at least 10"`` from a pydantic field's bounds."""
    import annotated_types as at

    lo = hi = None
    for m in info.metadata:
        if isinstance(m, at.Gt | at.Ge):
            lo = ("(" if isinstance(m, at.Gt) else "[", m.gt if isinstance(m, at.Gt) else m.ge)
        elif isinstance(m, at.Lt | at.Le):
            hi = (")" if isinstance(m, at.Lt) else "]", m.lt if isinstance(m, at.Lt) else m.le)
    if lo and hi:
        return f"must lie in {lo[0]}{lo[1]:g}, {hi[1]:g}{hi[0]}"
    if lo:
        return f"must be {'at least' if lo[0] == '[' else 'greater than'} {lo[1]:g}"
    if hi:
        return f"must be {'at most' if hi[0] == ']' else 'less than'} {hi[1]:g}"
    return "is not allowed"


def validated(model_cls, *, options: dict | None = None, **values):
    """``model_cls(**values)``, or one line naming the option: the bounds are the config's (one place).

    ``options`` maps a field to its option name (default ``--field-name``).
    """
    from pydantic import ValidationError

    opt = {f: (options or {}).get(f, "--" + f.replace("_", "-")) for f in model_cls.model_fields}
    try:
        return model_cls(**values)
    except ValidationError as e:
        err = e.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else ""
        if field in model_cls.model_fields and err["type"] != "value_error":
            value = values.get(field)
            if err["type"] == "finite_number":
                fail(f"{opt[field]} must be a finite number, got {value}")
            fail(f"{opt[field]} {_bounds_text(model_cls.model_fields[field])}, got {value:g}"
                 if isinstance(value, int | float) else f"{opt[field]}: {err['msg']}")  # fmt: skip
        msg = str(err["msg"]).removeprefix("Value error, ")
        for f in sorted(opt, key=len, reverse=True):  # the fields a validator names, as their options
            msg = msg.replace(f, opt[f])
        fail(msg)


def sampler_config(**fields):
    """The :class:`~bayesgrpo.inference.sampling.SamplerConfig` of the sampler options given (its defaults
    for the others), or one line naming the option."""
    from bayesgrpo.inference.sampling import SamplerConfig

    return validated(SamplerConfig, **fields)


def model_kind(kind: str, model: str | None = None) -> str:
    """The ``--kind`` asked for (``--model``, its old name, with a warning), checked against the registry."""
    from bayesgrpo.models.kinds import kind_option

    if model is not None:
        from bayesgrpo.models.kinds import MODEL_ALIAS_WARNING

        err_console().print(f"[yellow]warning:[/] {MODEL_ALIAS_WARNING}")
    with guard():
        kind, _ = kind_option(kind, model)
    return kind


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
        fail(f"--channels needs a --kind with a degeneracy state ({kinds}), not {model!r}")
    return tuple(dict.fromkeys(names))


def stop_policy(*, model: str, risk: float, delta: float):
    """The stop policy of ``--risk`` / ``--delta`` (:func:`bayesgrpo.decisions.stop.policy_from_options`), checked
    before any reading or sampling: a value outside what was measured is one line naming the option. None (with
    a status line) for a model kind whose stop advice was never measured: its table has p_gain, no advice."""
    from bayesgrpo.decisions.stop import policy_from_options

    with guard():
        policy = policy_from_options(model, risk=risk, delta=delta)
    if policy is None:
        status(f"stop advice: measured for kinds auto and oscillator only; --kind {model} gives the raw p_gain (at "
               f"--delta {delta:g}, not recalibrated) and no advice (--risk has no effect)")  # fmt: skip
    return policy


def plan_options(**values):
    """The plan's options (:class:`bayesgrpo.plan.PlanOptions`: horizon, truncation, final window), checked."""
    from bayesgrpo.plan import PlanOptions

    return validated(PlanOptions, **values)


def check_field(model_cls, field: str, value, *, option: str | None = None) -> None:
    """One field of a pydantic config checked alone (its annotation and bounds), else one line naming the option."""
    from typing import Annotated

    from pydantic import TypeAdapter, ValidationError

    info = model_cls.model_fields[field]
    kind: Any = Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation  # a type built here
    try:
        TypeAdapter(kind).validate_python(value)
    except ValidationError:
        fail(f"{option or '--' + field.replace('_', '-')} {_bounds_text(info)}, got {value:g}")


def forecast_options(*, final_window: float, stop_fraction: float) -> None:
    """The forecast definitions, checked against :class:`bayesgrpo.forecast.ForecastConfig`'s bounds
    (before any prior is loaded)."""
    from bayesgrpo.forecast.config import ForecastConfig

    check_field(ForecastConfig, "final_window", final_window)
    check_field(ForecastConfig, "stop_fraction", stop_fraction)


def until_step_prefix(runs, until_step: int, *, min_points: int | None = None):
    """The runs as logged up to ``until_step`` (``--until-step``): runs with fewer than ``min_points``
    points by then are left out with a warning line; none left is a one-line error (exit 2)."""
    from rich.markup import escape

    from bayesgrpo.plan import MIN_POINTS, truncate

    min_points = MIN_POINTS if min_points is None else min_points
    with guard():
        cut = truncate(runs, until_step=int(until_step))
    keep: list[str] = []
    short: list[str] = []
    for rid in cut.run_ids:
        (keep if len(cut.run(rid)) >= min_points else short).append(rid)
    if not keep:
        firsts = ", ".join(f"{r!r} at {int(runs.run(r)['step'].iloc[0])}" for r in list(runs.run_ids)[:5])
        fail(f"--until-step {until_step}: no run has {min_points} logged points up to step {until_step} "
             f"(first logged steps: {firsts})")  # fmt: skip
    for rid in short:
        msg = f"run {rid!r} has {len(cut.run(rid))} logged point(s) up to step {until_step}; left out"
        err_console().print(f"[yellow]warning:[/] {escape(msg)}")
    return cut.select(keep)


def check_out_names(out_dir: Path | None, names, *, option: str = "--out-dir") -> None:
    """Before any sampling: none of the files a verb writes into ``--out-dir`` is a folder (one line, exit 2)."""
    if out_dir is None:
        return
    from bayesgrpo.io.output import check_output_names

    with guard():
        check_output_names(out_dir, names, option=option)


def validate_meta_columns(runs, columns, *, option: str = "--by") -> None:
    """Every name in ``columns`` is a metadata column with a value for at least one run (else a one-line error)."""
    missing = [c for c in columns if c not in runs.meta.columns or runs.meta[c].isna().all()]
    if missing:
        cols = [c for c in runs.meta.columns if runs.meta[c].notna().any()]
        fail(f"{option} {missing[0]!r}: no run has this metadata column; columns with values: {', '.join(cols[:15])}"
             " (metadata comes from --meta META.csv: run_id plus model, group_size, ...)")  # fmt: skip


def validate_outputs(*, out: Path | None = None, out_dir: Path | None = None) -> None:
    from bayesgrpo.io.output import check_output_dir, check_output_file

    with guard():
        if out is not None:
            check_output_file(out, option="--out")
        if out_dir is not None:
            check_output_dir(out_dir, option="--out-dir")
