"""Render a :class:`~bayesgrpo.report.data.ReportData` as ONE self-contained HTML page.

Every text that comes from data (run ids, metadata levels, evidence, error messages, file names) goes
through :func:`html.escape` (``quote=True``), in text and in attributes (:func:`e`, :func:`tag`); the
one JSON block inside ``<script type="application/json">`` is written by :func:`script_json`, which
escapes ``<``, ``>`` and ``&`` as ``\\u003c`` etc., so no data can close the script element. Anchors
are ``run-N`` (the row number), never derived from a run id. Figures are SVG documents inside
``<img>`` elements (:mod:`bayesgrpo.report.figures`): images never run script.
"""

from __future__ import annotations

import html
import json
import math

import numpy as np

from bayesgrpo.conventions import CI_PROB, HEADLINE, INTERVALS, interval_bounds, interval_label, quantile_column
from bayesgrpo.report import figures
from bayesgrpo.report.assets import CSS, JS
from bayesgrpo.report.data import KIND_COLUMN, ReportData, RunReport, stops_now
from bayesgrpo.report.svg import COLORS, data_uri

__all__ = ["render", "script_json", "table_json", "e", "tag", "void"]

_SEV_RANK = {"none": 0, "watch": 1, "warning": 2, "critical": 3}
_H80 = interval_label(HEADLINE)
_CI = interval_label(CI_PROB)
_LO, _HI = (quantile_column("final", q) for q in interval_bounds(HEADLINE))
_DOT = " \u00b7 "


def e(v) -> str:
    """Escaped text of any value (None -> empty)."""
    return "" if v is None else html.escape(str(v), quote=True)


def tag(name: str, content: str = "", **attrs) -> str:
    """``<name attrs>content</name>``; attribute values are escaped (``class_`` -> ``class``, ``_`` -> ``-``),
    None values left out; ``content`` is inserted as given (escape data with :func:`e` first)."""
    a = "".join(f' {k.rstrip("_").replace("_", "-")}="{e(v)}"' for k, v in attrs.items() if v is not None)
    return f"<{name}{a}>{content}</{name}>"


def void(name: str, **attrs) -> str:
    """A void element (``<img ...>``, ``<input ...>``) with escaped attributes, as :func:`tag`."""
    return tag(name, **attrs)[: -len(f"</{name}>")]


def script_json(obj) -> str:
    """JSON safe inside a ``<script>`` element: ``<``, ``>``, ``&`` and the JS line separators escaped."""
    s = json.dumps(obj, allow_nan=False, separators=(",", ":"), default=str)
    for ch, rep in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        s = s.replace(ch, rep)
    return s


def _finite(v) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def _f(v, fmt: str = "{:.3g}") -> str:
    return fmt.format(float(v)) if _finite(v) else ""


