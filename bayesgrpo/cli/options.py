"""Option types shared by every verb: the same concept is the same option with the same default.

Grammar (every verb that reads runs)::

    bayesgrpo VERB RUNS... [--meta FILE] [--format NAME] [--reward-key KEY] [--run ID]... [--exclude ID]...
                           [--horizon STEPS] [--until-step N | --until-fraction F]
                           [--model KIND] [--draws N] [--tune N] [--chains N] [--seed N]
                           [--workers N | --scheduler ADDRESS]
                           [--out FILE.csv|.json|.parquet] [--out-dir DIR] [--strict]

Tables go to stdout, progress and status lines to stderr. Values are validated before anything is
read or sampled (:func:`validate_common`); a bad value is one line naming the option, exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bayesgrpo.inference.sampling import SamplerConfig

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
ModelOpt = Annotated[str, typer.Option("--model", help="model kind (see `bayesgrpo models`)")]
DrawsOpt = Annotated[int, typer.Option("--draws", help="posterior draws per chain")]
TuneOpt = Annotated[int, typer.Option("--tune", help="tuning steps per chain")]
ChainsOpt = Annotated[int, typer.Option("--chains", help="MCMC chains")]
SeedOpt = Annotated[int, typer.Option("--seed", help="random seed (same seed, same numbers)")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="write the main table (.csv, .json or .parquet)")]
OutDirOpt = Annotated[Path | None, typer.Option("--out-dir", help="folder for figures and reports")]
StrictOpt = Annotated[
    bool, typer.Option("--strict", help="any problem with one run is fatal (default: an error row, the others go on)")
]
WorkersOpt = Annotated[
    int | None,
    typer.Option(
        "--workers",
        help="forecast on N local worker processes (an embedded Dask cluster; needs bayesgrpo[dask]); default: this process",
    ),
]
SchedulerOpt = Annotated[
    str | None,
    typer.Option(
        "--scheduler",
        help="forecast on an existing Dask cluster: its scheduler address, e.g. tcp://host:8786 (needs bayesgrpo[dask])",
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

DEFAULT_MODEL = "oscillator"
DEFAULT_DRAWS = _S.draws
DEFAULT_TUNE = _S.tune
DEFAULT_CHAINS = _S.chains
DEFAULT_FINAL_WINDOW = 0.1
DEFAULT_STOP_FRACTION = 0.95
