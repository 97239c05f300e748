"""The HTML report (bayesgrpo.report, `bayesgrpo report`): what it shows is the forecast's numbers, it is
self-contained, escapes every id, writes atomically, and the CLI answers bad options in one line before
sampling (sampling mocked). The real browser checks are in test_report_browser.py."""

from __future__ import annotations

import json
import re
import urllib.parse
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import bayesgrpo
from bayesgrpo import Forecaster, SamplerConfig, read_runs
from bayesgrpo.cli import app
from bayesgrpo.decisions.budget import recommend_stop
from bayesgrpo.errors import DataWarning, OptionError, OutputError
from bayesgrpo.forecast.batch import forecast_batch
from bayesgrpo.report import write_report
from bayesgrpo.report.html import script_json

DATA = Path(__file__).parent / "data"
SMALL = DATA / "grpo_small"
HOSTILE = ("<script>alert(1)</script>", '"><img src=x onerror=alert(2)>', "a&amp;b</script>")
runner = CliRunner()
FAST = SamplerConfig(draws=50, tune=10, chains=2)


class Page(HTMLParser):
    """What a test reads from a page: rows of the runs table, their cells' text, images, scripts, links."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.rows, self.imgs, self.scripts, self.links, self.details = [], [], [], [], []
        self._in_runs = self._in_tbody = False
        self._cell = None
        self._script = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self._in_runs = a.get("id") == "runs"
        elif tag == "tbody" and self._in_runs:
            self._in_tbody = True
        elif tag == "tr" and self._in_tbody:
            self.rows.append({"attrs": a, "cells": []})
        elif tag == "td" and self._in_tbody:
            self._cell = []
            self.rows[-1]["cells"].append(self._cell)
        elif tag == "img":
            self.imgs.append(a)
        elif tag == "script":
            self._script = []
            self.scripts.append((a, self._script))
        elif tag in ("a", "link"):
            self.links.append(a.get("href", ""))
        elif tag == "details":
            self.details.append(a.get("id"))

    def handle_endtag(self, tag):
        if tag == "tbody":
            self._in_tbody = False
        elif tag == "table":
            self._in_runs = False
        elif tag == "td":
            self._cell = None
        elif tag == "script":
            self._script = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._script is not None:
            self._script.append(data)

    def cell_texts(self, i: int) -> list[str]:
        return ["".join(c).strip() for c in self.rows[i]["cells"]]

    def data_json(self) -> dict:
        for a, body in self.scripts:
            if a.get("id") == "report-data":
                return json.loads("".join(body))
        raise AssertionError("no report-data script")


def small_runs():
    return read_runs(SMALL / "runs.csv", meta=SMALL / "meta.csv")


def runs_with(tmp_path, ids, *, n=80, meta=None, short=(), every=5):
    """Saturating 0-1 runs (ids may be hostile) plus runs with 2 points (error rows)."""
    rng = np.random.default_rng(1)
    frames = []
    for k, rid in enumerate([*ids, *short]):
        m = 2 if rid in short else n  # 2 points: fewer than a forecast takes (plan.MIN_POINTS)
        s = np.arange(1, m + 1) * every
        y = 0.2 + (0.3 + 0.1 * k) * (1 - np.exp(-s / 120)) + 0.02 * rng.standard_normal(m)
        frames.append(pd.DataFrame({"run_id": rid, "step": s, "reward": y}))
    p = tmp_path / "runs.csv"
    pd.concat(frames).to_csv(p, index=False)
    mp = None
    if meta is not None:
        mp = tmp_path / "meta.csv"
        pd.DataFrame(meta).to_csv(mp, index=False)
    return read_runs(p, meta=mp), p, mp


def test_every_run_is_a_row_with_the_forecasts_numbers(tmp_path, mock_sampler):
    runs = small_runs()
    res = forecast_batch(runs, forecaster=Forecaster(sampler=FAST), until_fraction=0.3)
    out = write_report(res, tmp_path / "r.html", target=0.5)
    page = Page(out.read_text(encoding="utf-8"))
    assert len(page.rows) == len(runs) == 6
    data = page.data_json()
    col = {c: i for i, c in enumerate(data["columns"])}
    fit = res.fit
    for i, rid in enumerate(runs.run_ids):
        cells = page.cell_texts(i)
        row = res.table.iloc[i]
        assert cells[0] == rid
        assert cells[2] == f"{row.final_q50:.3g} [{row.final_q10:.3g}, {row.final_q90:.3g}]"
        p_t = float(np.mean(fit.final_draws(rid) >= 0.5))  # P(final reward >= target), the callback's p_target
        assert data["rows"][i][col["p_target"]] == pytest.approx(p_t)
        assert cells[3] == f"{p_t:.2f}"
        rec = recommend_stop(fit.paths(rid), target=0.5, max_steps=int(row.horizon))
        adv = data["rows"][i][col["stop_advice"]]
        assert adv == ("stop now" if rec.step <= rec.last_step else f"continue to {int(row.horizon)}"
                       if rec.step >= row.horizon else f"stop at {rec.step}")  # fmt: skip
        assert cells[6] == "not measured"  # the budget's advice has no measured error rate (the page says why)
    assert len(page.details) == 6 and page.details == [f"run-{i}" for i in range(1, 7)]


def test_self_contained_and_every_figure_is_well_formed_svg(tmp_path, mock_sampler):
    res = forecast_batch(small_runs(), forecaster=Forecaster(sampler=FAST), until_fraction=0.3)
    text = write_report(res, tmp_path / "r.html").read_text(encoding="utf-8")
    page = Page(text)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)  # nothing fetched from anywhere
    assert "@import" not in text and "url(http" not in text
    assert all(h.startswith(("#", "data:")) for h in page.links)
    assert len(page.imgs) == 6 + 6 * 3  # a small multiple per run; fan, budget, channels per forecast run
    for img in page.imgs:
        src = img["src"]
        assert src.startswith("data:image/svg+xml,")
        svg = urllib.parse.unquote(src.split(",", 1)[1])
        root = ET.fromstring(svg)  # well-formed XML, else the browser shows a broken image
        assert root.tag.endswith("svg") and not root.findall(".//{http://www.w3.org/2000/svg}script")
    assert [a.get("type") for a, _ in page.scripts] == ["application/json", None]


def test_hostile_run_ids_are_text_never_markup(tmp_path, mock_sampler):
    runs, _, _ = runs_with(tmp_path, HOSTILE, meta={"run_id": list(HOSTILE), "family": ["<b>4</b>", "x", "x"]})
    res = forecast_batch(runs, forecaster=Forecaster(sampler=FAST), horizon=600)
    text = write_report(res, tmp_path / "r.html", by=["family"]).read_text(encoding="utf-8")
    for rid in HOSTILE:
        assert rid not in text
    assert "<b>4</b>" not in text
    assert text.count("<script") == 2  # the page's own two
    page = Page(text)
    assert [page.cell_texts(i)[0] for i in range(3)] == list(HOSTILE)  # shown as the text they are
    assert page.cell_texts(0)[1] == "<b>4</b>" and "&lt;b&gt;4&lt;/b&gt; \u2212 x" in text  # a metadata level too
    data = page.data_json()
    assert [r[0] for r in data["rows"]] == list(HOSTILE)
    block = text.split('id="report-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in block and ">" not in block and "&" not in block


def test_script_json_cannot_close_its_script():
    obj = {"id": "</script><script>alert(1)</script>", "x": "a & b \u2028"}
    s = script_json(obj)
    assert "<" not in s and ">" not in s and "&" not in s and "\u2028" not in s
    assert json.loads(s) == obj


def test_error_rows_are_shown_with_their_reason(tmp_path, mock_sampler):
    runs, _, _ = runs_with(tmp_path, ("good",), short=("tiny",))
    with pytest.warns(DataWarning, match="not forecast"):
        res = forecast_batch(runs, forecaster=Forecaster(sampler=FAST), horizon=600)
    page = Page(write_report(res, tmp_path / "r.html").read_text(encoding="utf-8"))
    assert len(page.rows) == 2
    err = page.rows[1]
    assert err["attrs"]["class"] == "error" and err["attrs"]["data-status"] == "error"
    assert "error: run 'tiny'" in page.cell_texts(1)[-1] and "at least" in page.cell_texts(1)[-1]
    assert "run-2" in page.details  # its details (the reason, its logged points) are there too


def test_every_run_failed_still_gives_a_page(tmp_path, mock_sampler):
    runs, _, _ = runs_with(tmp_path, (), short=("t1", "t2"))
    with pytest.warns(DataWarning, match="not forecast"):
        res = forecast_batch(runs, forecaster=Forecaster(sampler=FAST), horizon=600)
    assert res.fit is None
    page = Page(write_report(res, tmp_path / "r.html").read_text(encoding="utf-8"))
    assert [r["attrs"]["data-status"] for r in page.rows] == ["error", "error"]


def test_comparison_by_group_is_the_mean_of_the_runs_draws(tmp_path, mock_sampler):
    ids = ("a1", "a2", "b1")
    mock_sampler["spread"] = 0.1
    runs, _, _ = runs_with(tmp_path, ids, meta={"run_id": list(ids), "group_size": [4, 4, 8]})
    res = forecast_batch(runs, forecaster=Forecaster(sampler=FAST), horizon=600)
    from bayesgrpo.report.data import assemble

    d = assemble(res, by=["group_size"])
    fac = d.comparison["factors"]["group_size"]
    assert "own reward units" in d.comparison["units"]  # every reward in [0, 1]: one shared scale
    lv = {x["level"]: x for x in fac["levels"]}
    m4 = (res.fit.final_draws("a1") + res.fit.final_draws("a2")) / 2
    m8 = res.fit.final_draws("b1")
    assert lv["4"]["mean"] == pytest.approx(m4.mean()) and lv["8"]["mean"] == pytest.approx(m8.mean())
    assert lv["4"]["lo"] == pytest.approx(np.quantile(m4, 0.1)) and lv["4"]["hi"] == pytest.approx(np.quantile(m4, 0.9))
    (c,) = fac["contrasts"]
    assert (c["a"], c["b"]) == ("4", "8")
    assert c["mean"] == pytest.approx((m4 - m8).mean()) and c["p_gt"] == pytest.approx(np.mean(m4 - m8 > 0))
    assert c["lo"] == pytest.approx(np.quantile(m4 - m8, 0.05))
    with pytest.raises(OptionError, match="'nosuch'"):
        assemble(res, by=["nosuch"])


def test_many_levels_are_contrasted_with_the_best_one_only():
    from bayesgrpo.report.data import MAX_PAIRWISE_LEVELS, _pairs

    few = {str(k): np.full(4, float(k)) for k in range(MAX_PAIRWISE_LEVELS)}
    assert len(_pairs(few)) == MAX_PAIRWISE_LEVELS * (MAX_PAIRWISE_LEVELS - 1) // 2
    many = {str(k): np.full(4, float(k)) for k in range(20)}
    pairs = _pairs(many)
    assert len(pairs) == 19 and all(a == "19" for a, _ in pairs)  # the best level against each other one


def test_policy_advice_fills_the_slot_with_its_error_rate(tmp_path, mock_sampler):
    runs, _, _ = runs_with(tmp_path, ("a", "b"))
    res = forecast_batch(runs, forecaster=Forecaster(sampler=FAST), horizon=600)
    res.table = res.table.assign(advice=["stop", "continue"], advice_error_rate=[0.08, 0.12])
    text = write_report(res, tmp_path / "r.html").read_text(encoding="utf-8")
    page = Page(text)
    assert [page.cell_texts(i)[4] for i in range(2)] == ["stop", "continue"]
    # the rate is that of the policy's stops: quoted on a stop, nothing on a continue (never "not measured")
    assert [page.cell_texts(i)[5] for i in range(2)] == ["8%", ""]
    assert "the stop policy of bayesgrpo.decisions, as the forecast table carries them" in text
    assert "Its error rate has not been measured" not in text


def test_a_fit_reports_too_and_the_top_level_name_is_lazy(tmp_path, mock_sampler):
    runs, _, _ = runs_with(tmp_path, ("a", "b"))
    fit = Forecaster(sampler=FAST).fit(runs.truncate(fraction=0.5), horizon=600)
    out = bayesgrpo.write_report(fit, tmp_path / "fit.html", full=runs, refresh=7)
    text = out.read_text(encoding="utf-8")
    assert '<meta http-equiv="refresh" content="7">' in text and "reloads every 7 s" in text
    assert len(Page(text).rows) == 2
    assert "Python: bayesgrpo.write_report" in text  # provenance of a Python call


def test_provenance_names_versions_prior_files_with_hashes(tmp_path, mock_sampler):
    import hashlib

    res = forecast_batch(small_runs(), forecaster=Forecaster(sampler=FAST), until_fraction=0.3)
    text = write_report(res, tmp_path / "r.html", command="bayesgrpo report x").read_text(encoding="utf-8")
    digest = hashlib.sha256((SMALL / "runs.csv").read_bytes()).hexdigest()
    assert digest in text and "runs.csv" in text
    assert res.fit.config.prior.identity in text and res.fit.config.calibration.identity in text
    assert f"bayesgrpo {bayesgrpo.__version__}" in text and "bayesgrpo report x" in text


def test_atomic_write_and_output_checks(tmp_path, mock_sampler, monkeypatch):
    runs, _, _ = runs_with(tmp_path, ("a",))
    res = forecast_batch(runs, forecaster=Forecaster(sampler=FAST), horizon=600)
    with pytest.raises(OutputError, match=r"'\.txt'"):
        write_report(res, tmp_path / "r.txt")
    import os

    mask = os.umask(0o022)
    os.umask(mask)
    done = write_report(res, tmp_path / "new.html")
    assert done.stat().st_mode & 0o777 == 0o666 & ~mask  # as a plain open() would make it (not mkstemp's 0600)
    done.unlink()
    target = tmp_path / "r.html"
    target.write_text("old page")
    import bayesgrpo.report.html as H

    monkeypatch.setattr(H, "render", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom")))
    with pytest.raises(RuntimeError):
        write_report(res, target)
    assert target.read_text() == "old page"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html", "runs.csv"]  # no half-written temp file


@pytest.mark.slow
def test_hundred_runs_stay_small(tmp_path, mock_sampler):
    ids = [f"run-{k:03d}" for k in range(100)]
    runs, _, _ = runs_with(tmp_path, ids, n=400, every=1)  # the size grows with the logged points
    res = forecast_batch(runs, forecaster=Forecaster(sampler=SamplerConfig(draws=10, tune=10, chains=1)),
                         until_fraction=0.3)  # fmt: skip
    size = write_report(res, tmp_path / "r.html", target=0.5).stat().st_size
    assert size < 5e6, size  # issue 21: at most ~5 MB for 100 runs


# ------------------------------------------------------------------ the CLI verb
def invoke(*args):
    res = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in res.output, res.output
    return res


def test_cli_report_writes_one_page(tmp_path, mock_sampler):
    out = tmp_path / "r.html"
    res = invoke("report", SMALL / "runs.csv", "--meta", SMALL / "meta.csv", "--until-fraction", 0.3, "--target", 0.5,
                 "--by", "group_size", "--draws", 50, "--tune", 10, "--out", out)  # fmt: skip
    assert res.exit_code == 0, res.output
    assert f"wrote {out}" in res.output.replace("\n", "")
    text = out.read_text(encoding="utf-8")
    assert len(Page(text).rows) == 6 and 'id="compare"' in text
    cmd = "bayesgrpo report " + str(SMALL / "runs.csv")
    assert cmd in text and "--until-fraction 0.3" in text and "--target 0.5" in text  # how to make it again
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]


def _glance_stop_count(text: str) -> int:
    glance = re.search(r'<section id="glance">.*?</section>', text, re.S).group(0)
    return int(re.search(r"<b>(\d+)</b>to stop now", glance).group(1))


@pytest.mark.parametrize("chain_shift", [0.0, 0.5])  # healthy chains (CLI: ok), chains that disagree (CLI: warning)
def test_cli_report_glance_and_sampler_word_say_what_the_table_and_cli_say(tmp_path, mock_sampler, chain_shift):
    """Issue 33, item 11: the glance counts the stop advices the table shows (one rule), and the page's sampler word
    is the CLI table's status word for the same fit (one rule, one word)."""
    mock_sampler["params"]["r_star"] = 0.0  # every run heads down: the stop policy advises stop (at half of
    mock_sampler["chain_shift"] = chain_shift  # the run, where the packaged outlook adds no population changes)
    out = tmp_path / "r.html"
    res = invoke("report", SMALL / "runs.csv", "--meta", SMALL / "meta.csv", "--until-fraction", 0.5,
                 "--draws", 50, "--tune", 10, "--out", out)  # fmt: skip
    assert res.exit_code == 0, res.output
    text = out.read_text(encoding="utf-8")
    page = Page(text)
    rows = [page.cell_texts(i) for i in range(len(page.rows))]
    advice = [c[4] for c in rows]
    n_stop = sum(a.split(" saves")[0] in ("stop", "stop now") for a in advice)  # the policy's word, the budget's
    if chain_shift == 0:
        assert n_stop > 0, advice
    else:  # chains that disagree: numbers in doubt are no advice to act on
        assert {a.split(" saves")[0] for a in advice} == {"uncertain"} and n_stop == 0, advice
    assert _glance_stop_count(text) == n_stop, (advice, n_stop)
    assert sum(r["attrs"]["data-stop"] == "1" for r in page.rows) == n_stop  # the "stop now" filter: the same rule
    cli = {ln.split()[0]: ("warning" if "warning:" in ln else ln.split()[-1]) for ln in res.output.splitlines()
           if ln.split() and ln.split()[0] in small_runs().run_ids}  # fmt: skip
    assert set(cli.values()) == ({"ok"} if chain_shift == 0 else {"warning"}), res.output
    page_word = {c[0]: c[7].split()[0] for c in rows}  # the sampler column
    assert page_word == cli
    assert ">poor<" not in text


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--out", "{tmp}/r.txt"], ["--out", "'.txt'", ".html"]),
        (["--by", "nosuch"], ["--by 'nosuch'", "group_size"]),
        (["--by", ","], ["--by must name"]),
        (["--cost-per-step", "-1"], ["--cost-per-step must be at least 0"]),
        (["--value-per-reward", "0"], ["--value-per-reward must be greater than 0"]),
        (["--target", "nan"], ["--target must be a finite number"]),
        (["--until-fraction", "2"], ["--until-fraction", "(0, 1)"]),
    ],
)
def test_cli_report_refuses_bad_options_before_sampling(tmp_path, mock_sampler, args, needles):
    res = invoke("report", SMALL / "runs.csv", "--meta", SMALL / "meta.csv", *[a.format(tmp=tmp_path) for a in args])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, res.output
    assert all(n in lines[0] for n in needles), lines[0]
    assert not mock_sampler["calls"]


