"""The `api` restore (fallback): pods as orphans through the API server, owners adopt them,
then the wait for every owner and PDB to be observed (with nudges for backed-off owners)."""

from __future__ import annotations

import copy
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from pytest_desched.kube import WaitTimeout, wait_for
from pytest_desched.log import Reporter
from pytest_desched.replay import kubeapi
from pytest_desched.replay.capture.format import (
    controller_of,
    key,
)
from pytest_desched.replay.objects import collection_path, object_path, path_of
from pytest_desched.replay.rebuild import admission_hold
from pytest_desched.replay.rebuild.paced import Pacer
from pytest_desched.replay.rebuild.plan import (
    BUILTIN_NAMESPACES,
    OWNER_KINDS,
    RestorePlan,
)
from pytest_desched.replay.rebuild.writes import (
    WORKERS,
    RestoreError,
    create,
    describe,
    label_builtin_namespaces,
)

if TYPE_CHECKING:
    from pytest_desched.replay.rebuild.restore import RestoreResult


OWNERS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet")  # the ones it waits on


SYNC_ANNOTATION = "desched.pytest.io/replay-sync"
# The wait for the restored pods lists every pod each poll: 10,000 pods are 20 pages the API
# server reads and serialises while it also takes kwok's status writes. At most one such list
# a second per 2,000 pods (1 s up to 2,000, 5 s at 10,000), never slower than one in 5 s.
PODS_PER_POLL_S = 2000
MAX_POD_POLL_S = 5.0


def pod_poll_s(pods: int) -> float:
    """The longest gap between two pod lists while waiting for `pods` restored pods."""
    return min(MAX_POD_POLL_S, max(1.0, pods / PODS_PER_POLL_S))


def _patch(api: Any, kind: str, ns: str, name: str, body: dict[str, Any]) -> None:
    kubeapi.request(
        api,
        "PATCH",
        object_path(kind, ns, name),
        body,
        content_type="application/merge-patch+json",
    )


def wait_settled(
    api: Any,
    plan: RestorePlan,
    timeout: float,
    report: Reporter,
    result: RestoreResult | None = None,
    pacer: Pacer | None = None,
) -> None:
    """Every owner's controller and every PDB has observed the restored state.

    An owner written before its pods reached its controller's cache fails its first sync (the
    hold refuses the pods it tries to make), and may fail the next one too (its cache has not
    yet seen its own status write); those retries go through the controller's rate limiter,
    10 a second for *all* owners: minutes for a thousand. So an owner its controller has
    observed with the wrong count, or any owner still waiting after a window without
    progress, is nudged with an annotation (`desched.pytest.io/replay-sync`): its update event
    queues it at once. Owners merely queued are left alone (a nudge costs a write and a sync).
    """
    active: Counter[str] = Counter()
    for p in plan.pods:
        ref = controller_of(p)
        if ref and p["status"].get("phase") not in ("Succeeded", "Failed"):
            active[ref["uid"]] += 1
    want_uids = {o["metadata"]["uid"] for objs in plan.owners.values() for o in objs}
    pdbs = {key(b) for b in plan.api.get("podDisruptionBudgets", [])}

    def probe() -> list[tuple[str, str, str, str]]:
        waiting: list[tuple[str, str, str, str]] = []
        for kind in OWNERS:
            if not plan.owners.get(kind):
                continue
            for o in kubeapi.list_all(api, collection_path(kind)):
                uid, ns, name = (
                    o["metadata"]["uid"],
                    o["metadata"]["namespace"],
                    o["metadata"]["name"],
                )
                if uid not in want_uids:
                    continue
                st = o.get("status") or {}
                why = None
                if (st.get("observedGeneration") or 0) < (o["metadata"].get("generation") or 1):
                    why = "not observed yet"
                elif (
                    kind in ("ReplicaSet", "StatefulSet")
                    and (st.get("replicas") or 0) != active[uid]
                ):
                    why = f"status.replicas {st.get('replicas')} != {active[uid]} restored"
                elif kind == "DaemonSet" and (st.get("currentNumberScheduled") or 0) < active[uid]:
                    why = (
                        f"currentNumberScheduled {st.get('currentNumberScheduled')} < {active[uid]}"
                    )
                if why:
                    waiting.append((kind, ns, name, why))
        if pdbs:
            for pdb in kubeapi.list_all(api, collection_path("PodDisruptionBudget")):
                st = pdb.get("status") or {}
                if key(pdb) in pdbs and (st.get("observedGeneration") or 0) < (
                    pdb["metadata"].get("generation") or 1
                ):
                    waiting.append(
                        (
                            "PodDisruptionBudget",
                            pdb["metadata"]["namespace"],
                            pdb["metadata"]["name"],
                            "not observed yet",
                        )
                    )
        return waiting

    def describe(w: list[tuple[str, str, str, str]]) -> str:
        return f"{len(w)} waiting, e.g. {[f'{k} {n}/{m}: {y}' for k, n, m, y in w[:5]]}"

    deadline = time.monotonic() + timeout
    nudged = 0
    before: int | None = None
    for attempt in range(1, 10_000):
        window = min(2.0, max(0.1, deadline - time.monotonic()))
        try:
            wait_for(
                "the restored owners and PDBs to be observed",
                probe,
                lambda w: not w,
                window,
                describe=describe,
            )
            break
        except WaitTimeout:
            if time.monotonic() >= deadline:
                raise RestoreError(
                    f"timed out after {timeout:.0f}s waiting for the restored owners and PDBs to be "
                    f"observed by their controllers; last seen: {describe(probe())}"
                ) from None
        waiting = probe()
        stalled = before is not None and len(waiting) >= before
        before = len(waiting)
        stuck = [w for w in waiting if w[0] in OWNERS and (stalled or w[3] != "not observed yet")]
        body = {"metadata": {"annotations": {SYNC_ANNOTATION: str(attempt)}}}

        def nudge(w: tuple[str, str, str, str], b: dict[str, Any] = body) -> None:
            _patch(api, w[0], w[1], w[2], b)

        (pacer or Pacer(WORKERS)).map(nudge, stuck, lambda w: f"nudge {w[0]} {w[1]}/{w[2]}")
        nudged += len(stuck)
    if result is not None and nudged:
        result.notes.append(
            f"{nudged} owner syncs were nudged with the {SYNC_ANNOTATION} annotation (their "
            "controllers had backed off while the restore was half written)"
        )


