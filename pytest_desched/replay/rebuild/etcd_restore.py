"""The `etcd` restore: nodes, storage, PDBs, owners and pods written into etcd, and the
barrier that proves the controllers' caches hold them before the hold lifts."""

from __future__ import annotations

import datetime as dt
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubernetes.client.rest import ApiException

from pytest_desched.kube import WaitTimeout, wait_for
from pytest_desched.log import Reporter
from pytest_desched.replay import kubeapi
from pytest_desched.replay.capture.format import (
    Snapshot,
    copy_json,
    key,
    rfc3339,
)
from pytest_desched.replay.objects import collection_path, object_path
from pytest_desched.replay.rebuild.plan import (
    HOLD_QUOTA,
    KWOK_NODE_ANNOTATION,
    OWNER_KINDS,
    RUNNER_NODE,
    RestorePlan,
    runner_node,
    running_status,
)
from pytest_desched.replay.rebuild.settled import settle
from pytest_desched.replay.rebuild.usage import metrics_path_annotation
from pytest_desched.replay.rebuild.writes import (
    RestoreError,
    create_all,
    create_namespaces,
    wait_hold,
    wait_nodes_ready,
)

if TYPE_CHECKING:
    from pytest_desched.replay.rebuild.restore import RestoreResult, Timer


def restore_via_etcd(
    api: Any,
    etcd: Any,
    snap: Snapshot,
    plan: RestorePlan,
    node_uids: dict[str, str],
    now: dt.datetime,
    timeout: float,
    result: RestoreResult,
    timer: Timer,
    report: Reporter,
    kubelet: dict[str, Any] | None = None,
) -> RestorePlan:
    """Nodes, storage, PDBs, owners and pods into etcd; the few others through the API.

    `kubelet`: where kwok serves every node's kubelet endpoints (a replay that serves usage:
    `etcd_nodes`), else None.

    `plan`: planned with these node UIDs, ages shifted to `now`. Through the API (admitted,
    validated, and the objects admission must know about): namespaces, ServiceAccounts, the
    hold, PriorityClasses, StorageClasses.
    """
    result.shift_s = plan.shift_s
    etcd.create(etcd_nodes(snap, node_uids, now, kubelet))
    wait_nodes_ready(api, sorted(node_uids), timeout)
    timer.lap("nodes")
    report(f"restore: {len(node_uids)} nodes written into etcd and Ready")
    create_namespaces(api, plan)
    create_all(api, plan.api.get("serviceAccounts", []), tolerate_exists=True)
    holds: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": HOLD_QUOTA, "namespace": ns},
            "spec": {"hard": {"pods": "0", "count/replicasets.apps": "0"}},
        }
        for ns in plan.owner_namespaces
    ]
    create_all(api, holds)
    wait_hold(api, plan.owner_namespaces, held=True, timeout=timeout)
    for section in ("priorityClasses", "storageClasses"):
        create_all(api, plan.api.get(section, []))
    timer.lap("api_objects")
    barrier = Barrier(plan.owner_namespaces[0] if plan.owner_namespaces else "default", now)
    storage = etcd_storage_and_pdbs(plan, now)
    settled = settle(
        plan.owners,
        plan.pods,
        [o for o in storage if o["kind"] == "PodDisruptionBudget"],
        now,
        rfc3339(now),
    )
    plan.notes.append(
        "statuses written as their controllers compute them (replay/rebuild/settled.py), so settle "
        f"has less to write: {', '.join(f'{n} {k}s' for k, n in settled.items())}"
    )
    etcd.create(storage)
    timer.lap("etcd_pvs_pvcs_pdbs")
    # Every owner before its dependents (the GC never sees an orphan), each owner's pods right
    # after it (its controller finds them in its cache: see write_order).
    order = write_order(plan)
    for kind in OWNER_KINDS:
        etcd.create([o for o in order.first if o["kind"] == kind])
    etcd.create_chains(order.chains)
    for kind in OWNER_KINDS:
        etcd.create([o for o in order.owners_after if o["kind"] == kind])
    etcd.create([barrier.rs])  # after every owner: see Barrier
    etcd.create(order.pods_after)
    etcd.create([barrier.pod])  # after every pod
    result.written_at = rfc3339(dt.datetime.now(dt.UTC))
    timer.lap("etcd_owners_and_pods")
    report(
        f"restore: {len(plan.pods)} pods and their owners written into etcd; waiting for the "
        "controllers to observe them"
    )
    barrier.wait(api, plan, timeout, report)
    timer.lap("settle")
    for h in holds:
        kubeapi.request(
            api,
            "DELETE",
            object_path("ResourceQuota", h["metadata"]["namespace"], HOLD_QUOTA),
        )
    wait_hold(api, plan.owner_namespaces, held=False, timeout=timeout)
    barrier.remove(api, timeout)
    timer.lap("hold_lifted")
    return plan


