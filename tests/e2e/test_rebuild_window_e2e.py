"""The rebuild window on the embedded cluster (issue 50): replacements take time to be Ready.

One cluster for the module (its own, deleted after), with metrics-server for the incident's
utilization policy. A workload's declared start-up time holds its pods Pending through kwok's
pod-ready Stage delay; the incident experiments measure the capacity the owner had while its
replacements started. See docs/utilization.md, "The rebuild window".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pytest_desched.capabilities import KUBERNETES_METRICS
from pytest_desched.config import DeschedConfig
from pytest_desched.session import DeschedSession

pytestmark = pytest.mark.desched_selftest

STARTUP_S = 6.0


@pytest.fixture(scope="module")
def window_session(
    desched_settings: DeschedConfig, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DeschedSession]:
    """A session whose embedded cluster serves metrics.k8s.io (its own, deleted after)."""
    config = desched_settings.with_(provider="embedded", run_dir=tmp_path_factory.mktemp("rebuild"))
    session = DeschedSession(config)
    session.need_metrics((KUBERNETES_METRICS,), "rebuild-window")  # before the cluster starts
    with session:
        yield session


def _checks(res: Any) -> dict[str, bool]:
    return {c.id: c.ok for c in res.checks}


def test_declared_startup_holds_pods_pending(window_session: DeschedSession) -> None:
    """`startup_seconds` on a Deployment: each pod is Ready that long after it appeared, a
    pod of a workload without it at once; the watch times both (no sleep)."""
    from pytest_desched.lab import Deployment, Lab

    cluster = window_session.cluster
    lab = Lab(cluster, "desched-startup-probe")
    slow, fast = Deployment("slow", replicas=2, startup_seconds=STARTUP_S), Deployment("fast")
    try:
        with lab.record() as rec:
            snap = lab.apply(slow, fast, timeout=60 + STARTUP_S)
        took: dict[str, float] = {}
        for p in snap.live:
            seen = next(e["t"] for e in rec.pod_events if e["uid"] == p.uid)
            ready = rec.first_ready(p.uid)
            assert ready is not None, (p.name, rec.pod_events)
            took[p.name] = ready - seen
        slow_s = [t for n, t in took.items() if n.startswith("slow-")]
        fast_s = [t for n, t in took.items() if n.startswith("fast-")]
        assert len(slow_s) == 2 and len(fast_s) == 1, took
        # first seen is at the latest its binding; kwok counts from when it saw the pod bound
        assert all(STARTUP_S - 0.5 <= t <= STARTUP_S + 20 for t in slow_s), took
        assert all(t < STARTUP_S / 2 for t in fast_s), took
        pending = {e["name"] for e in rec.pod_events if e["phase"] == "Pending" and e["node"]}
        assert {p.name for p in snap.of("slow")} <= pending  # bound, and Pending while starting
        print(f"Ready after first seen: {took}")
    finally:
        lab.teardown()


def _window(res: Any) -> dict[str, Any]:
    """The last round record's availability of `web` (what the evidence carries)."""
    return res.records[-1]["availability"]["web"]


def test_incident_without_pdb_dips_and_is_measured(window_session: DeschedSession) -> None:
    """The runbook's incident: every eviction a 201, web below desired for the replacements'
    start; the record's figures measure it."""
    from pytest_desched.experiments.rebuild import REPLICAS, STARTUP_S

    res = window_session.run("rebuild-window")
    assert res.outcome == "pass", res.message
    checks = _checks(res)
    for cid in ("evicted-several-at-once", "capacity-dipped", "dip-lasted-the-start"):
        assert checks.get(cid), (cid, res.message)
    w = _window(res)
    assert w["desired"] == REPLICAS and w["min_available"] < REPLICAS, w
    assert w["below_desired_s"] >= STARTUP_S - 1, w
    assert w["pending_max"] >= 2 and w["recovered"], w
    rec = res.records[-1]
    evicted = {d["name"] for d in rec["decisions"] if d["fate"] == "evicted"}
    assert len(evicted) == res.evictions >= 2
    # full before the round; the dip is the evicted replicas, each replaced once
    assert w["available_before"] == REPLICAS and w["replacements"] == len(evicted), w
    assert w["min_available"] == REPLICAS - len(evicted), w
    # the runbook's evidence field: the slowest replacement took its declared start
    assert STARTUP_S - 0.5 <= rec["replacement_ready_latency_s"] == w["ready_latency_s"], w
    assert rec["audit"]["available"] and rec["audit"]["by_code"].get("201") == len(evicted)
    print(f"rebuild window without PDB: evicted {sorted(evicted)}; {w}")


def test_incident_with_pdb_is_held_at_min_available(window_session: DeschedSession) -> None:
    """The same round with PDB minAvailable 5: the API server answers 429, web keeps >= 5."""
    from pytest_desched.experiments.rebuild import PDB_MIN_AVAILABLE

    res = window_session.run("rebuild-window-pdb")
    assert res.outcome == "pass", res.message
    checks = _checks(res)
    for cid in ("api-server-said-429", "capacity-held-at-min-available", "pdb-healthy"):
        assert checks.get(cid), (cid, res.message)
    w = _window(res)
    assert w["min_available"] >= PDB_MIN_AVAILABLE, w
    rec = res.records[-1]
    assert rec["audit"]["by_code"].get("429", 0) >= 1, rec["audit"]
    assert rec["audit"]["by_code"].get("201") == res.evictions == w["replacements"] == 1, w
    print(f"rebuild window with PDB: audit {rec['audit']['by_code']}; {w}")


