"""A host restore's writes at the API server's pace (replay/rebuild/paced.py) and their order
(api_restore.object_tiers / workload_tiers): doubles for the server, the clock and the sleep."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import threading
import time
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from pytest_desched.replay.gen.generator import Shape, generate
from pytest_desched.replay.rebuild import api_restore
from pytest_desched.replay.rebuild.api_restore import object_tiers, workload_tiers
from pytest_desched.replay.rebuild.paced import (
    MAX_RETRY_AFTER_S,
    Pacer,
    ThrottledError,
    throttle_delay,
)
from pytest_desched.replay.rebuild.plan import BUILTIN_NAMESPACES, plan_restore
from pytest_desched.replay.rebuild.restore import RestoreResult
from pytest_desched.replay.rebuild.writes import RestoreError

NOW = dt.datetime(2026, 12, 6, 20, 0, 0, tzinfo=dt.UTC)


def answer(status: int, retry_after: str | None = None, body: dict | None = None) -> ApiException:
    exc = ApiException(status=status, reason="Too Many Requests" if status == 429 else "Error")
    exc.headers = {"Retry-After": retry_after} if retry_after is not None else {}
    exc.body = json.dumps(body or {"kind": "Status", "reason": "TooManyRequests"})
    return exc


class FakeTime:
    """A clock that moves only when someone sleeps: what the pacer waited is exact."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []
        self.lock = threading.Lock()

    def clock(self) -> float:
        with self.lock:
            return self.now

    def sleep(self, s: float) -> None:
        with self.lock:
            self.slept.append(s)
            self.now += s


# -- the server's answers ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("exc", "want"),
    [
        (answer(429, "3"), 3.0),  # APF's rejection names its wait
        (answer(429, "1"), 1.0),
        (answer(429), 0.0),  # a throttle naming no time: the pacer's own backoff
        (answer(429, "600"), MAX_RETRY_AFTER_S),  # capped
        (answer(429, "Wed, 21 Oct 2026 07:28:00 GMT"), 0.0),  # a date: the backoff
        (answer(500, None, {"details": {"retryAfterSeconds": 2}}), 2.0),  # ServerTimeout
        (answer(503, "4"), 4.0),
        (answer(500), None),  # a 5xx naming no wait is a failure, not a throttle
        (answer(409), None),
        (answer(403, "5"), None),  # a refusal is never retried, whatever it carries
        (ValueError("x"), None),
    ],
)
def test_throttle_delay_reads_the_servers_answer(exc: BaseException, want: float | None) -> None:
    assert throttle_delay(exc) == want


def test_header_names_are_case_insensitive() -> None:
    exc = answer(429)
    exc.headers = {"retry-after": "2"}
    assert throttle_delay(exc) == 2.0


# -- one write ----------------------------------------------------------------------------
def test_a_429_waits_what_the_server_said_and_retries_the_same_write() -> None:
    t = FakeTime()
    pacer = Pacer(workers=4, clock=t.clock, sleep=t.sleep)
    tries: list[float] = []

    def write() -> str:
        tries.append(t.clock())
        if len(tries) < 3:
            raise answer(429, "2")
        return "created"

    assert pacer.call(write, "create Pod a/b") == "created"
    assert tries == [0.0, 2.0, 4.0]  # each retry exactly after the server's Retry-After
    assert pacer.stats.throttled == 2 and pacer.stats.writes == 1
    assert pacer.stats.waited_s == pytest.approx(4.0)
    assert pacer.stats.lowest_limit == 1  # halved twice: 4 -> 2 -> 1
    assert "throttled 2" in pacer.stats.note(pacer.bound)


def test_a_429_without_retry_after_backs_off_doubling() -> None:
    t = FakeTime()
    pacer = Pacer(workers=2, clock=t.clock, sleep=t.sleep)
    tries: list[float] = []

    def write() -> None:
        tries.append(t.clock())
        if len(tries) < 4:
            raise answer(429)

    pacer.call(write, "create Pod a/b")
    gaps = [b - a for a, b in itertools.pairwise(tries)]
    assert gaps == [0.5, 1.0, 2.0]


