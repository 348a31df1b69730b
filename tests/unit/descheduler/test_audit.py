"""The API server's audit log read into eviction requests and cross-checked with the round log.

Golden data: real audit lines and round logs from the embedded cluster (data/audit/README.md).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from pytest_desched.descheduler import audit
from pytest_desched.descheduler.audit import AuditView
from pytest_desched.descheduler.decisions import Fate, Layer, PodDecision, RoundResult
from pytest_desched.descheduler.logparse import parse_log
from pytest_desched.providers import audit_log
from pytest_desched.providers.audit_log import AuditWindow, EvictionRequest
from pytest_desched.providers.base import Cluster
from pytest_desched.tools.resources import manifest_path
from tests.unit import DATA_ROOT

DATA = DATA_ROOT / "audit"
LAB = "descheduler-lab"
SA = "system:serviceaccount:kube-system:descheduler"
NO_EVICT_SA = "system:serviceaccount:kube-system:desched-no-audit-7b2cb"


def lines(name: str) -> list[bytes]:
    return (DATA / name).read_bytes().splitlines(keepends=True)


def round_result(name: str) -> RoundResult:
    return parse_log((DATA / name).read_text())


def write(path: Path, chunks: list[bytes]) -> Path:
    path.write_bytes(b"".join(chunks))
    return path


@pytest.fixture
def rbac_log(tmp_path: Path) -> Path:
    return write(tmp_path / "audit.log", lines("rbac-403-then-201.audit.log"))


def test_real_429_lines_parse_to_eviction_requests(tmp_path: Path) -> None:
    path = write(tmp_path / "audit.log", lines("pdb-429.audit.log"))
    evictions, offset = audit_log.read_evictions(path)
    assert offset == path.stat().st_size
    assert [r.code for r in evictions] == [429, 429, 429]
    assert {r.user for r in evictions} == {SA}
    assert {(r.verb, r.subresource, r.stage, r.namespace) for r in evictions} == {
        ("create", "eviction", "ResponseComplete", LAB)
    }
    first = evictions[0]
    assert first.pod == "spread-demo-5d48967fdd-m2vmp"
    assert first.reason == "TooManyRequests"
    assert first.audit_id and first.stage_ts is not None and first.stage_ts.tzinfo is not None
    assert first.stage_ts.isoformat().startswith("2026-11-29T23:5")


def test_read_requests_keeps_pod_deletes_and_their_users(tmp_path: Path) -> None:
    path = write(tmp_path / "audit.log", lines("pdb-429.audit.log"))
    reqs, _ = audit_log.read_requests(path)
    deletes = [r for r in reqs if r.is_delete]
    assert len(reqs) == 11 and len(deletes) == 8
    assert {r.user for r in deletes} == {"kwok-admin"}
    assert {r.code for r in deletes} <= {200, 404, 409}


def test_metadata_level_eviction_lines_carry_no_pod_uid() -> None:
    """Why the caller must map pod name -> UID from its own snapshot."""
    for name in ("pdb-429.audit.log", "rbac-403-then-201.audit.log"):
        for raw in lines(name):
            event = json.loads(raw)
            if event["objectRef"].get("subresource") == "eviction":
                assert "uid" not in event["objectRef"]
                assert event["level"] == "Metadata" and "requestObject" not in event


def test_partial_last_line_is_left_for_the_next_read(tmp_path: Path) -> None:
    real = lines("rbac-403-then-201.audit.log")
    half = len(real[3]) // 2
    path = write(tmp_path / "audit.log", [*real[:3], real[3][:half]])
    first, offset = audit_log.read_evictions(path)
    assert [r.code for r in first] == [403, 403, 403]
    assert offset == sum(len(x) for x in real[:3])
    with path.open("ab") as fh:
        fh.write(real[3][half:])
    second, offset2 = audit_log.read_evictions(path, offset)
    assert [(r.code, r.user) for r in second] == [(201, SA)]
    assert offset2 == path.stat().st_size


def test_garbage_and_missing_file_are_tolerated(tmp_path: Path) -> None:
    path = write(tmp_path / "audit.log", [b"not json\n", b"[1]\n", lines("pdb-429.audit.log")[0]])
    reqs, offset = audit_log.read_evictions(path)
    assert len(reqs) == 1 and offset == path.stat().st_size
    assert audit_log.read_evictions(tmp_path / "absent.log", 7) == ([], 7)


def test_window_sees_only_what_was_appended_after_it_opened(tmp_path: Path) -> None:
    real = lines("rbac-403-then-201.audit.log")
    path = write(tmp_path / "audit.log", real[:3])  # the earlier round
    window = AuditWindow(path)
    assert window.start == path.stat().st_size and window.read() == []
    with path.open("ab") as fh:
        fh.writelines(real[3:])
    reqs, waited, complete = window.collect(expected=1, timeout=5)
    assert complete and waited < 5
    assert [(r.code, r.user) for r in reqs if r.is_eviction] == [(201, SA)]
    assert len(reqs) == len(real) - 3  # the deletes that followed are in the window too


def test_window_collect_times_out_honestly(tmp_path: Path) -> None:
    path = write(tmp_path / "audit.log", lines("pdb-429.audit.log"))
    window = AuditWindow(path)
    reqs, waited, complete = window.collect(expected=1, timeout=0.3)
    assert reqs == [] and complete is False and waited >= 0.3


def test_window_on_a_rotated_log_reads_the_new_file_from_its_start(tmp_path: Path) -> None:
    real = lines("pdb-429.audit.log")
    path = write(tmp_path / "audit.log", real)
    window = AuditWindow(path)
    write(path, real[:1])  # rotated: a new, shorter file
    assert [r.code for r in window.read()] == [429]


def test_expected_requests_counts_answered_api_calls_only() -> None:
    assert audit.expected_requests(round_result("rbac-403.round.log")) == 3
    assert audit.expected_requests(round_result("evicted-201.round.log")) == 1  # + 1 limited
    assert audit.expected_requests(round_result("pdb-429.round.log")) == 3
    dry = RoundResult(dry_run=True, decisions=[PodDecision(LAB, "p", Fate.DRY_RUN, Layer.DRY_RUN)])
    assert audit.expected_requests(dry) == 0


def _reqs(name: str, start: int = 0, stop: int | None = None) -> list[EvictionRequest]:
    return [
        r
        for raw in lines(name)[start:stop]
        if (r := audit_log.parse_event(json.loads(raw))) is not None
    ]


@pytest.mark.parametrize(
    ("round_log", "audit_log", "start", "stop", "user", "codes"),
    [
        ("rbac-403.round.log", "rbac-403-then-201.audit.log", 0, 3, NO_EVICT_SA, [403]),
        ("evicted-201.round.log", "rbac-403-then-201.audit.log", 3, None, SA, [201]),
        ("pdb-429.round.log", "pdb-429.audit.log", 0, None, SA, [429]),
    ],
    ids=["rbac-403", "evicted-201", "pdb-429"],
)
def test_real_rounds_agree_with_their_audit_window(
    round_log: str, audit_log: str, start: int, stop: int | None, user: str, codes: list[int]
) -> None:
    result = round_result(round_log)
    reqs = _reqs(audit_log, start, stop)
    uids = {f"{LAB}/{r.pod}": f"uid-{r.pod[-5:]}" for r in reqs}
    view = audit.compare(result, reqs, uids, {LAB}, user=user)
    assert view.available and view.agrees, view.disagreements
    assert view.users == [user]
    moved = result.by_fate(Fate.EVICTED) + result.by_fate(Fate.REFUSED)
    assert sorted(view.pods) == sorted(d.key for d in moved)
    for d in moved:
        assert view.codes(LAB, d.name) == codes
        assert view.pods[d.key].uid == uids[d.key]
    assert view.evicted_201 == result.total_evicted
    assert not view.outside_lab and not view.direct_deletes
    assert json.loads(json.dumps(view.to_dict()))["agrees"] is True


def test_log_says_evicted_but_audit_has_429() -> None:
    result = round_result("evicted-201.round.log")
    reqs = [
        dataclasses.replace(r, code=429) if r.is_eviction else r
        for r in _reqs("rbac-403-then-201.audit.log", 3)
    ]
    view = audit.compare(result, reqs, user=SA)
    pod = result.by_fate(Fate.EVICTED)[0].key
    assert not view.agrees
    assert any(pod in d and "evicted" in d and "429" in d for d in view.disagreements)
    assert any(pod in d and "answered 429" in d and "no decision" in d for d in view.disagreements)
    assert any(
        "totalEvicted=1" in d and "0 evictions answered 201" in d for d in view.disagreements
    )


def test_audit_201_without_a_decision_and_total_mismatch() -> None:
    """The 403 round's log (nothing evicted) against an audit window that shows a 201."""
    result = round_result("rbac-403.round.log")
    reqs = _reqs("rbac-403-then-201.audit.log", 0, 3)
    extra = dataclasses.replace(
        _reqs("rbac-403-then-201.audit.log", 3, 4)[0], pod="spread-demo-unrelated"
    )
    view = audit.compare(result, [*reqs, extra], {}, {LAB})
    assert any(
        "spread-demo-unrelated" in d and "201" in d and "no decision" in d
        for d in view.disagreements
    )
    assert any(
        "totalEvicted=0" in d and "1 evictions answered 201" in d for d in view.disagreements
    )