def test_canary_compares_the_rebuild_window_between_tracks(desched_canary: Any) -> None:
    """A/A canary of the incident with its PDB (v0.36.0 against itself, each track its own
    cluster with metrics-server): both tracks' round figures carry web's window, the report
    shows it, and the same release changes none of the compared figures."""
    from pytest_desched.experiments.rebuild import PDB_MIN_AVAILABLE, REPLICAS

    rep = desched_canary(  # its tracks serve metrics: embedded, as this file's session
        "version:v0.36.0",
        None,
        experiments=["rebuild-window-pdb"],
        static=False,
        provider="embedded",
    )
    assert rep.baseline.error is None and rep.candidate.error is None, rep.verdict.reasons
    (rd,) = [r for r in rep.rounds if r.experiment == "rebuild-window-pdb[own-policy]"]
    assert rd.baseline is not None and rd.candidate is not None
    for f in (rd.baseline, rd.candidate):
        web = f.availability["web"]
        assert web["desired"] == REPLICAS and web["min_available"] >= PDB_MIN_AVAILABLE, web
        assert f.pdb_refusals >= 1 and f.evictions == 1, f.to_dict()
    assert rd.baseline.min_available == rd.candidate.min_available == "web 5/6"
    assert rd.capacity == [], [d.to_dict() for d in rd.capacity]  # within the slack
    assert rep.ok, rep.verdict.reasons
    assert "min available" in rep.markdown()
    print(f"canary: {rd.baseline.availability['web']} / {rd.candidate.availability['web']}")


def test_incident_with_grace_holds_terminating_pods(window_session: DeschedSession) -> None:
    """Termination grace (kwok honours the pods' 30 s): every evicted pod stays Terminating
    about its grace, the record times it per owner; the dip is still the start (< grace)."""
    from pytest_desched.experiments.rebuild import (
        GRACE_EARLY_S,
        GRACE_LATE_S,
        GRACE_S,
        REPLICAS,
        STARTUP_S,
    )

    res = window_session.run("rebuild-window-grace")
    assert res.outcome == "pass", res.message
    checks = _checks(res)
    for cid in ("evicted-pods-terminated-with-grace", "dip-is-the-start-not-the-grace"):
        assert checks.get(cid), (cid, res.message)
    w = _window(res)
    rec = res.records[-1]
    evicted = {d["name"] for d in rec["decisions"] if d["fate"] == "evicted"}
    assert len(evicted) == res.evictions >= 2, evicted
    assert w["min_available"] == REPLICAS - len(evicted) < w["desired"] == REPLICAS, w
    # the dip: at least the start, shorter than the grace (replaced at once, not after it)
    assert STARTUP_S - 1 <= w["below_desired_s"] < GRACE_S, w
    # every evicted pod Terminating at once, each about its grace, all gone by the end
    assert w["terminating_max"] >= len(evicted) and w["terminating_after"] == 0, w
    assert GRACE_S - GRACE_EARLY_S <= w["terminating_longest_s"] <= GRACE_S + GRACE_LATE_S, w
    assert w["terminating_s"] >= GRACE_S - GRACE_EARLY_S and w["recovered"], w
    print(f"rebuild window with {GRACE_S} s grace: evicted {sorted(evicted)}; {w}")


def test_incident_with_local_volume_leaves_a_replacement_pending(
    window_session: DeschedSession,
) -> None:
    """A pod on a local PV of the (cordoned) source node: its eviction succeeds, its
    replacement stays Pending with the scheduler's volume node affinity conflict, and the
    record shows db below desired to the window's end; web recovers elsewhere."""
    from pytest_desched.experiments.rebuild import REPLICAS, STARTUP_S, names_volume_conflict

    res = window_session.run("rebuild-window-volume")
    assert res.outcome == "pass", res.message
    checks = _checks(res)
    for cid in ("db-evicted", "db-replacement-pending", "scheduler-named-the-volume"):
        assert checks.get(cid), (cid, res.message)
    rec = res.records[-1]
    db, web = rec["availability"]["db"], rec["availability"]["web"]
    evicted = {d["name"] for d in rec["decisions"] if d["fate"] == "evicted"}
    assert any(n.startswith("db-") for n in evicted), evicted
    assert (db["desired"], db["available_before"], db["min_available"]) == (1, 1, 0), db
    assert db["pending_after"] == 1 and db["pending_max"] == 1 and not db["recovered"], db
    # below desired from its eviction to the window's end, and at least web's start
    assert abs(db["below_desired_s"] - (db["window_s"] - db["min_at_s"])) <= 1.0, db
    assert db["below_desired_s"] >= STARTUP_S - 1, db
    assert web["recovered"] and web["desired"] == REPLICAS and web["pending_after"] == 0, web
    pending = [p for p in rec["pending_pods"] if "db-" in p]
    assert len(pending) == 1 and len(rec["pending_pods"]) == 1, rec["pending_pods"]
    said = [
        e["message"]
        for e in rec["events"]
        if e["reason"] == "FailedScheduling" and e["name"].startswith("db-")
    ]
    assert said and all(names_volume_conflict(m) for m in said), (said, rec["events"])
    print(f"rebuild window with a local volume: evicted {sorted(evicted)}; db {db}; {said}")
