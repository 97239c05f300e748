"""Every figure of the package. Each function returns a ``matplotlib.figure.Figure`` and never switches
the matplotlib backend (the CLI renders with Agg by building figures with ``matplotlib.figure.Figure``)."""

from bayesgrpo.plots.fan import fan_chart

__all__ = ["fan_chart"]
