"""``bayesgrpo compare``: hierarchical comparison of families / group sizes, PSIS-LOO."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated

import typer

from bayesgrpo.cli import common as C
from bayesgrpo.cli.options import NUTS, READ, FolderOpt, RunsArg, pick, with_options

__all__ = ["compare_cmd"]


@with_options(*READ, "out", *NUTS)
def compare_cmd(
    runs: RunsArg,
    by: Annotated[
        str,
        typer.Option(
            "--by", help="comma-separated metadata columns: family column first, then factors (e.g. group_size)"
        ),
    ] = "family,group_size",
    kinds: Annotated[
        str | None,
        typer.Option(
            "--kinds",
            help="model kinds to fit, two or more ranked by PSIS-LOO (comma list, e.g. "
            "oscillator,saturation,scaling; see `bayesgrpo models`). Default: scaling when the runs' model "
            "sizes vary, else oscillator",
        ),
    ] = None,
    models: Annotated[str | None, typer.Option("--models", hidden=True, help="deprecated: use --kinds")] = None,
    fixed_g_exponent: Annotated[
        bool,
        typer.Option(
            "--fixed-g-exponent", help="fix the noise-temperature exponent b at 1 (default: free, prior N(1,1))"
        ),
    ] = False,
    scale: Annotated[
        str,
        typer.Option(
            "--scale", help="reward normalisation: auto, run, shared, or a metadata column of runs sharing a scale"
        ),
    ] = "auto",
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="use only steps <= this (speed)")] = None,
    out_dir: FolderOpt = Path("compare_out"),
    **options,
) -> None:
    """Compare families and group sizes: posterior contrasts, the G-exponent of the noise temperature,
    tau vs model size; with --kinds a,b,... PSIS-LOO (leave-one-run-out) ranks the kinds. --out writes the contrast
    table; --out-dir the per-level table and its figure (levels.png), the LOO table, Pareto k, health, summary.md."""
    from bayesgrpo.compare import compare_runs

    by_t = tuple(s.strip() for s in by.split(",") if s.strip())
    if not by_t:
        C.fail("--by must name at least the family column, e.g. --by family,group_size")
    kinds_t = _kinds(kinds, models)
    if max_steps is not None and max_steps < 2:
        C.fail(f"--max-steps must be at least 2, got {max_steps}")
    smp = C.sampler_config(**pick(options, NUTS))
    out = options["out"]
    C.validate_outputs(out=out, out_dir=out_dir)
    rs = C.read_options(runs, options)
    if len(rs) < 2:
        C.fail(f"compare needs at least 2 runs to compare; got {len(rs)} run ({', '.join(map(repr, rs.run_ids))}): "
               "a fit of one run would report its prior as a comparison")  # fmt: skip
    C.check_out_names(out_dir, [f"{n}.{x}" for n, x in (("contrasts", "csv"), ("loo", "csv"), ("pareto_k", "csv"),
                                                         ("tau_by_size", "csv"), ("health", "csv"), ("summary", "md"),
                                                         ("levels", "png"))])  # fmt: skip
    C.validate_meta_columns(rs, by_t, option="--by")
    if scale not in ("auto", "run", "shared") and scale not in rs.meta.columns:
        C.fail(f"--scale {scale!r}: not auto, run, shared or a metadata column")
    b = "fixed at 1" if fixed_g_exponent else "free"
    what = f"kinds {', '.join(kinds_t)}" if kinds_t else "one kind (--kinds a,b to rank several by PSIS-LOO)"
    C.status(f"compare: {len(rs)} runs, by {', '.join(by_t)}, {what}, b {b}")
    with C.guard():
        res = compare_runs(rs, by=by_t, kinds=kinds_t, free_g_exponent=not fixed_g_exponent, sampler=smp, seed=options["seed"],
                           scale=scale, max_steps=max_steps)  # fmt: skip
        for msg in res.caveats():
            warnings.warn(msg, UserWarning, stacklevel=1)
    _show_and_write(res, out=out, out_dir=out_dir)


def _kinds(kinds: str | None, models: str | None) -> tuple[str, ...] | None:
    """The ``--kinds`` asked for (``--models``, the old name, with a warning), checked; None: the default kind."""
    from bayesgrpo.compare import COMPARE_KINDS

    option = "--kinds"
    if kinds is None and models is None:
        return None
    if models is not None:
        C.err_console().print("[yellow]warning:[/] --models is deprecated: use --kinds")
        kinds, option = models, "--models"
    out = tuple(s.strip() for s in str(kinds).split(",") if s.strip())
    bad = [k for k in out if k not in COMPARE_KINDS]
    if bad or not out:
        C.fail(f"{option} {bad[0] if bad else kinds!r} is not a model kind; choose from {', '.join(COMPARE_KINDS)}")
    return out


def _show_and_write(res, *, out, out_dir) -> None:
    from bayesgrpo.conventions import HEADLINE, interval_label
    from bayesgrpo.io.output import save_figure, write_table, write_text
    from bayesgrpo.plots.forest import levels_plot

    # the answer first: per level, plateau / timescale / noise and P(best); then one sentence per factor. The full
    # contrast table, the timescale by size and the per-run Pareto k go to the files (--out, --out-dir)
    lv = res.levels()
    if len(lv):
        C.print_table(_levels_view(lv), title=f"per level ({res.primary} model; means over the level's runs, "
                                              f"{interval_label(HEADLINE)} intervals; P(best): of the plateau)")  # fmt: skip
    answers = res.answers()
    if answers:
        typer.echo("# the answer, per factor (the level most likely best, and its margin over the next)")
        typer.echo("\n".join(answers))
    C.print_table(res.loo, title="PSIS-LOO (leave-one-run-out)", floatfmt="{:.3g}")
    C.print_table(res.health, title="sampler health", floatfmt="{:.3g}")
    if out is not None:
        with C.guard():
            write_table(res.contrasts, out)
        C.status(f"wrote {out}")
    with C.guard():
        for name, df in (("levels", lv), ("contrasts", res.contrasts), ("loo", res.loo), ("pareto_k", res.pareto_k),
                         ("tau_by_size", res.tau_by_size), ("health", res.health)):  # fmt: skip
            write_table(df, out_dir / f"{name}.csv")
        write_text(out_dir / "summary.md", res.summary_markdown())
        if len(lv):  # the answer drawn: one row per level (every pairwise contrast: forest_plot, and the csv)
            save_figure(levels_plot(res), out_dir / "levels.png", dpi=130)
    C.status(
        f"wrote {out_dir}/levels.csv, contrasts.csv, loo.csv, pareto_k.csv, tau_by_size.csv, health.csv, summary.md"
        + (", levels.png" if len(lv) else "")
    )


def _levels_view(lv):
    """:meth:`CompareResult.levels` for reading: each quantity as ``median (lo to hi)``, P(best) as a share."""
    import pandas as pd

    view = lv[["factor", "level", "runs"]].astype(str)
    for q in ("plateau", "timescale", "noise"):
        view[q] = [f"{m:.3g} ({a:.3g} to {b:.3g})" for m, a, b in zip(lv[q], lv[f"{q}_lo"], lv[f"{q}_hi"], strict=True)]
    view["P(best)"] = ["" if pd.isna(p) else f"{p:.2f}" for p in lv["p_best"]]
    return view
