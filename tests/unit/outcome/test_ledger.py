"""The one ledger: each use's form is a view of it, and each form's JSON keeps its old keys."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_desched.descheduler.decisions import PodDecision
from pytest_desched.outcome.fates import Fate, Layer
from pytest_desched.outcome.ledger import Ledger, PodFate, PodRow, RoundFigures

# The keys each use wrote before the model was one (replay result JSON, evidence files, canary).
REPLAY_FATE_KEYS = [
    "fate", "layer", "detail", "strategy", "status_code", "checks", "inferred", "replacement",
    "at_s",
]  # fmt: skip
EXPERIMENT_ROW_KEYS = [
    "namespace", "name", "uid", "workload", "owner_kind", "node", "fate", "layer", "checks",
    "strategy", "audit_codes", "live_after",
]  # fmt: skip
LOG_FIGURE_KEYS = [
    "name", "by_fate", "by_layer", "total_evicted", "eviction_requests", "skipped", "dry_run",
    "duration_s", "caps", "audit_by_code", "errors", "extra",
]  # fmt: skip
RUNBOOK_FIGURE_KEYS = [
    "candidates", "replacements_listed", "protected", "nodefit", "limited", "pdb_refusals",
    "other_refusals", "evictions", "dry_run", "ready_latency_s", "pending", "final_skew",
    "verdict", "deciding_layer", "known_bugs", "metric_names", "version", "events_delivered",
    "events_owed", "no_cycle", "availability",
]  # fmt: skip


@dataclass
class Pod:
    namespace: str
    name: str
    uid: str
    node: str
    workload: str | None = "web"
    owner_kind: str | None = "ReplicaSet"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class Snap:
    pods: list[Pod]

    @property
    def live(self) -> list[Pod]:
        return self.pods


@dataclass
class Rnd:
    name: str = "round-1"


@dataclass
class View:
    before: Snap
    after: Snap
    decisions: list[PodDecision]
    refused_by_api: dict[str, list[int]] = field(default_factory=dict)
    audit: dict[str, Any] = field(default_factory=lambda: {"available": True})
    rnd: Rnd = field(default_factory=Rnd)


def view() -> View:
    a, b, c = (Pod("lab", n, f"uid-{n}", "w1") for n in ("a", "b", "c"))
    decisions = [
        PodDecision("lab", "a", Fate.FILTERED, Layer.EVICTOR_FILTER, checks=["minPodAge"]),
        PodDecision("lab", "a", Fate.EVICTED, Layer.API_SERVER, strategy="RemoveDuplicates"),
        PodDecision("lab", "b", Fate.FILTERED, Layer.EVICTOR_FILTER, checks=["minReplicas"]),
        PodDecision("lab", "b", Fate.LIMITED, Layer.LIMITS),
    ]
    return View(Snap([a, b, c]), Snap([b, c]), decisions, {"lab/a": [201]})


def test_an_experiment_round_is_a_one_round_ledger_with_its_old_rows() -> None:
    lg = Ledger.of(view())  # type: ignore[arg-type]
    rows = {f.name: f for f in lg.pods}
    assert (rows["a"].fate, rows["a"].deciding, rows["a"].evicted) == (
        Fate.EVICTED,
        "api-server(evicted)",
        True,
    )
    assert (rows["b"].fate, rows["b"].deciding, rows["b"].live_after) == (
        Fate.LIMITED,
        "eviction-limits",
        True,
    )  # the furthest link reached, not the last line
    assert (rows["c"].fate, rows["c"].layer, rows["c"].deciding) == (
        Fate.NOT_PICKED,
        Layer.POLICY,
        "policy",
    )
    assert [f.name for f in lg.select(pods=["lab/b", "c"])] == ["b", "c"]
    assert lg.select(workload="nope") == []
    d = json.loads(json.dumps(lg.to_dict()))
    assert list(d) == ["round", "audit_available", "pods"] and d["round"] == "round-1"
    assert [list(p) for p in d["pods"]] == [EXPERIMENT_ROW_KEYS] * 3
    assert d["pods"][0]["layer"] == "api-server(evicted)" and d["pods"][0]["audit_codes"] == [201]
    assert d["pods"][2]["fate"] == "not-picked"


def test_a_replay_ledger_keeps_its_json_keys() -> None:
    fate = PodFate("refused", "api-server", "429 TooManyRequests", status_code=429)
    assert fate.fate is Fate.REFUSED and fate.layer is Layer.API_SERVER  # words read as enums
    lg = Ledger("replay", "v0.36.0", [PodRow("ns/p", "w1", fates=[fate])], [RoundFigures("r1")])
    d = json.loads(json.dumps(lg.to_dict()))
    assert list(d) == ["source", "descheduler_version", "rows", "rounds", "comparison", "notes"]
    assert list(d["rows"][0]["fates"][0]) == REPLAY_FATE_KEYS
    assert (
        d["rows"][0]["fates"][0]["fate"] == "refused" and d["rows"][0]["fates"][0]["checks"] == []
    )
    assert list(d["rounds"][0]) == LOG_FIGURE_KEYS
    assert "refused 429" in lg.to_markdown() and "refused 429 [api-server]" in lg.to_text()


def test_round_figures_write_the_form_of_their_use() -> None:
    canary = RoundFigures(candidates=3, dry_run_fates=2, form="runbook")
    d = canary.to_dict()
    assert list(d) == RUNBOOK_FIGURE_KEYS and d["dry_run"] == 2
    assert RoundFigures("r1", dry_run=True).to_dict()["dry_run"] is True
    assert canary.events is None
    assert RoundFigures(events_delivered=1, events_owed=2).events == "1/2"


def test_the_fidelity_view_compares_what_a_dry_run_can_show() -> None:
    refused = PodFate(Fate.REFUSED, status_code=429, namespace="lab-b", name="web-1")
    filtered = PodFate(Fate.FILTERED, checks=("PodsWithoutPDB",))
    evicted = PodFate(Fate.EVICTED, strategy="RemoveDuplicates")
    assert (refused.shown(), refused.key) == ("refused(429)", "lab-b/web-1")
    assert filtered.shown() == "filtered(PodsWithoutPDB)"
    assert evicted.same_as() == ("evicted", "RemoveDuplicates")
    assert refused.same_as() == ("refused(429)", None)


def test_a_fate_outside_the_vocabulary_is_refused() -> None:
    with pytest.raises(ValueError, match="not a valid Fate"):
        PodFate("kinda-evicted")
