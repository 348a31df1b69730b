"""evidence/views_ahead.py: charts drawn as rounds and entries come, used only when the data
is the same."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

import pytest_desched.evidence.report as report
import pytest_desched.evidence.views_ahead as views_ahead
from pytest_desched.evidence.report import render_report
from pytest_desched.evidence.views_ahead import ViewsAhead
from pytest_desched.redaction import Redactor
from tests.unit import DATA_ROOT

DATA = DATA_ROOT / "report" / "entries.json"
# what differs between two drawings of the same data: the page's and each SVG's date
GENERATED = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC|<dc:date>[^<]*</dc:date>")


@pytest.fixture
def entries() -> list[dict[str, Any]]:
    return json.loads(DATA.read_text())


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The salts of every round's charts drawn, ahead (views_ahead) or at the end (report)."""
    drawn: list[str] = []
    real = report.round_charts

    def counted(rec: Any, salt: str) -> Any:
        drawn.append(salt)
        return real(rec, salt)

    monkeypatch.setattr(views_ahead, "round_charts", counted)
    monkeypatch.setattr(report, "round_charts", counted)
    return drawn


def _salts(entries: list[dict[str, Any]]) -> list[str]:
    return [f"e{i}r{j}" for i, e in enumerate(entries) for j in range(len(e["rounds"]))]


def test_the_page_drawn_ahead_is_the_page_drawn_at_the_end(
    entries: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn = _counting(monkeypatch)
    red = Redactor(node_names=["kwok-worker-1", "kwok-worker-2"], namespaces=["descheduler-lab"])
    ahead = ViewsAhead()
    for i, entry in enumerate(entries):
        ahead.submit(i, entry, red)
    try:
        page = render_report(entries, red, {"provider": "embedded"}, ahead)
    finally:
        ahead.close()
    assert sorted(drawn) == sorted(_salts(entries))  # each round drawn once, ahead
    plain = render_report(entries, red, {"provider": "embedded"})
    assert GENERATED.sub("", page) == GENERATED.sub("", plain)


def test_an_entry_that_changed_since_is_drawn_again(
    entries: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn = _counting(monkeypatch)
    ahead = ViewsAhead()
    early = copy.deepcopy(entries[0])
    early["rounds"][0]["distribution_after"] = {"some-other-node": 3}
    ahead.submit(0, early, Redactor.disabled())
    try:
        page = render_report(entries[:1], Redactor.disabled(), None, ahead)
    finally:
        ahead.close()
    # round 0 ahead from the old data, then again from the current; the others once, ahead
    assert sorted(drawn) == sorted(["e0r0", *_salts(entries[:1])]), drawn
    assert "some-other-node" not in page


def test_rounds_drawn_as_written_are_not_drawn_again_for_their_entry(
    entries: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session hands each round over as the evidence writer writes it (redacted), then the
    whole entry: every round is drawn once, and the page is the page drawn at the end."""
    drawn = _counting(monkeypatch)
    red = Redactor(node_names=["kwok-worker-1"], namespaces=["descheduler-lab"])
    ahead = ViewsAhead()
    try:
        for i, entry in enumerate(entries):
            for j, rec in enumerate(entry["rounds"]):
                ahead.submit_round(i, j, red.redact(rec))
            ahead.submit(i, entry, red)
        page = render_report(entries, red, {"provider": "embedded"}, ahead)
    finally:
        ahead.close()
    assert sorted(drawn) == sorted(_salts(entries)), drawn
    plain = render_report(entries, red, {"provider": "embedded"})
    assert GENERATED.sub("", page) == GENERATED.sub("", plain)
