"""Forecasting: ``Forecaster(kind).fit(runs) -> FittedForecast`` -> table / paths / predict / save."""

from bayesgrpo.forecast.config import TABLE_COLUMNS, ForecastConfig
from bayesgrpo.forecast.fitted import FittedForecast
from bayesgrpo.forecast.forecaster import Forecaster, SamplerConfig

__all__ = ["Forecaster", "FittedForecast", "ForecastConfig", "SamplerConfig", "TABLE_COLUMNS"]
