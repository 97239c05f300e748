"""``bayesgrpo testbed ...``: run GRPO testbed sweeps."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

testbed_app = typer.Typer(
    help="Reproducible GRPO testbeds for validating the physics: a small exact numpy trainer (sweep, run) and "
    "TRL's own GRPOTrainer on CPU (trl).",
    no_args_is_help=True,
)


@testbed_app.command("sweep")
def sweep_cmd(
    config: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, help="sweep JSON (e.g. models/testbed_sweep.json)")
    ],
    out: Annotated[Path, typer.Option("--out-dir", "-o", help="folder for runs.csv + meta.csv")] = Path("testbed_runs"),
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="parallel processes")] = 1,
    gzip: Annotated[bool, typer.Option("--gzip/--no-gzip", help="write runs.csv.gz / meta.csv.gz")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no per-run progress lines")] = False,
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
    set_: Annotated[
        list[str] | None, typer.Option("--set", "-s", help="config field=value (JSON value), repeatable")
    ] = None,
    out: Annotated[Path, typer.Option("--out-dir", "-o", help="folder for runs.csv + meta.csv")] = Path("testbed_run"),
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
    for s in set_ or []:
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
        f"ran {cfg.max_steps} steps in {dt:.2f}s; final reward_expected {df['reward_expected'].iloc[-1]:.4f}; "
        f"wrote {out}",
        err=True,
    )


@testbed_app.command("trl")
def trl_cmd(
    config: Annotated[Path, typer.Argument(help="TRL sweep JSON (e.g. models/trl_sweep.json)")],
    out: Annotated[
        Path, typer.Option("--out-dir", "-o", help="folder for runs/<run_id>/, meta.csv.gz, prompts.csv.gz")
    ] = Path("trl-testbed"),
    only: Annotated[
        str | None, typer.Option("--only", help="run only the run ids matching this shell pattern (e.g. 'lr-*')")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no per-run progress lines")] = False,
) -> None:
    """Run real TRL GRPOTrainer jobs (CPU, one thread, deterministic per seed) for every run of CONFIG.

    Resumable: finished runs (same configuration digest) in OUT/runs are kept. Writes one folder
    per run (the trainer's trainer_state.json.gz, exact pass rates) and the index OUT/meta.csv.gz
    plus OUT/prompts.csv.gz. Needs the optional extra: pip install 'bayesgrpo[trl]'.
    """
    from fnmatch import fnmatch

    import pandas as pd
    from pydantic import ValidationError

    from bayesgrpo.cli.common import fail, guard, status, validate_outputs
    from bayesgrpo.io.output import atomic_path
    from bayesgrpo.testbed.trl.config import load_trl_sweep
    from bayesgrpo.testbed.trl.sweep import read_index, sweep_trl
    from bayesgrpo.testbed.trl.task import AnswerSetTask, require_trl

    if not config.is_file():
        fail(f"{config}: no such sweep file")
    validate_outputs(out_dir=out)
    try:
        cfg = load_trl_sweep(config)
        items = cfg.expand()
    except (ValidationError, ValueError) as e:
        fail(f"{config}: not a valid TRL sweep configuration ({str(e).splitlines()[0]}: {_first_error(e)})")
    with guard():
        require_trl()
    n = sum(1 for r, _, _ in items if only is None or fnmatch(r, only))
    if n == 0:
        fail(f"--only {only!r}: no run id of {config} matches")
    status(f"{config}: {n} of {len(items)} runs in {len(cfg.groups)} groups -> {out}")
    t0 = time.perf_counter()

    def progress(k: int, total: int, run_id: str, what: str, dt: float) -> None:
        if not quiet:
            status(f"[{k:4d}/{total}] {run_id:<32s} {what:<12s} {dt:6.1f}s  (elapsed {time.perf_counter() - t0:7.1f}s)")

    res = sweep_trl(cfg, out, only=only, progress=progress)
    meta = read_index(out, cfg)
    with atomic_path(out / "meta.csv.gz") as tmp:
        meta.to_csv(tmp, index=False, compression={"method": "gzip", "mtime": 0})
    tasks = []
    for seed in sorted({c.task_seed for _, c, _ in items}):
        c = next(c for _, c, _ in items if c.task_seed == seed)
        tasks.append(pd.DataFrame({"task_seed": seed, **AnswerSetTask.from_config(c).table()}))
    with atomic_path(out / "prompts.csv.gz") as tmp:
        pd.concat(tasks).to_csv(tmp, index=False, compression={"method": "gzip", "mtime": 0})
    spent = meta["seconds"].sum() if "seconds" in meta else 0.0
    status(
        f"ran {len(res.ran)}, kept {len(res.skipped)} finished, {len(res.failed)} failed in {res.seconds:.0f}s; "
        f"{len(meta)} runs in {out / 'meta.csv.gz'} (training time of all of them {spent / 60:.1f} min)"
    )
    if res.failed:
        for rid, msg in res.failed.items():
            status(f"failed: {rid}: {msg.splitlines()[0]}")
        fail(f"{len(res.failed)} of {n} runs failed (listed above); re-run the same command to retry them", code=1)


def _first_error(e: Exception) -> str:
    errs = getattr(e, "errors", None)
    if callable(errs):
        err = errs()[0]
        return f"{'.'.join(map(str, err['loc']))}: {err['msg']}"
    return str(e)


if __name__ == "__main__":  # python -m bayesgrpo.cli.testbed sweep ...
    testbed_app()
