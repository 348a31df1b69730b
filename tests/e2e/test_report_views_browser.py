"""The canary's and the replay's HTML pages (and the experiments' answer line) in a real
headless Chromium, as tests/e2e/test_report_browser.py opens the run's report.

The pages are rendered from recorded shapes (the unit tests' canary of a #1882 fix, a replay
ledger of a real v0.36.0 log compared with a changed copy), so no cluster starts: what is
tested here is what a reviewer's browser shows. Needs `make browser`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.evidence.report import (
    canary_answer,
    write_canary_report,
    write_replay_report,
    write_report,
)
from tests.e2e.test_report_browser import _open, _screenshot, browser  # noqa: F401
from tests.unit.canary.test_report_views import REPR, _canary, _replay

pytestmark = pytest.mark.browser

DATA = Path(__file__).parents[1] / "unit" / "data" / "report" / "entries.json"
LONG = "the API server refused the eviction: " + "unbroken" * 100


def _look(driver: Any, page: Path, shot: Path) -> Any:
    """Open the page; no console error, no horizontal overflow, no repr in any cell."""
    from selenium.webdriver.common.by import By

    errors = _open(driver, page)
    _screenshot(driver, shot)
    assert not errors, f"console errors: {errors} (screenshot {shot})"
    driver.set_window_size(1280, 1000)
    overflow = driver.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0, f"the page scrolls sideways by {overflow}px: long text does not wrap"
    cells = [c.text for c in driver.find_elements(By.CSS_SELECTOR, "td, th")]
    bad = [c for c in cells if REPR.search(c)]
    assert not bad, f"Python reprs shown: {bad[:5]}"
    for link in driver.find_elements(By.CSS_SELECTOR, "nav.toc a"):
        target = link.get_attribute("href").split("#", 1)[1]
        assert driver.find_elements(By.ID, target), f"contents link #{target} goes nowhere"
    return driver.find_element(By.ID, "answer").text


def test_canary_page_in_browser(browser, tmp_path: Path) -> None:  # noqa: F811
    canary = _canary()
    canary["verdict"]["changes"][0]["detail"] = LONG
    page = write_canary_report(tmp_path / "canary.html", canary)
    answer = _look(browser, page, tmp_path / "canary.png")
    assert answer == canary_answer(canary) and answer.startswith("canary: FAIL")
    from selenium.webdriver.common.by import By

    sides = browser.find_elements(By.CSS_SELECTOR, 'table.sides tr[data-figure="evictions"] td')
    assert [s.text for s in sides] == ["0", "1"]  # baseline beside candidate


def test_replay_page_in_browser(browser, tmp_path: Path) -> None:  # noqa: F811
    replay = _replay()
    replay["notes"].append(LONG)
    page = write_replay_report(tmp_path / "replay.html", replay)
    answer = _look(browser, page, tmp_path / "replay.png")
    assert answer.startswith("replay: 1 pod(s) differ from the incident's log")
    from selenium.webdriver.common.by import By

    layers = [
        r.find_element(By.CSS_SELECTOR, '[data-k="layer"]').text
        for r in browser.find_elements(By.CSS_SELECTOR, 'table.ledger tr[data-k="pod"]')
    ]
    assert len(layers) == len(replay["ledger"]["rows"]) and "api-server" in layers


def test_experiments_page_answer_in_browser(browser, tmp_path: Path) -> None:  # noqa: F811
    entries = json.loads(DATA.read_text())
    entries[0]["summary"]["checks"].append({"id": "x", "name": "x", "ok": False, "detail": LONG})
    page = write_report(tmp_path / "report.html", entries)
    assert _look(browser, page, tmp_path / "report.png") == "2 passed"
