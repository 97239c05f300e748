"""Package data, read with :mod:`importlib.resources` so that an installed wheel and the source tree
use the same files: the population prior (``population_prior.json``) and the shipped example runs
(``examples/example-grpo-run/trainer_state.json`` + ``examples/meta.csv``, a testbed GRPO run written
as a TRL ``trainer_state.json``; ``examples/verl-slow-start/grpo.jsonl``, a testbed run whose 0/1
reward stays at its floor for ~80 steps, written as verl's file logger writes it; regenerate both with
``python scripts/make_example.py``)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["resource_path", "example_run", "example_meta"]


def resource_path(*parts: str) -> Path:
    """Filesystem path of a packaged resource (the package is installed unzipped)."""
    return Path(str(files("bayesgrpo.resources").joinpath(*parts)))


def example_run() -> Path:
    """The shipped example run (``trainer_state.json`` of a 500-step testbed GRPO run)."""
    return resource_path("examples", "example-grpo-run", "trainer_state.json")


def example_meta() -> Path:
    """Metadata of the shipped example run."""
    return resource_path("examples", "meta.csv")