def test_cli_report_with_only_error_rows_writes_the_page_and_exits_1(tmp_path, mock_sampler):
    _, p, _ = runs_with(tmp_path, (), short=("t1",))
    out = tmp_path / "r.html"
    res = invoke("report", p, "--horizon", 600, "--out", out)
    assert res.exit_code == 1
    assert [r["attrs"]["data-status"] for r in Page(out.read_text(encoding="utf-8")).rows] == ["error"]


# ------------------------------------------------------------------ the live page
def test_worker_rewrites_the_live_report_after_each_forecast(tmp_path, mock_sampler):
    from bayesgrpo.integrations._requests import REPORT_REFRESH, forecast_request
    from bayesgrpo.integrations._serve import _handle

    runs, _, _ = runs_with(tmp_path, ("live",))
    df = runs.run("live")[["step", "reward"]]
    out = tmp_path / "live" / "report.html"
    seen = []
    for upto in (100, 250):
        req = forecast_request(run_id="live", frame=df[df["step"] <= upto], meta={"max_steps": 600}, target=0.5,
                               sampler={"draws": 50, "tune": 10}, report=str(out),
                               utility={"cost_per_hour": 1.0, "steps_per_hour": 1000.0})  # fmt: skip
        res = _handle(req)
        assert res["report"] == str(out)
        text = out.read_text(encoding="utf-8")
        assert f'<meta http-equiv="refresh" content="{REPORT_REFRESH}">' in text and "bayesgrpo live: live" in text
        page = Page(text)
        assert len(page.rows) == 1
        seen.append(page.cell_texts(0)[1])
        assert "decision settings" in text and "cost_per_step 0.001" in text  # the callback's utility, per step
    assert seen == ["100 / 600", "250 / 600"]  # the same page, rewritten with the newer forecast
    assert [p.name for p in out.parent.iterdir()] == ["report.html"]  # atomic: no temp file left


def test_a_stop_step_before_the_last_observation_reads_settled():
    from bayesgrpo.report.html import _stop_text

    row = {"stop_q50": 1.0, "p_stop_before_horizon": 0.9, "horizon": 246, "observed_until": 71}
    assert _stop_text(row) == ("settled (≤71)", 1.0)  # not "1": a step in the past is no advice to stop there
    assert _stop_text({**row, "stop_q50": 120.0}) == ("120", 120.0)
    assert _stop_text({**row, "p_stop_before_horizon": 0.2}) == (">246", 246.5)
