"""Exception and warning types of bayesgrpo.

Every message says what was wrong, where (file, run, row or line) and what to do.
"""

from __future__ import annotations

__all__ = [
    "BayesGRPOError",
    "DataValidationError",
    "LogFormatError",
    "ForecastError",
    "DataWarning",
    "SamplerWarning",
    "PriorError",
    "ArtefactError",
    "OutputError",
    "OptionError",
    "warning_type",
    "Interrupted",
]


class BayesGRPOError(Exception):
    """Base class of every error raised on purpose by bayesgrpo."""


class DataValidationError(BayesGRPOError, ValueError):
    """Run data violate the schema (missing columns, non-numeric or non-finite values, ...)."""


class LogFormatError(BayesGRPOError, ValueError):
    """A log file cannot be read in the requested or detected format.

    The message names the file and the line or record, and says what was expected.
    """


class ForecastError(BayesGRPOError, ValueError):
    """A forecast cannot be made for a run (too few points, no horizon, ...)."""


class PriorError(BayesGRPOError, RuntimeError):
    """The population prior cannot be loaded (missing package data, invalid file)."""


class ArtefactError(BayesGRPOError, ValueError):
    """A saved forecast cannot be loaded (unknown schema version, not a bayesgrpo file, ...)."""


class OutputError(BayesGRPOError, OSError):
    """An output path cannot be written (unknown table format, a file where a folder is needed, ...)."""


class OptionError(BayesGRPOError, ValueError):
    """A command-line option (or keyword argument) has a value outside what it allows."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) stopped the work; ``partial`` holds what had finished (None: nothing).

    A :class:`KeyboardInterrupt`, so code that does not know it still stops; the layers that do
    pass on what finished (a batch keeps its finished runs, a backtest its finished cases).
    """

    def __init__(self, message: str = "interrupted (Ctrl-C)", *, partial=None):
        super().__init__(message)
        self.partial = partial


class DataWarning(UserWarning):
    """Input data were usable but something was repaired or dropped (named in the message)."""


class SamplerWarning(UserWarning):
    """Sampler health is poor (r_hat, ESS or divergences)."""


def warning_type(name: str) -> type[Warning]:
    """The warning class named ``name`` (one of this module's, or a builtin one; else ``UserWarning``):
    how a warning caught in another process (a Dask worker) is raised again here under its own type."""
    import builtins

    cls = globals().get(name) or getattr(builtins, name, None)
    return cls if isinstance(cls, type) and issubclass(cls, Warning) else UserWarning
