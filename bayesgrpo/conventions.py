"""Reporting conventions, defined once for every command, table and plot.

Intervals: every table and figure reports the central intervals :data:`INTERVALS` (50/80/90%), as
the quantiles :data:`QUANTILES` (three-number summaries: :data:`SUMMARY_QUANTILES`); :data:`HEADLINE`
is the one printed in one-line summaries and the one the calibration layer is fitted for. ArviZ's
default (89% ETI) is never used: wherever ArviZ summarises, :data:`CI_PROB` is passed explicitly.
"""

from __future__ import annotations

import hashlib
import json

__all__ = [
    "AUTO_KIND", "DEFAULT_KIND", "DEFAULT_RISK", "DEFAULT_DELTA", "INTERVALS", "QUANTILES", "SUMMARY_QUANTILES", "HEADLINE", "CI_PROB", "DEFAULT_FINAL_WINDOW",
    "quantile_column", "interval_bounds", "interval_label", "content_identity",
]  # fmt: skip

#: the model "kind" whose shape is chosen per run among the kinds (:mod:`bayesgrpo.forecast.shape`)
AUTO_KIND = "auto"
#: the model kind of every front end unless asked otherwise (the one definition): each run's shape chosen
#: among the oscillator, the stationary and the degeneracy kinds by evidence, with the between-source outlook
#: (chosen on the yardstick's selection sources; on its locked test its 80% intervals cover 78 / 83 / 91 / 81% at
#: 10 / 20 / 30 / 50% of a run, where the oscillator alone covered 69 / 76 / 94 / 86%: bench/results/yardstick.md)
DEFAULT_KIND = AUTO_KIND
#: p_gain's default margin: P(final >= current level + delta x the run's scale) (every front end)
DEFAULT_DELTA = 0.05
#: the stop advice's default risk (the share of its stops allowed to be bad) of every front end
DEFAULT_RISK = 0.15

#: central interval masses reported everywhere (tables, fan charts, backtests, comparisons)
INTERVALS: tuple[float, ...] = (0.5, 0.8, 0.9)
#: the interval printed in one-line summaries
HEADLINE: float = 0.8
#: the interval of posterior summaries (contrasts, budgets): the widest of :data:`INTERVALS`
CI_PROB: float = max(INTERVALS)
#: final reward = mean logged reward over the last 10% of the run
DEFAULT_FINAL_WINDOW: float = 0.1


def interval_bounds(mass: float) -> tuple[float, float]:
    """Quantile levels of a central interval: ``0.8 -> (0.1, 0.9)``."""
    return round((1.0 - mass) / 2.0, 10), round((1.0 + mass) / 2.0, 10)


#: every quantile level reported (the bounds of :data:`INTERVALS` and the median), ascending
QUANTILES: tuple[float, ...] = tuple(sorted({q for m in INTERVALS for q in interval_bounds(m)} | {0.5}))
#: the levels of a three-number summary (the :data:`CI_PROB` interval and the median): the forecast
#: table's stop step and plateau
SUMMARY_QUANTILES: tuple[float, float, float] = (interval_bounds(CI_PROB)[0], 0.5, interval_bounds(CI_PROB)[1])


def quantile_column(prefix: str, q: float) -> str:
    """Column name of a quantile: ``quantile_column("final", 0.05) -> "final_q05"``."""
    return f"{prefix}_q{round(q * 100):02d}"


def interval_label(mass: float) -> str:
    """``0.8 -> "80%"``."""
    return f"{round(mass * 100):d}%"


def content_identity(name: str, content: dict) -> str:
    """``name@sha256:<12 hex>`` of a shipped object's content (its provenance left out): the identity a
    calibration layer, a decision map or an outlook records in a saved forecast."""
    return f"{name}@sha256:{hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:12]}"
