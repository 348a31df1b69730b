"""Owners before pods through the API: an admission hold on the workload controllers.

Why: through the API, an owner written before its pods makes pods of its own at once, so the
plain API restore writes pods as orphans and lets each owner adopt them. Adoption is one PATCH
per pod *by the controller*, through kube-controller-manager's client limit (`--kube-api-qps`,
default 20 a controller): 10,000 pods take at least 500 s whatever the restore's own pace.

With the hold, a ValidatingAdmissionPolicy refuses pod and ReplicaSet creates made by the
workload controllers (and by nobody else) in the restore's namespaces only. The restore then
writes Deployments, their ReplicaSets (naming them), StatefulSets and DaemonSets, then every
pod already naming its owner: no adoption, no controller write per pod. The hold is proven in
force before the first owner (a server-side dry-run create impersonating the ReplicaSet
controller must be refused) and proven lifted before the restore goes on; the controllers,
backed off meanwhile, are nudged by the restore's settle wait.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from kubernetes.client.rest import ApiException

from pytest_desched.kube import wait_for
from pytest_desched.replay import kubeapi
from pytest_desched.replay.objects import collection_path, object_path
from pytest_desched.replay.rebuild.writes import RestoreError

VAP = "ValidatingAdmissionPolicy"
VAP_BINDING = "ValidatingAdmissionPolicyBinding"
# kube-controller-manager's workload controllers (`--use-service-account-credentials`, as
# kubeadm and kind run it) and the controller manager's own user (without that flag): the
# hold refuses everyone but the restore's own user; these name the probe and the refusal.
HELD_USERS = (
    "system:serviceaccount:kube-system:replicaset-controller",
    "system:serviceaccount:kube-system:statefulset-controller",
    "system:serviceaccount:kube-system:daemon-set-controller",
    "system:serviceaccount:kube-system:deployment-controller",
    "system:kube-controller-manager",
)
PROBE_USER = HELD_USERS[0]
MARK = "held by a desched replay restore"


def hold_objects(
    name: str, namespaces: list[str], labels: dict[str, str], writer: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The policy and its binding: CREATE of pods and ReplicaSets in `namespaces` only, by
    anyone but `writer` (the restore's own user), denied."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": VAP,
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    },
                    {
                        "apiGroups": ["apps"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["replicasets"],
                    },
                ]
            },
            "matchConditions": [
                {
                    "name": "not-the-restore",
                    "expression": f"request.userInfo.username != {json.dumps(writer)}",
                }
            ],
            "validations": [
                {
                    "expression": "false",
                    "message": f"{MARK}: it writes this namespace's owners and pods itself",
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": VAP_BINDING,
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "In",
                            "values": sorted(namespaces),
                        }
                    ]
                }
            },
        },
    }
    return policy, binding


def refused_for_controller(api: Any, namespace: str) -> bool:
    """Whether a pod create by the ReplicaSet controller is refused by the hold now (a
    server-side dry run, impersonating the controller: nothing is written)."""
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "desched-hold-probe-"},
        "spec": {"containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10"}]},
    }
    try:
        kubeapi.request(
            api,
            "POST",
            collection_path("Pod", namespace),
            probe,
            query=[("dryRun", "All")],
            headers={"Impersonate-User": PROBE_USER},
        )
        return False
    except ApiException as exc:
        if MARK in str(exc.body or ""):
            return True
        raise


def whoami(api: Any) -> str:
    """The restore's own user name, as the API server authenticates it (SelfSubjectReview)."""
    review = kubeapi.request(
        api,
        "POST",
        collection_path("SelfSubjectReview"),
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    return str(((review.get("status") or {}).get("userInfo") or {}).get("username") or "")


def place(
    api: Any, name: str, namespaces: list[str], labels: dict[str, str], timeout: float
) -> None:
    """Create the hold and wait until every namespace refuses the controllers' pods.

    The hold refuses everyone but the restore's own user; a controller manager acting as
    that same user (no `--use-service-account-credentials`, an admin identity) is not held,
    and its pods then clash with the restore's (a named 409)."""
    writer = whoami(api)
    if not writer or writer in HELD_USERS:
        raise RestoreError(
            f"the admission hold needs the restore to write as a user of its own, not "
            f"{writer or 'an unnamed user'}; restore without owners_first"
        )
    policy, binding = hold_objects(name, namespaces, labels, writer)
    kubeapi.request(api, "POST", collection_path(VAP), policy)
    kubeapi.request(api, "POST", collection_path(VAP_BINDING), binding)
    wait_for(
        f"the admission hold {name} in force in {len(namespaces)} namespaces",
        lambda: [ns for ns in namespaces if not refused_for_controller(api, ns)],
        lambda pending: not pending,
        timeout,
        describe=lambda pending: f"not yet in {pending[:5]}",
        max_interval=0.2,
    )


def lift(api: Any, name: str, namespaces: list[str], timeout: float) -> None:
    """Delete the hold and wait until the controllers' pods are admitted again everywhere."""
    for path in (
        object_path(VAP_BINDING, None, name),
        object_path(VAP, None, name),
    ):
        try:
            kubeapi.request(api, "DELETE", path)
        except ApiException as exc:
            if exc.status != 404:
                raise
    wait_for(
        f"the admission hold {name} lifted in {len(namespaces)} namespaces",
        lambda: [ns for ns in namespaces if refused_for_controller(api, ns)],
        lambda pending: not pending,
        timeout,
        describe=lambda pending: f"still held in {pending[:5]}",
        max_interval=0.2,
    )


def hold_name(namespaces: list[str]) -> str:
    """One name per restore (cluster-scoped objects): from its namespaces."""
    digest = hashlib.sha256("\n".join(sorted(namespaces)).encode()).hexdigest()[:10]
    return f"desched-replay-hold-{digest}"


__all__ = [
    "HELD_USERS",
    "hold_name",
    "hold_objects",
    "lift",
    "place",
    "refused_for_controller",
]
