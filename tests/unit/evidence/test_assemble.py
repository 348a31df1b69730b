"""A round record built by one pure function from hand-made inputs, no cluster (issue 30 item 4).

`build_round_record(outcome, observation, run)` is the only way a Runner makes a record: these
tests hold it to its inputs (every field of each reaches the record), to purity (no clock, no
I/O, same inputs -> equal records, inputs left as they were) and to the record's keys.
"""

from __future__ import annotations

import builtins
import copy
import dataclasses
import socket
import subprocess
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from pytest_desched.descheduler.decisions import Fate, Layer, RoundResult
from pytest_desched.descheduler.rounds import Round
from pytest_desched.evidence.assemble import (
    LabObservation,
    RoundOutcome,
    RunFacts,
    build_round_record,
)
from pytest_desched.evidence.record import RoundRecord
from pytest_desched.lab.snapshot import PodInfo, Snapshot
from pytest_desched.providers.audit_log import EvictionRequest
from pytest_desched.providers.jobs import PodRun
from tests.unit.evidence.test_evidence import NAMESPACE, decision

T0 = 1000.0  # the experiment's start, monotonic
OFFSET = 1_700_000_000.0  # wall - monotonic
WALL = datetime.fromtimestamp(OFFSET + T0 + 2.0, UTC)  # 2 s into the experiment


def _pod(name: str, uid: str, node: str | None, phase: str = "Running") -> PodInfo:
    return PodInfo(name, uid, node, phase, phase == "Running", "rs-1", False, None, NAMESPACE)


def _round(name: str = "descheduler-positive", evicted: bool = True) -> Round:
    decisions = [decision(NAMESPACE, "api-1", Fate.REFUSED, Layer.API_SERVER, status_code=429)]
    if evicted:
        decisions.append(decision(NAMESPACE, "api-0", Fate.EVICTED, Layer.API_SERVER))
    run = PodRun(NAMESPACE, "round-pod", "pod-uid", "sa", ["descheduler"], 0, WALL, WALL, "")
    return Round(
        name=name,
        namespace="kube-system",
        job_uid=f"uid-{name}",
        succeeded=True,
        exit_code=0,
        logs="",
        result=RoundResult(decisions=decisions),
        started=T0 + 1.0,
        ended=T0 + 5.0,
        service_account="descheduler",
        executor="local-binary",
        pod_runs=[run],
        audit_requests=[EvictionRequest(NAMESPACE, "api-1", 429, "sa", "a-1", WALL)],
    )


def outcome(**kw: Any) -> RoundOutcome:
    before = Snapshot(
        T0, [_pod("api-0", "u0", "w-1"), _pod("api-1", "u1", "w-1")], {"disruptionsAllowed": 1}
    )
    base: dict[str, Any] = dict(
        round=_round(),
        before=before,
        audit={"available": True, "disagreements": []},
        replacement="ready",
        extra={"cycle": {"cycle": 1, "of": 2}, "notes": ["from assess"]},
        known_bugs={"descheduler#1882": "lister never started"},
        log_path="logs/descheduler-positive.log",
    )
    return RoundOutcome(**{**base, **kw})


def observation(**kw: Any) -> LabObservation:
    base: dict[str, Any] = dict(
        pending_pods=("api-2",),
        distribution_after={"w-1": 1, "w-2": 1},
        pdb_after={"disruptionsAllowed": 0},
        pdb_min_disruptions_allowed_seen=0,
        events=({"reason": "Evicted", "kind": "Pod", "name": "api-0", "uid": "u0"},),
        policy_applied="apiVersion: descheduler/v1alpha2\n",
        policy_digest="ab" * 32,
        policy_lint=("DL001 x: y: z; fix: w",),
        effective_policy={"profiles": []},
        pod_events=(
            {"t": T0 + 3.0, "uid": "u2", "name": "api-2", "node": "w-2", "ready": False},
            {"t": T0 + 4.0, "uid": "u2", "name": "api-2", "node": "w-2", "ready": True},
        ),
        pdb_statuses=((T0 + 0.5, 2, 1, 1), (T0 + 2.5, 1, 1, 0)),
        clock_offset_s=OFFSET,
        helm={"version": "v4.3.2", "major": "4", "apply": "server-side"},
    )
    return LabObservation(**{**base, **kw})


def run_facts(**kw: Any) -> RunFacts:
    base: dict[str, Any] = dict(
        label="positive-affinity-migration[runbook]",
        provider="embedded",
        namespace=NAMESPACE,
        namespaces=(NAMESPACE,),
        versions={"descheduler": "v0.36.0", "image": "registry.k8s.io/descheduler:v0.36.0"},
        chart={"source": "module", "version": "0.36.0"},
        policy_overrides=({"path": "p.minPodAge", "old": "10m", "new": "0s", "why": "lab"},),
        caps={"node": 1, "namespace": None, "total": 2},
        preflight={"can_i": {"evict": False}},
        inputs={"policy": {"file": "policy.yaml", "sha256": "cd" * 32}},
        run_label="desched.io/run=abc",
        t0=T0,
    )
    return RunFacts(**{**base, **kw})


