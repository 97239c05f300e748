"""Forecasting verbs: ``Forecaster(...).fit(runs) -> FittedForecast`` -> table / paths / plot / save."""

from bayesgrpo.forecast.forecaster import TABLE_COLUMNS, FittedForecast, ForecastConfig, Forecaster, SamplerConfig

__all__ = ["Forecaster", "FittedForecast", "ForecastConfig", "SamplerConfig", "TABLE_COLUMNS"]