def test_refused_code_must_match() -> None:
    result = round_result("pdb-429.round.log")
    reqs = _reqs("pdb-429.audit.log")
    reqs[0] = dataclasses.replace(reqs[0], code=403)
    view = audit.compare(result, reqs)
    assert any(reqs[0].pod in d and "refused with 429" in d for d in view.disagreements)
    assert any(reqs[0].pod in d and "answered 403" in d for d in view.disagreements)


def test_outside_lab_eviction_is_listed() -> None:
    result = RoundResult(
        decisions=[PodDecision("prod", "db-0", Fate.EVICTED, Layer.API_SERVER)],
        total_evicted=1,
    )
    real = _reqs("rbac-403-then-201.audit.log", 3, 4)[0]
    req = dataclasses.replace(real, namespace="prod", pod="db-0")
    view = audit.compare(result, [req], {"prod/db-0": "u-db"}, {LAB}, user=SA)
    assert view.outside_lab == ["prod/db-0 (uid u-db)"]
    assert view.agrees  # the log agrees; being outside the lab is reported, not hidden


def test_request_by_another_user_disagrees() -> None:
    result = round_result("evicted-201.round.log")
    view = audit.compare(result, _reqs("rbac-403-then-201.audit.log", 3), user=NO_EVICT_SA)
    assert any(f"made by {SA!r}" in d for d in view.disagreements)


