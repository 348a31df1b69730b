"""The run's HTML report, opened in a real headless Chromium: no console error, the numbers
shown are the JSON records' numbers, and a redacted run's page names no node or namespace.

Needs Debian's `chromium` and `chromium-driver` (`make browser`) and selenium (the `dev`
extra); a missing browser fails this test rather than skipping it, so `make test` cannot pass
without having looked. Deselect elsewhere with `-m 'not browser'`.
"""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.inner_run import start_inner

# Neither `descheduler_e2e` nor `desched_selftest`: `make e2e` needs no browser; `make test`
# (everything) runs this.
pytestmark = pytest.mark.browser

INNER = """
import pytest

@pytest.mark.descheduler_e2e
def test_pdb(desched_experiment):
    desched_experiment("pdb", variant="pdb-lister-workaround")

@pytest.mark.descheduler_e2e
def test_positive(desched_experiment):
    desched_experiment("positive", variant="pdb-lister-workaround")
"""

INNER_REDACTED = """
import pytest

@pytest.mark.descheduler_e2e
def test_pdb(desched_experiment):
    desched_experiment("pdb", variant="pdb-lister-workaround")
"""

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def _run(tmp_path_factory: pytest.TempPathFactory, cache: Path, name: str, source: str, *args: str):
    d = tmp_path_factory.mktemp(name)
    art = d / "artifacts"
    proc = start_inner(
        d,
        source,
        cache,
        "-rA",
        f"--desched-artifacts={art}",
        f"--junitxml={d / 'junit.xml'}",
        *args,
    )
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-4000:]
    return d, art, out


@pytest.fixture(scope="module")
def normal_run(tmp_path_factory, desched_toolchain):
    return _run(tmp_path_factory, desched_toolchain.cache_dir, "report", INNER)


