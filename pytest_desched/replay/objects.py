"""The replay's one Kubernetes object model: an object is its raw JSON dict, and a kind's
API version, resource name and scope come from the one table here.

Why raw dicts throughout (`kubeapi`): a snapshot and a restore move tens of thousands of
objects, and the client's generated models cost more than the requests and drop fields they
do not know. Where the model meets the API is a path: before this table, each stage spelled
its kinds' paths itself (the snapshot's reads, the restore's creates, the owners it waits
on, a timeline's changes, a host's kwok objects, an audit log's resources), six tables that
had to agree. Every stage asks this module instead.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Kind(NamedTuple):
    """A kind as the API serves it."""

    api_version: str  # "v1", "apps/v1"
    plural: str  # the resource: "deployments"
    namespaced: bool

    @property
    def group(self) -> str:
        """The API group ("" for the core group): how an audit log names it."""
        return self.api_version.split("/", 1)[0] if "/" in self.api_version else ""

    @property
    def prefix(self) -> str:
        """`/api/v1` for the core group, else `/apis/GROUP/VERSION`."""
        return "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"


KINDS: dict[str, Kind] = {
    "Namespace": Kind("v1", "namespaces", False),
    "Node": Kind("v1", "nodes", False),
    "PriorityClass": Kind("scheduling.k8s.io/v1", "priorityclasses", False),
    "StorageClass": Kind("storage.k8s.io/v1", "storageclasses", False),
    "PersistentVolume": Kind("v1", "persistentvolumes", False),
    "PersistentVolumeClaim": Kind("v1", "persistentvolumeclaims", True),
    "PodDisruptionBudget": Kind("policy/v1", "poddisruptionbudgets", True),
    "Deployment": Kind("apps/v1", "deployments", True),
    "ReplicaSet": Kind("apps/v1", "replicasets", True),
    "StatefulSet": Kind("apps/v1", "statefulsets", True),
    "DaemonSet": Kind("apps/v1", "daemonsets", True),
    "Job": Kind("batch/v1", "jobs", True),
    "CronJob": Kind("batch/v1", "cronjobs", True),
    "Pod": Kind("v1", "pods", True),
    # the replay's own machinery (a restore's quota, a host's kwok), never a snapshot's
    "ResourceQuota": Kind("v1", "resourcequotas", True),
    "ServiceAccount": Kind("v1", "serviceaccounts", True),
    "ConfigMap": Kind("v1", "configmaps", True),
    "ClusterRole": Kind("rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": Kind("rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    # what metrics.k8s.io serves: read by a snapshot (capture/usage.py), never restored
    "NodeMetrics": Kind("metrics.k8s.io/v1beta1", "nodes", False),
    "PodMetrics": Kind("metrics.k8s.io/v1beta1", "pods", True),
    # an owners-first restore's admission hold (rebuild/admission_hold.py) and who it exempts
    "ValidatingAdmissionPolicy": Kind(
        "admissionregistration.k8s.io/v1", "validatingadmissionpolicies", False
    ),
    "ValidatingAdmissionPolicyBinding": Kind(
        "admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings", False
    ),
    "SelfSubjectReview": Kind("authentication.k8s.io/v1", "selfsubjectreviews", False),
}


def collection_path(kind: str, namespace: str | None = None) -> str:
    """The API path of `kind`'s collection: in `namespace` when given, else across all."""
    k = KINDS[kind]
    return (
        f"{k.prefix}/namespaces/{namespace}/{k.plural}" if namespace else f"{k.prefix}/{k.plural}"
    )


def object_path(kind: str, namespace: str | None, name: str) -> str:
    """The API path of one object (`namespace` None or "" for a cluster-scoped one)."""
    return f"{collection_path(kind, namespace)}/{name}"


def path_of(body: dict[str, Any]) -> str:
    """The collection a body is created in: its kind's, in its namespace when it has one."""
    return collection_path(body["kind"], body["metadata"].get("namespace"))