def orphan_body(p: dict[str, Any]) -> dict[str, Any]:
    """A snapshot pod as the API restore creates it: no UID, no status, no workload owner
    (its owner, created after it, adopts it), no priority (the Priority admission sets it)."""
    body = copy.deepcopy(p)
    body["metadata"].pop("uid", None)
    body["metadata"].pop("creationTimestamp", None)
    refs = body["metadata"].pop("ownerReferences", None)
    if refs and refs[0].get("kind") not in OWNER_KINDS:
        body["metadata"]["ownerReferences"] = refs
    body.pop("status", None)
    body["spec"].pop("priority", None)
    return body


def owner_body(o: dict[str, Any]) -> dict[str, Any]:
    """A snapshot owner as the API restore creates it: new UID, no status, adopted by its own
    owner (a Deployment adopts its ReplicaSets) rather than naming it."""
    body = copy.deepcopy(o)
    for f in ("uid", "creationTimestamp", "generation"):
        body["metadata"].pop(f, None)
    body.pop("status", None)
    body["metadata"].pop("ownerReferences", None)
    return body


# Workload owners, bottom-up: a Deployment adopts ReplicaSets that already exist.
CONTROLLER_TIER = ("ReplicaSet", "StatefulSet", "DaemonSet")
DEPLOYMENT_TIER = ("Deployment",)


def owned_body(o: dict[str, Any], server_uid: dict[tuple[str, str, str], str]) -> dict[str, Any]:
    """A snapshot owner or pod as the held restore creates it: naming its owner by the UID the
    server gave that owner (`server_uid`: (kind, namespace, name) -> UID), written before it."""
    body = orphan_body(o) if o["kind"] == "Pod" else owner_body(o)
    ns = o["metadata"].get("namespace") or ""
    refs = []
    for r in o["metadata"].get("ownerReferences") or []:
        if r.get("kind") in OWNER_KINDS:
            uid = server_uid.get((str(r["kind"]), ns, str(r.get("name"))))
            if uid is not None:  # an owner the snapshot lacks: left to adoption, as before
                refs.append({**r, "uid": uid})
        elif o["kind"] == "Pod":
            refs.append(r)  # kept by orphan_body as well (a kind the replay cannot create)
    if refs:
        body["metadata"]["ownerReferences"] = refs
    else:
        body["metadata"].pop("ownerReferences", None)
    return body


def held_tiers(plan: RestorePlan) -> list[tuple[str, list[dict[str, Any]]]]:
    """Owners before pods, top-down, for a restore under the admission hold: Deployments, then
    the ReplicaSets (naming their Deployment), StatefulSets and DaemonSets, then the pods
    (naming their owner)."""
    return [
        ("deployments", [o for k in DEPLOYMENT_TIER for o in plan.owners.get(k, [])]),
        ("workload controllers", [o for k in CONTROLLER_TIER for o in plan.owners.get(k, [])]),
        ("pods", list(plan.pods)),
    ]


