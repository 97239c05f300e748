"""``bayesgrpo testbed ...``: run GRPO testbed sweeps."""

from __future__ import annotations

import time
from pathlib import Path

import typer

testbed_app = typer.Typer(
    help="A small, exact, reproducible GRPO trainer (numpy) for validating the physics.", no_args_is_help=True
)


@testbed_app.command("sweep")
def sweep_cmd(
    config: Path = typer.Argument(..., exists=True, dir_okay=False, help="sweep JSON (e.g. models/testbed_sweep.json)"),
    out: Path = typer.Option(Path("testbed_runs"), "--out-dir", "-o", help="folder for runs.csv + meta.csv"),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="parallel processes"),
    gzip: bool = typer.Option(False, "--gzip/--no-gzip", help="write runs.csv.gz / meta.csv.gz"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no per-run progress lines"),
) -> None:
    """Run every configuration of CONFIG and write runs.csv + meta.csv (schema format) to OUT."""
    from pydantic import ValidationError

    from bayesgrpo.cli.common import fail, validate_outputs
    from bayesgrpo.testbed.config import load_sweep_config
    from bayesgrpo.testbed.sweep import sweep, write_runs

    validate_outputs(out_dir=out)
    try:
        cfg = load_sweep_config(config)
    except (ValidationError, ValueError) as e:
        fail(f"{config}: not a valid sweep configuration ({str(e).splitlines()[0]})")
    n = len(cfg.expand())
    typer.echo(f"{config}: {n} runs in {len(cfg.groups)} groups, {jobs} job(s)", err=True)
    t0 = time.perf_counter()

    def progress(k: int, total: int, run_id: str, dt: float) -> None:
        if not quiet:
            typer.echo(
                f"[{k:4d}/{total}] {run_id:<40s} {dt:6.2f}s  (elapsed {time.perf_counter() - t0:7.1f}s)", err=True
            )

    data, meta = sweep(cfg, jobs=jobs, progress=progress)
    p_runs, p_meta = write_runs(data, meta, out, gzip=gzip)
    typer.echo(
        f"wrote {p_runs} ({len(data)} rows) and {p_meta} ({len(meta)} runs) in {time.perf_counter() - t0:.1f}s",
        err=True,
    )


@testbed_app.command("run")
def run_cmd(
    set_: list[str] = typer.Option([], "--set", "-s", help="config field=value (JSON value), repeatable"),
    out: Path = typer.Option(Path("testbed_run"), "--out-dir", "-o", help="folder for runs.csv + meta.csv"),
) -> None:
    """Run a single configuration (fields as --set key=value) and write runs.csv + meta.csv."""
    import json

    import pandas as pd
    from pydantic import ValidationError

    from bayesgrpo.cli.common import fail, validate_outputs
    from bayesgrpo.testbed.config import TrainerConfig
    from bayesgrpo.testbed.sweep import run_one, write_runs

    validate_outputs(out_dir=out)
    kw = {}
    for s in set_:
        k, eq, v = s.partition("=")
        if not eq or not k:
            fail(f"--set {s!r}: expected field=value")
        if k not in TrainerConfig.model_fields:
            fail(f"--set {k}=...: no such field; fields are {', '.join(sorted(TrainerConfig.model_fields))}")
        try:
            kw[k] = json.loads(v)
        except json.JSONDecodeError:
            kw[k] = v
    try:
        cfg = TrainerConfig(**kw)
    except ValidationError as e:
        err = e.errors()[0]
        fail(f"--set {'.'.join(map(str, err['loc']))}: {err['msg']}")
    df, meta, dt = run_one(("run", cfg, {}))
    write_runs(df, pd.DataFrame([meta]), out)
    typer.echo(
        f"ran {cfg.max_steps} steps in {dt:.2f}s; final reward_expected {df['reward_expected'].iloc[-1]:.4f}; wrote {out}",
        err=True,
    )


if __name__ == "__main__":  # python -m bayesgrpo.cli.testbed sweep ...
    testbed_app()
