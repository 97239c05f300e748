"""Backtest reports: summary CSV / JSON / Markdown tables (figures: :mod:`bayesgrpo.plots.backtest`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.evaluation.methods import BAYES, BAYES_CTX
from bayesgrpo.io.output import write_table, write_text

__all__ = ["write_outputs", "markdown_table", "TABLE_COLS", "TABLE_HEAD"]


_FMT = {
    "median_nae": "{:.3f}",
    "mean_ncrps": "{:.3f}",
    "cover50": "{:.0%}",
    "cover80": "{:.0%}",
    "cover90": "{:.0%}",
    "mean_nwidth80": "{:.3f}",
    "sec_per_forecast": "{:.2f}",
    "failure_rate": "{:.0%}",
}
TABLE_COLS = [
    "median_nae",
    "mean_ncrps",
    "cover80",
    "cover50",
    "cover90",
    "mean_nwidth80",
    "sec_per_forecast",
    "failure_rate",
]
TABLE_HEAD = ["median nAE", "mean nCRPS", "cov80", "cov50", "cov90", "width80 (norm.)", "s / forecast", "failures"]


def markdown_table(summary: pd.DataFrame, *, extra_cols=("n_ok",), cutoffs=None) -> str:
    """Per-cutoff markdown table (one row per cutoff x method) of :data:`TABLE_COLS`."""
    if summary is None or summary.empty:
        return "_no cases_\n"
    cols = [c for c in TABLE_COLS if c in summary.columns]
    ex = [c for c in extra_cols if c in summary.columns]
    head = ["cutoff", "method", *[TABLE_HEAD[TABLE_COLS.index(c)] for c in cols], *ex]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, r in summary.sort_values(["cutoff", "method"], key=_method_sort).iterrows():
        if cutoffs is not None and round(r["cutoff"], 6) not in cutoffs:
            continue
        cells = [f"{r['cutoff']:g}", f"**{r['method']}**" if str(r["method"]).startswith(BAYES) else str(r["method"])]
        for c in cols:
            v = r[c]
            cells.append("–" if not np.isfinite(v) else _FMT.get(c, "{:.3g}").format(v))
        for c in ex:
            cells.append(str(int(r[c])) if np.isfinite(r[c]) else "–")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _method_sort(s: pd.Series):
    if s.name == "method":
        order = {BAYES: 0, BAYES_CTX: 1}
        return s.map(lambda m: (order.get(m, 2), m)).map(str)
    return s


def write_outputs(res, *, title: str = "Backtest") -> None:
    """``skipped.csv``, ``summary.csv``, ``summary.json`` and ``summary.md`` of a
    :class:`~bayesgrpo.evaluation.backtest.BacktestResult` in its ``out_dir`` (each written atomically;
    figures: :func:`bayesgrpo.plots.backtest.plot_all`)."""
    out = res.out_dir
    write_table(res.skipped, out / "skipped.csv")
    write_table(res.summary, out / "summary.csv")
    js = {
        "n_cases": int(len(res.cases)),
        "n_skipped": int(len(res.skipped)),
        "skipped_reasons": res.skipped.groupby("cutoff").size().rename(lambda c: f"{c:g}").to_dict()
        if len(res.skipped)
        else {},
        "summary": res.summary.to_dict("records"),
        "summary_weighted": res.summary_weighted.to_dict("records"),
        "summary_by_source": res.summary_by_source.to_dict("records"),
    }
    write_text(out / "summary.json", json.dumps(js, indent=1, default=_json_default))
    md = [
        f"# {title}\n",
        f"{len(res.cases)} scored cases (run x cutoff x method), {len(res.skipped)} skipped run x cutoff.\n",
        "## Per cutoff x method (every case counts equally)\n",
        markdown_table(res.summary),
        "\n## Source-weighted (each source counts equally)\n",
        markdown_table(res.summary_weighted, extra_cols=("n_sources",)),
    ]
    if len(res.skipped):
        md.append("\n## Skipped\n")
        for (c, reason), g in res.skipped.groupby(["cutoff", "reason"]):
            md.append(f"- cutoff {c:g}: {len(g)} run(s) — {reason}\n")
    fails = res.cases[~res.cases["ok"].astype(bool)]
    if len(fails):
        md.append("\n## Failures (first message per method)\n")
        for m, g in fails.groupby("method"):
            md.append(f"- {m}: {len(g)} case(s); e.g. `{str(g['message'].iloc[0])[:200]}`\n")
    write_text(out / "summary.md", "".join(md))


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, Path):
        return str(o)
    return str(o)