def object_tiers(plan: RestorePlan) -> list[tuple[str, list[dict[str, Any]]]]:
    """What the pods need, in the order admission needs it: namespaces; then every object a
    pod names or is counted by (ServiceAccounts, PriorityClasses, StorageClasses, PVs, PDBs);
    then the claims, after the classes and volumes they name. Each tier is written
    concurrently, the next only once the last write of the one before was answered."""
    api = plan.api
    return [
        (
            "namespaces",
            [
                n
                for n in api.get("namespaces", [])
                if n["metadata"]["name"] not in BUILTIN_NAMESPACES
            ],
        ),
        (
            "pod dependencies",
            [
                *api.get("serviceAccounts", []),
                *api.get("priorityClasses", []),
                *api.get("storageClasses", []),
                *api.get("persistentVolumes", []),
                *api.get("podDisruptionBudgets", []),
            ],
        ),
        ("claims", list(api.get("persistentVolumeClaims", []))),
    ]


def workload_tiers(plan: RestorePlan) -> list[tuple[str, list[dict[str, Any]]]]:
    """Pods, then their workload owners bottom-up (snapshot objects, not yet bodies).

    Through the API the workload owners come *after* their pods on purpose: an owner written
    first makes pods of its own at once (a quota hold would refuse the restore's pods too), so
    the pods go in as orphans and each owner adopts its own when it is created. The garbage
    collector has nothing to collect meanwhile: an orphan names no owner.
    """
    return [
        ("pods", list(plan.pods)),
        ("workload controllers", [o for k in CONTROLLER_TIER for o in plan.owners.get(k, [])]),
        ("deployments", [o for k in DEPLOYMENT_TIER for o in plan.owners.get(k, [])]),
    ]


def write_object_tiers(api: Any, plan: RestorePlan, pacer: Pacer, report: Reporter) -> None:
    """The objects pods need, tier by tier (see object_tiers); the built-in namespaces only
    get the snapshot's labels."""

    def write(body: dict[str, Any]) -> Any:
        # a new namespace's `default` ServiceAccount may already be there
        return create(api, path_of(body), body, tolerate_exists=body["kind"] == "ServiceAccount")

    pacer.tiers(object_tiers(plan), write, describe, report)
    label_builtin_namespaces(api, plan)


def _write_held(
    api: Any,
    plan: RestorePlan,
    pacer: Pacer,
    timeout: float,
    report: Reporter,
    new_uid: dict[str, str],
    mark: Any,
) -> None:
    """The owners, then the pods naming them, with the controllers' creates held."""
    namespaces = sorted(
        {o["metadata"]["namespace"] for objs in plan.owners.values() for o in objs}
        | {p["metadata"]["namespace"] for p in plan.pods}
    )
    name = admission_hold.hold_name(namespaces)
    # the host replay's run label (on every namespace it restores), so its teardown finds a
    # hold a killed restore left
    labels = {"app.kubernetes.io/managed-by": "desched"}
    for ns in plan.api.get("namespaces", []):
        labels.update(
            {
                k: v
                for k, v in (ns["metadata"].get("labels") or {}).items()
                if k.startswith("desched.pytest.io/")
            }
        )
    admission_hold.place(api, name, namespaces, labels, timeout)
    mark("hold in force")
    server_uid: dict[tuple[str, str, str], str] = {}
    try:
        for tier, objs in held_tiers(plan):

            def write_one(o: dict[str, Any]) -> dict[str, Any] | None:
                got = create(api, path_of(o), owned_body(o, server_uid))
                if got and o["kind"] != "Pod":
                    m = o["metadata"]
                    new_uid[m["uid"]] = got["metadata"]["uid"]
                    server_uid[(o["kind"], m["namespace"], m["name"])] = got["metadata"]["uid"]
                return got

            if tier == "pods":
                made = [
                    key(p)
                    for p in kubeapi.list_all(api, collection_path("Pod"))
                    if p["metadata"]["namespace"] in set(namespaces)
                ]
                if made:  # a controller wrote pods under the hold: it acts as the restore
                    raise RestoreError(
                        f"the admission hold did not hold the workload controllers: {len(made)} "
                        f"pods were made under it (e.g. {made[:3]}); the controller manager "
                        "acts as the restore's own user (no --use-service-account-credentials): "
                        "restore without owners_first"
                    )
            pacer.tiers([(tier, objs)], write_one, describe, report)
            mark(tier)
    finally:
        admission_hold.lift(api, name, namespaces, timeout)
    mark("hold lifted")


