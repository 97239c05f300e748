"""``bayesgrpo diagnose``: reward hacking, advantage degeneracy, policy concentration, instability."""

from __future__ import annotations

from typing import Annotated

import typer

from bayesgrpo.cli import common as C
from bayesgrpo.cli.options import KIND, OUTPUTS, READ, SAMPLER, RunsArg, pick, with_options

__all__ = ["diagnose_cmd"]


@with_options(*READ, "horizon", "until_step", *KIND, *OUTPUTS, *SAMPLER)
def diagnose_cmd(
    runs: RunsArg,
    ceiling: Annotated[
        float | None,
        typer.Option(
            "--ceiling", help="verifiable reward ceiling for runs without reward_max in --meta (e.g. 1 for 0/1 rewards)"
        ),
    ] = None,
    posterior: Annotated[
        bool, typer.Option("--posterior", help="also fit the model and use its posterior for instability")
    ] = False,
    **options,
):
    """Check runs for reward hacking, advantage degeneracy, policy concentration and instability.

    --until-step N diagnoses what was logged up to step N (what would the checks have said then?)."""
    import math

    from bayesgrpo.diagnose import diagnose_runs, resolve_ceilings
    from bayesgrpo.io.output import file_stems, save_figure, write_table
    from bayesgrpo.plots.diagnosis import plot_diagnosis

    kind = C.model_kind(options["kind"], options["model"])
    horizon, until_step = options["horizon"], options["until_step"]
    C.plan_options(horizon=horizon)
    if ceiling is not None and not math.isfinite(ceiling):
        C.fail(f"--ceiling must be a finite number (the highest reward a verifier can give), got {ceiling:g}")
    smp = C.sampler_config(**pick(options, SAMPLER))
    out, out_dir = options["out"], options["out_dir"]
    C.validate_outputs(out=out, out_dir=out_dir)
    rs = C.read_options(runs, options)
    if until_step is not None:
        rs = C.until_step_prefix(rs, until_step)
    stems = file_stems(rs.run_ids)
    C.check_out_names(out_dir, [f"{s}_diagnosis.png" for s in stems.values()])
    with C.guard():
        ceil = resolve_ceilings(rs, ceiling)
    posts = _posteriors(rs, kind=kind, sampler=smp, horizon=horizon) if posterior else None
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
        lambda s: sorted({m.strip() for v in s for m in str(v).split(",") if m.strip() and m.strip() != "nan"})
    )
    _say_missing(missing.to_dict(), ceiling=ceiling, posterior=posterior)
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


def _say_missing(missing: dict, *, ceiling, posterior: bool) -> None:
    """One line per run: the metrics it does not log (so the checks that read them were not made); the inputs no
    log holds -- a verifiable ceiling, the posterior -- are said once, with the option that gives them."""
    for rid, items in missing.items():
        logged = [m for m in items if m != "posterior draws" and not m.startswith("ceiling")]
        if logged:
            C.status(f"{rid}: not logged, so not assessed from them: {', '.join(logged)}")
    no_ceiling = [rid for rid, items in missing.items() if any(m.startswith("ceiling") for m in items)]
    if no_ceiling:
        why = ("their reward passes --ceiling (see the warnings above)" if ceiling is not None
               else "give --ceiling, or reward_max in --meta")  # fmt: skip
        C.status(
            f"{len(no_ceiling)} run(s) without a verifiable ceiling, so reward hacking is not judged from one: {why}"
        )
    if not posterior and any("posterior draws" in items for items in missing.values()):
        C.status("the posterior part of dynamical_instability was not made: add --posterior (a fit per run)")


def _posteriors(rs, *, kind: str, sampler, horizon) -> dict:
    """Posterior path draws per run for the instability check (the plan's ``next`` horizon by default)."""
    from bayesgrpo.forecast import Forecaster
    from bayesgrpo.forecast.batch import forecast_batch
    from bayesgrpo.plan import NEXT

    # complete runs: the posterior of the logged curve needs no future, one logged step ahead suffices
    C.status(f"fitting the {kind} kind to {len(rs)} run(s) for the instability check")
    with C.guard(), C.progress_bar("sampling") as bar:
        res = forecast_batch(rs, forecaster=Forecaster(kind, sampler=sampler),
                             horizon=horizon if horizon is not None else NEXT, progress=lambda d, n: bar(d, n))  # fmt: skip
    return {r: res.fit.paths(r) for r in res.fit.forecast_ids} if res.fit is not None else {}
