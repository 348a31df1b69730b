"""The HTML report rendered from saved record dicts: self-contained, escaped, redacted, and
showing the records' own figures (the browser test checks the same in Chromium)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_desched.config import build_config
from pytest_desched.evidence.report import render_report, write_report
from pytest_desched.evidence.timeline import pdb_series, policy_lint, round_timeline
from pytest_desched.redaction import Redactor
from pytest_desched.session import DeschedSession
from tests.unit import DATA_ROOT

DATA = DATA_ROOT / "report" / "entries.json"


@pytest.fixture
def entries() -> list[dict[str, Any]]:
    """Two experiments of a real run (pdb and positive, pdb-lister-workaround), trimmed."""
    return json.loads(DATA.read_text())


class _Figures(HTMLParser):
    """Text of every `data-k` element, per enclosing `data-round` (None: outside any round)."""

    def __init__(self) -> None:
        super().__init__()
        self.round: str | None = None
        self.stack: list[str | None] = []
        self.figures: dict[str | None, dict[str, list[str]]] = {}
        self.ledger: dict[str, list[str]] = {}
        self._key: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "div" and a.get("data-round"):
            self.round = a["data-round"]
        if tag == "tr" and a.get("data-k") == "decision" and self.round:
            self.ledger.setdefault(self.round, []).append(a.get("class") or "")
        elif a.get("data-k"):
            self._key, self._text = a["data-k"], []

    def handle_data(self, data: str) -> None:
        if self._key:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if self._key and tag in ("td", "span", "b", "code"):
            shown = self.figures.setdefault(self.round, {})
            shown.setdefault(self._key, []).append("".join(self._text).strip())
            self._key = None


def _figures(html: str) -> _Figures:
    p = _Figures()
    p.feed(html)
    return p


def test_page_is_self_contained(entries: list[dict[str, Any]]) -> None:
    html = render_report(entries)
    assert html.startswith("<!DOCTYPE html>")
    assert "<script" not in html
    # nothing fetched: no src/href to another origin (links to known bugs are <a> only)
    assert not re.search(
        r"""<(?:link|img|script|iframe)[^>]+(?:src|href)=["']?(?:https?:)?//""", html
    )
    assert html.count("<svg") >= 3 * sum(len(e["rounds"]) for e in entries)


def test_numbers_shown_are_the_records(entries: list[dict[str, Any]]) -> None:
    shown = _figures(render_report(entries))
    for e in entries:
        for r in e["rounds"]:
            f = shown.figures[r["round_name"]]
            assert f["evictions"] == [str(r["evictions"])]
            caps = r["caps"]
            assert f["caps"] == [f"{caps['node']} / {caps['namespace']} / {caps['total']}"]
            assert f["policy_digest"] == [r["policy_digest"]]
            assert sorted(map(int, f["count"])) == sorted(r["counts"].values())
            codes = [str(t["code"]) for t in r["timeline"] if t["what"] == "eviction-request"]
            assert [c for c in f["code"] if c] == codes
            layers = [re.sub("^layer-", "", c) for c in shown.ledger[r["round_name"]]]
            assert layers == [d["layer"] for d in r["decisions"]]
    top = shown.figures[None]
    assert top["evictions"] == [str(e["summary"]["evictions"]) for e in entries]
    assert top["outcome"] == [e["summary"]["outcome"] for e in entries]


def test_known_bug_is_linked(entries: list[dict[str, Any]]) -> None:
    entries[0]["summary"]["classification"] = {
        "outcome": "xfail",
        "bug": "descheduler#1882",
        "link": "https://github.com/kubernetes-sigs/descheduler/issues/1882",
        "evidence": "every pod filtered by PodsWithoutPDB",
        "context": [],
    }
    html = render_report(entries)
    assert 'href="https://github.com/kubernetes-sigs/descheduler/issues/1882"' in html


def test_values_are_escaped(entries: list[dict[str, Any]]) -> None:
    entries[0]["rounds"][0]["decisions"][0]["name"] = "<script>alert(1)</script>"
    html = render_report(entries)
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)" in html


def test_redacted_page_names_no_node_or_namespace(entries: list[dict[str, Any]]) -> None:
    raw = json.dumps(entries)
    nodes = sorted(set(re.findall(r"[a-z0-9]{4}-worker-\d", raw)))
    assert nodes, "the fixture must hold node names to hide"
    red = Redactor(node_names=nodes, namespaces=["descheduler-lab", "kube-system"])
    html = render_report(entries, red, {"provider": "embedded"})
    for name in [*nodes, "descheduler-lab", "kube-system"]:
        assert name not in html
    assert "node-1" in html and "ns-1" in html


def test_write_report_is_atomic(tmp_path: Path, entries: list[dict[str, Any]]) -> None:
    out = write_report(tmp_path / "a" / "report.html", entries)
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in out.parent.iterdir()] == ["report.html"]