def restore_via_api(
    api: Any,
    plan: RestorePlan,
    result: RestoreResult,
    timeout: float,
    report: Reporter,
    pacer: Pacer | None = None,
    owners_first: bool = False,
) -> None:
    """Fallback: pods as orphans through the API, then owners (which adopt them), startTimes.

    `owners_first`: under an admission hold on the workload controllers (rebuild.admission_hold)
    the owners go first and every pod names its owner: no adoption PATCH per pod by a
    controller (kube-controller-manager's client limit, 20/s a controller by default).

    Slower, and the API server sets creationTimestamp (PodLifeTime then sees restore-time
    ages); status.startTime is patched through the status subresource once kwok has marked
    each pod Running (earlier, kwok's pod-ready stage would overwrite it). Owners come
    bottom-up (ReplicaSets before their Deployments, which adopt them), so no controller
    makes an object the snapshot already has; the wait is for every pod to be adopted.
    Every write goes through `pacer` (bounded concurrency, the server's 429 honoured).
    """
    pacer = pacer or Pacer(WORKERS)
    new_uid: dict[str, str] = {}
    phases = result.pace.setdefault("phases_s", {})  # where the time goes (bench, docs)
    lap = [time.monotonic()]

    def mark(name: str) -> None:
        now = time.monotonic()
        phases[name] = round(now - lap[0], 2)
        lap[0] = now

    def write(tier: str, o: dict[str, Any]) -> dict[str, Any] | None:
        body = orphan_body(o) if tier == "pods" else owner_body(o)
        got = create(api, path_of(body), body)
        if got and tier != "pods":
            new_uid[o["metadata"]["uid"]] = got["metadata"]["uid"]
        return got

    if owners_first:
        _write_held(api, plan, pacer, timeout, report, new_uid, mark)
    else:
        for tier, objs in workload_tiers(plan):

            def write_one(o: dict[str, Any], t: str = tier) -> dict[str, Any] | None:
                return write(t, o)

            pacer.tiers([(tier, objs)], write_one, describe, report)
            mark(tier)
    for objs in plan.owners.values():
        for o in objs:
            o["metadata"]["uid"] = new_uid.get(o["metadata"]["uid"], o["metadata"]["uid"])
    for p in plan.pods:  # the plan speaks the server's UIDs from here on
        for r in p["metadata"].get("ownerReferences") or []:
            r["uid"] = new_uid.get(r["uid"], r["uid"])
    for facts in plan.expected.values():
        facts["ownerUid"] = new_uid.get(facts["ownerUid"], facts["ownerUid"])
    result.notes.append(
        "restored through the API: creationTimestamp is the restore's (PodLifeTime sees "
        "restore-time ages); status.startTime patched after kwok marked each pod Running"
    )
    by_key = {key(p): p for p in plan.pods}

    def adopted_and_running() -> tuple[list[dict[str, Any]], list[str]]:
        running, waiting = [], []
        for p in kubeapi.list_all(api, collection_path("Pod")):
            k = key(p)
            if k not in plan.expected:
                continue
            if (controller_of(p) or {}).get("uid") != plan.expected[k]["ownerUid"]:
                waiting.append(f"{k} not adopted yet")
            if (p.get("status") or {}).get("phase") == "Running":
                running.append(p)
        want = sum(1 for p in plan.pods if p["status"].get("phase") == "Running")
        if len(running) < want:
            waiting.append(f"{len(running)} of {want} Running")
        return running, waiting

    seen, _ = wait_for(
        "the restored pods adopted by their owners and Running (kwok)",
        adopted_and_running,
        lambda r: not r[1],
        timeout,
        describe=lambda r: f"{len(r[1])} waiting, e.g. {r[1][:5]}",
        max_interval=pod_poll_s(len(plan.pods)),
        progress=report,
    )

    def patch(p: dict[str, Any]) -> None:
        start = by_key[key(p)]["status"].get("startTime")
        if start:
            kubeapi.request(
                api,
                "PATCH",
                object_path("Pod", p["metadata"]["namespace"], p["metadata"]["name"]) + "/status",
                {"status": {"startTime": start}},
                content_type="application/merge-patch+json",
            )

    mark("adopted and Running")  # the controllers' adoption writes and kwok's status writes
    pacer.map(patch, seen, lambda p: f"patch status.startTime of pod {key(p)}")
    mark("startTime patches")
    wait_settled(api, plan, timeout, report, result, pacer)
    mark("owners settled")
    for p in kubeapi.list_all(api, collection_path("Pod")):  # the pods' UIDs are the server's
        if key(p) in plan.expected:
            plan.expected[key(p)]["uid"] = p["metadata"]["uid"]