# The barrier's poll: two GETs at most this often while the caches fill, so the restore goes
# on within this much of the moment they are complete (was up to 1 s: wait_for's default).
SETTLE_POLL_S = 0.2


class Barrier:
    """Proof that the controllers' caches hold every restored object, before the hold lifts.

    Watch events of one resource arrive in revision order, so an object written after all
    others of its kind, once a controller has acted on it, proves that controller's cache
    holds them all. One ReplicaSet with 0 replicas, written after every owner (its status
    observed: the ReplicaSet cache is complete, so no Deployment makes a second one), owns a
    bare pod written after every pod: the ReplicaSet controller deletes that surplus pod once
    its pod cache holds it, and that cache is the controller manager's shared one, so no
    ReplicaSet, StatefulSet or DaemonSet makes a pod the snapshot has. (Was: the pod counted
    by a PDB of its own; the disruption controller syncs PDBs with one worker, so at 100,000
    pods and 7,847 PDBs the barrier's PDB waited over an hour behind the others; the
    ReplicaSet controller's five workers keep up.) Then every PDB must be observed too: the
    eviction API answers 429 for a PDB its controller has not processed (a PDB written
    settled, `rebuild.settled`, is observed as written: its status is the one the disruption
    controller computes, which overwrites it if it computes otherwise). Controllers still
    catching up on their own queues after that only confirm what is there.
    """

    NAME = "desched-replay-barrier"
    LABEL = "desched.pytest.io/replay-barrier"

    def __init__(self, namespace: str, now: dt.datetime) -> None:
        stamp, token = rfc3339(now), uuid.uuid4().hex[:10]
        self.namespace = namespace
        meta = {"namespace": namespace, "creationTimestamp": stamp}
        labels = {self.LABEL: token}
        container = {"name": "barrier", "image": "registry.k8s.io/pause:3.10"}
        rs_uid = str(uuid.uuid4())
        self.rs = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {**meta, "name": self.NAME, "uid": rs_uid, "generation": 1},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
            },
            "status": {},
        }
        owner = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": self.NAME,
            "uid": rs_uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
        self.pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                **meta,
                "name": self.NAME,
                "uid": str(uuid.uuid4()),
                "labels": labels,
                "ownerReferences": [owner],
            },
            "spec": {
                "nodeName": RUNNER_NODE,
                "containers": [container],
                "tolerations": [{"operator": "Exists"}],
                "priority": 0,
            },
            "status": running_status({"phase": "Running"}, stamp),
        }

    def wait(
        self, api: Any, plan: RestorePlan, timeout: float, report: Reporter | None = None
    ) -> None:
        pdbs = {key(b) for b in plan.api.get("podDisruptionBudgets", [])}
        ns = self.namespace

        def probe() -> list[str]:
            # Two GETs while the caches fill (most of settle); the list of every PDB, the
            # costly read for the API server that is busy serving the controllers, only once
            # both barriers passed (a PDB is observed after its pods reached the cache).
            waiting = []
            rs = kubeapi.get(api, object_path("ReplicaSet", ns, self.NAME))
            if ((rs.get("status") or {}).get("observedGeneration") or 0) < 1:
                waiting.append("the ReplicaSet controller has not reached the last owner yet")
            pod = kubeapi.get_or_none(api, object_path("Pod", ns, self.NAME))
            if pod is not None and not (pod.get("metadata") or {}).get("deletionTimestamp"):
                waiting.append("the ReplicaSet controller has not seen the last pod yet")
            if waiting:
                return waiting
            for pdb in kubeapi.list_all(api, collection_path("PodDisruptionBudget")):
                st, k = pdb.get("status") or {}, key(pdb)
                if k in pdbs and (st.get("observedGeneration") or 0) < (
                    pdb["metadata"].get("generation") or 1
                ):
                    waiting.append(f"PDB {k} not observed yet")
            return waiting

        try:
            wait_for(
                "the controllers' caches to hold every restored object, and every PDB observed",
                probe,
                lambda w: not w,
                timeout,
                describe=lambda w: f"{len(w)} waiting, e.g. {w[:5]}",
                max_interval=SETTLE_POLL_S,
                progress=report,
            )
        except WaitTimeout as exc:
            raise RestoreError(str(exc)) from None

    def remove(self, api: Any, timeout: float) -> None:
        """Delete the two barrier objects (the pod at once) and wait until they are gone."""
        ns, name = self.namespace, self.NAME
        paths = [
            object_path("Pod", ns, name),
            object_path("ReplicaSet", ns, name),
        ]
        for path in paths:
            try:  # the ReplicaSet controller may have deleted the pod already
                kubeapi.request(api, "DELETE", path, {"gracePeriodSeconds": 0})
            except ApiException as exc:
                if exc.status != 404:
                    raise

        def left() -> list[str]:
            return [path for path in paths if kubeapi.get_or_none(api, path) is not None]

        wait_for("the replay's barrier objects gone", left, lambda x: not x, timeout)


