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

__all__ = ["out_console", "err_console", "fail", "status", "read_runsets", "print_table",
           "progress_bar", "guard", "validated", "sampler_config", "plan_options", "forecast_options", "EXIT_USAGE",
           "EXIT_FAILED"]  # fmt: skip

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


def read_options(paths: list[Path], options: dict):
    """:func:`read_runsets` of a verb's shared options (``--meta``, ``--format``, ``--run``, ``--exclude``
    and, where the verb has it, ``--reward-range``)."""
    bounds = parse_reward_range(options.get("reward_range"))
    return read_runsets(paths, options["meta"], options["fmt"], run=options["run"], exclude=options["exclude"],
                        reward_range=bounds)  # fmt: skip


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
    lines.append("  ".join(str(c).ljust(w) for c, w in zip(cells.columns, widths, strict=True)).rstrip())
    for row in cells.itertuples(index=False):
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
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


def sampler_config(*, draws: int, tune: int, chains: int, seed: int):
    from bayesgrpo.inference.sampling import SamplerConfig

    return validated(SamplerConfig, draws=draws, tune=tune, chains=chains, seed=seed)


def model_kind(kind: str, model: str | None = None) -> str:
    """The ``--kind`` asked for (``--model``, its old name, with a warning), checked against the registry."""
    from bayesgrpo.models.kinds import MODEL_KINDS

    option = "--kind"
    if model is not None:
        err_console().print("[yellow]warning:[/] --model is deprecated: the model kind is --kind (the word 'model' "
                            "is the LLM of the metadata)")  # fmt: skip
        kind, option = model, "--model"
    if kind not in MODEL_KINDS:
        fail(f"{option} {kind!r} is not a model kind; choose one of {', '.join(MODEL_KINDS)}")
    return kind


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
