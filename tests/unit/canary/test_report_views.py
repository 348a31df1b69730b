"""The HTML pages for people (issue 27): the experiments' page, the canary's and the replay's.

Each opens with the answer, names the descheduler and chart under test, shows no Python
repr in a table cell, wraps long text, and has contents when it is long.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.canary.engine import compare_tracks
from pytest_desched.canary.report import CanaryReport
from pytest_desched.canary.tracks import TrackResult
from pytest_desched.canary.verdict import judge
from pytest_desched.descheduler.logparse import parse_log
from pytest_desched.evidence.readable import human, prose
from pytest_desched.evidence.report import (
    canary_answer,
    experiments_answer,
    render_canary_report,
    render_replay_report,
    render_report,
)
from pytest_desched.experiments import ExperimentResult
from pytest_desched.replay.ledger import PodFate, compare, ledger_from_log, round_fates
from tests.unit import DATA_ROOT
from tests.unit.canary.test_canary_diff import BASELINE, FIXED

DATA = DATA_ROOT
REPR = re.compile(r"\bNone\b|\{'|\['|\('|'\)|'\]|'\}|^\(\)$|^\[\]$|^\{\}$")
CHART = {"source": "repo", "version": "0.36.0", "digest": "sha256:abc"}


class _Cells(HTMLParser):
    """Text of every table cell, the first paragraph, ids and whether a contents list exists."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self.first_p: str | None = None
        self.ids: set[str] = set()
        self._cell: list[str] | None = None
        self._p: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(str(a["id"]))
        if tag in ("td", "th"):
            self._cell = []
        if tag == "p" and self.first_p is None and self._p is None:
            self._p = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.cells.append("".join(self._cell).strip())
            self._cell = None
        if tag == "p" and self._p is not None:
            self.first_p = "".join(self._p).strip()
            self._p = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._p is not None:
            self._p.append(data)


def _parse(html: str) -> _Cells:
    p = _Cells()
    p.feed(html)
    return p


def _no_reprs(page: _Cells) -> None:
    bad = [c for c in page.cells if REPR.search(c)]
    assert not bad, f"Python reprs in cells: {bad[:5]}"


# -- text for people -------------------------------------------------------------------------------
def test_values_and_free_text_lose_their_python_reprs() -> None:
    assert human(None) == "\u2013" and human({"w1": 3, "w2": None}) == "w1: 3, w2: \u2013"
    assert human([("a", "w2", True)]) == "(a, w2, yes)"
    assert prose("distribution {'w1': 3}; new pods [('a', 'w2', True)]") == (
        "distribution w1: 3; new pods (a, w2, yes)"
    )
    assert prose("profiles[0].name: exit None") == "profiles[0].name: exit \u2013"


# -- the experiments' page ---------------------------------------------------------------------
@pytest.fixture
def entries() -> list[dict[str, Any]]:
    return json.loads((DATA / "report" / "entries.json").read_text())


def test_the_answer_names_passes_and_the_bug_behind_expected_failures() -> None:
    summaries = [
        {"outcome": "pass"},
        *[{"outcome": "xfail", "classification": {"bug": "descheduler#1882"}}] * 3,
        {"outcome": "pass"},
        {"outcome": "pass"},
    ]
    assert experiments_answer(summaries) == (
        "3 passed, 3 expected failures explained by descheduler#1882"
    )
    assert experiments_answer([{"outcome": "fail"}, {"outcome": "error"}]) == (
        "1 failed, 1 errored"
    )


def test_the_experiments_page_opens_with_the_answer_and_what_is_under_test(
    entries: list[dict[str, Any]],
) -> None:
    entries[0]["summary"]["checks"].append(
        {"id": "x", "name": "x", "ok": False, "detail": "distribution {'w1': 3}, exit None"}
    )
    html = render_report(entries, info={"chart": CHART})
    page = _parse(html)
    assert page.first_p == "2 passed"
    version = entries[0]["rounds"][0]["versions"]["descheduler"]
    assert f'descheduler <b data-k="descheduler">{version}</b>' in html
    assert "descheduler chart 0.36.0" in html
    assert "toc" in page.ids  # two experiments: a contents list
    assert {"exp-0-r0", "exp-1-r0"} <= page.ids  # every round has an anchor
    _no_reprs(page)
    assert "white-space: pre-wrap" in html  # long failure text wraps


# -- the canary's page -------------------------------------------------------------------------
def _canary_report() -> CanaryReport:
    base = TrackResult(
        "baseline", workers=["w1", "w2", "w3"], descheduler_version="v0.36.0", chart=CHART
    )
    cand = TrackResult(
        "candidate", workers=["w1", "w2", "w3"], descheduler_version="v0.37.0", chart=CHART
    )
    base.results = [ExperimentResult("positive", "runbook", outcome="xfail", records=[BASELINE])]
    cand.results = [ExperimentResult("positive", "runbook", outcome="pass", records=[FIXED])]
    base.workers = ["kwok-a-worker-1", "kwok-a-worker-2", "kwok-a-worker-3"]
    cand.workers = ["kwok-b-worker-1", "kwok-b-worker-2", "kwok-b-worker-3"]
    rounds, rows, changes = compare_tracks(base, cand)
    return CanaryReport(base, cand, rounds, judge(changes, []), None, rows, 12.5)


def _canary() -> dict[str, Any]:
    return json.loads(json.dumps(_canary_report().to_dict(), default=str))


