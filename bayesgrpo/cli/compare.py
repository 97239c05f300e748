"""``bayesgrpo compare``: hierarchical comparison of families / group sizes (typer-compatible command).

Writes ``contrasts.csv``, ``loo.csv`` (with Pareto-k counts), ``pareto_k.csv``, ``tau_by_size.csv``,
``health.csv``, ``summary.md`` and ``forest.png`` to ``--out`` and prints the tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

__all__ = ["compare_cmd"]


def compare_cmd(
    runs: Annotated[Path, typer.Argument(help="training log(s) of complete runs (any format read_runs reads)")],
    meta: Annotated[Optional[Path], typer.Option("--meta", help="metadata file (run_id, family/model, group_size, params_b, ...)")] = None,
    by: Annotated[str, typer.Option(help="comma-separated metadata columns: family column first, then factors (e.g. group_size)")] = "family,group_size",
    runs_filter: Annotated[Optional[list[str]], typer.Option("--run", help="only these run ids (repeatable)")] = None,
    out: Annotated[Path, typer.Option(help="output folder")] = Path("compare_out"),
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
    draws: Annotated[int, typer.Option(help="posterior draws per chain")] = 500,
    tune: Annotated[int, typer.Option(help="tuning draws per chain")] = 500,
    fixed_g_exponent: Annotated[bool, typer.Option("--fixed-g-exponent", help="fix the noise-temperature exponent b at 1 (default: free, prior N(1,1))")] = False,
    models: Annotated[str, typer.Option(help="model kinds to compare by PSIS-LOO")] = "oscillator,saturation,scaling",
    scale: Annotated[str, typer.Option(help="reward normalisation: auto, run, shared, or a metadata column of runs sharing a scale")] = "auto",
    max_steps: Annotated[Optional[int], typer.Option(help="use only steps <= this (speed)")] = None,
    chains: Annotated[int, typer.Option(help="chains")] = 2,
) -> None:
    """Compare families and group sizes: posterior contrasts, the G-exponent of the noise temperature,
    tau vs model size, and PSIS-LOO (leave-one-run-out) of oscillator / saturation / scaling."""
    import matplotlib

    matplotlib.use("Agg")
    from rich.console import Console
    from rich.table import Table

    from bayesgrpo.compare.model import compare_runs
    from bayesgrpo.forecast.forecaster import SamplerConfig
    from bayesgrpo.io import read_runs

    console = Console()
    rs = read_runs(runs, meta=meta) if meta is not None else read_runs(runs)
    if runs_filter:
        rs = rs.select(runs_filter)
    by_t = tuple(s.strip() for s in by.split(",") if s.strip())
    kinds = tuple(s.strip() for s in models.split(",") if s.strip())
    sampler = SamplerConfig(draws=draws, tune=tune, chains=chains, seed=seed)
    console.print(f"[bold]compare[/bold]: {len(rs)} runs, by {by_t}, models {kinds}, b {'fixed at 1' if fixed_g_exponent else 'free'}")
    res = compare_runs(rs, by=by_t, models=kinds, free_g_exponent=not fixed_g_exponent, sampler=sampler, seed=seed, scale=scale, max_steps=max_steps)
    out.mkdir(parents=True, exist_ok=True)
    res.contrasts.to_csv(out / "contrasts.csv", index=False)
    res.loo.to_csv(out / "loo.csv", index=False)
    res.pareto_k.to_csv(out / "pareto_k.csv", index=False)
    res.tau_by_size.to_csv(out / "tau_by_size.csv", index=False)
    res.health.to_csv(out / "health.csv", index=False)
    (out / "summary.md").write_text(res.summary_markdown())
    fig = res.forest()
    fig.savefig(out / "forest.png", dpi=130)

    def show(df, title):
        t = Table(title=title)
        for c in df.columns:
            t.add_column(str(c))
        for r in df.itertuples(index=False):
            t.add_row(*[f"{v:.3g}" if isinstance(v, float) else str(v) for v in r])
        console.print(t)

    show(res.contrasts.drop(columns=["model"]), f"contrasts ({res.primary} model; 90% intervals)")
    if len(res.tau_by_size):
        show(res.tau_by_size, "timescale vs model size")
    show(res.loo, "PSIS-LOO (leave-one-run-out)")
    show(res.health, "sampler health")
    console.print(f"wrote {out}/contrasts.csv, loo.csv, summary.md, forest.png")


if __name__ == "__main__":  # pragma: no cover
    typer.run(compare_cmd)