def test_session_writes_the_report_at_close(tmp_path: Path, entries: list[dict[str, Any]]) -> None:
    config = build_config({"--desched-artifacts": str(tmp_path / "art")}, run_dir=tmp_path / "r")
    s = DeschedSession(config, report=lambda m: None)
    assert s.write_report() is None  # nothing ran: no page
    s.report_entries = entries
    s.close()
    assert s.info["report"] == str(tmp_path / "art" / "report.html") == str(s.report_path)
    assert s.report_path.is_file()


def test_a_report_failure_never_stops_teardown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pytest_desched.evidence.report as report

    said: list[str] = []
    config = build_config({"--desched-artifacts": str(tmp_path / "art")}, run_dir=tmp_path / "r")
    s = DeschedSession(config, report=said.append)
    s.report_entries = [{"name": "x", "summary": {}, "rounds": []}]
    monkeypatch.setattr(report, "render_report", lambda *a, **k: 1 / 0)
    s.close()
    assert "ZeroDivisionError" in s.info["report_error"] and said


def test_timeline_is_on_the_experiment_clock() -> None:
    t0 = 1000.0
    now_wall, now_mono = datetime.now(UTC).timestamp(), __import__("time").monotonic()
    started_wall = datetime.fromtimestamp(now_wall - (now_mono - (t0 + 2.0)), UTC)
    rnd = SimpleNamespace(
        started=t0 + 1.0,
        ended=t0 + 5.0,
        pod_runs=[SimpleNamespace(pod="round-pod", started=started_wall)],
        audit_requests=[
            SimpleNamespace(is_eviction=True, stage_ts=started_wall, key="ns/p1", code=429),
            SimpleNamespace(is_eviction=False, stage_ts=started_wall, key="ns/p1", code=200),
        ],
    )
    rec = SimpleNamespace(
        pod_events=[
            {"t": t0 + 0.5, "uid": "old", "name": "p1", "node": "n1", "ready": True},
            {"t": t0 + 3.0, "uid": "new", "name": "p2", "node": None, "ready": False},
            {"t": t0 + 3.5, "uid": "new", "name": "p2", "node": "n2", "ready": False},
            {"t": t0 + 4.0, "uid": "new", "name": "p2", "node": "n2", "ready": True},
        ],
        pdb_statuses=[(t0 + 0.2, 3, 2, 1), (t0 + 2.5, 2, 2, 0)],
    )
    tl = round_timeline(rnd, rec.pod_events, {"old"}, t0, now_wall - now_mono)
    assert [e["what"] for e in tl] == [
        "job-created",
        "pod-started",
        "eviction-request",
        "replacement-scheduled",
        "replacement-ready",
        "job-complete",
    ]
    assert tl[0]["t_s"] == 1.0 and tl[-1]["t_s"] == 5.0 and tl[4]["t_s"] == 4.0
    assert abs(tl[1]["t_s"] - 2.0) < 0.05 and tl[2]["code"] == 429
    assert pdb_series(rec.pdb_statuses, t0)[1] == {
        "t_s": 2.5,
        "currentHealthy": 2,
        "desiredHealthy": 2,
        "disruptionsAllowed": 0,
    }


def test_policy_lint_reports_findings() -> None:
    from pytest_desched.experiments import lab_policy

    clean = lab_policy("pdb-lister-workaround", keep_min_pod_age=True).to_yaml()
    assert policy_lint(clean, "v0.36.0") == []
    # The lab's recorded minPodAge 0s deviation is below the runbook's 10m: said, not hidden.
    workaround = lab_policy("pdb-lister-workaround").to_yaml()
    assert [f.split()[0] for f in policy_lint(workaround, "v0.36.0")] == ["DL017"]
    runbook = lab_policy("runbook").to_yaml()  # desched lint's findings, warnings included
    assert [f.split()[0] for f in policy_lint(runbook, "v0.36.0")] == ["DL017", "DL012"]
    bad = runbook.replace("safe-rebalance", "'{{ x }}'", 1)
    assert any(f.startswith("DL005") and "tpl" in f for f in policy_lint(bad, "v0.36.0"))
    refused = policy_lint("apiVersion: x\nkind: y\n", "v0.36.0")[0]
    assert refused.startswith("DL001 rejected-by-descheduler: <root>: descheduler v0.36.0 refuses")
    assert policy_lint("a: [", "v0.36.0")[0].startswith("not YAML")


def test_lint_findings_are_on_the_page(entries: list[dict[str, Any]]) -> None:
    entries[0]["rounds"][0]["policy_lint"] = ["profiles[0].name: contains '{{'"]
    html = render_report(entries)
    assert "<li>profiles[0].name: contains &#39;{{&#39;</li>" in html