def test_the_canary_writes_its_page_beside_canary_json(tmp_path: Path) -> None:
    rep = _canary_report()
    paths = rep.write(tmp_path)
    page = _parse(paths["html"].read_text())
    assert paths["html"] == tmp_path / "canary.html"
    assert page.first_p == canary_answer(json.loads(paths["json"].read_text()))


def test_the_canary_markdown_writes_a_note_as_the_page_does(tmp_path: Path) -> None:
    """A fixed-bug note whose baseline xfail named no bug: the page wrote the dash, canary.md
    wrote `None`."""
    paths = _canary_report().write(tmp_path)
    (row,) = [r for r in json.loads(paths["json"].read_text())["outcomes"]]
    assert "None" in row["note"]  # the record keeps what was classified
    (shown,) = [c for c in _parse(paths["html"].read_text()).cells if "candidate fixes" in c]
    (md_row,) = [
        line
        for line in paths["markdown"].read_text().splitlines()
        if line.startswith("| positive[runbook] |")
    ]
    assert md_row.split(" | ")[-1].rstrip(" |") == shown
    assert "None" not in shown and "\u2013" in shown


def test_the_canary_answer_counts_rollback_triggers() -> None:
    change = {
        "experiment": "positive[runbook]",
        "round": 0,
        "kind": "candidate-set-grew",
        "subject": "spread-demo@source",
        "detail": "3 -> 5",
        "by": None,
    }
    failing = {
        "ok": False,
        "verdict": {"changes": [{**change, "status": "unexplained", "trigger": True}]},
    }
    assert canary_answer(failing) == "canary: FAIL, 1 rollback trigger"
    explained = {
        "ok": True,
        "verdict": {"changes": [{**change, "status": "explained", "trigger": True}]},
    }
    assert canary_answer(explained) == "canary: PASS, 1 change(s) explained"
    broken = {"ok": False, "baseline": {"name": "baseline", "error": "exited 1"}}
    assert canary_answer(broken) == "canary: NO VERDICT, baseline track: exited 1"


def test_the_canary_page_shows_both_tracks_side_by_side_per_round() -> None:
    canary = _canary()
    html = render_canary_report(canary)
    page = _parse(html)
    assert page.first_p is not None and page.first_p.startswith("canary: ")
    assert page.first_p == canary_answer(canary)
    assert "v0.36.0" in html and "v0.37.0" in html and "descheduler chart 0.36.0" in html
    assert "round-0" in page.ids and "verdict" in page.ids
    # the figures of round 1, baseline beside candidate
    i = page.cells.index("evictions")
    assert page.cells[i + 1 : i + 3] == ["0", "1"]
    assert 'data-k="class"' in html  # fates per pod class
    _no_reprs(page)


# -- the replay's page -------------------------------------------------------------------------
def _replay() -> dict[str, Any]:
    text = (DATA / "descheduler-v0.36.0" / "positive-evicted.log").read_text()
    ledger = ledger_from_log(text, "v0.36.0", "descheduler-replay-1")
    fates = round_fates(parse_log(text, "v0.36.0"), text)
    replay = dict(fates)
    evicted = next(p for p, f in fates.items() if f.fate == "evicted")
    replay[evicted] = PodFate("refused", "api-server", status_code=429, strategy="x")
    ids = {
        r.pod: {"owner": "ReplicaSet/spread-demo-5d48967fdd", "node": r.node} for r in ledger.rows
    }
    ledger.comparison = compare(fates, replay, {"identities": ids})
    return {
        "snapshot": {"path": "s.yaml", "takenAt": "2026-12-01T09:00:00Z", "nodes": 4, "pods": 9},
        "descheduler": "v0.36.0",
        "policy": {"source": "p.yaml", "digest": "0123456789abcdef", "limits": {}},
        "ledger": ledger.to_dict(),
        "restore": {"deviations": ["ages shifted by 30 s"]},
        "notes": ["a note with {'a': None}"],
        "chart": CHART,
    }


def test_the_replay_page_says_not_comparable_when_no_eviction_was_compared() -> None:
    """Issue 39 case 4: the incident's evicted pods were outside the snapshot, yet the page's
    first line said "fates up to order: the same"."""
    replay = _replay()
    ledger = replay["ledger"]
    fates = {r["pod"]: PodFate(**r["fates"][0]) for r in ledger["rows"]}
    ledger["comparison"] = compare(fates, {}, {"compare_only": set()})
    page = _parse(render_replay_report(replay))
    assert page.first_p is not None
    assert "fates up to order: not comparable" in page.first_p
    assert "compared 0 of 1 evicted pods: not comparable" in page.first_p


def test_the_replay_page_shows_the_ledger_layers_and_the_comparison() -> None:
    replay = _replay()
    html = render_replay_report(replay)
    page = _parse(html)
    assert page.first_p is not None and page.first_p.startswith("replay: 1 pod(s) differ")
    assert "fates up to order: not the same" in page.first_p
    assert 'descheduler <b data-k="descheduler">v0.36.0</b>' in html
    assert "descheduler chart 0.36.0" in html
    rows = re.findall(r'<tr data-k="pod" data-pod="([^"]+)" class="layer-([^"]+)"', html)
    assert len(rows) == len(replay["ledger"]["rows"]) and ("api-server" in {r[1] for r in rows})
    assert html.count('data-k="identity"') == 2  # the evicted identity and the refused one
    assert {"toc", "ledger", "comparison"} <= page.ids
    _no_reprs(page)
