"""Issue 42: a 10,000-pod timeline replay spent ~97 s writing its ledger after the last round
and ~15 s of its own work between rounds. The same files and fates, for less: the result
turned into a dict once (it was turned three times, by asdict's generic recursion), and the
round's caps read once per round (each undecided pod re-scanned every decision of the round).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_desched.descheduler.decisions import Fate, Layer, PodDecision, RoundResult
from pytest_desched.replay.ledger import (
    Ledger,
    PodFate,
    PodRow,
    RoundFigures,
    node_cuts,
    total_cut,
    undecided,
)
from pytest_desched.replay.run import Replay, ReplayResult


def _ledger(comparison: dict[str, Any] | None = None) -> Ledger:
    rows = [
        PodRow(
            "team-a/web-1",
            "node-1",
            "ReplicaSet/web",
            fates=[
                PodFate("evicted", "api-server", "moved", "RemovePodsViolatingNodeTaints", None),
                PodFate("gone", None, "evicted in an earlier round", at_s=12.5),
            ],
        ),
        PodRow(
            "team-b/db-0",
            None,
            None,
            "created in window at t=3.0s",
            [PodFate("filtered", "evictor-filter", "x", checks=["SystemCriticalPods"])],
        ),
    ]
    rows[0].fates[0].replacement = "ready"
    rounds = [RoundFigures("r1", by_fate={"evicted": 1}, extra={"stale": [{"t": 1.0}]})]
    return Ledger("replay", "v0.36.0", rows, rounds, comparison, ["a note"])


# The fields a replay's JSON has always had: the one ledger (outcome/ledger.py) also holds
# the fields of other uses (an experiment's audit answers, a canary's figures), never written
# here.
LEDGER_KEYS = ["source", "descheduler_version", "rows", "rounds", "comparison", "notes"]
FATE_KEYS = [
    "fate", "layer", "detail", "strategy", "status_code", "checks", "inferred", "replacement",
    "at_s",
]  # fmt: skip
ROUND_KEYS = [
    "name", "by_fate", "by_layer", "total_evicted", "eviction_requests", "skipped", "dry_run",
    "duration_s", "caps", "audit_by_code", "errors", "extra",
]  # fmt: skip


def _asdict(led: Ledger) -> dict[str, Any]:
    """asdict's generic recursion, over the replay's own fields."""
    full = asdict(led)
    out = {k: full[k] for k in LEDGER_KEYS}
    for r in full["rows"]:  # a fate's checks are written as a list, whatever it held
        r["fates"] = [
            {**{k: f[k] for k in FATE_KEYS}, "checks": [*f["checks"]]} for f in r["fates"]
        ]
    out["rows"] = full["rows"]
    out["rounds"] = [{k: r[k] for k in ROUND_KEYS} for r in full["rounds"]]
    return out


def test_the_ledgers_dict_is_asdicts_and_shares_no_list() -> None:
    led = _ledger({"same_evictions": True, "differ": [{"pod": "p"}]})
    d = led.to_dict()
    assert d == _asdict(led)
    assert list(d) == LEDGER_KEYS  # the same key order: the JSON reads the same
    assert [list(r) for r in d["rows"]] == [list(r) for r in _asdict(led)["rows"]]
    assert [list(f) for f in d["rows"][0]["fates"]] == [FATE_KEYS, FATE_KEYS]
    d["rows"][1]["fates"][0]["checks"].append("x")
    d["comparison"]["differ"].append("x")
    assert led.rows[1].fates[0].checks == ["SystemCriticalPods"]
    assert led.comparison == {"same_evictions": True, "differ": [{"pod": "p"}]}


def test_the_results_dict_holds_the_ledgers_own() -> None:
    res = ReplayResult({"path": "s"}, "v0.36.0", {"source": "p"}, _ledger(), timeline={"a": 1})
    d = res.to_dict()
    want = asdict(res)
    want["ledger"] = res.ledger.to_dict()
    assert d == want and list(d) == list(want)


def test_the_result_is_turned_into_a_dict_once_for_its_json_and_its_page(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # each turn took ~10 s at 10,000 pods x 15 rounds; the JSON and the page took one each
    calls: list[int] = []
    real = ReplayResult.to_dict

    def counted(self: ReplayResult) -> dict[str, Any]:
        calls.append(1)
        return real(self)

    monkeypatch.setattr(ReplayResult, "to_dict", counted)
    written: dict[str, Any] = {}

    class Evidence:
        def write_json(self, exp: str, name: str, obj: Any, capped: bool = True) -> Path:
            written["json"], written["capped"] = obj, capped
            return tmp_path / "replay.json"

        def write_text(self, exp: str, name: str, text: str) -> Path:
            return tmp_path / name

    monkeypatch.setattr(
        "pytest_desched.evidence.report.write_replay_report",
        lambda path, data, redactor: written.setdefault("html", data) and path,
    )
    res = ReplayResult({"path": "s"}, "v0.36.0", {"source": "p"}, _ledger())
    Replay("s").write(SimpleNamespace(evidence=Evidence(), redactor=None), res)
    assert res.notes == [] and set(res.artifacts) == {"json", "markdown", "html"}
    assert len(calls) == 1
    assert written["html"] is written["json"] and written["json"]["ledger"]["rows"]
    # the replay's JSON is its audit trail: written whole (was cut to a 256 KiB wrapper at
    # 10,000 pods, a `truncated` object in place of the fates)
    assert written["capped"] is False


def _round(*decisions: PodDecision) -> RoundResult:
    return RoundResult(decisions=list(decisions))


def _limited(node: str, reason: str) -> PodDecision:
    return PodDecision("ns", f"p-{node}", Fate.LIMITED, Layer.LIMITS, node=node, reason=reason)


@pytest.mark.parametrize(
    "result",
    [
        _round(),
        _round(_limited("node-1", "maxNoOfPodsToEvictPerNode")),
        _round(_limited("node-2", "maxNoOfPodsToEvictTotal")),
    ],
)
@pytest.mark.parametrize("node", [None, "node-1", "node-3"])
def test_an_undecided_pods_fate_from_caps_read_once_is_the_same(
    result: RoundResult, node: str | None
) -> None:
    cuts = (total_cut(result), node_cuts(result))
    assert undecided(result, node, cuts=cuts) == undecided(result, node)


def test_caps_read_once_are_not_read_again() -> None:
    # the engine reads a round's caps once and hands them to every undecided pod's fate
    result = _round(_limited("node-1", "maxNoOfPodsToEvictPerNode"))
    assert undecided(result, "node-1").fate == "undecided"
    assert undecided(result, "node-1", cuts=(False, set())).fate == "not-picked"
    assert "maxNoOfPodsToEvictTotal" in undecided(result, None, cuts=(True, set())).detail