@pytest.fixture(scope="module")
def redacted_run(tmp_path_factory, desched_toolchain):
    return _run(
        tmp_path_factory,
        desched_toolchain.cache_dir,
        "report-redacted",
        INNER_REDACTED,
        "--desched-redact",
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's headless Chromium through its own chromedriver: nothing downloaded."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    if missing:
        pytest.fail(
            f"{missing} not installed: run `make browser` "
            "(apt-get install -y chromium chromium-driver)",
            pytrace=False,
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        opts.add_argument(arg)
    opts.add_argument("--window-size=1280,1000")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def _open(driver: Any, page: Path) -> list[dict[str, Any]]:
    """Load the page; return its console errors (there must be none)."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get_log("browser")  # drop anything from an earlier page
    driver.get(page.as_uri())
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def _screenshot(driver: Any, path: Path) -> Path:
    """The whole page, as kept evidence of what a reviewer sees."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(int(height) + 100, 12000))
    path.parent.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(path)), f"no screenshot at {path}"
    return path


def _rounds(art: Path) -> list[dict[str, Any]]:
    recs = [json.loads(p.read_text()) for p in art.rglob("*.json")]
    return [r for r in recs if "round_name" in r]


def _text(el: Any, css: str) -> str:
    from selenium.webdriver.common.by import By

    return el.find_element(By.CSS_SELECTOR, css).text.strip()


def _latency(v: Any) -> str:
    return "n/a" if v is None else f"{v:g}"


def _check_numbers(driver: Any, art: Path) -> int:
    """Every round's figures on the page equal its JSON record's; returns rounds checked."""
    from selenium.webdriver.common.by import By

    rounds = _rounds(art)
    assert rounds, f"no round records under {art}"
    for r in rounds:
        sel = f'div.round[data-round="{r["round_name"]}"]'
        found = driver.find_elements(By.CSS_SELECTOR, sel)
        assert len(found) == 1, f"round {r['round_name']} shown {len(found)} times"
        el = found[0]
        assert _text(el, '.figures [data-k="evictions"]') == str(r["evictions"])
        caps = r["caps"]
        assert _text(el, '.figures [data-k="caps"]') == (
            f"{caps['node']} / {caps['namespace']} / {caps['total']}"
        )
        assert _text(el, '[data-k="replacement_ready_latency_s"]') == _latency(
            r["replacement_ready_latency_s"]
        )
        assert _text(el, 'h3 [data-k="verdict"]') == r["verdict"]
        assert _text(el, 'h3 [data-k="deciding_layer"]') == (r["deciding_layer"] or "")
        shown_counts = {
            f.get_attribute("data-fate"): int(_text(f, '[data-k="count"]'))
            for f in el.find_elements(By.CSS_SELECTOR, "[data-fate]")
        }
        assert shown_counts == r["counts"]
        ledger = el.find_elements(By.CSS_SELECTOR, 'table.ledger tr[data-k="decision"]')
        assert len(ledger) == len(r["decisions"])
        for row, d in zip(ledger, r["decisions"], strict=True):
            assert f"layer-{d['layer']}" in row.get_attribute("class")
            assert row.find_elements(By.TAG_NAME, "td")[0].text.strip() == d["name"]
        dist = {
            row.get_attribute("data-node"): (
                int(_text(row, '[data-k="before"]')),
                int(_text(row, '[data-k="after"]')),
            )
            for row in el.find_elements(By.CSS_SELECTOR, "table.distribution-table tr[data-node]")
        }
        nodes = set(r["distribution_before"]) | set(r["distribution_after"])
        assert dist == {
            n: (r["distribution_before"].get(n, 0), r["distribution_after"].get(n, 0))
            for n in nodes
        }
        codes = [
            _text(row, '[data-k="code"]')
            for row in el.find_elements(
                By.CSS_SELECTOR, 'table.timeline-table tr[data-what="eviction-request"]'
            )
        ]
        assert codes == [str(e["code"]) for e in r["timeline"] if e["what"] == "eviction-request"]
        if r["audit"].get("available"):  # the timeline's requests are the audit's
            audited = sorted(c for p in r["audit"]["pods"].values() for c in p["codes"] if c)
            assert sorted(int(c) for c in codes) == audited
        low = r["pdb_min_disruptions_allowed_seen"]
        assert _text(el, '[data-k="pdb_min_disruptions_allowed_seen"]') == (
            "\u2013" if low is None else str(low)  # en dash: nothing seen
        )
        assert _text(el, '[data-k="policy_digest"]') == r["policy_digest"]
        assert el.find_elements(By.CSS_SELECTOR, "figure.timeline svg")
        assert el.find_elements(By.CSS_SELECTOR, "figure.distribution svg")
        if r["pdb_series"]:
            assert el.find_elements(By.CSS_SELECTOR, "figure.pdb svg")
    for row in driver.find_elements(By.CSS_SELECTOR, "table#experiments tbody tr"):
        name = row.get_attribute("data-experiment")
        mine = [r for r in rounds if r["experiment"] == name]
        assert mine, f"experiment {name} has no records"
        assert _text(row, '[data-k="evictions"]') == str(mine[-1]["evictions"])
    return len(rounds)


def test_report_in_browser(normal_run, browser, desched_settings):
    d, art, out = normal_run
    page = art / "report.html"
    assert page.is_file(), out[-3000:]
    assert f"report: {page}" in out, "the terminal summary does not name the report"
    props = {p.get("name"): p.get("value") for p in ET.parse(d / "junit.xml").iter("property")}
    assert props.get("desched.report") == str(page)
    html = page.read_text()
    assert not re.search(r"""(?:src|href)=["']?(?:https?:)?//""", html.split("<body", 1)[0])
    assert "<script" not in html, "the page needs no script (and so fetches nothing)"
    errors = _open(browser, page)
    shot = _screenshot(browser, Path(desched_settings.artifacts) / "report-screenshot.png")
    assert not errors, f"console errors: {errors} (screenshot {shot})"
    assert _check_numbers(browser, art) == 2
    _check_for_people(browser)


def _check_for_people(driver: Any) -> None:
    """Issue 27: the page opens with the answer, names what is under test, shows no Python
    repr in a cell, and lists its contents (two experiments make it long)."""
    from selenium.webdriver.common.by import By

    from tests.unit.canary.test_report_views import REPR

    assert driver.find_element(By.ID, "answer").text == "2 passed"
    assert driver.find_element(By.CSS_SELECTOR, '[data-k="descheduler"]').text == "v0.36.0"
    assert "descheduler chart 0.36.0" in driver.find_element(By.CSS_SELECTOR, ".under-test").text
    bad = [c.text for c in driver.find_elements(By.CSS_SELECTOR, "td, th") if REPR.search(c.text)]
    assert not bad, f"Python reprs shown: {bad[:5]}"
    assert driver.find_elements(By.CSS_SELECTOR, "nav.toc a")


def test_redacted_report_names_no_node_or_namespace(redacted_run, browser, desched_settings):
    d, art, _ = redacted_run
    page = art / "report.html"
    raw = "".join(p.read_text() for p in (d / "bt").rglob("round-logs/*.log"))
    workers = sorted(set(re.findall(r'"node":\{"name":"([a-z0-9]{4}-worker-\d)"\}', raw)))
    assert len(workers) >= 2, "no node names found in the raw logs"
    html = page.read_text()
    for s in [*workers, "descheduler-lab", "kube-system", "desched-main-"]:
        assert s not in html, f"{s} in the redacted report"
    assert "node-1" in html
    errors = _open(browser, page)
    shot = _screenshot(browser, Path(desched_settings.artifacts) / "report-redacted-screenshot.png")
    assert not errors, f"console errors: {errors} (screenshot {shot})"
    shown = browser.find_element("tag name", "body").text
    for s in [*workers, "descheduler-lab", "kube-system"]:
        assert s not in shown, f"{s} shown on the redacted page"
    assert _check_numbers(browser, art) == 1
