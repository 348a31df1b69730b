"""After a round: each evicted pod gone, and its replacement made and placed (or not).

Why a wait at all: the ledger says of each evicted pod whether its owner replaced it and
where, so the next round starts on the cluster the evictions left. The wait ends as soon as
nothing more can come: a replacement is told from the evicted pod by its UID (a StatefulSet's
carries the evicted pod's name), and an owner that is gone or already holds its desired
replicas (a timeline deleted or scaled it down) makes none.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from pytest_desched.log import Reporter
from pytest_desched.replay.capture.format import controller_of, key
from pytest_desched.replay.ledger import PodRow, replacement_origin
from pytest_desched.replay.objects import collection_path

if TYPE_CHECKING:
    from pytest_desched.providers.base import Cluster

# the owners whose replacements are waited for: kind, and its desired replicas (None: no count
# to compare, so only its being gone ends the wait)
_OWNERS = (("ReplicaSet", "replicas"), ("StatefulSet", "replicas"), ("DaemonSet", None))


def done_owners(
    api: Any, pods: list[dict[str, Any]], short: set[str], namespaces: list[str]
) -> set[str]:
    """Of the owner UIDs `short` of replacements, those that will make none: gone, or
    holding their desired replicas already in live pods (not terminating). An owner is in its
    pods' namespace: only `namespaces` (the evicted pods') are listed."""
    if not short:
        return set()
    # heavy: the kubernetes client, kept out of this module's import
    from pytest_desched.replay import kubeapi

    want: dict[str, int | None] = {}
    for (kind, field), ns in ((o, ns) for o in _OWNERS for ns in namespaces):
        for o in kubeapi.list_all(api, collection_path(kind, ns)):
            n = (o.get("spec") or {}).get(field) if field else None
            want[o["metadata"]["uid"]] = int(n) if n is not None else None
    have = Counter(
        (controller_of(p) or {}).get("uid")
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
    )
    # a count of None (a DaemonSet's) never ends the wait by itself; 0 (scaled to zero) does
    gone = {o for o in short if o not in want}
    return gone | {o for o in short if (n := want.get(o)) is not None and have[o] >= n}


def aftermath(
    cluster: Cluster,
    owner_uid: dict[str, str | None],
    evicted: list[str],
    known: set[str],
    report: Reporter,
    timeout: float = 30,
) -> tuple[list[PodRow], dict[str, str], dict[str, str]]:
    """After a round: evicted pods gone, and each one's replacement made and placed (or not).

    Returns the replacements' rows, per evicted pod `ready`, `pending` (the scheduler placed
    none), `missing` (the controller made none) or `none` (no owner to replace it), and each
    replacement's owner UID.
    """
    # heavy: kube and its imports, kept out of `desched replay`'s input checks
    from pytest_desched.kube import WaitTimeout, wait_for
    from pytest_desched.replay import kubeapi

    if not evicted:  # nothing to wait for: no list of the cluster's pods (issue 42)
        return [], {}, {}
    api = cluster.api_client
    # an evicted pod, its owner and its replacement share a namespace: only those are listed
    # (each list of all 10,000 pods took seconds, and the wait lists again every second)
    namespaces = sorted({p.split("/", 1)[0] for p in evicted})
    want: dict[str, int] = {}
    for pod in evicted:
        if owner_uid.get(pod):
            want[str(owner_uid[pod])] = want.get(str(owner_uid[pod]), 0) + 1

    def probe() -> tuple[list[dict[str, Any]], list[str]]:
        pods = [p for ns in namespaces for p in kubeapi.list_all(api, collection_path("Pod", ns))]
        # the evicted pod itself (a UID listed before the round): a StatefulSet's replacement
        # has its name, and must not read as the evicted pod still there
        keys = {key(p) for p in pods if p["metadata"]["uid"] in known}
        new = [
            p
            for p in pods
            if p["metadata"]["uid"] not in known
            and (controller_of(p) or {}).get("uid") in want
            and not p["metadata"].get("deletionTimestamp")
        ]
        waiting = [f"{p} still there" for p in evicted if p in keys]
        got: dict[str, int] = {}
        for p in new:
            o = controller_of(p)["uid"]  # type: ignore[index]
            got[o] = got.get(o, 0) + 1
            if not _placed(p):
                waiting.append(f"{key(p)} not placed yet")
        short = {o for o, n in want.items() if got.get(o, 0) < n}
        short -= done_owners(api, pods, short, namespaces)  # gone or scaled down: none will come
        waiting += [f"owner {o}: {got.get(o, 0)} of {want[o]} replacements" for o in sorted(short)]
        return new, waiting

    try:
        new, _ = wait_for(
            f"{len(evicted)} evicted pods gone and replaced",
            probe,
            lambda seen: not seen[1],
            timeout,
            describe=lambda seen: "; ".join(seen[1][:5]),
        )
    except WaitTimeout as exc:
        report(f"replay: {exc}")
        new, _ = probe()
    by_owner: dict[str, list[dict[str, Any]]] = {}
    for p in sorted(new, key=lambda p: p["metadata"]["creationTimestamp"]):
        by_owner.setdefault(controller_of(p)["uid"], []).append(p)  # type: ignore[index]
    rows: list[PodRow] = []
    after: dict[str, str] = {}
    owners: dict[str, str] = {}
    for pod in evicted:
        owner = owner_uid.get(pod)
        queue = by_owner.get(str(owner)) if owner else None
        if not owner:
            after[pod] = "none"
            continue
        if not queue:
            after[pod] = "missing"
            continue
        p = queue.pop(0)
        after[pod] = "ready" if _ready(p) else "pending"
        ref = controller_of(p) or {}
        rows.append(
            PodRow(
                pod=key(p),
                node=(p.get("spec") or {}).get("nodeName"),
                owner=f"{ref.get('kind')}/{ref.get('name')}",
                origin=replacement_origin(pod),
            )
        )
        owners[key(p)] = str(owner)
    return rows, after, owners


def _placed(p: dict[str, Any]) -> bool:
    if (p.get("spec") or {}).get("nodeName"):
        return True
    return any(
        c.get("type") == "PodScheduled"
        and c.get("status") == "False"
        and c.get("reason") == "Unschedulable"
        for c in (p.get("status") or {}).get("conditions") or []
    )


def _ready(p: dict[str, Any]) -> bool:
    return bool((p.get("spec") or {}).get("nodeName")) and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (p.get("status") or {}).get("conditions") or []
    )
