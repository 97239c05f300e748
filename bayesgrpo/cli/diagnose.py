"""``bayesgrpo diagnose``: reward hacking, advantage degeneracy, policy concentration, instability."""

from __future__ import annotations

from typing import Annotated

import typer

from bayesgrpo.cli import common as C
from bayesgrpo.cli.options import (
    DEFAULT_CHAINS,
    DEFAULT_DRAWS,
    DEFAULT_MODEL,
    DEFAULT_TUNE,
    ChainsOpt,
    DrawsOpt,
    ExcludeOpt,
    FormatOpt,
    HorizonOpt,
    MetaOpt,
    ModelOpt,
    OutDirOpt,
    OutOpt,
    RewardKeyOpt,
    RunOpt,
    RunsArg,
    SeedOpt,
    TuneOpt,
    UntilStepOpt,
)

__all__ = ["diagnose_cmd"]


def _posteriors(rs, *, horizon, model, sampler) -> dict:
    """``--posterior``: each run's posterior paths (the model fitted to the logged curve; a complete run
    needs no future: one logging interval ahead suffices)."""
    import numpy as np

    from bayesgrpo.forecast import Forecaster
    from bayesgrpo.forecast.batch import forecast_batch

    def ahead(g):
        s = g["step"].to_numpy()
        return int(s[-1]) + (max(1, int(np.median(np.diff(s)))) if len(s) > 1 else 1)

    hz = horizon if horizon is not None else {r: ahead(rs.run(r)) for r in rs.run_ids}
    C.status(f"fitting the {model} model to {len(rs)} run(s) for the instability check")
    with C.guard(), C.progress_bar("sampling", unit="run") as bar:
        res = forecast_batch(rs, forecaster=Forecaster(model, sampler=sampler), horizon=hz,
                             progress=lambda d, n: bar(d, n))  # fmt: skip
    return {r: res.fit.paths(r) for r in res.fit.forecast_ids} if res.fit is not None else {}


def diagnose_cmd(
    runs: RunsArg,
    meta: MetaOpt = None,
    fmt: FormatOpt = None,
    reward_key: RewardKeyOpt = None,
    run: RunOpt = None,
    exclude: ExcludeOpt = None,
    ceiling: Annotated[
        float | None,
        typer.Option(
            "--ceiling", help="verifiable reward ceiling for runs without reward_max in --meta (e.g. 1 for 0/1 rewards)"
        ),
    ] = None,
    posterior: Annotated[
        bool, typer.Option("--posterior", help="also fit the model and use its posterior for instability")
    ] = False,
    horizon: HorizonOpt = None,
    until_step: UntilStepOpt = None,
    model: ModelOpt = DEFAULT_MODEL,
    out: OutOpt = None,
    out_dir: OutDirOpt = None,
    seed: SeedOpt = 0,
    draws: DrawsOpt = DEFAULT_DRAWS,
    tune: TuneOpt = DEFAULT_TUNE,
    chains: ChainsOpt = DEFAULT_CHAINS,
):
    """Check runs for reward hacking, advantage degeneracy, policy concentration and instability.

    --until-step N diagnoses what was logged up to step N (what would the checks have said then?)."""
    import math

    from bayesgrpo.diagnose import diagnose_runs, resolve_ceilings
    from bayesgrpo.io.output import file_stems, save_figure, write_table
    from bayesgrpo.plots.diagnosis import plot_diagnosis

    C.validate_model(model)
    C.validate_until(until_step=None, until_fraction=None, horizon=horizon)
    if ceiling is not None and not math.isfinite(ceiling):
        C.fail(f"--ceiling must be a finite number (the highest reward a verifier can give), got {ceiling:g}")
    smp = C.sampler_config(draws=draws, tune=tune, chains=chains, seed=seed)
    C.validate_outputs(out=out, out_dir=out_dir)
    rs = C.read_runsets(runs, meta, fmt, run=run, exclude=exclude, reward_key=reward_key)
    if until_step is not None:
        rs = C.until_step_prefix(rs, until_step)
    stems = file_stems(rs.run_ids)
    C.check_out_names(out_dir, [f"{s}_diagnosis.png" for s in stems.values()])
    with C.guard():
        ceil = resolve_ceilings(rs, ceiling)
    posts = _posteriors(rs, horizon=horizon, model=model, sampler=smp) if posterior else None
    with C.guard():
        res = diagnose_runs(rs, posteriors=posts, ceiling=ceil)
    sev = res["severity"].astype(str)
    flagged = res[sev.isin(["warning", "critical"])]
    C.print_table(
        flagged[["run_id", "mode", "severity", "onset_step", "evidence"]],
        title=f"warnings and critical findings: {len(flagged)} of {len(res)} checks ({len(rs)} runs x 4 modes)",
    )
    n_watch = int((sev == "watch").sum())
    if n_watch:
        C.status(
            f"{n_watch} more check(s) at severity 'watch'" + (f" are in {out}" if out else " (write them with --out)")
        )
    missing = res.groupby("run_id")["missing"].apply(
        lambda s: ",".join(sorted({m for v in s for m in str(v).split(",") if m and m != "nan"}))
    )
    for rid, m in missing.items():
        if m:
            C.status(f"{rid}: not logged, so not assessed from them: {m}")
    if out is not None:
        with C.guard():
            write_table(res, out)
        C.status(f"wrote {out}")
    if out_dir is not None:
        for rid in rs.run_ids:
            with C.guard():
                fig = plot_diagnosis(rs, rid, res, ceiling=ceil.get(rid), posteriors=posts)
                path = out_dir / f"{stems[rid]}_diagnosis.png"
                save_figure(fig, path, dpi=100)
        C.status(f"wrote {len(rs.run_ids)} figure(s) in {out_dir}")