def test_a_refusal_is_raised_at_once_and_never_retried() -> None:
    t = FakeTime()
    pacer = Pacer(workers=2, clock=t.clock, sleep=t.sleep)
    calls = []

    def write() -> None:
        calls.append(1)
        raise RestoreError("create Pod a/b: HTTP 403 Forbidden: quota")

    with pytest.raises(RestoreError, match="403"):
        pacer.call(write, "create Pod a/b")
    assert calls == [1] and t.slept == [] and pacer.limit == 2


def test_a_server_that_keeps_throttling_fails_naming_the_object() -> None:
    t = FakeTime()
    pacer = Pacer(workers=2, clock=t.clock, sleep=t.sleep, max_attempts=3)

    def write() -> None:
        raise answer(429, "1")

    with pytest.raises(ThrottledError, match=r"create Pod ns/p: .*HTTP 429.* after 3 tries"):
        pacer.call(write, "create Pod ns/p")


# -- many writes ----------------------------------------------------------------------------
def test_one_throttle_holds_every_writer_until_the_servers_time() -> None:
    """The gate is shared: after one 429 with Retry-After 5, no write of any thread starts
    before t=5 (the server throttles the flow, not one request)."""
    t = FakeTime()
    pacer = Pacer(workers=1, clock=t.clock, sleep=t.sleep)
    starts: list[tuple[int, float]] = []
    thrown = []

    def write(i: int) -> int:
        starts.append((i, t.clock()))
        if i == 1 and not thrown:
            thrown.append(i)
            raise answer(429, "5")
        return i * 10

    assert pacer.map(write, range(4), str) == [0, 10, 20, 30]  # results in the items' order
    assert starts[0] == (0, 0.0) and starts[1] == (1, 0.0)
    assert all(at >= 5.0 for _, at in starts[2:])


def test_concurrency_is_bounded_halved_on_a_throttle_and_grown_back() -> None:
    pacer = Pacer(workers=6)
    active, peak = [0], [0]
    lock = threading.Lock()
    throttled = []

    def write(i: int) -> int:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            time.sleep(0.005)
            if i == 10 and not throttled:
                throttled.append(i)
                raise answer(429, "0.05")
            return i
        finally:
            with lock:
                active[0] -= 1

    assert pacer.map(write, range(200), str) == list(range(200))
    assert 1 < peak[0] <= 6  # concurrent, never above the bound
    assert pacer.stats.throttled == 1 and pacer.stats.lowest_limit == 3
    assert pacer.limit == 6  # grew back after runs of successes
    assert pacer.stats.writes == 200


def test_tiers_run_one_after_another() -> None:
    """A tier's first write starts only after every write of the tier before was answered."""
    pacer = Pacer(workers=8)
    events: list[tuple[str, str, float]] = []
    lock = threading.Lock()

    def write(item: tuple[str, int]) -> None:
        with lock:
            events.append(("start", item[0], time.monotonic()))
        time.sleep(0.002 * (item[1] % 3))
        with lock:
            events.append(("end", item[0], time.monotonic()))

    tiers = [(name, [(name, i) for i in range(12)]) for name in ("a", "b", "c")]
    reported: list[str] = []
    pacer.tiers(tiers, write, lambda x: f"{x}", reported.append)
    for before, after in (("a", "b"), ("b", "c")):
        last_end = max(at for kind, tier, at in events if kind == "end" and tier == before)
        first_start = min(at for kind, tier, at in events if kind == "start" and tier == after)
        assert last_end <= first_start
    assert [r.split(" ")[1:3] for r in reported] == [["12", "a"], ["12", "b"], ["12", "c"]]


# -- the order of a host restore's writes ---------------------------------------------------
def _plan() -> Any:
    return plan_restore(generate(Shape(seed=3, nodes=20, pods=300)), now=NOW)


