"""Restore a snapshot onto a fresh embedded cluster, so the real controllers, scheduler and
descheduler act on it as they did on the original.

Order and why (the `etcd` method, the default):

1. the provider's own kwok workers go (they would be extra nodes); one *runner* node is
   added for the descheduler's round pods (cordoned, tainted, no hostname or zone label, so
   nodeFit, utilization and topology spreading never count it; kwok manages every node, so
   it is Ready and counts only toward the descheduler's ">= 2 ready nodes" check);
2. nodes, written Ready into etcd (same labels, taints, allocatable, capacity, conditions,
   unschedulable; kwok keeps their leases);
3. through the API (admitted, validated): namespaces, the ServiceAccounts pods name (objects
   only, no tokens), a ResourceQuota *hold* (`pods: 0`, `count/replicasets.apps: 0`) in every
   namespace with owners, proven in force with a dry-run create, PriorityClasses and
   StorageClasses;
4. into etcd (`replay.etcd`): PVs and PVCs bound to each other, PDBs, then each owner
   followed by the owners and pods it alone owns (one chain per Deployment, StatefulSet...,
   chains concurrently; `etcd_restore.write_order`), anything else after every chain, so the
   garbage collector never sees a dependent without its owner; UIDs are new and consistent, so
   ownerReferences, minReplicas and the controllers all hold; `creationTimestamp` and
   `status.startTime` are the snapshot's, shifted together (`ages`); ReplicaSets,
   Deployments and PDBs carry the status (and revision annotations) their controllers
   compute from the restored pods (`rebuild.settled`), so the controllers find nothing to write;
5. wait for proof that the controllers' caches hold every restored object (`Barrier`: a
   last ReplicaSet and a last pod, each acted on by its controller) and that every PDB is
   observed, lift the hold, and verify every pod: node, phase, owner, both timestamps as
   written (kwok's stages never touch a Running pod: checked, not assumed).

The `api` method (fallback, or on request) creates everything through the API server: pods as
orphans, then their owners bottom-up (which adopt them), then `status.startTime` through the
status subresource once kwok marked each pod Running; the API server stamps
`creationTimestamp` itself there, so PodLifeTime sees restore-time ages.

Ages: `shift` (default) moves every timestamp by the same offset (restore time - takenAt), so
each pod is as old at the round as it was when the snapshot was taken; `preserve` writes them
unchanged (ages grow by the time since the snapshot).

Deviations, all recorded in the result: DaemonSets and StatefulSets are restored with
`updateStrategy: OnDelete` (their ControllerRevisions are not in a snapshot, so a rolling
update could otherwise replace every pod); pods of Jobs, terminating pods and the
descheduler's own pods are not restored (kwok completes Running Job pods at once; the replay
installs its own descheduler); NotReady nodes become Ready (kwok manages every node).
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from kubernetes.client.rest import ApiException

from pytest_desched.capabilities import KUBERNETES_METRICS
from pytest_desched.errors import ConfigError
from pytest_desched.log import Reporter, say
from pytest_desched.replay import kubeapi
from pytest_desched.replay.capture.format import (
    Snapshot,
    controller_of,
    key,
    utc,
)
from pytest_desched.replay.objects import collection_path, object_path
from pytest_desched.replay.rebuild.api_restore import restore_via_api, write_object_tiers
from pytest_desched.replay.rebuild.etcd import Etcd, EtcdError, endpoint_of
from pytest_desched.replay.rebuild.etcd_restore import (
    restore_via_etcd,
)
from pytest_desched.replay.rebuild.paced import DEFAULT_WORKERS, Pacer, widen_pool
from pytest_desched.replay.rebuild.plan import (
    OWNER_KINDS,
    RUNNER_NODE,
    RestorePlan,
    plan_restore,
    runner_node,
)
from pytest_desched.replay.rebuild.usage import annotate, metrics_path_annotation, served_usage
from pytest_desched.replay.rebuild.usage_live import (
    drop_provider_baselines,
    kubelet_endpoint,
    serve,
)
from pytest_desched.replay.rebuild.writes import (
    RestoreError,
    create_all,
    wait_daemonsets,
    wait_nodes_ready,
)

if TYPE_CHECKING:
    from pytest_desched.providers.base import Cluster


# -- the restore ----------------------------------------------------------------------------
@dataclass
class RestoreResult:
    """What was restored, how, what was left out, and the checks that it holds."""

    method: str
    ages: str
    shift_s: float
    counts: dict[str, int] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)
    deviations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    verified: dict[str, Any] = field(default_factory=dict)
    extra_pods: list[str] = field(default_factory=list)  # made by controllers during restore
    expected: dict[str, dict[str, Any]] = field(default_factory=dict)
    written_at: str = ""
    runner_node: str = RUNNER_NODE
    pace: dict[str, Any] = field(default_factory=dict)  # the api method's writes (rebuild.paced)
    usage: dict[str, Any] = field(default_factory=dict)  # served usage (rebuild/usage.py)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("expected")
        return d


class Timer:
    def __init__(self, timings: dict[str, float]) -> None:
        self.timings, self.t = timings, time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.timings[name] = round(self.timings.get(name, 0.0) + now - self.t, 3)
        self.t = now


def restore(
    cluster: Cluster,
    snap: Snapshot,
    ages: str = "shift",
    method: str = "auto",
    timeout: float = 120,
    report: Reporter = say,
    runner: bool = True,
    workers: int = DEFAULT_WORKERS,
    assume_usage: str | None = None,
    wait_usage: bool = True,
    owners_first: bool = False,
) -> RestoreResult:
    """Restore `snap` onto `cluster` (a fresh embedded cluster); see the module docstring.

    `method`: `etcd` (pods and owners into the cluster's etcd), `api` (through the API
    server: slower, and creationTimestamp is then the restore's), `auto` (etcd when the
    cluster's etcd answers). Raises ConfigError before any change on a bad snapshot.
    `runner=False` (a host replay, `api` only): no runner node, the round pod runs on a real
    node of the host. `workers`: the api method's bound on concurrent writes (rebuild.paced:
    the server's 429 / Retry-After lowers it and holds every writer). `owners_first` (api):
    owners, then pods naming them, under an admission hold on the workload controllers
    (rebuild.admission_hold) instead of pods adopted by their controllers. On a cluster that
    serves metrics.k8s.io, the snapshot's recorded usage (or `assume_usage`'s) is served back
    through it (rebuild/usage.py), and with `wait_usage` (a policy that reads it) the restore
    returns once metrics-server serves it.
    """
    if not runner and method != "api":
        raise ConfigError("a restore without the runner node is an api restore (a host's)")
    if method not in ("auto", "etcd", "api"):
        raise ConfigError(f"method={method!r}: use auto, etcd or api")
    now = dt.datetime.now(dt.UTC)
    node_uids = {n["metadata"]["name"]: str(uuid.uuid4()) for n in [runner_node(), *snap.nodes]}
    # Every input problem surfaces here, before any change; the etcd method restores this
    # very plan (planning 10,000 pods costs about a CPU second: done once).
    first = plan_restore(snap, now=now, ages=ages, node_uids=node_uids)
    etcd = None
    if method in ("auto", "etcd"):
        try:
            if cluster.workdir is None:
                raise EtcdError("the cluster has no directory (not an embedded cluster)")
            etcd = Etcd(*endpoint_of(cluster.workdir))
            etcd.ping()
        except EtcdError as exc:
            if method == "etcd":
                raise
            report(f"restore: etcd not usable ({exc}); restoring through the API")
            etcd = None
    api = cluster.api_client
    result = RestoreResult(method="etcd" if etcd else "api", ages=ages, shift_s=0.0)
    timer = Timer(result.timings)
    snap_nodes = {n["metadata"]["name"] for n in snap.nodes}
    served = (
        served_usage(snap, assume_usage, restored=set(first.expected))
        if KUBERNETES_METRICS in cluster.metrics_sources
        else None
    )
    kubelet = None
    if served is not None:
        annotate(first.pods, served)
        kubelet = kubelet_endpoint(api, list(cluster.workers))
        if kubelet is None:
            raise RestoreError(
                "usage: no provider worker shows where kwok serves kubelet endpoints "
                "(status.addresses, daemonEndpoints); metrics-server could scrape no node"
            )
        drop_provider_baselines(api, [w for w in cluster.workers if w not in snap_nodes])
    for w in cluster.workers:  # the provider's own workers would be extra nodes
        if w not in snap_nodes:
            try:
                kubeapi.request(api, "DELETE", object_path("Node", None, w))
            except ApiException as exc:
                if exc.status != 404:
                    raise RestoreError(f"delete node {w}: {kubeapi.status_reason(exc)}") from None
    if etcd is not None:
        plan = restore_via_etcd(
            api, etcd, snap, first, node_uids, now, timeout, result, timer, report, kubelet
        )
    else:
        pacer = Pacer(workers)
        widen_pool(api, workers)
        extra = [runner_node()] if runner else []
        nodes = [*extra, *first.api.get("nodes", [])]
        if served is not None:  # kwok's node-initialize writes the addresses here
            for n in nodes:
                n["metadata"].setdefault("annotations", {}).update(
                    metrics_path_annotation(n["metadata"]["name"])
                )
        created = create_all(api, nodes, pacer=pacer)
        node_uids = {c["metadata"]["name"]: c["metadata"]["uid"] for c in created if c}
        wait_nodes_ready(api, [RUNNER_NODE] * runner + sorted(snap_nodes), timeout)
        timer.lap("nodes")
        plan = plan_restore(snap, ages=ages, node_uids=node_uids)
        if served is not None:
            annotate(plan.pods, served)
        result.shift_s = plan.shift_s
        write_object_tiers(api, plan, pacer, report)
        timer.lap("api_objects")
        restore_via_api(api, plan, result, timeout, report, pacer, owners_first)
        timer.lap("api_pods")
        result.notes.append(f"API writes: {pacer.stats.note(pacer.bound)}")
        result.pace.update(
            {
                "bound": pacer.bound,
                "writes": pacer.stats.writes,
                "throttled": pacer.stats.throttled,
                "waited_s": round(pacer.stats.waited_s, 2),
                "lowest_concurrency": pacer.stats.lowest_limit,
            }
        )
    result.expected = plan.expected
    daemonsets = {key(d) for d in plan.owners.get("DaemonSet", [])}
    if note := wait_daemonsets(api, daemonsets, timeout):
        plan.notes.append(note)
    timer.lap("daemonsets")
    result.verified, result.extra_pods = verify(api, plan, result.method)
    timer.lap("verify")
    if served is not None:
        image = cluster.toolchain.versions.workload_image
        result.usage = serve(
            api, served, image, RUNNER_NODE if runner else None, timeout, report, wait_usage
        )
        result.usage["note"] = served.note()
        timer.lap("usage_served")
    result.skipped, result.deviations = plan.skipped, plan.deviations
    result.notes = plan.notes + result.notes
    result.counts = {
        "nodes": len(snap_nodes),
        "pods": len(plan.pods),
        "skipped_pods": len(plan.skipped),
        **{f"{k}s": len(v) for k, v in plan.owners.items()},
        **{k: len(v) for k, v in plan.api.items() if k != "nodes"},
    }
    report(
        f"restored {len(plan.pods)} pods on {len(snap_nodes)} nodes via {result.method} in "
        f"{sum(result.timings.values()):.1f}s ({len(plan.skipped)} not restored)"
    )
    return result


def verify(api: Any, plan: RestorePlan, method: str) -> tuple[dict[str, Any], list[str]]:
    """Every restored pod as written: node, phase, owner UID, creationTimestamp, startTime.

    kwok's stages act on Pending pods only (and on Running pods of Jobs, never restored), so a
    Running pod's status must be exactly what was written: checked here, not assumed.
    """
    pods = {key(p): p for p in kubeapi.list_all(api, collection_path("Pod"))}
    mismatch: Counter[str] = Counter()
    examples: list[str] = []
    for k, want in plan.expected.items():
        got = pods.get(k)
        if got is None:
            mismatch["missing"] += 1
            examples.append(f"{k}: missing")
            continue
        st, meta = got.get("status") or {}, got["metadata"]
        ref = controller_of(got)
        checks = {
            "node": (got.get("spec") or {}).get("nodeName") == want["node"] or not want["node"],
            "owner": (ref or {}).get("uid") == want["ownerUid"],
            "phase": st.get("phase") == want["phase"] or want["phase"] == "Pending",
        }
        if method == "etcd":  # through the API, the server stamps its own
            checks["creationTimestamp"] = utc(meta.get("creationTimestamp")) == utc(
                want["creationTimestamp"]
            )
        if want["startTime"] and want["phase"] != "Pending":
            checks["startTime"] = utc(st.get("startTime")) == utc(want["startTime"])
        for name, ok in checks.items():
            if not ok:
                mismatch[name] += 1
                if len(examples) < 10:
                    examples.append(f"{k}: {name} differs")
    restored = set(plan.expected)
    extra = sorted(
        k
        for k, p in pods.items()
        if k not in restored
        and (ctrl := controller_of(p)) is not None
        and ctrl.get("kind") in OWNER_KINDS
    )
    return (
        {
            "pods_checked": len(plan.expected),
            "mismatches": dict(mismatch),
            "examples": examples,
            "ok": not mismatch,
            "kwok_kept_status": not (mismatch["startTime"] or mismatch["phase"]),
        },
        extra,
    )