# Each field of each input given a value unlike the one above: swapping it in must show.
OTHER: dict[type, dict[str, Any]] = {
    LabObservation: dict(
        pending_pods=(),
        distribution_after={"w-2": 2},
        pdb_after=None,
        pdb_min_disruptions_allowed_seen=1,
        events=(),
        policy_applied="other: policy\n",
        policy_digest="ef" * 32,
        policy_lint=(),
        effective_policy={},
        pod_events=(),
        pdb_statuses=(),
        clock_offset_s=OFFSET + 7.0,
        helm={"version": "v3.21.4", "major": "3", "apply": "client-side"},
    ),
    RunFacts: dict(
        label="nodefit[runbook]",
        provider="kind",
        namespace="other-ns",
        namespaces=(NAMESPACE, "second-ns"),
        versions={},
        chart={},
        policy_overrides=(),
        caps={},
        preflight=None,
        inputs=None,
        run_label="desched.io/run=xyz",
        t0=T0 - 1.0,
    ),
    RoundOutcome: dict(
        round=_round("descheduler-other", evicted=False),
        before=Snapshot(T0, [_pod("api-0", "u0", "w-2")], None),
        audit={"available": False, "why": "none"},
        replacement="missing",
        extra={},
        known_bugs={},
        log_path=None,
    ),
}
MAKE = {LabObservation: observation, RunFacts: run_facts, RoundOutcome: outcome}


def build(
    o: RoundOutcome | None = None, obs: LabObservation | None = None, run: RunFacts | None = None
) -> dict[str, Any]:
    return build_round_record(o or outcome(), obs or observation(), run or run_facts()).to_dict()


def test_a_record_from_hand_made_inputs() -> None:
    d = build()
    assert set(d) == {f.name for f in dataclasses.fields(RoundRecord)} | {"events_by_reason"}
    assert d["experiment"] == "positive-affinity-migration[runbook]" and d["provider"] == "embedded"
    assert d["evictions"] == 1 and d["verdict"] and d["decisions"]  # from the round's log
    assert d["pending_pods"] == ["api-2"] and d["distribution_after"] == {"w-1": 1, "w-2": 1}
    assert d["distribution_before"] == {"w-1": 2} and d["pdb_before"] == {"disruptionsAllowed": 1}
    assert (
        d["pdb_after"] == {"disruptionsAllowed": 0} and d["pdb_min_disruptions_allowed_seen"] == 0
    )
    assert d["events_by_reason"] == {"Evicted": ["u0"]}
    assert d["policy_lint"] == ["DL001 x: y: z; fix: w"] and d["policy_digest"] == "ab" * 32
    assert d["job"] == {
        "name": "descheduler-positive",
        "uid": "uid-descheduler-positive",
        "namespace": "kube-system",
        "succeeded": True,
        "exit_code": 0,
        "service_account": "descheduler",
        "executor": "local-binary",
        "run_label": "desched.io/run=abc",
    }
    assert (d["started_s"], d["ended_s"]) == (1.0, 5.0)
    assert [(e["what"], e["t_s"]) for e in d["timeline"]] == [
        ("job-created", 1.0),
        ("pod-started", 2.0),  # wall clock, put on the monotonic axis by the offset
        ("eviction-request", 2.0),
        ("replacement-scheduled", 3.0),
        ("replacement-ready", 4.0),
        ("job-complete", 5.0),
    ]
    assert [s["t_s"] for s in d["pdb_series"]] == [0.5, 2.5]
    assert d["cycle"] == {"cycle": 1, "of": 2} and d["notes"][0] == "from assess"
    assert d["known_bugs"] == {"descheduler#1882": "lister never started"}
    assert d["metrics"]["available"] is False  # no scrape: said, never guessed


def test_the_build_is_pure(monkeypatch: pytest.MonkeyPatch) -> None:
    """No clock, no socket, no process, no file; same inputs -> equal records; inputs intact."""
    o, obs, run = outcome(), observation(), run_facts()
    kept = copy.deepcopy((o, obs, run))

    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("the build reached outside its inputs")

    for mod, name in ((time, "time"), (time, "monotonic"), (socket, "socket")):
        monkeypatch.setattr(mod, name, refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(builtins, "open", refuse)
    first = build_round_record(o, obs, run)
    second = build_round_record(o, obs, run)
    monkeypatch.undo()
    assert first == second and first is not second
    assert (o, obs, run) == kept
    first.events[0]["reason"] = "changed"  # the record shares nothing with its inputs
    first.audit["available"] = False
    first.notes.append("x")
    assert (o, obs, run) == kept and second.events[0]["reason"] == "Evicted"
    with pytest.raises(dataclasses.FrozenInstanceError):  # and nobody finishes it later
        first.verdict = "changed"  # type: ignore[misc]


@pytest.mark.parametrize("kind", [LabObservation, RunFacts, RoundOutcome], ids=lambda k: k.__name__)
def test_every_input_field_reaches_the_record(kind: type) -> None:
    """Dropping a field of the observation (or of the run's facts, or the outcome) from the
    record makes its row here fail: swapping in another value must change the record."""
    other = OTHER[kind]
    assert set(other) == {f.name for f in dataclasses.fields(kind)}, "give every field a value"
    base = MAKE[kind]()
    args = {LabObservation: "obs", RunFacts: "run", RoundOutcome: "o"}[kind]
    plain = build()
    dropped = []
    for name, value in other.items():
        assert getattr(base, name) != value, name
        if build(**{args: dataclasses.replace(base, **{name: value})}) == plain:
            dropped.append(name)
    assert dropped == [], f"{kind.__name__} fields that do not reach the record: {dropped}"
