"""The HTML report in a real browser: Debian's headless Chromium (/usr/bin/chromium) driven by Playwright
for Python (its own browser download is never used). scripts/env.sh installs chromium when it is missing;
without it these tests FAIL (set BAYESGRPO_NO_BROWSER=1 to skip them on a machine that cannot have it).

The page is the report of a few real-format runs (a TRL trainer_state.json, a W&B CSV export, the
grpo_small long table) plus one run whose id is hostile markup; sampling is mocked (the page, not the
model, is under test). :func:`check_page` is what every page must pass; a test shows it fails on a page
whose table lost a row.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesgrpo import Forecaster, SamplerConfig, read_many
from bayesgrpo.errors import DataWarning
from bayesgrpo.forecast.batch import forecast_batch
from bayesgrpo.report import write_report

DATA = Path(__file__).parent / "data"
CHROMIUM = os.environ.get("BAYESGRPO_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
HOSTILE = "<script>alert(1)</script>"
FORMATS = [
    DATA / "formats" / name
    for name in (
        "trl_trainer_state/old-trl_every-step_steps1-20-of-250__IMJONEZZ-UnslothGRPO__trainer_state.json",
        "wandb_csv/one-run_no-MIN-MAX_every-10_steps10-300__iodt-2-digital-twin-composition__reward.csv",
    )
]

pytestmark = [
    pytest.mark.slow,  # a browser start and a page of 9 runs: 10-30 s each on the shared 2-core machine
    pytest.mark.skipif(os.environ.get("BAYESGRPO_NO_BROWSER") == "1", reason="BAYESGRPO_NO_BROWSER=1"),
]


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: pip install playwright (the test extra has it)")
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        pytest.fail(f"no Chromium at {CHROMIUM}: run `bash scripts/env.sh test` (apt-get install chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


@pytest.fixture
def page_file(tmp_path, mock_sampler):
    """The report of the real-format runs plus a hostile id and a run too short to forecast (an error row)."""
    s = np.arange(1, 61) * 5
    y = 0.3 + 0.4 * (1 - np.exp(-s / 100)) + 0.02 * np.random.default_rng(0).standard_normal(s.size)
    hostile = pd.DataFrame({"run_id": HOSTILE, "step": s, "reward": y})
    tiny = pd.DataFrame({"run_id": "too-short", "step": [5, 10, 15], "reward": [0.1, 0.2, 0.3]})
    pd.concat([hostile, tiny]).to_csv(tmp_path / "extra.csv", index=False)
    runs = read_many([*FORMATS, DATA / "grpo_small" / "runs.csv", tmp_path / "extra.csv"])
    fc = Forecaster(sampler=SamplerConfig(draws=50, tune=10, chains=2))
    with pytest.warns(DataWarning, match="not forecast"):
        res = forecast_batch(runs, forecaster=fc, until_fraction=0.5)
    return write_report(res, tmp_path / "report.html", target=0.5), list(runs.run_ids)


def check_page(browser, path: Path, n_runs: int, *, width: int = 1280, shot: Path | None = None) -> dict:
    """Open ``path`` offline and check it the way a person would; returns what was seen."""
    ctx = browser.new_context(viewport={"width": width, "height": 900}, offline=True)
    page = ctx.new_page()
    errors, dialogs, requests = [], [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda ex: errors.append(str(ex)))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("request", lambda r: requests.append(r.url) if not r.url.startswith(("file:", "data:", "blob:")) else None)
    page.goto(path.resolve().as_uri())
    page.wait_for_load_state("load")
    rows = page.locator("#runs tbody tr")
    assert rows.count() == n_runs, f"{rows.count()} table rows for {n_runs} runs"
    assert page.inner_text("#count") == f"{n_runs} of {n_runs} runs shown"
    page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")  # every figure shown
    page.wait_for_function("() => [...document.images].every(i => i.complete)")
    imgs = page.eval_on_selector_all("img", "els => els.map(i => [i.complete && i.naturalWidth > 0, i.alt])")
    broken = [alt for ok, alt in imgs if not ok]
    assert imgs and not broken, f"images not loaded: {broken[:5]}"
    page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = false)")
    if shot is not None:
        page.screenshot(path=str(shot), full_page=False)
    seen = {"errors": errors, "dialogs": dialogs, "requests": requests, "images": len(imgs), "page": page, "ctx": ctx}
    assert not errors, errors
    assert not dialogs, dialogs
    assert not requests, requests
    return seen


def _final_column(page) -> int:
    heads = page.eval_on_selector_all("#runs thead th", "els => els.map(e => e.textContent)")
    return next(i for i, h in enumerate(heads) if h.startswith("final reward"))


def _keys(page, col: int) -> list:
    return page.eval_on_selector_all("#runs tbody tr", f"rows => rows.map(r => r.cells[{col}].getAttribute('data-v'))")


def _not_blank(png: Path) -> None:
    from PIL import Image

    im = np.asarray(Image.open(png).convert("RGB"), dtype=float)
    assert im.std() > 10 and len(np.unique(im.reshape(-1, 3), axis=0)) > 50, "screenshot is blank"


def test_report_in_chromium(browser, page_file, tmp_path):
    path, ids = page_file
    seen = check_page(browser, path, len(ids), shot=tmp_path / "wide.png")
    page = seen["page"]
    _not_blank(tmp_path / "wide.png")
    # sorting by the final reward reorders the rows (ascending, empty error cells last), then descending
    col = _final_column(page)
    before = _keys(page, col)
    page.locator("#runs thead th").nth(col).locator("button").click()
    asc = _keys(page, col)
    nums = [float(v) for v in asc if v]
    assert asc != before and nums == sorted(nums) and asc[-1] == "" and len(nums) == len(ids) - 1
    assert page.locator("#runs thead th").nth(col).get_attribute("aria-sort") == "ascending"
    page.locator("#runs thead th").nth(col).locator("button").click()
    desc = [float(v) for v in _keys(page, col) if v]
    assert desc == sorted(nums, reverse=True)
    # the hostile id is text: its cell shows it literally, no script of it ran, the page has only its own two
    cell = page.locator("#runs tbody td.id", has_text="alert(1)")
    assert cell.count() == 1 and cell.inner_text() == HOSTILE
    assert page.evaluate("() => document.scripts.length") == 2 and not seen["dialogs"]
    # filtering: by text, and the error rows
    page.fill("#filter", "alert(1)")
    assert page.locator("#runs tbody tr:not([hidden])").count() == 1
    assert page.locator(".card:not([hidden])").count() == 1
    page.fill("#filter", "")
    page.select_option("#status-filter", "error")
    assert page.locator("#runs tbody tr:not([hidden])").count() == 1
    assert "too-short" in page.locator("#runs tbody tr:not([hidden])").inner_text()
    # a live page reloads itself: the filter and the sort survive the reload
    page.reload()
    page.wait_for_load_state("load")
    assert page.input_value("#status-filter") == "error" and page.locator("#runs tbody tr:not([hidden])").count() == 1
    assert page.locator("#runs thead th").nth(col).get_attribute("aria-sort") == "descending"
    page.select_option("#status-filter", "all")
    # a run's details open from its link (an anchor), with its figures
    page.locator("#runs tbody td.id a", has_text="alert(1)").click()
    opened = page.evaluate("() => [...document.querySelectorAll('details[open]')].map(d => d.id)")
    assert len(opened) == 1 and page.locator(f"#{opened[0]} img").count() == 3
    assert not seen["errors"]
    seen["ctx"].close()


def test_report_on_a_phone_width(browser, page_file, tmp_path):
    path, ids = page_file
    seen = check_page(browser, path, len(ids), width=390, shot=tmp_path / "phone.png")
    _not_blank(tmp_path / "phone.png")
    page = seen["page"]
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390  # the table scrolls, the page does not
    seen["ctx"].close()


def test_the_check_fails_on_a_broken_table(browser, page_file, tmp_path):
    path, ids = page_file
    text = path.read_text(encoding="utf-8")
    i = text.index("<tr", text.index("<tbody>"))
    broken = tmp_path / "broken.html"
    broken.write_text(text[:i] + text[text.index("</tr>", i) + 5 :], encoding="utf-8")  # one row lost
    with pytest.raises(AssertionError, match="table rows"):
        check_page(browser, broken, len(ids))
    bad_js = tmp_path / "bad_js.html"
    bad_js.write_text(text.replace('getElementById("count")', 'getElementById("nope")'), encoding="utf-8")
    with pytest.raises(AssertionError):
        check_page(browser, bad_js, len(ids))  # a script error: the counter stays empty, the console has it