def test_dry_run_round_with_requests_disagrees() -> None:
    reqs = _reqs("rbac-403-then-201.audit.log", 3, 4)
    view = audit.compare(RoundResult(dry_run=True, total_evicted=1), reqs)
    assert any("dry-run" in d for d in view.disagreements)
    assert audit.compare(RoundResult(dry_run=True, total_evicted=1), []).agrees


def test_direct_delete_by_the_descheduler_is_a_disagreement() -> None:
    result = round_result("evicted-201.round.log")
    reqs = _reqs("rbac-403-then-201.audit.log", 3)
    kwok_delete = next(r for r in reqs if r.is_delete)
    assert audit.compare(result, reqs, user=SA).agrees  # kwok-admin's deletes are expected
    bypass = dataclasses.replace(kwok_delete, user=SA, code=200)
    view = audit.compare(result, [*reqs, bypass], user=SA)
    assert view.direct_deletes and bypass.pod in view.direct_deletes[0]
    assert any("bypassing the eviction API" in d for d in view.disagreements)


def test_api_error_without_code_may_explain_one_answer() -> None:
    real = _reqs("pdb-429.audit.log")[0]
    err = PodDecision(LAB, real.pod, Fate.ERROR, Layer.API_SERVER, message="connection reset")
    view = audit.compare(RoundResult(decisions=[err], total_evicted=0), [real])
    assert view.agrees, view.disagreements
    twice = audit.compare(RoundResult(decisions=[err], total_evicted=0), [real, real])
    assert any("answered 429 (1x)" in d for d in twice.disagreements)


def test_unavailable_view_says_why_and_claims_nothing() -> None:
    why = audit_log.unreadable_reason("kind")
    view = audit.compare(round_result("evicted-201.round.log"), None, unavailable_why=why)
    assert view == AuditView.unavailable(why)
    d = view.to_dict()
    assert d["available"] is False and d["agrees"] is False and d["unavailable_why"] == why
    assert "falling back to events and UIDs" in why and d["pods"] == {} and not d["disagreements"]


def test_cluster_without_audit_log_records_a_reason(tmp_path: Path) -> None:
    kind = Cluster("c", "kind", tmp_path / "kc", toolchain=None)  # type: ignore[arg-type]
    assert kind.audit_log is None
    assert kind.audit_unavailable_why == (
        "kind: the API server's audit log is not readable from the test process; "
        "falling back to events and UIDs"
    )
    emb = Cluster("e", "embedded", tmp_path / "kc", None, audit_log=tmp_path / "a.log")  # type: ignore[arg-type]
    assert emb.audit_unavailable_why is None


def test_shipped_audit_policy_records_only_evictions_and_pod_deletes() -> None:
    policy = yaml.safe_load(manifest_path("audit-policy.yaml").read_text())
    assert policy["apiVersion"] == "audit.k8s.io/v1" and policy["kind"] == "Policy"
    assert "RequestReceived" in policy["omitStages"]
    rules = policy["rules"]
    assert rules[0] == {
        "level": "Metadata",
        "verbs": ["create"],
        "resources": [{"group": "", "resources": ["pods/eviction"]}],
    }
    assert rules[1]["verbs"] == ["delete"] and rules[1]["resources"][0]["resources"] == ["pods"]
    assert rules[-1] == {"level": "None"}
