"""Writes through the API server for a restore, and the waits that prove them in force."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubernetes.client.rest import ApiException

from pytest_desched.errors import ProviderError
from pytest_desched.kube import WaitTimeout, wait_for
from pytest_desched.replay import kubeapi
from pytest_desched.replay.capture.format import (
    key,
)
from pytest_desched.replay.objects import collection_path, object_path, path_of
from pytest_desched.replay.rebuild.paced import Pacer, throttle_delay
from pytest_desched.replay.rebuild.plan import (
    BUILTIN_NAMESPACES,
    HOLD_QUOTA,
    RestorePlan,
)

if TYPE_CHECKING:
    pass

WORKERS = 8  # a restore into its own embedded cluster; a host's api restore brings a Pacer


class RestoreError(ProviderError):
    """The replay cluster refused part of the snapshot; names the object and the answer."""


def create(
    api: Any, path: str, body: dict[str, Any], tolerate_exists: bool = False
) -> dict[str, Any] | None:
    try:
        return kubeapi.request(api, "POST", path, body)
    except ApiException as exc:
        if tolerate_exists and exc.status == 409:
            return None
        if throttle_delay(exc) is not None:
            raise  # the server's "too many requests": the Pacer waits and retries it
        raise RestoreError(
            f"create {body.get('kind')} {key(body)}: {kubeapi.status_reason(exc)}"
        ) from None


def describe(body: dict[str, Any]) -> str:
    return f"create {body.get('kind')} {key(body)}"


def create_all(
    api: Any,
    bodies: list[dict[str, Any]],
    tolerate_exists: bool = False,
    pacer: Pacer | None = None,
) -> list[dict[str, Any] | None]:
    """Create every body concurrently, at the server's pace (429 / Retry-After honoured)."""
    pacer = pacer or Pacer(WORKERS)
    return pacer.map(lambda b: create(api, path_of(b), b, tolerate_exists), bodies, describe)


def create_namespaces(api: Any, plan: RestorePlan) -> None:
    """Create the snapshot's namespaces; the built-in ones only get its labels."""
    for ns_body in plan.api.get("namespaces", []):
        if ns_body["metadata"]["name"] not in BUILTIN_NAMESPACES:
            create(api, collection_path("Namespace"), ns_body)
    label_builtin_namespaces(api, plan)


def label_builtin_namespaces(api: Any, plan: RestorePlan) -> None:
    """The built-in namespaces (never created) get the snapshot's labels."""
    for ns_body in plan.api.get("namespaces", []):
        name = ns_body["metadata"]["name"]
        if name in BUILTIN_NAMESPACES and ns_body["metadata"].get("labels"):
            kubeapi.request(
                api,
                "PATCH",
                object_path("Namespace", None, name),
                {"metadata": {"labels": ns_body["metadata"]["labels"]}},
                content_type="application/merge-patch+json",
            )


def wait_hold(api: Any, namespaces: list[str], held: bool, timeout: float) -> None:
    """Until the API server's quota admission refuses (held) or admits (lifted) a pod.

    Proven with a server-side dry-run create per namespace, not assumed: the admission reads
    quotas from an informer, and for a namespace where that shows none it caches a live
    lookup for 30 s, so a hold created right after other objects of the namespace can be
    invisible to the controllers' creates for a while (seen: a ReplicaSet made extra pods,
    then deleted restored ones to converge).
    """
    probe_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "desched-replay-probe-"},
        "spec": {"containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10"}]},
    }

    def refused(ns: str) -> bool:
        try:
            kubeapi.request(
                api, "POST", collection_path("Pod", ns), probe_pod, query=[("dryRun", "All")]
            )
            return False
        except ApiException as exc:
            if exc.status == 403 and HOLD_QUOTA in str(exc.body or ""):
                return True
            raise RestoreError(f"dry-run pod in {ns}: {kubeapi.status_reason(exc)}") from None

    def probe() -> list[str]:
        return [ns for ns in namespaces if refused(ns) != held]

    wait_for(
        f"the replay hold {'in force' if held else 'lifted'} in {len(namespaces)} namespaces",
        probe,
        lambda pending: not pending,
        timeout,
        describe=lambda pending: f"not yet in {pending[:5]}",
        max_interval=0.2,
    )


def wait_nodes_ready(api: Any, names: list[str], timeout: float) -> None:
    want = set(names)

    def probe() -> list[str]:
        nodes = kubeapi.list_all(api, collection_path("Node"))
        ready = {
            n["metadata"]["name"]
            for n in nodes
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (n.get("status") or {}).get("conditions") or []
            )
        }
        return sorted(want - ready)

    wait_for(
        f"{len(want)} restored nodes Ready (kwok)",
        probe,
        lambda missing: not missing,
        timeout,
        describe=lambda missing: f"{len(missing)} not Ready, e.g. {missing[:5]}",
    )


# A DaemonSet that cannot place its pods (a create its admission refuses) keeps the restore
# this long at most; the restore then says so in its notes instead of failing the replay.
DAEMONSET_SETTLE_S = 60.0


def daemonsets_unsettled(daemonsets: list[dict[str, Any]]) -> list[str]:
    """Each DaemonSet whose controller has not yet scheduled a pod on every node it wants.

    The restore leaves DaemonSet statuses to their controller (replay/rebuild/settled.py), so a status
    at the object's generation is the controller's own count. Nodes the snapshot did not have
    (the runner node: it tolerates everything a DaemonSet may) or a skipped pod's node get a
    pod created after the hold lifts: waited for, so what the restore hands on is the state
    the controllers leave, not a moment in their work.
    """
    out = []
    for ds in daemonsets:
        meta, st = ds["metadata"], ds.get("status") or {}
        desired, current = st.get("desiredNumberScheduled"), st.get("currentNumberScheduled")
        if (st.get("observedGeneration") or 0) < (meta.get("generation") or 1) or (
            desired is None or desired != current
        ):
            out.append(f"{key(ds)} ({current}/{desired} scheduled)")
    return sorted(out)


def wait_daemonsets(api: Any, names: set[str], timeout: float) -> str:
    """Until every restored DaemonSet (`names`: namespace/name) is settled; "" when it is,
    else a note naming the ones left after `timeout` (never more than DAEMONSET_SETTLE_S)."""
    if not names:
        return ""

    def probe() -> list[str]:
        listed = kubeapi.list_all(api, collection_path("DaemonSet"))
        return daemonsets_unsettled([d for d in listed if key(d) in names])

    limit = min(timeout, DAEMONSET_SETTLE_S)
    try:
        wait_for(
            f"{len(names)} restored DaemonSets settled by their controller",
            probe,
            lambda left: not left,
            limit,
            describe=lambda left: f"{len(left)} not yet, e.g. {left[:5]}",
            max_interval=0.2,
        )
    except WaitTimeout as exc:
        return f"DaemonSets not settled by their controller after {limit:.0f}s: {exc}"
    return ""
