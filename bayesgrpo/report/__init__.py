"""One self-contained HTML report of many runs: table, overview, per-run details, comparison, provenance.

:func:`write_report` is the whole API (also ``bayesgrpo.write_report``); ``bayesgrpo report`` is the CLI
verb. Modules: :mod:`~bayesgrpo.report.data` (what the page shows, assembled from a forecast),
:mod:`~bayesgrpo.report.figures` and :mod:`~bayesgrpo.report.svg` (compact SVG figures),
:mod:`~bayesgrpo.report.html` and :mod:`~bayesgrpo.report.assets` (the page, its style and script).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["write_report", "REPORT_SUFFIXES"]

#: output suffixes accepted for a report
REPORT_SUFFIXES = {".html": "html", ".htm": "html"}


def write_report(
    result,
    path,
    *,
    target: float | None = None,
    cost_per_step: float | None = None,
    value_per_reward: float | None = None,
    by=(),
    ceiling: float | None = None,
    full=None,
    comparison=None,
    title: str | None = None,
    refresh: int | None = None,
    command: str | None = None,
    data_files=None,
    costs: dict | None = None,
) -> Path:
    """Write ONE self-contained HTML report of a forecast (atomically) and return its path.

    This is the Python form of ``bayesgrpo report`` and of issue 21's ``fit.report("report.html")``:
    ``bayesgrpo.write_report(fit, "report.html")``. It is a function of the report layer rather than a
    method of :class:`~bayesgrpo.forecast.FittedForecast` because the forecast layer never imports the
    layers above it (the report reads decisions, diagnostics and the comparison).

    The page opens offline (style, script and figures inline): a sortable, filterable table of every
    run (error rows too), small multiples of every curve with its fan, per-run fan chart, budget curve
    and diagnostics, a comparison by ``by`` groups, the provenance. Every run id and data text is escaped.

    Parameters
    ----------
    result : BatchResult or FittedForecast
        What :func:`bayesgrpo.forecast.batch.forecast_batch` returns (its error rows are shown), or a fit.
    path : str or Path
        The ``.html`` file to write (its folder is created; a failure leaves no partial file).
    target : float, optional
        Adds P(final reward >= target) and the budget's P(target reached) curve.
    cost_per_step, value_per_reward : float, optional
        The budget's utility (:func:`bayesgrpo.decisions.budget.budget_table`); without a cost the
        recommended stop is the forecast's stop step.
    by : sequence of str
        Metadata columns to compare the runs' forecast final rewards by (e.g. ``("family", "group_size")``).
    ceiling : float, optional
        Verifiable reward ceiling for the failure diagnostics of runs without ``reward_max`` metadata.
    full : RunSet, optional
        The complete runs of a truncated fit (a ``FittedForecast`` input), drawn as truth.
    comparison : CompareResult, optional
        A :func:`bayesgrpo.compare.compare_runs` result to include (its contrasts and caveats).
    title, refresh, command : optional
        Page title; seconds after which the page reloads itself (live pages); the command line to record.
    data_files : sequence of paths, optional
        Files (or folders) to list with their SHA-256 (default: the runs' ``source_file`` metadata).
    costs : dict, optional
        More cost keywords of :func:`~bayesgrpo.decisions.budget.budget_table` (``cost_per_step``,
        ``cost_per_hour`` or ``cost_per_gpu_hour`` with ``gpus``, ``steps_per_hour`` -- a number, or run id ->
        number --, ``currency``): each run's budget then says what stopping saves in hours and money with its
        90% interval. A ``cost_per_step`` here takes the place of the argument.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    OutputError
        ``path`` is not an ``.html`` file in a writable folder.
    OptionError
        A ``by`` column is not in the runs' metadata.

    Examples
    --------
    >>> res = forecast_batch(runs, forecaster=bayesgrpo.Forecaster(), until_fraction=0.3)  # doctest: +SKIP
    >>> bayesgrpo.write_report(res, "report.html", target=0.8, by=["group_size"])   # doctest: +SKIP
    """
    from bayesgrpo.io.output import atomic_path, check_output_file
    from bayesgrpo.report.data import assemble
    from bayesgrpo.report.html import render

    p = check_output_file(path, option="report", suffixes=REPORT_SUFFIXES)
    costs = {"cost_per_step": cost_per_step, **(costs or {})}
    data = assemble(result, target=target, value_per_reward=value_per_reward, by=by, ceiling=ceiling, full=full,
                    comparison=comparison, title=title, command=command, data_files=data_files, costs=costs)  # fmt: skip
    page = render(data, refresh=refresh)
    with atomic_path(p) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return p
