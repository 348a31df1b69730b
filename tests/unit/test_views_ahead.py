"""evidence/views_ahead.py: charts drawn as entries come, used only when the data is the same."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

import pytest_desched.evidence.views_ahead as views_ahead
from pytest_desched.evidence.report import render_report
from pytest_desched.evidence.views_ahead import ViewsAhead
from pytest_desched.redaction import Redactor

DATA = Path(__file__).parent / "data" / "report" / "entries.json"
# what differs between two drawings of the same data: the page's and each SVG's date
GENERATED = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC|<dc:date>[^<]*</dc:date>")


@pytest.fixture
def entries() -> list[dict[str, Any]]:
    return json.loads(DATA.read_text())


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    drawn: list[int] = []
    real = views_ahead.entry_views

    def counted(entry: Any, index: int) -> Any:
        drawn.append(index)
        return real(entry, index)

    monkeypatch.setattr(views_ahead, "entry_views", counted)
    return drawn


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
    assert sorted(drawn) == list(range(len(entries)))  # each entry drawn once, ahead
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
    assert drawn == [0, 0], drawn  # ahead, from the old data, then again from the current
    assert "some-other-node" not in page