# A chain longer than this (a DaemonSet's pods) is split: its owners first, its pods then
# written concurrently, not one after another.
CHAIN_MAX = 64


@dataclass
class WriteOrder:
    """The owners and pods in the order they go into etcd."""

    first: list[dict[str, Any]] = field(default_factory=list)  # owners of split chains
    chains: list[list[dict[str, Any]]] = field(default_factory=list)  # owner, its owners, pods
    owners_after: list[dict[str, Any]] = field(default_factory=list)  # owners of several
    pods_after: list[dict[str, Any]] = field(default_factory=list)  # pods of no single chain


def write_order(plan: RestorePlan) -> WriteOrder:
    """Each top owner (a Deployment, or a ReplicaSet, StatefulSet or DaemonSet no restored
    owner controls) as one chain: it, the owners it alone owns, then the pods each of them alone
    owns. Written one after another, a chain's pods reach the controllers right after their
    owner: with all owners first and all pods seconds later, a ReplicaSet synced before its
    pods arrived tried to create them (refused by the hold: 403s, events, status writes to
    undo). Anything with owners in two chains (or none restored) comes after every chain."""
    owners = [o for kind in OWNER_KINDS for o in plan.owners.get(kind, [])]
    uids = {o["metadata"]["uid"] for o in owners}

    def parents(obj: dict[str, Any]) -> set[str]:
        return {str(r.get("uid")) for r in obj["metadata"].get("ownerReferences") or []}

    kids: dict[str, list[dict[str, Any]]] = defaultdict(list)
    tops = []
    for obj in [*owners, *plan.pods]:
        mine = parents(obj)
        if len(mine) == 1 and mine <= uids:
            kids[next(iter(mine))].append(obj)
        elif obj["kind"] != "Pod" and not mine & uids:
            tops.append(obj)
    order, placed = WriteOrder(), set[int]()

    def chain_of(obj: dict[str, Any]) -> list[dict[str, Any]]:
        out = [obj]
        for kid in kids.get(obj["metadata"]["uid"], []):
            out += chain_of(kid) if kid["kind"] != "Pod" else [kid]
        return out

    for top in tops:
        chain = chain_of(top)
        placed.update(id(o) for o in chain)
        if len(chain) <= CHAIN_MAX:
            order.chains.append(chain)
            continue
        order.first += [o for o in chain if o["kind"] != "Pod"]
        order.chains += [[o] for o in chain if o["kind"] == "Pod"]
    order.owners_after = [o for o in owners if id(o) not in placed]
    order.pods_after = [p for p in plan.pods if id(p) not in placed]
    return order


