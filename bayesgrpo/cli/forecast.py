"""``bayesgrpo forecast`` and ``bayesgrpo demo``."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import typer

from bayesgrpo.cli import common as C
from bayesgrpo.cli.options import (
    DEFAULT_CHAINS,
    DEFAULT_DELTA,
    DEFAULT_DRAWS,
    DEFAULT_FINAL_WINDOW,
    DEFAULT_KIND,
    DEFAULT_RETRY,
    DEFAULT_RISK,
    DEFAULT_STOP_FRACTION,
    DEFAULT_TUNE,
    FORECAST,
    FolderOpt,
    RunsArg,
    SeedOpt,
    UntilStepOpt,
    with_options,
)

__all__ = ["forecast_cmd", "demo_cmd", "run_forecast", "display_table", "figure_names"]


def display_table(table):
    """The human view of a forecast table: final reward with its 80% interval, censored stop steps,
    the status (``ok``, ``warning``, ``complete``, ``error``, ``interrupted``) and its reason, and (when
    the table carries the stop policy's answer) P(gain) with the advice."""
    import numpy as np
    import pandas as pd

    advice = "advice" in table.columns

    rows = []
    for r in table.itertuples(index=False):
        status = getattr(r, "status", "ok")
        seen = (
            f"{int(r.observed_until)}/{int(r.horizon)}"
            if np.isfinite(r.observed_until) and np.isfinite(r.horizon)
            else ""
        )
        blank = {"run": r.run_id, "seen/horizon": seen, "final reward [80%]": "", "plateau": "", "stop step": "",
                 "P(stop<H)": "", "r_hat": ""}  # fmt: skip
        if advice:
            p_gain = getattr(r, "p_gain", np.nan)
            blank |= {"P(gain)": f"{p_gain:.2f}" if np.isfinite(p_gain) else "", "advice": r.advice}
        if status in ("error", "interrupted"):
            rows.append(blank | {"status": f"error: {r.error}" if status == "error" else "interrupted"})
            continue
        if status == "complete":
            rows.append(blank | {"final reward [80%]": f"{r.final_q50:.3g} (observed)", "status": "complete"})
            continue
        censored = not (r.p_stop_before_horizon >= 0.5)
        stop = f">{int(r.horizon)}" if censored else f"{r.stop_q50:.0f}"
        rows.append(blank | {
            "final reward [80%]": f"{r.final_q50:.3g} [{r.final_q10:.3g}, {r.final_q90:.3g}]",
            "plateau": f"{r.plateau_q50:.3g}", "stop step": stop, "P(stop<H)": f"{r.p_stop_before_horizon:.2f}",
            "r_hat": f"{r.r_hat_max:.3f}" if np.isfinite(r.r_hat_max) else "",
            "status": "ok" if status == "ok" else f"warning: {r.error}",
        })  # fmt: skip
    out = pd.DataFrame(rows)
    if advice and len(out):  # the advice beside the forecast it judges, before the sampler's columns
        first = ["run", "seen/horizon", "final reward [80%]", "P(gain)", "advice"]
        out = out[first + [c for c in out.columns if c not in first]]
    return out


def figure_names(run_ids) -> dict:
    """``{run_id: file name}`` of the fan charts ``--out-dir`` receives (unique, safe)."""
    from bayesgrpo.io.output import file_stems

    return {rid: f"{stem}.png" for rid, stem in file_stems(run_ids).items()}


def run_forecast(
    runs_paths, *, meta=None, fmt=None, run=None, exclude=None, horizon=None, until_step=None, until_fraction=None,
    context=None, context_meta=None, kind=DEFAULT_KIND, model=None, out=None, out_dir=None, seed=0,
    final_window=DEFAULT_FINAL_WINDOW, stop_fraction=DEFAULT_STOP_FRACTION, draws=DEFAULT_DRAWS, tune=DEFAULT_TUNE,
    chains=DEFAULT_CHAINS, retry=DEFAULT_RETRY, strict=False, title="forecast", figures=True, reward_range=None, workers=None,
    scheduler=None, check_runs=None, exit_if_none=True, reward_key=None, channels=None, delta=DEFAULT_DELTA,
    risk=DEFAULT_RISK,
):  # fmt: skip
    """Validate every option, read, forecast (bad runs become error rows), print and write.

    ``channels``: the spread channels observed with the reward (``--channels``). ``delta`` / ``risk``: the
    table's ``p_gain`` and the stop policy's ``advice`` (``stop`` / ``continue`` / ``too early``) with its
    measured ``advice_error_rate`` (:mod:`bayesgrpo.decisions.stop`). ``check_runs(runs)``, when given, is
    called after reading and before any sampling (a verb's own checks of the runs, e.g. metadata columns
    it needs or the files of its --out-dir). With
    ``exit_if_none`` (default) a batch in which no run could be forecast (and none is complete) exits
    with code 1; otherwise its result (error rows only) is returned.

    Returns the :class:`~bayesgrpo.forecast.batch.BatchResult`.
    """
    from bayesgrpo.decisions.stop import advise_fit
    from bayesgrpo.errors import Interrupted
    from bayesgrpo.forecast import Forecaster
    from bayesgrpo.forecast.batch import forecast_batch, long_work
    from bayesgrpo.inference.executor import check_options, make_executor
    from bayesgrpo.io.output import write_table
    from bayesgrpo.plan import plan_runs

    # ---- every option before any reading or sampling
    kind = C.model_kind(kind, model)
    spread = C.parse_channels(channels, kind)
    C.forecast_options(final_window=final_window, stop_fraction=stop_fraction)
    C.plan_options(horizon=horizon, until_step=until_step, until_fraction=until_fraction, final_window=final_window)
    sampler = C.sampler_config(draws=draws, tune=tune, chains=chains, seed=seed, retry=retry)
    bounds = C.parse_reward_range(reward_range)
    C.validate_outputs(out=out, out_dir=out_dir)
    policy = C.stop_policy(model=kind, risk=risk, delta=delta)
    with C.guard():
        check_options(workers=workers, scheduler=scheduler)
    t_start = time.perf_counter()
    runs = C.read_runsets(
        runs_paths, meta, fmt, run=run, exclude=exclude, reward_range=bounds, reward_key=reward_key, strict=strict
    )
    if check_runs is not None:
        check_runs(runs)
    ctx = C.read_runsets(context, context_meta, None, option="--context") if context else None
    names = figure_names(runs.run_ids)
    if out_dir is not None and figures:  # the files --out-dir will hold, before any sampling
        C.check_out_names(out_dir, ["paths.csv", *names.values()])
    with C.guard():  # an unreadable packaged or $BAYESGRPO_PRIOR prior is a one-line error
        fc = Forecaster(kind, final_window=final_window, stop_fraction=stop_fraction, sampler=sampler, channels=spread,
                        delta=delta)  # fmt: skip
    _announce(title, runs, ctx, fc, workers=workers, scheduler=scheduler)
    with C.guard(), warnings.catch_warnings():  # long work is said before it starts (the batch warns its plans)
        warnings.simplefilter("ignore")
        plans = plan_runs(runs, horizon=horizon, until_step=until_step, until_fraction=until_fraction,
                          final_window=final_window)  # fmt: skip
    for line in long_work(plans):
        C.status(line)
    interrupted = None
    with (
        C.guard(),
        make_executor(workers=workers, scheduler=scheduler) as ex,
        C.progress_bar("sampling", unit="run") as bar,
    ):
        try:
            res = forecast_batch(runs, forecaster=fc, horizon=horizon, until_step=until_step,
                                 until_fraction=until_fraction, context=ctx, strict=strict,
                                 progress=lambda d, n: bar(d, n), executor=ex)  # fmt: skip
        except Interrupted as e:
            res, interrupted = e.partial, e
        if res is not None:  # one rule for the sampler's health: the status's (its reason on stderr too)
            for r in res.table.itertuples(index=False):
                if r.status == "warning":
                    C.warn(f"run {r.run_id!r}: {r.error}")
        if res is not None and policy is not None:
            res.table, res.decisions = advise_fit(res.table, res.fit, policy)
        elif res is not None:  # a kind whose advice was never measured: p_gain, and no advice
            res.table = res.table.assign(advice="", advice_error_rate=float("nan"))
    if interrupted is not None:
        _interrupted(res, out, final_window)
    _show(res, policy, final_window=final_window)
    if out is not None:
        with C.guard():
            write_table(res.table, out)
        C.status(f"wrote {out}")
    if out_dir is not None and figures and res.fit is not None:
        _write_figures(res, out_dir, names)
    C.status(f"done in {time.perf_counter() - t_start:.1f} s")
    if res.fit is None and not res.complete and exit_if_none:
        raise typer.Exit(C.EXIT_FAILED)
    return res


def _announce(title: str, runs, ctx, fc, *, workers, scheduler) -> None:
    """The status line before sampling: what is forecast, with what, where, and how long it takes."""
    cfg = fc.config
    where = (
        f"; on {workers} local worker(s)" if workers else (f"; on the Dask cluster at {scheduler}" if scheduler else "")
    )
    C.status(
        f"{title}: {len(runs)} run(s), kind {cfg.kind}"
        + (f" observing {', '.join(cfg.channels)}" if cfg.channels else "")
        + (f", pooling with {len(ctx)} context run(s)" if ctx else "")
        + f"; population prior {cfg.prior.identity}{where}; compiling once per machine (about a minute; "
        "later runs load it from the disk cache), then "
        + ("about 1 s per run" if cfg.kind in ("oscillator", "saturation", "scaling") else "up to a minute per run")
    )


def _show(res, policy, *, final_window: float) -> None:
    """The table on stdout; with the stop policy's advice, what a 'stop' means and its measured error rate."""
    advice = ""
    if policy is not None:
        advice = f"; P(gain) = P(final >= current level + {policy.delta:g} x scale), advice at risk {policy.risk:g}"
    C.print_table(display_table(res.table),
                  title=f"final reward = mean logged reward over the last {final_window:.0%} of the run "
                        f"(median [80% interval]); stop step '>H' = not settled by the horizon{advice}")  # fmt: skip
    if policy is not None:
        C.status(f"advice: {policy.describe()} (the score is advice_score in --out); {policy.measured}")


def _write_figures(res, out_dir, names: dict) -> None:
    """``--out-dir``: ``paths.csv`` (the per-step predictive quantiles behind the fan charts) and a fan
    chart per forecast run."""
    import pandas as pd

    from bayesgrpo.io.output import save_figure, write_table
    from bayesgrpo.plots.fan import fan_chart

    out_dir.mkdir(parents=True, exist_ok=True)
    with C.guard():
        bands = [res.fit.path_quantiles(rid).assign(run_id=rid) for rid in res.fit.forecast_ids]
        bands = pd.concat(bands, ignore_index=True)
        write_table(bands[["run_id", *[c for c in bands.columns if c != "run_id"]]], out_dir / "paths.csv")
    C.status(f"wrote {out_dir / 'paths.csv'}")
    for rid in res.fit.forecast_ids:
        truth = res.full.run(rid) if res.truncated and res.full is not None else None
        with C.guard():
            path = out_dir / names[rid]
            save_figure(fan_chart(res.fit, rid, truth=truth), path)
        C.status(f"wrote {path}")


def _interrupted(res, out, final_window) -> None:
    """After a Ctrl-C: the finished rows (table, ``--out`` written atomically), one line, exit 130."""
    from bayesgrpo.io.output import write_table

    n_done = 0 if res is None else int(res.table["status"].isin(["ok", "warning", "complete"]).sum())
    n = 0 if res is None else len(res.table)
    with C.no_interrupts():
        if res is not None:
            C.print_table(display_table(res.table),
                          title=f"final reward = mean logged reward over the last {final_window:.0%} of the run "
                                "(median [80% interval]); interrupted")  # fmt: skip
            if out is not None:
                write_table(res.table, out)
    kept = f" (kept in {out}; the others are marked interrupted)" if out is not None and res is not None else ""
    C.interrupted(f"{n_done} of {n} run(s) finished{kept}")


@with_options(*FORECAST)
def forecast_cmd(runs: RunsArg, **options):
    """Forecast every run's final reward and stop step, with intervals, from its logged steps.

    P(gain) = P(final reward >= current level + --delta x the run's scale), recalibrated; advice = stop /
    continue / too early by the stop policy at --risk (the share of its stops measured to lose more than
    0.1 of the run's range; the table's advice_error_rate). --out-dir receives one fan chart per run (RUN.png) and paths.csv: the per-step predictive quantiles
    of the logged reward (yhat_q05..yhat_q95), its median and the latent mean, per run.
    """
    run_forecast(runs, **options)


def demo_cmd(
    out_dir: FolderOpt = Path("out/demo"),
    until_step: UntilStepOpt = 150,
    seed: SeedOpt = 0,
):
    """Forecast the shipped example run (a TRL trainer_state.json) from its first 150 steps."""
    from bayesgrpo.resources import example_meta, example_run

    C.status(f"example: {example_run()} (500 steps logged; forecasting from step {until_step})")
    run_forecast([example_run()], meta=example_meta(), until_step=until_step, out=out_dir / "forecast.csv",
                 out_dir=out_dir, seed=seed, title="demo forecast")  # fmt: skip
