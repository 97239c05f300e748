"""``bayesgrpo backtest``: truncate complete runs, forecast, score against what was logged later."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bayesgrpo.cli import common as C
from bayesgrpo.cli.options import ADVICE, CONTEXT, KIND, READ, SAMPLER, WHERE, FolderOpt, RunsArg, pick, with_options

__all__ = ["backtest_cmd", "slow_peer_note", "SLOW_PEERS"]


def _run(rs, out_dir, **kw):
    """The backtest with a progress bar; after a Ctrl-C one line saying what the ledger keeps, exit 130."""
    from bayesgrpo.evaluation.backtest import backtest

    stopped = None
    with C.progress_bar("backtest", unit="case") as bar:
        try:
            return backtest(rs, out_dir=out_dir, progress=lambda d, n, m: bar(d, n, m), **kw)
        except KeyboardInterrupt as e:
            stopped = e
    n = getattr(stopped, "partial", None)
    C.interrupted(f"{n if n is not None else 'the'} finished case(s) are in {out_dir / 'cases.csv'}; the case in "
                  "flight is not; rerun the same command to resume")  # fmt: skip


@with_options(*READ, *KIND, "reward_range", *CONTEXT, "out", *SAMPLER, *WHERE, *ADVICE)
def backtest_cmd(
    runs: RunsArg,
    cutoffs: Annotated[
        str, typer.Option("--cutoffs", help="comma list of observed fractions of each run's step span, each in (0, 1)")
    ] = "0.1,0.2,0.3,0.5",
    peers: Annotated[
        str,
        typer.Option(
            "--peers",
            help='"all", "none" or a comma list of last_value, exponential, scalerl, pow3, domhan, domhan_fast',
        ),
    ] = "all",
    out_dir: FolderOpt = Path("backtest_out"),
    resume: Annotated[
        bool, typer.Option("--resume/--no-resume", help="skip cases already in OUT_DIR/cases.csv")
    ] = True,
    **options,
) -> None:
    """Backtest forecasts: truncate each complete run at each cutoff, forecast its final reward with
    bayesgrpo and the peers, and score against the logged truth. --out-dir holds cases.csv (the resume
    ledger), summary.md/json and figures; --out writes the summary table. Safe to interrupt: rerun the
    same command to resume. With bayesgrpo among the methods it also prints the stop policy's operating
    characteristic on these runs (--risk, --delta; checked at the cutoffs in order, as a live run would be):
    runs stopped, steps saved, the share of stops that were bad (lost more than 0.1 of the run's range) and
    the reward lost, against the oracle (OUT_DIR/stop_policy.csv), so a lab can check the advice on its own
    history."""
    from bayesgrpo.evaluation.backtest import OUTPUT_FILES
    from bayesgrpo.evaluation.methods import resolve_methods
    from bayesgrpo.inference.executor import check_options, make_executor

    kind = C.model_kind(options["kind"], options["model"])
    cut = _cutoffs(cutoffs)
    try:
        resolve_methods(peers)
    except ValueError as e:
        C.fail(f"--peers: {e}")
    smp = C.sampler_config(**pick(options, SAMPLER))
    out = options["out"]
    C.validate_outputs(out=out, out_dir=out_dir)
    policy = C.stop_policy(model=kind, risk=options["risk"], delta=options["delta"])
    with C.guard():
        check_options(**pick(options, WHERE))
    rs = C.read_options(runs, options)
    C.check_out_names(out_dir, [*OUTPUT_FILES, "draws.npz", "stop_policy.csv"])
    ctx = C.read_context(options)
    C.status(f"backtest: {len(rs)} run(s) x {len(cut)} cutoff(s), peers {peers}; ledger {out_dir / 'cases.csv'}")
    slow = slow_peer_note(peers)
    if slow:
        C.status(slow)
    with C.guard(), make_executor(**pick(options, WHERE)) as ex:
        res = _run(rs, out_dir, cutoffs=cut, kind=kind, context=ctx, peers=peers, sampler=smp, resume=resume,
                   seed=options["seed"], executor=ex, save_draws=STOP_DRAWS if policy is not None else 0)  # fmt: skip
    _show_and_write(res, rs, out=out, out_dir=out_dir)
    if policy is not None:
        _stop_characteristic(res, rs, policy, out_dir)


#: the peers that sample by MCMC: most of a backtest's time. Measured on the shipped example run
#: (bayesgrpo/resources/examples, default cutoffs 0.1-0.5, 2 shared cores, models compiled): domhan 4.2-7.7 s
#: per case (22.7 s of 4 cases), last_value 0.01 s, exponential 0.13 s, scalerl 0.25 s, pow3 0.28 s per case,
#: bayesgrpo itself 0.5-2.3 s; on a new machine domhan compiles once first (minutes; then the disk cache)
SLOW_PEERS = ("domhan", "domhan_fast")


def slow_peer_note(peers: str) -> str | None:
    """One status line naming the MCMC peers of ``--peers`` (:data:`SLOW_PEERS`) and the ``--peers`` that skips
    them (the other peers, in the spelling of ``--help``), or None when there is none."""
    from bayesgrpo.evaluation.methods import resolve_methods
    from bayesgrpo.evaluation.peers import PEER_ALIASES

    names = resolve_methods(peers)
    slow = [n for n in names if PEER_ALIASES.get(n, n) in SLOW_PEERS]
    if not slow:
        return None
    alias = {v: k for k, v in reversed(PEER_ALIASES.items())}  # sat_exp -> exponential, as --help spells them
    rest = list(dict.fromkeys(alias.get(n, n) for n in names if n not in slow))
    skip = f"--peers {','.join(rest)}" if rest else "--peers none"
    return (f"backtest: peer {' and '.join(slow)} takes most of the time (MCMC over 11 curve families: seconds per "
            f"case, the other peers under 0.3 s; a compile of a few minutes the first time on a machine); "
            f"skip it with {skip}")  # fmt: skip


#: final-reward draws kept per bayesgrpo case for the stop policy's probabilities (OUT_DIR/draws.npz)
STOP_DRAWS = 400


def _stop_characteristic(res, runs, policy, out_dir: Path) -> None:
    """The stop policy run through each run's cutoffs in order, against the oracle, printed and written to
    ``out_dir/stop_policy.csv`` (per run) -- :func:`bayesgrpo.evaluation.stop_rule.policy_characteristic`."""
    import numpy as np

    from bayesgrpo.evaluation.stop_rule import policy_characteristic
    from bayesgrpo.io.output import write_table

    path = out_dir / "draws.npz"
    if not path.exists():
        return
    with np.load(path) as z:
        draws = {k: z[k] for k in z.files}
    with C.guard():
        stops, summ = policy_characteristic(res.cases, runs, policy, draws=draws)
    if summ.empty:
        C.status("stop policy: no bayesgrpo case to judge it on")
        return
    show = summ[["weighting", "method", "runs", "stopped", "steps_saved", "bad_stops", "reward_lost"]]
    C.print_table(show, title=f"stop policy on these runs at the cutoffs in order ({policy.describe()}); "
                              "bad stop = lost more than 0.1 of the run's range; the oracle knows the outcome",
                  floatfmt="{:.3f}")  # fmt: skip
    n_stops = int(stops.loc[stops["method"] == "bayesgrpo", "stopped"].astype(bool).sum())
    C.status(f"stop policy: on these runs it stopped {n_stops} time(s) (bad_stops above is the share of those); "
             f"{policy.measured}")  # fmt: skip
    with C.guard():
        write_table(stops, out_dir / "stop_policy.csv")
    C.status(f"wrote {out_dir / 'stop_policy.csv'}")


def _cutoffs(text: str) -> tuple[float, ...]:
    """``--cutoffs``: a comma list of observed fractions, each in (0, 1) (else one line, exit 2)."""
    from bayesgrpo.plan import PlanOptions

    try:
        cut = tuple(float(c) for c in text.split(",") if c.strip())
    except ValueError:
        C.fail(f"--cutoffs must be a comma list of numbers, got {text!r}")
    if not cut:
        C.fail("--cutoffs: give at least one cutoff, e.g. 0.1,0.3")
    for c in cut:  # a cutoff is the plan's until_fraction: the same bounds
        C.check_field(PlanOptions, "until_fraction", c, option="--cutoffs: every cutoff")
    return cut


def _show_and_write(res, rs, *, out, out_dir) -> None:
    from bayesgrpo.io.output import write_table

    if len(res.cases):
        from bayesgrpo.plots.backtest import plot_all

        with C.guard():
            plot_all(res.cases, out_dir, runs=rs, example_runs=res.example_runs)
    s = res.summary
    if s.empty:
        C.status("no case could be scored")
        raise typer.Exit(C.EXIT_FAILED)
    show = s[["cutoff", "method", "median_nae", "mean_ncrps", "cover50", "cover80", "cover90", "mean_nwidth80",
              "sec_per_forecast", "failure_rate", "n_cases"]]  # fmt: skip
    C.print_table(show, title="backtest per cutoff x method (errors, CRPS and widths divided by each run's reward range)",
                  floatfmt="{:.3f}")  # fmt: skip
    if len(res.skipped):
        C.status(
            f"skipped {len(res.skipped)} run x cutoff (too few points before the cutoff); see {out_dir / 'skipped.csv'}"
        )
    if out is not None:
        with C.guard():
            write_table(s, out)
        C.status(f"wrote {out}")
    C.status(f"wrote {out_dir}/cases.csv, summary.md, summary.json and figures")
