"""Every pod a replay round saw gets a ledger row with its origin (issue 39 case 13): the
snapshot's, a replacement, or born during the window at its moment. No cluster."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

from pytest_desched.evidence.loops import cycles_from_ledger
from pytest_desched.replay.ledger import Ledger, PodFate, PodRow
from pytest_desched.replay.rebuild.plan import RUNNER_NODE
from pytest_desched.replay.rows import ABSENT, BORN, born_origin, born_rows, in_scope, left_out
from pytest_desched.replay.timeline.run import TimelineDriver

RS = "ReplicaSet/web-7c9d"
START = dt.datetime(2026, 12, 2, 10, 0, tzinfo=dt.UTC).timestamp()


def _pod(name: str, node: str | None, created_s: float, owner: str | None = "web-7c9d") -> Any:
    meta: dict[str, Any] = {
        "namespace": "prod",
        "name": name,
        "uid": name,
        "creationTimestamp": dt.datetime.fromtimestamp(START + created_s, dt.UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        ),
    }
    if owner:
        meta["ownerReferences"] = [
            {"kind": "ReplicaSet", "name": owner, "uid": f"uid-{owner}", "controller": True}
        ]
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}}


def _moment(wall: float) -> float | None:  # a 10x window clock that started at START
    return None if wall < START else round((wall - START) * 10, 2)


def test_pods_born_in_the_window_get_rows_with_their_moment() -> None:
    """A Deployment scaled up in the window: the round saw 4 snapshot pods and 4 new ones and
    decided all 8; the ledger listed the 4 snapshot rows only."""
    snapshot = {f"prod/web-7c9d-s{i}": PodRow(f"prod/web-7c9d-s{i}", "n1") for i in range(4)}
    new = [_pod(f"web-7c9d-n{i}", "n2", 3.0 + i) for i in range(4)]
    seen = [_pod(f"web-7c9d-s{i}", "n1", -600) for i in range(4)] + new
    seen += [_pod("descheduler-replay-1-abcde", RUNNER_NODE, 5, owner="job")]  # the runner's
    seen += [_pod("web-7c9d-pending", None, 6)]  # on no node: no descheduler sees it
    decided = dict.fromkeys(["prod/web-7c9d-n0", "prod/web-7c9d-s0", "prod/bare-gone"], "n2")
    decided["prod/descheduler-replay-1-abcde"] = None  # on the runner node (the API's list)
    decided["prod/node-agent-x1"] = RUNNER_NODE  # a DaemonSet's pod there (the log's node)
    decided["prod/descheduler-replay-2-fghij"] = None  # this round's own pod, made after
    rows = born_rows(seen, decided, snapshot, 2, _moment, own="prod/descheduler-replay-2-")
    got = {r.pod: r for r in rows}
    assert sorted(got) == ["prod/bare-gone"] + [f"prod/web-7c9d-n{i}" for i in range(4)]
    n1 = got["prod/web-7c9d-n1"]
    assert (n1.origin, n1.node, n1.owner) == ("created in window at t=40.0s", "n2", RS)
    assert [f.fate for f in n1.fates] == [ABSENT]  # round 1 came before it: not a replacement
    assert cycles_from_ledger(Ledger("replay", None, rows).to_dict())[0].arrived == ()
    assert got["prod/bare-gone"].origin == BORN  # decided, then gone: no moment known
    md = Ledger("replay", "v0.36.0", list(snapshot.values()) + rows).to_markdown()
    assert "| prod/web-7c9d-n3 (created in window at t=60.0s) | n2 | " + RS in md


def test_a_pod_born_before_the_window_or_without_a_clock_says_so() -> None:
    assert born_origin(START - 30, _moment) == f"{BORN} (before the window started)"
    assert born_origin(START + 1, None) == BORN  # a plain replay: no window clock
    row = PodRow("prod/x", fates=[PodFate("new", None)])
    assert born_rows([], {"prod/x": "n1"}, {"prod/x": row}, 1) == []  # a row: never twice


def test_the_timeline_driver_places_a_birth_on_its_window_clock() -> None:
    now = [START]
    driver = TimelineDriver(SimpleNamespace(changes=[]), {"speed": 10}, now=lambda: now[0])
    assert driver.moment(START) is None  # the clock has not started: the restore
    driver.clock.start()
    now[0] = START + 5
    assert driver.moment(START + 2) == 20.0
    assert driver.moment(START - 0.5) == 0.0  # a whole-second stamp just before the start
    assert driver.moment(START - 30) is None


def test_a_host_replay_gives_rows_only_to_its_own_namespaces() -> None:
    """On a host the round lists the host's pods and kwok's too (the first kind host replay
    gave kwok's controller pod a row): only the replay's namespaces are the incident's."""
    kwok = _pod("kwok-controller-6f9", "host-worker2", 0)
    kwok["metadata"]["namespace"] = "desched-host-kwok-r1"
    dns = _pod("coredns-1", "host-worker", 0, owner=None)
    dns["metadata"]["namespace"] = "kube-system"
    mine = _pod("web-1", "node-a", 0)
    mine["metadata"]["namespace"] = "r-prod"
    decided = {"kube-system/coredns-1": "host-worker", "r-prod/web-1": "node-a"}
    pods, dec = in_scope([kwok, dns, mine], decided, frozenset({"r-prod"}))
    rows = born_rows(pods, dec, {}, 1)
    assert [r.pod for r in rows] == ["r-prod/web-1"]
    # a cluster of the replay's own: every pod as before
    pods, dec = in_scope([kwok, dns, mine], decided, None)
    assert len(born_rows(pods, dec, {}, 1)) == 3


def test_the_ledger_names_every_decided_pod_it_has_no_row_for() -> None:
    """Issue 54: a 10x timeline round filtered 9 pods and the ledger had 8 rows, the ninth
    unnamed. Each pod the log decided about is a row, or named with why it is not one."""
    rows = [f"prod/web-{i}" for i in range(6)]
    decided: dict[str, str | None] = dict.fromkeys(rows, "n1")
    decided["prod/descheduler-replay-3-xyz"] = None  # the round's own Job pod, made after
    decided["kube-system/node-agent-r"] = RUNNER_NODE  # a DaemonSet's pod on the runner
    decided["prod/descheduler-replay-1-old"] = None  # round 1's pod, listed on the runner
    decided["other/app-1"] = "n2"  # a host replay's foreign namespace
    line = left_out(
        3,
        decided,
        rows,
        own="prod/descheduler-replay-3-",
        scope=frozenset({"prod", "kube-system"}),
        on_runner=["prod/descheduler-replay-1-old"],
    )
    assert line is not None and line.startswith("round 3: the log decided about 4 pod(s)"), line
    for pod, why in (
        ("prod/descheduler-replay-3-xyz", "the round's own Job pod"),
        ("kube-system/node-agent-r", "replay machinery on the runner node"),
        ("prod/descheduler-replay-1-old", "replay machinery on the runner node"),
        ("other/app-1", "outside the replay's namespaces"),
    ):
        assert f"{pod} ({why})" in line, line
    assert left_out(3, dict.fromkeys(rows, "n1"), rows, own="prod/x-") is None
