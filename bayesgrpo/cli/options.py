"""Option types shared by every verb: the same concept is the same option with the same default.

Grammar (every verb that reads runs)::

    bayesgrpo VERB RUNS... [--meta FILE] [--format NAME] [--reward-key KEY] [--run ID]... [--exclude ID]...
                           [--horizon STEPS] [--until-step N | --until-fraction F]
                           [--kind KIND] [--draws N] [--tune N] [--chains N] [--seed N] [--no-retry]
                           [--workers N | --scheduler ADDRESS]
                           [--out FILE.csv|.json|.parquet] [--out-dir DIR] [--strict]

Tables go to stdout, progress and status lines to stderr. Values are validated before anything is
read or sampled (:func:`validate_common`); a bad value is one line naming the option, exit code 2.
"""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Annotated, Any

import typer

from bayesgrpo.conventions import DEFAULT_DELTA, DEFAULT_FINAL_WINDOW, DEFAULT_KIND, DEFAULT_RISK
from bayesgrpo.inference.sampling import RETRY_MIN_DRAWS, RETRY_R_HAT, SamplerConfig
from bayesgrpo.physics.stopping import DEFAULT_STOP_FRACTION

_S = SamplerConfig()

RunsArg = Annotated[
    list[Path],
    typer.Argument(help="log file(s) or folder(s) (any supported format; see `bayesgrpo formats`)", show_default=False),
]
MetaOpt = Annotated[
    Path | None,
    typer.Option("--meta", help="metadata CSV/JSON: run_id + model, group_size, beta1, max_steps, reward_min/max, ..."),
]
FormatOpt = Annotated[
    str | None, typer.Option("--format", help="log format (default: detected); see `bayesgrpo formats`")
]
RewardKeyOpt = Annotated[
    str | None,
    typer.Option("--reward-key", help="the logged metric to use as the reward (default: detected, e.g. 'reward')"),
]
RunOpt = Annotated[list[str] | None, typer.Option("--run", help="only these run ids (repeatable)")]
ExcludeOpt = Annotated[list[str] | None, typer.Option("--exclude", help="leave out these run ids (repeatable)")]
HorizonOpt = Annotated[
    int | None,
    typer.Option(
        "--horizon",
        help="step to forecast to (default: metadata max_steps; for a truncated log at least its last step)",
    ),
]
UntilStepOpt = Annotated[
    int | None, typer.Option("--until-step", help="use only steps <= N (what would the forecast have said then?)")
]
UntilFractionOpt = Annotated[
    float | None, typer.Option("--until-fraction", help="use only the first fraction (0, 1) of each run's logged steps")
]
KindOpt = Annotated[str, typer.Option("--kind", help="model kind (see `bayesgrpo models`)")]
#: the old name of --kind (the word "model" is the LLM, metadata ``model``): kept, hidden, with a warning
ModelAliasOpt = Annotated[str | None, typer.Option("--model", hidden=True, help="deprecated: use --kind")]
DrawsOpt = Annotated[int, typer.Option("--draws", help="posterior draws per chain")]
TuneOpt = Annotated[int, typer.Option("--tune", help="tuning steps per chain")]
ChainsOpt = Annotated[int, typer.Option("--chains", help="MCMC chains")]
SeedOpt = Annotated[int, typer.Option("--seed", help="random seed (same seed, same numbers)")]
RetryOpt = Annotated[
    bool,
    typer.Option(
        "--retry/--no-retry",
        help=f"sample a run again, once, when its chains disagree (r_hat > {RETRY_R_HAT:g}) or diverged (from "
        f"{RETRY_MIN_DRAWS} draws per chain)",
    ),
]
OutOpt = Annotated[Path | None, typer.Option("--out", help="write the main table (.csv, .json or .parquet)")]
OutDirOpt = Annotated[Path | None, typer.Option("--out-dir", help="folder for figures and reports")]
#: the same option of a verb that always writes a folder (it has a default)
FolderOpt = Annotated[Path, typer.Option("--out-dir", help="folder for figures and reports")]
StrictOpt = Annotated[
    bool, typer.Option("--strict", help="any problem with one run is fatal (default: an error row, the others go on)")
]
WorkersOpt = Annotated[
    int | None,
    typer.Option(
        "--workers",
        help="forecast on N local worker processes (an embedded Dask cluster; needs bayesgrpo[dask]); "
        "default: this process",
    ),
]
SchedulerOpt = Annotated[
    str | None,
    typer.Option(
        "--scheduler",
        help="forecast on an existing Dask cluster: its scheduler address, e.g. tcp://host:8786 "
        "(needs bayesgrpo[dask])",
    ),
]
ContextOpt = Annotated[
    list[Path] | None, typer.Option("--context", help="complete runs of related models to pool with (hierarchical)")
]
ContextMetaOpt = Annotated[Path | None, typer.Option("--context-meta", help="metadata of the --context runs")]
RewardRangeOpt = Annotated[
    str | None,
    typer.Option(
        "--reward-range",
        help="the reward's bounds 'LO,HI' (e.g. 0,1 for a pass rate) for runs without reward_min/reward_max metadata",
    ),
]
ChannelsOpt = Annotated[
    str | None,
    typer.Option(
        "--channels",
        help="observe the spread with the reward (--kind degeneracy, logistic or auto): 'reward_std', "
        "'frac_reward_zero_std', both comma-separated, or 'spread' for both; runs that log none forecast as without",
    ),
]
FinalWindowOpt = Annotated[
    float,
    typer.Option(
        "--final-window", help="final reward = mean logged reward over this last fraction of the run, in (0, 1]"
    ),
]
StopFractionOpt = Annotated[
    float,
    typer.Option(
        "--stop-fraction", help="stop step = when the mean trajectory stays within (1 - this) of its gain, in (0, 1)"
    ),
]
DeltaOpt = Annotated[
    float,
    typer.Option(
        "--delta",
        help="p_gain = P(final reward >= current level + delta x the run's scale); the stop advice's gain (measured: 0.02, 0.05, 0.1)",
    ),
]
RiskOpt = Annotated[
    float,
    typer.Option(
        "--risk",
        help="stop advice: at most this share of its stops may lose more than 0.1 of the run's range (measured: 0.05-0.3)",
    ),
]