def test_object_tiers_put_what_pods_need_first() -> None:
    plan = _plan()
    tiers = object_tiers(plan)
    names = [n for n, _ in tiers]
    assert names == ["namespaces", "pod dependencies", "claims"]
    kinds = {n: {o["kind"] for o in objs} for n, objs in tiers}
    assert kinds["namespaces"] == {"Namespace"}
    assert {"ServiceAccount", "PriorityClass", "PodDisruptionBudget"} <= kinds["pod dependencies"]
    assert kinds["claims"] <= {"PersistentVolumeClaim"}
    # a claim comes after the StorageClass and the PV it names
    earlier = {(o["kind"], o["metadata"]["name"]) for o in tiers[1][1]}
    for pvc in tiers[2][1]:
        spec = pvc.get("spec") or {}
        if spec.get("storageClassName"):
            assert ("StorageClass", spec["storageClassName"]) in earlier
        if spec.get("volumeName"):
            assert ("PersistentVolume", spec["volumeName"]) in earlier
    assert not any(o["metadata"]["name"] in BUILTIN_NAMESPACES for o in tiers[0][1])
    # every object of the plan's API sections once, nodes apart (written before, and waited on)
    want = sum(len(v) for k, v in plan.api.items() if k != "nodes")
    builtin = sum(
        1 for n in plan.api.get("namespaces", []) if n["metadata"]["name"] in BUILTIN_NAMESPACES
    )
    assert sum(len(objs) for _, objs in tiers) == want - builtin


def test_workload_tiers_pods_then_owners_bottom_up() -> None:
    plan = _plan()
    tiers = workload_tiers(plan)
    assert [n for n, _ in tiers] == ["pods", "workload controllers", "deployments"]
    assert {o["kind"] for o in tiers[0][1]} == {"Pod"} and len(tiers[0][1]) == len(plan.pods)
    assert {o["kind"] for o in tiers[1][1]} <= {"ReplicaSet", "StatefulSet", "DaemonSet"}
    assert {o["kind"] for o in tiers[2][1]} == {"Deployment"}
    owners = sum(len(v) for v in plan.owners.values())
    assert len(tiers[1][1]) + len(tiers[2][1]) == owners


def test_restore_via_api_writes_in_tier_order_and_maps_the_servers_uids(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a double for the API server: each tier's creates all come before the next tier's,
    pods carry no workload owner, and the plan speaks the server's new owner UIDs after."""
    plan = _plan()
    created: list[tuple[str, dict]] = []
    lock = threading.Lock()
    n = [0]

    def create(api: Any, path: str, body: dict, tolerate_exists: bool = False) -> dict:
        with lock:
            created.append((body["kind"], body))
            n[0] += 1
            return {**body, "metadata": {**body["metadata"], "uid": f"server-{n[0]}"}}

    monkeypatch.setattr(api_restore, "create", create)
    # after the creates: stop at the wait (the adoption is the controllers', not this test's)
    monkeypatch.setattr(api_restore, "wait_for", lambda *a, **k: (_ for _ in ()).throw(StopAsync))
    result = RestoreResult(method="api", ages="shift", shift_s=0.0)
    with pytest.raises(StopAsync):
        api_restore.restore_via_api(None, plan, result, 5, lambda _m: None, Pacer(workers=4))
    rank = {"Pod": 0, "ReplicaSet": 1, "StatefulSet": 1, "DaemonSet": 1, "Deployment": 2}
    ranks = [rank[k] for k, _ in created]
    assert ranks == sorted(ranks)  # concurrent within a tier, never across tiers
    for kind, body in created:
        if kind == "Pod":
            refs = body["metadata"].get("ownerReferences") or []
            assert not any(r["kind"] in rank for r in refs)
            assert "uid" not in body["metadata"] and "status" not in body
    owner_uids = {o["metadata"]["uid"] for objs in plan.owners.values() for o in objs}
    assert owner_uids and all(u.startswith("server-") for u in owner_uids)
    assert {f["ownerUid"] for f in plan.expected.values()} <= owner_uids | {None, ""}


class StopAsync(Exception):
    pass


def test_pod_poll_grows_with_the_pods_and_is_bounded() -> None:
    """The restored-pods wait lists every pod each poll: seldom for 10,000, never rarer than 5 s."""
    pod_poll_s = api_restore.pod_poll_s
    assert pod_poll_s(0) == 1.0
    assert pod_poll_s(1_000) == 1.0
    assert pod_poll_s(10_000) == 5.0
    assert pod_poll_s(200_000) == 5.0
    assert pod_poll_s(4_000) == 2.0
