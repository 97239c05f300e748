"""bayesgrpo: calibrated Bayesian forecasts of GRPO reward curves from the physics of training.

Public API (imported lazily so that ``import bayesgrpo`` and the CLI start fast)::

    from bayesgrpo import read_runs, RunSet, Forecaster, FittedForecast, SamplerConfig, write_report

``write_report(fit_or_batch, "report.html")`` writes one self-contained HTML report (``bayesgrpo.report``).
"""

from __future__ import annotations

import logging

from bayesgrpo._version import __version__

logging.getLogger("bayesgrpo").addHandler(logging.NullHandler())

_LAZY = {
    "RunSet": ("bayesgrpo.schema", "RunSet"),
    "read_runs": ("bayesgrpo.io", "read_runs"),
    "read_many": ("bayesgrpo.io", "read_many"),
    "Forecaster": ("bayesgrpo.forecast", "Forecaster"),
    "FittedForecast": ("bayesgrpo.forecast", "FittedForecast"),
    "SamplerConfig": ("bayesgrpo.forecast", "SamplerConfig"),
    "PopulationPrior": ("bayesgrpo.models.prior", "PopulationPrior"),
    "write_report": ("bayesgrpo.report", "write_report"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(f"module 'bayesgrpo' has no attribute {name!r}")