DEFAULT_DRAWS = _S.draws
DEFAULT_TUNE = _S.tune
DEFAULT_CHAINS = _S.chains
DEFAULT_RETRY = _S.retry

# ------------------------------------------------------------------------------ the shared options
#: every option several verbs share: parameter name -> (its annotated type, its default). A verb takes
#: them with :func:`with_options` (one declaration here, not one per verb).
OPTIONS: dict[str, tuple[Any, Any]] = {
    "meta": (MetaOpt, None), "fmt": (FormatOpt, None), "reward_key": (RewardKeyOpt, None), "run": (RunOpt, None),
    "exclude": (ExcludeOpt, None),
    "horizon": (HorizonOpt, None), "until_step": (UntilStepOpt, None), "until_fraction": (UntilFractionOpt, None),
    "context": (ContextOpt, None), "context_meta": (ContextMetaOpt, None),
    "kind": (KindOpt, DEFAULT_KIND), "model": (ModelAliasOpt, None), "reward_range": (RewardRangeOpt, None),
    "out": (OutOpt, None), "out_dir": (OutDirOpt, None),
    "seed": (SeedOpt, 0), "final_window": (FinalWindowOpt, DEFAULT_FINAL_WINDOW),
    "stop_fraction": (StopFractionOpt, DEFAULT_STOP_FRACTION), "draws": (DrawsOpt, DEFAULT_DRAWS),
    "tune": (TuneOpt, DEFAULT_TUNE), "chains": (ChainsOpt, DEFAULT_CHAINS), "retry": (RetryOpt, DEFAULT_RETRY),
    "strict": (StrictOpt, False),
    "workers": (WorkersOpt, None), "scheduler": (SchedulerOpt, None), "channels": (ChannelsOpt, None),
    "delta": (DeltaOpt, DEFAULT_DELTA), "risk": (RiskOpt, DEFAULT_RISK),
}  # fmt: skip
#: groups of them, in the order ``--help`` lists them
READ = ("meta", "fmt", "reward_key", "run", "exclude")
PLAN = ("horizon", "until_step", "until_fraction")
CONTEXT = ("context", "context_meta")
KIND = ("kind", "model")
OUTPUTS = ("out", "out_dir")
#: the NUTS settings every sampling verb takes; a forecast's verbs also take ``retry`` (the forecaster's)
NUTS = ("seed", "draws", "tune", "chains")
SAMPLER = (*NUTS, "retry")
DEFINITIONS = ("final_window", "stop_fraction")
WHERE = ("workers", "scheduler")
#: the stop advice of a forecast table (p_gain's delta, the policy's risk)
ADVICE = ("delta", "risk")
#: what ``forecast`` takes (and ``report``, but for its own --out)
FORECAST = (*READ, *PLAN, *CONTEXT, *KIND, "reward_range", "channels", *OUTPUTS, "seed", *DEFINITIONS, "draws",
            "tune", "chains", "retry", "strict", *WHERE, *ADVICE)  # fmt: skip


def with_options(*names: str):
    """Decorator: the command also takes the shared options ``names`` (declared in :data:`OPTIONS`), after
    its own parameters, in its ``**options`` (typer reads the combined signature).

    >>> @with_options("draws", "tune")
    ... def cmd(runs: RunsArg, **options): ...
    >>> list(inspect.signature(cmd).parameters)
    ['runs', 'draws', 'tune']
    """

    def wrap(fn):
        own = inspect.signature(fn, eval_str=True)
        params = [p for p in own.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        taken = {p.name for p in params}
        extra = [n for n in names if n not in taken]  # a verb's own declaration of an option wins
        params += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=OPTIONS[n][0],
                                     default=OPTIONS[n][1]) for n in extra]  # fmt: skip

        @functools.wraps(fn)
        def command(*args, **kwargs):
            return fn(*args, **kwargs)

        command.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]  # read by typer
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command

    return wrap


def pick(options: dict, names) -> dict:
    """The entries ``names`` of a verb's ``**options`` (e.g. ``SAMPLER`` for ``sampler_config``)."""
    return {n: options[n] for n in names}