def _simple_table(head: list, rows: list, *, num=()) -> str:
    """A plain table in a scrolling wrapper: ``head`` escaped, cells given as HTML; columns ``num`` right-aligned."""
    th = "".join(tag("th", e(h)) for h in head)
    body = "".join(
        "<tr>" + "".join(tag("td", c, class_="num" if i in num else None) for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f'<div class="tablewrap"><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


def _sev(severity: str, text: str | None = None, *, title: str | None = None) -> str:
    return tag("span", e(text or severity), class_=f"sev sev-{severity}", title=title)


# ----------------------------------------------------------------------------- the runs table
def _num_cell(key, text: str, content: str | None = None, *, title: str | None = None) -> str:
    """A numeric cell sorted by ``key`` (empty when not finite), showing ``text`` (or raw ``content``)."""
    dv = f"{float(key):.12g}" if _finite(key) else ""
    return tag("td", content if content is not None else e(text), class_="num", data_t="num", data_v=dv, title=title)


def _stop_text(row: dict) -> tuple[str, float]:
    """The stop step as shown (``>H`` when fewer than half the draws settle by the horizon, ``settled (<=L)`` when
    the median stop step lies before the last observation L) and its sort key."""
    if not _finite(row.get("stop_q50")):
        return "", math.nan
    if not float(row.get("p_stop_before_horizon", 0)) >= 0.5:
        return f">{int(row['horizon'])}", float(row["horizon"]) + 0.5
    seen = float(row.get("observed_until") or math.nan)
    if math.isfinite(seen) and float(row["stop_q50"]) <= seen:  # settled before the cut: not a step in the future
        return f"settled (≤{seen:.0f})", float(row["stop_q50"])
    return f"{float(row['stop_q50']):.0f}", float(row["stop_q50"])


def _flags_html(r: RunReport) -> str:
    if not r.findings:
        return '<span class="muted">not assessed</span>'
    parts = [_sev(f["severity"], f"{f['severity']}: {f['mode'].replace('_', ' ')}", title=f["evidence"])
             for f in r.findings if f["severity"] in ("warning", "critical")]  # fmt: skip
    n_watch = sum(f["severity"] == "watch" for f in r.findings)
    if n_watch:
        parts.append(_sev("watch", f"{n_watch} watch"))
    return "".join(parts) or _sev("none")


def _health_cell(r: RunReport) -> str:
    row = r.row
    if r.status != "ok" or not _finite(row.get("r_hat_max")):
        return "<td></td>"
    detail = f"r_hat {_f(row['r_hat_max'], '{:.3f}')}, ESS {_f(row['ess_min'], '{:.0f}')}"
    detail += f", {int(row['divergences'])} divergences"
    verdict = (  # the CLI table's status word for the same fit (FittedForecast.health_status): ok or warning
        tag("span", "warning", class_="poor", title="; ".join(r.health)) if r.health else '<span class="ok">ok</span>'
    )
    short = tag("span", e(f"r\u0302 {_f(row['r_hat_max'], '{:.3f}')}"), class_="muted", title=detail)
    return _num_cell(row["r_hat_max"], "", f"{verdict} {short}")


def _advice_cells(r: RunReport) -> str:
    a = r.advice
    if a is None:
        return "<td></td><td></td>"
    txt = e(a["text"])
    budget = a["source"] == "budget"  # the policy's cell is the CLI's advice word, as the CLI's table shows it
    if budget and a.get("steps_saved") and a.get("fraction_saved") is not None and not a["text"].startswith("continue"):
        txt += tag("span", f" saves {int(a['steps_saved']):,} steps ({100 * a['fraction_saved']:.0f}%)", class_="muted")
    adv = tag("td", txt, data_t="num", data_v=f"{a['step']:.12g}" if _finite(a.get("step")) else "")
    if not budget and a["text"] != "stop":  # the policy's error rate is that of its stops: nothing to quote here
        err = '<td data-t="num" data-v=""></td>'
    elif a.get("error_rate") is None:
        err = '<td data-t="num" data-v=""><span class="muted">not measured</span></td>'
    else:
        err = _num_cell(a["error_rate"], f"{100 * a['error_rate']:.0f}%")
    return adv + err


def _columns(d: ReportData) -> list:
    cols = ["run", *d.by, "seen / horizon", f"final reward [{_H80}]"]
    if d.target is not None:
        cols.append(f"P(final \u2265 {d.target:g})")
    return [*cols, "stop step", "stop advice", "error rate", "failure flags", "sampler", "status"]


def _seen(row: dict) -> str:
    if not _finite(row.get("observed_until")):
        return ""
    h = f"{int(row['horizon'])}" if _finite(row.get("horizon")) else "?"
    return f"{int(row['observed_until'])} / {h}"


def _data_attrs(r: RunReport) -> dict:
    """What the filter reads: the searchable text (lower case), status, worst severity, "stop now"."""
    words = [r.run_id, *r.groups.values(), r.status, r.error]
    words += [f["mode"] for f in r.findings if f["severity"] != "none"]
    stop_now = stops_now(r.advice)
    return {"data_search": " ".join(words).lower(), "data_status": r.status, "data_sev": _SEV_RANK[r.worst],
            "data_stop": "1" if stop_now else "0"}  # fmt: skip


def _row_html(r: RunReport, d: ReportData) -> str:
    row, ok = r.row, r.status == "ok"
    cells = [tag("td", tag("a", e(r.run_id), href=f"#{r.anchor}"), class_="id", data_v=r.run_id.lower())]
    cells += [tag("td", e(r.groups[c]), data_v=r.groups[c].lower()) for c in d.by]
    cells.append(_num_cell(row.get("observed_until"), _seen(row)))
    fin = f"{_f(row.get('final_q50'))} [{_f(row.get(_LO))}, {_f(row.get(_HI))}]" if ok else ""
    cells.append(_num_cell(row.get("final_q50") if ok else None, fin))
    if d.target is not None:
        cells.append(_num_cell(r.p_target, _f(r.p_target, "{:.2f}")))
    stop, stop_key = _stop_text(row) if ok else ("", math.nan)
    cells.append(_num_cell(stop_key, stop))
    cells.append(_advice_cells(r))
    cells.append(tag("td", _flags_html(r), data_t="num", data_v=_SEV_RANK[r.worst]))
    cells.append(_health_cell(r))
    word = str(row.get("status") or "ok")  # the CLI table's status word (ok, or warning: poor sampler health)
    cells.append(tag("td", e(word) if ok else f"<b>error</b>: {e(r.error)}", data_v=r.status))
    return tag("tr", "".join(cells), class_=None if ok else "error", **_data_attrs(r))


def _table(d: ReportData) -> str:
    heads = "".join(tag("th", tag("button", e(c), type="button"), scope="col", aria_sort="none") for c in _columns(d))
    body = "".join(_row_html(r, d) for r in d.runs)
    return f'<div class="tablewrap"><table id="runs"><thead><tr>{heads}</tr></thead><tbody>{body}</tbody></table></div>'


def _table_section(d: ReportData) -> str:
    m = d.provenance.get("model") or {}
    opts = (("all", "all runs"), ("ok", "forecast"), ("error", "error rows"), ("flagged", "warning or critical"),
            ("stop", "stop now"))  # fmt: skip
    select = tag("select", "".join(tag("option", t, value=v) for v, t in opts), id="status-filter", aria_label="status")
    controls = tag(
        "div",
        void("input", id="filter", type="search", placeholder="filter: run id, group, flag, error", aria_label="filter")
        + select + '<span id="count"></span><button id="csv" type="button">download CSV</button>',
        class_="controls",
    )  # fmt: skip
    note = (
        f"Click a column to sort, a run to see its details. Final reward: the mean logged reward over the last "
        f"{100 * m.get('final_window', 0.1):.0f}% of the run, median [{_H80} interval]. Stop step: median step after "
        f"which the mean trajectory stays within {100 * (1 - m.get('stop_fraction', 0.95)):.0f}% of its gain "
        f"(>H: not settled by the horizon). {d.advice_source} Sampler: {d.health_rule}"
    )
    return f'<section id="table-section"><h2>Runs</h2>{controls}{_table(d)}<p class="note">{e(note)}</p></section>'


# ----------------------------------------------------------------------------- summary and overview
def _link(r: RunReport, extra: str = "") -> str:
    return f'<li><a href="#{r.anchor}">{e(r.run_id)}</a>{extra}</li>'


def _summary(d: ReportData) -> str:
    """At a glance: which runs will end best, which are failing, which to stop now and what that saves."""
    ok = [r for r in d.runs if r.status == "ok" and r.curves is not None]
    errs = [r for r in d.runs if r.status != "ok"]
    best = sorted(ok, key=lambda r: -float(r.row["final_q50"]))[:5]
    failing = sorted([r for r in d.runs if _SEV_RANK[r.worst] >= 2], key=lambda r: -_SEV_RANK[r.worst])
    stop_now = [r for r in ok if stops_now(r.advice)]  # the advice column's own rule (data.stops_now)
    early = [r for r in ok if r.advice and r.advice.get("steps_saved") and r.advice["step"] < int(r.row["horizon"])]
    saved = sum(int(r.advice["steps_saved"]) for r in early)
    left = sum(max(int(r.row["horizon"]) - int(r.row["observed_until"]), 0) for r in early)
    err_list = f"<ul>{''.join(_link(r, ' ' + e(r.error[:90])) for r in errs[:5])}</ul>" if errs else ""
    cards = [
        f"<b>{len(d.runs)}</b>runs: {len(ok)} forecast, {len(errs)} error row(s){err_list}",
        "<b>Will end best</b>forecast final reward (median, each run in its own units)"
        f"<ol>{''.join(_link(r, ' ' + _f(r.row['final_q50'])) for r in best)}</ol>",
        f"<b>{len(failing)}</b>failing (a warning or critical flag)"
        f"<ul>{''.join(_link(r, ' ' + _sev(r.worst)) for r in failing[:6])}</ul>",
        f"<b>{len(stop_now)}</b>to stop now; {len(early)} to stop before the horizon, saving {saved:,} of their "
        f"{left:,} remaining steps<ul>{''.join(_link(r) for r in stop_now[:6])}</ul>",
    ]
    body = "".join(tag("div", c, class_="stat") for c in cards)
    return f'<section id="glance"><h2>At a glance</h2><div class="cards">{body}</div></section>'


def _card(r: RunReport) -> str:
    obs_s, obs = r.channels.get("reward", (np.array([]), np.array([])))
    if r.curves is not None:
        obs_s, obs = r.curves["obs_step"], r.curves["obs"]
    pic = ""
    if len(obs):
        src = data_uri(figures.small_multiple(r.curves, obs_s, obs))
        pic = void("img", src=src, alt=f"observed reward and forecast of run {r.index + 1}", width=180, height=84)
    val = e(r.status)
    if r.curves is not None:
        lo, mid, hi = r.curves["final"]
        val = f"{_f(mid)} [{_f(lo)}, {_f(hi)}]"
    cls = f"card w-{r.worst}" + (" error" if r.status != "ok" else "")
    inner = pic + tag("div", e(r.run_id), class_="cap") + tag("div", val, class_="val")
    return tag("a", inner, class_=cls, href=f"#{r.anchor}", title=r.run_id, **_data_attrs(r))


def _key(color: str, text: str, *, line: bool = False) -> str:
    style = f"background:{color};height:2px" if line else f"background:{color};opacity:.4"
    return tag("span", "", class_="key", style=style) + e(text)


def _overview(d: ReportData) -> str:
    order = sorted(d.runs, key=lambda r: (r.curves is None, -float(r.curves["final"][1]) if r.curves else 0.0))
    legend = (_key(COLORS["obs"], "observed", line=True) + _key(COLORS["band"], f"{_H80} predictive band and median")
              + _key(COLORS["truth"], "logged later (truth, for a truncated log)", line=True))  # fmt: skip
    note = ("Sorted by forecast final reward (median, each run in its own units); a border marks the worst "
            "failure flag; a dotted line the last observation. ")  # fmt: skip
    grid = "".join(_card(r) for r in order)
    head = "<h2>Every run: observed curve and its fan</h2>"
    return f'<section id="overview">{head}<p class="note">{e(note)}{legend}</p><div class="grid">{grid}</div></section>'


# ----------------------------------------------------------------------------- per-run details
def _findings_table(r: RunReport) -> str:
    if not r.findings:
        return '<p class="muted">Not assessed (no logged points).</p>'
    rows = [[e(f["mode"].replace("_", " ")), _sev(f["severity"]), e(f["onset_step"]), e(f["evidence"]), e(f["missing"])]
            for f in r.findings]  # fmt: skip
    return _simple_table(["mode", "severity", "onset step", "evidence", "not logged"], rows, num={2})


def _numbers(r: RunReport) -> str:
    row = r.row
    plateau = f"{_f(row.get('plateau_q50'))} [{_f(row.get('plateau_q05'))}, {_f(row.get('plateau_q95'))}]"
    items = [("plateau (90%)", plateau), ("P(stop before horizon)", _f(row.get("p_stop_before_horizon"), "{:.2f}")),
             ("P(underdamped)", _f(row.get("p_underdamped"), "{:.2f}")),
             ("P(unstable)", _f(row.get("p_unstable"), "{:.2f}")), ("model kind", e(row.get(KIND_COLUMN))),
             ("fit seconds", _f(row.get("seconds"), "{:.1f}"))]  # fmt: skip
    return "<p>" + _DOT.join(f"{k}: <b>{v}</b>" for k, v in items if v) + "</p>"


def _figure(svg: str, alt: str, caption: str, *, width: int | None = None, height: int | None = None) -> str:
    img = void("img", src=data_uri(svg), alt=alt, width=width, height=height)
    return f"<figure>{img}<figcaption>{caption}</figcaption></figure>"


def _fan_caption(d: ReportData) -> str:
    bands = ", ".join(interval_label(m) for m in sorted(INTERVALS))
    text = (f"Black: observed; blue: median latent reward and the {bands} predictive bands of the logged reward from "
            f"the last observation; red diamond: final reward (median, {_H80}) over the shaded final window; green "
            f"dashed: predicted stop step; grey: logged later (truth).")  # fmt: skip
    tgt = _key(COLORS["target"], f"target {d.target:g}", line=True) if d.target is not None else ""
    return e(text) + tgt


def _budget_figure(r: RunReport, d: ReportData) -> str:
    c, budget = r.curves, r.budget
    assert c is not None and budget is not None  # a forecast run has both
    rec = budget["rec"]
    svg = figures.budget_figure(budget, history_step=c["obs_step"], history=c["obs"], target=d.target)
    text = (f"Budget: expected latent reward with its {_CI} band (top); share of draws settled by each step (green) "
            f"and P(target reached) (purple) below; red line: the recommended stop. {rec.summary()}")  # fmt: skip
    notes = "".join(f"<li>{e(n)}</li>" for n in rec.notes)
    return _figure(svg, f"budget curve of run {r.index + 1}", e(text) + (f"<ul>{notes}</ul>" if notes else ""))


def _detail(r: RunReport, d: ReportData) -> str:
    head = f"<b>{e(r.run_id)}</b>"
    if r.curves is not None:
        lo, mid, hi = r.curves["final"]
        head += f"{_DOT}final {_f(mid)} [{_f(lo)}, {_f(hi)}]"
    else:
        head += f'{_DOT}<span class="poor">error</span>'
    if _SEV_RANK[r.worst] >= 1:
        head += _DOT + _sev(r.worst)
    parts = [f"<summary>{head}</summary>"]
    if r.status != "ok":
        parts.append(f"<p><b>Not forecast:</b> {e(r.error)}</p>")
    figs = []
    if r.curves is not None:
        parts.append(_numbers(r))
        svg = figures.fan_figure(r.curves, target=d.target)
        figs.append(_figure(svg, f"fan chart of run {r.index + 1}", _fan_caption(d), width=640, height=300))
    if r.budget is not None:
        figs.append(_budget_figure(r, d))
    if r.channels:
        cap = ("Logged channels the diagnostics read; dashed lines: onset of a finding (yellow watch, orange "
               "warning, red critical).")  # fmt: skip
        figs.append(
            _figure(figures.channels_figure(r.channels, r.findings), f"logged channels of run {r.index + 1}", cap)
        )
    parts.append(f'<div class="figs">{"".join(figs)}</div><h3>Diagnostics</h3>{_findings_table(r)}')
    if r.health:
        note = "; ".join(r.health)
        parts.append(tag("p", e(note[:1].upper() + note[1:]), class_="poor"))
    return tag("details", "".join(parts), class_="run", id=r.anchor)


# ----------------------------------------------------------------------------- comparison, provenance
def _comparison(d: ReportData) -> str:
    if d.comparison is None and d.compare_result is None:
        return ""
    out = ['<section id="compare"><h2>Families and group sizes</h2>']
    c = d.comparison
    if c is not None:
        note = (f"Forecast final reward of these runs by group: per level the mean over its forecast runs with its "
                f"{_H80} interval, and pairwise differences with their {_CI} intervals and P(a > b); units: "
                f"{c['units']}. These compare these runs, not populations: for hierarchical contrasts of plateau and "
                f"timescale, the G exponent of the noise temperature and PSIS-LOO, run `bayesgrpo compare` on "
                f"complete runs.")  # fmt: skip
        out.append(tag("p", e(note), class_="note"))
        for col, fac in c["factors"].items():
            rows = [[e(x["level"]), str(x["runs"]), str(x["forecast"]), _f(x.get("mean")),
                     f"[{_f(x.get('lo'))}, {_f(x.get('hi'))}]" if "lo" in x else "", e(x.get("best", ""))]
                    for x in fac["levels"]]  # fmt: skip
            out.append(f"<h3>by {e(col)}</h3>")
            out.append(_simple_table([col, "runs", "forecast", "mean final", _H80, "best run"], rows, num={1, 2, 3, 4}))
            pairs = [[f"{e(x['a'])} \u2212 {e(x['b'])}", _f(x["mean"]), f"[{_f(x['lo'])}, {_f(x['hi'])}]",
                      _f(x["p_gt"], "{:.2f}")] for x in fac["contrasts"]]  # fmt: skip
            if pairs:
                out.append(_simple_table(["contrast", "mean", _CI, "P(a > b)"], pairs, num={1, 2, 3}))
    if d.compare_result is not None:
        out.append(_compare_result(d.compare_result))
    return "".join(out) + "</section>"


def _compare_result(res) -> str:
    """The hierarchical comparison of ``bayesgrpo compare`` (a CompareResult), when one was given."""
    tab = res.contrasts.drop(columns=[c for c in ("model", "kind") if c in res.contrasts.columns])
    rows = [[e(_f(v) if isinstance(v, float) else v) for v in row] for row in tab.itertuples(index=False)]
    cav = "".join(f"<li>{e(m)}</li>" for m in res.caveats())
    head = f"Hierarchical comparison (bayesgrpo compare, {res.primary} model, {_CI} intervals)"
    return f'<h3>{e(head)}</h3><ul class="note">{cav}</ul>' + _simple_table(list(tab.columns), rows)


def _provenance(d: ReportData) -> str:
    p = d.provenance
    soft = ", ".join(f"{k} {v}" for k, v in p["versions"].items() if k != "bayesgrpo")
    items = [("bayesgrpo", p["versions"]["bayesgrpo"]), ("software", soft), ("generated", p["time"]),
             ("command", p.get("command") or "Python: bayesgrpo.write_report(...)")]  # fmt: skip
    m = p.get("model")
    if m:
        items += [("model kind", m["kind"]), ("population prior", m["prior"]), ("calibration layer", m["calibration"]),
                  ("forecast definitions", f"final window {m['final_window']:g}, stop fraction {m['stop_fraction']:g}"),
                  ("sampler", ", ".join(f"{k} {v}" for k, v in m["sampler"].items()))]  # fmt: skip
    settings = ", ".join(
        f"{k} {v:g}" if isinstance(v, (int, float)) else f"{k} {v}" for k, v in p["settings"].items() if v is not None
    )
    if settings:
        items.append(("decision settings", settings))
    dl = "".join(f"<dt>{e(k)}</dt><dd><code>{e(v)}</code></dd>" for k, v in items)
    rows = [[f"<code>{e(f)}</code>", f"{n:,}", f"<code>{e(h)}</code>"] for f, n, h in p["files"]]
    files = _simple_table(["data file", "bytes", "sha256"], rows, num={1}) if rows else "<p>No data file recorded.</p>"
    return f'<section id="provenance"><h2>Provenance</h2><dl class="prov">{dl}</dl>{files}</section>'


def table_json(d: ReportData) -> dict:
    """The table behind the page's CSV download: the forecast table's columns plus the report's."""
    cols = list(dict.fromkeys(k for r in d.runs for k in r.row))
    extra = [*(f"group_{c}" for c in d.by), "p_target", "stop_advice", "advice_error_rate", "worst_flag", "flags",
             "sampler_notes"]  # fmt: skip
    rows = []
    for r in d.runs:
        flags = "; ".join(f"{f['mode']}={f['severity']}" for f in r.findings if f["severity"] != "none")
        adv = r.advice or {}
        vals = [_jsonable(r.row.get(c)) for c in cols] + [r.groups[c] for c in d.by]
        vals += [_jsonable(r.p_target), adv.get("text"), _jsonable(adv.get("error_rate")), r.worst, flags]
        rows.append([*vals, "; ".join(r.health)])
    return {"columns": cols + extra, "rows": rows}


def _jsonable(v):
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(float(v)) else None
    return str(v)


def render(d: ReportData, *, refresh: int | None = None) -> str:
    """The whole page (one string). ``refresh``: seconds of a ``<meta http-equiv="refresh">`` (live pages)."""
    n_ok = sum(r.status == "ok" for r in d.runs)
    m = d.provenance.get("model") or {}
    sub = (f"{len(d.runs)} runs, {n_ok} forecast{_DOT}model {m.get('kind', '-')}{_DOT}generated "
           f"{d.provenance['time']}{_DOT}bayesgrpo {d.provenance['versions']['bayesgrpo']}")  # fmt: skip
    if refresh:
        sub += f"{_DOT}live: this page reloads every {int(refresh)} s"
    links = [("glance", "At a glance"), ("table-section", "Runs"), ("overview", "Overview"), ("compare", "Comparison"),
             ("details", "Run details"), ("provenance", "Provenance")]  # fmt: skip
    has_cmp = d.comparison is not None or d.compare_result is not None
    nav = "".join(tag("a", t, href=f"#{a}") for a, t in links if a != "compare" or has_cmp)
    head = ['<!doctype html><html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f'<meta http-equiv="refresh" content="{int(refresh)}">' if refresh else "",
            '<link rel="icon" href="data:,">', f"<title>{e(d.title)}</title><style>{CSS}</style></head><body>",
            f'<header><h1>{e(d.title)}</h1><p class="sub">{e(sub)}</p><nav>{nav}</nav></header><main>']  # fmt: skip
    details = "".join(_detail(r, d) for r in d.runs)
    body = [_summary(d), _table_section(d), _overview(d), _comparison(d),
            f'<section id="details"><h2>Run details</h2>{details}</section>', _provenance(d), "</main>",
            f'<script type="application/json" id="report-data">{script_json(table_json(d))}</script>',
            f"<script>{JS}</script></body></html>"]  # fmt: skip
    return "".join(head + body)