def etcd_nodes(
    snap: Snapshot,
    uids: dict[str, str],
    now: dt.datetime,
    kubelet: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Nodes as a kubelet (here kwok) would have registered them, already Ready.

    Conditions other than Ready are the snapshot's (kwok rewrites them only at its heartbeat
    stage, after 10 minutes); a node NotReady in the snapshot is written NotReady, and kwok's
    node-initialize stage makes it Ready (see the deviations). With `kubelet` ({address,
    daemonEndpoints}: kwok's, read off a node it initialized), each node also gets the
    addresses and the metrics path metrics-server scrapes (kwok's node-initialize stage,
    which writes them, never runs for a node written Ready).
    """
    stamp = rfc3339(now)
    out = []
    for n in [runner_node(), *snap.nodes]:
        meta = {
            k: copy_json(v)
            for k, v in n["metadata"].items()
            if k in ("name", "labels", "annotations")
        }
        meta.setdefault("annotations", {})[KWOK_NODE_ANNOTATION] = "fake"
        meta["uid"] = uids[meta["name"]]
        meta["creationTimestamp"] = stamp
        st = n.get("status") or {}
        conds = {c["type"]: c for c in st.get("conditions") or [] if c.get("type")}
        conds.setdefault("Ready", {"type": "Ready", "status": "True", "reason": "KubeletReady"})
        for t in ("MemoryPressure", "DiskPressure", "PIDPressure"):
            conds.setdefault(t, {"type": t, "status": "False", "reason": f"KubeletHasNo{t}"})
        status = {
            **{k: st[k] for k in ("allocatable", "capacity") if st.get(k)},
            "conditions": [
                {**c, "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}
                for c in conds.values()
            ],
            "phase": "Running",
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "kwok",
            },
        }
        if kubelet is not None:
            name = meta["name"]
            meta["annotations"].update(metrics_path_annotation(name))
            status["addresses"] = [
                {"type": "InternalIP", "address": kubelet["address"]},
                {"type": "Hostname", "address": name},
            ]
            status["daemonEndpoints"] = copy_json(kubelet["daemonEndpoints"])
        spec = {k: v for k, v in (n.get("spec") or {}).items() if k in ("taints", "unschedulable")}
        out.append(
            {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}
        )
    return out


def etcd_storage_and_pdbs(plan: RestorePlan, now: dt.datetime) -> list[dict[str, Any]]:
    """PVs and PVCs written bound to each other (consistent UIDs), and PDBs (status left to
    the disruption controller, which the restore waits for)."""
    stamp = rfc3339(now)
    pvcs = {}
    for body in plan.api.get("persistentVolumeClaims", []):
        obj = copy_json(body)
        obj["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=stamp)
        obj["status"] = {"phase": "Pending"}
        pvcs[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj
    out = []
    for body in plan.api.get("persistentVolumes", []):
        pv = copy_json(body)
        pv["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=stamp)
        ref = pv["spec"].get("claimRef") or {}
        claim = pvcs.get((ref.get("namespace"), ref.get("name")))
        if claim is not None and claim["spec"].get("volumeName") == pv["metadata"]["name"]:
            pv["spec"]["claimRef"] = {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": ref["namespace"],
                "name": ref["name"],
                "uid": claim["metadata"]["uid"],
            }
            pv["status"] = {"phase": "Bound"}
            claim["status"] = {
                "phase": "Bound",
                "accessModes": pv["spec"].get("accessModes"),
                "capacity": pv["spec"].get("capacity"),
            }
            claim["metadata"].setdefault("annotations", {}).update(
                {
                    "pv.kubernetes.io/bind-completed": "yes",
                    "pv.kubernetes.io/bound-by-controller": "yes",
                }
            )
        else:
            pv["spec"].pop("claimRef", None)
            pv["status"] = {"phase": "Available"}
        out.append(pv)
    out += list(pvcs.values())
    for body in plan.api.get("podDisruptionBudgets", []):
        pdb = copy_json(body)
        pdb["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=stamp, generation=1)
        out.append(pdb)
    return out
